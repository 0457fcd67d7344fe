"""The split model's memory under bounded async 1F1B, worked by hand: the evaluator's figure, the simulator's
peak from its reservation events, and the micro-batches each device holds (``docs/backward-split.md``)."""

from __future__ import annotations

import math

import placement

from placement.plan import DeviceAssignment, Plan
from placement.problem.instance import ACCELERATOR, DeviceType, Edge, Instance, Node
from placement.problem.split import memory_shortfall, split_model
from placement.simulation.simulator import simulate
from placement.solvers.milp.split import fitting_starts, solve_split_milp, unsplit_start
from placement.testing.bruteforce_split import brute_force_split
from placement.verification.split import evaluate_split


def three_layers(memory: float = math.inf) -> Instance:
    """f0 -> f1 -> f2, b2 -> b1 -> b0, f_i -> b_i; forward 1, backward 2 (W = B = 1), node memory 1 each.
    Tensor bytes (largest out-edge): f0 4, f1 5, f2 6, b2 7, b1 3."""
    nodes = tuple(Node(i, f"f{i}", (1.0,), memory=1.0, colour=i) for i in range(3)) + tuple(
        Node(10 + i, f"b{i}", (2.0,), memory=1.0, backward=True, colour=i) for i in range(3))
    edges = (Edge(0, 1, 4.0), Edge(0, 10, 4.0), Edge(1, 2, 5.0), Edge(1, 11, 5.0), Edge(2, 12, 6.0),
             Edge(12, 11, 7.0), Edge(11, 10, 3.0))
    return Instance(nodes, edges, (DeviceType(ACCELERATOR, 3, memory=memory),), "three-layers")


def layer_per_stage(w_of_b0: int) -> Plan:
    """Layer i on stage i; W(b0) on stage ``w_of_b0``."""
    return Plan(tuple(DeviceAssignment(ACCELERATOR, (i, 10 + i), w_tasks=(10,) if i == w_of_b0 and i != 0 else ())
                      for i in range(3)))


def test_unsplit_plan_holds_s_minus_p_micro_batches_of_activations() -> None:
    # Every task at home: no W call receives anything of its own, lag 0, stage p holds 3 - p micro-batches of
    # its activations: 2 + 3 x 4 = 14, 2 + 2 x 5 = 12, 2 + 1 x 6 = 8.
    problem = three_layers()
    ev = evaluate_split(problem, layer_per_stage(0), split_model("home"))
    assert ev.valid and [d.memory for d in ev.evaluation.devices] == [14.0, 12.0, 8.0]
    run = simulate(problem, layer_per_stage(0), "1f1b-async", 48)
    assert [s.peak_in_flight for s in run.stages] == [3, 2, 1]


def test_a_w_call_receiving_another_stages_b_output_holds_its_lag_more() -> None:
    # W(b0) on stage 2 reads f0 (stage 0's activation, 4 bytes) and b1, the output of B(b1) on stage 1 (3
    # bytes), which no F or B call of stage 2 reads: its W call receives it, lag 1 + |1 - 2| = 2, so stage 2
    # holds (3 - 2) + 2 = 3 micro-batches of its activation f2 (6) and of the kept f0 and b1:
    # 2 + 3 x (6 + 4 + 3) = 41. Stages 0 and 1 as unsplit: 14 and 12.
    problem = three_layers()
    plan = layer_per_stage(2)
    ev = evaluate_split(problem, plan, split_model("any"))
    assert ev.valid and [d.memory for d in ev.evaluation.devices] == [14.0, 12.0, 41.0]
    # loads: stage 0 F 1 + B 1 = 2, stage 1 F 1 + B 1 + W 1 = 3, stage 2 F 1 + B 1 + W 1 + W(b0) 1 = 4
    assert [d.load for d in ev.evaluation.devices] == [2.0, 3.0, 4.0]
    run = simulate(problem, plan, "1f1b-async", 48)
    assert [s.peak_in_flight for s in run.stages] == [3, 2, 3]
    assert [s.peak_memory for s in run.stages] == [14.0, 12.0, 41.0]
    assert [s.peak_w_inputs for s in run.stages] == [0.0, 0.0, 21.0]
    assert run.time_per_sample == 4.0


def test_the_hold_count_binds_in_the_evaluator_the_milp_and_the_brute_force() -> None:
    # A bound of 40 refuses the plan above (41 on stage 2), 41 admits it; the MILP and the brute force,
    # which count the hold counts on their own, agree on the optimum at both bounds and both objectives.
    model = split_model("any")
    assert evaluate_split(three_layers(40.0), layer_per_stage(2), model).violations == (
        "device 2 (accelerator): memory 41 exceeds the bound 40",)
    assert evaluate_split(three_layers(41.0), layer_per_stage(2), model).valid
    for memory in (12.0, 20.0, 26.0, 40.0, 41.0):
        problem = three_layers(memory)
        for objective in ("throughput", "throughput-gpipe"):
            best, plan = brute_force_split(problem, model, objective)
            solution = solve_split_milp(problem, model, objective, time_limit=20)
            if plan is None:
                assert solution.status.value == "infeasible"
                continue
            assert solution.status.value == "optimal" and math.isclose(solution.objective, best, abs_tol=1e-9)
            assert evaluate_split(problem, solution.plan, model).valid


def test_a_split_result_that_moves_nothing_still_replays_as_a_split_plan() -> None:
    # Unsplit (w_placement "home"), one layer per stage is optimal (loads 3, 3, 3; the total 9 over 3 devices).
    # The result lists every B and W on its layer's device, so the simulator replays W calls (a W call per
    # stage) and the flush of GPipe's split schedule: it grows by max FW + max BW = 1 + 2 = 3 per micro-batch.
    import placement

    problem = three_layers()
    r = placement.solve(problem, backward="split", w_placement="home")
    assert r.status == "optimal" and r.value == 3.0
    assert [(s.b_tasks, s.w_tasks) for s in r.plan] == [((10,), (10,)), ((11,), (11,)), ((12,), (12,))]
    run = placement.simulate(problem, r, schedule="gpipe", microbatches=24)
    assert run.split_plan and [s.task_times["W"] for s in run.stages] == [1.0, 1.0, 1.0]
    t24, t48 = run.iteration_time, placement.simulate(problem, r, schedule="gpipe", microbatches=48).iteration_time
    assert (t48 - t24) / 24 == 3.0


def test_a_start_that_fits_the_activations_in_flight() -> None:
    # three_layers with a CPU (times 3x: a layer 3 + 6 = 9; unbounded memory) and two accelerators of memory 13.
    # The DP bounds node memory only and picks {L0, L1} | {L2} (loads 6, 3), but stage 0 then holds 2
    # micro-batches of f0 and f1: 4 + 2 x (4 + 5) = 22 > 13. fitting_starts, c stages, node memory
    # m(v) + c x bytes(v): c = 1 only the CPU: everything there, 27; c = 2 the CPU and one accelerator, which
    # fits {L0} (2 + 2 x 4 = 10) but neither L2 (2 + 2 x 6 = 14) nor {L0, L1}: accelerator {L0} then CPU
    # {L1, L2}, max(3, 18) = 18; c = 3 nothing fits an accelerator (L0: 2 + 3 x 4 = 14), all on the CPU, 27.
    # The true optimum (brute force): CPU {L0} (9), accelerators {L1} (2 + 2 x 5 = 12) and {L2} (8): 9.
    nodes = tuple(Node(i, f"f{i}", (1.0, 3.0), memory=1.0, colour=i) for i in range(3)) + tuple(
        Node(10 + i, f"b{i}", (2.0, 6.0), memory=1.0, backward=True, colour=i) for i in range(3))
    problem = Instance(nodes, three_layers().edges, (DeviceType(ACCELERATOR, 2, memory=13.0),
                                                     DeviceType("cpu", 1, pays_comm=False)), "three-layers-cpu")
    model = split_model("home")
    starts = list(fitting_starts(problem))
    assert [[d.nodes for d in plan.devices] for plan in starts] == [
        [(0, 10, 1, 11, 2, 12)], [(0, 10), (1, 11, 2, 12)], [(0, 10, 1, 11, 2, 12)]]
    assert [evaluate_split(problem, plan, model).objective("throughput") for plan in starts] == [27.0, 18.0, 27.0]

    def verify(plan: Plan):
        from placement.solvers.milp.outcome import Verdict
        ev = evaluate_split(problem, plan, model)
        return Verdict(ev.valid, ev.objective("throughput"), ev.violations)

    start = unsplit_start(problem, verify=verify)
    assert [d.nodes for d in start.devices] == [(0, 10), (1, 11, 2, 12)]
    assert brute_force_split(problem, model)[0] == 9.0
    solution = solve_split_milp(problem, model, time_limit=20)
    assert (solution.status.value, solution.objective, solution.stats["start_value"]) == ("optimal", 9.0, 18.0)


def test_memory_shortfall_proves_infeasibility_where_the_brute_force_finds_no_plan() -> None:
    # Node memory 6 and one micro-batch of activations 4 + 5 + 6 = 15: 21 bytes at least on the devices in use,
    # 3 devices of 6 hold 18 < 21, so no plan; at 7 (21) the rule proves nothing, and the search shows
    # there is still no plan (the first stage holds more than one micro-batch); at 14 the unsplit plan fits.
    assert memory_shortfall(three_layers(6.0)) == (
        "the node memory and one micro-batch of activations (21 bytes) exceed the memory of all devices (18 bytes)")
    assert memory_shortfall(three_layers(7.0)) is None
    for memory, optimum in ((6.0, math.inf), (7.0, math.inf), (14.0, 3.0)):
        for w_placement in ("home", "any"):
            model = split_model(w_placement)
            assert brute_force_split(three_layers(memory), model)[0] == optimum
            solution = solve_split_milp(three_layers(memory), model, time_limit=20)
            assert solution.status.value == ("infeasible" if optimum == math.inf else "optimal")
            assert ("memory of all devices" in solution.message) == (memory == 6.0)
    import placement

    r = placement.solve(three_layers(6.0), backward="split", objective="throughput-gpipe")
    assert (r.status, r.value) == ("infeasible", None) and r.message.startswith("infeasible: the node memory")


def decimal_layers(memory: float) -> Instance:
    """f1 -> f2, b2 -> b1, no tensor sizes (nothing held in flight); node memory f 0.1, b 0.2: a layer's 0.1 + 0.2
    meets a bound of 0.3 as written, although it sums to 0.30000000000000004 in floating point. Times: f1 1,
    b1 2, f2 1, b2 6, W share 0.5."""
    nodes = (Node(1, "f1", (1.0,), memory=0.1, colour=1), Node(2, "f2", (1.0,), memory=0.1, colour=2),
             Node(3, "b2", (6.0,), memory=0.2, backward=True, colour=2),
             Node(4, "b1", (2.0,), memory=0.2, backward=True, colour=1))
    return Instance(nodes, (Edge(1, 2), Edge(3, 4)), (DeviceType(ACCELERATOR, 2, memory=memory),), "decimal-layers")


def test_a_layer_that_fills_its_bound_as_written_fits() -> None:
    plan = Plan((DeviceAssignment(ACCELERATOR, (1, 4)), DeviceAssignment(ACCELERATOR, (2, 3))))
    ev = evaluate_split(decimal_layers(0.3), plan, split_model("home"))
    assert ev.valid and ev.violations == ()


def test_split_optima_where_each_layer_fills_its_bound_as_written() -> None:
    # Both layers (0.6) fit no 0.3, so each takes a stage of its own. home: loads 1 + 2 = 3 and 1 + 6 = 7: 7.
    # any: W(b2) = 3 to stage 0 and W(b1) = 1 to stage 1 gives 1 + 1 + 3 = 5 and 1 + 3 + 1 = 5, the total 10
    # halved: 5. A moved W reads only f1 (stage 0's own activation) and nothing is held in flight, so the
    # memory stays 0.1 + 0.2 on each stage. Summed in floating point the MILP's memory had no exact unit and
    # was rounded (no proof of optimality), and the evaluator and the brute force refused the plans that fill
    # the bound.
    problem = decimal_layers(0.3)
    for w_placement, optimum in (("home", 7.0), ("any", 5.0)):
        r = placement.solve(problem, backward="split", w_placement=w_placement)
        assert (r.status, r.value, r.bound) == ("optimal", optimum, optimum)
        assert brute_force_split(problem, split_model(w_placement))[0] == optimum


def test_memory_over_its_bound_as_written_is_refused_though_its_float_sum_fits() -> None:
    # 0.7 + 0.1 sums to 0.7999999999999999 in floating point, which meets the bound; as written it is 0.8.
    nodes = (Node(1, "f1", (1.0,), memory=0.7, colour=1), Node(2, "b1", (2.0,), memory=0.1, backward=True, colour=1))
    problem = Instance(nodes, (Edge(1, 2),), (DeviceType(ACCELERATOR, 1, memory=0.7999999999999999),), "over")
    ev = evaluate_split(problem, Plan((DeviceAssignment(ACCELERATOR, (1, 2)),)), split_model("home"))
    assert ev.violations == ("device 0 (accelerator): memory 0.8 (summed as written; 0.7999999999999999 in "
                             "floating point) exceeds the bound 0.7999999999999999",)


def test_the_split_milp_proves_on_sizes_left_by_floating_point_arithmetic() -> None:
    # Sizes and transfers such as 0.8999999999999999 (0.3 · 3) and 0.30000000000000004 (0.1 + 0.2) have no power
    # of ten or two under 2^53 that makes them whole as written: CP-SAT's rows had rounded them (sizes up, the
    # bound down) and its proofs went unused ("feasible" at the simple bound). In exact integers of 10^-17 the
    # MILP proves the optimum the brute force finds, for either W placement and objective.
    memory = [0.3, 0.6, 0.3 * 3, 0.3 * 3, 0.1 + 0.2, 0.3]
    forward = tuple(Node(i, f"f{i}", (t,), memory=memory[i], colour=i) for i, t in enumerate((3.0, 2.0, 3.0)))
    nodes = forward + tuple(Node(10 + i, f"b{i}", (t,), memory=memory[3 + i], backward=True, colour=i)
                            for i, t in enumerate((1.0, 3.0, 1.0)))
    sent = [0.1, 0.3 * 3, 0.0, 0.1, 0.3 * 3, 0.3 * 3]
    edges = (Edge(0, 1, sent[0]), Edge(1, 2, sent[1]), Edge(0, 10, sent[0]), Edge(1, 11, sent[1]), Edge(2, 12, sent[3]),
             Edge(11, 10, sent[4]), Edge(12, 11, sent[5]))
    problem = Instance(nodes, edges, (DeviceType(ACCELERATOR, 2, memory=6.199999999999999),), "float-sums")
    for w_placement in ("home", "any"):
        model = split_model(w_placement)
        for objective in ("throughput", "throughput-gpipe"):
            best, plan = brute_force_split(problem, model, objective)
            solution = solve_split_milp(problem, model, objective, time_limit=20)
            assert plan is not None and (solution.status.value, solution.objective) == ("optimal", best), (
                w_placement, objective, solution.message)


def _tensors_a_moved_w_keeps_tip_a_full_device() -> Instance:
    """f0 -> f1 -> b1 -> b0, f0 -> b0 (colours {f0, b0}, {f1, b1}) on two accelerators of 12.1: f1 alone fills one
    (12.1); f0 2e-19, b0 7e-20, b1 0. Forward outputs: f0's 2e-19, f1's 0, b1's 2e-19. W(b0) reads f0's and b1's
    outputs, so moved beside f1 it keeps 2e-19 + 2e-19 more for each micro-batch in flight: over the bound."""
    nodes = (Node(0, "f0", (1.0,), memory=2e-19, colour=0), Node(1, "f1", (3.0,), memory=12.1, colour=1),
             Node(10, "b0", (1.0,), memory=7e-20, backward=True, colour=0),
             Node(11, "b1", (2.0,), memory=0.0, backward=True, colour=1))
    edges = (Edge(0, 1, 2e-19), Edge(0, 10, 2e-19), Edge(1, 11, 0.0), Edge(11, 10, 2e-19))
    return Instance(nodes, edges, (DeviceType(ACCELERATOR, 2, memory=12.1),), "tip")


def test_a_moved_w_task_whose_kept_tensors_tip_a_device_over_is_cut_off():
    """The sizes share no unit within CP-SAT's limit (10^-20 makes 12.1 a 22-digit integer), so the memory rows
    are rounded down to admit every plan that fits, which rounds the 2e-19 tensors to 0. The float sum of the
    sizes, 12.1, had hidden that the bound binds at all (no memory rows, no proof), and then the rows' optimum
    moved W(b0) beside f1, over the bound as written: the start (5) came back unproven. Now the plan is cut off
    (its slot's groups, kept tensors and micro-batches held) and the optimum 5 of the brute force proven."""
    problem = _tensors_a_moved_w_keeps_tip_a_full_device()
    model = split_model("any")
    best, _ = brute_force_split(problem, model, "throughput-gpipe")
    solution = solve_split_milp(problem, model, "throughput-gpipe", time_limit=20)
    assert (best, solution.status.value, solution.objective, solution.bound) == (5.0, "optimal", 5.0, 5.0)
    assert solution.stats["memory_rounded_to_admit"] is True and solution.stats["memory_plans_cut"] >= 1
