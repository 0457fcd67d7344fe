"""Local search with random restarts: move one colour class at a time (throughput baseline, DESIGN.md §3).

Model
-----
A state assigns every colour class to one device (all accelerators and CPU
cores of the instance are available); loads are those of DESIGN.md §2 (for
training graphs forward and backward loads add up). A *move* takes one class
from its device ``A`` to another device ``B`` whose type supports it and whose
memory bound still holds afterwards (decided as the evaluator decides it, on the
sizes as written: :func:`placement.problem.memory_fit.fits`). Only the loads of ``A`` and ``B`` change
(a third device's boundary depends only on which nodes it holds), and a move is
taken when it lowers the larger of those two loads:

    max(load'(A), load'(B)) < max(load(A), load(B)),

or, whatever the loads, when ``A`` holds more memory than its bound and the class
takes some (a *repair*: the greedy fill may leave a device over its bound, and no
move puts one over). The memory over the bounds therefore never rises, and falls with
every repair; between repairs the max-load never rises and the loads sorted in
decreasing order fall lexicographically with every move, so a climb ends; it ends
when no move improves (a local optimum), classes and destinations being tried in a
random order and the first improving move taken. Restart 0 starts from the greedy
topological fill (:mod:`.greedy`); restart ``r > 0`` from the greedy fill of a
random topological order of the same units. The best plan over all restarts is
returned: the valid one of lowest max-load as the independent evaluator computes it
(the earlier restart on ties), or, where no restart ends valid, the one of lowest
max-load, which the solution then reports as failing verification; more restarts
never return a worse plan. Contiguity is not considered: the plan may belong to any
class, and the Solution reports the finest one.

Options: ``restarts`` (default 10), ``seed`` (default 0; the same seed gives
the same plan), ``time_limit`` (seconds; no new move or restart starts after
it, the best plan so far is returned and ``stats["stopped_by_time_limit"]`` is
set; the first restart's greedy fill is always made and evaluated, so that a plan is returned
even where the limit ran out while the graph was read into the search). Ctrl-C ends the
search the same way, the climb under way counting as a restart: the best plan goes on in a
:class:`placement.sigint.PlanInHand` (a plain interrupt where no plan was made yet).
"""

from __future__ import annotations

import math
import random
import time
from typing import Any, Callable, Iterator

from placement.errors import InvalidParameterError
from placement.problem.instance import Instance, class_index
from placement.plan import Plan
from placement.solution import Solution
from placement.solvers.baselines.common import (THROUGHPUT, TwoTypes, Unit, build_plan, check_objective,
                                                contracted_units, throughput_solution, two_types)
from placement.solvers.baselines.greedy import greedy_fill
from placement.problem.memory_fit import fits_summed
from placement.sigint import PlanInHand, absorb_echoes
from placement.solvers.chain_dp import kahn_order
from placement.verification.evaluate import evaluate

DEFAULT_RESTARTS = 10
#: seconds between progress lines at most
PROGRESS_S = 5.0
_IMPROVEMENT = 1e-9  # relative: a move must lower the pair's larger load by more than rounding can
#: the slot of a class on no slot yet (:meth:`_Climber.start`)
UNPLACED = -1


def _option_int(options: dict[str, Any], name: str, default: int, minimum: int) -> int:
    value = options.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidParameterError(name, f"must be an integer ≥ {minimum}, not {value!r}")
    return value


def random_topological_order(units: list[Unit], succ: tuple[tuple[int, ...], ...], rng: random.Random) -> list[Unit]:
    """A uniformly drawn ready unit at each step of Kahn's algorithm (units indexed as ``succ``)."""
    return [units[s] for s in kahn_order(succ, lambda ready: ready.pop(rng.randrange(len(ready))))]


class _Climber:
    """Incremental loads of one assignment of colour classes to device slots, and the moves on it."""

    def __init__(self, problem: Instance) -> None:
        nodes = problem.nodes
        self.problem = problem
        self.classes = problem.colour_classes()
        self.class_of = class_index(self.classes, len(nodes))
        self.slots = [(t, j) for t, dt in enumerate(problem.device_types) for j in range(dt.count)]
        types = problem.device_types
        self.slot_type = [t for t, _ in self.slots]
        self.pays = [types[t].pays_comm for t in self.slot_type]
        self.bound = [types[t].memory for t in self.slot_type]
        self.succ = problem.successors()
        self.nsucc = [len(s) for s in self.succ]
        self.cost = [n.out_cost for n in nodes]
        self.ctime: list[list[float | None]] = []
        self.cmem: list[float] = []
        for members in self.classes:
            row: list[float | None] = []
            for t in range(len(types)):
                times = [nodes[v].times[t] for v in members]
                row.append(None if any(p is None for p in times) else sum(times))  # type: ignore[arg-type]
            self.ctime.append(row)
            self.cmem.append(sum(nodes[v].memory for v in members))
        # per class: (u, successors of u inside the class, u inside the class) for u in X ∪ preds(X)
        preds = problem.predecessors()
        self.affected: list[list[tuple[int, int, bool]]] = []
        for members in self.classes:
            inside = set(members)
            inner = dict.fromkeys(members, 0)   # u -> its successors inside the class, read off their predecessors
            for w in members:
                for u in preds[w]:
                    inner[u] = inner.get(u, 0) + 1
            self.affected.append([(u, k, u in inside) for u, k in inner.items()])
        self.affected_cost = [[a for a in aff if self.cost[a[0]] > 0] for aff in self.affected]
        self.moves = 0    # moves made and passes begun by :func:`climb` on this state, all its climbs together,
        self.passes = 0   # counted as they happen (an interrupted climb's too)

    def start(self, class_slot: list[int]) -> None:
        """Set the assignment (a class at :data:`UNPLACED` is on no slot yet, and no slot holds its nodes) and
        compute every load from scratch."""
        self.where = list(class_slot)
        n_slots = len(self.slots)
        self.dev = [self.where[self.class_of[v]] for v in range(len(self.problem.nodes))]
        self.cnt = [[0] * len(self.dev) for _ in range(n_slots)]
        for u, targets in enumerate(self.succ):
            for w in targets:
                if self.dev[w] != UNPLACED:
                    self.cnt[self.dev[w]][u] += 1
        self.comp = [0.0] * n_slots
        self.mem = [0.0] * n_slots
        for c, d in enumerate(self.where):
            if d == UNPLACED:
                continue
            p = self.ctime[c][self.slot_type[d]]
            self.comp[d] += p if p is not None else 0.0
            self.mem[d] += self.cmem[c]
        self.over = [not fits_summed(self.mem[d], self._sizes(d), self.bound[d]) for d in range(n_slots)]
        self.comm = [0.0] * n_slots
        for d in range(n_slots):
            if not self.pays[d]:
                continue
            cnt = self.cnt[d]
            total = 0.0
            for u, cu in enumerate(self.cost):
                if cu > 0 and ((self.dev[u] == d and self.nsucc[u] > cnt[u]) or (self.dev[u] != d and cnt[u] > 0)):
                    total += cu
            self.comm[d] = total

    def load(self, d: int) -> float:
        return self.comp[d] + self.comm[d]

    def try_move(self, c: int, b: int) -> tuple[float, float] | None:
        """The changes of the source's and destination's communication if moving class ``c`` to slot ``b`` is
        allowed and improves, or repairs the source's memory (module docstring); else ``None``."""
        a = self.where[c]
        tb = self.ctime[c][self.slot_type[b]]
        if tb is None or not fits_summed(self.mem[b] + self.cmem[c], self._sizes(b, c), self.bound[b]):
            return None
        ta = self.ctime[c][self.slot_type[a]]
        da = db = 0.0
        pays_a, pays_b = self.pays[a], self.pays[b]
        if pays_a or pays_b:
            dev, cnt_a, cnt_b, nsucc, cost = self.dev, self.cnt[a], self.cnt[b], self.nsucc, self.cost
            for u, kx, inside in self.affected_cost[c]:
                du = dev[u]
                nu = nsucc[u]
                after_dev = b if inside else du
                if pays_a:
                    ca = cnt_a[u]
                    before = (nu > ca) if du == a else (ca > 0)
                    ca2 = ca - kx
                    after = (nu > ca2) if after_dev == a else (ca2 > 0)
                    if before != after:
                        da += cost[u] if after else -cost[u]
                if pays_b:
                    cb = cnt_b[u]
                    before = (nu > cb) if du == b else (cb > 0)
                    cb2 = cb + kx
                    after = (nu > cb2) if after_dev == b else (cb2 > 0)
                    if before != after:
                        db += cost[u] if after else -cost[u]
        if self.over[a] and self.cmem[c] > 0:
            return da, db      # a repair: A is over its memory bound, and B has room for the class
        new_a = self.comp[a] - (ta or 0.0) + self.comm[a] + da
        new_b = self.comp[b] + tb + self.comm[b] + db
        old = max(self.load(a), self.load(b))
        if max(new_a, new_b) < old * (1.0 - _IMPROVEMENT):   # relative at every scale, as times may be tiny
            return da, db
        return None

    def join_change(self, c: int, b: int) -> float | None:
        """The change of slot ``b``'s communication if class ``c``, on no slot yet, joins it, where ``b``'s type
        supports the class and has room for it; else ``None``. Only ``b``'s load changes: the nodes of
        the class count as on no slot until then (a boundary of ``b`` with one of them is paid)."""
        tb = self.ctime[c][self.slot_type[b]]
        if tb is None or not fits_summed(self.mem[b] + self.cmem[c], self._sizes(b, c), self.bound[b]):
            return None
        return self.comm_change(self.affected_cost[c], b)

    def comm_change(self, affected: list[tuple[int, int, bool]], b: int) -> float:
        """The change of slot ``b``'s communication if nodes on no slot yet join it: ``affected`` holds, for
        each node ``u`` with a cost among them or feeding them, how many of ``u``'s successors join and
        whether ``u`` does (as :attr:`affected_cost` holds them for one class)."""
        if not self.pays[b]:
            return 0.0
        db = 0.0
        dev, cnt_b, nsucc, cost = self.dev, self.cnt[b], self.nsucc, self.cost
        for u, kx, inside in affected:
            cb, nu = cnt_b[u], nsucc[u]
            before = (nu > cb) if dev[u] == b else (cb > 0)
            after = (nu > cb + kx) if inside or dev[u] == b else (cb + kx > 0)
            if before != after:
                db += cost[u] if after else -cost[u]
        return db

    def join(self, c: int, b: int, db: float) -> None:
        """Put class ``c``, on no slot yet, on slot ``b``, whose communication changes by ``db``
        (:meth:`join_change`)."""
        for u, kx, _ in self.affected[c]:
            if kx:
                self.cnt[b][u] += kx
        for v in self.classes[c]:
            self.dev[v] = b
        self.where[c] = b
        self.comp[b] += self.ctime[c][self.slot_type[b]] or 0.0
        self.comm[b] += db
        self.mem[b] += self.cmem[c]
        self.over[b] = not fits_summed(self.mem[b], self._sizes(b), self.bound[b])

    def apply(self, c: int, b: int, da: float, db: float) -> None:
        a = self.where[c]
        for u, kx, _ in self.affected[c]:
            if kx:
                self.cnt[a][u] -= kx
                self.cnt[b][u] += kx
        for v in self.classes[c]:
            self.dev[v] = b
        self.where[c] = b
        self.comp[a] -= self.ctime[c][self.slot_type[a]] or 0.0
        self.comp[b] += self.ctime[c][self.slot_type[b]] or 0.0
        self.comm[a] += da
        self.comm[b] += db
        self.mem[a] -= self.cmem[c]
        self.mem[b] += self.cmem[c]
        for d in (a, b):
            self.over[d] = not fits_summed(self.mem[d], self._sizes(d), self.bound[d])

    def _sizes(self, d: int, joining: int | None = None) -> Iterator[float]:
        """The memory of the nodes on slot ``d`` (and of class ``joining``): read only where a sum is near
        the bound, to decide it as the evaluator does (:func:`placement.problem.memory_fit.fits`)."""
        for c, where in enumerate(self.where):
            if where == d or c == joining:
                yield from (self.problem.nodes[v].memory for v in self.classes[c])

    def plan(self) -> Plan:
        types = self.problem.device_types
        held: dict[tuple[str, int], list[int]] = {}
        for c, d in enumerate(self.where):
            t, j = self.slots[d]
            held.setdefault((types[t].name, j), []).extend(self.classes[c])
        return build_plan(self.problem, held)


def climb(climber: _Climber, rng: random.Random, deadline: float,
          tick: Callable[[float, int], None] | None = None) -> tuple[int, int, bool]:
    """Improving moves (module docstring) from the climber's assignment until none improves or ``deadline``
    passes: classes, and destinations for each, in a random order, the first improving move taken; the loads
    computed again from scratch after every pass. ``tick(now, moves)`` is called before each class is tried.
    Returns the moves made, the passes begun and whether the deadline stopped the climb; the climber counts
    them too as they happen (:attr:`_Climber.moves`, :attr:`_Climber.passes`)."""
    moves0, passes0 = climber.moves, climber.passes
    improved = True
    while improved:
        improved = False
        climber.passes += 1
        classes = list(range(len(climber.classes)))
        rng.shuffle(classes)
        destinations = list(range(len(climber.slots)))
        for c in classes:
            now = time.perf_counter()
            if now > deadline:
                return climber.moves - moves0, climber.passes - passes0, True
            if tick is not None:
                tick(now, climber.moves - moves0)
            rng.shuffle(destinations)
            for b in destinations:
                if b == climber.where[c]:
                    continue
                delta = climber.try_move(c, b)
                if delta is not None:
                    climber.apply(c, b, *delta)
                    climber.moves += 1
                    improved = True
                    break
        climber.start(climber.where)  # exact loads again: no drift across passes
    return climber.moves - moves0, climber.passes - passes0, False


def _slots_of_plan(climber: _Climber, problem: Instance, plan: Plan) -> list[int]:
    """Class -> slot for a plan that keeps colour classes together (as the greedy fill does)."""
    slot_of: dict[tuple[str, int], int] = {}
    for k, (t, j) in enumerate(climber.slots):
        slot_of[(problem.device_types[t].name, j)] = k
    seen: dict[str, int] = {}
    where = [0] * len(climber.classes)
    for dev in plan.devices:
        j = seen.get(dev.type, 0)
        seen[dev.type] = j + 1
        k = slot_of.get((dev.type, j), 0)  # a device the instance lacks: the evaluator reports it
        for v in dev.nodes:
            where[climber.class_of[problem.index_of(v)]] = k
    return where


def _ranking(problem: Instance, plan: Plan) -> tuple[bool, float]:
    """``(invalid, max-load)`` of ``plan`` as the independent evaluator computes them: lower is better,
    valid plans first."""
    ev = evaluate(problem, plan, "none")
    return not ev.valid, ev.max_load


def solve_local_search(problem: Instance, **options: Any) -> Solution:
    """Local search of the module docstring; uses options ``restarts``, ``seed``, ``time_limit`` and
    ``progress`` (a line every :data:`PROGRESS_S` seconds at most: restarts done, best value)."""
    check_objective(options, "local-search", THROUGHPUT)
    restarts = _option_int(options, "restarts", DEFAULT_RESTARTS, 1)
    seed = _option_int(options, "seed", 0, 0)
    time_limit = options.get("time_limit")
    start = time.perf_counter()
    deadline = start + time_limit if time_limit is not None else math.inf
    kinds: TwoTypes = two_types(problem, "local-search")
    units, unit_succ = contracted_units(problem, kinds)
    climber = _Climber(problem)
    rng = random.Random(seed)
    best_plan: Plan | None = None
    best_key = (True, math.inf)     # (invalid, max-load): valid plans first
    best_restart = -1
    done = 0
    stopped = interrupted = False
    progress = options.get("progress")
    said = start
    if progress is not None and time.perf_counter() - said >= PROGRESS_S:   # a graph of 10^5 nodes: seconds
        progress(f"local search: {len(climber.classes):,} classes over {len(climber.slots):,} devices")
    try:
        for r in range(restarts):
            if r > 0 and time.perf_counter() > deadline:   # the first restart's start is the plan in hand
                stopped = True
                break
            order = units if r == 0 else random_topological_order(units, unit_succ, rng)
            climber.start(_slots_of_plan(climber, problem, greedy_fill(problem, kinds, order)))

            def tick(now: float, _climbed: int, r: int = r) -> None:
                nonlocal said
                if progress is not None and now - said >= PROGRESS_S:   # a restart on a large graph is long
                    said = now
                    best = f"best {best_key[1]:.6g}" if not best_key[0] else "no valid plan yet"
                    progress(f"local search: restart {r + 1} of {restarts}, {climber.moves:,} moves so far, {best}")

            _, _, stopped = climb(climber, rng, deadline, tick)
            done += 1
            plan = climber.plan()
            key = _ranking(problem, plan)
            if key < best_key:
                best_plan, best_key, best_restart = plan, key, r
            if stopped:
                break
            if progress is not None and time.perf_counter() - said >= PROGRESS_S:
                said = time.perf_counter()
                best = f"best {best_key[1]:.6g}" if not best_key[0] else "no valid plan yet"
                progress(f"local search: {done} of {restarts} restarts, {best}")
    except KeyboardInterrupt:   # Ctrl-C: the best of the restarts done and of the climb under way goes on
        absorb_echoes(time.perf_counter())
        climbing = climber.plan() if hasattr(climber, "where") else None
        if climbing is not None:
            key = _ranking(problem, climbing)
            if key < best_key:
                best_plan, best_key, best_restart = climbing, key, done
        if best_plan is None:
            raise
        interrupted = True
    stats = {"restarts": done, "restarts_asked": restarts, "seed": seed, "best_restart": best_restart,
             "moves": climber.moves, "passes": climber.passes, "stopped_by_time_limit": stopped}
    if interrupted:
        raise PlanInHand(throughput_solution(problem, best_plan, "local-search", start, stats,
                                             f"interrupted after {done} of {restarts} restarts")) from None
    note = "stopped by the time limit" if stopped else ""
    return throughput_solution(problem, best_plan, "local-search", start, stats, note)

