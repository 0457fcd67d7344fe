"""Telling a Piper instance document from the others by its shape alone, without reading it: what
:func:`placement.loading.load` asks of every document, kept apart from the Piper reader
(:mod:`placement.io.piper`) so that reading another format does not load that reader."""

from __future__ import annotations

from typing import Any

#: Piper's top-level fields, its own four first (``maxDevices`` ... ``mbsInBatch``)
TOP_FIELDS = ("maxDevices", "maxMemoryPerDevice", "bandwidth", "mbsInBatch", "nodes", "edges")
#: Tarnawski's top-level fields, which a Piper document does not have
TARNAWSKI_FIELDS = ("maxFPGAs", "maxCPUs", "maxSizePerFPGA")


def looks_like_piper(data: Any) -> bool:
    """Whether decoded JSON looks like a Piper instance (a cheap test of its shape, not a validation):
    an object with one of Piper's own top-level fields (``maxDevices``, ``maxMemoryPerDevice``,
    ``bandwidth``, ``mbsInBatch``) and none of Tarnawski's (nor the native format's list of
    ``deviceTypes``; Piper's is an object), or whose first node has ``TMPCs``. A Piper document
    with a field missing, misspelt or empty is then reported in Piper's terms."""
    if not isinstance(data, dict):
        return False
    if (any(key in data for key in TOP_FIELDS[:4]) and not any(key in data for key in TARNAWSKI_FIELDS)
            and not isinstance(data.get("deviceTypes"), list)):
        return True
    nodes = data.get("nodes")
    return isinstance(nodes, list) and bool(nodes) and isinstance(nodes[0], dict) and "TMPCs" in nodes[0]
