"""Layer graphs with operator shapes of five models, for accelerator co-design.

The co-design's cost model times a GEMM from its shape (utilisation of the systolic arrays
depends on how ``M``, ``N`` and ``K`` tile onto them), so these graphs keep the shapes that
flop counts lose. One node per layer (a transformer block, a ResNet bottleneck block, an LSTM
layer): a node holds the GEMMs it runs one after another and its vector operators.

* :func:`bert_base` — BERT-Base (12 blocks, hidden 768, 12 heads, feed-forward 3072), batch 8,
  sequence 128, with the pooler and a 2-label classifier (as :mod:`placement.zoo.factories`);
* :func:`gpt2` — GPT-2 small (12 blocks, hidden 768, 12 heads, vocabulary 50257, tied LM head),
  batch 8, sequence 1024;
* :func:`vit_base` — ViT-Base/16 (12 blocks, hidden 768, patch 16, image 224: 196 patches + the
  class token), batch 32, 1000 classes;
* :func:`resnet50` — ResNet-50 (He et al. 2016: stem, 3 + 4 + 6 + 3 bottleneck blocks, head),
  batch 32, 224×224; a convolution is the implicit GEMM ``M = batch·Hout·Wout``,
  ``N = Cout``, ``K = Cin·kh·kw``;
* :func:`gnmt` — a GNMT-like sequence-to-sequence LSTM (the MLPerf Training GNMT reference:
  4 encoder layers, the first bidirectional, 4 decoder layers with attention, hidden 1024,
  vocabulary 32320), batch 128, 50 tokens each side. An LSTM layer is one input-projection GEMM
  over the whole sequence (``M = batch·steps``, ``N = 4·hidden``) and one recurrent GEMM per time
  step (``M = batch``: the shape that leaves large arrays idle), repeated ``steps`` times.

Conventions: 16-bit data (2 bytes per element); a GEMM ``(M, N, K)`` is ``2·M·N·K`` FLOPs.
Vector operators are named by the kinds of :data:`placement.codesign.opcost.VECTOR_CYCLES`
with their element count; an embedding lookup is a ``copy`` of the gathered rows, a batch
normalisation a ``layernorm`` (mean, variance, normalise) over its elements.
Training adds one backward node per forward node (named ``<name>.grad``, edges mirrored plus
``v → v.grad``): a GEMM ``(M, N, K)`` becomes the input gradient ``(M, K, N)`` and the weight
gradient ``(K, N, M)`` (no weight gradient for a GEMM of two activations, e.g. attention
scores); a vector operator runs twice its elements, and the optimiser updates the layer's
parameters (``optimizer`` over their elements).
"""

from __future__ import annotations

from dataclasses import dataclass, field

BYTES = 2  # 16-bit data


@dataclass(frozen=True)
class Gemm:
    """``repeat`` back-to-back products of an ``M×K`` and a ``K×N`` matrix; ``weights``: the
    ``K×N`` operand is a parameter (it then has a weight gradient in training)."""

    m: int
    n: int
    k: int
    repeat: int = 1
    weights: bool = True

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.repeat


@dataclass(frozen=True)
class Vector:
    """A pointwise or reduction operator of kind ``op`` over ``elements`` elements."""

    op: str
    elements: int


@dataclass(frozen=True)
class Layer:
    """One node: its GEMMs and vector operators (run one after another), parameter and output
    bytes, and the ids of the nodes it reads."""

    name: str
    gemms: tuple[Gemm, ...]
    vectors: tuple[Vector, ...]
    param_bytes: int
    out_bytes: int
    inputs: tuple[int, ...] = ()
    backward: bool = False

    @property
    def flops(self) -> int:
        return sum(g.flops for g in self.gemms)


@dataclass(frozen=True)
class LayerGraph:
    """A model's layers in topological order (a node's id is its position)."""

    name: str
    layers: tuple[Layer, ...]
    batch: int
    training: bool = False
    notes: dict = field(default_factory=dict, compare=False)

    @property
    def flops(self) -> int:
        return sum(layer.flops for layer in self.layers)


class _Builder:
    def __init__(self) -> None:
        self.layers: list[Layer] = []

    def add(self, name: str, gemms: list[Gemm], vectors: list[Vector], params: int, out_elements: int,
            inputs: tuple[int, ...] | None = None) -> int:
        if inputs is None:
            inputs = (len(self.layers) - 1,) if self.layers else ()
        self.layers.append(Layer(name, tuple(gemms), tuple(vectors), params * BYTES, out_elements * BYTES, inputs))
        return len(self.layers) - 1


def _with_backward(name: str, layers: list[Layer], batch: int, training: bool) -> LayerGraph:
    """The graph of ``layers``, with the backward nodes when ``training``."""
    if not training:
        return LayerGraph(name, tuple(layers), batch, False)
    n = len(layers)
    users: list[list[int]] = [[] for _ in range(n)]
    for v, layer in enumerate(layers):
        for u in layer.inputs:
            users[u].append(v)
    backward = []
    for v in reversed(range(n)):  # grad(v) has id n + (n - 1 - v): reverse topological order
        layer = layers[v]
        gemms = [Gemm(g.m, g.k, g.n, g.repeat, False) for g in layer.gemms]
        gemms += [Gemm(g.k, g.n, g.m, g.repeat, False) for g in layer.gemms if g.weights]
        vectors = [Vector(x.op, 2 * x.elements) for x in layer.vectors]
        if layer.param_bytes:
            vectors.append(Vector("optimizer", layer.param_bytes // BYTES))
        inputs = (v,) + tuple(n + (n - 1 - w) for w in sorted(users[v]))
        in_bytes = sum(layers[u].out_bytes for u in layer.inputs) or layer.out_bytes
        backward.append(Layer(f"{layer.name}.grad", tuple(gemms), tuple(vectors), layer.param_bytes, in_bytes,
                              inputs, backward=True))
    return LayerGraph(name, tuple(layers) + tuple(backward), batch, True)


def _transformer_blocks(b: _Builder, prefix: str, blocks: int, tokens: int, batch: int, hidden: int,
                        heads: int, ffn: int, act: str) -> None:
    """``blocks`` pre- or post-norm transformer blocks (the order does not change the cost)."""
    rows, head = batch * tokens, hidden // heads
    for i in range(blocks):
        gemms = [Gemm(rows, 3 * hidden, hidden),                                   # Q, K, V
                 Gemm(tokens, tokens, head, batch * heads, weights=False),         # scores
                 Gemm(tokens, head, tokens, batch * heads, weights=False),         # context
                 Gemm(rows, hidden, hidden),                                       # output projection
                 Gemm(rows, ffn, hidden), Gemm(rows, hidden, ffn)]                 # feed-forward
        vectors = [Vector("softmax", batch * heads * tokens * tokens), Vector("add", 2 * rows * hidden),
                   Vector("layernorm", 2 * rows * hidden), Vector(act, rows * ffn)]
        params = 4 * hidden * hidden + 2 * hidden * ffn + 9 * hidden + ffn
        b.add(f"{prefix}{i}", gemms, vectors, params, rows * hidden)


def bert_base(training: bool = True, batch: int = 8, seq: int = 128) -> LayerGraph:
    """BERT-Base with a sequence-classification head (see the module docstring)."""
    hidden, vocab = 768, 30522
    b = _Builder()
    b.add("embeddings", [], [Vector("copy", 3 * batch * seq * hidden), Vector("add", 2 * batch * seq * hidden),
                             Vector("layernorm", batch * seq * hidden)],
          (vocab + 512 + 2) * hidden + 2 * hidden, batch * seq * hidden)
    _transformer_blocks(b, "layer", 12, seq, batch, hidden, 12, 3072, "gelu")
    b.add("head", [Gemm(batch, hidden, hidden), Gemm(batch, 2, hidden)], [Vector("tanh", batch * hidden)],
          hidden * hidden + hidden + 2 * hidden + 2, batch * 2)
    return _with_backward("bert-base", b.layers, batch, training)


def gpt2(training: bool = True, batch: int = 8, seq: int = 1024) -> LayerGraph:
    """GPT-2 small with its tied language-model head (see the module docstring)."""
    hidden, vocab = 768, 50257
    b = _Builder()
    b.add("embeddings", [], [Vector("copy", 2 * batch * seq * hidden), Vector("add", batch * seq * hidden)],
          (vocab + 1024) * hidden, batch * seq * hidden)
    _transformer_blocks(b, "h", 12, seq, batch, hidden, 12, 4 * hidden, "gelu")
    b.add("lm_head", [Gemm(batch * seq, vocab, hidden)],
          [Vector("layernorm", batch * seq * hidden), Vector("softmax", batch * seq * vocab)],
          2 * hidden, batch * seq * vocab)
    return _with_backward("gpt2", b.layers, batch, training)


def vit_base(training: bool = True, batch: int = 32) -> LayerGraph:
    """ViT-Base/16 at 224×224 (see the module docstring)."""
    hidden, patches = 768, (224 // 16) ** 2
    tokens = patches + 1
    b = _Builder()
    b.add("patch_embed", [Gemm(batch * patches, hidden, 3 * 16 * 16)], [Vector("add", batch * tokens * hidden)],
          3 * 16 * 16 * hidden + hidden + (tokens + 1) * hidden, batch * tokens * hidden)
    _transformer_blocks(b, "layer", 12, tokens, batch, hidden, 12, 3072, "gelu")
    b.add("head", [Gemm(batch, 1000, hidden)], [Vector("layernorm", batch * tokens * hidden)],
          1000 * hidden + 1000 + 2 * hidden, batch * 1000)
    return _with_backward("vit-base", b.layers, batch, training)


def resnet50(training: bool = True, batch: int = 32) -> LayerGraph:
    """ResNet-50 at 224×224, one node per bottleneck block (see the module docstring)."""
    b = _Builder()
    size = 112  # after the 7×7 stride-2 stem convolution
    b.add("stem", [Gemm(batch * size * size, 64, 3 * 7 * 7)],
          [Vector("layernorm", batch * size * size * 64), Vector("relu", batch * size * size * 64),
           Vector("pool", batch * size * size * 64)], 3 * 7 * 7 * 64 + 2 * 64, batch * 56 * 56 * 64)
    size, channels = 56, 64
    for stage, (blocks, width) in enumerate(((3, 64), (4, 128), (6, 256), (3, 512))):
        for i in range(blocks):
            stride = 2 if stage > 0 and i == 0 else 1
            out_size, out_channels = size // stride, 4 * width
            rows_in, rows_out = batch * size * size, batch * out_size * out_size
            gemms = [Gemm(rows_in, width, channels),                       # 1×1 reduce
                     Gemm(rows_out, width, width * 9),                     # 3×3 (stride here)
                     Gemm(rows_out, out_channels, width)]                  # 1×1 expand
            params = channels * width + 9 * width * width + width * out_channels + 2 * (2 * width + out_channels)
            elements = rows_in * width + rows_out * width + rows_out * out_channels
            if i == 0:  # projection shortcut
                gemms.append(Gemm(rows_out, out_channels, channels))
                params += channels * out_channels + 2 * out_channels
                elements += rows_out * out_channels
            vectors = [Vector("layernorm", elements), Vector("relu", elements), Vector("add", rows_out * out_channels)]
            b.add(f"layer{stage + 1}.{i}", gemms, vectors, params, rows_out * out_channels)
            size, channels = out_size, out_channels
    b.add("head", [Gemm(batch, 1000, 2048)], [Vector("pool", batch * 7 * 7 * 2048)], 2048 * 1000 + 1000,
          batch * 1000)
    return _with_backward("resnet50", b.layers, batch, training)


def _lstm(b: _Builder, name: str, batch: int, steps: int, inputs_width: int, hidden: int, directions: int,
          inputs: tuple[int, ...]) -> int:
    """One LSTM layer: the input projection over all steps, ``steps`` recurrent GEMMs, the gates."""
    gemms = [Gemm(batch * steps, 4 * hidden * directions, inputs_width),
             Gemm(batch, 4 * hidden, hidden, steps * directions)]
    cells = batch * steps * hidden * directions
    vectors = [Vector("sigmoid", 3 * cells), Vector("tanh", 2 * cells), Vector("mul", 3 * cells),
               Vector("add", 5 * cells)]
    params = directions * (4 * hidden * (inputs_width + hidden) + 8 * hidden)
    return b.add(name, gemms, vectors, params, cells, inputs)


def gnmt(training: bool = True, batch: int = 128, steps: int = 50) -> LayerGraph:
    """A GNMT-like LSTM translation model (see the module docstring)."""
    hidden, vocab = 1024, 32320
    b = _Builder()
    embed = b.add("encoder.embedding", [], [Vector("copy", batch * steps * hidden)], vocab * hidden,
                  batch * steps * hidden)
    x = _lstm(b, "encoder.0", batch, steps, hidden, hidden, 2, (embed,))        # bidirectional
    x = _lstm(b, "encoder.1", batch, steps, 2 * hidden, hidden, 1, (x,))
    for i in (2, 3):
        x = _lstm(b, f"encoder.{i}", batch, steps, hidden, hidden, 1, (x,))
    encoded = x
    dec_embed = b.add("decoder.embedding", [], [Vector("copy", batch * steps * hidden)], vocab * hidden,
                      batch * steps * hidden, ())
    y = _lstm(b, "decoder.0", batch, steps, hidden, hidden, 1, (dec_embed,))
    attention = b.add("attention",
                      [Gemm(batch * steps, hidden, hidden),                                   # query projection
                       Gemm(steps, steps, hidden, batch, weights=False),                      # scores
                       Gemm(steps, hidden, steps, batch, weights=False)],                     # context
                      [Vector("tanh", batch * steps * hidden), Vector("softmax", batch * steps * steps)],
                      hidden * hidden + 2 * hidden, batch * steps * hidden, (y, encoded))
    for i in (1, 2, 3):
        y = _lstm(b, f"decoder.{i}", batch, steps, 2 * hidden, hidden, 1, (y, attention))
    b.add("classifier", [Gemm(batch * steps, vocab, hidden)], [Vector("softmax", batch * steps * vocab)],
          vocab * hidden + vocab, batch * steps * vocab, (y,))
    return _with_backward("gnmt", b.layers, batch, training)


#: the generators by model name
MODELS = {"bert-base": bert_base, "gpt2": gpt2, "vit-base": vit_base, "resnet50": resnet50, "gnmt": gnmt}



def to_model_json(graph: LayerGraph, link_bytes_per_s: float) -> dict:
    """``graph`` as a co-design model file (:mod:`placement.codesign.workload`): an instance of the
    Tarnawski format whose nodes carry their ``operators``; edge costs are output bytes over
    ``link_bytes_per_s`` in ms (recorded in ``about.link_bytes_per_s``). Node memory (``size``):
    parameter bytes, plus in training the output a forward node keeps for its backward pass.
    Forward and backward node of one layer share a colour class."""
    n_forward = sum(1 for layer in graph.layers if not layer.backward)
    nodes, edges = [], []
    for v, layer in enumerate(graph.layers):
        forward = v if not layer.backward else 2 * n_forward - 1 - v
        kept = layer.out_bytes if graph.training and not layer.backward else 0
        operators = [{"kind": "gemm", "m": g.m, "n": g.n, "k": g.k, "batch": g.repeat} for g in layer.gemms]
        operators += [{"kind": "vector", "op": x.op, "elements": x.elements} for x in layer.vectors]
        nodes.append({"id": v, "name": layer.name, "supportedOnFpga": True, "cpuLatency": 0.0, "fpgaLatency": 0.0,
                      "isBackwardNode": layer.backward, "size": float(layer.param_bytes + kept),
                      "colorClass": forward, "flops": float(layer.flops), "operators": operators})
        for u in layer.inputs:
            size = graph.layers[u].out_bytes
            edges.append({"sourceId": u, "destId": v, "cost": 1e3 * size / link_bytes_per_s, "size": float(size)})
    about = {"model": graph.name, "generator": "placement.zoo.codesign_models", "training": graph.training,
             "batch": graph.batch, "forward_flops": float(sum(l.flops for l in graph.layers if not l.backward)),
             "link_bytes_per_s": link_bytes_per_s, "units": {"time": "ms", "size": "bytes"}}
    return {"about": about, "maxSizePerFPGA": float(16 * 2**30), "maxFPGAs": 8, "maxCPUs": 0,
            "nodes": nodes, "edges": edges}


def model_names() -> list[str]:
    """The names :func:`model_file` knows: ``<model>-training`` and ``<model>-inference`` for every model."""
    return [f"{name}-{kind}" for name in MODELS for kind in ("training", "inference")]


def model_file(name: str, link_bytes_per_s: float) -> dict:
    """The model file (:func:`to_model_json`) of a name of :func:`model_names`, e.g. ``gnmt-training``."""
    model, _, kind = name.rpartition("-")
    if model not in MODELS or kind not in ("training", "inference"):
        raise KeyError(name)
    return to_model_json(MODELS[model](training=kind == "training"), link_bytes_per_s)
