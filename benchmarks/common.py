"""What the benchmark scripts share: argument types that refuse nonsense (the command line's own), the
one-line refusal of a run that would measure nothing, and the description of the machine a timing
was measured on."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from placement.cli.options import integer_at_least, positive_float, positive_int
from placement.jsonfile import strict_json

__all__ = ["integer_at_least", "positive_float", "positive_int", "refuse", "cpu_model", "machine", "write_json"]

CPUINFO = Path("/proc/cpuinfo")


def refuse(message: str) -> int:
    """Print ``error: message`` on standard error and return the exit status of a refused run, 2."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def cpu_model(cpuinfo: Path = CPUINFO) -> str | None:
    """The CPU's model name as ``/proc/cpuinfo`` gives it, or None where that file does not say."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return value.strip()
    return None


def machine() -> dict:
    """What the numbers were measured on: Python, CPU count, platform, processor, CPU model and load average."""
    return {"python": sys.version.split()[0], "cpus": os.cpu_count(), "machine": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpu_model": cpu_model(),
            "load_average": os.getloadavg()}


def write_json(path: Path, document: Any) -> None:
    """Write ``document`` to ``path`` as strict JSON, indented: a bound that is not finite (an
    infeasible setting's) as null, which every JSON reader takes, not Python's ``Infinity``."""
    path.write_text(json.dumps(strict_json(document), indent=1, allow_nan=False) + "\n")
