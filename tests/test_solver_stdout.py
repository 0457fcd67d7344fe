"""The OR-Tools backends point file descriptor 1 at their log while a solver runs
(placement.solvers.milp.backends.linear_solver.stdout_to). The descriptor is one per process, so two
solves in threads take turns: before, each wrote into the other's log (HiGHS's bound, read from its
log, came out as the other run's), and they restored it in the wrong order, leaving the caller's
standard output in a deleted scratch file."""

from __future__ import annotations

import os
import threading

from placement.solvers.milp.backends.linear_solver import stdout_to


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
