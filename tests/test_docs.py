"""The examples of docs/api.md run as they are, in order, from the repository root."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

import placement

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_api_examples_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    blocks = python_blocks(ROOT / "docs" / "api.md")
    assert len(blocks) >= 8
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "docs/api.md", "exec"), namespace)
    printed = out.getvalue().splitlines()
    # What the page says the examples print.
    assert printed[0] == "optimal 7.5 [(1, 2), (3, 4)]"
    assert printed[1] == ("contiguity 'sets' is not solved by method 'dp' (it solves 'stages'; method 'milp' "
                          "solves every class)")
    # an option of Piper instances only, given at its default on another instance
    assert "allreduce applies to Piper instances only (data- and tensor-parallel stages)" in printed
    assert printed[-2] == "optimal 727.691"   # the co-design example
    assert printed[-1] == "Etttt|tttt|tttt|L ('split on the devices the plan records it was solved with: cpus=0',)"


def test_hypar_page_examples_run(monkeypatch):
    # docs/hypar.md: the planners on VGG-A, then the ledger of BERT-Base training's optimal plan
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in python_blocks(ROOT / "docs" / "hypar.md"):
            exec(compile(block, "docs/hypar.md", "exec"), namespace)
    assert namespace["plan"].status == "optimal" and namespace["ledger"].agrees
    assert out.getvalue().splitlines()[-1] == "ledger agrees with the charged communication on every device"


def test_piper_page_examples_run_in_order(monkeypatch):
    """docs/piper.md read as one session: the device-types example rebound the name the interleaved
    example uses, which then failed ("devices must give counts per device type"). Each example's
    result is what the page shows."""
    monkeypatch.chdir(ROOT)
    if not (ROOT.parent / "shared" / "piper" / "bert32a100.json").exists():
        pytest.skip("the published Piper instances (../shared/piper) are not here")
    namespace: dict = {}
    results = []
    with contextlib.redirect_stdout(io.StringIO()):
        for block in python_blocks(ROOT / "docs" / "piper.md"):
            exec(compile(block, "docs/piper.md", "exec"), namespace)
            results.append(namespace["res"])
    first, _, mixed, interleaved = results   # the second block, a time limit, binds 'stopped'
    assert first.status == "optimal"
    stopped = namespace["stopped"]
    assert stopped.status == "feasible" and stopped.bound <= first.value <= stopped.value
    assert stopped.message.startswith("the time limit ran out while the DP filled its table (")
    assert (mixed.status, round(mixed.value, 11), [(s.device_type, s.d, s.t) for s in mixed.plan.stages]) == (
        "optimal", 0.06636948436, [("a100", 8, 1), ("v100", 16, 1)])
    assert interleaved.ok and interleaved.plan.chunks == 2


def test_simulator_page_example_runs(monkeypatch):
    # docs/simulator.md, "From Python": training-pair's optimal plan through 1F1B with a flush (derived there)
    pytest.importorskip("matplotlib")   # the Gantt chart
    monkeypatch.chdir(ROOT)
    blocks = python_blocks(ROOT / "docs" / "simulator.md")
    assert len(blocks) == 1
    out = io.StringIO()
    namespace: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], "docs/simulator.md", "exec"), namespace)
    assert out.getvalue().splitlines() == [
        "192.5 0.16883116883116878 [2, 1]",
        "TaskRecord(stage=0, kind='F', microbatch=0, start=0.0, end=3.0, on_link=False)",
        "TaskRecord(stage=0, kind='B', microbatch=0, start=14.5, end=20.0, on_link=False)"]
    assert (namespace["folder"] / "trace.json").stat().st_size > 0
    assert (namespace["folder"] / "gantt.png").stat().st_size > 0


def test_readme_library_example_runs(monkeypatch):
    # README, "As a library": chain4 on its two accelerators, cut after b (docs/api.md, "Five lines")
    monkeypatch.chdir(ROOT)
    [block] = [b for b in python_blocks(ROOT / "README.md") if 'placement.load("instances/tiny/chain4.json")' in b]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert out.getvalue().splitlines() == ["optimal 7.5 7.5 dp", "accelerator (1, 2) 7.5", "accelerator (3, 4) 7.5"]


def json_blocks(path: Path) -> list[str]:
    return re.findall(r"^```json\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_readme_instance_example_is_an_instance():
    # README, "Instances": the format's example is read as it is (its edge named a node it did not hold)
    [block] = json_blocks(ROOT / "README.md")
    result = placement.solve(json.loads(block))
    assert result.status == "optimal"
    assert sorted(node for stage in result.plan for node in stage.nodes) == [0, 1]


def test_hypar_network_file_example_is_a_network(tmp_path):
    # docs/hypar.md, "Network files": the example is Caffe's LeNet, the bundled lenet-c, layer for layer
    [block] = json_blocks(ROOT / "docs" / "hypar.md")
    network = tmp_path / "lenet.json"
    network.write_text(block)
    given = placement.hypar(network, accelerators=4, batch=64)
    bundled = placement.hypar("lenet-c", accelerators=4, batch=64)
    assert [(p.partition, p.communication.bytes) for p in given.plans] == [
        (p.partition, p.communication.bytes) for p in bundled.plans]


def console_sessions(path: Path) -> list[list[str]]:
    """The page's shell sessions: runs of lines indented by four spaces whose first line is a command ('$ ...')."""
    sessions, run = [], []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if line.startswith("    "):
            run.append(line[4:])
            continue
        if run and run[0].startswith("$ "):
            sessions.append(run)
        run = []
    return sessions


def run_session(session: list[str], capsys) -> None:
    """Run each command of a session in the current folder; what follows it, up to a '...' that stands for the
    rest, is what it prints: standard output, then the lines of standard error that are no progress lines."""
    from placement.cli import main

    commands = [i for i, line in enumerate(session) if line.startswith("$ ")] + [len(session)]
    for start, end in zip(commands, commands[1:]):
        argv = shlex.split(session[start][2:])
        if argv[0] == "python":
            assert argv[1] == "-c"
            exec(argv[2], {})
            printed = []
        else:
            assert argv[0] == "placement"
            main(argv[1:])
            captured = capsys.readouterr()
            printed = captured.out.splitlines() + [
                line for line in captured.err.splitlines() if not re.match(r"\[ *[0-9.]+ s\] ", line)]
        shown = session[start + 1:end]
        if "..." in shown:
            shown = shown[:shown.index("...")]
            printed = printed[:len(shown)]
        assert printed == shown, session[start]


def test_pytorch_page_sessions_print_what_they_show(tmp_path, monkeypatch, capsys):
    # docs/pytorch.md, "On the command line": GPT-2's plan as stages, then a refused Megatron layout. The page
    # showed the import and the solve printing nothing.
    pytest.importorskip("torch")
    for folder in ("instances", "tests"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    monkeypatch.chdir(tmp_path)
    sessions = console_sessions(ROOT / "docs" / "pytorch.md")
    assert [session[0] for session in sessions] == [
        "$ placement solve instances/models/gpt2-training.json --quiet --out plan.json",
        "$ placement import tests.handoff_models:gpt --out gpt.json"]
    for session in sessions:
        run_session(session, capsys)


def test_readme_import_session_prints_what_it_shows(tmp_path, monkeypatch, capsys):
    # README, "placement import ... and placement split": the refusal, as docs/pytorch.md shows it
    pytest.importorskip("torch")
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    monkeypatch.chdir(tmp_path)
    [session] = console_sessions(ROOT / "README.md")
    assert session[0] == "$ placement import tests.handoff_models:gpt --out gpt.json"
    run_session(session, capsys)


def test_simulator_page_quick_start_prints_what_it_shows(tmp_path, monkeypatch, capsys):
    # docs/simulator.md, "Quick start": BERT L-3 training's optimal plan under split backward, 8 micro-batches
    pytest.importorskip("matplotlib")   # the Gantt chart
    from placement.cli import main

    shared = ROOT.parent / "shared"
    if not (shared / "tarnawski").is_dir():
        pytest.skip("the published instances of Tarnawski et al. (../shared/tarnawski) are not here")
    page = (ROOT / "docs" / "simulator.md").read_text(encoding="utf-8")
    commands, shown = re.search(r"\n\n((?:    placement .*\n(?:        .*\n)?)+)\n```\n(.*?)```", page, re.S).groups()
    monkeypatch.chdir(tmp_path)
    solve, simulate = [shlex.split(command.replace("../shared", str(shared)))
                       for command in commands.replace("\\\n", " ").splitlines()]
    assert (solve[:2], simulate[:2]) == (["placement", "solve"], ["placement", "simulate"])
    assert main(solve[1:]) == 0
    capsys.readouterr()
    assert main(simulate[1:]) == 0
    assert capsys.readouterr().out.splitlines() == shown.splitlines()
    assert (tmp_path / "trace.json").stat().st_size > 0 and (tmp_path / "gantt.png").stat().st_size > 0
    # "The same plan under `--schedule 1f1b-flush` takes ... per iteration."
    flush = re.search(r"The same plan under `--schedule 1f1b-flush` takes ([0-9.]+) per iteration", page).group(1)
    assert main([*simulate[1:4], "--schedule", "1f1b-flush", "--microbatches", "8"]) == 0
    assert f"iteration       {flush}  (time per sample" in capsys.readouterr().out


def test_simulator_page_stream_check_prints_what_it_says(tmp_path, monkeypatch, capsys):
    # docs/simulator.md: GNMT inference's optimal plan streamed for 1,000 micro-batches runs at its max load
    from placement.cli import main

    shared = ROOT.parent / "shared"
    if not (shared / "tarnawski").is_dir():
        pytest.skip("the published instances of Tarnawski et al. (../shared/tarnawski) are not here")
    page = (ROOT / "docs" / "simulator.md").read_text(encoding="utf-8")
    commands, first, second = re.search(r"checks the\nthroughput claim directly:\n\n((?:    placement .*\n)+)\nprints "
                                        r"`([^`]*)` next to `([^`]*)`", page).groups()
    solve, simulate = [shlex.split(line.replace("../shared", str(shared))) for line in commands.splitlines()]
    monkeypatch.chdir(tmp_path)
    assert main(solve[1:]) == 0
    capsys.readouterr()
    assert main(simulate[1:]) == 0
    printed = " ".join(capsys.readouterr().out.split())   # the page quotes the figures with single spaces
    assert f" {first} " in printed and f" {' '.join(second.split())} " in printed


def readme_commands(first: str) -> list[list[str]]:
    """The README's indented block of 'placement' commands whose first command starts with ``first``."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [block] = re.findall(r"^    " + re.escape(first) + r".*\n(?:    placement .*\n)*", readme, flags=re.M)
    return [shlex.split(line) for line in block.splitlines()]


@pytest.mark.parametrize("first, shown", [
    ("placement solve instances/tiny/diamond-cpu.json --objective latency", [
        "note: checked for latency, the objective the plan file records it was solved for",
        "instance diamond-cpu: latency 17", "valid: no violations"]),
    ("placement solve instances/tiny/training-pair.json --backward split", [
        "note: checked as a split-backward plan with --backward split, --w-placement any, --no-inter-layer, "
        "--w-share 0.2, as the plan file records", "valid: no violations"]),
    ("placement solve instances/tiny/unmirrored-backward.json", [
        "valid: no violations", "note: the backward calls of devices 0 -> 1 -> 0 wait for each other in a cycle "
        "(the instance's backward edges do not mirror its forward ones): no pipeline runtime runs the plan as one "
        "backward call per stage and micro-batch, and the simulator refuses it (docs/backward-split.md)"])])
def test_readme_verify_examples_print_what_it_says(first, shown, tmp_path, monkeypatch, capsys):
    # README, "placement verify": each example solves into a plan file, then checks it; the lines the README
    # quotes come in its order
    pytest.importorskip("ortools")   # latency and split-backward solves run the MILP
    from placement.cli import main

    (tmp_path / "instances").symlink_to(ROOT / "instances")
    monkeypatch.chdir(tmp_path)
    solve, verify = readme_commands(first)
    assert (solve[:2], verify[:2]) == (["placement", "solve"], ["placement", "verify"])
    assert main(solve[1:]) == 0
    capsys.readouterr()
    assert main(verify[1:]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if line in shown] == shown


def test_time_limit_help_names_every_method_it_applies_to():
    # `solve --help` and the README's option table named the MILP, auto and local-search as the methods that
    # take --time-limit; latency-chain and latency-modules take it too (the README's baselines paragraph, and
    # docs/api.md), and a reader of the help alone took it for an option they refuse
    from placement.cli.command import build_parser
    from placement.solvers.registry import METHODS

    timed = sorted(name for name, spec in METHODS.items() if "time_limit" in spec.options and name != "milp")
    assert timed == ["latency-chain", "latency-modules", "local-search"]
    solve = build_parser(["solve"])._subparsers._group_actions[0].choices["solve"]
    [action] = [a for a in solve._actions if "--time-limit" in a.option_strings]
    helped = " ".join(action.help.split())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [row] = [line for line in readme.splitlines() if line.startswith("| `--time-limit SECONDS` |")]
    for name in timed:
        assert re.search(rf"\b{name}\b", helped), name
        assert f"`{name}`" in row, name


def test_pytorch_page_install_table_lists_what_each_extra_installs():
    # docs/pytorch.md, "Install": the `models` row said `transformers` where the extra pins the version that wrote
    # the bundled instances (the README names it, `transformers==5.24.0`); every row now gives the extra's own pins
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    page = (ROOT / "docs" / "pytorch.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-z]+)` \| [^|]* \| (.*) \|$", page.split("## Install\n")[1].split("\n\n")[0],
                           flags=re.M))
    assert sorted(rows) == ["models", "onnx", "torch"]
    for extra, installs in rows.items():
        assert sorted(re.findall(r"`([^`]+)`", installs.split(";")[0])) == sorted(extras[extra]), extra


def test_hypar_page_session_prints_what_it_shows(capsys):
    # docs/hypar.md: `placement hypar vgg-a` as the page shows it, the search times aside (they vary); its
    # '...' lines stand for rows left out
    from placement.cli import main

    page = (ROOT / "docs" / "hypar.md").read_text(encoding="utf-8")
    block = re.search(r"\n\n(    \$ placement hypar .*?)\n\n(?! )", page, re.S).group(1)
    command, *shown = [line[4:] for line in block.splitlines()]
    argv = shlex.split(command[2:])
    assert argv[:2] == ["placement", "hypar"]
    assert main(argv[1:]) == 0
    printed = capsys.readouterr().out.splitlines()
    planners = ("hypar", "exact", "all-dp", "all-mp", "one-weird-trick")

    def timeless(line: str) -> str:   # a planner's row less its search time, the last column
        return line.rsplit(maxsplit=1)[0] if line.split(maxsplit=1)[:1] in [[p] for p in planners] else line

    rest = iter(timeless(line) for line in printed)
    for line in shown:
        if line != "...":
            assert timeless(line) in rest, line   # in the order shown, later rows left out at each '...'
    assert len([line for line in printed if line.split(maxsplit=1)[:1] == ["conv1_1"]]) == 1


def test_hypar_page_gains_of_the_exact_planner():
    # docs/hypar.md, "The planners": the exact planner against HyPar's search, in bytes (batch 256)
    def totals(network, accelerators, types=2):
        plans = placement.hypar(network, accelerators=accelerators, batch=256, types=types).plans
        return {p.planner: float(p.communication.bytes) for p in plans}

    lenet = totals("lenet-c", 8)
    assert (lenet["hypar"], lenet["exact"]) == (10_093_280, 10_054_240)
    vgg = totals("vgg-a", 64)
    assert (round(vgg["hypar"] / 10**9, 4), round(vgg["exact"] / 10**9, 4)) == (4.8689, 4.8626)
    accpar = totals("vgg-a", 64, types=3)
    assert (round(accpar["hypar"] / 10**9, 3), round(accpar["exact"] / 10**9, 3)) == (4.211, 4.024)


def test_readme_max_ideals_examples(monkeypatch, capsys):
    # README, `--max-ideals`: the limit spares a chain (its 5 ideals solve under a limit of 2), not a diamond (6)
    from placement.cli import main

    monkeypatch.chdir(ROOT)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    chain, diamond = [shlex.split(command) for command in re.findall(
        r"`(placement solve instances/tiny/\S+ --max-ideals 2[^`]*)`", readme.split("The limit on ideals spares")[1])]
    assert main(chain[1:]) == 0
    printed = capsys.readouterr().out
    assert "status      optimal" in printed and "max-load    7.500000" in printed and "(5 ideals," in printed
    assert main(diamond[1:]) == 2
    assert capsys.readouterr().err.startswith("error: more than 2 ideals in the contracted graph")
    assert main(["info", diamond[2]]) == 0
    assert "\nideals:                 6\n" in capsys.readouterr().out


def test_hypar_help_states_the_ranges_it_takes():
    # `placement hypar --help` said "a power of two >= 2" and "batch size", where the command refuses more than
    # 2^53 of either (docs/hypar.md's table states both ranges); the help now gives the ranges enforced
    from placement.cli.command import build_parser
    from placement.costmodel.hypar import MAX_BATCH, MAX_LEVELS

    hypar = build_parser(["hypar"])._subparsers._group_actions[0].choices["hypar"]
    helps = {action.dest: " ".join(action.help.split()) for action in hypar._actions if action.help}
    assert MAX_BATCH == 2 ** 53
    assert f"a power of two from 2 to 2^{MAX_LEVELS}" in helps["accelerators"]
    assert "an integer from 1 to 2^53" in helps["batch"]
    page = (ROOT / "docs" / "hypar.md").read_text(encoding="utf-8")
    assert f"a power of two from 2 to 2^{MAX_LEVELS}" in page and "an integer from 1 to 2^53" in page


def test_piper_page_device_types_table():
    # docs/piper.md, "Device types and CPUs": bert32a100 with its device as `a100` (the file's memory, speed 1),
    # a `v100` (32 GiB, speed 0.5) and a `cpu` (256 GiB, speed 0.02, t = 1), each row's counts per type
    shared = ROOT.parent / "shared" / "piper" / "bert32a100.json"
    if not shared.exists():
        pytest.skip("the published Piper instances (../shared/piper) are not here")
    page = (ROOT / "docs" / "piper.md").read_text(encoding="utf-8")
    table = page.split("Results (`python benchmarks/piper.py --types-only`")[1].split("```")[1]
    rows = [re.fullmatch(r"(\S+) +(\S+) +(\S+) +(\S+) +(\S+) +(\S+) +(.+?) +\S+", line).groups()
            for line in table.strip().splitlines()[2:]]   # the last column, the solve time, varies
    assert len(rows) == 7
    document = json.loads(shared.read_text(encoding="utf-8"))
    plain = placement.load(document)
    gib = 2 ** 30
    document["deviceTypes"] = {"a100": {"count": 64, "memory": document["maxMemoryPerDevice"]},
                               "v100": {"count": 64, "memory": 32 * gib, "speed": 0.5},
                               "cpu": {"count": 64, "memory": 256 * gib, "speed": 0.02, "cpu": True}}
    typed = placement.load(document)
    for name, devices, status, objective, alone, ratio, stages in rows:
        assert name == "bert32a100"
        counts = {kind: int(count) for kind, count in (part.split(":") for part in devices.split(","))}
        result = placement.solve(typed, devices=counts)
        on_types = " | ".join(f"{s.device_type}×{s.d * s.t}" for s in result.plan.stages)
        assert (str(result.status), f"{result.value:.6g}", on_types) == (status, objective, stages), devices
        unmixed = placement.solve(plain, devices=counts["a100"]).value
        assert (f"{unmixed:.6g}", f"{result.value / unmixed:.3f}") == (alone, ratio), devices


def test_every_benchmark_script_is_named_in_the_docs():
    # benchmarks/codesign_exact.py (the exact co-design against its exhaustive check, with stored results)
    # was in no page: a reader could not find it or what its results file holds
    pages = "".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    helpers = {"common.py"}   # imported by the scripts, run by none
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if p.name not in helpers)
    assert [name for name in scripts if f"benchmarks/{name}" not in pages] == []
