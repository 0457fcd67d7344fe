"""The DP over ideals refuses, with one error, tables that would not fit in memory.

The tables hold, per ideal, fixed-size data (sums, a bitset row unless the ideals are the
prefixes of one order, one value per layer) and its
maxima and cut, whose sizes depend on the graph: on two rails joined by rungs, an ideal that
holds more of one rail than of the other has every rung between them in its cut, so the
cuts grow with the graph as well as with the ideals.
"""

from __future__ import annotations

import math

import pytest

import placement
from placement.errors import LimitExceededError
from placement.problem.instance import Edge, Node, make_two_type_problem
from placement.solvers import _dp_kernels as K
from placement.solvers import dp_table
from placement.solvers.dp import solve_dp
from placement.solvers.ideals import contract, enumerate_ideals


def rails(blocks: int):
    """Two rails a_i → a_{i+1}, b_i → b_{i+1}, with rungs a_i → b_i: (blocks + 1)(blocks + 2)/2
    ideals (b_j needs a_j, so an ideal is a prefix of a and a no longer prefix of b)."""
    nodes, edges = [], []
    for i in range(blocks):
        nodes += [Node(2 * i, f"a{i}", (1.0, 10.0), out_cost=0.1), Node(2 * i + 1, f"b{i}", (1.5, 15.0), out_cost=0.2)]
        edges.append(Edge(2 * i, 2 * i + 1))
        if i:
            edges += [Edge(2 * i - 2, 2 * i), Edge(2 * i - 1, 2 * i + 1)]
    return make_two_type_problem(nodes, edges, 3, 1, math.inf, "rails")


def test_rails_count():
    assert len(enumerate_ideals(contract(rails(6), False))[0]) == 28


def family_data(problem, max_entries, chunk=None):
    """The kernel's arrays for the family of all ideals of ``problem`` (``sums, bits, popcount, max_ptr, max_buf,
    cut_ptr, cut_buf, cut_count, cut_cost``) and the first ideal not filled in, made in calls of ``chunk`` ideals
    (default: one call), stopping where one stops short; and the family's size."""
    graph = dp_table.build_graph(problem, contract(problem))
    parent, added = enumerate_ideals(graph.contraction)
    values = graph.comp.astype(float)
    n = len(parent)
    sums, bits, popcount, max_ptr, max_buf, cut_ptr, cut_buf, cut_count, cut_cost, is_pred = dp_table.family_arrays(
        n, values.shape[1], graph.contraction.size, True)
    done = 0
    while done < n:
        hi = min(n, done + (chunk or n))
        max_buf, cut_buf, cut_count, done = K.family_data(
            done, hi, parent, added, values, graph.pred_ptr, graph.pred_idx, graph.touch_ptr, graph.touch_idx,
            graph.degree, graph.cost, max_entries, True, sums, bits, popcount, max_ptr, max_buf, cut_ptr, cut_buf,
            cut_count, cut_cost, is_pred)
        if done < hi:
            break
    return (sums, bits, popcount, max_ptr, max_buf, cut_ptr, cut_buf, cut_count, cut_cost, done), n


def test_family_data_stops_at_the_entry_limit():
    """With room for every entry the family is done; with less, the kernel stops at the first
    ideal that would exceed it, and what it filled in is what the full run has."""
    full, n = family_data(rails(6), 2 ** 62)
    assert full[-1] == n
    entries = int(full[3][n] + full[5][n])          # maxima and cut entries of every ideal
    part, _ = family_data(rails(6), entries // 2)
    done = part[-1]
    assert 0 < done < n
    assert part[3][done] + part[5][done] <= entries // 2
    assert part[3][done + 1] == 0 or part[3][done + 1] + part[5][done + 1] > entries // 2
    for whole, cut in ((full[0], part[0]), (full[1], part[1]), (full[2], part[2])):
        assert (whole[:done] == cut[:done]).all()


@pytest.mark.parametrize("chunk", [1, 5, 27])
def test_family_data_made_in_chunks_is_the_family_data_made_at_once(chunk):
    """The kernel fills ideals ``lo:hi`` after those before ``lo``: calls of 1, 5 or 27 of the 28 ideals of the
    rails give what one call gives, array for array, and stop at the same ideal under the same entry limit."""
    whole, n = family_data(rails(6), 2 ** 62)
    parts, _ = family_data(rails(6), 2 ** 62, chunk)
    assert whole[-1] == parts[-1] == n
    max_ptr, cut_ptr = whole[3], whole[5]
    for k in (0, 1, 2, 3, 5, 8):   # sums, bits, popcount, max_ptr, cut_ptr, cut_cost
        assert (whole[k] == parts[k]).all()
    assert (whole[4][:max_ptr[n]] == parts[4][:max_ptr[n]]).all()
    for k in (6, 7):   # cut_buf, cut_count
        assert (whole[k][:cut_ptr[n]] == parts[k][:cut_ptr[n]]).all()
    limit = int(max_ptr[n] + cut_ptr[n]) // 2
    assert family_data(rails(6), limit, chunk)[0][-1] == family_data(rails(6), limit)[0][-1] < n


def test_the_table_build_hears_the_deadline_between_its_chunks(monkeypatch):
    """The data of a family are made :data:`dp_table.BUILD_CHUNK` ideals at a time, with the deadline's poll
    after each chunk but the last (as the table's fill calls it): on the rails' 28 ideals in chunks of 5, five
    polls with the share built; a deadline already past stops the build at the first with the time limit's
    :class:`LimitExceededError`, where one call for the whole family heard nothing (a family of 501,501 ideals
    took 17 s so, past a limit of 5 s)."""
    from placement.solvers.dp import deadline_watch

    monkeypatch.setattr(dp_table, "BUILD_CHUNK", 5)
    problem = rails(6)
    graph = dp_table.build_graph(problem, contract(problem))
    family = enumerate_ideals(graph.contraction)
    layers = dp_table.build_layers(problem)
    heard = []

    class Watch:
        def __call__(self, line):
            heard.append(line)

        def poll(self, message, done, spent, line):
            heard.append((message.split(",")[0], done))

    data = dp_table.prepare(graph, layers, family, compiled=False, progress=Watch(), label="dp")
    assert heard == [(f"dp: tables of {k:,}/28 ideals built", k / 28) for k in (5, 10, 15, 20, 25)]
    assert data.n == 28
    with pytest.raises(LimitExceededError, match=r"^the time limit ran out while the DP ran \(dp: tables of "
                                                  r"5/28 ideals built, "):
        dp_table.prepare(graph, layers, family, compiled=False, progress=deadline_watch(0.0), label="dp")


def line(n: int):
    """A chain 0 → 1 → … → n−1 (times 1 + (7i mod 5) on an accelerator, ten times that on the CPU, transfer
    costs 0.1 + (3i mod 4)/10), 3 accelerators and 1 CPU: its n + 1 ideals are the prefixes of the chain."""
    nodes = [Node(i, f"v{i}", (1.0 + 7 * i % 5, 10.0 * (1 + 7 * i % 5)), out_cost=0.1 + (3 * i % 4) / 10)
             for i in range(n)]
    return make_two_type_problem(nodes, [Edge(i, i + 1) for i in range(n - 1)], 3, 1, math.inf, "line")


def test_a_prefix_family_takes_no_bitset_rows(monkeypatch):
    """The ideals of a chain are nested, told apart by their sizes: the DP keeps no bitset row per ideal (a
    row has a word per 64 supernodes, so the rows alone grow with the square of the chain), and a budget
    below what the rows would take still solves it, to the same plan as the rows give (the DP over
    ideals with the bitset rows, as the design tool runs it)."""
    problem = line(1280)    # 1,281 ideals; a row is 20 words (160 bytes, twice)
    graph = dp_table.build_graph(problem, contract(problem))
    layers = dp_table.build_layers(problem)
    family = enumerate_ideals(graph.contraction)
    assert dp_table.is_prefix_family(family)
    assert not dp_table.is_prefix_family(enumerate_ideals(contract(rails(3))))
    per_ideal = [dp_table.bytes_per_ideal(dp_table.value_columns(2), 1280, 2, len(layers.counts), bitsets)
                 for bitsets in (True, False)]
    assert per_ideal[0] - per_ideal[1] == 2 * 8 * 20
    with_rows = dp_table.prepare(graph, layers, family)
    table = dp_table.fill(problem, graph, layers, with_rows, math.inf, None, "rows")
    by_rows = dp_table.extract(problem, graph, layers, table)
    assert with_rows.bits.shape == (1281, 20)
    assert dp_table.prepare(graph, layers, family, keep_bits=False).bits.shape == (1281, 0)
    # room for the data without rows and each ideal's maximum and cut (two entries of 72 bytes), not for the rows
    monkeypatch.setattr(dp_table, "memory_budget", lambda: 1281 * (per_ideal[1] + 200))
    with pytest.raises(LimitExceededError, match=r"^the DP's tables for 1,281 ideals"):
        dp_table.prepare(graph, layers, family)
    solution = solve_dp(problem)
    assert solution.status == "optimal"
    assert solution.objective == by_rows[0]
    assert solution.plan == by_rows[1]


def test_the_fixed_data_per_ideal_counts_every_sum_the_tables_keep():
    """Per ideal, prepare keeps compute and unsupported nodes per type, memory in two parts and Σ pmin:
    seven sums on two types, each twice (as found and in processing order), which the budget counts."""
    problem = rails(4)
    graph, layers = dp_table.build_graph(problem, contract(problem)), dp_table.build_layers(problem)
    assert dp_table.value_columns(2) == 7
    per_ideal = dp_table.bytes_per_ideal(7, graph.contraction.size, 2, len(layers.counts), False)
    assert dp_table.most_ideals(graph, layers, budget=5 * per_ideal - 1) == 4
    assert dp_table.check_memory(5, graph, layers, budget=5 * per_ideal, bitsets=False) == 5 * per_ideal


def test_tables_beyond_the_budget_are_refused_before_they_are_built(monkeypatch):
    # no memory at all: not one ideal's tables fit, so the count stops before the first (rails(6) has 28)
    monkeypatch.setattr(dp_table, "memory_budget", lambda: 0.0)
    with pytest.raises(LimitExceededError, match=r"^more than 0 ideals in the contracted graph \(12 supernodes\): "
                                                 r"the DP's tables would take more than the 0\.0 GiB of memory it "
                                                 r"may use \(80% of the memory available\), so counting stopped "
                                                 r"there; coarsen the graph by giving nodes that belong together one "
                                                 r"colour class, or solve the MILP$"):
        solve_dp(rails(6))


@pytest.mark.parametrize("compiled", [False, True])
def test_cuts_beyond_the_budget_stop_the_dp(monkeypatch, compiled):
    """Room for the fixed data and a few entries: the kernel stops while the cuts grow, and the
    message says after how many ideals, with what."""
    problem = rails(12)
    real = solve_dp(problem, compiled=compiled)
    graph = dp_table.build_graph(problem, contract(problem))
    types = len(problem.device_types)
    fixed_per_ideal = dp_table.bytes_per_ideal(dp_table.value_columns(types), graph.contraction.size, types,
                                               len(dp_table.build_layers(problem).counts))
    monkeypatch.setattr(dp_table, "memory_budget", lambda: 91 * fixed_per_ideal + 40 * dp_table.BYTES_PER_ENTRY)
    with pytest.raises(LimitExceededError, match=r"^the DP's tables for 91 ideals would take up to about .* GiB "
                                                 r"\(after \d+ ideals, their maxima and cuts, the nodes whose "
                                                 r"outputs cross each ideal, held \d+ entries\)"):
        solve_dp(problem, compiled=compiled)
    # the automatic method solves the MILP instead, to the DP's optimum
    result = placement.solve(problem, time_limit=60)
    assert result.method == "milp"
    assert result.status == "optimal"
    assert result.value == pytest.approx(real.objective)


def test_a_large_limit_counts_the_ideals_before_it_stores_them(monkeypatch):
    """Above COUNT_FIRST ideals allowed, the family is counted first (in memory linear in the graph):
    over the limit it is refused without allocating an array per allowed ideal, within it the arrays
    hold its own size; the count is announced. rails(6) has 28 ideals."""
    from placement.solvers import ideals

    monkeypatch.setattr(ideals, "COUNT_FIRST", 10)
    graph = contract(rails(6), False)
    heard = []
    with pytest.raises(LimitExceededError, match="^more than 20 ideals in the contracted graph"):
        enumerate_ideals(graph, 20, heard.append)
    assert heard == ["counting the ideals (at most 20)"]
    heard.clear()
    parent, added = enumerate_ideals(graph, 1_000_000_000_000, heard.append)
    assert heard == ["counting the ideals (at most 1,000,000,000,000)", "28 ideals"]
    monkeypatch.setattr(ideals, "COUNT_FIRST", 1 << 22)
    assert [a.tolist() for a in enumerate_ideals(graph)] == [parent.tolist(), added.tolist()]


def test_the_combinations_of_device_counts_are_every_count_in_mixed_radix():
    """Layer L holds count (L // radix_t) mod (c_t + 1) of type t (the first type varies fastest), and its
    layer with one device of type t fewer is L − radix_t, as an independent enumeration lists them."""
    import itertools

    from placement.problem.instance import DeviceType, Instance

    for caps in ((1,), (4, 1), (0, 3), (3, 0, 2), (2, 2, 2, 2)):
        problem = Instance((Node(1, "a", tuple(1.0 for _ in caps)),), (),
                           tuple(DeviceType(f"t{i}", c) for i, c in enumerate(caps)))
        layers = dp_table.build_layers(problem)
        combos = [tuple(reversed(c)) for c in itertools.product(*(range(c + 1) for c in reversed(caps)))]
        assert [tuple(row) for row in layers.counts.tolist()] == combos and layers.full == len(combos) - 1
        for L, combo in enumerate(combos):
            for t in range(len(caps)):
                fewer = combo[:t] + (combo[t] - 1,) + combo[t + 1:]
                assert layers.prev[L, t] == (combos.index(fewer) if combo[t] else -1)


def test_many_device_types_are_refused_before_their_tables_are_built_and_auto_solves_the_milp(monkeypatch):
    """Ten types of 4 devices: 5^10 combinations of counts, 13 ideals of a 12-node chain: 13 · 5^10 · 24 bytes
    (2.84 GiB) of tables, past the 2 GiB the DP may take (a 500-node chain of six types of 8 devices took
    13 GB and ran far past its time limit), refused before any is built. Where the DP is refused so,
    ``auto`` solves the MILP: chain4 (optimum 7.5; 5 ideals × 3 combinations, 360 bytes) with the limit at 100."""
    from placement.problem.instance import DeviceType, Instance

    nodes = tuple(Node(v, f"n{v}", tuple(1.0 + (v * 7 + 3 * t) % 5 for t in range(10)), out_cost=0.5)
                  for v in range(12))
    problem = Instance(nodes, tuple(Edge(v, v + 1) for v in range(11)),
                       tuple(DeviceType(f"t{i}", 4) for i in range(10)))
    with pytest.raises(LimitExceededError) as refused:
        solve_dp(problem)
    assert str(refused.value) == (
        "the DP keeps a value per ideal and combination of device counts: 13 ideals × 9,765,625 combinations "
        "(5 × 5 × 5 × 5 × 5 × 5 × 5 × 5 × 5 × 5) would take 2.84 GiB, more than the 2 GiB it may; give fewer "
        "devices or device types (types that differ little as one), or solve the MILP")
    pytest.importorskip("ortools")
    monkeypatch.setattr(dp_table, "MAX_STATE_BYTES", 100)
    result = placement.solve("instances/tiny/chain4.json", time_limit=20)
    assert (result.method, result.status, result.value) == ("milp", "optimal", 7.5) and result.verified


def many_types_chain(types: int, count: int, nodes: int = 6):
    """A chain of ``nodes`` nodes on ``types`` device types of ``count`` devices each (memory unbounded), every
    node's time on type t being t + 1 plus a little per node: type 0 runs the whole chain fastest."""
    from placement.problem.instance import DeviceType, Instance

    chain = tuple(Node(v, f"n{v}", tuple(t + 1.0 + v / 8 for t in range(types)), out_cost=0.25) for v in range(nodes))
    return Instance(chain, tuple(Edge(v, v + 1) for v in range(nodes - 1)),
                    tuple(DeviceType(f"t{i}", count) for i in range(types)))


def test_combinations_that_take_more_than_their_values_are_refused_before_they_are_built(monkeypatch):
    """With few ideals (the chain DP over a few intervals: 5) and many device types, the combinations of
    device counts themselves (a count and a layer per type) take more than the values per ideal: 24 types of
    one device have 2^24 combinations, 5 · 24 bytes of values but 24 · 32 bytes of counts and layers each,
    13.88 GiB, which used to be allocated (a MemoryError, or the process killed) before anything refused."""
    from placement.solvers.chain_dp import solve_coarse_chain

    problem = many_types_chain(24, 1)
    dp_table.check_states(5, 2 ** 24)   # the values alone would pass
    with pytest.raises(LimitExceededError) as refused:
        dp_table.build_layers(problem, 5)
    assert str(refused.value) == (
        "the DP's 16,777,216 combinations of device counts over 24 device types, with a value per combination for "
        "each of 5 ideals, would take 13.88 GiB, more than the 2 GiB it may; give fewer devices or device types "
        "(types that differ little as one), or solve the MILP")
    with pytest.raises(LimitExceededError):
        solve_coarse_chain(problem)
    # six types of three devices: 4^6 combinations, 5 · 24 · 4096 bytes of values and 6 · 32 · 4096 of layers
    problem = many_types_chain(6, 3)
    monkeypatch.setattr(dp_table, "MAX_STATE_BYTES", 5 * 24 * 4096 + 6 * 32 * 4096 - 1)
    dp_table.check_states(5, 4 ** 6)
    with pytest.raises(LimitExceededError):
        dp_table.build_layers(problem, 5)
    monkeypatch.setattr(dp_table, "MAX_STATE_BYTES", 5 * 24 * 4096 + 6 * 32 * 4096)
    assert len(dp_table.build_layers(problem, 5).counts) == 4 ** 6


def test_where_every_chain_dp_is_refused_on_many_types_the_start_is_the_whole_graph_on_its_fastest_type(
        monkeypatch):
    """The greedy fill takes accelerators and CPUs only; on a catalogue of other types whose combinations
    refuse the DP and both chain DPs, the MILP used to start from nothing (and a short time limit ended
    ``no_solution`` on a chain that any one device runs whole). The start is now every node on one device of
    the type that runs them fastest, a pipeline of one stage whose load is the sum of their times there."""
    from placement.solvers.milp.warmstart import pipeline_start_and_bound

    problem = many_types_chain(4, 2)
    monkeypatch.setattr(dp_table, "MAX_STATE_BYTES", 100)
    lines = []
    plan, bound = pipeline_start_and_bound(problem, 1000, lines.append)
    assert bound == 0.0 and [(d.type, d.nodes) for d in plan.devices] == [("t0", tuple(range(6)))]
    assert any(line.startswith("warm start from every node on one device (7.875)") for line in lines)
    assert placement.verify(problem, plan, contiguity="stages").max_load == math.fsum(1 + v / 8 for v in range(6))
    pytest.importorskip("ortools")
    result = placement.solve(problem, time_limit=20)
    assert result.method == "milp" and result.verified and result.status in ("optimal", "feasible")
    assert result.value <= 7.875


def test_a_count_stopped_by_the_values_per_combination_suggests_coarsening_the_graph(monkeypatch):
    """A fan of 12 branches has 2^12 + 2 ideals; with room for the values of 100 ideals on three
    combinations of device counts (0, 1 or 2 accelerators) the count stops there, and fewer devices alone
    would not make room for the rest: the refusal suggests coarsening the graph as well."""
    nodes = [Node(v, f"n{v}", (1.0, 10.0), 1.0, out_cost=0.5) for v in range(14)]
    edges = [Edge(0, b) for b in range(1, 13)] + [Edge(b, 13) for b in range(1, 13)]
    problem = make_two_type_problem(nodes, edges, 2, 0, 100)
    monkeypatch.setattr(dp_table, "MAX_STATE_BYTES", 100 * dp_table.BYTES_PER_STATE * 3)
    with pytest.raises(LimitExceededError) as refused:
        solve_dp(problem, max_ideals=10 ** 9)
    assert str(refused.value) == (
        "the DP keeps a value per ideal and combination of device counts: more than 100 ideals × 3 combinations "
        "would take more than 0.00 GiB, more than the 0 GiB it may; coarsen the graph by giving nodes that belong "
        "together one colour class, give fewer devices or device types (types that differ little as one), or "
        "solve the MILP")
