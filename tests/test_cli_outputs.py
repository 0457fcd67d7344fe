"""What the commands write: no plan file without a plan, two outputs never one file, and a closed
output pipe that keeps the command's exit status."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import placement
from placement.cli import main
from placement.solvers.milp.backends import backend_availability

ROOT = Path(__file__).resolve().parents[1]
CHAIN4 = str(ROOT / "instances" / "tiny" / "chain4.json")


def test_a_solve_without_a_plan_writes_no_plan_file(tmp_path, capsys):
    # chain4's nodes take 10 bytes each (tests/test_dp.py): under 1 byte nothing fits anywhere
    out = tmp_path / "plan.json"
    assert main(["solve", CHAIN4, "--memory", "1", "--cpus", "0", "--out", str(out)]) == 1
    assert not out.exists()
    assert f"no plan: nothing written to {out}" in capsys.readouterr().err
    assert main(["solve", CHAIN4, "--memory", "1", "--cpus", "0", "--out", str(out), "--quiet"]) == 1
    assert capsys.readouterr().err == ""


def test_the_log_and_the_plan_file_are_two_files(tmp_path, capsys):
    log = tmp_path / "run.json"
    assert main(["solve", CHAIN4, "--method", "milp", "--log", str(log), "--out", str(tmp_path / "." / "run.json")]) == 2
    assert capsys.readouterr().err == (f"error: --log and --out name the same file {tmp_path / '.' / 'run.json'}; "
                                       "choose two names\n")
    assert not log.exists()


def test_a_closed_output_pipe_keeps_the_exit_status(tmp_path):
    # a plan that leaves node 4 unplaced is invalid: verify exits 1, also when its reader has gone
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"fpgas": [{"nodes": [1, 2]}, {"nodes": [3]}]}))
    proc = subprocess.Popen([sys.executable, "-m", "placement", "verify", CHAIN4, str(plan), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()     # before the command writes: its output meets a closed pipe
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert b"Traceback" not in err


@pytest.mark.parametrize("command", [["solve", CHAIN4], ["solve", CHAIN4, "--memory", "1", "--cpus", "0"]])
def test_a_closed_pipe_behind_both_outputs_keeps_the_exit_status(command):
    """`placement solve ... 2>&1 | head -c 1`: progress lines and the error meet the closed pipe too; the status
    stays the command's own (0 solved; 1 no plan: chain4's nodes take 10 bytes, and 1 byte holds none)."""
    proc = subprocess.Popen([sys.executable, "-m", "placement", *command], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd=ROOT)
    proc.stdout.close()
    proc.wait(timeout=120)
    assert proc.returncode == (0 if len(command) == 2 else 1)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command, status", [(["solve", CHAIN4], 0), (["solve", CHAIN4, "--bogus"], 2)])
def test_a_full_device_behind_standard_error_keeps_the_result_and_the_status(command, status):
    """`2>/dev/full`: the progress lines failed to write, then the error about it did, and the command
    exited 1 with nothing on standard output; progress is no result, so it is dropped instead."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "placement", *command], stdout=subprocess.PIPE, stderr=full,
                              cwd=ROOT, timeout=120)
    assert proc.returncode == status
    if status == 0:
        assert b"max-load    7.500000" in proc.stdout

def test_a_named_pipe_gets_the_plan(tmp_path):
    """--out naming a FIFO: the plan reaches its reader (the check before the solve opened and closed the pipe,
    which ended the reader's stream, and the write then waited forever for another)."""
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = subprocess.run([sys.executable, "-m", "placement", "solve", CHAIN4, "--out", str(fifo), "--quiet"],
                          capture_output=True, cwd=ROOT, timeout=60)
    reader.join(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(received[0])["devices"][0]["nodes"] == [1, 2]


def test_a_link_to_a_missing_file_is_written_through(tmp_path):
    """--out naming a symbolic link whose file does not exist yet: the plan goes to that file and the link stays;
    a solve without a plan leaves neither an empty file nor a removed link."""
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    link.symlink_to(target)
    assert main(["solve", CHAIN4, "--out", str(link), "--quiet"]) == 0
    assert link.is_symlink() and json.loads(target.read_text())["devices"][1]["nodes"] == [3, 4]
    target.unlink()
    assert main(["solve", CHAIN4, "--memory", "1", "--cpus", "0", "--out", str(link), "--quiet"]) == 1
    assert link.is_symlink() and not target.exists()


def test_a_log_in_a_named_pipe_gets_the_solver_s_lines(tmp_path):
    """--log naming a FIFO: the check before the solve no longer ends its reader's stream."""
    pytest.importorskip("ortools")
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = subprocess.run([sys.executable, "-m", "placement", "solve", CHAIN4, "--method", "milp", "--log", str(fifo),
                           "--quiet"], capture_output=True, cwd=ROOT, timeout=60)
    reader.join(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert received and received[0]


COLOUR_TOO_BIG = {"maxSizePerFPGA": 100, "maxFPGAs": 3, "maxCPUs": 0,
                  "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": size,
                             **({"colorClass": 7} if i < 3 else {})} for i, size in ((1, 60), (2, 60), (3, 10))],
                  "edges": [{"sourceId": 1, "destId": 2, "cost": 1}, {"sourceId": 2, "destId": 3, "cost": 1}]}


@pytest.mark.parametrize("method", ["dp", "milp"])
def test_an_infeasible_solve_names_the_colour_class_that_fits_no_device(tmp_path, capsys, method):
    """Nodes 1 and 2 share a colour (one device) and need 60 + 60 = 120 bytes; the accelerators hold 100 and
    there is no CPU: no plan, whatever the method, and the message names the class and the numbers."""
    if method == "milp":
        pytest.importorskip("ortools")
    path = tmp_path / "colour.json"
    path.write_text(json.dumps(COLOUR_TOO_BIG))
    assert main(["solve", str(path), "--method", method, "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["status"] == "infeasible"
    why = "the colour class of nodes 1, 2 fits no device (together they need 120 bytes, accelerator memory is 100; " \
          "no cpu devices)"
    # the DP finds no pipeline and the reason is added; the MILP answers from the instance alone, before any model
    assert document["message"] == (why if method == "milp" else "no pipeline of the available devices satisfies the "
                                   f"memory and support constraints; {why}")


def test_a_document_of_a_solve_without_a_plan_is_no_plan_to_check(tmp_path, capsys):
    """solve --json of an infeasible instance writes a document with no devices: verify and simulate refuse it
    as holding no plan (verify reported 'max load 0' and every node not placed)."""
    path, document = tmp_path / "colour.json", tmp_path / "none.json"
    path.write_text(json.dumps(COLOUR_TOO_BIG))
    assert main(["solve", str(path), "--method", "dp", "--json"]) == 1
    document.write_text(capsys.readouterr().out)
    for command in ("verify", "simulate"):
        assert main([command, str(path), str(document)]) == 2
        assert capsys.readouterr().err == (f"error: {document}: it holds no plan: the solve that wrote it ended "
                                           "'infeasible' (no pipeline of the available devices satisfies the memory "
                                           "and support constraints; the colour class of nodes 1, 2 fits no device "
                                           "(together they need 120 bytes, accelerator memory is 100; no cpu "
                                           "devices))\n")


SANDWICH = {"maxSizePerFPGA": 2, "maxFPGAs": 2, "maxCPUs": 0,
            "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": 1,
                       **({"colorClass": 5} if i != 2 else {})} for i in (1, 2, 3)],
            "edges": [{"sourceId": 1, "destId": 2, "cost": 1}, {"sourceId": 2, "destId": 3, "cost": 1}]}


@pytest.mark.parametrize("options, then", [
    ([], "in contiguity 'stages' its device holds that path's nodes too"),
    (["--contiguity", "sets", "--method", "milp"], "in contiguity 'sets' its device holds that path's nodes too"),
    (["--objective", "latency"], "one call cannot hold it (--calls 2 lets its device run it in two)"),
])
def test_an_infeasible_solve_names_the_path_through_a_colour_class(tmp_path, capsys, options, then):
    """Chain 1 -> 2 -> 3, nodes 1 and 3 of one colour, 1 byte each on accelerators of 2 bytes (no CPU): the
    class's device would hold 2 as well in a contiguous set (3 bytes), so stages and sets have no plan, nor
    has one latency call per accelerator; under contiguity none 1, 3 | 2 costs 1 + 1 + 1 + 1 (out of 1, into 3)
    = 4 on one device, and with two calls the latency is 7 (1, out 1; 2 with in and out: 3; in 1, 3: 2 more)."""
    if "milp" in options or "latency" in options:
        pytest.importorskip("ortools")
    path = tmp_path / "sandwich.json"
    path.write_text(json.dumps(SANDWICH))
    assert main(["solve", str(path), *options, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["message"].endswith(
        f"; the path 1 -> 2 -> 3 leaves and re-enters the colour class of nodes 1, 3: {then}")
    assert main(["solve", str(path), "--contiguity", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["objective"] == 4.0


def _closing(descriptor: int):
    """A child-process hook that closes ``descriptor`` before the command starts (``2>&-``, ``>&-``)."""
    return lambda: os.close(descriptor)


@pytest.mark.parametrize("method", [["--method", "dp"], ["--method", "milp", "--backend", "cbc"]])
def test_a_command_started_without_standard_error_keeps_its_result_and_status(tmp_path, method):
    """`2>&-`: Python gives no standard error stream; the first progress line failed and the command exited
    120 with nothing on standard output and no plan file. Progress is dropped instead."""
    out = tmp_path / "plan.json"
    proc = subprocess.run([sys.executable, "-m", "placement", "solve", CHAIN4, *method, "--out", str(out)],
                          stdout=subprocess.PIPE, cwd=ROOT, timeout=120, preexec_fn=_closing(2))
    assert proc.returncode == 0
    assert b"max-load    7.500000" in proc.stdout
    assert json.loads(out.read_text())["devices"][0]["nodes"] == [1, 2]
    usage = subprocess.run([sys.executable, "-m", "placement", "solve", CHAIN4, "--bogus"], cwd=ROOT,
                           stdout=subprocess.PIPE, timeout=120, preexec_fn=_closing(2))
    assert usage.returncode == 2


@pytest.mark.parametrize("method", [["--method", "dp"], ["--method", "milp", "--backend", "cbc"]])
def test_a_command_started_without_standard_output_says_so(tmp_path, method):
    """`>&-`: the summary has nowhere to go; one error line and status 2 (it was a traceback and 120), as behind
    a full device, and the plan file is whole: descriptor 1 is no file the command opened (a solver's log
    written there would have landed in it)."""
    out = tmp_path / "plan.json"
    proc = subprocess.run([sys.executable, "-m", "placement", "solve", CHAIN4, *method, "--out", str(out)],
                          stderr=subprocess.PIPE, cwd=ROOT, timeout=120, preexec_fn=_closing(1))
    assert proc.returncode == 2
    assert proc.stderr.decode().splitlines()[-1] == ("error: standard output is closed: the result has nowhere "
                                                     "to go")
    assert json.loads(out.read_text())["devices"][0]["nodes"] == [1, 2]


@pytest.mark.parametrize("stem", ["a" * 245, "é" * 122])
def test_a_plan_file_name_as_long_as_the_folder_takes_is_written(tmp_path, capsys, stem):
    """A 250-byte name (255 is the most a folder takes): the scratch file written beside it first was named
    after it whole, 18 bytes longer, and the plan was refused after the solve ("File name too long")."""
    out = tmp_path / f"{stem}.json"
    assert len(os.fsencode(out.name)) <= 255
    assert main(["solve", CHAIN4, "--out", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["devices"][1]["nodes"] == [3, 4]
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_a_dash_reads_standard_input_and_names_no_output_file(tmp_path):
    """`-` as the instance or plan is standard input, as for other tools (it was "-: no such file"); as an output
    it was a file named '-' (a 187 KB trace left in the folder), and is refused before any work."""
    plan = tmp_path / "plan.json"
    with open(CHAIN4, "rb") as instance:
        solved = subprocess.run([sys.executable, "-m", "placement", "solve", "-", "--out", str(plan)], stdin=instance,
                                capture_output=True, cwd=tmp_path, timeout=120)
    assert solved.returncode == 0, solved.stderr
    assert b"instance    -\n" in solved.stdout
    with open(plan, "rb") as given:
        checked = subprocess.run([sys.executable, "-m", "placement", "verify", CHAIN4, "-"], stdin=given,
                                 capture_output=True, cwd=tmp_path, timeout=120)
    assert checked.returncode == 0 and b"valid: no violations" in checked.stdout
    for option in (["solve", CHAIN4, "--out"], ["solve", CHAIN4, "--method", "milp", "--log"],
                   ["simulate", CHAIN4, str(plan), "--trace"]):
        refused = subprocess.run([sys.executable, "-m", "placement", *option, "-"], capture_output=True,
                                 cwd=tmp_path, timeout=120)
        assert refused.returncode == 2
        assert refused.stderr.decode().endswith(f"error: argument {option[-1]}: expected a file name, got '-' (for "
                                                "standard output give /dev/stdout; for a file named '-', ./-)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]
    # the instance and the split from one pipe, which gives its contents once: refused
    twice = subprocess.run([sys.executable, "-m", "placement", "solve", "-", "--method", "expert", "--split", "-"],
                           input=Path(CHAIN4).read_bytes(), capture_output=True, cwd=tmp_path, timeout=120)
    assert twice.returncode == 2
    assert twice.stderr.decode() == ("error: /dev/stdin: the instance and the plan are read from the same stream, "
                                     "which gives its contents once; give one of them as a file\n")


def test_a_command_run_in_a_removed_folder_says_so(tmp_path):
    """The shell's current folder removed before the command: the first relative name failed with "error: No such
    file or directory", naming nothing; a command whose names are all absolute runs as anywhere."""
    def in_removed_folder(*command):
        folder = tmp_path / "gone"
        folder.mkdir()
        return subprocess.run([sys.executable, "-m", "placement", *command], capture_output=True, cwd=folder,
                              timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              preexec_fn=lambda: os.rmdir(folder))

    relative = in_removed_folder("solve", CHAIN4, "--out", "plan.json")
    assert relative.returncode == 2
    assert relative.stderr.decode() == ("error: the current folder no longer exists (removed after the shell entered "
                                        "it); change to one that does\n")
    absolute = in_removed_folder("solve", CHAIN4, "--out", str(tmp_path / "plan.json"), "--quiet")
    assert absolute.returncode == 0, absolute.stderr
    assert json.loads((tmp_path / "plan.json").read_text())["devices"][0]["nodes"] == [1, 2]


def test_quiet_leaves_out_the_warnings_of_the_libraries_a_command_uses(tmp_path):
    """--quiet promises no warnings on standard error; matplotlib's logger still said it "created a temporary
    cache directory" where its configuration folder cannot be made (here a file), as a read-only home leaves it.
    Without --quiet it is shown."""
    pytest.importorskip("matplotlib")
    plan, blocker = tmp_path / "plan.json", tmp_path / "not-a-folder"
    blocker.write_text("")
    assert main(["solve", CHAIN4, "--out", str(plan), "--quiet"]) == 0
    command = [sys.executable, "-m", "placement", "simulate", CHAIN4, str(plan), "--gantt", str(tmp_path / "g.png")]
    env = {**os.environ, "MPLCONFIGDIR": str(blocker)}
    quiet = subprocess.run([*command, "--quiet"], capture_output=True, cwd=ROOT, timeout=120, env=env)
    assert quiet.returncode == 0 and quiet.stderr == b""
    told = subprocess.run(command, capture_output=True, cwd=ROOT, timeout=120, env=env)
    assert told.returncode == 0 and b"Matplotlib created a temporary cache directory" in told.stderr


def test_an_unknown_option_alike_a_known_one_is_named(capsys):
    """argparse said "unrecognized arguments" alone; an option alike one of the command's is named, as a misspelt
    field of an instance is."""
    assert main(["solve", CHAIN4, "--metod", "dp", "--time-limt=3", "--bogus"]) == 2
    assert capsys.readouterr().err == ("error: unrecognized arguments: --metod dp --time-limt=3 --bogus (--metod: did "
                                       "you mean --method?; --time-limt: did you mean --time-limit?)\n")
    assert main(["verify", CHAIN4, CHAIN4, "--contiguty", "none"]) == 2
    assert capsys.readouterr().err == ("error: unrecognized arguments: --contiguty none (--contiguty: did you mean "
                                       "--contiguity?)\n")
    assert main(["solve", CHAIN4, "--", "--metod"]) == 2   # after "--" a word is no option, misspelt or not
    assert capsys.readouterr().err == "error: unrecognized arguments: --metod\n"


def test_a_file_name_under_a_locale_that_is_not_utf8_names_the_instance_as_written(tmp_path):
    """LC_ALL=C with Python's UTF-8 mode off: the file name's bytes came as escapes, and the plan recorded the
    instance as '\\udcc3\\udcbc...', which verify (under UTF-8) then took for another instance's name."""
    instance = tmp_path / "ünï模型.json"
    instance.write_bytes(Path(CHAIN4).read_bytes())
    plan = tmp_path / "plan.json"
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    proc = subprocess.run([sys.executable, "-m", "placement", "solve", str(instance), "--out", str(plan), "--quiet"],
                          capture_output=True, cwd=ROOT, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(plan.read_text())["instance"] == "ünï模型"
    assert placement.verify(str(instance), str(plan)).notes == ()


def test_standard_output_named_as_an_output_file_is_written_after_what_was_printed(tmp_path):
    """`placement solve ... --out /dev/stdout > file`: the name was opened anew, from the file's start, over
    the summary (half a plan and half a summary; `>>` erased what the file held), and CP-SAT's log named
    `--log /dev/stdout` was overwritten by the summary. Both now follow what was printed, and with `--json`
    (one document on standard output) they are refused."""
    out = tmp_path / "out.txt"
    out.write_text("kept\n")
    with open(out, "a") as fh:
        done = subprocess.run([sys.executable, "-m", "placement", "solve", CHAIN4, "--out", "/dev/stdout"],
                              stdout=fh, stderr=subprocess.PIPE, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    start = text.index("\n{\n") + 1   # the summary, then the plan file
    plan, end = json.JSONDecoder().raw_decode(text, start)
    assert text.startswith("kept\ninstance    chain4\n") and "max-load    7.500000" in text[:start]
    assert plan["maxLoad"] == 7.5 and text[end:] == "\n"
    with open(out, "w") as fh:
        done = subprocess.run([sys.executable, "-m", "placement", "solve", CHAIN4, "--method", "milp",
                               "--contiguity", "none", "--no-warm-start", "--log", "/dev/stdout", "--quiet"],
                              stdout=fh, stderr=subprocess.PIPE, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    log, summary = out.read_text().split("\ninstance    chain4\n")
    assert log.lstrip().startswith("Starting CP-SAT solver") and "status      optimal" in summary
    for option in ("--out", "--log"):
        done = subprocess.run([sys.executable, "-m", "placement", "solve", CHAIN4, option, "/dev/stdout", "--json"],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert (done.returncode, done.stdout, done.stderr) == (
            2, "", f"error: {option} /dev/stdout and --json both write on standard output, which would hold two "
                   "documents; give another file, or leave out --json\n")


def test_a_closed_pipe_behind_an_output_file_on_standard_output_keeps_the_exit_status(tmp_path):
    # `--trace /dev/stdout | head -c 100`: the trace met the closed pipe, and the command exited 2 ("cannot be
    # written: Broken pipe"), where a closed pipe behind standard output keeps the status
    model = str(ROOT / "instances" / "models" / "bert-base-training.json")
    plan = tmp_path / "plan.json"
    assert main(["solve", model, "--out", str(plan), "--quiet"]) == 0
    proc = subprocess.Popen([sys.executable, "-m", "placement", "simulate", model, str(plan), "--microbatches",
                             "2000", "--trace", "/dev/stdout", "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout.read(100)
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (0, b"")


def test_standard_error_and_a_device_take_an_output_file_beside_json(tmp_path):
    """`--json --log /dev/stderr` with standard output and error on one terminal (here one pipe): /dev/stderr was
    taken for standard output, the file behind both, and refused beside --json; so was `--out /dev/null` with
    standard output on /dev/null (under cron). Neither can put two documents on standard output."""
    done = subprocess.run([sys.executable, "-m", "placement", "solve", CHAIN4, "--json", "--method", "milp",
                           "--no-warm-start", "--log", "/dev/stderr", "--quiet"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stdout
    assert "CP-SAT" in done.stdout and '"maxLoad": 7.5' in done.stdout
    with open(os.devnull, "w") as null:
        done = subprocess.run([sys.executable, "-m", "placement", "solve", CHAIN4, "--json", "--quiet", "--out",
                               os.devnull],
                              stdout=null, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    assert (done.returncode, done.stderr.splitlines()[-1:]) == (0, [])


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP here")
def test_a_terminal_that_closes_during_a_search_ends_it_with_status_129(tmp_path):
    """The terminal a search prints on closes (SIGHUP to its session): the plan in hand was written and the
    summary, which the closed terminal refused (EIO), gave `error: Input/output error` and status 2."""
    import fcntl
    import pty
    import termios

    out = tmp_path / "plan.json"
    master, slave = pty.openpty()

    def own_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    with open(tmp_path / "err.txt", "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "placement", "solve", str(ROOT / "instances" / "models" /
                                 "bert-base-training.json"), "--method", "milp", "--contiguity", "none",
                                 "--time-limit", "60", "--out", str(out)], stdin=slave, stdout=slave, stderr=err,
                                cwd=ROOT, preexec_fn=own_terminal)
    os.close(slave)
    waited = time.monotonic()
    while "MILP: " not in (tmp_path / "err.txt").read_text() and time.monotonic() - waited < 60:
        time.sleep(0.1)   # until the search has begun
    os.close(master)   # the terminal closes: its session gets SIGHUP
    assert proc.wait(timeout=120) == 129, (tmp_path / "err.txt").read_text()
    assert json.loads(out.read_text())["status"] in ("feasible", "optimal")


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE")
def test_a_plan_file_that_cannot_be_written_after_the_solve_loses_no_result(tmp_path):
    """The plan file is written after the result is shown: a disk that fills during a long solve (here a
    size limit of 100 bytes, which the empty file of the check before the solve keeps to) gave the error alone,
    the solve's result lost."""
    plan = tmp_path / "plan.json"
    done = subprocess.run([sys.executable, "-m", "placement", "solve", CHAIN4, "--out", str(plan), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, preexec_fn=_capped(100))
    assert done.returncode == 2 and "max-load    7.500000" in done.stdout
    assert done.stderr == f"error: {plan}: cannot write: File too large\n"
    assert list(tmp_path.iterdir()) == []


def test_an_output_file_named_as_a_folder_is_refused_before_any_work(tmp_path, capsys):
    """`--out plan.json/` where plan.json is a file: the check before the work took plan.json for the folder and
    passed, the solve ran and showed its result, and the write then failed ("Not a directory")."""
    plan = tmp_path / "plan.json"
    plan.write_text("kept")
    assert main(["solve", CHAIN4, "--out", f"{plan}/"]) == 2
    assert capsys.readouterr() == ("", f"error: {plan}/: cannot write: Not a directory\n")
    assert plan.read_text() == "kept"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["solve", CHAIN4], ["hypar", "lenet-c", "--accelerators", "2", "--batch", "1"],
                                  ["split", CHAIN4, CHAIN4], ["import", "m:f"]])
def test_an_output_file_that_takes_no_byte_is_refused_before_any_work(capsys, argv):
    """`--out /dev/full` (a device that opens and then takes no byte) passed the check before the work, as
    `--log /dev/full` does not: the solve ran, its result was shown and the command then failed (an import
    traced its model first). It is now refused before any work, as the log is."""
    assert main([*argv, "--out", "/dev/full"]) == 2
    assert capsys.readouterr() == ("", "error: /dev/full: cannot write: No space left on device\n")


def _capped(limit: int):
    """For a child process: files it writes can grow to ``limit`` bytes only (a disk that fills), a write past
    that failing with EFBIG (SIGXFSZ ignored, as Python ignores it)."""
    import resource

    def cap() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return cap


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE")
@pytest.mark.parametrize("backend", [name for name, ok, _ in backend_availability() if ok])
def test_a_log_that_fills_the_disk_during_the_search_loses_no_result(tmp_path, backend):
    """The log file reaches the size limit 100 bytes into the solver's log (the disk filled during a long
    solve): the error about --log, exit status 2, took the place of the result. The result is shown, with a
    warning that names the file and the error, and the exit status is the result's."""
    limit = 1 << 20
    log = tmp_path / "solver.log"
    log.write_text("x" * (limit - 100))
    command = [sys.executable, "-m", "placement", "solve", CHAIN4, "--method", "milp", "--backend", backend,
               "--no-warm-start", "--log", str(log)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120, preexec_fn=_capped(limit))
    assert done.returncode == 0, done.stderr
    assert "max load 7.5" in done.stdout and "Traceback" not in done.stderr
    # shown when raised: after the backend's search (before the check of a floating-point backend's proof)
    assert (f"\nwarning: --log names a file that cannot be written: {log}: File too large; the solver's log there is "
            "incomplete, and the result is kept\n") in done.stderr
    assert done.stderr.count("warning: --log") == 1 and log.stat().st_size == limit
    log.write_text("x" * (limit - 100))
    quiet = subprocess.run([*command, "--json", "--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=120,
                           preexec_fn=_capped(limit))
    assert (quiet.returncode, quiet.stderr) == (0, "")
    assert json.loads(quiet.stdout)["status"] == "optimal"



def test_other_warnings_of_a_solve_are_shown_when_raised_and_filtered_as_their_own(monkeypatch, capsys):
    """The command takes the log's warning as its own line; another warning raised during the solve is Python's to
    show, when it is raised (before what the solve prints after it) and under the filters of the module that
    raised it (they were held to the end of the solve and shown again from the command's module)."""
    import warnings

    real_solve = placement.solve

    def solve(*args, **kwargs):
        warnings.warn("a warning of the solve's own", UserWarning)
        print("after the warning", file=sys.stderr)
        warnings.warn_explicit("a filtered warning", UserWarning, "elsewhere.py", 1, module="elsewhere")
        warnings.warn(placement.LogWriteWarning("log names a file that cannot be written: x.log: No space left on "
                                                "device; the solver's log there is incomplete, and the result is kept"))
        return real_solve(*args, **kwargs)

    monkeypatch.setattr(placement, "solve", solve)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", module="elsewhere")
        warnings.showwarning = lambda message, category, *where, **more: print(f"{category.__name__}: {message}",
                                                                                file=sys.stderr)
        assert main(["solve", CHAIN4]) == 0
    err = capsys.readouterr().err
    assert err.index("UserWarning: a warning of the solve's own") < err.index("after the warning")
    assert "a filtered warning" not in err
    assert ("after the warning\nwarning: --log names a file that cannot be written: x.log: No space left on device; "
            "the solver's log there is incomplete, and the result is kept\n[") in err
    assert err.count("warning: --log") == 1


def _tmpc(time: float, fw: dict, bw: dict) -> dict:
    return {"id": "vanilla", "timePerSample": time, "parameterSize": 1e6, "memoryUsageA": 1e5, "memoryUsageB": 1e6,
            "syncTimeFw": fw, "syncTimeBw": bw}


#: two nodes in a chain, each run at tensor-parallel degree 1 only
PIPER_PAIR = {"maxDevices": 2, "maxMemoryPerDevice": 1e9, "bandwidth": 1e9, "mbsInBatch": 4,
              "nodes": [{"id": 0, "name": "n0", "TMPCs": {"1": [_tmpc(1.0, {}, {"1": 0.0})]}},
                        {"id": 1, "name": "n1", "TMPCs": {"1": [_tmpc(1.0, {"0": 0.0}, {})]}}],
              "edges": [{"sourceId": 0, "destId": 1, "communicationCost": 1e3}]}


@pytest.mark.parametrize("kind", ["throughput", "latency", "piper"])
def test_an_instance_name_that_does_not_print_is_escaped_in_every_report(tmp_path, capsys, kind):
    """An instance is named after its file, whose name may hold a newline or a terminal escape: each report's
    header wrote it as it was, splitting the line (``instance    a`` then ``b``), where the tables beneath write
    such characters as escapes. It is written as the tables write it: ``a\\nb\\x1b[2J``."""
    if kind == "latency":
        pytest.importorskip("ortools")
    path = tmp_path / "a\nb\x1b[2J.json"
    source = CHAIN4 if kind == "throughput" else ROOT / "instances" / "tiny" / "diamond-cpu.json"
    path.write_text(json.dumps(PIPER_PAIR) if kind == "piper" else Path(source).read_text())
    plan = tmp_path / "plan.json"
    extra = ["--objective", "latency"] if kind == "latency" else []
    commands = [["solve", str(path), *extra, "--out", str(plan)], ["verify", str(path), str(plan)],
                ["simulate", str(path), str(plan)]] + ([["info", str(path)]] if kind == "throughput" else [])
    for command in commands:
        assert main(command) == 0, command
        out = capsys.readouterr().out
        assert "a\\nb\\x1b[2J" in out and "a\nb" not in out and "\x1b" not in out, (command, out)


def test_ctrl_c_while_the_command_s_parser_is_built_ends_it_with_status_130(monkeypatch, capsys):
    """Building a command's parser imports what its options need (the simulator, numpy: half a second): Ctrl-C
    then ends the command as it does during its work, with one line, not a traceback."""
    import placement.cli.simulate

    def register(subparsers):
        raise KeyboardInterrupt

    monkeypatch.setattr(placement.cli.simulate, "register", register)
    assert main(["simulate", CHAIN4, CHAIN4]) == 130
    assert capsys.readouterr() == ("", "error: interrupted\n")


@pytest.mark.parametrize("module, argv", [
    ("solve", ["solve", CHAIN4]), ("verify", ["verify", CHAIN4, CHAIN4]), ("info", ["info", CHAIN4]),
    ("simulate", ["simulate", CHAIN4, CHAIN4]), ("hypar", ["hypar", "lenet-c", "--accelerators", "2", "--batch", "1"]),
    ("importer", ["import", "m:f", "--out", "m.json"]), ("split", ["split", CHAIN4, CHAIN4]),
    ("codesign", ["codesign", CHAIN4, "--chips", "1", "--power", "1"])])
def test_every_command_interrupted_ends_with_status_130_as_the_readme_says(monkeypatch, capsys, module, argv):
    """Ctrl-C ends every command with one line and status 130; the README stated it for solve and hypar only,
    and gave verify, info, simulate, import, split and codesign exit statuses without it."""
    import importlib

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(f"placement.cli.{module}"), "run", interrupted)
    assert main(argv) == 130
    assert capsys.readouterr() == ("", "error: interrupted\n")
    commands = (ROOT / "README.md").read_text(encoding="utf-8").split("## Commands\n")[1].split("\n### ")[0]
    assert ("Ctrl-C ends every command with one line, `error: interrupted`, and exit status **130** (**143** for "
            "SIGTERM, **129** for SIGHUP)") in " ".join(commands.split())


_IMPORT_INTERRUPTED = """
import os, signal, sys, time
import placement.cli, placement.cli.{module}

def {function}(*args):
    try:   # the signal reaches an import that numpy's compiled code makes, which turns it into an ImportError
        os.kill(os.getpid(), signal.{signal})
        time.sleep(5)
    except KeyboardInterrupt:
        pass
    raise ImportError('PyCapsule_Import could not import module "datetime"')

placement.cli.{module}.{function} = {function}
sys.argv = ["placement", *sys.argv[1:]]
placement.cli.run()
"""


@pytest.mark.parametrize("module, function", [("solve", "run"), ("simulate", "register")])
@pytest.mark.parametrize("signal_name, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupt_that_an_import_turns_into_an_import_error_ends_the_command_as_the_interrupt(
        module, function, signal_name, status):
    """numpy's compiled import replaces a Ctrl-C (or SIGTERM) that reaches it with an ImportError that no longer
    carries the interrupt: the command, which imports numpy on its way (the simulate parser, the DP), ended with
    that ImportError's traceback and status 1, where it should end as the interrupt ends it."""
    script = _IMPORT_INTERRUPTED.format(module=module, function=function, signal=signal_name)
    done = subprocess.run([sys.executable, "-c", script, module, CHAIN4, CHAIN4][:6 if module == "simulate" else 5],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (done.returncode, done.stdout, done.stderr) == (status, "", "error: interrupted\n")


_SIGNALLED_WHILE_IMPORTING = """
import os, runpy, signal, sys

class Signalling:   # the signal comes as the command first imports the module (importlib.abc imports typing)
    def find_spec(self, name, path, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.{signal})
        return None

sys.meta_path.insert(0, Signalling())
sys.argv = ["placement", "solve", sys.argv[1], "--quiet"]
{entry}
"""

_ENTRIES = {"python -m placement": "runpy.run_module('placement', run_name='__main__', alter_sys=True)",
            "the placement script": "from placement.cli import run\nsys.exit(run())"}


@pytest.mark.parametrize("entry", list(_ENTRIES))
@pytest.mark.parametrize("module", ["typing", "argparse", "placement.errors", "placement.cli.options",
                                    "placement.cli.solve"])
@pytest.mark.parametrize("signal_name, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupt_while_the_command_line_imports_ends_it_with_one_line(entry, module, signal_name, status):
    """Ctrl-C in the first tenths of a second, while the command line imports typing, argparse and its own modules,
    ended the command with a traceback (SIGTERM, with nothing said), where later it ends with one line and status
    130 (143): the entry point handles the signals before it imports them."""
    script = _SIGNALLED_WHILE_IMPORTING.format(module=module, signal=signal_name, entry=_ENTRIES[entry])
    done = subprocess.run([sys.executable, "-c", script, CHAIN4], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (done.returncode, done.stdout, done.stderr) == (status, "", "error: interrupted\n")


def test_an_import_error_without_an_interrupt_is_not_taken_for_one(tmp_path):
    script = _IMPORT_INTERRUPTED.replace("os.kill(os.getpid(), signal.{signal})", "pass")
    done = subprocess.run([sys.executable, "-c", script.format(module="solve", function="run"), "solve", CHAIN4],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1 and done.stderr.rstrip().endswith(
        'ImportError: PyCapsule_Import could not import module "datetime"'), done.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", [["--version"], ["--help"], ["solve", "--help"]])
def test_help_and_the_version_that_cannot_be_written_say_so(command):
    """`--help` or `--version` behind a full device or a closed standard output: argparse drops the failed write,
    and the command said nothing and exited 0 with the text gone; it now fails as every other command's output
    does, in one line with status 2."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "placement", *command], stdout=full, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT, timeout=120)
    assert (proc.returncode, proc.stderr) == (2, "error: No space left on device\n")
    proc = subprocess.run([sys.executable, "-m", "placement", *command], stderr=subprocess.PIPE, text=True, cwd=ROOT,
                          timeout=120, preexec_fn=_closing(1))
    assert (proc.returncode, proc.stderr) == (2, "error: standard output is closed: the result has nowhere to go\n")


_IMPORTED_BY = """
import sys
from placement.cli.command import main
status = main({argv!r})
print(status, sorted(m for m in sys.modules if m == "numpy" or m.startswith("placement.cli.")), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["--vers"], ["-h"], []])
def test_the_version_and_the_list_of_commands_import_no_command(argv):
    """`placement --version` and `placement --help` imported every command's module to build its parser (numpy
    and the simulator with them: four times the time `placement info --help` takes); the list of commands and the
    version need none of them."""
    done = subprocess.run([sys.executable, "-c", _IMPORTED_BY.format(argv=argv)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    status = 2 if not argv else 0
    assert done.stderr.splitlines()[-1] == f"{status} ['placement.cli.command', 'placement.cli.options']"


def test_the_list_of_commands_is_what_each_command_registers(capsys):
    """`placement --help` names every command with the summary its own parser gives it."""
    from placement.cli.command import COMMANDS, SUMMARIES, Parser
    import importlib

    parser = Parser(prog="placement")
    sub = parser.add_subparsers(dest="command")
    for module in COMMANDS:
        importlib.import_module(f"placement.cli.{module}").register(sub)
    registered = {action.dest: action.help for action in sub._choices_actions}
    assert registered == SUMMARIES
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert all(f"    {name:<10}" in listed for name in SUMMARIES)
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"placement {placement.__version__}\n"
