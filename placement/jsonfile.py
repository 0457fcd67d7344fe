"""Reading JSON files with errors that say where the problem is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from placement.errors import PlacementError


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
