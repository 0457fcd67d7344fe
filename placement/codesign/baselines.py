"""Heuristic co-design baselines, to measure against the proven optimum of :mod:`.exact`.

Each baseline picks chip designs from the grid by its own rule, then places the model on them
with the DP the exact method runs (:class:`_Evaluator`: the DP over ideals on chips of the chosen
designs), so its throughput is directly comparable with the optimum and can never exceed it:
every design it considers is a design of the grid within the budgets.

* :func:`wham` — after WHAM (M. Adnan, A. Phanishayee, J. Kulkarni, P. J. Nair, D. Mahajan,
  "Workload-Aware Hardware Accelerator Mining for Distributed Deep Learning Training",
  arXiv:2404.14632, 2024). Its search, as the paper's abstract describes it, decomposes the
  problem: a *local search* tunes the architecture of each pipeline stage "using a novel
  heuristic-based approach that prioritizes accelerator resources and scheduling to critical
  operators" and "selects multiple (k) designs per stage", and a *global search* "identifies an
  accelerator from the top-k sets to optimize training throughput across the stages". Here: (1) the stages are the DP's optimal split of the model onto ``chips``
  copies of the smallest feasible design (WHAM takes the stages as given); (2) per stage,
  hill climbing on the grid from that design: the stage's critical operators are its slowest
  nodes that make up :data:`CRITICAL_SHARE` of its time, every move changes one parameter by one
  grid step up (or one up and another one down, to stay within the budgets), the move taken is the
  one that most shortens the critical operators among those that shorten the stage, until none
  does (for perf-per-watt, the stage's time × the design's TDP plays the part of its time); the
  ``top_k`` best designs met are kept (of equal score, the fewer watts, then the less area, first);
  (3) the global pick evaluates, with the DP,
  the combination of every stage's fastest design and each combination that swaps one stage's
  design for another of its top-k (homogeneous: every design of the union of the top-k sets on
  all chips), and returns the best.
* :func:`random_search` — a fixed budget of evaluations of uniformly drawn feasible design
  combinations (seeded), the best one kept: the budget-bound black-box search of the Spotlight
  kind, without its model of the objective.
* :func:`fixed` — one TPU-like design on every chip: two tensor cores of 128×128 MACs, two
  vector cores of 128 lanes, 32 MB of buffer, after TPUv2 (N. P. Jouppi et al., "A
  domain-specific supercomputer for training deep neural networks", CACM 63(7), 2020: two
  TensorCores per chip, each with one 128×128 MXU and a vector unit, 16 MiB of vector memory
  per core), each parameter snapped to the grid's nearest value (on a log scale).

Every baseline returns a :class:`BaselineResult` with its throughput, the designs and plan,
the number of designs (or combinations) it evaluated and its search time. Of the plans it met,
it keeps the one the objective prefers, ties broken as the exact method breaks them
(:mod:`.result`: fewer watts, then less area, among plans of equal objective; on each combination
of chips, the plans that leave some of them empty count). A baseline meets only the plans of the designs
it tries, so where it reaches the optimum's objective its watts may still be more than the optimum's.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from placement import parameters
from placement.codesign.exhaustive import PROGRESS_S
from placement.codesign.frontier import least_power_dp
from placement.codesign.grid import Grid, load_grid
from placement.codesign.pipeline import design_instance, layer_plans, stage_designs
from placement.codesign.result import OBJECTIVES, preferred, tie_bound
from placement.codesign.space import Candidates, candidates
from placement.codesign.template import PARAMETERS, Design
from placement.codesign.workload import Workload, load_workload
from placement.solvers.dp import solve_dp
from placement.solvers.dp_table import build_layers
from placement.solvers.ideals import DEFAULT_MAX_IDEALS
from placement.errors import InvalidParameterError
from placement.problem.instance import format_number
from placement.wording import counted


class NoPlacement(InvalidParameterError):
    """The model has no placement on the chips: a node's memory fits no chip, whatever its design (a chip's
    memory is the same on every design)."""


#: Share of a stage's time that its critical operators make up (WHAM-like local search).
CRITICAL_SHARE = 0.8
#: The TPUv2-like design of :func:`fixed`, before snapping to the grid.
TPU_LIKE = Design(tensor_cores=2, array_width=128, array_depth=128, vector_cores=2, vector_lanes=128,
                  buffer_mb=32.0)


@dataclass(frozen=True)
class BaselineResult:
    """A baseline's answer: ``value`` as the exact method reports it (larger is better), ``throughput``
    in batches per second, the designs per stage and the plan, how many design combinations it
    placed (``evaluated``), its search time, and method-specific ``details``."""

    method: str
    value: float
    throughput: float
    designs: tuple[Design, ...]
    plan: Any
    evaluated: int
    runtime_s: float
    details: dict = field(default_factory=dict)


def _setup(model: Any, chips: int, area: float, power: float, grid: Any, objective: str, max_ideals: int
           ) -> tuple[Workload, Grid, Candidates, int]:
    """The workload, grid, designs within the budgets, and the chips a plan can use: ``chips``, or the
    model's colour classes where they are fewer (more chips are never all used)."""
    chips = parameters.integer("chips", chips, smallest=1)
    area = parameters.number("area", area, positive=True)
    power = parameters.number("power", power, positive=True)
    parameters.one_of("objective", objective, OBJECTIVES)
    parameters.integer("max_ideals", max_ideals, smallest=1)
    workload, grid = load_workload(model), load_grid(grid)
    space = candidates(workload, grid, area, power)
    if not space.designs:
        raise InvalidParameterError("area", f"and power leave no design of the grid: none fits {format_number(area)} "
                                            f"mm² and {format_number(power)} W")
    return workload, grid, space, workload.usable_chips(chips)


@dataclass(frozen=True)
class Evaluation:
    """A placement on given chips: ``score`` (smaller is better: the max load in ms per batch for
    throughput; max load × watts of the chips used for perf-per-watt), the max load ``time_ms``,
    the plan, the design of each non-empty stage in pipeline order, and the summed TDP (W) and area
    (mm²) of the chips used."""

    score: float
    time_ms: float
    plan: Any
    designs: tuple[Design, ...]
    power_w: float = 0.0
    area_mm2: float = 0.0

    @property
    def ranked(self) -> tuple[float, float, float, "Evaluation"]:
        """What :func:`.result.preferred` compares: ``(score, watts, area, self)``."""
        return self.score, self.power_w, self.area_mm2, self


def _placed(score: float, time_ms: float, plan: Any, used: tuple[Design, ...]) -> Evaluation:
    return Evaluation(score, time_ms, plan, used, float(sum(d.tdp_w for d in used)),
                      float(sum(d.area_mm2 for d in used)))


def _chips_of(workload: Workload, designs: Sequence[Design], times: np.ndarray) -> tuple[Any, list[Design]]:
    """The design instance of one chip of each of ``designs`` (repeats: several chips of a design), with its
    distinct designs (its device types, in order)."""
    distinct = list(dict.fromkeys(designs))
    rows = [next(i for i, d in enumerate(designs) if d == x) for x in distinct]
    problem = design_instance(workload, distinct, np.asarray(times)[rows], [list(designs).count(d) for d in distinct])
    return problem, distinct


def _placements(workload: Workload, designs: Sequence[Design], times: np.ndarray, objective: str,
                max_ideals: int) -> list[Evaluation]:
    """The placements of one chip of each of ``designs`` (repeats: several chips of a design; ``times`` holds
    each design's node times, rows, ms) to choose from, in any pipeline order, with the DP of
    :mod:`placement.solvers.dp`: for throughput the DP's plan of least max load, for perf-per-watt the best plan
    of every DP layer (every chip count the DP can leave empty); none where no plan fits (node memory)."""
    problem, distinct = _chips_of(workload, designs, times)
    if objective == "throughput":
        solution = solve_dp(problem, max_ideals=max_ideals)
        if solution.plan is None:
            return []
        return [_placed(solution.objective, solution.objective, solution.plan, stage_designs(solution.plan, distinct))]
    out = []
    for _, value, plan in layer_plans(problem, build_layers(problem), max_ideals=max_ideals)[0]:
        used = stage_designs(plan, distinct)
        out.append(_placed(value * sum(d.tdp_w for d in used), value, plan, used))
    return out


def _fewest_watts(workload: Workload, designs: Sequence[Design], times: np.ndarray, cap: float,
                  max_ideals: int) -> Evaluation | None:
    """The placement on the chips ``designs`` of fewest watts, then least area, whose every stage's load is
    at most ``cap`` (:func:`.frontier.least_power_dp` on the sub-multisets of those chips); ``None`` if none."""
    problem, distinct = _chips_of(workload, designs, times)
    run = least_power_dp(problem, build_layers(problem), [d.tdp_w for d in distinct],
                         [d.area_mm2 for d in distinct], cap, max_ideals=max_ideals)
    if run.plan is None:
        return None
    return Evaluation(run.time_ms, run.time_ms, run.plan, stage_designs(run.plan, distinct), run.power_w,
                      run.area_mm2)


class _Evaluator:
    """The placements of the design combinations a baseline tries (rows of ``space``), counting them
    and keeping the best; ``progress`` hears, every :data:`PROGRESS_S` seconds, how many combinations it
    has been asked for (of ``planned``, where the baseline knows: random's draws, which may repeat one), how
    many distinct ones it has placed, and the best max load so far. Each placement is a DP over
    the combination's distinct designs, whose work grows exponentially with their number, so a
    combination of many chips of different designs takes seconds to minutes. A call returns the
    combination's placement of least score (for throughput, the DP's plan of least max load; per watt,
    of the best plans of every chip count, the one the tie-break prefers); :meth:`result` chooses
    among all combinations by :func:`.result.preferred`."""

    def __init__(self, workload: Workload, space: Candidates, chips: int, objective: str, method: str,
                 progress: Callable[[str], None] | None = None, planned: int | None = None,
                 max_ideals: int = DEFAULT_MAX_IDEALS) -> None:
        self.workload, self.space, self.chips, self.objective = workload, space, chips, objective
        self.max_ideals = max_ideals
        self.method, self.progress, self.planned = method, progress, planned
        self.row = {d: i for i, d in enumerate(space.designs)}
        self.calls, self.asked = 0, 0
        self.best: Evaluation | None = None
        self.seen: dict[tuple[Design, ...], list[Evaluation]] = {}
        self.started = self.said = time.perf_counter()

    def _report(self) -> None:
        now = time.perf_counter()
        if self.progress is None or now - self.said < PROGRESS_S:
            return
        self.said = now
        done = f"{self.calls:,} design combinations placed"
        if self.planned is not None:
            done = f"{self.asked:,}/{self.planned:,} draws, {done}"
        best = "none placed yet" if self.best is None else f"best {self.best.time_ms:.6g} ms per batch"
        self.progress(f"{self.method} baseline: {done}, {best}, {now - self.started:.1f} s")

    def _times(self, key: tuple[Design, ...]) -> np.ndarray:
        return self.space.times[[self.row[d] for d in key]]

    def __call__(self, designs: Sequence[Design]) -> Evaluation:
        # one design: on every chip; several: one chip each (WHAM's per-stage picks, fewer than the chips when
        # the split it starts from leaves chips empty)
        designs = (designs[0],) * self.chips if len(designs) == 1 else tuple(designs)
        key = tuple(sorted(designs))  # the DP orders the chips itself
        self.asked += 1
        if key not in self.seen:
            try:
                self.seen[key] = _placements(self.workload, key, self._times(key), self.objective, self.max_ideals)
            except KeyboardInterrupt:   # the baseline's words, not those of the one DP run it stopped
                placed = counted(self.calls, "design combination", "design combinations")
                raise KeyboardInterrupt(f"interrupted after {placed} placed by the {self.method} baseline") from None
            self.calls += 1
        answer = preferred(e.ranked for e in self.seen[key])
        if answer is not None and (self.best is None or answer.score < self.best.score):
            self.best = answer
        self._report()
        return answer or Evaluation(math.inf, math.inf, None, ())

    def chosen(self) -> Evaluation | None:
        """The placement the objective prefers of every combination placed (:func:`.result.preferred`); for
        throughput, each combination whose least max load ties gives its plan of fewest watts, then least
        area, under the tie bound of the least max load of all (:func:`_fewest_watts`)."""
        options = [e for found in self.seen.values() for e in found]
        if not options:
            return None
        least = min(e.score for e in options)
        if self.objective == "throughput":
            cap = tie_bound(least)
            options = [_fewest_watts(self.workload, key, self._times(key), cap, self.max_ideals) or found[0]
                       for key, found in self.seen.items() if found and found[0].score <= cap]
        return preferred((e.ranked for e in options), least)

    def result(self, method: str, start: float, details: dict | None = None) -> BaselineResult:
        best = self.chosen()
        if best is None:
            raise NoPlacement("model", "has no placement on any design the baseline tried (node memory)")
        throughput = throughput_of(best.time_ms)
        value = throughput / best.power_w if self.objective == "perf-per-watt" else throughput
        return BaselineResult(method, value, throughput, best.designs, best.plan, self.calls,
                              time.perf_counter() - start, details or {})


def throughput_of(time_ms: float) -> float:
    """Batches per second at ``time_ms`` ms per batch."""
    return 1000.0 / time_ms if time_ms > 0 else math.inf


@parameters.keywords_checked
def fixed(model: Any, chips: int, area: float, power: float, *, grid: Any = None, objective: str = "throughput",
          max_ideals: int = DEFAULT_MAX_IDEALS) -> BaselineResult:
    """The TPU-like design (module docstring) on all ``chips``; an :class:`InvalidParameterError`
    (parameter ``area``) when it does not fit the budgets. ``max_ideals``: the most ideals each DP
    enumerates (as for the exact method)."""
    start = time.perf_counter()
    workload, grid, space, chips = _setup(model, chips, area, power, grid, objective, max_ideals)
    design = Design(*(_nearest(getattr(TPU_LIKE, name), values) for name, values in zip(PARAMETERS, grid.values)))
    if design not in space.designs:   # the budgets it exceeds, named
        need = f"{format_number(design.area_mm2)} mm² and {format_number(design.tdp_w)} W"
        chip = f"the TPU-like design {design.label} ({need}), the fixed baseline's chip"
        if design.area_mm2 > area and design.tdp_w > power:
            raise InvalidParameterError("area", f"{format_number(area)} mm² and power={format_number(power)} W are "
                                                f"below {chip}")
        if design.tdp_w > power:
            raise InvalidParameterError("power", f"{format_number(power)} W is below {chip}")
        raise InvalidParameterError("area", f"{format_number(area)} mm² is below {chip}")
    run = _Evaluator(workload, space, chips, objective, "fixed", max_ideals=max_ideals)
    run((design,))
    return run.result("fixed", start, {"design": design.label})


def _nearest(target: float, values: Sequence[float]) -> float:
    """The value of ``values`` nearest to ``target`` on a log scale (the smaller on a tie)."""
    return min(values, key=lambda v: (abs(math.log(v / target)), v))


@parameters.keywords_checked
def random_search(model: Any, chips: int, area: float, power: float, *, grid: Any = None,
                  objective: str = "throughput", homogeneous: bool = False, budget: int = 64, seed: int = 0,
                  progress: Callable[[str], None] | None = None, max_ideals: int = DEFAULT_MAX_IDEALS
                  ) -> BaselineResult:
    """The best of ``budget`` uniformly drawn design combinations (one design for all chips when
    ``homogeneous``), drawn with ``numpy.random.default_rng(seed)``, each placed by the DP; ``progress``
    hears how far the search is every few seconds. ``max_ideals``: the most ideals each DP enumerates."""
    start = time.perf_counter()
    workload, grid, space, chips = _setup(model, chips, area, power, grid, objective, max_ideals)
    designs = space.designs
    homogeneous = parameters.flag("homogeneous", homogeneous)
    budget = parameters.integer("budget", budget, smallest=1)
    seed = parameters.integer("seed", seed, largest=parameters.MAX_SEED)
    progress = parameters.callback("progress", progress)
    rng = np.random.default_rng(seed)
    run = _Evaluator(workload, space, chips, objective, "random", progress, budget, max_ideals)
    width = 1 if homogeneous else chips
    for _ in range(budget):
        run(tuple(designs[i] for i in rng.integers(len(designs), size=width)))
    return run.result("random", start, {"budget": budget, "seed": seed})


@parameters.keywords_checked
def wham(model: Any, chips: int, area: float, power: float, *, grid: Any = None, objective: str = "throughput",
         homogeneous: bool = False, top_k: int = 5, progress: Callable[[str], None] | None = None,
         max_ideals: int = DEFAULT_MAX_IDEALS) -> BaselineResult:
    """The WHAM-like search (module docstring): stages, per-stage local search keeping ``top_k``
    designs, global pick; ``progress`` hears how far the global pick is every few seconds. ``max_ideals``:
    the most ideals each DP enumerates."""
    start = time.perf_counter()
    workload, grid, space, chips = _setup(model, chips, area, power, grid, objective, max_ideals)
    designs = space.designs
    homogeneous = parameters.flag("homogeneous", homogeneous)
    top_k = parameters.integer("top_k", top_k, smallest=1)
    progress = parameters.callback("progress", progress)
    run = _Evaluator(workload, space, chips, objective, "wham", progress, max_ideals=max_ideals)
    smallest = min(designs, key=lambda d: (d.area_mm2, d.tdp_w))
    start_plan = run((smallest,)).plan
    if start_plan is None:
        chip = "chip" if chips == 1 else "chips"
        raise NoPlacement("model", f"has no placement on {chips} {chip} of {smallest.label} (node memory)")
    stages = _stage_nodes(start_plan, workload)
    row = {d: i for i, d in enumerate(designs)}
    tops, local = [], 0
    for nodes in stages:
        top, steps = _local_search(space, row, nodes, smallest, grid, top_k, objective == "perf-per-watt")
        tops.append(top)
        local += steps
    if homogeneous:
        for design in dict.fromkeys(itertools.chain.from_iterable(tops)):
            run((design,))
    else:
        first = [top[0] for top in tops]
        run(first)
        for s, top in enumerate(tops):
            for other in top[1:]:
                run(first[:s] + [other] + first[s + 1:])
    return run.result("wham", start, {"top_k": top_k, "local_steps": local, "stages": len(stages)})


def _stage_nodes(plan: Any, workload: Workload) -> list[list[int]]:
    """Node positions of each stage of ``plan`` in pipeline order (stages without nodes left out)."""
    position = {node.id: i for i, node in enumerate(workload.instance.nodes)}
    return [[position[v] for v in device.nodes] for device in plan.devices if device.nodes]


def _neighbours(design: Design, grid: Grid, row: dict[Design, int]) -> list[Design]:
    """Designs within the budgets (keys of ``row``) one grid step up in one parameter, or one step up
    in one and one down in another (steps between the sorted values of each parameter)."""
    ladders = [sorted(values) for values in grid.values]
    index = [ladder.index(getattr(design, name)) for name, ladder in zip(PARAMETERS, ladders)]
    out = []
    for up in range(len(PARAMETERS)):
        if index[up] + 1 >= len(ladders[up]):
            continue
        for down in [None] + [p for p in range(len(PARAMETERS)) if p != up and index[p] > 0]:
            moved = list(index)
            moved[up] += 1
            if down is not None:
                moved[down] -= 1
            candidate = Design(*(ladder[i] for ladder, i in zip(ladders, moved)))
            if candidate in row:
                out.append(candidate)
    return out


def _local_search(space: Candidates, row: dict[Design, int], nodes: list[int], start: Design, grid: Grid,
                  top_k: int, per_watt: bool) -> tuple[list[Design], int]:
    """Hill climbing for the stage of node positions ``nodes`` (module docstring): the ``top_k`` best
    designs met, best first, and the number of moves made. A design's score is the stage's time on
    it, times its TDP when ``per_watt`` (WHAM's throughput/TDP)."""
    def stage_times(designs: Sequence[Design]) -> np.ndarray:
        return space.times[np.ix_([row[d] for d in designs], nodes)]

    def watts(designs: Sequence[Design]) -> np.ndarray:
        return np.array([d.tdp_w if per_watt else 1.0 for d in designs])

    seen = {start: float(stage_times([start]).sum() * watts([start])[0])}
    current, steps = start, 0
    while True:
        times = stage_times([current])[0]
        order = np.argsort(-times, kind="stable")
        share = np.cumsum(times[order]) / max(float(times.sum()), 1e-300)
        critical = order[: int(np.searchsorted(share, CRITICAL_SHARE)) + 1]
        moves = _neighbours(current, grid, row)
        if not moves:
            break
        table = stage_times(moves)
        scale = watts(moves)
        score, crit = table.sum(axis=1) * scale, table[:, critical].sum(axis=1) * scale
        for design, value in zip(moves, score):
            seen.setdefault(design, float(value))
        better = np.flatnonzero(score < seen[current] * (1 - 1e-12))
        if better.size == 0:
            break
        current = moves[better[np.lexsort((score[better], crit[better]))[0]]]
        steps += 1
    ranked = sorted(seen, key=lambda d: (seen[d], d.tdp_w, d.area_mm2, d))
    return ranked[:top_k], steps
