"""Reading JSON files with errors that say where the problem is, within limits on size and nesting.

Limits (both checked before anything is decoded):

* :data:`MAX_INPUT_BYTES`: a file (or a stream such as ``/dev/zero``) longer than this many
  bytes is refused; callers that take ``max_bytes`` let the user raise it.
* :data:`MAX_DEPTH`: JSON nested deeper than this many arrays and objects is refused (the
  formats read here need at most 7 levels), so no input can exhaust the interpreter's stack.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar

from placement.errors import InvalidInstanceError, LimitExceededError, PlacementError

T = TypeVar("T")

#: the default input size limit: 256 MiB
MAX_INPUT_BYTES = 256 * 2**20
#: the most arrays and objects a JSON document may nest
MAX_DEPTH = 64

#: a node id written as a JSON object key: an integer in decimal digits, without leading zeros (``int`` alone
#: also reads ``1_0``, `` 7`` and digits of other scripts)
NODE_ID_KEY = re.compile(r"-?(0|[1-9][0-9]*)")
_CHUNK = 2**20  # streams are read a MiB at a time
_LONG_DIGITS = b"0" * 309  # shorter integers are below 1e309: no need for the range-checking hook
_BRACKETS = bytes.maketrans(b"[{]}", b"(())")
_NOT_STRUCTURE = bytes(range(256)).translate(None, b'[]{}"')
# the text with every digit written 0, exponents as 'e' and signs as '-' (_NUMBER_SHAPES), in which text
# that may decode to a number that is not finite holds one of _MAYBE_NOT_FINITE: the parser's NaN and
# Infinity, or a digit with an exponent of three digits or more (1e400 decodes to inf; 1e-400 to 0, which
# the check of the decoded document then finds finite). Substring tests on the translated text take a
# third of the time of one regular expression on the text itself.
_NUMBER_SHAPES = bytes.maketrans(b"123456789E+", b"000000000e-")
_MAYBE_NOT_FINITE = (b"NaN", b"Infinity", b"0e000", b"0e-000")
# so may a run of this many digits: a float of 210 digits before its point reaches inf with an exponent of
# two digits (1 followed by 300 zeros, then e10), and one of 309 without any ('9' * 400 + '.0')
_MANY_DIGITS = b"0" * 210


def read_bytes(path: str | Path, error: type[PlacementError], max_bytes: int = MAX_INPUT_BYTES) -> bytes | bytearray:
    """The bytes of the file at ``path``, at most ``max_bytes`` of them.

    A longer regular file raises :class:`LimitExceededError` (parameter ``max_bytes``) before any
    reading; a stream (a pipe, ``/dev/zero``) is read in chunks and refused as soon as it passes
    ``max_bytes``. A regular file is read in one call of its size (plus one byte, to see whether it grew since;
    a file that did is read on in chunks), whatever ``max_bytes``. A missing or unreadable file raises ``error``,
    and so does an empty name (which :class:`~pathlib.Path` would read as ``.``, the current folder).
    """
    if not os.fspath(path):
        raise error("'': an empty file name; give the path of a file")
    path = Path(path)
    too_long = LimitExceededError(f"{path}: more than {max_bytes} bytes, the input size limit (max_bytes)",
                                  parameter="max_bytes")
    try:
        with open(path, "rb") as fh:
            status = os.fstat(fh.fileno())
            data = bytearray()
            if stat.S_ISREG(status.st_mode):
                if status.st_size > max_bytes:
                    raise too_long
                whole = fh.read(status.st_size + 1)
                if len(whole) <= status.st_size:
                    return whole
                data += whole
            while len(data) <= max_bytes:
                chunk = fh.read(min(_CHUNK, max_bytes + 1 - len(data)))
                if not chunk:
                    return data
                data += chunk
            raise too_long
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a JSON file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None


def nested_deeper_than(data: bytes | bytearray, limit: int) -> bool:
    """Whether the JSON text ``data`` nests arrays and objects more than ``limit`` deep.

    Escaped backslashes and quotes are dropped, then everything between quotes (the strings);
    the brackets left are read as parentheses, and each pass removes the innermost pairs ``()``:
    a balanced text is empty after exactly as many passes as it is deep. Unbalanced text is
    malformed and left to the parser (whose errors say where).
    """
    if b"[" not in data and b"{" not in data:
        return False
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    quotes_and_brackets = data.translate(None, _NOT_STRUCTURE)
    brackets = b"".join(quotes_and_brackets.split(b'"')[::2]).translate(_BRACKETS)
    if b"(" * (limit + 1) in brackets:
        return True
    for _ in range(limit):
        if b"()" not in brackets:
            return False
        brackets = brackets.replace(b"()", b"")
        if not brackets:
            return False
    return b"()" in brackets


def load_json(path: str | Path, error: type[PlacementError], max_bytes: int = MAX_INPUT_BYTES) -> Any:
    """Parse the JSON file at ``path``; raise ``error`` with file, line and column on failure.

    A file longer than ``max_bytes`` raises :class:`LimitExceededError`; JSON nested more than
    :data:`MAX_DEPTH` levels raises ``error``, and so does a number that is not finite anywhere in
    the document (:func:`refuse_non_finite`).
    """
    document, maybe_not_finite = _decode(path, error, max_bytes)
    if maybe_not_finite:
        refuse_non_finite(document, path, error)
    return document


def refuse_non_finite(document: Any, path: str | Path, error: type[PlacementError]) -> None:
    """Raise ``error`` naming the first number of ``document`` (read from ``path``) that is not
    finite (``NaN``, ``Infinity``, ``1e400``), by its place in the document: no file read here has a
    use for one, and a field a reader ignores must not hold one either (README, Limits)."""
    found = _non_finite(document, "")
    if found is not None:
        where, value = found
        raise error(f"{path}: {where or 'the document'} is {_non_finite_name(value)}; every number must be finite")


def refuse_non_finite_document(document: Any, error: type[PlacementError]) -> None:
    """Raise ``error`` naming the first number of a decoded ``document`` given as a dict (a library
    caller's) that is not finite, as :func:`refuse_non_finite` does for a file's (numpy's numbers and arrays,
    and ``Decimal``, are numbers too), or the first container that holds itself, which no JSON text decodes
    to (and which the search would follow forever)."""
    try:      # the encoder refuses both at C speed; what it cannot write at all is searched below
        json.dumps(document, allow_nan=False, default=_plain)
        return
    except (ValueError, TypeError, RecursionError):
        pass
    for value, place in _leaves(document, error):
        if isinstance(value, numbers.Number) and not isinstance(value, (numbers.Integral, complex)):
            if not math.isfinite(float(value)):
                raise error(f"{_place_text(place)} is {_non_finite_name(float(value))}; every number must be "
                            "finite")


def _leaves(document: Any, error: type[PlacementError]) -> Iterator[tuple[Any, Any]]:
    """Every value of a decoded ``document`` that holds no other (a numpy number or array as its ``tolist()``),
    with its place (:func:`_place_text`), in document order; ``error`` for a container that holds itself, which
    no JSON text decodes to (and which a search would follow forever)."""
    path: list[int] = []                 # the ids of the containers from the document to the one searched
    stack: list[tuple[Any, Any, int]] = [(document, None, 0)]   # value, its place (key, parent's place), depth
    while stack:
        value, place, depth = stack.pop()
        del path[depth:]
        if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
            value = value.tolist()        # a numpy number or array
        if isinstance(value, Mapping):
            items: Any = value.items()
        elif isinstance(value, (list, tuple)):
            items = enumerate(value)
        else:
            yield value, place
            continue
        if id(value) in path:
            raise error(f"{_place_text(place)} holds itself (a container that is its own element is no JSON "
                        "document)")
        path.append(id(value))
        stack.extend(reversed([(item, (key, isinstance(value, Mapping), place), depth + 1) for key, item in items]))


def _plain(value: Any) -> Any:
    """A value the JSON encoder cannot write as itself, as one it can: a numpy number or array as its
    Python value or list, a ``Decimal`` as a float."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    if isinstance(value, numbers.Number) and not isinstance(value, complex):
        return float(value)
    raise TypeError(f"{type(value).__name__} is no JSON value")


def _place_text(place: Any) -> str:
    """``nodes[3].about.x`` for a place of :func:`refuse_non_finite_document` (key, in a mapping, parent)."""
    parts = []
    while place is not None:
        key, in_mapping, place = place
        parts.append(f".{key}" if in_mapping else f"[{key}]")
    return "".join(reversed(parts)).lstrip(".") or "the document"


def past_floats(value: int) -> str:
    """``an integer of N digits, past the largest number (about 1.8e308)`` where the integer ``value`` is past
    the float range (every number read is taken as a double, and ``float`` of it raises ``OverflowError``),
    else ``""``."""
    if abs(value) <= sys.float_info.max:
        return ""
    digits = math.floor(math.log10(abs(value))) + 1   # str() refuses integers of 4,300 digits
    return f"an integer of {digits} digits, past the largest number (about 1.8e308)"


def refuse_huge_integers(document: Any, error: type[PlacementError]) -> None:
    """Raise ``error`` naming an integer of a decoded ``document`` (a plan given as a dict) past the
    float range, by its place and length, as :func:`load_json` refuses one in a file: every number read is
    taken as a double, and ``float`` of such an integer raises ``OverflowError``. A container that holds
    itself, which no JSON text decodes to (and which the search would follow forever), is refused too."""
    for value, place in _leaves(document, error):
        if isinstance(value, int) and not isinstance(value, bool) and past_floats(value):
            raise error(f"{_place_text(place)}: {past_floats(value)}")


def refuse_non_string_keys(document: Any, error: type[PlacementError]) -> None:
    """Raise ``error`` naming the first key of a decoded ``document`` given as a dict (a library caller's) that
    is not a string, as no JSON text decodes to (``{1: ...}`` for ``{"1": ...}``): the readers match keys as
    text, and took such a key to a regular expression's ``TypeError`` or read it as another field. Each
    container is searched once (one that holds itself is refused by name later)."""
    seen: set[int] = set()
    stack: list[tuple[Any, str]] = [(document, "")]
    while stack:
        value, where = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    given = "None" if key is None else f"{json_type_name(key)} {key!r}"   # not JSON's null
                    raise error(f"{where or 'the document'}: a key must be a string, as a JSON object's are, got "
                                f"{given}")
            stack.extend((item, f"{where}.{key}" if where else key) for key, item in value.items()
                         if isinstance(item, (Mapping, list, tuple)))
        elif isinstance(value, (list, tuple)):
            stack.extend((item, f"{where}[{k}]") for k, item in enumerate(value)
                         if isinstance(item, (Mapping, list, tuple)))


def _non_finite_name(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _non_finite(value: Any, where: str) -> tuple[str, float] | None:
    """The place (``nodes[3].extra``) and value of the first number in ``value`` that is not finite:
    the containers are searched without their places, and only the one that holds such a number is
    searched again, place by place (a document of millions of values names none of them on the way)."""
    if isinstance(value, float):
        return (where, value) if not math.isfinite(value) else None
    if isinstance(value, dict):
        items: Any = value.items()
        place = (lambda key: f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        items = enumerate(value)
        place = (lambda k: f"{where}[{k}]")
    else:
        return None
    for key, item in items:
        if isinstance(item, float) and not math.isfinite(item) or isinstance(item, (dict, list)) and _holds(item):
            return _non_finite(item, place(key))
    return None


def _holds(value: dict | list) -> bool:
    """Whether a number that is not finite lies anywhere inside ``value`` (iteratively: any depth)."""
    stack = [value]
    while stack:
        top = stack.pop()
        for item in top.values() if isinstance(top, dict) else top:
            if isinstance(item, float):
                if not math.isfinite(item):
                    return True
            elif isinstance(item, (dict, list)):
                stack.append(item)
    return False


#: why a float with no fraction of 2^53 or more is no id: JSON text such as 100000000000000001.0 decodes to
#: the nearest double, another integer (100000000000000000.0), where the integer form is read exactly
ROUNDED_INTEGER = ("a number not written as an integer, 2^53 = 9007199254740992 or more, where a double does not "
                   "hold every integer (what was written may have been rounded to another); write it as an integer")


def not_utf8(exc: UnicodeDecodeError) -> str:
    """Where a text is not UTF-8, in words: the offset and value of the first byte that breaks it."""
    return f"not UTF-8 text (the byte at offset {exc.start}, 0x{exc.object[exc.start]:02x}, cannot be there)"


def _decode(path: str | Path, error: type[PlacementError], max_bytes: int) -> tuple[Any, bool]:
    """The document in the JSON file at ``path`` (:func:`load_json`), numbers unchecked, and whether
    its text may spell a number that is not finite (only then is the document searched for one)."""
    data = read_bytes(path, error, max_bytes)
    if data[:2] == b"\x1f\x8b":
        raise error(f"{path}: a gzip-compressed file, not JSON text; decompress it first (gunzip)")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise error(f"{path}: UTF-16 text (it begins with a UTF-16 byte order mark); save it as UTF-8")
    if data[:4] == b"PK\x03\x04":
        raise error(f"{path}: {_ZIP}")
    try:
        text = data.decode("utf-8-sig")      # a byte order mark, as some editors write, is no part of the text
    except UnicodeDecodeError as exc:
        raise error(f"{path}: {_model_file(path) or not_utf8(exc)}") from None
    if not text.strip():
        raise error(f"{path}: the file is empty; it should hold a JSON document")
    too_deep = f"{path}: JSON nested more than {MAX_DEPTH} levels deep"
    if nested_deeper_than(data, MAX_DEPTH):
        raise error(too_deep)
    try:
        shapes = data.translate(_NUMBER_SHAPES)
        many_digits = _MANY_DIGITS in shapes   # the longer run is sought only within a text that has this one
        return (json.loads(text, parse_int=_finite_int if many_digits and _LONG_DIGITS in shapes else None,
                           object_pairs_hook=unique_keys),
                many_digits or any(spelling in shapes for spelling in _MAYBE_NOT_FINITE))
    except json.JSONDecodeError as exc:
        model = _model_file(path)
        if model:
            raise error(f"{path}: {model}") from None
        raise error(f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {_malformed(exc)}") from None
    except RepeatedKey as exc:
        raise error(f"{path}: the key {exc.args[0]!r} appears twice in one object; which one is meant is "
                    "not clear") from None
    except RecursionError:  # unbalanced brackets the depth check left to the parser
        raise error(too_deep) from None
    except OverflowError as exc:
        raise error(f"{path}: an integer of {exc.args[0]} digits, past the largest number (about 1.8e308)") from None
    except ValueError:  # an integer literal longer than the interpreter converts
        raise error(f"{path}: malformed JSON: an integer with more than {sys.get_int_max_str_digits()} "
                    "digits") from None


#: what a file of a model holds where JSON is read, by the ending of its name, and how it becomes an instance
_MODEL_FILES = {
    ".onnx": "an ONNX model, not JSON text: import it first (placement import, or import_onnx in Python)",
    ".py": "Python source, not JSON text: import the model it defines first (placement import, or import_torch in "
           "Python)",
}
#: the same for a zip archive, as a saved PyTorch model is (the importers take the model itself)
_ZIP = ("a zip archive, not JSON text (a saved PyTorch model is one: import the model itself first, with placement "
        "import, or import_torch in Python)")


def _model_file(path: str | Path) -> str | None:
    """Why a file that is no JSON, named as an ONNX model or Python source is (``.onnx``, ``.py``), is no
    document (:data:`_MODEL_FILES`); ``None`` for another name."""
    return _MODEL_FILES.get(Path(path).suffix.lower())


def _malformed(exc: json.JSONDecodeError) -> str:
    """Why the parser stopped, in words: its own, but for text after a whole document (its "Extra data"), which
    where an object or an array starts a line is the next document of JSON Lines (a sweep's records), which no
    reader here takes."""
    if exc.msg != "Extra data":
        return exc.msg
    lines = exc.colno == 1 and exc.doc[exc.pos:exc.pos + 1] in ("{", "[")
    return "text after the end of the document" + (
        "; a file holds one JSON document, and JSON Lines (a document a line, as a sweep's records) are not read here"
        if lines else "")


class RepeatedKey(ValueError):
    """A JSON object names one key twice (the parser would keep the last silently)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The object of ``pairs`` (a ``json.loads`` ``object_pairs_hook``); :class:`RepeatedKey` when a key comes
    twice."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return obj


def _finite_int(digits: str) -> int:
    """The integer a JSON literal spells; one past the float range raises OverflowError(its length):
    no quantity, id or count of any format read here is that large."""
    value = int(digits)
    try:
        float(value)
    except OverflowError:
        raise OverflowError(len(digits.lstrip("-"))) from None
    return value


def json_value_text(value: Any) -> str:
    """A decoded value as a message shows it: a string quoted, ``null``, ``true``, ``false``, a number as
    written (``NaN``, ``Infinity`` and ``-Infinity`` as the file spells them, not Python's ``nan`` and ``inf``);
    an array or object by its type's JSON name."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, (str, int, float)):
        return repr(value)
    return f"an {json_type_name(value)}" if isinstance(value, (list, dict)) else json_type_name(value)


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


def parse_file(path: str | Path, parse: Callable[[Any, str], T], max_bytes: int = MAX_INPUT_BYTES) -> T:
    """``parse(data, name)`` on the JSON at ``path``, ``name`` being the file's stem.

    Unreadable or malformed JSON, and every :class:`InvalidInstanceError` the parser raises,
    come out as :class:`InvalidInstanceError` whose message starts with ``path``; a file longer
    than ``max_bytes`` as :class:`LimitExceededError`. A number that is not finite where the parser
    does not look (a field it ignores) is refused after it (:func:`refuse_non_finite`).
    """
    data, maybe_not_finite = _decode(path, InvalidInstanceError, max_bytes)
    try:
        parsed = parse(data, file_stem(path))
    except InvalidInstanceError as exc:
        raise InvalidInstanceError(f"{path}: {exc}") from None
    if maybe_not_finite:        # after the parser, whose messages name the fields it reads
        refuse_non_finite(data, path, InvalidInstanceError)
    return parsed


def file_stem(path: str | Path) -> str:
    """The name a file gives what it holds: its stem, read as UTF-8 from the bytes of the file's name. Under a
    locale that decodes file names otherwise (``LC_ALL=C`` with Python's UTF-8 mode off), the name held escapes
    for its bytes, and a plan recorded ``'\\udcc3\\udcbc...'``, which ``verify`` then took for another
    instance's name."""
    return os.fsencode(Path(path).stem).decode("utf-8", errors="replace")

