"""Operator-level graph of a BERT-style encoder, with roofline costs, in the Tarnawski format.

Graph
-----
For a :class:`TransformerConfig` (B = batch, S = sequence length, H = hidden size,
A = attention heads, F = feed-forward size, V = vocabulary, L = layers), the forward
graph has ``14·L + 4`` operator nodes, in topological order:

* ``embeddings`` (word + position + token-type lookup, summed) and ``embeddings.layernorm``;
* per layer ``l`` (names prefixed ``layer{l}.``), 14 nodes and these edges, with ``x`` the
  layer's input (the previous layernorm)::

      x -> attention.query, attention.key, attention.value, attention.residual
      attention.query, attention.key -> attention.scores -> attention.softmax
      attention.softmax, attention.value -> attention.context -> attention.output
      attention.output -> attention.residual -> attention.layernorm
      attention.layernorm -> ffn.up -> ffn.gelu -> ffn.down
      attention.layernorm, ffn.down -> ffn.residual -> ffn.layernorm   (the next layer's x)

  Q, K and V are three parallel branches; ``scores`` is Q·Kᵀ/√(H/A) over all heads.
* ``pooler`` (dense + tanh on the first token) and ``classifier`` (dense to ``num_labels``).

FLOPs (one multiply-add = 2 FLOPs; bias additions are not counted)
-------------------------------------------------------------------
==========================  ===================================  ================
node                        FLOPs                                output elements
==========================  ===================================  ================
embeddings                  2·B·S·H (two additions)              B·S·H
query / key / value         2·B·S·H·H each                       B·S·H
scores                      2·B·S·S·H + B·A·S·S (scale)          B·A·S·S
softmax                     5·B·A·S·S                            B·A·S·S
context                     2·B·S·S·H                            B·S·H
output                      2·B·S·H·H                            B·S·H
residual (add)              B·S·H                                B·S·H
layernorm                   5·B·S·H                              B·S·H
ffn.up / ffn.down           2·B·S·H·F each                       B·S·F / B·S·H
ffn.gelu                    8·B·S·F                              B·S·F
pooler                      2·B·H·H + 4·B·H (tanh)               B·H
classifier                  2·B·H·num_labels                     B·num_labels
==========================  ===================================  ================

The per-element constants of the pointwise operators (add 1, layernorm 5, softmax 5,
GELU 8, tanh 4) are conventions; these operators are memory-bound on every device
below, so the constants do not change any time.

Parameters: linear layers ``in·out + out`` (weights and bias), layernorms ``2·H``,
embeddings ``(V + max_position + type_vocab)·H``. With the default configuration the
parameter count is 109,482,240 (HuggingFace ``BertModel``) plus 1,538 in the classifier.
Activations and parameters are fp16: ``bytes_per_element`` = 2.

Bytes moved by a node = bytes of its inputs (the outputs of its predecessors; the pooler
reads only the first token, the embedding lookup reads 3·B·S·H gathered rows and no
predecessor) + bytes of its parameters + bytes of its output.

Training
--------
``training=True`` adds one backward node ``grad(v)`` per forward node ``v``
(named ``<name>.grad``). Conventions:

* ``grad(v)`` costs 2× the FLOPs of ``v`` and moves 2× its bytes (gradients with respect
  to the inputs and to the weights, each about the size of the forward computation), so
  its roofline time is exactly twice that of ``v``;
* edges are mirrored: for every forward edge ``u → v`` there is ``grad(v) → grad(u)``,
  carrying ``∂loss/∂out(u)`` (the size of ``u``'s output); plus ``v → grad(v)``
  carrying the activation ``v`` saves for its backward pass (``v``'s output);
* ``grad(v)`` has the colour class of ``v`` (both on one device).

Memory per node (``size`` in the instance): inference, the node's parameter bytes;
training, forward node = parameter bytes + its output activation (kept for the
backward pass, one micro-batch), backward node = parameter bytes (the weight
gradient). Optimiser state is not modelled.

Costs (roofline)
----------------
Time of a node on a device = ``max(FLOPs / peak_flops, bytes_moved / mem_bandwidth)``,
in milliseconds. Default figures are vendor datasheet peaks:

* accelerator :data:`A100_SXM4_40GB`: NVIDIA A100 SXM4 40 GB, 312 TFLOP/s fp16 Tensor
  Core (dense), 1,555 GB/s HBM2 bandwidth;
* CPU :data:`EPYC_7763`: one AMD EPYC 7763 socket, 64 cores × 2.45 GHz base clock ×
  32 fp32 FLOPs/cycle (two 256-bit FMA pipes) = 5.0176 TFLOP/s, 8 channels of DDR4-3200 =
  204.8 GB/s. The CPU computes fp16 tensors in fp32; one ``maxCPUs`` unit is a whole socket.

Transfer cost ``c(u)`` = bytes of ``u``'s output / link bandwidth, with the link
:data:`PCIE4_X16_BYTES_PER_S` (PCIe 4.0 x16: 16 GT/s × 16 lanes × 128/130 encoding / 8 =
31.5 GB/s per direction). For a backward node the output is the gradients of all its
forward node's inputs (the sum of their sizes).

Units match the published Tarnawski files: times in milliseconds, sizes in bytes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from placement.errors import InvalidParameterError

GiB = 2**30

# Per-element FLOP conventions of the pointwise operators (see the module docstring).
ADD_FLOPS = 1
LAYERNORM_FLOPS = 5
SOFTMAX_FLOPS = 5
GELU_FLOPS = 8
TANH_FLOPS = 4

#: Backward node cost relative to its forward node (FLOPs and bytes moved).
BACKWARD_FACTOR = 2


@dataclass(frozen=True)
class DeviceFigures:
    """Roofline figures of one device: peak FLOP/s and memory bandwidth in bytes/s."""

    name: str
    peak_flops: float
    mem_bandwidth: float


#: NVIDIA A100 SXM4 40 GB datasheet: 312 TFLOP/s fp16 Tensor Core (dense), 1,555 GB/s.
A100_SXM4_40GB = DeviceFigures("NVIDIA A100 SXM4 40GB", 312e12, 1.555e12)
#: AMD EPYC 7763, one socket: 64 cores × 2.45 GHz × 32 FLOPs/cycle, 8 × DDR4-3200 = 204.8 GB/s.
EPYC_7763 = DeviceFigures("AMD EPYC 7763 (one socket)", 64 * 2.45e9 * 32, 204.8e9)
#: PCIe 4.0 x16, one direction: 16 GT/s × 16 lanes × 128/130 / 8 bits = 31.5 GB/s.
PCIE4_X16_BYTES_PER_S = 16e9 * 16 * 128 / 130 / 8


def roofline_ms(flops: float, bytes_moved: float, device: DeviceFigures) -> float:
    """Roofline time in milliseconds: ``max(flops / peak, bytes / bandwidth)``."""
    return 1e3 * max(flops / device.peak_flops, bytes_moved / device.mem_bandwidth)


@dataclass(frozen=True)
class TransformerConfig:
    """Shape of a BERT-style encoder; the defaults are BERT-Base at batch 8, sequence 128."""

    layers: int = 12
    hidden: int = 768
    heads: int = 12
    ffn: int = 3072
    seq: int = 128
    batch: int = 8
    vocab: int = 30522
    max_position: int = 512
    type_vocab: int = 2
    num_labels: int = 2
    bytes_per_element: int = 2

    def __post_init__(self) -> None:
        for key, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameterError(key, f"must be a positive integer, not {value!r}")
        if self.hidden % self.heads:
            raise InvalidParameterError("hidden", f"must be a multiple of heads ({self.heads}), not {self.hidden}")
        if self.seq > self.max_position:
            raise InvalidParameterError("seq", f"must be at most max_position ({self.max_position}), not {self.seq}")


@dataclass(frozen=True)
class Op:
    """One operator node: FLOPs, bytes of its output, of its parameters, and bytes it moves."""

    id: int
    name: str
    kind: str
    flops: float
    out_bytes: float
    param_bytes: float
    moved_bytes: float
    backward: bool = False
    forward_id: int | None = None  # for a backward node: its forward mate


@dataclass(frozen=True)
class OperatorGraph:
    """Operators (ids = positions, topological order) and edges ``(src, dst, bytes)``."""

    ops: tuple[Op, ...]
    edges: tuple[tuple[int, int, float], ...]
    config: TransformerConfig
    training: bool
    name: str = ""
    predecessors: tuple[tuple[int, ...], ...] = field(default=(), repr=False, compare=False)

    @property
    def total_flops(self) -> float:
        return float(sum(op.flops for op in self.ops))

    @property
    def param_count(self) -> int:
        e = self.config.bytes_per_element
        return int(sum(op.param_bytes for op in self.ops if not op.backward)) // e


def _forward_ops(c: TransformerConfig) -> tuple[list[Op], list[tuple[int, int]]]:
    B, S, H, A, F, e = c.batch, c.seq, c.hidden, c.heads, c.ffn, c.bytes_per_element
    ops: list[Op] = []
    edges: list[tuple[int, int]] = []

    def add(name: str, kind: str, flops: int, out_elems: int, params: int = 0, inputs: tuple[int, ...] = (),
            read_bytes: int | None = None) -> int:
        """Append a node. It reads its inputs and parameters (``read_bytes`` overrides that
        total) and writes its output."""
        i = len(ops)
        if read_bytes is None:
            read_bytes = int(sum(ops[j].out_bytes for j in inputs)) + params * e
        ops.append(Op(i, name, kind, float(flops), float(out_elems * e), float(params * e),
                      float(read_bytes + out_elems * e)))
        edges.extend((j, i) for j in inputs)
        return i

    bsh = B * S * H
    # The lookup reads 3·B·S·H gathered rows, not the whole tables (which count as memory).
    tables = (c.vocab + c.max_position + c.type_vocab) * H
    emb = add("embeddings", "embedding", 2 * bsh, bsh, tables, (), read_bytes=3 * bsh * e)
    x = add("embeddings.layernorm", "layernorm", LAYERNORM_FLOPS * bsh, bsh, 2 * H, (emb,))

    linear_hh = H * H + H
    scores_elems = B * A * S * S
    for layer in range(c.layers):
        p = f"layer{layer}."
        q = add(p + "attention.query", "linear", 2 * bsh * H, bsh, linear_hh, (x,))
        k = add(p + "attention.key", "linear", 2 * bsh * H, bsh, linear_hh, (x,))
        v = add(p + "attention.value", "linear", 2 * bsh * H, bsh, linear_hh, (x,))
        s = add(p + "attention.scores", "matmul", 2 * B * S * S * H + scores_elems, scores_elems, 0, (q, k))
        sm = add(p + "attention.softmax", "softmax", SOFTMAX_FLOPS * scores_elems, scores_elems, 0, (s,))
        ctx = add(p + "attention.context", "matmul", 2 * B * S * S * H, bsh, 0, (sm, v))
        out = add(p + "attention.output", "linear", 2 * bsh * H, bsh, linear_hh, (ctx,))
        r1 = add(p + "attention.residual", "add", ADD_FLOPS * bsh, bsh, 0, (out, x))
        ln1 = add(p + "attention.layernorm", "layernorm", LAYERNORM_FLOPS * bsh, bsh, 2 * H, (r1,))
        up = add(p + "ffn.up", "linear", 2 * bsh * F, B * S * F, H * F + F, (ln1,))
        act = add(p + "ffn.gelu", "gelu", GELU_FLOPS * B * S * F, B * S * F, 0, (up,))
        down = add(p + "ffn.down", "linear", 2 * bsh * F, bsh, F * H + H, (act,))
        r2 = add(p + "ffn.residual", "add", ADD_FLOPS * bsh, bsh, 0, (down, ln1))
        x = add(p + "ffn.layernorm", "layernorm", LAYERNORM_FLOPS * bsh, bsh, 2 * H, (r2,))

    pool = add("pooler", "linear", 2 * B * H * H + TANH_FLOPS * B * H, B * H, linear_hh, (x,),
               read_bytes=(B * H + linear_hh) * e)  # the first token only
    add("classifier", "linear", 2 * B * H * c.num_labels, B * c.num_labels, H * c.num_labels + c.num_labels,
        (pool,))
    return ops, edges


def bert_graph(config: TransformerConfig | None = None, training: bool = False) -> OperatorGraph:
    """The operator graph of a BERT-style encoder; see the module docstring for the conventions."""
    c = config or TransformerConfig()
    ops, fwd_edges = _forward_ops(c)
    edges: list[tuple[int, int, float]] = [(u, v, ops[u].out_bytes) for u, v in fwd_edges]
    preds: list[list[int]] = [[] for _ in ops]
    for u, v in fwd_edges:
        preds[v].append(u)
    if training:
        n = len(ops)
        for v in range(n):
            f = ops[v]
            ops.append(Op(n + v, f.name + ".grad", f.kind, BACKWARD_FACTOR * f.flops,
                          float(sum(ops[u].out_bytes for u in preds[v])), f.param_bytes,
                          BACKWARD_FACTOR * f.moved_bytes, backward=True, forward_id=v))
        edges += [(n + v, n + u, ops[u].out_bytes) for u, v in fwd_edges]
        edges += [(v, n + v, ops[v].out_bytes) for v in range(n)]
        preds += [[] for _ in range(n)]
        for u, v, _ in edges[len(fwd_edges):]:
            preds[v].append(u)
    name = f"bert-L{c.layers}-H{c.hidden}-{'training' if training else 'inference'}"
    return OperatorGraph(tuple(ops), tuple(edges), c, training, name, tuple(tuple(p) for p in preds))


def node_memory(op: Op, training: bool) -> float:
    """Bytes a node occupies on an accelerator (module docstring, "Memory per node")."""
    if training and not op.backward:
        return op.param_bytes + op.out_bytes
    return op.param_bytes


def to_tarnawski_json(graph: OperatorGraph, *, accelerator: DeviceFigures = A100_SXM4_40GB,
                      cpu: DeviceFigures = EPYC_7763, link_bytes_per_s: float = PCIE4_X16_BYTES_PER_S,
                      max_accelerators: int = 4, max_cpus: int = 1, memory: float = 16 * GiB) -> dict:
    """The graph as a Tarnawski instance (times in ms, sizes in bytes), ready for ``parse_instance``.

    Every node is supported on the accelerator. Training graphs give a forward node and its
    backward node one colour class (the forward node's id); inference graphs give no colours.
    An ``about`` entry records the configuration and device figures (readers ignore it).
    """
    if not math.isfinite(link_bytes_per_s) or link_bytes_per_s <= 0:
        raise InvalidParameterError("link_bytes_per_s", f"must be positive and finite, not {link_bytes_per_s!r}")
    nodes = []
    for op in graph.ops:
        node = {
            "id": op.id,
            "name": op.name,
            "supportedOnFpga": True,
            "cpuLatency": roofline_ms(op.flops, op.moved_bytes, cpu),
            "fpgaLatency": roofline_ms(op.flops, op.moved_bytes, accelerator),
            "isBackwardNode": op.backward,
            "size": node_memory(op, graph.training),
        }
        if graph.training:
            node["colorClass"] = op.forward_id if op.backward else op.id
        nodes.append(node)
    edges = [{"sourceId": u, "destId": v, "cost": 1e3 * graph.ops[u].out_bytes / link_bytes_per_s,
              "size": size} for u, v, size in graph.edges]
    return {
        "about": {
            "model": graph.name,
            "generator": "placement.zoo.transformer",
            "config": asdict(graph.config),
            "training": graph.training,
            "accelerator": asdict(accelerator),
            "cpu": asdict(cpu),
            "link_bytes_per_s": link_bytes_per_s,
            "units": {"time": "ms", "size": "bytes"},
        },
        "maxSizePerFPGA": float(memory),
        "maxFPGAs": max_accelerators,
        "maxCPUs": max_cpus,
        "nodes": nodes,
        "edges": edges,
    }
