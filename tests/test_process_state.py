"""Calls in several threads at once leave the process's warnings filters and sys.stderr as they found
them (placement.process_state)."""

from __future__ import annotations

import os
import sys
import threading
import warnings

import pytest

from placement.process_state import catch_warnings


def test_two_threads_changing_the_warnings_filters_leave_them_as_they_were():
    # unheld, the second thread saved the first one's filter and put it back after the first had
    # restored the caller's: an ignore filter for DeprecationWarning stayed in front of them
    before = list(warnings.filters)
    second_inside, first_left = threading.Event(), threading.Event()

    def second() -> None:
        with catch_warnings():
            second_inside.set()
            first_left.wait(10)
            warnings.simplefilter("ignore", DeprecationWarning)

    def first() -> None:
        with catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            other.start()
            second_inside.wait(1)     # held: the second thread cannot come in before this one leaves

    other = threading.Thread(target=second)
    one = threading.Thread(target=first)
    one.start()
    one.join(30)
    first_left.set()
    other.join(30)
    assert second_inside.is_set()
    assert warnings.filters == before


def test_models_imported_in_several_threads_at_once_import_and_leave_stderr_alone():
    # torch.export is not thread-safe ("Trying to pop empty mode stack", blamed on the model), and each
    # import held sys.stderr in a StringIO: one thread put back the other's, which swallowed all output
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'placement[torch]')")
    from torch import nn

    from placement.io.torch_export import export_program

    stderr = sys.stderr
    start = threading.Barrier(3)
    outcomes: list[object] = []

    def export() -> None:
        model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
        start.wait(30)
        try:
            outcomes.append(len(export_program(model, (torch.randn(4, 16),)).graph.nodes))
        except Exception as exc:  # the test reports it below
            outcomes.append(exc)

    for _ in range(2):
        threads = [threading.Thread(target=export) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert sys.stderr is stderr
    assert len(outcomes) == 6 and all(isinstance(n, int) for n in outcomes), outcomes
    assert len(set(outcomes)) == 1


def test_what_other_threads_write_while_an_export_is_held_reaches_stderr(capsys):
    # a failed export drops what torch wrote meanwhile, and with it, before, what every other thread of the
    # program wrote to sys.stderr; only the exporting thread's writes are held now
    from placement.io.torch_export import _held_diagnostics

    def other_thread() -> None:
        print("other thread", file=sys.stderr)
        sys.stderr.flush()

    with _held_diagnostics():          # keep stays False: as after a failed export
        print("torch's partial graph", file=sys.stderr)
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(30)
    assert capsys.readouterr().err == "other thread\n"


def test_what_other_threads_log_through_torch_while_an_export_is_held_reaches_its_stream(capsys):
    # torch's log handlers were pointed at the held text for every thread, and given sys.stderr back
    # afterwards even where they had written on sys.__stderr__
    import logging

    from placement.io.torch_export import _held_diagnostics

    logger = logging.getLogger("torch._placement_test_probe")
    on_stderr, on_dunder = logging.StreamHandler(sys.stderr), logging.StreamHandler(sys.__stderr__)
    logger.addHandler(on_stderr)
    logger.addHandler(on_dunder)
    logger.propagate = False
    on_dunder.setLevel(logging.CRITICAL + 1)   # kept for its stream alone: it writes nothing here
    try:
        with _held_diagnostics():
            logger.warning("the export's own record")
            thread = threading.Thread(target=logger.warning, args=("another thread's record",))
            thread.start()
            thread.join(30)
        assert capsys.readouterr().err == "another thread's record\n"
        assert (on_stderr.stream, on_dunder.stream) == (sys.stderr, sys.__stderr__)
    finally:
        logger.removeHandler(on_stderr)
        logger.removeHandler(on_dunder)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_another_thread_holds_the_lock_can_take_it():
    # the holding thread does not exist in the child: without the fork hook the child's first
    # catch_warnings() waited forever (here: the child's 20 s guard, exit status 3)
    from placement import process_state

    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with process_state.HELD:
            inside.set()
            leave.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert inside.wait(10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)   # forking a threaded process
            pid = os.fork()
        if pid == 0:   # the child: take the lock, or give up after 20 s
            status = 0 if process_state.HELD.acquire(timeout=20) else 3
            os._exit(status)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        leave.set()
        holder.join(10)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_another_thread_changed_filters_and_stderr_gets_the_callers_back():
    import io

    from placement import process_state

    inside, leave = threading.Event(), threading.Event()
    caller_stderr = sys.stderr

    def change() -> None:
        with process_state.catch_warnings(), process_state.held():
            warnings.simplefilter("ignore", DeprecationWarning)
            sys.stderr = io.StringIO()
            try:
                inside.set()
                leave.wait(30)
            finally:
                sys.stderr = caller_stderr

    with warnings.catch_warnings():
        warnings.simplefilter("default", DeprecationWarning)
        callers = list(warnings.filters)
        changer = threading.Thread(target=change)
        changer.start()
        try:
            assert inside.wait(10)
            assert warnings.filters[0] == ("ignore", None, DeprecationWarning, None, 0)
            pid = os.fork()
            if pid == 0:   # the child: 0 where it has the caller's filters and stderr back, and the lock free
                ok = list(warnings.filters) == callers and sys.stderr is caller_stderr
                os._exit(0 if ok and process_state.HELD.acquire(timeout=20) else 3)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
        finally:
            leave.set()
            changer.join(10)
        assert list(warnings.filters) == callers
