"""Misspelt fields: an unknown field of a JSON object read as a misspelling of a known one.

A reader that ignores unknown fields (an instance's nodes and edges carry the model importers' records,
``layerId``, ``flops``, ``module`` and more) would read a misspelt optional field as missing, and answer
for another input without a word: ``colourClass`` drops the colour classes, ``isBackward`` makes every node
a forward one. An unknown field is a misspelling where it is alike (:class:`difflib.SequenceMatcher`'s
ratio, case ignored, at least :data:`NEAR_MISS`) a known field that its object lacks; beside the field it
resembles, it is another field and ignored.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Sequence
from typing import Any

#: the least ratio of a misspelling: ``colourClass``, ``isBackward``, ``sizes``, ``source`` (of
#: ``sourceId``), ``backward`` (0.73) reach it; the importers' ``layerId``, ``flops``, ``bytes``, ``TMPCs`` (at
#: most 0.6) do not
NEAR_MISS = 0.7


def misspelt_field(objects: Sequence[Any], known: Sequence[str],
                   refused: Sequence[str] | None = None) -> tuple[int, str, str] | None:
    """The first misspelling in ``objects`` (JSON objects; other values are skipped), fields in sorted order:
    ``(k, field, meant)`` where ``objects[k]`` has ``field``, which is not ``known`` and is alike ``meant``,
    a ``known`` field that ``objects[k]`` lacks, and one of ``refused`` (by default any); ``None`` where there
    is none."""
    dicts = [obj for obj in objects if isinstance(obj, dict)]
    lowered = {field.lower(): field for field in known}
    for field in sorted(set(itertools.chain.from_iterable(dicts)) - set(known), key=str):
        for near in difflib.get_close_matches(str(field).lower(), lowered, n=len(lowered), cutoff=NEAR_MISS):
            meant = lowered[near]
            if refused is not None and meant not in refused:
                continue
            for k, obj in enumerate(objects):
                if isinstance(obj, dict) and field in obj and meant not in obj:
                    return k, field, meant
    return None


def misspelling_message(field: str, meant: str) -> str:
    """What a reader says of ``field``, a misspelling of ``meant``; a field with characters beyond ASCII, which may
    print as ``meant`` does (a Cyrillic ``о`` for an ``o``; the formats' fields are ASCII), with its code points."""
    shown = f"{field!r}" if str(field).isascii() else f"{field!r} (written {ascii(field)})"
    return f"unknown field {shown}; did you mean {meant!r}? (a field this like one the format reads is refused, " \
           "not ignored)"
