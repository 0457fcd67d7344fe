"""The HyPar/AccPar communication model: Tables 1 and 2, the hierarchy, byte totals (DESIGN.md §4)."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from placement.costmodel.hypar import (DP, INTER, MP, MP_OUT, boundary_at_level, communication, hierarchy_levels,
                                       inter_amount, intra_amount, partition_types, uniform_partition)
from placement.costmodel.network import Layer, Network, bundled_networks, load_network
from placement.errors import InvalidParameterError
from placement.solvers.hypar import plan_all_dp

# Two FC layers: fc1 4 -> 3 (A(W1) = 12), fc2 3 -> 2 (A(W2) = 6); batch 5, so the boundary
# tensor F_1 = E_1 has 5·3 = 15 elements and the output F_2 has 5·2 = 10.
FC = Network("fc", (Layer("fc1", "fc", (4,), (3,)), Layer("fc2", "fc", (3,), (2,))))


def two(p: str, q: str) -> tuple[tuple[str, ...], ...]:
    """A partition of the two-layer chain for N = 2 (one level)."""
    return ((p,), (q,))


# N = 2, one level, no shrinking:
#   intra: dp -> A(dW): 12 and 6; mp -> A(F_{l+1}): 15 and 10
#   inter (boundary 15): dp->dp 0; dp->mp ¼·15 + ¼·15 = 7.5; mp->mp ½·15 = 7.5; mp->dp ½·15 = 7.5
@pytest.mark.parametrize("p, q, intra, inter", [
    (DP, DP, (12, 6), 0),                      # 12 + 6 + 0 = 18
    (DP, MP, (12, 10), Fraction(15, 2)),       # 12 + 10 + 7.5 = 29.5
    (MP, MP, (15, 10), Fraction(15, 2)),       # 15 + 10 + 7.5 = 32.5
    (MP, DP, (15, 6), Fraction(15, 2)),        # 15 + 6 + 7.5 = 28.5
])
def test_two_accelerators_fc_all_transitions(p, q, intra, inter):
    comm = communication(FC, two(p, q), batch=5)
    (level,) = comm.levels
    assert level.pairs == 1
    assert level.intra == intra
    assert level.inter == (inter,)
    assert comm.elements == sum(intra) + inter
    assert comm.bytes == 8 * (sum(intra) + inter)   # 4 bytes per element, both sides of the pair


# conv1: 2x4x4 -> 3x2x2 (after pooling), kernel 3: A(W1) = 2·3·9 = 54, A(F_1) = 2·12 = 24 (batch 2);
# fc2: 12 -> 5: A(W2) = 60, A(F_2) = 2·5 = 10.
CONV = Network("conv", (Layer("conv1", "conv", (2, 4, 4), (3, 2, 2), 3), Layer("fc2", "fc", (12,), (5,))))


@pytest.mark.parametrize("p, q, elements", [
    (DP, DP, 54 + 60),            # 114
    (DP, MP, 54 + 10 + 12),       # dp->mp: ¼·24 + ¼·24 = 12 -> 76
    (MP, MP, 24 + 10 + 12),       # mp->mp: ½·24 = 12 -> 46
    (MP, DP, 24 + 60 + 12),       # mp->dp: ½·24 = 12 -> 96
])
def test_two_accelerators_conv_sizes(p, q, elements):
    assert communication(CONV, two(p, q), batch=2).elements == elements


# AccPar's third type on the FC chain (N = 2): mp-out exchanges A(E_l): 0 for layer 0 (E_0 is
# never computed), 15 for fc2. Inter: dp->o ½F = 7.5; mp->o 0; o->dp ¼F + ¼E = 7.5; o->mp 0; o->o ½F = 7.5.
@pytest.mark.parametrize("p, q, elements", [
    (MP_OUT, MP_OUT, 0 + 15 + Fraction(15, 2)),
    (DP, MP_OUT, 12 + 15 + Fraction(15, 2)),
    (MP, MP_OUT, 15 + 15 + 0),
    (MP_OUT, DP, 0 + 6 + Fraction(15, 2)),
    (MP_OUT, MP, 0 + 10 + 0),
])
def test_two_accelerators_accpar_third_type(p, q, elements):
    assert communication(FC, two(p, q), batch=5).elements == elements


def test_table_2_coefficients():
    assert INTER[DP, DP] == (0, 0)
    assert INTER[DP, MP] == (Fraction(1, 4), Fraction(1, 4))
    assert INTER[MP, MP] == (0, Fraction(1, 2))
    assert INTER[MP, DP] == (0, Fraction(1, 2))
    assert inter_amount(DP, MP, Fraction(100)) == 50
    assert intra_amount(DP, Fraction(7), Fraction(8), Fraction(9)) == 7
    assert intra_amount(MP, Fraction(7), Fraction(8), Fraction(9)) == 8
    assert intra_amount(MP_OUT, Fraction(7), Fraction(8), Fraction(9)) == 9


def test_hierarchy_shrinks_tensors_by_the_levels_above():
    # N = 4, batch 4: fc1 (W 12, boundary F_1 = 4·3 = 12) chooses dp then mp; fc2 (W 6, F_2 = 8) mp, mp.
    # Level 0: fc1 dp 12 + fc2 mp 8 + dp->mp ½·12 = 6                                   -> com_0 = 26
    # Level 1: fc1 mp: its partial sums F_1 halve their batch (fc1 was dp above)      -> 6
    #          fc2 mp: F_2 keeps its size (fc2 was mp above, not dp)                  -> 8
    #          boundary: batch halves (fc1 dp above), channels halve (fc2 mp above)   -> 12/4 = 3
    #          mp->mp ½·3 = 1.5                                                       -> com_1 = 15.5
    # total = 26 + 2·15.5 = 57 elements = 456 bytes
    comm = communication(FC, ((DP, MP), (MP, MP)), batch=4)
    assert [lv.amount for lv in comm.levels] == [26, Fraction(31, 2)]
    assert [lv.elements for lv in comm.levels] == [26, 31]
    assert comm.elements == 57 and comm.bytes == 456


def test_hierarchy_shrinks_weights_below_model_parallel_levels():
    # fc1 mp then dp, fc2 dp, dp; batch 4 (boundary 12).
    # Level 0: fc1 mp 12 + fc2 dp 6 + mp->dp ½·12 = 6        -> 24
    # Level 1: fc1 dp: dW halves its input rows (mp above)   -> 6;  fc2 dp 6; dp->dp 0 -> 12
    # total = 24 + 2·12 = 48
    assert communication(FC, ((MP, DP), (DP, DP)), batch=4).elements == 48


def test_boundary_rule():
    # batch halves where either neighbour is dp; channels where the consumer is mp or the producer mp-out
    assert boundary_at_level(64, (DP,), (MP,)) == 16
    assert boundary_at_level(64, (MP,), (DP,)) == 32
    assert boundary_at_level(64, (MP,), (MP,)) == 32
    assert boundary_at_level(64, (DP, DP), (DP, DP)) == 16
    assert boundary_at_level(64, (MP_OUT,), (MP,)) == 32
    assert boundary_at_level(64, (MP_OUT,), (DP,)) == 16


@pytest.mark.parametrize("name", bundled_networks())
def test_all_data_parallel_is_n_minus_one_times_eight_params(name):
    network = load_network(name)
    for levels in range(1, 7):                       # N = 2, 4, ..., 64
        accelerators = 2 ** levels
        partition = uniform_partition(network, levels, lambda layer: DP)
        for batch in (1, 256):
            assert communication(network, partition, batch).bytes == (accelerators - 1) * 8 * network.parameters
        assert plan_all_dp(network, accelerators, 256).communication.bytes == \
            (accelerators - 1) * 8 * network.parameters


def test_hierarchy_levels_and_types_reject_bad_values():
    assert hierarchy_levels(2) == 1 and hierarchy_levels(64) == 6
    for bad in (0, 1, 3, 12, -4):
        with pytest.raises(InvalidParameterError) as err:
            hierarchy_levels(bad)
        assert str(err.value) == ("accelerators must be a power of two from 2 to 2^53 (the array is bisected level "
                                  f"by level), not {bad}")
        assert err.value.parameter == "accelerators"
    assert hierarchy_levels(2 ** 53) == 53
    # 2^5000 would have meant 5,000 levels of big-integer amounts
    for bad, shown in ((2 ** 54, "18014398509481984"), (2 ** 5000, "an integer of about 1506 digits")):
        with pytest.raises(InvalidParameterError) as err:
            hierarchy_levels(bad)
        assert str(err.value).endswith(f"(the array is bisected level by level), not {shown}")
    assert partition_types(2) == (DP, MP) and partition_types(3) == (DP, MP, MP_OUT)
    with pytest.raises(InvalidParameterError, match="^types must be 2 \\(HyPar\\) or 3 \\(AccPar\\), not 4$"):
        partition_types(4)


def test_partition_shape_is_checked():
    with pytest.raises(InvalidParameterError, match="^partition has 1 layers, the network 2$"):
        communication(FC, ((DP,),), batch=1)
    with pytest.raises(InvalidParameterError, match="^partition must give every layer one choice per level$"):
        communication(FC, ((DP,), (DP, DP)), batch=1)
    with pytest.raises(InvalidParameterError, match=r"^partition gives layer 1 \(fc2\) at level 0 the type 'xx'; "
                                                    r"the types are dp, mp, mp-out$"):
        communication(FC, ((DP,), ("xx",)), batch=1)
    for bad in (None, "dp", (DP, DP)):   # not one sequence of choices per layer
        with pytest.raises(InvalidParameterError, match=r"^partition must be a sequence of per-level choice "
                                                        r"sequences, one per layer \(as a HyparPlan's partition\), "
                                                        rf"not {re.escape(repr(bad))}$"):
            communication(FC, bad, batch=1)
    with pytest.raises(InvalidParameterError, match="^batch must be an integer from 1 to 9007199254740992, not 0$"):
        communication(FC, two(DP, DP), batch=0)
