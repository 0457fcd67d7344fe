"""What the baselines share: option checks, their placement units, and turning a plan into a Solution.

A baseline is a heuristic: its plan carries no proof, so its Solution has
``bound`` 0 and status ``feasible`` when the independent evaluator accepts the
plan, ``error`` (plan attached, first violation in the message) when it does
not, and ``no_solution`` when the heuristic produced no plan. The objective and
the contiguity class of a baseline's Solution are always the evaluator's: the
class is the finest one the plan belongs to (``stages``, ``sets`` or ``none``),
whatever class was asked for, so that the plan is compared with the optimum of
its own class.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from placement.errors import InvalidParameterError
from placement.problem.instance import ACCELERATOR, CPU, Instance
from placement.plan import DeviceAssignment, Plan
from placement.solution import Solution, Status
from placement.solvers.ideals import contract
from placement.verification.evaluate import evaluate, pipeline_order
from placement.verification.latency import evaluate_latency

THROUGHPUT = "throughput"
LATENCY = "latency"


def check_objective(options: Mapping[str, Any], method: str, objective: str) -> None:
    """Refuse an ``objective`` option other than the one ``method`` optimises (absent or None: fine)."""
    asked = options.get("objective")
    if asked is not None and asked != objective:
        from placement.solvers.baselines import baseline_names

        other = {kind: ", ".join(baseline_names(kind)) for kind in (THROUGHPUT, LATENCY)}
        raise InvalidParameterError("objective", f"must be {objective!r} for method {method!r}, not {asked!r}; "
                                                 f"for {asked} use {other.get(asked, 'another method')}")


@dataclass(frozen=True)
class TwoTypes:
    """Positions of the accelerator and CPU device types (``None`` when absent) and their counts."""

    acc: int | None
    cpu: int | None
    accelerators: int
    cpus: int
    memory: float


def other_types_refusal(method: str, names: Iterable[str], problem: Instance) -> InvalidParameterError:
    """The refusal of a two-type ``method`` on ``problem``, whose device types ``names`` are neither
    ``accelerator`` nor ``cpu``: every one of them named (naming one alone made renaming it look like the
    fix), and the exact methods that take any catalogue and solve ``method``'s objective (read from the
    registry); the latency MILP takes one type that pays no communication, so none is named for a
    latency method where the instance has more."""
    from placement.solvers.registry import ANY_CATALOGUE, METHODS

    spec = METHODS.get(method)
    objectives = set(spec.objectives) if spec is not None else set()
    if sum(1 for t in problem.device_types if not t.pays_comm and t.count > 0) > 1:
        objectives.discard(LATENCY)
    # the exact methods that solve what this one does (a latency baseline's is not the DP) on any catalogue
    others = [name for name, other in METHODS.items()
              if other.exact and other.catalogue == ANY_CATALOGUE and objectives & set(other.objectives)]
    instead = (f" (method {others[0]!r} takes any device types)" if len(others) == 1 else
               f" (methods {_listing(others)} take any device types)" if others else "")
    return InvalidParameterError("method", f"{method!r} takes the device types {ACCELERATOR!r} and {CPU!r} only; "
                                           f"this instance has {_listing(sorted(names))}{instead}")


def _listing(names: list[str]) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b' and 'c'``."""
    return repr(names[0]) if len(names) == 1 else ", ".join(map(repr, names[:-1])) + f" and {names[-1]!r}"


def two_types(problem: Instance, method: str) -> TwoTypes:
    """The two-type model of Tarnawski et al.: device types named ``accelerator`` and ``cpu``."""
    names = {t.name: i for i, t in enumerate(problem.device_types)}
    unknown = set(names) - {ACCELERATOR, CPU}
    if unknown:
        raise other_types_refusal(method, unknown, problem)
    acc, cpu = names.get(ACCELERATOR), names.get(CPU)
    types = problem.device_types
    return TwoTypes(acc, cpu, types[acc].count if acc is not None else 0,
                    types[cpu].count if cpu is not None else 0,
                    types[acc].memory if acc is not None else 0.0)


@dataclass(frozen=True)
class Unit:
    """An inseparable block: node positions that every contiguous plan keeps on one device.

    ``acc`` is the accelerator time (``None`` if a node is unsupported there),
    ``cpu`` the CPU time (``None`` likewise), ``memory`` the bytes.
    """

    members: tuple[int, ...]
    acc: float | None
    cpu: float | None
    memory: float


def _times(problem: Instance, members: tuple[int, ...], t: int | None) -> float | None:
    if t is None:
        return None
    total = 0.0
    for v in members:
        p = problem.nodes[v].times[t]
        if p is None:
            return None
        total += p
    return total


def contracted_units(problem: Instance, kinds: TwoTypes) -> tuple[list[Unit], tuple[tuple[int, ...], ...]]:
    """Colour classes with cycles of the extended forward graph merged, in a topological order; and
    the successors of each unit (by index; every edge goes to a higher index).

    These are the supernodes of :func:`placement.solvers.ideals.contract` without
    its zero-cost merges: a class and the backward mates of its forward nodes,
    and classes that a pipeline cannot separate, form one unit.
    """
    contraction = contract(problem, merge_zero_cost=False)
    units = [Unit(members, _times(problem, members, kinds.acc), _times(problem, members, kinds.cpu),
                  sum(problem.nodes[v].memory for v in members))
             for members in contraction.members]
    return units, contraction.succ


def units_in_topological_order(problem: Instance, kinds: TwoTypes) -> list[Unit]:
    """The units of :func:`contracted_units`, in their topological order."""
    return contracted_units(problem, kinds)[0]


def build_plan(problem: Instance, held: Mapping[tuple[str, int], list[int]],
               calls: Mapping[tuple[str, int], list[list[int]]] | None = None) -> Plan:
    """A plan from ``(type name, device number) -> node positions``; empty devices dropped.

    Devices come in a pipeline order when one exists, else accelerators first,
    each type by device number. ``calls`` (optional) gives the node positions of
    each call of a device, in order.
    """
    calls = calls or {}
    devices = []
    for key in sorted(held, key=lambda k: (k[0] != ACCELERATOR, k[0], k[1])):
        positions = sorted(held[key])
        if not positions:
            continue
        ids = tuple(problem.nodes[v].id for v in positions)
        device_calls = tuple(tuple(problem.nodes[v].id for v in call) for call in calls.get(key, []) if call)
        if len(device_calls) <= 1:
            device_calls = ()
        devices.append(DeviceAssignment(key[0], ids, device_calls))
    plan = Plan(tuple(devices))
    order = pipeline_order(problem, plan)
    if order is not None:
        plan = Plan(tuple(plan.devices[d] for d in order))
    return plan


def _violation_summary(violations: tuple[str, ...]) -> str:
    count = len(violations)
    return f"{count} violation{'' if count == 1 else 's'}, first: {violations[0]}"


def throughput_solution(problem: Instance, plan: Plan | None, method: str, start: float,
                        stats: dict[str, Any] | None = None, note: str = "", searched: str = "none") -> Solution:
    """The Solution of a throughput baseline: the evaluator's max load, class and verdict; without a plan,
    the class the method ``searched`` (``stages`` for a pipeline partitioner)."""
    runtime = time.perf_counter() - start
    stats = dict(stats or {})
    if plan is None:
        return Solution(Status.NO_SOLUTION, None, math.inf, 0.0, method=method, contiguity=searched,
                        runtime_s=runtime, stats=stats, message=note or f"{method} found no plan")
    ev = evaluate(problem, plan, "none")
    stats["finest_class"] = ev.finest_class
    notes = [note] if note else []
    if ev.valid:
        status = Status.FEASIBLE
    else:
        status = Status.ERROR
        notes.insert(0, f"the plan is invalid ({_violation_summary(ev.violations)})")
    return Solution(status, plan, ev.max_load, 0.0, method=method, contiguity=ev.finest_class,
                    runtime_s=runtime, stats=stats, message="; ".join(notes))


def latency_solution(problem: Instance, plan: Plan | None, method: str, start: float,
                     stats: dict[str, Any] | None = None, note: str = "", evaluation: Any = None) -> Solution:
    """The Solution of a latency baseline: the latency evaluator's value and verdict (``evaluation``: the
    latency evaluator's result for ``plan`` where the caller has it already)."""
    runtime = time.perf_counter() - start
    stats = dict(stats or {})
    if plan is None:
        return Solution(Status.NO_SOLUTION, None, math.inf, 0.0, method=method, objective_kind=LATENCY,
                        contiguity="none", runtime_s=runtime, stats=stats, message=note or f"{method} found no plan")
    ev = evaluate_latency(problem, plan) if evaluation is None else evaluation
    finest = evaluate(problem, plan, "none").finest_class
    stats["finest_class"] = finest
    notes = [note] if note else []
    if ev.valid:
        status = Status.FEASIBLE
    else:
        status = Status.ERROR
        notes.insert(0, f"the plan is invalid ({_violation_summary(ev.violations)})")
    return Solution(status, plan, ev.latency, 0.0, method=method, objective_kind=LATENCY, contiguity=finest,
                    runtime_s=runtime, stats=stats, message="; ".join(notes))
