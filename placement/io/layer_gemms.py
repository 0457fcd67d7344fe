"""The GEMMs of the operators whose shape rules both importers share: an einsum and a
recurrent layer (LSTM, GRU, RNN), worked out from shapes alone.

Einsum (:func:`einsum_products`): the GEMM ``(batch, m, n, k)`` it runs, ``batch`` the sizes of the
indices of both operands that the output keeps, ``m`` (``n``) those of the first (second) operand alone
that it keeps, ``k`` those of both that it sums; an index of one operand alone that the output drops
is summed before, at no GEMM cost. An ellipsis stands for the dimensions it covers, aligned from the
right as in broadcasting. An operand whose dimension is 1 has no such index: it broadcasts, as ATen
reads it (``bhqd,bhkd->bhqk`` with one head of ``k`` runs ``b`` GEMMs of ``h·q`` rows; ``ij,jk->ik``
with ``j`` 1 multiplies). An einsum that sums no index both operands share (``bi,bj->bij``) is a
broadcast multiply, no GEMM (:func:`einsum_multiplies`). One of three or more operands runs one such
product of two at a time (:func:`einsum_products`, ATen's order), an index kept while the output or an
operand not yet multiplied has it. Autograd differentiates each such product (:func:`einsum_gradients`):
one product of its size for each of its two factors that needs a gradient, a factor that is the product
of several operands needing one where any of them does.

Recurrent layer (:func:`recurrent_gemms`), per layer and direction: the input projection of all ``T``
steps at once (``(T·N, G·H, I)``, role ``input`` for the first layer, ``input+`` for the others), the
recurrent GEMM of each step (``(N, G·H, P)`` over ``T`` steps, role ``recurrent``) and, where the
hidden state is projected (``P ≠ H``), the projection of each step's state (``(N, P, H)`` over ``T``,
role ``projection``); ``G`` gates (4 LSTM, 3 GRU, 1 RNN), input ``I`` wide, hidden ``H``, batch ``N``.
Its gradient (:func:`recurrent_gradients`) is in the five parts of :mod:`placement.io.opgraph`
("Training").
"""

from __future__ import annotations

import math
from typing import Sequence

from placement.codesign.workload import Operator
from placement.io import operator_shapes as shapes

Shape = Sequence[int]
Gemm = tuple[int, int, int, int]
#: a product of two of an einsum's operands: its GEMM, whether it multiplies, and the operands of its factors
Contraction = tuple[Gemm, bool, tuple[int, ...], tuple[int, ...]]


def einsum_terms(equation: object, operands: Sequence[Shape]) -> tuple[list[str], str, dict[str, int]] | None:
    """The indices of each operand of an einsum (of shapes ``operands``) and of its output, an ellipsis
    written out as letters the equation does not use, and every index's size; ``None`` for an equation
    that does not fit them."""
    if not isinstance(equation, str) or not operands:
        return None
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        return None
    if "." in equation:
        if any(t.replace("...", "", 1).count(".") for t in (*terms, output)):
            return None
        covered = [len(o) - (len(t) - 3) if "..." in t else 0 for t, o in zip(terms, operands)]
        spare = [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in equation]
        widest = max(covered)
        if min(covered) < 0 or widest > len(spare):
            return None
        letters = "".join(spare[:widest])
        terms = [t.replace("...", letters[widest - n:]) for t, n in zip(terms, covered)]
        output = output.replace("...", letters) if arrow else letters + "".join(
            sorted(c for c in set(inputs) - {",", "."} if inputs.count(c) == 1))
        arrow = "->"
    if not arrow:   # implicit output: the indices that appear once, in alphabetical order
        output = "".join(sorted(c for c in set(inputs) - {","} if inputs.count(c) == 1))
    size: dict[str, int] = {}
    for term, shape in zip(terms, operands):
        if len(term) != len(shape):
            return None
        for c, d in zip(term, shape):   # a broadcast dimension (1 in one operand) has the other's size, 0 too
            if size.get(c, 1) == 1:
                size[c] = int(d)
    return terms, output, size


def einsum_multiplies(steps: list[tuple[Gemm, bool]]) -> bool:
    """Whether an einsum's products (:func:`einsum_products`) are one multiply: two operands that share no
    index it sums (an outer or elementwise product, ``bi,bj->bij``), which torch runs as a broadcast
    multiply, not a GEMM."""
    return len(steps) == 1 and steps[0][1]


def einsum_products(equation: object, operands: Sequence[Shape], path: object = None
                    ) -> list[tuple[Gemm, bool]] | None:
    """The products of two operands an einsum runs (module docstring), in ATen's order: by ``path``
    (flattened pairs of positions in the list of operands left, each pair's product appended to its
    end: opt_einsum's, which ``torch.einsum`` passes where opt_einsum is installed), else left to right,
    each product taking the place of the first operand; each as its GEMM ``(batch, m, n, k)`` and whether
    it multiplies (sums no index both share, ``k`` then 1). ``[]`` for one operand (a sum or a permutation:
    no product), ``None`` for an equation or a path that does not fit the operands."""
    found = einsum_contractions(equation, operands, path)
    return None if found is None else [(gemm, multiplies) for gemm, multiplies, _, _ in found]


def einsum_contractions(equation: object, operands: Sequence[Shape], path: object = None
                        ) -> list[Contraction] | None:
    """:func:`einsum_products`, each product with the positions of the operands (in the equation's
    order) that its first and its second factor are made of: one operand, or the product of several."""
    parsed = einsum_terms(equation, operands)
    if parsed is None:
        return None
    terms, output, size = parsed
    pairs: list[tuple[int, int]] | None = None
    if path is not None:
        flat = list(path) if isinstance(path, (list, tuple)) else []
        if len(flat) != 2 * (len(terms) - 1) or not all(isinstance(i, int) for i in flat):
            return None
        pairs = list(zip(flat[0::2], flat[1::2]))

    def group(chars: set[str]) -> int:
        return math.prod(size[c] for c in chars)

    # ATen reads an index only where its operand's dimension is not 1: a dimension of 1 broadcasts
    left = [{c for c, d in zip(t, shape) if int(d) != 1} for t, shape in zip(terms, operands)]
    held = [(k,) for k in range(len(terms))]   # the operands each of ``left`` is made of
    steps: list[Contraction] = []
    for step in range(len(terms) - 1):
        i, j = pairs[step] if pairs is not None else (0, 1)
        if i == j or not (0 <= i < len(left) and 0 <= j < len(left)):
            return None
        rest = [t for k, t in enumerate(left) if k not in (i, j)]
        kept = set(output).union(*rest)
        a, b = left[i] & (left[j] | kept), left[j] & (left[i] | kept)   # one's own dropped indices summed before
        summed = (a & b) - kept
        steps.append(((group(a & b & kept), group((a - b) & kept), group((b - a) & kept), group(summed)),
                      not summed, held[i], held[j]))
        made = (a | b) & kept
        both = tuple(sorted(held[i] + held[j]))
        others = [h for k, h in enumerate(held) if k not in (i, j)]
        left = rest + [made] if pairs is not None else [made] + rest
        held = others + [both] if pairs is not None else [both] + others
    return steps


def einsum_gradients(contractions: Sequence[Contraction], operands: Sequence[tuple[bool, bool]]
                     ) -> list[tuple[Gemm, bool, bool]]:
    """The products autograd runs for the gradient of an einsum's products (:func:`einsum_contractions`),
    given per operand whether it needs a gradient and whether it is computed from parameters alone: per
    product, one of its size for each factor that needs a gradient (one of its operands does), in the
    product's order: the first factor's ``dA = dC·Bᵀ``, GEMM ``(batch, m, k, n)``, then the second's
    ``dB = Aᵀ·dC``, ``(batch, k, n, m)``; a product that multiplies, a multiply of its size for each.
    Each as its GEMM, whether it multiplies, and whether it is a weight gradient (its factor computed
    from parameters alone)."""
    out: list[tuple[Gemm, bool, bool]] = []
    for (batch, m, n, k), multiplies, first, second in contractions:
        for factor, gemm in ((first, (batch, m, k, n)), (second, (batch, k, n, m))):
            if any(operands[p][0] for p in factor):
                weight = all(operands[p][1] for p in factor)
                out.append(((batch, m, n, k) if multiplies else gemm, multiplies, weight))
    return out


def einsum_flops(steps: list[tuple[Gemm, bool]]) -> int:
    """The FLOPs of an einsum's products (:func:`einsum_products`): 2 · batch · m · n · k a GEMM (one
    multiply-add = 2), batch · m · n a multiply."""
    return sum(math.prod(gemm[:3]) if multiplies else 2 * math.prod(gemm) for gemm, multiplies in steps)


def einsum_operators(steps: list[tuple[Gemm, bool]]) -> tuple[Operator, ...]:
    """An einsum's products (:func:`einsum_products`) as operators (:mod:`placement.io.operator_shapes`)."""
    return tuple(op for (batch, m, n, k), multiplies in steps
                 for op in (shapes.vector("mul", batch * m * n) if multiplies else shapes.gemm(m, n, k, batch)))


def recurrent_gemms(gates: int, steps: int, batch: int, width: int, hidden: int, projected: int, layers: int,
                    directions: int) -> list[tuple[str, Gemm]]:
    """The GEMMs ``(m, n, k, times)`` of a recurrent layer's forward, each with its role (module
    docstring); ``width`` is the first layer's input width, ``projected`` the hidden state's size after
    the projection (``hidden`` without one)."""
    out: list[tuple[str, Gemm]] = []
    for layer in range(layers):
        for _ in range(directions):
            out += [("input" if layer == 0 else "input+", (steps * batch, gates * hidden, width, 1)),
                    ("recurrent", (batch, gates * hidden, projected, steps))]
            if projected != hidden:   # the projection of each step's hidden state (proj_size)
                out.append(("projection", (batch, projected, hidden, steps)))
        width = directions * projected
    return out


def recurrent_flops(gemms: list[tuple[str, Gemm]]) -> int:
    """The forward FLOPs of a recurrent layer's GEMMs (one multiply-add = 2)."""
    return 2 * sum(times * m * n * k for _, (m, n, k, times) in gemms)


def recurrent_operators(gemms: list[tuple[str, Gemm]]) -> tuple[Operator, ...]:
    """The forward GEMMs as operators (:mod:`placement.io.operator_shapes`)."""
    return tuple(s for _, (m, n, k, times) in gemms for s in shapes.gemm(m, n, k, times))


def recurrent_gradients(gemms: list[tuple[str, Gemm]]) -> tuple[tuple[Operator, ...], ...]:
    """The gradient GEMMs of a recurrent layer, in five parts (module docstring of
    :mod:`placement.io.opgraph`, "Training"): the weight gradients (one per forward GEMM, of its
    size), the hidden state's gradients through time (the recurrent GEMM over ``T − 1`` steps, the
    projection's over ``T``), the first layer's input gradient, the later layers' input gradients,
    and the initial state's gradient (the recurrent GEMM of the first step)."""
    weights: list[Operator] = []
    state: list[Operator] = []
    first: list[Operator] = []
    later: list[Operator] = []
    initial: list[Operator] = []
    for role, (m, n, k, times) in gemms:
        weights += shapes.gemm(k, n, m, times)
        if role == "recurrent":
            state += shapes.gemm(m, k, n, times - 1)
            initial += shapes.gemm(m, k, n, 1)
        elif role == "projection":
            state += shapes.gemm(m, k, n, times)
        else:
            (first if role == "input" else later).extend(shapes.gemm(m, k, n, times))
    return tuple(weights), tuple(state), tuple(first), tuple(later), tuple(initial)
