"""The CPU cost model against a measurement: a model's forward timed by torch.profiler, per operator kind.

For each model (a transformer stack, a U-Net with skip concats, an MLP) the forward is
imported through ``torch.export`` (placement.io.torch_export) and costed on the CPU
catalogue entry (``epyc-7763``): per operator, roofline time plus the per-kernel
overhead. The same forward, in eager mode under ``torch.no_grad()``, is timed with
``torch.profiler`` on this machine: the top-level ATen events of each forward (the calls
the program makes; their children are the kernels they run), each given the cost kind of
the operator of that name in the exported graph (``other`` when the graph has none).
Measured times are medians over ``--repeats`` profiled forwards (after warm-up).

Columns: kind, operators per forward (in the graph), measured ms, predicted ms on the
catalogue socket, their ratio, and the prediction for this machine's share of the
socket (``threads``/64 of its peak FLOP/s and memory bandwidth, the per-kernel overhead
unchanged) with its ratio.

Calibration: the same three models at tiny sizes (their roofline time is a fraction of a
microsecond per operator) give the per-kernel overhead of this machine: (wall-clock time
of a forward, without the profiler, whose own per-event cost would count − the
forward's roofline time) / the forward's kernels, over the three models. Both the median
and the fastest of the repeats are reported; the calibrated value is the fastest, because
other work on a shared machine only ever adds time to a fixed cost.
It includes the Python and ``nn.Module`` call overhead of eager PyTorch, which is part
of what each operator costs. That is the source of the ``op_overhead`` of the
``epyc-7763`` entry of ``placement/costmodel/devices.json``. Each table also gives the
median wall-clock time of the un-profiled forward.

A second table plans a U-Net (the two-level U-Net of the import consistency tests, at
several widths and image sizes) on 4 H100, over PCIe and over NVLink, with the catalogue's
per-kernel overhead and without it (every ``op_overhead`` 0, the roofline alone): the
H100 time of the whole graph, the DP optimum and the operators per stage.

    python benchmarks/torch_costs.py [--threads 1] [--repeats 9] [--json benchmarks/results/torch_costs.json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import cannot_write, exit_with, machine, positive_int, refuse  # noqa: E402  (beside this script)

#: what the benchmark imports beyond the package (its models are those of the torch tests, which need them all)
NEEDED = ("torch", "torch.distributed.pipelining", "onnx", "onnxscript", "pytest")


def missing_module() -> str | None:
    """The first module of :data:`NEEDED` that cannot be imported here, or None."""
    for module in NEEDED:
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None


if __name__ == "__main__" and (missing := missing_module()) is not None:   # one line, before the imports fail
    sys.exit(refuse(f"{missing} cannot be imported here; this benchmark needs torch, onnx, onnxscript and pytest: "
                    "pip install 'placement[torch,onnx,test]'"))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import placement  # noqa: E402
from placement.costmodel.roofline import DEFAULT_CPU, bundled_catalogue, make_platform, roofline_ms  # noqa: E402
from placement.io.torch_export import import_module, import_torch  # noqa: E402
from placement.report.table import cell, format_table  # noqa: E402
from tests.test_import_consistency import MLP, UNet  # noqa: E402
from tests.test_torch_pipelining import TinyTransformer  # noqa: E402

SOCKET_CORES = 64


def models(tiny: bool) -> dict:
    """The benchmark models and one input each (``tiny``: the calibration sizes)."""
    torch.manual_seed(0)
    if tiny:
        return {"transformer": (TinyTransformer(vocab=16, hidden=8, heads=2, layers=2), torch.randint(0, 16, (1, 4))),
                "unet": (UNet(width=2), torch.randn(1, 3, 4, 4)),
                "mlp": (MLP(width=8), torch.randn(1, 16))}
    return {"transformer": (TinyTransformer(vocab=512, hidden=128, heads=4, layers=2), torch.randint(0, 512, (4, 64))),
            "unet": (UNet(width=16), torch.randn(2, 3, 64, 64)),
            "mlp": (MLP(width=1024), torch.randn(256, 16))}


def kinds_by_name(graph) -> dict[str, str]:
    """The cost kind of each ATen operator name of the graph (``aten::linear`` -> ``matmul``)."""
    return {op.target.split(".")[0]: op.kind for op in graph.ops}


def measure(model, x, names: dict[str, str], repeats: int) -> dict[str, float]:
    """Median over ``repeats`` profiled forwards of the milliseconds per kind of the top-level ATen events."""
    per_run: list[dict[str, float]] = []
    with torch.no_grad():
        for _ in range(3):
            model(x)
        for _ in range(repeats):
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                model(x)
            totals: dict[str, float] = {}
            for event in prof.events():
                if event.cpu_parent is None and event.name.startswith("aten::"):
                    kind = names.get(event.name, "other")
                    totals[kind] = totals.get(kind, 0.0) + event.cpu_time_total / 1e3
            per_run.append(totals)
    kinds = {k for run in per_run for k in run}
    return {k: statistics.median(run.get(k, 0.0) for run in per_run) for k in kinds}


def wall_samples(model, x, repeats: int, calls: int) -> list[float]:
    """``repeats`` samples of the wall-clock milliseconds of one forward (each the mean of ``calls`` calls)."""
    samples = []
    with torch.no_grad():
        for _ in range(3):
            model(x)
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                model(x)
            samples.append((time.perf_counter() - start) / calls * 1e3)
    return samples


def wall_ms(model, x, repeats: int, calls: int = 20) -> float:
    """Median over ``repeats`` of the wall-clock milliseconds of one forward (mean of ``calls`` calls)."""
    return statistics.median(wall_samples(model, x, repeats, calls))


def predict(graph, device, overhead: bool = True) -> dict[str, tuple[int, float, int]]:
    """Per kind: operators, predicted ms and kernels."""
    out: dict[str, tuple[int, float, int]] = {}
    for op in graph.ops:
        count, ms, kernels = out.get(op.kind, (0, 0.0, 0))
        ms += roofline_ms(op.flops, op.bytes_moved, device, op.dtype, op.kernels if overhead else 0)
        out[op.kind] = (count + 1, ms, kernels + op.kernels)
    return out


def calibrate(device, repeats: int) -> dict:
    """Per-kernel overhead of this machine from the tiny models (module docstring)."""
    median = fastest = roofline = 0.0
    kernels = 0
    per_model = {}
    for name, (model, x) in models(tiny=True).items():
        model.eval()
        graph = import_module(model, (x,), name=name)
        samples = wall_samples(model, x, repeats, calls=100)
        k = sum(op.kernels for op in graph.ops)
        line = sum(roofline_ms(op.flops, op.bytes_moved, device, op.dtype) for op in graph.ops)
        per_model[name] = {"kernels": k, "wall_ms_median": statistics.median(samples), "wall_ms_min": min(samples),
                           "roofline_ms": line}
        median, fastest = median + statistics.median(samples), fastest + min(samples)
        roofline, kernels = roofline + line, kernels + k
    return {"models": per_model, "kernels": kernels, "wall_ms_median": median, "wall_ms_min": fastest,
            "roofline_ms": roofline, "op_overhead_s_median": (median - roofline) / kernels / 1e3,
            "op_overhead_s": (fastest - roofline) / kernels / 1e3}


UNET_SIZES = ((8, 2, 16), (16, 4, 64), (32, 8, 128), (64, 8, 256))  # width, batch, image side


def unet_plans() -> list[dict]:
    """The U-Net plans of the module docstring, one record per configuration."""
    records = []
    for width, batch, side in UNET_SIZES:
        torch.manual_seed(0)
        model, x = UNet(width), torch.randn(batch, 3, side, side)
        for training in (False, True):
            for link in ("pcie", "nvlink"):
                for overhead in (True, False):
                    platform = make_platform("h100", DEFAULT_CPU, 4, 0, link=link)
                    if not overhead:
                        platform = replace(platform, accelerator=replace(platform.accelerator, op_overhead=0.0))
                    imported = import_torch(model, (x,), platform=platform, training=training, granularity="module")
                    result = placement.solve(imported.problem)
                    records.append({"width": width, "input": [batch, 3, side, side], "training": training,
                                    "link": link, "overhead": overhead, "nodes": len(imported.problem.nodes),
                                    "h100_total_ms": sum(n["fpgaLatency"] for n in imported.instance["nodes"]),
                                    "optimum_ms": result.value,
                                    "stages": [len(s.nodes) for s in result.plan if s.nodes]})
    return records


def main() -> int | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="torch intra-op threads (default 1: the machine is shared; more threads than idle cores "
                             "distorts)")
    parser.add_argument("--repeats", type=positive_int, default=9)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "torch_costs.json")
    args = parser.parse_args()
    if message := cannot_write({"--json": args.json}):
        return refuse(message)
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    cpu = bundled_catalogue()[DEFAULT_CPU]
    share = args.threads / SOCKET_CORES
    mine = replace(cpu, peak_flops=tuple((k, v * share) for k, v in cpu.peak_flops),
                   memory_bandwidth=cpu.memory_bandwidth * share)

    load_before = os.getloadavg()
    calibration = calibrate(cpu, args.repeats)
    calibration["load_average_1min"] = [load_before[0], os.getloadavg()[0]]
    c = calibration
    print(f"calibration (tiny models, {c['kernels']} kernels): wall-clock {c['wall_ms_min']:.4f} ms "
          f"fastest, {c['wall_ms_median']:.4f} ms median; roofline {c['roofline_ms']:.6f} ms -> "
          f"{c['op_overhead_s'] * 1e6:.2f} µs per kernel ({c['op_overhead_s_median'] * 1e6:.2f} µs "
          f"from the medians; catalogue {cpu.id}: {cpu.op_overhead * 1e6:.2f} µs); load average "
          f"{c['load_average_1min'][0]:.2f} before, {c['load_average_1min'][1]:.2f} after\n")

    results = []
    for name, (model, x) in models(tiny=False).items():
        model.eval()
        graph = import_module(model, (x,), name=name)
        times = measure(model, x, kinds_by_name(graph), args.repeats)
        predicted, here = predict(graph, cpu), predict(graph, mine)
        rows = [["kind", "ops", "measured ms", "predicted ms", "ratio", f"pred. {args.threads}/64 ms", "ratio"]]
        record = []
        for kind in sorted(set(predicted) | set(times), key=lambda k: -times.get(k, 0.0)):
            count, ms, _ = predicted.get(kind, (0, 0.0, 0))
            mine_ms = here.get(kind, (0, 0.0, 0))[1]
            got = times.get(kind, 0.0)
            ratio = got / ms if ms else None
            ratio_here = got / mine_ms if mine_ms else None
            rows.append([kind, str(count), cell(got), cell(ms), cell(ratio), cell(mine_ms), cell(ratio_here)])
            record.append({"kind": kind, "ops": count, "measured_ms": got, "predicted_ms": ms, "ratio": ratio,
                           "predicted_share_ms": mine_ms, "ratio_share": ratio_here})
        total = sum(times.values()), sum(v[1] for v in predicted.values()), sum(v[1] for v in here.values())
        rows.append(["total", str(len(graph.ops)), cell(total[0]), cell(total[1]), cell(total[0] / total[1]),
                     cell(total[2]), cell(total[0] / total[2])])
        wall = wall_ms(model, x, args.repeats, calls=3)
        print(f"{name}: input {tuple(x.shape)}, {graph.total_flops:.4g} FLOPs per forward, "
              f"wall-clock {wall:.4g} ms per forward without the profiler")
        print("\n".join(format_table(rows, left=[0])) + "\n")
        results.append({"model": name, "input": list(x.shape), "flops": graph.total_flops, "wall_ms": wall,
                        "kinds": record,
                        "total": {"measured_ms": total[0], "predicted_ms": total[1], "predicted_share_ms": total[2]}})

    plans = unet_plans()
    rows = [["width", "input", "mode", "link", "overhead", "H100 total µs", "optimum µs", "nodes per stage"]]
    for r in plans:
        rows.append([str(r["width"]), "x".join(map(str, r["input"])), "training" if r["training"] else "inference",
                     r["link"], "yes" if r["overhead"] else "no", cell(r["h100_total_ms"] * 1e3),
                     cell(r["optimum_ms"] * 1e3), " ".join(map(str, r["stages"]))])
    print("U-Net on 4 H100 (module granularity, DP optimum):")
    print("\n".join(format_table(rows, left=[1, 2, 3, 4, 7])) + "\n")

    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "machine": {**machine(), "threads": args.threads, "torch": torch.__version__},
        "device": {"id": cpu.id, "model": cpu.model, "op_overhead_s": cpu.op_overhead, "socket_share": share},
        "repeats": args.repeats, "calibration": calibration, "models": results,
        "unet_plans": plans}, indent=1) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    exit_with(main)
