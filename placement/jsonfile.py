"""Reading JSON files with errors that say where the problem is."""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from placement.errors import InvalidInstanceError, PlacementError

T = TypeVar("T")


def load_json(path: str | Path, error: type[PlacementError]) -> Any:
    """Parse the JSON file at ``path``; raise ``error`` with file, line and column on failure."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a JSON file") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None


def json_type_name(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages ("string", "array", ...)."""
    return {str: "string", bool: "boolean", list: "array", dict: "object", type(None): "null",
            int: "integer", float: "number"}.get(type(value), type(value).__name__)


def strict_json(value: Any) -> Any:
    """``value`` made strict-JSON-ready: tuples and sets as lists, non-finite floats as ``None``.

    Numpy scalars and arrays become Python numbers and lists; values of other types
    (enums, paths) are written as their ``str()``.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): strict_json(v) for k, v in value.items()}
    if hasattr(value, "tolist"):  # numpy arrays
        return strict_json(value.tolist())
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [strict_json(v) for v in items]
    return str(value)


def parse_file(path: str | Path, parse: Callable[[Any, str], T]) -> T:
    """``parse(data, name)`` on the JSON at ``path``, ``name`` being the file's stem.

    Unreadable or malformed JSON, and every :class:`InvalidInstanceError` the parser raises,
    come out as :class:`InvalidInstanceError` whose message starts with ``path``.
    """
    data = load_json(path, InvalidInstanceError)
    try:
        return parse(data, Path(path).stem)
    except InvalidInstanceError as exc:
        raise InvalidInstanceError(f"{path}: {exc}") from None
