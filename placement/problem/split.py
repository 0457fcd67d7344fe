"""The split-backward model: a backward node's work as an activation-gradient task B and a
weight-gradient task W (LayerPipe, zero-bubble pipelines), placed apart.

Model (``docs/backward-split.md`` states it in full)
---------------------------------------------------
A backward node ``u`` with time ``p_t(u)`` on device type ``t`` splits into ``W_t(u)``, its
weight-gradient part, and ``B_t(u) = p_t(u) − W_t(u)``. ``W_t(u)`` is the node's own
``weight_times[t]`` where the instance gives it (fields ``fpgaWeightLatency``/``cpuWeightLatency`` or
``weightTimes`` in the files), else ``share · p_t(u)`` with the user's
``w_share`` (default :data:`DEFAULT_W_SHARE`, the simulator's ``w_fraction``).

Placement variants (names as the API takes them):

* ``w_placement="any"`` — ``W(u)`` runs on any stage of the pipeline whose type supports ``u``;
* ``w_placement="adjacent"`` — on ``u``'s layer stage or the next stage in pipeline order;
* ``w_placement="home"`` — on ``u``'s layer stage (no W moves: with ``inter_layer=False`` these are the
  unsplit plans, priced with the split model's memory, the baseline a split plan is compared with);
* ``inter_layer=True`` — ``B(u)`` runs on ``u``'s layer stage or the previous stage.

This module holds the data of the model only; the evaluator (:mod:`placement.verification.split`)
and the solvers compute loads from it independently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from placement.errors import InvalidParameterError
from placement.parameters import flag, number, one_of
from placement.problem.instance import Instance

BACKWARD_MODES = ("joint", "split")
W_PLACEMENTS = ("any", "adjacent", "home")
DEFAULT_W_SHARE = 0.5
#: the options of ``backward="split"`` and their values where not given (``None``); a joint solve or check
#: takes none of them
SPLIT_DEFAULTS = {"w_placement": "any", "inter_layer": False, "w_share": DEFAULT_W_SHARE}


@dataclass(frozen=True)
class SplitModel:
    """The variant of the split model a plan is placed and evaluated under."""

    w_placement: str = "any"
    inter_layer: bool = False
    w_share: float = DEFAULT_W_SHARE

    @property
    def name(self) -> str:
        """Short name of the variant, e.g. ``adjacent+inter-layer``."""
        return self.w_placement + ("+inter-layer" if self.inter_layer else "")


def checked_backward(record: Mapping[str, Any], backward: str | None = None,
                     **given: Any) -> tuple[dict[str, Any], list[str]]:
    """The backward options to check a plan under: ``backward`` and the options of :data:`SPLIT_DEFAULTS`
    as given (``None``: not given), else, for a split check, those the plan records of its split solve
    (``record``, the ``backward`` section of a solved plan; ``backward`` is ``split`` where it records
    one), else the defaults; with the names of the options taken from the record (``backward`` first)."""
    from_record = backward is None and record.get("mode") == "split" or backward == "split"
    recorded = "split" if record.get("mode") == "split" else "joint"
    options: dict[str, Any] = {"backward": recorded if backward is None else backward}
    taken = ["backward"] if backward is None and options["backward"] == "split" else []
    for name, default in SPLIT_DEFAULTS.items():
        value = given.get(name)
        if value is None and from_record and name in record:
            value = record[name]
            taken.append(name)
        options[name] = default if value is None else value
    return options, taken


def solved_otherwise(record: Mapping[str, Any], used: Mapping[str, Any]) -> tuple[str, str] | None:
    """How the backward model of a check (``used``: ``backward`` and, split, the options of
    :data:`SPLIT_DEFAULTS`) differs from the one a plan was solved under (``record``,
    :func:`placement.io.plans.recorded_backward`), as the record's settings and the check's, in words; ``None``
    where they agree, or the record does not say. A value claimed under one model is no claim about another:
    a W share of 0.2 solved to 10.8 and checked at 0.9 gave 14.4, which refutes nothing."""
    mode = record.get("mode") or "joint"
    if used["backward"] != mode:
        return f"backward {mode}", f"backward {used['backward']}"
    names = [name for name in SPLIT_DEFAULTS if mode == "split" and record.get(name) is not None
             and name in used and record[name] != used[name]]
    if not names:
        return None
    return (", ".join(f"{name} {record[name]!r}" for name in names),
            ", ".join(f"{name} {used[name]!r}" for name in names))


def refuse_split_options(**given: object) -> None:
    """:class:`InvalidParameterError` for the first of the options of :data:`SPLIT_DEFAULTS` given (not
    ``None``, whatever its value: its default too), where the backward pass is not split."""
    for name in SPLIT_DEFAULTS:
        if given.get(name) is not None:
            raise InvalidParameterError(name, "applies to backward='split' only")


def split_model(w_placement: object = None, inter_layer: object = None, w_share: object = None) -> SplitModel:
    """A checked :class:`SplitModel`, an option not given (``None``) at its default of :data:`SPLIT_DEFAULTS`;
    bad values raise :class:`InvalidParameterError`."""
    w_placement = SPLIT_DEFAULTS["w_placement"] if w_placement is None else w_placement
    inter_layer = SPLIT_DEFAULTS["inter_layer"] if inter_layer is None else inter_layer
    w_share = SPLIT_DEFAULTS["w_share"] if w_share is None else w_share
    one_of("w_placement", w_placement, W_PLACEMENTS)
    flag("inter_layer", inter_layer)
    share = number("w_share", w_share, largest=1)
    return SplitModel(str(w_placement), bool(inter_layer), float(share))


def refuse_unused_w_share(problem: Instance, w_share: object) -> None:
    """:class:`InvalidParameterError` for a ``w_share`` given (not ``None``) where every backward node of ``problem``
    gives its own W time (``weight_times``): the share stands in only for a node that gives none, so it would change
    nothing."""
    if w_share is not None and all(n.weight_times is not None for n in problem.nodes if n.backward):
        raise InvalidParameterError("w_share", "does not apply to this instance: every backward node gives its "
                                               "weight-gradient (W) time, which w_share stands in for only where a "
                                               "node gives none")


def check_training(problem: Instance) -> None:
    """Refuse an inference instance: it has no backward node to split."""
    if not problem.is_training:
        raise InvalidParameterError("backward", "'split' needs a training instance (one with backward nodes); "
                                                "this instance has none")


def split_times(problem: Instance, model: SplitModel) -> tuple[list[tuple[float | None, ...]],
                                                                 list[tuple[float | None, ...]]]:
    """``(B, W)``: per node position and device type, the B and W times (``None`` where unsupported).

    A forward node has ``B = times`` and ``W = 0`` (it has no weight-gradient task).
    """
    b_times: list[tuple[float | None, ...]] = []
    w_times: list[tuple[float | None, ...]] = []
    for n in problem.nodes:
        given = n.weight_times
        if not n.backward:
            b_times.append(n.times)
            w_times.append(tuple(None if p is None else 0.0 for p in n.times))
            continue
        ws = tuple(None if p is None else (given[k] if given is not None else model.w_share * p)
                   for k, p in enumerate(n.times))
        w_times.append(ws)
        b_times.append(tuple(None if p is None else max(0.0, p - w) for p, w in zip(n.times, ws)))
    return b_times, w_times


def task_rows(problem: Instance, model: SplitModel) -> list[list[float]]:
    """The tasks of :func:`split_lower_bound`'s relaxation, each as its time on every device type with
    devices (∞ where it cannot run there): a forward colour class (its forward nodes' times; ∞ on a
    type that one of the class's nodes is not supported on), then each backward node's B and W."""
    types = [k for k, t in enumerate(problem.device_types) if t.count > 0]
    b_times, w_times = split_times(problem, model)
    rows: list[list[float]] = []
    for members in problem.colour_classes():
        fw = [v for v in members if not problem.nodes[v].backward]
        if fw:
            rows.append([math.inf if any(problem.nodes[v].times[k] is None for v in members)
                         else sum(problem.nodes[v].times[k] for v in fw) for k in types])
    for u, n in enumerate(problem.nodes):
        if n.backward:
            for times in (b_times[u], w_times[u]):
                rows.append([math.inf if times[k] is None else times[k] for k in types])
    return rows


def split_lower_bound(problem: Instance, model: SplitModel) -> float:
    """A lower bound on the max load of every split plan: the LP relaxation in which every task (a
    forward colour class, each B and each W) may be divided among the device types at will and
    communication is free. By LP duality, for any ``λ ≥ 0`` with ``Σ_k λ_k count_k = 1``,
    ``Σ_i min_k λ_k p_k(i)`` is such a bound; this takes the best ``λ`` on the line between every two
    types at once for two types (exact: the function is concave and piecewise linear in ``t``,
    with ``λ = (t/count_1, (1−t)/count_2)``, so its maximum is at a breakpoint or an end), and the
    single types and the uniform ``λ`` otherwise."""
    import numpy as np

    types = [k for k, t in enumerate(problem.device_types) if t.count > 0]
    counts = np.array([problem.device_types[k].count for k in types], dtype=float)
    rows = task_rows(problem, model)
    if not rows:
        return 0.0
    p = np.array(rows, dtype=float)

    def g(lam: np.ndarray) -> float:
        scaled = np.where(np.isinf(p), np.inf, np.where(np.isinf(p), 0.0, p) * lam)
        best = scaled.min(axis=1)
        return float(best[np.isfinite(best)].sum())

    candidates = [np.where(np.arange(len(types)) == k, 1.0 / counts[k], 0.0) for k in range(len(types))]
    candidates.append(1.0 / (len(types) * counts))
    if len(types) == 2:
        candidates.extend(np.array([t / counts[0], (1 - t) / counts[1]]) for t in _best_breakpoints(p, counts))
    return max(g(lam) for lam in candidates)


def _best_breakpoints(p: "np.ndarray", counts: "np.ndarray", keep: int = 8) -> list[float]:
    """For two types, the breakpoints ``t`` of ``g(t) = Σ_i min(t·a_i, (1−t)·b_i)`` (``a``, ``b``: the rows'
    times over the types' counts; a row infinite on one type takes the other's term, one infinite on
    both counts nothing) with the ``keep`` largest values of ``g``, found in ``O(rows log rows)``: sorted
    by breakpoint ``τ_i = b_i / (a_i + b_i)``, ``g(τ_j) = τ_j · Σ_{i ≥ j} a_i + (1 − τ_j) · Σ_{i < j} b_i``
    plus the one-sided rows. The caller evaluates them exactly (these sums are running ones)."""
    import numpy as np

    a, b = p[:, 0] / counts[0], p[:, 1] / counts[1]
    ok = np.isfinite(a) & np.isfinite(b) & (a + b > 0)
    if not ok.any():
        return []
    only_a = float(a[np.isfinite(a) & ~np.isfinite(b)].sum())   # rows a CPU-less type cannot hold, and back
    only_b = float(b[np.isfinite(b) & ~np.isfinite(a)].sum())
    tau = b[ok] / (a[ok] + b[ok])
    by_tau = np.argsort(tau, kind="stable")
    tau, a_ok, b_ok = tau[by_tau], a[ok][by_tau], b[ok][by_tau]
    from_here = np.cumsum(a_ok[::-1])[::-1]                     # Σ_{i ≥ j} a_i
    before = np.concatenate([[0.0], np.cumsum(b_ok)[:-1]])      # Σ_{i < j} b_i
    values = tau * (from_here + only_a) + (1 - tau) * (before + only_b)
    best = np.argsort(-values, kind="stable")[:keep]
    return sorted({float(tau[j]) for j in best})


def memory_shortfall(problem: Instance) -> str | None:
    """Why no split plan of ``problem`` fits its memory bounds, or ``None`` when this rule proves nothing.

    Rule: every plan places each node's layer on one device and that device's memory counts the node's
    memory ``m(v)`` once, and each forward node's output bytes ``act(v)`` ``H_p ≥ 1`` times (the stage at
    position ``p`` of ``S`` holds ``H_p = (S − p) + δ_p ≥ 1`` micro-batches; moved B tasks and kept W
    inputs only add). So the devices in use hold at least ``Σ_v m(v) + Σ_{forward v} act(v)`` together,
    and at most ``Σ_k count_k · M_k``: where the first exceeds the second, every variant and both
    objectives are infeasible (the memory model is the same for ``throughput-gpipe``)."""
    from placement.verification.split import tensor_bytes

    size = tensor_bytes(problem)
    capacity = sum(t.count * t.memory for t in problem.device_types if t.count > 0)
    need = sum(n.memory for n in problem.nodes) + sum(size[n.id] for n in problem.nodes if not n.backward)
    if need <= capacity * (1 + 1e-12):
        return None
    return (f"the node memory and one micro-batch of activations ({need:.6g} bytes) exceed the memory of "
            f"all devices ({capacity:.6g} bytes)")
