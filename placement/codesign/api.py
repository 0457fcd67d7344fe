"""``placement.codesign(...)``: co-design chips and the pipeline that runs a model on them.

The one entry point of :mod:`placement.codesign`: it checks the parameters, loads the model
and the grid, and runs the exact method (:mod:`.exact`), the exhaustive check
(:mod:`.exhaustive`) or a baseline (:mod:`.baselines`), here or, given a Dask scheduler's
address, on that cluster.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from placement import parameters
from placement.codesign.result import OBJECTIVES, CodesignResult
from placement.codesign.template import AREA_BUDGET_MM2
from placement.solvers.ideals import DEFAULT_MAX_IDEALS

#: The baselines ``baseline=`` names, with the function of :mod:`.baselines` each runs.
BASELINES = {"wham": "wham", "random": "random_search", "fixed": "fixed"}


@parameters.keywords_checked
def codesign(model: Any, *, chips: int, power: float, area: float = AREA_BUDGET_MM2, homogeneous: bool = False,
             grid: Any = None, objective: str = "throughput", exhaustive: bool = False, baseline: str | None = None,
             scheduler: str | None = None, max_combinations: int | None = None,
             max_ideals: int | None = None, progress: Callable[[str], None] | None = None) -> CodesignResult:
    """The chip designs and pipeline placement of ``model`` on at most ``chips`` chips that maximise
    ``objective`` (``throughput``: batches per second; ``perf-per-watt``: that per watt of the
    chips' summed TDP), every chip within ``area`` mm² and ``power`` W, over the designs of ``grid``
    (a grid file, a dict, or ``None`` for the default WHAM-scale grid).

    ``model``: a model file (operators per node, :mod:`placement.codesign.workload`), its decoded
    JSON, or a :class:`~placement.codesign.workload.Workload`. ``homogeneous``: one design for every
    chip; otherwise a design per stage. ``exhaustive``: run the DP on every design combination
    instead (the independent check; refused with the count past ``max_combinations``, default
    20,000). ``baseline``: ``wham``, ``random`` or ``fixed`` instead of the exact method (status
    ``feasible``). ``scheduler``: the address of a Dask scheduler to run the call on (the model and the grid
    are read here and sent to it). ``max_ideals``:
    the most ideals each DP enumerates (``None``: the default of :func:`placement.solve`, 200,000).
    ``progress`` receives one-line messages while the exhaustive check, or the ``wham`` or ``random``
    baseline, runs here (not on a cluster).
    Returns a :class:`~placement.codesign.result.CodesignResult` whose ``status`` is ``optimal`` when
    proven over the grid. Raises :class:`InvalidParameterError` for a bad parameter,
    :class:`InvalidInstanceError` for a bad model or grid, :class:`LimitExceededError` past a limit.
    """
    chips = parameters.integer("chips", chips, smallest=1)
    area = parameters.number("area", area, positive=True)
    power = parameters.number("power", power, positive=True)
    homogeneous = parameters.flag("homogeneous", homogeneous)
    exhaustive = parameters.flag("exhaustive", exhaustive)
    objective = parameters.one_of("objective", objective, OBJECTIVES)
    if baseline is not None:
        parameters.one_of("baseline", baseline, BASELINES)
        if exhaustive:
            from placement.errors import InvalidParameterError
            raise InvalidParameterError("baseline", "and exhaustive=True are two methods: ask for one")
    max_ideals = parameters.integer("max_ideals", max_ideals, smallest=1, optional=True) or DEFAULT_MAX_IDEALS
    progress = parameters.callback("progress", progress)
    from placement.codesign.exhaustive import DEFAULT_MAX_COMBINATIONS
    max_combinations = parameters.integer("max_combinations", max_combinations, smallest=1, optional=True)
    if max_combinations is not None and not exhaustive:
        from placement.errors import InvalidParameterError
        raise InvalidParameterError("max_combinations", "limits the runs of exhaustive=True, which was not asked for")
    from placement.codesign.grid import load_grid
    from placement.codesign.workload import load_workload

    # read here, where the paths are: a cluster's workers may run in another folder or on other machines
    workload, design_grid = load_workload(model), load_grid(grid)
    if scheduler is not None:
        return _on_cluster(scheduler, workload, chips=chips, power=power, area=area, homogeneous=homogeneous,
                           grid=design_grid, objective=objective, exhaustive=exhaustive, baseline=baseline,
                           max_combinations=max_combinations, max_ideals=max_ideals)
    max_combinations = max_combinations or DEFAULT_MAX_COMBINATIONS
    if baseline is not None:
        return _baseline(baseline, workload, design_grid, chips, area, power, homogeneous, objective, progress,
                         max_ideals)
    if exhaustive:
        from placement.codesign.exhaustive import solve_exhaustive
        return solve_exhaustive(workload, design_grid, chips, area, power, homogeneous=homogeneous,
                                objective=objective, max_combinations=max_combinations, max_ideals=max_ideals,
                                progress=progress)
    from placement.codesign.exact import solve_exact
    return solve_exact(workload, design_grid, chips, area, power, homogeneous=homogeneous, objective=objective,
                       max_ideals=max_ideals)


def _baseline(name: str, workload: Any, grid: Any, chips: int, area: float, power: float, homogeneous: bool,
              objective: str, progress: Callable[[str], None] | None, max_ideals: int) -> CodesignResult:
    """A baseline of :mod:`.baselines` as a :class:`CodesignResult` (status ``feasible``), its plan
    re-checked by the evaluator (:func:`.outcome.finish`); ``infeasible``, as the exact method says it, where
    no design of the grid is within the budgets."""
    from placement.codesign import baselines
    from placement.codesign.outcome import Best, finish, infeasible
    from placement.codesign.space import candidates

    start = time.perf_counter()
    space = candidates(workload, grid, area, power)
    if not space.designs:   # the exact method's answer: no design within the budgets
        return infeasible(workload, space, chips, homogeneous or name == "fixed", objective, name, start, area, power)
    options: dict[str, Any] = {"max_ideals": max_ideals}
    if name != "fixed":
        options.update(homogeneous=homogeneous, progress=progress)
    try:
        found = getattr(baselines, BASELINES[name])(workload, chips, area, power, grid=grid, objective=objective,
                                                    **options)
    except baselines.NoPlacement:
        # a chip's memory is the same on every design, so no design holds the model on these chips: the exact
        # method's answer, infeasible
        return finish(workload, space, None, chips, homogeneous or name == "fixed", objective, name, start, {}, 0,
                      evaluated=0)
    time_ms = 1000.0 / found.throughput if found.throughput > 0 else math.inf
    score = time_ms * sum(d.tdp_w for d in found.designs) if objective == "perf-per-watt" else time_ms
    result = finish(workload, space, Best(score, time_ms, found.plan, tuple(dict.fromkeys(found.designs))), chips,
                    homogeneous or name == "fixed", objective, name, start, {}, found.evaluated, status="feasible",
                    evaluated=found.evaluated)
    return result


def _on_cluster(scheduler: str, model: Any, **options: Any) -> CodesignResult:
    """:func:`codesign` run on the Dask cluster whose scheduler is at ``scheduler``."""
    from placement.codesign.sweep import connect, require_dask
    from placement.errors import InvalidParameterError

    require_dask("a run on a Dask scheduler needs Dask")
    if not isinstance(scheduler, str) or not scheduler:
        raise InvalidParameterError("scheduler", f"must be a Dask scheduler address, not {scheduler!r}")
    client = connect(scheduler)
    try:
        return client.submit(codesign, model, pure=False, **options).result()
    finally:
        client.close()
