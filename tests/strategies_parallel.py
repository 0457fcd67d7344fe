"""Hypothesis strategies: tiny Piper instances (data- and tensor-parallel planning).

Times, sizes and memories are small integers, so the optima are easy to read; the sums the
planner and the evaluator form in different orders may still round differently once divided by
``d`` and the bandwidth, so tests compare values with a relative tolerance.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from placement.io.piper import TMPC, PiperDeviceType, PiperEdge, PiperInstance, PiperNode


@st.composite
def piper_instances(draw, max_nodes: int = 4) -> PiperInstance:
    """A valid :class:`PiperInstance`: a random DAG (edges from lower to higher position), ids unlike
    positions, degrees t ∈ {1, 2} (every node has t = 1), one or two TMPCs per degree, 1–4 devices,
    ``mbsInBatch`` ∈ {1, 2, 4, 6}, memory from tight to ample."""
    n = draw(st.integers(1, max_nodes))
    ids = [3 * k + 2 for k in range(n)]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = sorted(draw(st.sets(st.sampled_from(pairs), max_size=2 * n))) if pairs else []
    edges = [PiperEdge(ids[i], ids[j], float(draw(st.integers(0, 4)))) for i, j in chosen]
    preds = {ids[j]: [ids[i] for i, jj in chosen if jj == j] for j in range(n)}
    succs = {ids[i]: [ids[j] for ii, j in chosen if ii == i] for i in range(n)}
    small = st.integers(0, 6).map(float)
    nodes = []
    for k in range(n):
        degrees = [1] + ([2] if draw(st.booleans()) else [])
        table = {}
        for t in degrees:
            table[t] = tuple(
                TMPC(name, float(draw(st.integers(1, 8))), draw(small), draw(small), draw(small),
                     {u: draw(small) for u in preds[ids[k]]}, {w: draw(small) for w in succs[ids[k]]})
                for name in (["vanilla", "recomp"][:draw(st.integers(1, 2))]))
        nodes.append(PiperNode(ids[k], f"n{k}", table))
    devices = draw(st.integers(1, 4))
    memory = float(draw(st.integers(4, 60)))
    bandwidth = float(draw(st.sampled_from([1, 2, 4])))
    microbatches = draw(st.sampled_from([1, 2, 4, 6]))
    return PiperInstance("tiny", devices, memory, bandwidth, microbatches, tuple(nodes), tuple(edges))


@st.composite
def typed_piper_instances(draw, max_nodes: int = 3) -> PiperInstance:
    """:func:`piper_instances` with two device types: counts 1–3, memories from tight to ample, speeds
    ½, 1 or 2, a bandwidth of their own or the instance's, the second type possibly a CPU (t = 1)."""
    base = draw(piper_instances(max_nodes))
    types = tuple(PiperDeviceType(name, draw(st.integers(1, 3)), float(draw(st.integers(4, 60))),
                                  draw(st.sampled_from([0.5, 1.0, 2.0])),
                                  draw(st.sampled_from([None, 1.0, 4.0])), cpu and draw(st.booleans()))
                  for name, cpu in (("gpu", False), ("other", True)))
    return replace(base, device_types=types)
