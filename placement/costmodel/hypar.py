"""The HyPar / AccPar communication model of hybrid parallelism (Song et al., HPCA 2019 / 2020).

Numbered model (DESIGN.md §4); every amount is an exact :class:`fractions.Fraction` of elements.

1. **Partition types.** Between the two halves of an accelerator group a weighted layer is
   ``dp`` (data parallel: the batch is split, ``W`` replicated), ``mp`` (model parallel: ``W``
   split on its input dimension, each half computes partial sums of ``F_{l+1}``) or, as AccPar's
   third type, ``mp-out`` (``W`` split on its output dimension, each half computes partial sums
   of ``E_l`` in the backward pass).
2. **Intra-layer amounts** (Table 1): ``dp → A(dW_l)``, ``mp → A(F_{l+1})``,
   ``mp-out → A(E_l)``. The first layer's ``E_0`` (the error of the input data) is never
   computed, so ``mp-out`` costs nothing there.
3. **Inter-layer amounts** (Table 2), for layer ``l`` of type ``p`` feeding layer ``l+1`` of
   type ``q``, as ``cF·A(F_{l+1}) + cE·A(E_{l+1})`` with ``(cF, cE)`` from :data:`INTER`:
   ``dp→dp (0, 0)``, ``dp→mp (¼, ¼)``, ``mp→mp (0, ½)``, ``mp→dp (0, ½)``. The ``mp-out`` rows
   follow from the same reasoning (what one half holds against what it needs):
   ``dp→mp-out (½, 0)``, ``mp→mp-out (0, 0)``, ``mp-out→dp (¼, ¼)``, ``mp-out→mp (0, 0)``,
   ``mp-out→mp-out (½, 0)``.
4. **Hierarchy.** ``N = 2^H`` accelerators are bisected recursively into levels
   ``h = 0 .. H-1`` (top first); level ``h`` has ``2^h`` pairs of groups, and a layer's choice at
   level ``h`` applies in every group of that level. Tensors shrink by the choices of the
   levels above ``h``:

   * ``W_l``/``dW_l`` halve at each level above where layer ``l`` is ``mp`` or ``mp-out``;
   * the partial sums of ``F_{l+1}`` that an ``mp`` layer exchanges are the layer's own output:
     their batch halves where layer ``l`` is ``dp`` above, their channels where it is
     ``mp-out`` above; likewise the partial sums of ``E_l`` of an ``mp-out`` layer halve their
     batch where the layer is ``dp`` above and their channels where it is ``mp`` above;
   * the one boundary tensor ``F_{l+1}``/``E_{l+1}`` between layers ``l`` and ``l+1`` halves its
     batch at a level above where *either* neighbour is ``dp``, and its channels where the
     consumer ``l+1`` is ``mp`` or the producer ``l`` is ``mp-out``.

   ``com_h`` is the amount of one pair at level ``h`` (intra over layers + inter over
   boundaries), and ``total = Σ_h 2^h · com_h`` elements.
5. **Bytes.** 4 bytes per element, counted on both sides of a pair:
   ``bytes = 8 · total``. All-``dp`` therefore costs exactly ``(N−1) · 8 · #params`` bytes.

With batch 256 and these rules the model reproduces the HyPar paper's VGG-A totals for 16
accelerators (15.9 GB data parallel, 1.47 GB HyPar; see ``docs/hypar.md``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

from placement.costmodel.network import Layer, Network
from placement.errors import InvalidParameterError
from placement.parameters import integer, keywords_checked

DP = "dp"
MP = "mp"
MP_OUT = "mp-out"
HYPAR_TYPES: tuple[str, ...] = (DP, MP)
ACCPAR_TYPES: tuple[str, ...] = (DP, MP, MP_OUT)
LETTERS = {DP: "d", MP: "m", MP_OUT: "o"}
BYTES_PER_ELEMENT = 4
SIDES = 2  # both sides of a pair are counted

_Q = Fraction(1, 4)
_H = Fraction(1, 2)
_0 = Fraction(0)
INTER: dict[tuple[str, str], tuple[Fraction, Fraction]] = {
    (DP, DP): (_0, _0), (DP, MP): (_Q, _Q), (MP, MP): (_0, _H), (MP, DP): (_0, _H),
    (DP, MP_OUT): (_H, _0), (MP, MP_OUT): (_0, _0),
    (MP_OUT, DP): (_Q, _Q), (MP_OUT, MP): (_0, _0), (MP_OUT, MP_OUT): (_H, _0),
}
"""Table 2 (and its AccPar extension): ``(cF, cE)`` for producer type ``p`` and consumer type ``q``."""

Partition = tuple[tuple[str, ...], ...]
"""A choice per layer and level: ``partition[l][h]`` is layer ``l``'s type at level ``h``."""


def partition_types(types: int) -> tuple[str, ...]:
    """The partition types by their number ``types``: 2 → HyPar's (dp, mp), 3 → AccPar's (dp, mp, mp-out)."""
    if types == 2:
        return HYPAR_TYPES
    if types == 3:
        return ACCPAR_TYPES
    raise InvalidParameterError("types", f"must be 2 (HyPar) or 3 (AccPar), not {types!r}")


#: the most accelerators: 2^MAX_LEVELS (a level per bisection; amounts stay within floating point)
MAX_LEVELS = 53


def hierarchy_levels(accelerators: int) -> int:
    """``H`` with ``accelerators = 2^H``; HyPar bisects the array, so ``N`` must be a power of two from 2
    to ``2^MAX_LEVELS``."""
    if isinstance(accelerators, numbers.Integral) and not isinstance(accelerators, bool):
        accelerators = int(accelerators)      # a numpy integer too
    if isinstance(accelerators, bool) or not isinstance(accelerators, int) or accelerators < 2 \
            or accelerators & (accelerators - 1) or accelerators > 2 ** MAX_LEVELS:
        shown = repr(accelerators)
        if isinstance(accelerators, int) and accelerators > 2 ** 64:
            shown = f"an integer of about {int(accelerators.bit_length() * math.log10(2)) + 1} digits"
        raise InvalidParameterError("accelerators", f"must be a power of two from 2 to 2^{MAX_LEVELS} (the array is "
                                                    f"bisected level by level), not {shown}")
    return accelerators.bit_length() - 1


#: the largest batch: its byte and operation counts stay exact in floating point
MAX_BATCH = 2 ** 53


def check_batch(batch: int) -> int:
    """``batch`` as a Python ``int`` (a numpy integer too, whose arithmetic would wrap around), when it is an
    integer from 1 to :data:`MAX_BATCH`; else an :class:`InvalidParameterError`."""
    return integer("batch", batch, smallest=1, largest=MAX_BATCH)  # type: ignore[return-value]


def _halvings(flags: Sequence[bool]) -> Fraction:
    return Fraction(1, 2 ** sum(1 for f in flags if f))


# ----------------------------------------------------------------------------------------
# tensor sizes at a level
# ----------------------------------------------------------------------------------------

def weight_at_level(layer: Layer, above: Sequence[str]) -> Fraction:
    """``A(dW_l)`` in one group at a level whose upper levels gave layer ``l`` the types ``above``."""
    return layer.weight_elements * _halvings([t in (MP, MP_OUT) for t in above])


def output_partials_at_level(layer: Layer, above: Sequence[str], batch: int) -> Fraction:
    """``A(F_{l+1})`` as an ``mp`` layer's partial sums: batch halves at ``dp``, channels at ``mp-out``."""
    return layer.output_elements(batch) * _halvings([t in (DP, MP_OUT) for t in above])


def input_error_partials_at_level(layer: Layer, above: Sequence[str], batch: int, first: bool) -> Fraction:
    """``A(E_l)`` as an ``mp-out`` layer's partial sums: batch halves at ``dp``, channels at ``mp``; 0 for layer 0."""
    if first:
        return Fraction(0)
    return layer.input_elements(batch) * _halvings([t in (DP, MP) for t in above])


def boundary_at_level(elements: int, producer_above: Sequence[str], consumer_above: Sequence[str]) -> Fraction:
    """``A(F_{l+1}) = A(E_{l+1})`` of the boundary tensor between two layers at a level.

    Its batch halves at every level above where either neighbour is ``dp``; its channels where
    the consumer is ``mp`` or the producer ``mp-out``.
    """
    pairs = list(zip(producer_above, consumer_above))
    batch = _halvings([p == DP or q == DP for p, q in pairs])
    channels = _halvings([q == MP or p == MP_OUT for p, q in pairs])
    return elements * batch * channels


# ----------------------------------------------------------------------------------------
# Tables 1 and 2
# ----------------------------------------------------------------------------------------

def _unknown_type(parameter: str, value: object) -> InvalidParameterError:
    return InvalidParameterError(parameter, f"must be one of {', '.join(map(repr, ACCPAR_TYPES))}, not {value!r}")


def intra_amount(kind: str, weight: Fraction, output_partials: Fraction, input_error_partials: Fraction) -> Fraction:
    """Table 1: the intra-layer amount of one pair for a layer of type ``kind``, given its tensors at that level."""
    if kind == DP:
        return Fraction(weight)
    if kind == MP:
        return Fraction(output_partials)
    if kind == MP_OUT:
        return Fraction(input_error_partials)
    raise _unknown_type("kind", kind)


def inter_amount(producer: str, consumer: str, boundary: Fraction) -> Fraction:
    """Table 2: ``cF·A(F_{l+1}) + cE·A(E_{l+1})`` for one pair; ``F`` and ``E`` have the boundary's size."""
    try:
        c_f, c_e = INTER[producer, consumer]
    except KeyError:
        raise (_unknown_type("producer", producer) if producer not in ACCPAR_TYPES
               else _unknown_type("consumer", consumer)) from None
    return (c_f + c_e) * boundary


def layer_intra_at_level(network: Network, l: int, kind: str, above: Sequence[str], batch: int) -> Fraction:
    """Intra-layer amount of layer ``l`` choosing ``kind`` at a level below ``above``."""
    layer = network.layers[l]
    return intra_amount(kind, weight_at_level(layer, above), output_partials_at_level(layer, above, batch),
                        input_error_partials_at_level(layer, above, batch, first=(l == 0)))


def boundary_inter_at_level(network: Network, l: int, producer: str, consumer: str,
                            producer_above: Sequence[str], consumer_above: Sequence[str], batch: int) -> Fraction:
    """Inter-layer amount between layers ``l`` and ``l+1`` at a level."""
    size = boundary_at_level(network.layers[l].output_elements(batch), producer_above, consumer_above)
    return inter_amount(producer, consumer, size)


# ----------------------------------------------------------------------------------------
# totals
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LevelCommunication:
    """Level ``h``: ``2^h`` pairs; amounts of one pair per layer (intra) and per boundary (inter)."""

    level: int
    intra: tuple[Fraction, ...]
    inter: tuple[Fraction, ...]

    @property
    def pairs(self) -> int:
        return 2 ** self.level

    @property
    def amount(self) -> Fraction:
        """``com_h``: the elements one pair exchanges."""
        return sum(self.intra, Fraction(0)) + sum(self.inter, Fraction(0))

    @property
    def elements(self) -> Fraction:
        """``2^h · com_h``."""
        return self.pairs * self.amount


@dataclass(frozen=True)
class Communication:
    """The model's verdict on a partition: per level, and in total."""

    levels: tuple[LevelCommunication, ...]

    @property
    def elements(self) -> Fraction:
        """``Σ_h 2^h · com_h``."""
        return sum((lv.elements for lv in self.levels), Fraction(0))

    @property
    def bytes(self) -> Fraction:
        """``4 bytes × 2 sides × elements``."""
        return BYTES_PER_ELEMENT * SIDES * self.elements


def check_partition(network: Network, partition: Partition, types: Sequence[str] = ACCPAR_TYPES) -> int:
    """Validate ``partition`` (one choice per layer and level, from ``types``); return the number of levels."""
    if not isinstance(partition, (tuple, list)) or not all(isinstance(row, (tuple, list)) for row in partition):
        raise InvalidParameterError("partition", f"must be a sequence of per-level choice sequences, one per "
                                                 f"layer (as a HyparPlan's partition), not {partition!r}")
    if len(partition) != len(network.layers):
        raise InvalidParameterError("partition", f"has {len(partition)} layers, the network "
                                                 f"{len(network.layers)}")
    levels = {len(row) for row in partition}
    if len(levels) != 1:
        raise InvalidParameterError("partition", "must give every layer one choice per level")
    for l, row in enumerate(partition):
        for h, t in enumerate(row):
            if t not in types:
                raise InvalidParameterError("partition", f"gives layer {l} ({network.layers[l].name}) at level {h} "
                                                         f"the type {t!r}; the types are {', '.join(types)}")
    return levels.pop()


def check_network(network: Any) -> None:
    """Refuse a ``network`` argument that is no :class:`Network`."""
    if not isinstance(network, Network):
        raise InvalidParameterError("network", f"must be a Network (load_network reads one by name or from a "
                                               f"file), not {type(network).__name__}")


@keywords_checked
def communication(network: Network, partition: Partition, batch: int) -> Communication:
    """Evaluate the model (items 1–5 of the module docstring) on ``partition``, level by level."""
    check_network(network)
    batch = check_batch(batch)
    depth = check_partition(network, partition)
    n = len(network.layers)
    levels = []
    for h in range(depth):
        intra = tuple(layer_intra_at_level(network, l, partition[l][h], partition[l][:h], batch) for l in range(n))
        inter = tuple(boundary_inter_at_level(network, l, partition[l][h], partition[l + 1][h],
                                              partition[l][:h], partition[l + 1][:h], batch)
                      for l in range(n - 1))
        levels.append(LevelCommunication(h, intra, inter))
    return Communication(tuple(levels))


def uniform_partition(network: Network, levels: int, kind_of_layer) -> Partition:
    """A partition giving every level of layer ``l`` the type ``kind_of_layer(layer)``."""
    return tuple((kind_of_layer(layer),) * levels for layer in network.layers)


def undivided_batch(network: Network, partition: Partition, batch: int) -> tuple[str, int] | None:
    """The first layer whose ``dp`` choices split the batch into more equal shares than ``batch`` divides
    into (``2^d`` shares for ``d`` levels of ``dp``), with that number of shares; ``None`` when every split
    is whole. The model, like HyPar's, counts amounts as divisible, so such a plan's figures assume
    fractions of a sample per accelerator."""
    for layer, row in zip(network.layers, partition):
        shares = 2 ** sum(1 for t in row if t == DP)
        if batch % shares:
            return layer.name, shares
    return None


def partition_letters(row: Sequence[str]) -> str:
    """A layer's choices over the levels as letters, top level first: ``dp, dp, mp`` → ``ddm``."""
    return "".join(LETTERS[t] for t in row)
