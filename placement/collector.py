"""Pausing Python's cyclic garbage collector around bulk work that makes no reference cycles.

Each time enough containers (lists, dicts, objects) have been allocated, the collector scans the
live ones of a generation, and now and then all of them. While an instance of 100,000 nodes is in
memory, the per-node tables that evaluating a plan of it builds set off scan after scan of everything
already there: measured on a 100,000-node chain, a fifth of the time of the throughput and of the
latency evaluation (medians of 5: 0.56 s and 0.93 s with the collector, 0.45 s and 0.74 s without).
The work paused here makes no reference cycles, so reference counting frees all it drops; the
collector runs again, as before, when the work ends.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """Within the block (or the function it decorates), no cyclic collection; the collector's state
    before it (enabled or not) is restored after it, also on an exception."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
