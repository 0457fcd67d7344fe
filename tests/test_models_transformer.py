"""The BERT operator graph: node counts, FLOPs, parameters and roofline costs derived by hand."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from placement.errors import InvalidParameterError
from placement.io.tarnawski import parse_instance, read_instance
from placement.zoo.transformer import (A100_SXM4_40GB, EPYC_7763, PCIE4_X16_BYTES_PER_S, GiB,
                                          TransformerConfig, bert_graph, roofline_ms, to_tarnawski_json)

ROOT = Path(__file__).resolve().parent.parent

# Tiny config: B=2, S=4, H=8, A=2, F=16, V=10, one layer.
TINY = TransformerConfig(layers=1, hidden=8, heads=2, ffn=16, seq=4, batch=2, vocab=10)


def by_name(graph):
    return {op.name: op for op in graph.ops}


def test_tiny_node_and_edge_counts():
    g = bert_graph(TINY)
    # 2 embedding nodes + 14 per layer + pooler + classifier.
    assert len(g.ops) == 2 + 14 + 2 == 18
    # embeddings -> layernorm (1); per layer 4 edges from the layer input (query, key, value,
    # attention.residual) + 14 inside (q->scores, k->scores, scores->softmax, softmax->context,
    # value->context, context->output, output->residual, residual->layernorm, layernorm->up,
    # layernorm->ffn.residual, up->gelu, gelu->down, down->ffn.residual, ffn.residual->layernorm);
    # last layernorm -> pooler -> classifier (2).
    assert len(g.edges) == 1 + 18 + 2 == 21
    assert all(u < v for u, v, _ in g.edges)  # ids are a topological order


def test_tiny_training_counts():
    g = bert_graph(TINY, training=True)
    # Every forward node gets one backward node.
    assert len(g.ops) == 36
    assert sum(op.backward for op in g.ops) == 18
    # 21 forward edges, 21 mirrored gradient edges, 18 saved-activation edges v -> grad(v).
    assert len(g.edges) == 21 + 21 + 18 == 60


def test_tiny_flops_by_hand():
    g = bert_graph(TINY)
    ops = by_name(g)
    # B·S·H = 2·4·8 = 64 elements; B·S·F = 128; B·A·S·S = 2·2·4·4 = 64.
    assert ops["embeddings"].flops == 2 * 64 == 128
    assert ops["embeddings.layernorm"].flops == 5 * 64 == 320
    # QKV projections: 3 · 2·B·S·H·H = 3 · 2·2·4·8·8 = 3 · 1024 = 3072.
    qkv = sum(ops[f"layer0.attention.{x}"].flops for x in ("query", "key", "value"))
    assert qkv == 3 * 2 * 2 * 4 * 8 * 8 == 3072
    # scores: 2·B·S·S·H + B·A·S·S = 2·2·4·4·8 + 64 = 512 + 64 = 576.
    assert ops["layer0.attention.scores"].flops == 576
    assert ops["layer0.attention.softmax"].flops == 5 * 64 == 320
    assert ops["layer0.attention.context"].flops == 2 * 2 * 4 * 4 * 8 == 512
    assert ops["layer0.attention.output"].flops == 1024
    assert ops["layer0.attention.residual"].flops == 64
    # FFN: 2·B·S·H·F = 2·2·4·8·16 = 2048 each way; GELU 8·B·S·F = 1024.
    assert ops["layer0.ffn.up"].flops == ops["layer0.ffn.down"].flops == 2048
    assert ops["layer0.ffn.gelu"].flops == 8 * 128 == 1024
    # pooler: 2·B·H·H + 4·B·H = 256 + 64 = 320; classifier: 2·B·H·2 = 64.
    assert ops["pooler"].flops == 320
    assert ops["classifier"].flops == 64
    # Total: 128 + 320 + 3072 + 576 + 320 + 512 + 1024 + 64 + 320 + 2048 + 1024 + 2048 + 64 + 320
    #        + 320 + 64 = 12224.
    assert g.total_flops == 12224
    # Training: backward nodes cost 2× their forward node, so 3× in all.
    assert bert_graph(TINY, training=True).total_flops == 3 * 12224 == 36672


def test_tiny_parameters_and_bytes():
    g = bert_graph(TINY)
    ops = by_name(g)
    # fp16: 2 bytes per element. query: H·H + H = 72 parameters = 144 bytes.
    assert ops["layer0.attention.query"].param_bytes == 144
    # embeddings: (V + max_position + type_vocab)·H = (10 + 512 + 2)·8 = 4192 parameters.
    assert ops["embeddings"].param_bytes == 2 * 4192
    # query reads its input (64 elements) and its weights (72), writes 64: (64 + 72 + 64)·2 = 400.
    assert ops["layer0.attention.query"].moved_bytes == 400
    # scores reads Q and K (64 + 64), writes B·A·S·S = 64: 192·2 = 384.
    assert ops["layer0.attention.scores"].moved_bytes == 384
    assert ops["layer0.attention.scores"].out_bytes == 128
    # pooler reads the first token only (B·H = 16) and H·H + H = 72 weights, writes B·H = 16.
    assert ops["pooler"].moved_bytes == (16 + 72 + 16) * 2


def test_bert_base_sizes_and_parameters():
    g = bert_graph()
    assert len(g.ops) == 14 * 12 + 4 == 172
    assert len(g.edges) == 18 * 12 + 3 == 219
    # HuggingFace BertModel (bert-base-uncased) has 109,482,240 parameters; the classifier adds
    # 768·2 + 2 = 1,538.
    assert g.param_count == 109_482_240 + 1_538
    t = bert_graph(training=True)
    assert (len(t.ops), len(t.edges)) == (344, 610)


def test_roofline_by_hand():
    ops = by_name(bert_graph())
    up = ops["layer0.ffn.up"]
    # FLOPs 2·B·S·H·F = 2·1024·768·3072 = 4,831,838,208; on 312 TFLOP/s: 0.0154867... ms.
    assert up.flops == 4_831_838_208
    # bytes: input 1024·768·2 + weights (768·3072 + 3072)·2 + output 1024·3072·2 = 12,589,056,
    # on 1.555 TB/s: 0.0080958 ms < compute time, so compute-bound.
    assert up.moved_bytes == 12_589_056
    assert roofline_ms(up.flops, up.moved_bytes, A100_SXM4_40GB) == pytest.approx(4_831_838_208 / 312e12 * 1e3)
    # CPU socket: 64 · 2.45 GHz · 32 = 5.0176 TFLOP/s -> 0.96298 ms.
    assert roofline_ms(up.flops, up.moved_bytes, EPYC_7763) == pytest.approx(4_831_838_208 / 5.0176e12 * 1e3)
    sm = ops["layer0.attention.softmax"]
    # softmax is memory-bound: reads and writes B·A·S·S = 1,572,864 fp16 elements = 6,291,456 bytes.
    assert sm.moved_bytes == 6_291_456
    assert roofline_ms(sm.flops, sm.moved_bytes, A100_SXM4_40GB) == pytest.approx(6_291_456 / 1.555e12 * 1e3)
    # PCIe 4.0 x16: 16 GT/s · 16 lanes · 128/130 / 8 = 31.5077 GB/s.
    assert PCIE4_X16_BYTES_PER_S == pytest.approx(31.5077e9, rel=1e-5)


def test_tarnawski_export_tiny_training():
    g = bert_graph(TINY, training=True)
    data = to_tarnawski_json(g, max_accelerators=2, max_cpus=1, memory=GiB)
    problem = parse_instance(data, "tiny")  # rejects unequal out-edge costs, cycles, bw->fw edges
    assert (len(problem.nodes), len(problem.edges)) == (36, 60)
    n = 18
    for v in range(n):
        fw, bw = problem.node(v), problem.node(n + v)
        assert (fw.backward, bw.backward) == (False, True)
        assert fw.colour == bw.colour == v
        assert bw.times[0] == pytest.approx(2 * fw.times[0])
        assert bw.times[1] == pytest.approx(2 * fw.times[1])
    ops = g.ops
    # Memory: forward = parameters + saved output; backward = weight gradient.
    q = next(op for op in ops if op.name == "layer0.attention.query")
    assert problem.node(q.id).memory == 144 + 128
    assert problem.node(n + q.id).memory == 144
    # The gradient of scores sends dQ and dK (64 elements each, fp16): c = 256 bytes / link.
    s = next(op for op in ops if op.name == "layer0.attention.scores")
    assert problem.node(n + s.id).out_cost == pytest.approx(1e3 * 256 / PCIE4_X16_BYTES_PER_S)
    assert problem.node(s.id).out_cost == pytest.approx(1e3 * 128 / PCIE4_X16_BYTES_PER_S)


def test_tarnawski_export_inference_has_no_colours():
    data = to_tarnawski_json(bert_graph(TINY))
    assert all("colorClass" not in node for node in data["nodes"])
    problem = parse_instance(data)
    assert not problem.is_training
    assert [t.count for t in problem.device_types] == [4, 1]
    assert problem.device_types[0].memory == 16 * GiB


@pytest.mark.parametrize("kwargs, parameter", [(dict(layers=0), "layers"), (dict(hidden=10, heads=3), "hidden"),
                                               (dict(seq=1024), "seq"), (dict(batch=1.5), "batch")])
def test_config_rejects_bad_shapes(kwargs, parameter):
    with pytest.raises(InvalidParameterError) as info:
        TransformerConfig(**kwargs)
    assert info.value.parameter == parameter and isinstance(info.value, ValueError)


@pytest.mark.parametrize("link", [0.0, -1.0, math.inf, math.nan])
def test_the_instance_refuses_a_link_without_a_positive_finite_bandwidth(link):
    with pytest.raises(InvalidParameterError, match="^link_bytes_per_s must be positive and finite"):
        to_tarnawski_json(bert_graph(TINY), link_bytes_per_s=link)


@pytest.mark.parametrize("kind, nodes, edges", [("inference", 172, 219), ("training", 344, 610)])
def test_bundled_instances_load_and_match_generator(kind, nodes, edges):
    path = ROOT / "instances" / f"bert-base-{kind}.json"
    problem = read_instance(path)
    assert (len(problem.nodes), len(problem.edges)) == (nodes, edges)
    assert [t.count for t in problem.device_types] == [4, 1]
    assert problem.device_types[0].memory == 16 * 2**30
    spec = importlib.util.spec_from_file_location("generate", ROOT / "instances" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    assert json.loads(path.read_text(encoding="utf-8")) == generate.instances()[path.name]


def test_the_generator_takes_no_arguments(capsys):
    # `generate.py --help` (or any argument) was ignored, and the bundled files rewritten
    spec = importlib.util.spec_from_file_location("generate", ROOT / "instances" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    with pytest.raises(SystemExit) as ended:
        generate.main(["--out", "x.json"])
    assert ended.value.code == 2
    assert capsys.readouterr().err.endswith("generate.py: error: unrecognized arguments: --out x.json\n")
