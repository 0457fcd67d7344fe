"""Reading an instance file with a format's parser, so that every error names the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from placement.errors import InvalidInstanceError
from placement.jsonfile import load_json

T = TypeVar("T")


def parse_file(path: str | Path, parse: Callable[..., T]) -> T:
    """``parse(data, name)`` on the JSON at ``path``, named after the file's stem.

    Unreadable or malformed JSON, and every :class:`InvalidInstanceError` the parser raises,
    come out as :class:`InvalidInstanceError` whose message starts with ``path``.
    """
    data = load_json(path, InvalidInstanceError)
    try:
        return parse(data, Path(path).stem)
    except InvalidInstanceError as exc:
        raise InvalidInstanceError(f"{path}: {exc}") from None
