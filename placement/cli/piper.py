"""``placement solve`` on a Piper instance: the data- and tensor-parallel plan, as text or JSON."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from placement.cli.options import positive_int, print_json, shown_then_written

if TYPE_CHECKING:   # the reader loads only where a Piper instance was read
    from placement.io.piper import PiperInstance


def devices_argument(text: str) -> int | str:
    """``--devices``: a device count (``10``), or counts per device type (``a100:8,v100:16``), which the
    library reads (:mod:`placement.parallel.devices`)."""
    if ":" in text:
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or counts per device type "
                                         f"('a100:8,v100:16'), got {text!r}") from None


def run_piper(args: argparse.Namespace, instance: PiperInstance, options: dict[str, Any]) -> int:
    """Solve through :func:`placement.solve` with the command's ``options`` (it refuses those that do not
    apply to a Piper instance) and render."""
    import placement
    from placement.report.parallel import format_parallel_result

    result = placement.solve(instance, **options)
    shown_then_written(lambda: print_json(result.to_json()) if args.json else
                       print(format_parallel_result(instance, result), end=""), args.out, result, args.quiet)
    return 0 if result.ok else 1


__all__ = ["devices_argument", "run_piper"]
