"""Every exact method against a brute force that shares no code with the package.

The oracle below reads the instance document itself and prices every assignment with the
formulas of DESIGN.md §2, written out here in exact rational arithmetic:

* an assignment puts each colour class on one device of a type that supports all its nodes,
  within the type's count and memory bound;
* a device of a type that pays communication holding ``S`` has forward load
  ``Σ_{forward v∈S} p(v) + Σ c(u)`` over the forward nodes ``u`` of ``In(S) ∪ Out(S)``, and backward
  load alike over the backward nodes; a device that pays none has its compute only;
* ``throughput`` is the largest forward + backward load, ``throughput-gpipe`` the largest forward
  load plus the largest backward load;
* ``sets``: the forward nodes of each device are convex in the forward graph; ``stages``: the
  devices, contracted, leave the graph of forward edges (with the backward edges that touch a class
  without forward nodes mirrored onto the classes' forward representatives) acyclic;
* ``latency``: an accelerator runs at most ``calls`` convex calls one after another, each starting
  when its inputs and the device's previous call have finished and lasting
  ``Σ c(In) + Σ p + Σ c(Out)``; a CPU node starts when its inputs have finished;
* ``backward="split"`` (docs/backward-split.md, memory unbounded): a backward node's B part (half its
  time) runs on its layer's stage, its W part on a stage ``w_placement`` allows; every tensor is paid
  once by its producer and once by each other device that reads it (W reads its node's inputs and its
  layer's forward inputs).

Instances are drawn from seeded :class:`random.Random` generators (Tarnawski's format and the native
format with several device types; diamonds, fans, disconnected graphs, training graphs with colour
classes, CPU-only nodes, zero times and costs, memory that binds), so CI runs the same cases.
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

import placement
from placement import DeviceAssignment, Plan


class Oracle:
    """The brute force over one instance document."""

    def __init__(self, doc: dict) -> None:
        if "deviceTypes" in doc:
            self.types = {t["name"]: (t["count"], t.get("memory"), t.get("paysComm", True)) for t in doc["deviceTypes"]}
        else:
            self.types = {"accelerator": (doc["maxFPGAs"], doc["maxSizePerFPGA"], True),
                          "cpu": (doc["maxCPUs"], None, False)}
        self.time, self.size, self.back, self.cost = {}, {}, {}, {}
        classes: dict = {}
        for n in doc["nodes"]:
            v = n["id"]
            if "times" in n:
                self.time[v] = {t: None if p is None else Fraction(p) for t, p in n["times"].items()}
            else:
                self.time[v] = {"accelerator": Fraction(n["fpgaLatency"]) if n["supportedOnFpga"] else None,
                                "cpu": Fraction(n["cpuLatency"])}
            self.size[v], self.back[v], self.cost[v] = Fraction(n["size"]), bool(n["isBackwardNode"]), Fraction(0)
            classes.setdefault(("c", n["colorClass"]) if "colorClass" in n else ("v", v), []).append(v)
        self.classes = list(classes.values())
        self.ids = list(self.time)
        self.succ: dict = {v: set() for v in self.ids}
        self.pred: dict = {v: set() for v in self.ids}
        for e in doc["edges"]:
            self.succ[e["sourceId"]].add(e["destId"])
            self.pred[e["destId"]].add(e["sourceId"])
            self.cost[e["sourceId"]] = Fraction(e["cost"])
        self.reach = {v: self._reach(v, forward_only=False) for v in self.ids}
        self.fw_reach = {v: self._reach(v, forward_only=True) for v in self.ids if not self.back[v]}
        self.class_of = {v: k for k, c in enumerate(self.classes) for v in c}
        orphan = {k for k, c in enumerate(self.classes) if all(self.back[v] for v in c)}
        self.pipeline_edges = set()
        for u in self.ids:
            for w in self.succ[u]:
                a, b = self.class_of[u], self.class_of[w]
                if not self.back[u] and not self.back[w]:
                    self.pipeline_edges.add((a, b))
                elif self.back[u] and self.back[w] and (a in orphan or b in orphan):
                    self.pipeline_edges.add((b, a))

    def _reach(self, v: int, forward_only: bool) -> set:
        seen, stack = set(), [v]
        while stack:
            for w in self.succ[stack.pop()]:
                if w not in seen and not (forward_only and self.back[w]):
                    seen.add(w)
                    stack.append(w)
        return seen

    def assignments(self):
        """Class -> (type, index), devices of one type numbered in order of first use."""
        def extend(k: int, labels: list, used: dict):
            if k == len(self.classes):
                yield list(labels)
                return
            for t, (count, _, _) in self.types.items():
                for j in range(min(used.get(t, 0) + 1, count)):
                    labels.append((t, j))
                    yield from extend(k + 1, labels, {**used, t: max(used.get(t, 0), j + 1)})
                    labels.pop()
        yield from extend(0, [], {})

    def devices(self, labels: list) -> dict:
        held: dict = {}
        for members, slot in zip(self.classes, labels):
            held.setdefault(slot, []).extend(members)
        return held

    def fits(self, held: dict) -> bool:
        for (t, _), nodes in held.items():
            memory = self.types[t][1]
            if any(self.time[v][t] is None for v in nodes):
                return False
            if memory is not None and sum(self.size[v] for v in nodes) > Fraction(memory):
                return False
        return True

    def convex(self, nodes, reach: dict) -> bool:
        inside = set(nodes) & set(reach)
        return not any(x not in inside and reach.get(x, set()) & inside for u in inside for x in reach[u])

    def in_class(self, held: dict, labels: list, contiguity: str) -> bool:
        if contiguity == "sets":
            return all(self.convex(nodes, self.fw_reach) for nodes in held.values())
        if contiguity == "stages":
            arcs = {(labels[a], labels[b]) for a, b in self.pipeline_edges if labels[a] != labels[b]}
            return self._acyclic(set(held), arcs)
        return True

    @staticmethod
    def _acyclic(vertices: set, arcs: set) -> bool:
        vertices = set(vertices)
        while vertices:
            sources = {x for x in vertices if not any(b == x and a in vertices for a, b in arcs)}
            if not sources:
                return False
            vertices -= sources
        return True

    def loads(self, t: str, nodes) -> tuple:
        inside, load = set(nodes), {False: Fraction(0), True: Fraction(0)}
        for v in nodes:
            load[self.back[v]] += self.time[v][t]
        if self.types[t][2]:
            boundary = {u for v in nodes for u in self.pred[v] - inside} | {u for u in nodes if self.succ[u] - inside}
            for u in boundary:
                load[self.back[u]] += self.cost[u]
        return load[False], load[True]

    def value(self, held: dict, objective: str):
        loads = [self.loads(t, nodes) for (t, _), nodes in held.items()]
        if objective == "throughput":
            return max(f + b for f, b in loads)
        return max(f for f, _ in loads) + max(b for _, b in loads)

    def optimum(self, objective: str = "throughput", contiguity: str = "stages", stages: int | None = None):
        best = None
        for labels in self.assignments():
            held = self.devices(labels)
            if (stages is None or len(held) == stages) and self.fits(held) and self.in_class(held, labels, contiguity):
                value = self.value(held, objective)
                best = value if best is None or value < best else best
        return best

    def split_optimum(self, w_placement: str, w_share: Fraction = Fraction(1, 2)):
        """The split-backward optimum (docs/backward-split.md) without memory bounds: every pipeline order of
        every ``stages`` plan, every stage for each W task that ``w_placement`` allows, B tasks at home."""
        best = None
        backward = [v for v in self.ids if self.back[v]]
        layer_inputs = {u: {x for f in self.classes[self.class_of[u]] if not self.back[f] for x in self.pred[f]}
                        for u in backward}
        for labels in self.assignments():
            held = self.devices(labels)
            if not self.fits(held) or not self.in_class(held, labels, "stages"):
                continue
            home = {v: slot for slot, nodes in held.items() for v in nodes}
            for order in itertools.permutations(held):
                if any(order.index(labels[a]) > order.index(labels[b]) for a, b in self.pipeline_edges):
                    continue
                options = []
                for u in backward:
                    at = order.index(home[u])
                    allowed = order if w_placement == "any" else order[at:at + 2]
                    options.append([s for s in allowed if self.time[u][s[0]] is not None])
                for places in itertools.product(*options):
                    w_at = dict(zip(backward, places))
                    load = {slot: Fraction(0) for slot in order}
                    for v in self.ids:
                        p = self.time[v][home[v][0]]
                        load[home[v]] += p - w_share * p if self.back[v] else p
                        if self.back[v]:
                            load[w_at[v]] += w_share * self.time[v][w_at[v][0]]
                    for x in self.ids:
                        readers = {home[w] for w in self.succ[x]} | {w_at[w] for w in self.succ[x] if self.back[w]}
                        readers |= {w_at[u] for u in backward if x in layer_inputs[u]}
                        for slot in readers - {home[x]} | ({home[x]} if readers - {home[x]} else set()):
                            load[slot] += self.cost[x] if self.types[slot[0]][2] else 0
                    value = max(load.values())
                    best = value if best is None or value < best else best
        return best

    def call_splits(self, nodes: list, calls: int):
        for k in range(1, min(calls, len(nodes)) + 1):
            for labels in itertools.product(range(k), repeat=len(nodes)):
                blocks = [[v for v, b in zip(nodes, labels) if b == i] for i in range(k)]
                if all(blocks) and all(self.convex(b, self.reach) for b in blocks):
                    yield blocks

    def latency_of(self, held: dict, calls: dict):
        """Finish time of the last node, or ``None`` where the calls wait for each other in a cycle."""
        units, unit_of = [], {}
        for slot, blocks in calls.items():
            for k, block in enumerate(blocks):
                inside = set(block)
                boundary = {u for v in block for u in self.pred[v] - inside}
                boundary |= {u for u in block if self.succ[u] - inside}
                duration = sum(self.time[v][slot[0]] for v in block) + sum(self.cost[u] for u in boundary)
                units.append((block, duration, len(units) - 1 if k else None))
                unit_of.update({v: len(units) - 1 for v in block})
        for (t, _), nodes in held.items():
            if not self.types[t][2]:
                for v in nodes:
                    units.append(([v], self.time[v][t], None))
                    unit_of[v] = len(units) - 1
        finish: dict = {}
        for _ in range(len(units)):
            for i, (block, duration, before) in enumerate(units):
                waits = {unit_of[u] for v in block for u in self.pred[v]} - {i} | ({before} - {None})
                if i not in finish and all(j in finish for j in waits):
                    finish[i] = max((finish[j] for j in waits), default=Fraction(0)) + duration
        return max(finish.values()) if len(finish) == len(units) else None

    def latency(self, calls: int = 1, stages: int | None = None):
        best = None
        for labels in self.assignments():
            held = self.devices(labels)
            if (stages is not None and len(held) != stages) or not self.fits(held):
                continue
            paying = [slot for slot in held if self.types[slot[0]][2]]
            for split in itertools.product(*(list(self.call_splits(held[s], calls)) for s in paying)):
                value = self.latency_of(held, dict(zip(paying, split)))
                if value is not None and (best is None or value < best):
                    best = value
        return best


def quarters(rng: random.Random, top: int) -> float:
    return 0 if rng.random() < 0.2 else rng.randint(1, top) / 4


def document(seed: int) -> dict:
    """A tiny instance: forward graph of 3-7 nodes (2-4 with backward mates), 1-5 devices."""
    rng = random.Random(seed)
    training, native = seed % 3 == 1, seed % 2 == 1
    n = rng.randint(2, 4) if training else rng.randint(3, 7)
    shape = rng.choice(["random", "diamond", "fan", "disconnected"])
    if shape == "random":
        edges = {(i, j) for j in range(n) for i in range(j) if rng.random() < 0.4}
    elif shape == "diamond":
        edges = {(0, j) for j in range(1, n - 1)} | {(j, n - 1) for j in range(1, n - 1)}
    elif shape == "fan":
        edges = {(0, j) for j in range(1, n)} if rng.random() < 0.5 else {(j, n - 1) for j in range(n - 1)}
    else:
        cut = rng.randint(1, n - 1)
        edges = {(i, j) for j in range(n) for i in range(j) if (i < cut) == (j < cut) and rng.random() < 0.6}
    colour = {i: i for i in range(n)} if training else {i: 7 for i in range(n) if rng.random() < 0.2}
    kinds = [False] * n
    if training:
        mates = {i: n + k for k, i in enumerate(i for i in range(n) if rng.random() < 0.85)}
        kinds += [True] * len(mates)
        colour.update({b: i for i, b in mates.items()})
        edges |= {(mates[w], mates[u]) for u, w in edges if u in mates and w in mates}
        edges |= {(i, b) for i, b in mates.items() if rng.random() < 0.3}
        if mates and rng.random() < 0.3:   # a backward node without a forward node in its class
            kinds.append(True)
            edges |= {(n - 1, len(kinds) - 1)} | {(len(kinds) - 1, b) for b in mates.values() if rng.random() < 0.5}
    if native:
        types = [("fast", rng.randint(1, 2), rng.choice([None, rng.randint(2, 5)]), True),
                 ("slow", rng.randint(0, 1), rng.choice([None, rng.randint(2, 5)]), True),
                 ("cpu", rng.randint(0, 1), None, False)]
    else:
        memory = rng.choice([None, rng.randint(2, 5)])
        types = [("accelerator", rng.randint(1, 3), memory, True), ("cpu", rng.randint(0, 2), None, False)]
    nodes = []
    for v, backward in enumerate(kinds):
        times = {t: quarters(rng, 16 if pays else 32) if pays or rng.random() < 0.8 else None
                 for t, _, _, pays in types}
        if rng.random() < 0.15 and any(c and not pays for _, c, _, pays in types):
            times.update({t: None for t, _, _, pays in types if pays})     # a node only the CPUs run
        if not native and times["cpu"] is None:
            times["cpu"] = quarters(rng, 32)
        size = rng.randint(0, 2)
        if not any(p is not None and c and (m is None or size <= m) for (t, c, m, _), p in zip(types, times.values())):
            times[types[0][0]], size = quarters(rng, 16), 0
        node = {"id": 3 * v + 2, "name": f"n{v}", "isBackwardNode": int(backward), "size": size}
        if native:
            node["times"] = times
        else:
            node.update(supportedOnFpga=int(times["accelerator"] is not None), fpgaLatency=times["accelerator"] or 0,
                        cpuLatency=times["cpu"])
        if v in colour:
            node["colorClass"] = colour[v]
        nodes.append(node)
    costs = [quarters(rng, 8) for _ in kinds]
    rng.shuffle(nodes)
    doc = {"nodes": nodes,
           "edges": [{"sourceId": 3 * a + 2, "destId": 3 * b + 2, "cost": costs[a]} for a, b in sorted(edges)]}
    if native:
        doc["deviceTypes"] = [{"name": t, "count": c, "memory": m, "paysComm": p} for t, c, m, p in types]
    else:
        doc.update(maxFPGAs=types[0][1], maxCPUs=types[1][1], maxSizePerFPGA=types[0][2] or 10 ** 6)
    return doc


def claim(result, truth) -> str | None:
    """What is wrong with ``result`` where the optimum is ``truth`` (``None``: no plan exists)."""
    if result.status == "optimal" and (truth is None or result.value != truth or result.bound != result.value):
        return f"optimal {result.value} (bound {result.bound}), the optimum is {truth}"
    if result.status == "infeasible" and truth is not None:
        return f"infeasible, the optimum is {truth}"
    if result.status == "feasible" and (truth is None or result.value < truth or result.bound > truth):
        return f"feasible {result.value} (bound {result.bound}), the optimum is {truth}"
    if result.status == "no_solution" and truth is not None:
        return f"no plan, the optimum is {truth}: {result.message}"
    return None


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_exact_methods_find_the_oracle_optimum(seed: int) -> None:
    doc = document(seed)
    oracle = Oracle(doc)
    training = any(oracle.back.values())
    cases = [({"method": "dp"}, oracle.optimum())]
    for contiguity in ("stages", "sets", "none"):
        truth = oracle.optimum(contiguity=contiguity)
        cases += [({"method": "milp", "contiguity": contiguity}, truth), ({"contiguity": contiguity}, truth)]
        if training:
            truth = oracle.optimum("throughput-gpipe", contiguity)
            cases.append(({"method": "milp", "objective": "throughput-gpipe", "contiguity": contiguity}, truth))
    stages = min(seed % 3 + 1, sum(count for count, _, _ in oracle.types.values()))
    cases += [({"method": "dp", "stages": stages}, oracle.optimum(stages=stages)),
              ({"method": "milp", "contiguity": "none", "stages": stages},
               oracle.optimum("throughput", "none", stages))]
    if not training:
        cases += [({"method": "milp", "objective": "latency", "calls": calls}, oracle.latency(calls))
                  for calls in (1, 2)]
        cases.append(({"method": "milp", "objective": "latency", "stages": stages}, oracle.latency(1, stages)))
    wrong = []
    for options, truth in cases:
        result = placement.solve(doc, **options)
        truth = None if truth is None else float(truth)
        if claim(result, truth) is not None or result.status not in ("optimal", "infeasible"):
            wrong.append((options, result.status, claim(result, truth)))
        elif result.status == "optimal":
            assert result.verified
    assert wrong == []   # on these tiny cases every exact method proves the optimum, or that there is none


@pytest.mark.parametrize("seed", SEEDS)
def test_verify_prices_random_plans_as_the_oracle_does(seed: int) -> None:
    doc = document(seed)
    oracle, instance, rng = Oracle(doc), placement.load(doc), random.Random(seed)
    training = any(oracle.back.values())
    for _ in range(40):
        held: dict = {}
        for members in oracle.classes:
            t = rng.choice([t for t, (count, _, _) in oracle.types.items() if count])
            held.setdefault((t, rng.randrange(oracle.types[t][0])), []).extend(members)
        labels = [next(s for s, nodes in held.items() if c[0] in nodes) for c in oracle.classes]
        slots = list(held)
        rng.shuffle(slots)
        if not training and rng.random() < 0.5:
            calls = {s: [list(b) for b in rng.choice(list(oracle.call_splits(held[s], 2)) or [[held[s]]])]
                     for s in slots if oracle.types[s[0]][2]}
            plan = Plan(tuple(DeviceAssignment(s[0], tuple(held[s]), tuple(map(tuple, calls.get(s, ()))))
                              for s in slots))
            verdict = placement.verify(instance, plan, objective="latency", calls=2)
            convex = all(oracle.convex(b, oracle.reach) for blocks in calls.values() for b in blocks)
            expected = oracle.latency_of(held, calls) if oracle.fits(held) and convex else None
            assert (verdict.valid, verdict.value if verdict.valid else None) == \
                (expected is not None, None if expected is None else float(expected)), plan
            continue
        objective = rng.choice(["throughput", "throughput-gpipe"]) if training else "throughput"
        contiguity = rng.choice(["stages", "sets", "none"])
        plan = Plan(tuple(DeviceAssignment(s[0], tuple(held[s])) for s in slots))
        verdict = placement.verify(instance, plan, objective=objective, contiguity=contiguity)
        valid = oracle.fits(held) and oracle.in_class(held, labels, contiguity)
        assert verdict.valid == valid, (plan, verdict.violations)
        if valid:
            assert verdict.value == float(oracle.value(held, objective)), plan


@pytest.mark.parametrize("seed", [seed for seed in SEEDS if seed % 3 == 1])
@pytest.mark.parametrize("w_placement", ["any", "adjacent"])
def test_split_backward_finds_the_oracle_optimum(seed: int, w_placement: str) -> None:
    doc = document(seed)
    for device_type in doc.get("deviceTypes", ()):
        device_type["memory"] = None
    if "deviceTypes" not in doc:
        doc["maxSizePerFPGA"] = 10 ** 6
    truth = Oracle(doc).split_optimum(w_placement)
    result = placement.solve(doc, backward="split", w_placement=w_placement)
    assert (result.status, claim(result, None if truth is None else float(truth))) == ("optimal", None)
