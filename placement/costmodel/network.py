"""Weighted layer chains for the HyPar/AccPar model: layers, tensor sizes, the network file format.

Model (DESIGN.md §4). A network is a chain of weighted layers ``l = 0 .. L-1``; layer ``l``
reads the feature map ``F_l`` and writes ``F_{l+1}``, the input of layer ``l+1``. The error
``E_l`` has the shape of ``F_l``. With batch size ``B``, ``A(T)`` the number of elements of
tensor ``T``:

* FC layer with ``C_in`` inputs and ``C_out`` outputs: ``A(F_l) = B·C_in``,
  ``A(F_{l+1}) = B·C_out``, ``A(W_l) = A(dW_l) = C_in·C_out``.
* CONV layer with input ``C_in×H_in×W_in``, output ``C_out×H_out×W_out`` and a square kernel of
  side ``K``: ``A(F_l) = B·C_in·H_in·W_in``, ``A(F_{l+1}) = B·C_out·H_out·W_out``,
  ``A(W_l) = C_in·C_out·K²``. The output shape is taken *after* any pooling that follows the
  layer: it is the next weighted layer's input.
  A kernel's side is at most three times the input's height and width (``K <= 3·min(H_in, W_in)``: it
  fits the input padded on each side by as much again, as a 3x3 kernel with padding 1 fits a 1x1 input);
  a larger one is refused, as a mistake: even with the input padded by half the kernel on each side
  ("same" padding), most of its weights would never meet an input element.

Biases, pooling and activation layers carry no weights of this model and are not layers here.

File format (``placement-network/1``), JSON::

    {"format": "placement-network/1", "name": "LeNet-c", "source": "where the shapes come from",
     "layers": [
       {"name": "conv1", "type": "conv", "in": [1, 28, 28], "out": [20, 12, 12], "kernel": 5,
        "note": "optional free text"},
       {"name": "ip1", "type": "fc", "in": 800, "out": 500}]}

``in``/``out`` of a conv layer are ``[channels, height, width]``; of an fc layer a positive
integer (or a one-element array). Every layer's input must hold as many elements per sample as
the previous layer's output (a conv layer feeding an fc layer is flattened). ``format``,
``source`` and ``note`` are optional; other fields are ignored, except one so like a field the format
reads (``kernal``, ``layer``) that it is refused as its misspelling.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from importlib.resources.abc import Traversable
from os import PathLike
from pathlib import Path
from typing import Any

from placement.errors import InvalidInstanceError, InvalidParameterError
from placement.jsonfile import ROUNDED_INTEGER, json_type_name, json_value_text, parse_file
from placement.misspelling import misspelling_message, misspelt_field
from placement.parameters import keywords_checked

FORMAT = "placement-network/1"
LAYER_KINDS = ("fc", "conv")
NETWORK_FIELDS = ("format", "name", "source", "layers")
LAYER_FIELDS = ("name", "type", "in", "out", "kernel", "note")
#: the most elements a layer's input or output (per sample) or its weights may hold
MAX_ELEMENTS = 2 ** 53


@dataclass(frozen=True)
class Layer:
    """One weighted layer; shapes are per sample, ``out_shape`` after pooling."""

    name: str
    kind: str                      # "fc" or "conv"
    in_shape: tuple[int, ...]      # (C,) for fc, (C, H, W) for conv
    out_shape: tuple[int, ...]
    kernel: int = 1                # side K of a square conv kernel; 1 for fc

    def __post_init__(self) -> None:
        # a shape given as a list is held as a tuple: a list never equals the tuple it copies, so a
        # conv layer whose input was a list read as taking another shape than the previous layer gives
        for label in ("in_shape", "out_shape"):
            if isinstance(getattr(self, label), list):
                object.__setattr__(self, label, tuple(getattr(self, label)))

    @property
    def in_channels(self) -> int:
        return self.in_shape[0] if self.kind == "conv" else math.prod(self.in_shape)

    @property
    def out_channels(self) -> int:
        return self.out_shape[0]

    @property
    def weight_elements(self) -> int:
        """``A(W_l) = A(dW_l)``: ``C_in·C_out`` (fc) or ``C_in·C_out·K²`` (conv)."""
        return self.in_channels * self.out_channels * self.kernel * self.kernel

    def input_elements(self, batch: int) -> int:
        """``A(F_l) = A(E_l)`` for batch size ``batch``."""
        return batch * math.prod(self.in_shape)

    def output_elements(self, batch: int) -> int:
        """``A(F_{l+1}) = A(E_{l+1})`` for batch size ``batch``."""
        return batch * math.prod(self.out_shape)


@dataclass(frozen=True)
class Network:
    """A validated chain of weighted layers."""

    name: str
    layers: tuple[Layer, ...]
    source: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.layers, (str, bytes, Mapping)) or not isinstance(self.layers, Iterable):
            raise InvalidInstanceError(f"the layers of a network must be a sequence of Layer objects, got "
                                       f"{type(self.layers).__name__}")
        object.__setattr__(self, "layers", tuple(self.layers))
        validate_network(self)

    @property
    def parameters(self) -> int:
        """``#params = Σ_l A(W_l)`` (weights only, no biases)."""
        return sum(layer.weight_elements for layer in self.layers)


def validate_network(network: Network) -> None:
    """Check positive shapes, known kinds, unique names and matching sizes between layers."""
    for label, value in (("name", network.name), ("source", network.source)):
        if not isinstance(value, str):
            raise InvalidInstanceError(f"the network's {label} must be a string, got {type(value).__name__}")
    if not network.layers:
        raise InvalidInstanceError("the network has no layers")
    names: set[str] = set()
    for k, layer in enumerate(network.layers):
        if not isinstance(layer, Layer):
            raise InvalidInstanceError(f"layer {k}: must be a Layer, got {type(layer).__name__}")
        if not isinstance(layer.name, str) or not layer.name.strip():
            raise InvalidInstanceError(f"layer {k}: its name must be a non-blank string, got {layer.name!r}")
        where = f"layer {k} ({layer.name})"
        if layer.name in names:
            raise InvalidInstanceError(f"{where}: duplicate layer name {layer.name!r}")
        names.add(layer.name)
        if layer.kind not in LAYER_KINDS:
            raise InvalidInstanceError(f"{where}: unknown type {layer.kind!r}; expected fc or conv")
        dims = 3 if layer.kind == "conv" else 1
        for label, shape in (("in", layer.in_shape), ("out", layer.out_shape)):
            if not isinstance(shape, tuple):
                raise InvalidInstanceError(f"{where}: '{label}' must be a tuple of positive integers, got "
                                           f"{type(shape).__name__}")
            if len(shape) != dims:
                article = "an" if layer.kind == "fc" else "a"
                raise InvalidInstanceError(f"{where}: '{label}' of {article} {layer.kind} layer must have {dims} "
                                           f"dimension{'s' if dims > 1 else ''}, got {len(shape)}")
            if any(isinstance(d, bool) or not isinstance(d, int) or d <= 0 for d in shape):
                raise InvalidInstanceError(f"{where}: '{label}' must hold positive integers, got {list(shape)}")
        if isinstance(layer.kernel, bool) or not isinstance(layer.kernel, int) or layer.kernel <= 0:
            raise InvalidInstanceError(f"{where}: 'kernel' must be a positive integer, got {layer.kernel!r}")
        for what, elements in (("its input holds", math.prod(layer.in_shape)),
                               ("its output holds", math.prod(layer.out_shape)),
                               ("its weights hold", layer.weight_elements)):
            if elements > MAX_ELEMENTS:
                raise InvalidInstanceError(f"{where}: {what} {Decimal(elements):.4g} elements, more than the "
                                           "2^53 a layer may hold")
        if layer.kind == "fc" and layer.kernel != 1:
            raise InvalidInstanceError(f"{where}: an fc layer has no kernel (got {layer.kernel})")
        if layer.kind == "conv" and layer.kernel > 3 * min(layer.in_shape[1:]):
            padded = "x".join(str(3 * d) for d in layer.in_shape[1:])
            raise InvalidInstanceError(f"{where}: field 'kernel' is {layer.kernel}, larger than its input (field 'in': "
                                       f"{'x'.join(map(str, layer.in_shape[1:]))}) padded on each side by as much "
                                       f"again ({padded}); a kernel's side may be at most three times the input's "
                                       "height and width")
        if k > 0:
            prev = network.layers[k - 1]
            given, taken = math.prod(prev.out_shape), math.prod(layer.in_shape)
            if given != taken or (layer.kind == "conv" and prev.kind == "conv"
                                  and prev.out_shape != layer.in_shape):
                raise InvalidInstanceError(f"{where}: takes {_shape_text(layer.in_shape)} per sample but layer "
                                    f"{k - 1} ({prev.name}) gives {_shape_text(prev.out_shape)}")


def _shape_text(shape: tuple[int, ...]) -> str:
    text = "x".join(str(d) for d in shape)
    return text if len(shape) == 1 else f"{text} ({math.prod(shape)} elements)"


# ----------------------------------------------------------------------------------------
# the file format
# ----------------------------------------------------------------------------------------

def _whole(value: Any) -> Any:
    """``value`` as an ``int`` where it is a float with no fraction below 2^53 (``3.0``, as instance files
    read their counts and ids); else as it is, for the checks to refuse."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    return value


def _not_integer(value: Any) -> str:
    """What a refused integer field holds, in words: the number for a float (``2.5``), else its JSON type."""
    return json_value_text(value) if isinstance(value, float) else json_type_name(value)


def _check_not_rounded(value: Any, where: str, label: str) -> None:
    """Refuse a whole float of 2^53 or more in field ``label`` as one that may have been rounded from what was
    written (``1e20`` is a whole number: "must be a positive integer" named the wrong fault)."""
    if isinstance(value, float) and value.is_integer():
        raise InvalidInstanceError(f"{where}: field {label!r} reads {value:.17g}, {ROUNDED_INTEGER}")


def _shape(value: Any, where: str, label: str) -> tuple[int, ...]:
    items = [_whole(d) for d in (value if isinstance(value, list) else [value])]
    for d in items:
        if isinstance(d, bool) or not isinstance(d, int):
            _check_not_rounded(d, where, label)
            raise InvalidInstanceError(f"{where}: field {label!r} must be a positive integer or an array of them, "
                                f"got {_not_integer(d)}")
    return tuple(items)


def _other_document(data: Mapping[str, Any]) -> str | None:
    """What a document without ``layers`` is instead of a network, where its fields say: an instance or a model
    file (its ``nodes``), a plan or another document of this package, or one of the co-design's;
    ``None`` otherwise (a network file that lacks its layers is told so)."""
    from placement.loading import document_kind, named_document

    if data.get("format") == FORMAT:
        return None
    if "layers" in data:   # DeepSpeed parts name their layers too
        return named_document(data)
    return document_kind(data)


def parse_network(data: Any, name: str = "") -> Network:
    """Build a validated :class:`Network` from the decoded JSON of a network file."""
    if not isinstance(data, dict):
        raise InvalidInstanceError(f"a network must be a JSON object, got {json_type_name(data)}")
    other = _other_document(data)
    if other:
        raise InvalidInstanceError(f"the document is {other}, not a network, which lists its 'layers'")
    misspelt = misspelt_field([data], NETWORK_FIELDS)
    if misspelt is not None:
        raise InvalidInstanceError(misspelling_message(*misspelt[1:]))
    fmt = data.get("format", FORMAT)
    if fmt != FORMAT:
        raise InvalidInstanceError(f"unknown network format {json_value_text(fmt)}; expected {FORMAT!r}")
    label = data.get("name", name)
    if not isinstance(label, str):
        raise InvalidInstanceError(f"field 'name' must be a string, got {json_type_name(label)}")
    if not label.strip():      # an empty name labels nothing: the file's name stands in, as for a missing one
        label = name
    source = data.get("source", "")
    if not isinstance(source, str):
        raise InvalidInstanceError(f"field 'source' must be a string, got {json_type_name(source)}")
    if "layers" not in data:   # a null one is there, and named as what it is, as a layer's null fields are
        raise InvalidInstanceError("missing field 'layers'")
    raw = data["layers"]
    if not isinstance(raw, list):
        raise InvalidInstanceError(f"field 'layers' must be an array, got {json_type_name(raw)}")
    layers: list[Layer] = []
    for k, entry in enumerate(raw):
        where = f"layer {k}"
        if not isinstance(entry, dict):
            raise InvalidInstanceError(f"{where}: must be an object, got {json_type_name(entry)}")
        misspelt = misspelt_field([entry], LAYER_FIELDS)
        if misspelt is not None:
            raise InvalidInstanceError(f"{where}: {misspelling_message(*misspelt[1:])}")
        for key in ("name", "type", "in", "out"):
            if key not in entry:
                unread = [field for field in entry if field not in LAYER_FIELDS]
                held = (f" (it has {', '.join(map(repr, unread))}, which a layer does not read; a layer's fields are "
                        f"{', '.join(LAYER_FIELDS)})" if unread else "")
                raise InvalidInstanceError(f"{where}: missing field {key!r}{held}")
        layer_name = entry["name"]
        if not isinstance(layer_name, str) or not layer_name.strip():
            raise InvalidInstanceError(f"{where}: field 'name' must be a non-blank string")
        where = f"layer {k} ({layer_name})"
        kind = entry["type"]
        if not isinstance(kind, str) or kind not in LAYER_KINDS:
            raise InvalidInstanceError(f"{where}: unknown type {json_value_text(kind)}; expected fc or conv")
        if kind == "conv" and "kernel" not in entry:
            raise InvalidInstanceError(f"{where}: missing field 'kernel'")
        kernel = _whole(entry.get("kernel", 1))
        if isinstance(kernel, bool) or not isinstance(kernel, int):
            _check_not_rounded(kernel, where, "kernel")
            raise InvalidInstanceError(f"{where}: field 'kernel' must be a positive integer, got "
                                       f"{_not_integer(kernel)}")
        layers.append(Layer(layer_name, kind, _shape(entry["in"], where, "in"), _shape(entry["out"], where, "out"),
                            kernel))
    return Network(label, tuple(layers), source)


def read_network(path: str | Path) -> Network:
    """Read and validate a network file; errors name the file."""
    return parse_file(path, parse_network)


def bundled_networks() -> tuple[str, ...]:
    """Names of the networks shipped with the package (file stems, sorted)."""
    folder = resources.files("placement.costmodel") / "networks"
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json")))


@keywords_checked
def load_network(name_or_path: str | Path) -> Network:
    """A network by file path (a pipe's or ``/dev/stdin``'s too), or by bundled name (case-insensitive, e.g.
    ``vgg-a``)."""
    if not isinstance(name_or_path, (str, PathLike)):
        raise InvalidParameterError("name_or_path", f"must be a network name or file path, not "
                                                    f"{type(name_or_path).__name__}")
    path = Path(name_or_path)
    if str(name_or_path) and path.is_dir():   # Path("") is the current directory: an empty name is no path
        raise InvalidInstanceError(f"{path}: is a directory, not a network file")
    if str(name_or_path) and path.exists():   # a pipe (/dev/stdin) too: read as a stream, to the size limit
        return read_network(path)
    key = str(name_or_path).lower()
    if key in bundled_networks():
        with resources.as_file(_bundled_resource(key)) as file:
            return read_network(file)
    raise InvalidInstanceError(f"unknown network {str(name_or_path)!r}: no such file, and no bundled network of that "
                        f"name (bundled: {', '.join(bundled_networks())})")


def network_file(name_or_path: str | Path) -> Path | None:
    """The file :func:`load_network` reads for ``name_or_path`` where it is one on disk (a path, or a bundled
    network's file in the installed package); ``None`` where there is none."""
    path = Path(name_or_path)
    if str(name_or_path) and path.exists():
        return path
    key = str(name_or_path).lower()
    if key in bundled_networks():
        resource = _bundled_resource(key)
        return Path(str(resource)) if isinstance(resource, Path) else None
    return None


def _bundled_resource(key: str) -> Traversable:
    return resources.files("placement.costmodel") / "networks" / f"{key}.json"
