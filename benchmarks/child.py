"""Run a command as a child process and measure its wall time, CPU time and peak resident memory.

On Linux a process's ``ru_maxrss`` starts, at ``exec``, from the resident high-water mark of the
process it was forked from. A benchmark that has grown (tables built, plans solved in process)
would therefore report its own size as every child's peak. The command is started instead by a
launcher, a fresh ``python -S -c`` process of a few MiB, which forks, executes the command,
waits for it and hands its resource usage and wall time (from its start to its exit, the
launcher's own start-up excluded) back through a file: the launcher's small footprint is the
floor of the peak reported, not the benchmark's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

_LAUNCHER = """
import json, os, sys, time
report, command = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.posix_spawnp(command[0], command, os.environ)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
with open(report, "w") as fh:
    json.dump([os.waitstatus_to_exitcode(status), wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss], fh)
"""


@dataclass(frozen=True)
class ChildRun:
    """What one run of a command cost: exit status, seconds of wall and CPU time, peak resident MiB,
    and its standard error when it was captured."""

    exit: int
    wall_s: float
    cpu_s: float
    peak_mib: float
    stderr: str


def run_child(cmd: list[str], cwd: Path | str | None = None, env: dict | None = None,
              capture_stderr: bool = True) -> ChildRun:
    """Run ``cmd`` (standard output discarded) through the launcher; see the module docstring."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "usage.json"
        proc = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, str(report), *cmd], cwd=cwd, env=env,
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE if capture_stderr else subprocess.DEVNULL)
        if not report.exists():
            said = proc.stderr.decode().strip().splitlines() if proc.stderr else []
            raise RuntimeError(f"could not start {cmd[0]}" + (f": {said[-1]}" if said else ""))
        code, wall, cpu, maxrss_kib = json.loads(report.read_text())
    return ChildRun(code, wall, cpu, maxrss_kib / 1024, proc.stderr.decode() if proc.stderr else "")


def main(argv: list[str] | None = None) -> int:
    """``python benchmarks/child.py CMD ARG...``: run the command once and print what it cost."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, with its arguments")
    args = parser.parse_args(argv)
    if not args.command:
        parser.error("no command given")
    try:
        print(run_child(args.command))
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
