"""Which gradients the training cost model charges (placement.io.opgraph.gradient_flow)."""

from __future__ import annotations

from placement.io.op_grouping import group_ops
from placement.io.opgraph import Gradient, Op, OpGraph, Param, gradient_flow


def _op(name: str, kind: str, inputs=(), params=(), model_inputs=(), outputs=(4.0,), floating=()) -> Op:
    return Op(name, "t", kind, "fp32", 10.0, 20.0, outputs, tuple(inputs), tuple(params), (), (), (),
              tuple(model_inputs), tuple(floating))


W = Param("w", 16.0, True)
FROZEN = Param("f", 16.0, False)


def test_gradients_start_at_the_first_trained_parameter_and_follow_floating_outputs():
    # 0: a mask from the input ids (integer output); 1: a frozen matmul on the features; 2: max with
    # indices (values floating, indices integer) of a trained matmul 3's output ... in program order:
    ops = (
        _op("mask", "pointwise", model_inputs=["ids"], floating=(False,)),        # no trained operand
        _op("frozen", "matmul", model_inputs=["x"], params=[FROZEN]),              # nothing needs a gradient
        _op("trained", "matmul", inputs=[(1, 0)], params=[W]),                     # weight gradient alone
        _op("masked", "pointwise", inputs=[(2, 0), (0, 0)]),                       # one operand needs one
        _op("max", "reduction", inputs=[(3, 0)], outputs=(4.0, 8.0), floating=(True, False)),
        _op("gather", "gather", inputs=[(4, 1)]),                                  # reads only the indices
        _op("both", "matmul", inputs=[(4, 0), (3, 0)]),                            # two activations
        _op("frozen2", "matmul", inputs=[(6, 0)], params=[FROZEN]),                # input gradient alone
    )
    graph = OpGraph(ops, "m", "test", inputs=("ids", "x"))
    flow = gradient_flow(graph)
    assert flow == (Gradient(0, False), Gradient(0, False), Gradient(0, True), Gradient(1, False),
                    Gradient(1, False), Gradient(0, False), Gradient(2, False), Gradient(1, False))
    # factors: none, none, weight GEMM alone, pointwise 1, reduction 1, none, both GEMMs, input GEMM alone
    assert [op.backward_factor(g) for op, g in zip(ops, flow)] == [0, 0, 1, 1, 1, 0, 2, 1]
    assert [op.backward_kernels(g) for op, g in zip(ops, flow)] == [0, 0, 1, 1, 1, 0, 2, 1]
    # an input that needs a gradient (requires_grad=True) reaches the frozen matmul
    with_x = gradient_flow(OpGraph(ops, "m", "test", inputs=("ids", "x"), grad_inputs=("x",)))
    assert with_x[1] == Gradient(1, False) and with_x[2] == Gradient(1, True)
    assert ops[2].backward_factor(with_x[2]) == 2


def test_only_tensors_that_need_a_gradient_flow_back_along_an_edge():
    ops = (
        _op("frozen", "matmul", model_inputs=["x"], params=[FROZEN], outputs=(12.0,)),
        _op("trained", "matmul", inputs=[(0, 0)], params=[W], outputs=(6.0,)),
        _op("add", "pointwise", inputs=[(0, 0), (1, 0)], outputs=(6.0,)),
    )
    pg = group_ops(OpGraph(ops, "m", "test", inputs=("x",)), "operator")
    # edges 0→1 (12 bytes), 0→2 (12), 1→2 (6): only the trained matmul's output needs a gradient
    assert [(a, b, size) for a, b, size in pg.edges] == [(0, 1, 12.0), (0, 2, 12.0), (1, 2, 6.0)]
    assert [pg.gradient_bytes(e) for e in range(3)] == [0.0, 0.0, 6.0]
    # the frozen matmul saves nothing for a backward pass; the others their outputs
    assert [pg.activation_bytes(v) for v in range(3)] == [0.0, 6.0, 6.0]
