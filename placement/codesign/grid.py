"""The design space: a grid of values per template parameter, and the designs it spans.

A grid file is a JSON object with one array per parameter of :data:`.template.PARAMETERS`
(positive integers up to 2^20, a whole number written as a float, ``64.0``, read as that integer;
``buffer_mb`` numbers from 2^-20, a byte, to 2^20), e.g. the bundled ``instances/grids/tiny.json``::

    {"tensor_cores": [1, 2], "array_width": [64, 128], "array_depth": [128],
     "vector_cores": [1, 8], "vector_lanes": [128], "buffer_mb": [8, 32]}

Its designs are every combination of one value per parameter (the Cartesian product), in
the order of the arrays (the last parameter varying fastest). :data:`DEFAULT_GRID` is a
WHAM-scale space of 10,000 designs, from 1 to 16 arrays of 16 to 256 MACs a side, 1 to 8
vector cores of 32 to 256 lanes and 8 to 128 MB of buffer.
"""

from __future__ import annotations

import itertools
import math
import numbers
import os
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Mapping

from placement.codesign.template import PARAMETERS, Design
from placement.errors import InvalidInstanceError, InvalidParameterError, LimitExceededError
from placement.loading import design_document, other_document
from placement.jsonfile import file_stem, json_type_name, json_value_text, load_json

#: The default design space (module docstring).
DEFAULT_GRID: dict[str, tuple] = {
    "tensor_cores": (1, 2, 4, 8, 16),
    "array_width": (16, 32, 64, 128, 256),
    "array_depth": (16, 32, 64, 128, 256),
    "vector_cores": (1, 2, 4, 8),
    "vector_lanes": (32, 64, 128, 256),
    "buffer_mb": (8, 16, 32, 64, 128),
}
#: The most designs a grid may span.
MAX_GRID_DESIGNS = 1_000_000

#: The smallest buffer a design may have (MB): a byte. Far smaller ones (1e-300 MB) made times past the float
#: range that refused the whole search.
SMALLEST_BUFFER_MB = 2.0 ** -20


@dataclass(frozen=True)
class Grid:
    """Values per parameter (:data:`.template.PARAMETERS` order) and a name."""

    values: tuple[tuple, ...]
    name: str = "grid"

    def __post_init__(self) -> None:
        # made in code or read from a file, a grid holds what a grid file may hold (parse_grid): a design of
        # zero arrays or of a negative buffer is no chip of the template, and a repeated value repeats designs
        if isinstance(self.values, (str, bytes, Mapping)) or not isinstance(self.values, (tuple, list)) \
                or len(self.values) != len(PARAMETERS):
            raise InvalidInstanceError(f"grid: its values must be {len(PARAMETERS)} sequences, one for each of "
                                       f"{', '.join(PARAMETERS)}")
        object.__setattr__(self, "values", tuple(_values(key, raw) for key, raw in zip(PARAMETERS, self.values)))
        if self.size > MAX_GRID_DESIGNS:
            raise LimitExceededError(f"the grid spans {self.size:,} designs, more than {MAX_GRID_DESIGNS:,}", "grid")

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.values)

    def designs(self) -> list[Design]:
        """Every design of the grid (module docstring order)."""
        return [Design(*combo) for combo in itertools.product(*self.values)]

    def as_dict(self) -> dict:
        return {name: list(v) for name, v in zip(PARAMETERS, self.values)}


def parse_grid(data: Any, name: str = "grid") -> Grid:
    """A :class:`Grid` from a decoded grid file; :class:`InvalidInstanceError` naming the first problem."""
    if not isinstance(data, Mapping):
        raise InvalidInstanceError(f"a grid must be a JSON object, got {json_type_name(data)}")
    other = "an instance or a model file" if "nodes" in data else other_document(data)
    if not other and not set(PARAMETERS) & set(data):   # a sweep specification or a co-design result
        other = design_document(data)
    if other:
        raise InvalidInstanceError(f"the document is {other}, not a grid, which has an array of values for each "
                                   f"of {', '.join(PARAMETERS)}")
    unknown = sorted(set(data) - set(PARAMETERS) - {"name"})
    if unknown:
        raise InvalidInstanceError(f"grid: unknown field {unknown[0]!r} (the fields are name, {', '.join(PARAMETERS)})")
    for key in PARAMETERS:
        if key not in data:
            raise InvalidInstanceError(f"grid: missing field {key!r}")
        # a decoded file holds lists; a dict made in code may hold tuples, as DEFAULT_GRID does
        if not isinstance(data[key], (list, tuple)):
            raise InvalidInstanceError(f"grid: field {key!r} must be a non-empty array")
    label = data.get("name", name)
    if "name" in data and (not isinstance(label, str) or not label.strip()):
        raise InvalidInstanceError(f"grid: field 'name' must be a non-blank string, got {json_value_text(label)}")
    return Grid(tuple(data[key] for key in PARAMETERS), label)


def _values(key: str, raw: Any) -> tuple:
    """The values of parameter ``key`` (a grid file's array, or a sequence made in code), checked and typed;
    :class:`InvalidInstanceError` naming the first problem."""
    if not isinstance(raw, (list, tuple)) or not raw:
        raise InvalidInstanceError(f"grid: field {key!r} must be a non-empty array")
    for x in raw:
        real = isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)
        # a whole number written as a float (64.0) reads as that integer, as in instance and network files
        whole = real and (isinstance(x, numbers.Integral) or float(x).is_integer())
        if not (whole if key != "buffer_mb" else real) or x < (1 if key != "buffer_mb" else SMALLEST_BUFFER_MB) \
                or x > 2**20:
            what = "positive integers" if key != "buffer_mb" else "numbers from 2^-20 (a byte)"
            raise InvalidInstanceError(f"grid: field {key!r} must hold {what} up to 2^20, got {json_value_text(x)}")
    if len(set(raw)) != len(raw):
        raise InvalidInstanceError(f"grid: field {key!r} repeats a value")
    return tuple(float(x) if key == "buffer_mb" else int(x) for x in raw)


def load_grid(source: str | Path | Mapping | Grid | None = None) -> Grid:
    """The grid held by ``source``: a grid file's path, a decoded grid (dict), a :class:`Grid`, or
    ``None`` for :data:`DEFAULT_GRID`."""
    if source is None:
        return parse_grid({k: list(v) for k, v in DEFAULT_GRID.items()}, "default")
    if isinstance(source, Grid):
        return source
    if isinstance(source, Mapping):
        return parse_grid(source)
    if not isinstance(source, (str, PathLike)):
        raise InvalidParameterError("grid", f"must be a grid file path, a dict or None, not {type(source).__name__}")
    source = os.fspath(source)
    data = load_json(source, InvalidInstanceError)
    try:
        return parse_grid(data, file_stem(source))
    except InvalidInstanceError as exc:
        raise InvalidInstanceError(f"{source}: {exc}") from None
