"""The OR-Tools backends point file descriptor 1 at their log while a solver runs
(placement.solvers.native_output.stdout_to). The descriptor is one per process, so two
solves in threads take turns: before, each wrote into the other's log (HiGHS's bound, read from its
log, came out as the other run's), and they restored it in the wrong order, leaving the caller's
standard output in a deleted scratch file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from placement.solvers.native_output import stdout_to


def test_two_threads_take_turns_and_file_descriptor_1_comes_back(tmp_path):
    before = os.fstat(1)
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    inside, tried, written = threading.Event(), threading.Event(), threading.Event()

    def one() -> None:
        with stdout_to(str(first)):
            inside.set()
            tried.wait(5)
            threading.Event().wait(0.2)        # the other thread is at the door, or (before) inside
            os.write(1, b"first\n")
            written.set()

    def other() -> None:
        inside.wait(5)
        tried.set()
        with stdout_to(str(second)):
            os.write(1, b"second\n")
            written.wait(1)                    # before, the first thread wrote here meanwhile

    threads = [threading.Thread(target=one), threading.Thread(target=other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert first.read_text() == "first\n"
    assert second.read_text() == "second\n"
    after = os.fstat(1)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)


@pytest.mark.parametrize("method, options", [
    ("milp", ["--backend", "cbc", "--no-warm-start"]),   # CBC logs through the C library's buffer
    ("partition", []),   # METIS: "***Cannot bisect a graph with 0 vertices!" on a graph of zero-time nodes
])
def test_json_output_holds_nothing_else_when_standard_output_is_a_pipe(tmp_path, method, options):
    """On a pipe the C library buffers what native code prints, and flushed it at exit, after the JSON
    document (unless PYTHONUNBUFFERED made the buffers line-sized)."""
    pytest.importorskip("ortools" if method == "milp" else "pymetis")
    zero = {"maxSizePerFPGA": 4, "maxFPGAs": 3, "maxCPUs": 2,
            "nodes": [{"id": i, "supportedOnFpga": 1, "fpgaLatency": 0, "cpuLatency": 2 if i == 6 else 0,
                       "isBackwardNode": int(i > 5), "size": 0} for i in (2, 1, 7, 6)],
            "edges": [{"sourceId": 6, "destId": 7, "cost": 0}, {"sourceId": 1, "destId": 2, "cost": 0}]}
    instance = tmp_path / "zero.json"
    instance.write_text(json.dumps(zero))
    chain = Path(__file__).resolve().parents[1] / "instances" / "tiny" / "chain4.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run([sys.executable, "-m", "placement", "solve", str(chain if method == "milp" else instance),
                           "--method", method, *options, "--json", "--quiet"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] in ("optimal", "feasible")


def test_what_a_caller_prints_during_a_redirection_can_reach_its_standard_output(tmp_path, capfd):
    """Ctrl-C leaves HiGHS or CBC (which cannot be stopped) searching with file descriptor 1 sent to its
    log; the plan in hand, printed then, went into the log and never reached the caller."""
    from placement.solvers.native_output import callers_stdout

    assert callers_stdout() is None              # no redirection: nothing to give
    log = tmp_path / "solver.log"
    with stdout_to(str(log)):
        os.write(1, b"the solver's line\n")
        fd = callers_stdout()
        os.write(fd, b"the caller's plan\n")
        os.close(fd)
    assert log.read_text() == "the solver's line\n"
    assert capfd.readouterr().out == "the caller's plan\n"


def test_the_callers_output_whose_reader_has_gone_is_dropped_quietly(monkeypatch):
    """``solve | head`` interrupted while HiGHS searched on: printing the plan on the caller's descriptor
    raised BrokenPipeError, and the command exited 141 without saying it was interrupted."""
    from placement.cli import options
    from placement.solvers import native_output

    read, write = os.pipe()
    os.close(read)                                # the reader has gone
    monkeypatch.setattr(native_output, "callers_stdout", lambda: write)
    with options.callers_stdout():
        print("a plan\n" * 100_000)               # more than a pipe holds: written, then dropped


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_child_forked_while_another_thread_redirects_can_redirect_and_print(capfd):
    # The thread that held the turn does not exist in the child: the child's first redirection (any
    # HiGHS, CBC or SCIP solve) waited for it forever, and what the child printed went to the solver's
    # target. Now the child starts with the turn free and the caller's standard output.
    import time

    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with stdout_to(None):
            held.set()
            release.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(60)
    pid = os.fork()
    if pid == 0:   # the child
        try:
            with stdout_to(None):
                os.write(1, b"not shown\n")
            os.write(1, b"the child's line\n")
        finally:
            os._exit(0)
    release.set()
    thread.join()
    until = time.monotonic() + 60     # a guard against a hang, not a measure: the child ends at once
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < until:
        threading.Event().wait(0.05)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung on the redirection the parent's thread held")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert capfd.readouterr().out == "the child's line\n"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_child_forked_inside_the_redirection_goes_on_inside_it(tmp_path, capfd):
    # forked by the thread that redirects (a progress callback's fork): the child writes where the
    # solver's output goes, and leaves the redirection as the parent does
    log = tmp_path / "log.txt"
    with stdout_to(str(log)):
        pid = os.fork()
        if pid == 0:
            os.write(1, b"the child's line\n")
    if pid == 0:
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert log.read_text() == "the child's line\n"
    assert capfd.readouterr().out == ""


@pytest.mark.parametrize("stream", ["none", "closed"])
def test_a_redirection_takes_a_standard_output_that_is_none_or_closed(tmp_path, monkeypatch, capfd, stream):
    # sys.stdout is None under pythonw and in some services, and a caller may close it: flushing it
    # raised AttributeError or ValueError out of every CBC, SCIP and HiGHS solve
    if stream == "none":
        monkeypatch.setattr(sys, "stdout", None)
    else:
        closed = open(tmp_path / "out.txt", "w")
        closed.close()
        monkeypatch.setattr(sys, "stdout", closed)
    log = tmp_path / "log.txt"
    with stdout_to(str(log)):
        os.write(1, b"logged\n")
    assert log.read_text() == "logged\n"
    assert capfd.readouterr().out == ""


def test_a_redirection_works_without_file_descriptor_1_and_leaves_it_closed(tmp_path):
    # a daemon closes its standard streams: os.dup(1) raised OSError (EBADF) out of the solve
    log = tmp_path / "log.txt"
    code = ("import os, sys\n"
            "from placement.solvers.native_output import stdout_to\n"
            "os.close(1)\n"
            "sys.stdout = None\n"
            f"with stdout_to({str(log)!r}):\n"
            "    os.write(1, b'logged\\n')\n"
            "try:\n"
            "    os.fstat(1)\n"
            "    sys.stderr.write('open\\n')\n"
            "except OSError:\n"
            "    sys.stderr.write('closed\\n')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert done.stderr == "closed\n"
    assert log.read_text() == "logged\n"
