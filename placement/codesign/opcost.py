"""Time of a model's operators on a design of the template (:mod:`.template`).

Model (per operator, in seconds; ``f`` the clock, ``e`` the bytes per element, ``β`` the DRAM
bandwidth, ``S`` the buffer in bytes, ``β_buf = BUFFER_BYTES_PER_CYCLE_PER_MB·buffer_mb·f`` the
buffer bandwidth)::

    time = max(compute cycles / f, DRAM bytes / β, buffer bytes / β_buf)

**GEMM** ``batch`` × (``m×k`` · ``k×n``), weight-stationary on ``tensor_cores`` arrays of
``w × h`` (width × depth): the weights are cut into ``tiles = batch·⌈k/h⌉·⌈n/w⌉`` tiles of
``h × w``; each array holds one tile and streams the ``m`` rows of its input through it in
``m + h + w`` cycles (the rows, plus filling and draining the array). With at least as many
tiles as arrays, the arrays take ``⌈tiles / tensor_cores⌉`` rounds of ``m + h + w`` cycles;
with fewer, every tile is copied onto ``⌊tensor_cores / tiles⌋`` arrays that split the rows, so
one round of ``⌈m / copies⌉ + h + w`` cycles. Utilisation follows from the tile shapes: a
``k`` or ``n`` that is not a multiple of the array wastes MACs, a small ``m`` pays the fill.
DRAM traffic is ``e·batch·(mk + kn + mn)`` when the three matrices fit the buffer; otherwise the
weights go through the buffer in ``p = ⌈e·k·n / (S/2)⌉`` chunks of half of it and the input is
read once per chunk: ``e·batch·(kn + mn + p·mk)``. Buffer traffic is
``e·batch·(mk·⌈n/w⌉ + kn + mn·⌈k/h⌉)`` (the input once per column of tiles, partial sums once
per row of tiles).

**Vector operator** ``op`` over ``E`` elements: ``⌈E · VECTOR_CYCLES[op] / lanes⌉`` cycles on
the ``vector_cores · vector_lanes`` lanes; DRAM and buffer traffic ``2·e·E`` (read and write)
unless the operator gives its bytes.

**Shapeless** (``flops`` and ``bytes`` only): ``flops / (2·MACs)`` cycles (every MAC busy) and
the given bytes through DRAM and the buffer.

A node's time is the sum of its operators' (they run one after another), in milliseconds.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from placement.codesign.template import (
    BUFFER_BYTES_PER_CYCLE_PER_MB, CLOCK_HZ, DRAM_BYTES_PER_S, ELEMENT_BYTES, Design)
from placement.codesign.workload import Operator, Workload

#: Cycles per element per lane of the vector operators (estimates: one cycle for an elementwise
#: arithmetic op, more for transcendental ones by their usual polynomial/iteration counts; softmax
#: is max, subtract, exp, sum and divide; layer norm is mean, variance and normalise).
VECTOR_CYCLES: dict[str, float] = {
    "add": 1.0, "mul": 1.0, "copy": 1.0, "relu": 1.0, "reduce": 1.0, "pool": 1.0,
    "exp": 4.0, "sigmoid": 4.0, "tanh": 4.0, "gelu": 8.0, "softmax": 6.0, "layernorm": 8.0,
    "dropout": 2.0, "optimizer": 10.0,
}


class DesignArrays:
    """The parameters of many designs as float arrays (one entry per design)."""

    def __init__(self, designs: Sequence[Design]) -> None:
        self.tensor_cores = np.array([d.tensor_cores for d in designs], dtype=np.float64)
        self.width = np.array([d.array_width for d in designs], dtype=np.float64)
        self.depth = np.array([d.array_depth for d in designs], dtype=np.float64)
        self.lanes = np.array([d.lanes for d in designs], dtype=np.float64)
        self.buffer_bytes = np.array([d.buffer_mb for d in designs], dtype=np.float64) * 2.0 ** 20
        self.buffer_rate = np.array([d.buffer_mb for d in designs], dtype=np.float64) \
            * BUFFER_BYTES_PER_CYCLE_PER_MB * CLOCK_HZ
        self.macs = self.tensor_cores * self.width * self.depth


def operator_seconds(op: Operator, d: DesignArrays) -> np.ndarray:
    """Seconds ``op`` takes on every design of ``d`` (module docstring)."""
    e = float(ELEMENT_BYTES)
    if op.kind == "gemm":
        m, n, k, b = float(op.m), float(op.n), float(op.k), float(op.batch)
        tiles = b * np.ceil(k / d.depth) * np.ceil(n / d.width)
        copies = np.maximum(np.floor(d.tensor_cores / tiles), 1.0)
        rows = np.where(tiles >= d.tensor_cores, m, np.ceil(m / copies))
        cycles = np.where(tiles >= d.tensor_cores, np.ceil(tiles / d.tensor_cores), 1.0) * (rows + d.depth + d.width)
        fits = e * (m * k + k * n + m * n) <= d.buffer_bytes
        chunks = np.ceil(e * k * n / (d.buffer_bytes / 2))
        dram = e * b * np.where(fits, m * k + k * n + m * n, k * n + m * n + chunks * m * k)
        if op.bytes is not None:
            dram = np.full_like(dram, op.bytes)
        buffer = e * b * (m * k * np.ceil(n / d.width) + k * n + m * n * np.ceil(k / d.depth))
    elif op.kind == "vector":
        cycles = np.ceil(op.elements * VECTOR_CYCLES[op.op] / d.lanes)
        dram = np.full_like(d.lanes, 2 * e * op.elements if op.bytes is None else op.bytes)
        buffer = dram
    else:  # shapeless
        cycles = op.flops / (2.0 * d.macs)
        dram = np.full_like(d.lanes, op.bytes or 0.0)
        buffer = dram
    return np.maximum(np.maximum(cycles / CLOCK_HZ, dram / DRAM_BYTES_PER_S), buffer / d.buffer_rate)


def node_times_ms(workload: Workload, designs: Sequence[Design]) -> np.ndarray:
    """Milliseconds of every node (columns, by node position) on every design (rows)."""
    arrays = DesignArrays(designs)
    out = np.zeros((len(designs), len(workload.operators)))
    cache: dict[Operator, np.ndarray] = {}
    for v, ops in enumerate(workload.operators):
        for op in ops:
            if op not in cache:
                cache[op] = operator_seconds(op, arrays)
            out[:, v] += cache[op]
    return out * 1000.0
