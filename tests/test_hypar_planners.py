"""HyPar's level-by-level search, the exact joint DP and the baselines (DESIGN.md §4)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.costmodel.hypar import (ACCPAR_TYPES, DP, HYPAR_TYPES, MP, MP_OUT, communication,
                                       partition_letters)
from placement.costmodel.network import Layer, Network, load_network
from placement.errors import InvalidParameterError, LimitExceededError
from placement.solvers.hypar import (PLANNERS, plan_all, plan_all_dp, plan_all_mp, plan_exact, plan_hypar,
                                     plan_one_weird_trick)


@st.composite
def chains(draw, max_layers: int = 5) -> Network:
    """A random chain: some conv layers (small channels, spatial sizes, kernels), then fc layers."""
    n = draw(st.integers(1, max_layers))
    n_conv = draw(st.integers(0, n))
    layers = []
    shape = (draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    for k in range(n_conv):
        out = (draw(st.integers(1, 8)), draw(st.integers(1, shape[1])), draw(st.integers(1, shape[2])))
        layers.append(Layer(f"conv{k}", "conv", shape, out, draw(st.integers(1, 3))))
        shape = out
    width = math.prod(shape)
    for k in range(n - n_conv):
        out = draw(st.integers(1, 16))
        layers.append(Layer(f"fc{k}", "fc", (width,), (out,)))
        width = out
    return Network("random", tuple(layers))


@settings(max_examples=150)
@given(chains(), st.sampled_from([2, 4, 8, 16]), st.integers(1, 16), st.sampled_from([HYPAR_TYPES, ACCPAR_TYPES]))
def test_exact_never_worse_than_hypar_or_any_baseline(network, accelerators, batch, types):
    plans = {p.planner: p for p in plan_all(network, accelerators, batch, types)}
    exact = plans["exact"]
    # the DP's own optimum (integer arithmetic) is the model's value of the partition it returns
    assert exact.stats["optimum"] == exact.communication.elements
    for name, plan in plans.items():
        assert exact.communication.elements <= plan.communication.elements, name
        assert plan.communication == communication(network, plan.partition, batch)


def _all_partitions(layers: int, levels: int, types):
    vectors = list(itertools.product(types, repeat=levels))
    return itertools.product(vectors, repeat=layers)


def _second_reading(network: Network, partition, batch: int) -> list[Fraction]:
    """``com_h`` per level, written from docs/hypar.md apart from the package's code: each tensor's size at a level
    is its full size over 2 to the number of levels above that halve it (Table 1: dp exchanges dW, mp its output
    F_{l+1}, mp-out its input error E_l, none for layer 0; Table 2 on the boundary tensor between two layers)."""
    table_2 = {"dd": 0, "dm": Fraction(1, 2), "mm": Fraction(1, 2), "md": Fraction(1, 2), "do": Fraction(1, 2),
               "mo": 0, "od": Fraction(1, 2), "om": 0, "oo": Fraction(1, 2)}
    letter = {DP: "d", MP: "m", MP_OUT: "o"}
    amounts = []
    for h in range(len(partition[0])):
        def halved(size: int, l: int, halving: str) -> Fraction:
            return Fraction(size, 2 ** sum(letter[t] in halving for t in partition[l][:h]))

        pair = Fraction(0)
        for l, layer in enumerate(network.layers):
            in_size, out_size = batch * math.prod(layer.in_shape), batch * math.prod(layer.out_shape)
            weights = layer.in_shape[0] * layer.out_shape[0] * layer.kernel ** 2
            pair += {"d": halved(weights, l, "mo"), "m": halved(out_size, l, "do"),
                     "o": halved(in_size, l, "dm") if l else 0}[letter[partition[l][h]]]
        for l in range(len(network.layers) - 1):
            above = list(zip(partition[l][:h], partition[l + 1][:h]))
            cuts = sum(DP in pq for pq in above) + sum(q == MP or p == MP_OUT for p, q in above)
            size = Fraction(batch * math.prod(network.layers[l].out_shape), 2 ** cuts)
            pair += table_2[letter[partition[l][h]] + letter[partition[l + 1][h]]] * size
        amounts.append(pair)
    return amounts


@settings(max_examples=100)
@given(chains(), st.integers(1, 4), st.integers(1, 9), st.randoms(use_true_random=False))
def test_the_model_agrees_with_a_second_reading_of_its_rules(network, levels, batch, rng):
    partition = tuple(tuple(rng.choice(ACCPAR_TYPES) for _ in range(levels)) for _ in network.layers)
    amounts = _second_reading(network, partition, batch)
    comm = communication(network, partition, batch)
    assert [lv.amount for lv in comm.levels] == amounts
    assert comm.elements == sum(2 ** h * a for h, a in enumerate(amounts))


@settings(max_examples=40)
@given(chains(max_layers=3), st.sampled_from([2, 4]), st.integers(1, 8), st.sampled_from([HYPAR_TYPES, ACCPAR_TYPES]))
def test_exact_equals_brute_force(network, accelerators, batch, types):
    levels = accelerators.bit_length() - 1
    best = min(communication(network, p, batch).elements
               for p in _all_partitions(len(network.layers), levels, types))
    assert plan_exact(network, accelerators, batch, types).communication.elements == best


@settings(max_examples=40)
@given(chains(max_layers=3), st.sampled_from([4, 8]), st.integers(1, 8), st.sampled_from([HYPAR_TYPES, ACCPAR_TYPES]))
def test_hypar_minimises_each_level_given_the_levels_above(network, accelerators, batch, types):
    plan = plan_hypar(network, accelerators, batch, types)
    n = len(network.layers)
    for h, amount in enumerate(plan.stats["level_amounts"]):
        above = [row[:h] for row in plan.partition]
        best = min(communication(network, tuple(tuple(above[l]) + (c[l],) for l in range(n)), batch).levels[h].amount
                   for c in itertools.product(types, repeat=n))
        assert amount == best == plan.communication.levels[h].amount


def test_exact_strictly_better_than_hypar_hand_example():
    # fc1 2 -> 4 (A(W) = 8), fc2 4 -> 2 (A(W) = 8), batch 1, N = 4: boundary F_1 = 4, output F_2 = 2.
    # HyPar, level 0 (full sizes): dd 8+8 = 16, dm 8+2+½·4 = 12, md 4+8+2 = 14, mm 4+2+2 = 8 -> mm (unique).
    #   level 1 under mm: W halves (8 -> 4); F_1 keeps its batch, channels halve (fc2 mp above): 2;
    #   dd 4+4 = 8, dm 4+2+1 = 7, md 4+4+1 = 9, mm 4+2+1 = 7 -> 7.   total 8 + 2·7 = 22.
    # Exact: fc1 (dp, mp), fc2 (mp, mp): level 0 dm = 12; level 1: fc1's partial sums F_1 halve
    #   their batch (dp above): 2; F_2: 2; boundary 4/2/2 = 1, mp->mp ½ -> 4.5.  total 12 + 2·4.5 = 21.
    network = Network("chain", (Layer("fc1", "fc", (2,), (4,)), Layer("fc2", "fc", (4,), (2,))))
    greedy = plan_hypar(network, 4, 1)
    exact = plan_exact(network, 4, 1)
    assert (greedy.partition[0][0], greedy.partition[1][0]) == (MP, MP)
    assert greedy.communication.levels[0].amount == 8
    assert greedy.communication.elements == 22 and greedy.communication.bytes == 176
    assert exact.partition == ((DP, MP), (MP, MP))
    assert exact.communication.elements == 21 and exact.communication.bytes == 168


def test_exact_strictly_better_than_hypar_on_lenet_c():
    # Lenet-c on 8 accelerators, batch 256: the joint DP equals the brute-force optimum over all
    # 2^(3·4) = 4,096 partitions and beats HyPar's level-by-level choice.
    network = load_network("lenet-c")
    brute = min(communication(network, p, 256).bytes for p in _all_partitions(4, 3, HYPAR_TYPES))
    exact = plan_exact(network, 8, 256)
    greedy = plan_hypar(network, 8, 256)
    assert exact.communication.bytes == brute == 10_054_240
    assert greedy.communication.bytes == 10_093_280
    assert [partition_letters(r) for r in greedy.partition] == ["ddd", "ddd", "mmd", "mdd"]


def test_vgg_a_on_16_accelerators_matches_the_paper():
    # HyPar (HPCA 2019) reports 15.9 GB per step data parallel and 1.47 GB with HyPar for VGG-A, N = 16.
    network = load_network("vgg-a")
    all_dp = plan_all_dp(network, 16, 256)
    hypar = plan_hypar(network, 16, 256)
    assert all_dp.communication.bytes == 15 * 8 * 132_851_392          # (N-1)·8·#params
    assert abs(float(all_dp.communication.bytes) / 15.9e9 - 1) < 0.05
    assert abs(float(hypar.communication.bytes) / 1.47e9 - 1) < 0.05
    # HyPar keeps every conv layer dp and every fc layer mp at all four levels, which is the
    # "one weird trick" partition. Its total, by hand (batch 256):
    #   conv weights 9,217,728 · 15                                          = 138,265,920
    #   conv5_2 -> fc6 (dp -> mp), F = 256·25088: Σ_h 2^h·½·6,422,528/4^h     =   6,021,120
    #   fc6, fc7 intra (mp): 256·4096 = 1,048,576 per level, · 15 each        =  31,457,280
    #   fc6 -> fc7, fc7 -> fc8 (mp -> mp): Σ_h 2^h·½·1,048,576/2^h, each       =   4,194,304
    #   fc8 intra (mp): 256·1000 · 15                                         =   3,840,000
    #   total                                                                 = 183,778,624 elements
    assert [partition_letters(r) for r in hypar.partition] == ["dddd"] * 8 + ["mmmm"] * 3
    assert hypar.partition == plan_one_weird_trick(network, 16, 256).partition
    assert hypar.communication.elements == 183_778_624
    assert plan_exact(network, 16, 256).communication.elements == 183_778_624


def test_exact_switches_to_python_integers_when_int64_could_overflow():
    network = load_network("vgg-a")
    small = plan_exact(network, 64, 256)
    huge = plan_exact(network, 64, 2 ** 40)
    assert small.stats["integer_kind"] == "int64"
    assert huge.stats["integer_kind"] == "python"
    assert huge.stats["optimum"] == huge.communication.elements
    assert huge.communication.elements <= plan_hypar(network, 64, 2 ** 40).communication.elements


def test_exact_keeps_int64_on_long_networks_whose_total_alone_would_overflow_it(monkeypatch):
    # 100 fc layers of 2,500,000 x 2,500,000 weights on 16 accelerators: totals (all-dp's below) pass 2^62 units
    # of 1/(4·4^4) elements, while the terms of any three consecutive layers stay near 3e17
    width = 2_500_000
    network = Network("wide-fc", tuple(Layer(f"fc{i}", "fc", (width,), (width,)) for i in range(100)))
    plan = plan_exact(network, 16, 256)
    assert plan.stats["integer_kind"] == "int64"
    assert plan.stats["optimum"] == plan.communication.elements
    monkeypatch.setattr("placement.solvers.hypar._INT64_SAFE", 0)     # the same DP on Python integers
    exact = plan_exact(network, 16, 256)
    assert exact.stats["integer_kind"] == "python"
    assert (plan.partition, plan.stats["optimum"]) == (exact.partition, exact.stats["optimum"])
    assert plan_all_dp(network, 16, 256).communication.elements * 4 * 4 ** 4 > 2 ** 62


def test_exact_refuses_too_many_states():
    network = load_network("lenet-c")
    with pytest.raises(LimitExceededError, match=r"needs 6,561² = 43,046,721 state pairs .* for 256 accelerators and 3 "
                                         r"partition types \(limit 8,388,608\)"):
        plan_exact(network, 256, 1, ACCPAR_TYPES)


def test_planner_names():
    assert list(PLANNERS) == ["hypar", "exact", "all-dp", "all-mp", "one-weird-trick"]


def test_numpy_integers_are_accelerator_counts():
    # a sweep over np.arange gives numpy integers: 4 was refused as "not a power of two"
    import numpy as np

    lenet = load_network("lenet-c")
    assert plan_exact(lenet, accelerators=np.int64(4), batch=np.int64(4)).communication.bytes == \
        plan_exact(lenet, accelerators=4, batch=4).communication.bytes == 248480


# fc 2^20 -> 2^20 -> 4 at batch 2^11 on 4 accelerators: mp everywhere costs 2^33 + 24,576 elements (its partial
# sums B·2^20 = 2^31 pass int32), all-dp (4 − 1)·(2^40 + 2^22)
WIDE = Network("wide", (Layer("a", "fc", (2 ** 20,), (2 ** 20,)), Layer("b", "fc", (2 ** 20,), (4,))))


@pytest.mark.parametrize("planner, elements", [
    ("hypar", 2 ** 33 + 24576), ("exact", 2 ** 33 + 24576), ("all-dp", 3 * (2 ** 40 + 2 ** 22)),
    ("all-mp", 2 ** 33 + 24576), ("one-weird-trick", 2 ** 33 + 24576),
])
def test_numpy_integers_are_batch_sizes(planner, elements):
    # an np.int32 batch was kept as given: the amounts wrapped around in 32 bits (-8,589,910,016 elements for
    # all-mp), or the exact planner raised OverflowError
    import numpy as np

    assert PLANNERS[planner](WIDE, 4, np.int32(2 ** 11)).communication.elements == elements
    assert PLANNERS[planner](WIDE, 4, np.uint8(200)).communication == PLANNERS[planner](WIDE, 4, 200).communication
    mp = ((MP, MP), (MP, MP))
    assert communication(WIDE, mp, np.int32(2 ** 11)).elements == 2 ** 33 + 24576


@pytest.mark.parametrize("types, shown", [
    (None, "None"), (3, "3"), ([["dp"]], "[['dp']]"), (("dp", 1), "['dp', 1]"), ({"dp", "mp"}, "{'dp', 'mp'}"),
    ("dp", "'dp'"), (("dp", "dp"), "['dp', 'dp']"),
])
@pytest.mark.parametrize("planner", list(PLANNERS))
def test_bad_types_are_a_typed_error(planner, types, shown):
    # None and 3 raised TypeError, a list in the list "unhashable type"; a set was taken in its own
    # (arbitrary) order, which decides ties; the baselines took anything
    network = load_network("lenet-c")
    if isinstance(types, set):
        shown = repr(types)
    with pytest.raises(InvalidParameterError) as info:
        PLANNERS[planner](network, 4, 2, types)
    assert str(info.value) == ("types must be a list or tuple of distinct partition types out of 'dp', 'mp', "
                               f"'mp-out', not {shown}")


@pytest.mark.parametrize("planner", list(PLANNERS))
def test_a_network_name_is_no_network(planner):
    # raised AttributeError: 'str' object has no attribute 'layers'
    with pytest.raises(InvalidParameterError) as info:
        PLANNERS[planner]("lenet-c", 4, 2)
    assert str(info.value) == "network must be a Network (load_network reads one by name or from a file), not str"
    with pytest.raises(InvalidParameterError) as info:
        communication("lenet-c", ((DP,),) * 4, 2)
    assert str(info.value) == "network must be a Network (load_network reads one by name or from a file), not str"


def _ticking(monkeypatch, step: float) -> None:
    """The planners' clock moves ``step`` seconds at every reading."""
    import types

    from placement.solvers import hypar as module

    clock = itertools.count()
    monkeypatch.setattr(module, "time", types.SimpleNamespace(perf_counter=lambda: step * next(clock)))


def test_exact_tells_the_layers_planned_on_a_long_run(monkeypatch):
    # a chain forced onto Python integers, the long path (about 1.5 s a layer for 3 types on 128 accelerators and
    # layers of 3e9 elements), on a clock a second later at every reading: the planner read it at its start (0)
    # and before the second layer (1), then once per layer planned; a line a second, then one per tenth of the
    # time so far, none for the last layer, whose plan comes at once
    _ticking(monkeypatch, 1.0)
    monkeypatch.setattr("placement.solvers.hypar._INT64_SAFE", 0)
    network = Network("fc-30", tuple(Layer(f"fc{i}", "fc", (8,), (8,)) for i in range(30)))
    lines: list[str] = []
    plan = plan_exact(network, 4, 8, progress=lines.append)
    told = [tuple(map(int, line.split(": ")[1].split(" layers")[0].split(" of "))) for line in lines]
    assert told == [(done, 30) for done in (2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20, 23, 26, 29)]
    assert lines[0] == "exact planner: 2 of 30 layers planned on Python integers, 2 s; about 28 s left"
    assert lines[-1] == "exact planner: 29 of 30 layers planned on Python integers, 29 s; about 1 s left"
    assert plan.stats["integer_kind"] == "python"
    assert plan.partition == plan_exact(network, 4, 8).partition


def test_exact_says_nothing_on_a_run_within_a_second(monkeypatch):
    _ticking(monkeypatch, 0.01)
    lines: list[str] = []
    network = Network("fc-30", tuple(Layer(f"fc{i}", "fc", (8,), (8,)) for i in range(30)))
    plan_exact(network, 4, 8, progress=lines.append)
    assert lines == []


def test_exact_tells_the_pace_on_64_bit_integers_too(monkeypatch):
    # 4 layers: a line for the second and the third; the pace counts from the second layer (read at 1 s)
    _ticking(monkeypatch, 1.0)
    lines: list[str] = []
    plan_exact(load_network("lenet-c"), 8, 256, progress=lines.append)
    assert lines == ["exact planner: 2 of 4 layers planned, 2 s; about 2 s left",
                     "exact planner: 3 of 4 layers planned, 3 s; about 1 s left"]


def test_exact_refuses_a_progress_that_is_no_function():
    with pytest.raises(InvalidParameterError) as info:
        plan_exact(load_network("lenet-c"), 4, 2, progress="stderr")
    assert str(info.value) == "progress must be a function of one string or None, not str"


@pytest.mark.parametrize("call, message", [
    (lambda net: plan_exact(net, 4, 32, progres=print),
     "plan_exact() got an unexpected keyword argument 'progres'; did you mean 'progress'?"),
    (lambda net: plan_hypar(net, 4, 32, type=HYPAR_TYPES),
     "plan_hypar() got an unexpected keyword argument 'type'; did you mean 'types'?"),
    (lambda net: plan_all(net, accelerator=4, batch=32),
     "plan_all() got an unexpected keyword argument 'accelerator'; did you mean 'accelerators'?"),
    (lambda net: plan_all_dp(net, 4, bach=32), "plan_all_dp() got an unexpected keyword argument 'bach'; did you "
                                               "mean 'batch'?"),
    (lambda net: plan_all_mp(net, 4, 32, tpyes=HYPAR_TYPES),
     "plan_all_mp() got an unexpected keyword argument 'tpyes'; did you mean 'types'?"),
    (lambda net: plan_one_weird_trick(net, accelerator=4, batch=32),
     "plan_one_weird_trick() got an unexpected keyword argument 'accelerator'; did you mean 'accelerators'?"),
    (lambda net: communication(net, plan_hypar(net, 4, 32).partition, batchs=32),
     "communication() got an unexpected keyword argument 'batchs'; did you mean 'batch'?"),
    (lambda net: load_network(name_or_pat="vgg-a"),
     "load_network() got an unexpected keyword argument 'name_or_pat'; did you mean 'name_or_path'?"),
    (lambda net: plan_exact(net, 4, 32, verbose=True), "plan_exact() got an unexpected keyword argument 'verbose'"),
])
def test_a_misspelt_keyword_of_the_planners_and_the_model_names_the_one_meant(call, message):
    """docs/hypar.md calls these from Python: they said only 'got an unexpected keyword argument' (the baselines
    as '_uniform.<locals>.plan()'), where placement.hypar names the keyword meant."""
    with pytest.raises(TypeError) as error:
        call(load_network("lenet-c"))
    assert str(error.value) == message
