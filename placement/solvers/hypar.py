"""Hybrid-parallel planners for a layer chain on ``N = 2^H`` accelerators (DESIGN.md §4).

Every planner returns a partition (a type per layer and level) and the model's evaluation of
it (:func:`placement.costmodel.hypar.communication`), so planners are compared on one footing.

* ``hypar`` — HyPar's search: level by level, top level first. At level ``h`` the choices of
  the levels above are fixed, so the level's amount ``com_h`` is a sum of per-layer terms
  (intra) and per-boundary terms (inter) of the level-``h`` choices alone, minimised exactly by
  a chain DP with one state per partition type. The levels below are ignored when a level is
  chosen, so the result need not be optimal for the total.
* ``exact`` — the joint optimum. A layer's state is its whole choice vector over the levels
  (``k^H`` states for ``k`` types). The intra amount of a layer depends on its own vector only,
  the inter amount of a boundary on the two vectors it joins, so the total is a chain sum and
  ``best_{l+1}[t] = min_s(best_l[s] + inter_l(s, t)) + intra_{l+1}(t)`` is exact. The tables
  are network-independent up to one factor per tensor: ``inter_l(s, t) = A(F_{l+1})·G[s, t]``,
  ``intra_l(t) = A(W_l)·uW[t] + A(F_{l+1})·uF[t] + A(E_l)·uE[t]``, held as integers in units of
  ``1 / (4·4^H)`` elements so that every comparison is exact.
* baselines — ``all-dp``, ``all-mp``, and ``one-weird-trick`` (conv layers dp, fc layers mp, at
  every level; Krizhevsky 2014).

Ties: both chains are traced back from the last layer, so among plans of equal total the
smallest choice for the last layer wins, then the smallest for the layer before given it, and
so on (types in the order listed: dp, mp, mp-out; the exact DP's vectors with level 0 most
significant).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Sequence

import numpy as np

from placement.costmodel.hypar import (DP, HYPAR_TYPES, INTER, MP, MP_OUT, Communication, Partition,
                                       boundary_inter_at_level, check_batch, check_network, communication,
                                       hierarchy_levels, layer_intra_at_level, uniform_partition)
from placement.costmodel.network import Network
from placement.errors import InvalidParameterError, LimitExceededError
from placement.parameters import callback, keywords_checked
from placement.wording import rounded_duration

MAX_STATE_PAIRS = 2 ** 23
"""The exact planner refuses when ``(k^H)²`` state pairs per boundary exceed this."""

_INT64_SAFE = 2 ** 62


@dataclass(frozen=True)
class HyparPlan:
    """A planner's partition, its communication under the model, and what the search cost."""

    planner: str
    partition: Partition
    communication: Communication
    runtime_s: float
    stats: dict = field(default_factory=dict, compare=False)


def _check_types(types: Sequence[str]) -> tuple[str, ...]:
    given = types
    types = tuple(types) if isinstance(types, (list, tuple)) else ()
    if not types or any(not isinstance(t, str) or t not in (DP, MP, MP_OUT) for t in types) \
            or len(set(types)) != len(types):
        shown = list(types) if types else repr(given)
        raise InvalidParameterError("types", f"must be a list or tuple of distinct partition types out of "
                                             f"'dp', 'mp', 'mp-out', not {shown}")
    return types


# ----------------------------------------------------------------------------------------
# HyPar: level by level
# ----------------------------------------------------------------------------------------

def _chain_argmin(unary: list[list[Fraction]], pairwise: list[list[list[Fraction]]]) -> tuple[list[int], Fraction]:
    """Minimise ``Σ_l unary[l][x_l] + Σ_l pairwise[l][x_l][x_{l+1}]``; ties go to smaller indices."""
    k = len(unary[0])
    best = list(unary[0])
    back: list[list[int]] = []
    for l in range(1, len(unary)):
        row_best, row_back = [], []
        for t in range(k):
            s = min(range(k), key=lambda s: (best[s] + pairwise[l - 1][s][t], s))
            row_best.append(best[s] + pairwise[l - 1][s][t] + unary[l][t])
            row_back.append(s)
        best = row_best
        back.append(row_back)
    last = min(range(k), key=lambda t: (best[t], t))
    choice = [last]
    for row in reversed(back):
        choice.append(row[choice[-1]])
    return choice[::-1], best[last]


@keywords_checked
def plan_hypar(network: Network, accelerators: int, batch: int, types: Sequence[str] = HYPAR_TYPES) -> HyparPlan:
    """HyPar's hierarchical search: one chain DP per level, top level first."""
    start = time.perf_counter()
    check_network(network)
    types = _check_types(types)
    levels = hierarchy_levels(accelerators)
    batch = check_batch(batch)
    n = len(network.layers)
    rows: list[list[str]] = [[] for _ in range(n)]
    level_amounts = []
    for _ in range(levels):
        unary = [[layer_intra_at_level(network, l, t, rows[l], batch) for t in types] for l in range(n)]
        pairwise = [[[boundary_inter_at_level(network, l, p, q, rows[l], rows[l + 1], batch) for q in types]
                     for p in types] for l in range(n - 1)]
        choice, amount = _chain_argmin(unary, pairwise)
        level_amounts.append(amount)
        for l in range(n):
            rows[l].append(types[choice[l]])
    partition = tuple(tuple(r) for r in rows)
    comm = communication(network, partition, batch)
    return HyparPlan("hypar", partition, comm, time.perf_counter() - start,
                     {"level_amounts": tuple(level_amounts)})


# ----------------------------------------------------------------------------------------
# exact: a chain DP over choice vectors
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _VectorTables:
    """Network-independent tables over the ``k^H`` choice vectors, in units of ``1/scale`` elements."""

    vectors: tuple[tuple[str, ...], ...]
    scale: int
    weight: np.ndarray        # uW[s]
    output: np.ndarray        # uF[s]
    input_error: np.ndarray   # uE[s]
    boundary: np.ndarray      # G[s, t]


def _vector_tables(levels: int, types: tuple[str, ...]) -> _VectorTables:
    vectors = tuple(itertools.product(types, repeat=levels))
    codes = np.array([[types.index(t) for t in v] for v in vectors], dtype=np.int64).reshape(len(vectors), levels)
    is_dp = np.array([t == DP for t in types])[codes]
    is_mp = np.array([t == MP for t in types])[codes]
    is_out = np.array([t == MP_OUT for t in types])[codes]
    scale = 4 * 4 ** levels
    s = len(vectors)
    weight = np.zeros(s, dtype=np.int64)
    output = np.zeros(s, dtype=np.int64)
    input_error = np.zeros(s, dtype=np.int64)
    boundary = np.zeros((s, s), dtype=np.int64)
    # 4·(cF + cE) per type pair: integers 0, 1, 2.
    coef = np.array([[int(4 * sum(INTER[p, q])) for q in types] for p in types], dtype=np.int64)
    w_exp = np.zeros(s, dtype=np.int64)
    f_exp = np.zeros(s, dtype=np.int64)
    e_exp = np.zeros(s, dtype=np.int64)
    b_exp = np.zeros((s, s), dtype=np.int64)
    for h in range(levels):
        unit = scale << h                      # 2^h pairs, in units of 1/scale
        weight += np.where(is_dp[:, h], unit >> w_exp, 0)
        output += np.where(is_mp[:, h], unit >> f_exp, 0)
        input_error += np.where(is_out[:, h], unit >> e_exp, 0)
        boundary += coef[codes[:, h][:, None], codes[:, h][None, :]] * ((unit // 4) >> b_exp)
        w_exp += is_mp[:, h] | is_out[:, h]
        f_exp += is_dp[:, h] | is_out[:, h]
        e_exp += is_dp[:, h] | is_mp[:, h]
        b_exp += (is_dp[:, h][:, None] | is_dp[:, h][None, :]).astype(np.int64)
        b_exp += (is_mp[:, h][None, :] | is_out[:, h][:, None]).astype(np.int64)
    return _VectorTables(vectors, scale, weight, output, input_error, boundary)


#: seconds of a run of the exact planner before its first progress line, and the least between two
NEWS_EVERY_S = 1.0


def _layer_news(progress: Callable[[str], None] | None, started: float, layers: int,
                python: bool) -> Callable[[int], None] | None:
    """A ``tell(done)`` for the exact planner's chain DP, called once ``done`` of its ``layers`` layers are
    planned, that passes ``progress`` a line saying so: the first once :data:`NEWS_EVERY_S` has passed since
    ``started`` (a run that ends sooner says nothing), then one a second, or one per tenth of the time so far
    where that is longer, each with the seconds so far and the time left at the pace of the layers so far (each
    layer after the first costs the same, ``k^H × k^H`` sums; the first's are the tables' build); ``python``: its
    sums are Python integers, which it says. ``None`` without ``progress``."""
    if progress is None:
        return None
    began = time.perf_counter()   # the first layer planned: the pace of the others counts from here
    said = [started]
    kind = " on Python integers" if python else ""

    def tell(done: int) -> None:
        now = time.perf_counter()
        if now - said[0] < max(NEWS_EVERY_S, (now - started) / 10):
            return
        said[0] = now
        left = (now - began) * (layers - done) / (done - 1)
        progress(f"exact planner: {done:,} of {layers:,} layers planned{kind}, {now - started:.0f} s; "
                 f"about {rounded_duration(left)} left")
    return tell


@keywords_checked
def plan_exact(network: Network, accelerators: int, batch: int, types: Sequence[str] = HYPAR_TYPES,
               progress: Callable[[str], None] | None = None) -> HyparPlan:
    """The joint optimum over all levels: a chain DP whose state is a layer's choice vector. ``progress``
    hears, about once a second on a run past a second, how many layers are planned and an estimate of the
    time left (:func:`_layer_news`)."""
    start = time.perf_counter()
    check_network(network)
    progress = callback("progress", progress)
    types = _check_types(types)
    levels = hierarchy_levels(accelerators)
    batch = check_batch(batch)
    states = len(types) ** levels
    if states * states > MAX_STATE_PAIRS:
        raise LimitExceededError(f"the exact planner needs {states:,}² = {states * states:,} state pairs per layer boundary "
                         f"for {accelerators} accelerators and {len(types)} partition types (limit "
                         f"{MAX_STATE_PAIRS:,}); use fewer accelerators or partition types")
    tables = _vector_tables(levels, types)
    layers = network.layers
    n = len(layers)
    inputs = [0] + [layer.input_elements(batch) for layer in layers[1:]]   # A(E_0) is never exchanged
    outputs = [layer.output_elements(batch) for layer in layers]
    # The DP's values are kept relative to their least (``offset`` holds it, exactly), so what the arrays
    # hold never passes the terms of three consecutive layers, whatever the network's length: that bound, not
    # the total's, decides when 64-bit integers give way to Python's (about a hundred times slower).
    per_layer = [layer.weight_elements * int(tables.weight.max()) + outputs[l] * int(tables.output.max())
                 + inputs[l] * int(tables.input_error.max()) + outputs[l] * int(tables.boundary.max())
                 for l, layer in enumerate(layers)]
    dtype = np.int64 if 3 * max(per_layer) < _INT64_SAFE else object

    def intra(l: int) -> np.ndarray:
        return (layers[l].weight_elements * tables.weight.astype(dtype) + outputs[l] * tables.output.astype(dtype)
                + inputs[l] * tables.input_error.astype(dtype))

    boundary = tables.boundary.astype(dtype)
    best = intra(0)
    offset = 0
    back: list[np.ndarray] = []
    tell = _layer_news(progress, start, n, dtype is object)
    for l in range(1, n):
        least = best.min()
        offset += int(least)
        total = (best - least)[:, None] + outputs[l - 1] * boundary      # [s, t]
        arg = np.argmin(total, axis=0)                         # first minimum: smallest s
        back.append(arg)
        best = total[arg, np.arange(len(arg))] + intra(l)
        if tell is not None and l + 1 < n:   # the last layer's news would come as the plan does
            tell(l + 1)
    last = int(np.argmin(best))
    choice = [last]
    for arg in reversed(back):
        choice.append(int(arg[choice[-1]]))
    choice.reverse()
    partition = tuple(tables.vectors[s] for s in choice)
    comm = communication(network, partition, batch)
    optimum = Fraction(offset + int(best[last]), tables.scale)
    return HyparPlan("exact", partition, comm, time.perf_counter() - start,
                     {"states": states, "optimum": optimum, "integer_kind": "int64" if dtype is np.int64 else "python"})


# ----------------------------------------------------------------------------------------
# baselines
# ----------------------------------------------------------------------------------------

def _uniform(name: str, kind_of_layer: Callable) -> Callable[..., HyparPlan]:
    def plan(network: Network, accelerators: int, batch: int, types: Sequence[str] = HYPAR_TYPES) -> HyparPlan:
        start = time.perf_counter()
        check_network(network)
        _check_types(types)
        levels = hierarchy_levels(accelerators)
        batch = check_batch(batch)
        partition = uniform_partition(network, levels, kind_of_layer)
        return HyparPlan(name, partition, communication(network, partition, batch), time.perf_counter() - start)
    plan.__name__ = plan.__qualname__ = f"plan_{name.replace('-', '_')}"
    plan.__doc__ = f"Baseline ``{name}``: the same type at every level of a layer."
    return keywords_checked(plan)


plan_all_dp = _uniform("all-dp", lambda layer: DP)
plan_all_mp = _uniform("all-mp", lambda layer: MP)
plan_one_weird_trick = _uniform("one-weird-trick", lambda layer: DP if layer.kind == "conv" else MP)

PLANNERS: dict[str, Callable[..., HyparPlan]] = {
    "hypar": plan_hypar,
    "exact": plan_exact,
    "all-dp": plan_all_dp,
    "all-mp": plan_all_mp,
    "one-weird-trick": plan_one_weird_trick,
}


@keywords_checked
def plan_all(network: Network, accelerators: int, batch: int, types: Sequence[str] = HYPAR_TYPES
             ) -> list[HyparPlan]:
    """Every planner of :data:`PLANNERS`, in that order."""
    return [plan(network, accelerators, batch, types) for plan in PLANNERS.values()]
