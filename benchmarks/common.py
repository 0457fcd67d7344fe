"""What the benchmark scripts share: argument types that refuse nonsense, the one-line refusal of a
run that would measure nothing, and the description of the machine a timing was measured on."""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: the argument as an integer, refused below ``low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, not {value}")
        return value

    return parse


#: an argparse type: an integer of at least 1
positive_int = int_at_least(1)


def positive_float(text: str) -> float:
    """An argparse type: the argument as a finite number above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


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
