"""What the commands share: option value types, common options, error naming, output.

Each value type parses one shape of value, or raises :class:`argparse.ArgumentTypeError`
with a one-line message that quotes what was given (printed as ``error: ...``, exit 2).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import json
import math
import os
import re
import stat
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from placement.errors import PlacementError
from placement.jsonfile import strict_json
from placement.wording import as_given


class UsageError(PlacementError):
    """A command-line option or argument combination makes no sense."""


def _integer(text: str, smallest: int, noun: str) -> int:
    """An integer of at least ``smallest`` in ASCII digits (``int`` alone also reads ``1_0`` as 10, and digits of
    other scripts)."""
    value = int(text) if re.fullmatch(r"\s*[+-]?[0-9]+\s*", text) else smallest - 1
    if value < smallest:
        raise argparse.ArgumentTypeError(f"expected a {noun}, got {text!r}")
    return value


def path_name(text: str) -> str:
    """A file or folder name to write: not empty (an empty name would write nothing), and not ``-``, which
    other tools read as standard output and would here have been a file named ``-``."""
    if not text:
        raise argparse.ArgumentTypeError("expected a file name, got ''")
    if text == "-":
        raise argparse.ArgumentTypeError("expected a file name, got '-' (for standard output give /dev/stdout; "
                                         "for a file named '-', ./-)")
    return text


def input_path(text: str) -> str:
    """A file to read, ``-`` standing for standard input (``/dev/stdin``, as ``placement solve /dev/stdin``)."""
    return "/dev/stdin" if text == "-" else text


def integer_at_least(smallest: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``smallest`` (1 or more)."""
    return lambda text: _integer(text, smallest, f"positive integer of at least {smallest}")


def non_negative_int(text: str) -> int:
    return _integer(text, 0, "non-negative integer")


def positive_int(text: str) -> int:
    return _integer(text, 1, "positive integer")


#: a number in ASCII decimal notation, with an optional fraction and exponent (``2``, ``0.5``, ``.5``, ``1e9``)
_DECIMAL = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")


def _number(text: str, noun: str, *, positive: bool = False, below_one: bool = False,
            up_to_one: bool = False) -> float:
    """A finite number ≥ 0 (> 0 when ``positive``; < 1 or ≤ 1 when asked) in ASCII decimal notation, as an integer
    option's (``float`` alone also reads ``1_0`` as 10, and digits of other scripts); ``noun`` names it."""
    value = float(text) if _DECIMAL.fullmatch(text) else math.nan
    ok = (math.isfinite(value) and (value > 0 if positive else value >= 0)
          and (not below_one or value < 1) and (not up_to_one or value <= 1))
    if not ok:
        raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    return _number(text, "a finite positive number", positive=True)


_BYTE_UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _bytes(text: str, positive: bool) -> float:
    """Bytes, plain or with a binary unit (``2GiB`` is 2·2^30), at least 0 (above 0 when ``positive``); the
    message names the kind of number expected whichever bound the text misses."""
    noun = f"a finite {'positive' if positive else 'non-negative'} number of bytes (or with KiB, MiB, GiB, TiB)"
    for unit, size in _BYTE_UNITS.items():
        if text.endswith(unit):
            try:
                value = _number(text[:-len(unit)], noun, positive=positive) * size
            except argparse.ArgumentTypeError:
                value = math.nan
            if not (value > 0 if positive else value >= 0) or not math.isfinite(value):
                raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}")
            return value
    return _number(text, noun, positive=positive)


def byte_count(text: str) -> float:
    """Bytes, plain or with a binary unit: ``2GiB`` is 2·2^30."""
    return _bytes(text, positive=False)


def positive_byte_count(text: str) -> float:
    """:func:`byte_count` above 0."""
    return _bytes(text, positive=True)


def relative_gap(text: str) -> float:
    return _number(text, "a relative gap of at least 0 and below 1", below_one=True)


def fraction(text: str) -> float:
    return _number(text, "a number between 0 and 1", up_to_one=True)


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--quiet``, which every command takes."""
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of text")
    parser.add_argument("--quiet", action="store_true", help="no progress or warnings on stderr")


def add_device_options(parser: argparse.ArgumentParser, what: str = "", memory: str = "") -> None:
    """``--accelerators``, ``--cpus``, ``--memory``: overrides of the instance's devices (``memory``: more
    on ``--memory``)."""
    parser.add_argument("--accelerators", type=non_negative_int, metavar="N",
                        help="override the number of accelerators" + what)
    parser.add_argument("--cpus", type=non_negative_int, metavar="N", help="override the number of CPU cores" + what)
    parser.add_argument("--memory", type=byte_count, metavar="BYTES",
                        help="override the memory of each accelerator" + what + memory)


def devices(args: argparse.Namespace) -> dict[str, Any]:
    """The device overrides of ``args`` as library keywords."""
    return {"accelerators": args.accelerators, "cpus": args.cpus, "memory": args.memory}


def recorded_devices_note(args: argparse.Namespace, plan: Any, done: str = "checked") -> str | None:
    """The note (its sentence) for the device overrides a check (or run, ``done``) takes from the plan file
    read into ``plan``: those the solve was given and the command line (``args``) does not give again;
    ``None`` where it takes none."""
    from placement.io.plans import recorded_overrides

    taken = {name: value for name, value in recorded_overrides(plan).items() if getattr(args, name, None) is None}
    if not taken:
        return None
    given = ", ".join(f"--{name} {as_given(value)}" for name, value in taken.items())
    return f"{done} on the devices the plan file records it was solved with: {given}"


def _command_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser | None:
    """The parser of the command ``argv`` names, ``None`` where it names none."""
    commands = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
    return next((commands[word] for word in argv if word in commands), None)


def option_name(parser: argparse.ArgumentParser, argv: Sequence[str], parameter: str) -> str:
    """The option of the command in ``argv`` that sets the library parameter ``parameter`` (its
    ``dest``), e.g. ``--time-limit`` for ``time_limit``; the parameter itself when none does."""
    command = _command_parser(parser, argv)
    for action in command._actions if command is not None else ():
        if action.dest == parameter:   # the form typed; else the long form, of a --x/--no-x pair --x
            typed = [name for name in action.option_strings if name.startswith("--")
                     and any(word == name or word.startswith(f"{name}=") for word in argv)]
            names = typed or [name for name in action.option_strings if not name.startswith("--no-")]
            names = names or action.option_strings
            return names[-1] if names else action.metavar or parameter.upper()
    return parameter


def unknown_options_hint(parser: argparse.ArgumentParser, argv: Sequence[str], message: str) -> str:
    """``message`` (argparse's ``unrecognized arguments: --metod dp``) with, for each unknown option, the
    option of the command it is most alike (``did you mean --method?``), where one is alike enough."""
    import difflib

    command = _command_parser(parser, argv)
    if command is None or not message.startswith("unrecognized arguments: "):
        return message
    known = [name for action in command._actions for name in action.option_strings if name.startswith("--")]
    options = argv[:argv.index("--")] if "--" in argv else argv   # after "--", words are no options
    hints = []
    for word in message.removeprefix("unrecognized arguments: ").split():
        if word.startswith("--") and word in options:
            name = word.split("=", 1)[0]
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
            hints += [f"{name}: did you mean {close[0]}?"] if close else []
    return message + (f" ({'; '.join(hints)})" if hints else "")


def progress_printer(quiet: bool, rename: Callable[[str], str] | None = None) -> Callable[[str], None] | None:
    """A progress callback printing ``[elapsed] message`` on stderr, or ``None`` when ``quiet``;
    ``rename`` rewrites each message (the library's parameter names as the command's options)."""
    if quiet:
        return None
    start = time.perf_counter()

    def progress(message: str) -> None:
        text = message if rename is None else rename(message)
        print(f"[{time.perf_counter() - start:8.2f} s] {text}", file=sys.stderr, flush=True)

    return progress


#: an input file at least this large is announced before it is read (reading takes seconds)
LARGE_INPUT_BYTES = 16 * 2**20
#: a plan of a graph of at least this many nodes takes seconds to read and check: verify announces it
LARGE_GRAPH_NODES = 100_000


def load_announced(path: str, progress: Callable[[str], None] | None) -> Any:
    """``placement.load(path)``, saying first that a large file is being read, and then what it held,
    through ``progress`` (a 96 MB instance takes about 8 s to read)."""
    import placement

    try:
        size = os.stat(path).st_size if isinstance(path, str) else 0
    except OSError:
        size = 0            # placement.load names what is wrong with the path
    announce = progress is not None and size >= LARGE_INPUT_BYTES
    if announce:
        progress(f"reading {path} ({size / 2**20:,.0f} MiB)")
    instance = placement.load(path)
    if announce and hasattr(instance, "edges"):
        progress(f"read {len(instance.nodes):,} nodes and {len(instance.edges):,} edges")
    return instance


def check_separate_streams(instance: str, plan: str, names: tuple[str, str] = ("instance", "plan")) -> None:
    """Fail when the instance and the plan (the two files ``names`` calls so) name one stream (``/dev/stdin``
    twice, one pipe), which gives its contents to the first read only: the plan was then read as an empty file."""
    try:
        first, second = os.stat(instance), os.stat(plan)
    except OSError:   # a missing file is refused where it is read
        return
    if (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino) and not stat.S_ISREG(first.st_mode):
        raise UsageError(f"{plan}: the {names[0]} and the {names[1]} are read from the same stream, which gives its "
                         "contents once; give one of them as a file")


def load_overridden(args: argparse.Namespace, progress: Callable[[str], None] | None, plan: Any = None,
                    read: list[Any] | None = None) -> Any:
    """:func:`load_announced`'s instance; one refused as written is read with the device overrides of ``args``,
    else those the plan file ``plan`` records (:func:`placement.loading.loaded_as_overridden`; the plan file,
    read for its record, is appended to ``read``, so that a pipe is not read twice). An instance
    that comes through a pipe (``<(…)``, ``/dev/stdin``), which can be read once, is read once
    (:func:`read_once`), and its refusals name it as a file's do. A file's instance is named by its stem, one
    read from a stream's path (:func:`names_a_stream`) is unnamed: ``/dev/stdin`` names no instance, and a plan
    solved from it and checked against the file, or the other way round, was noted as made for another one."""
    import placement
    from placement.api import taken_overrides
    from placement.loading import loaded_as_overridden

    if isinstance(plan, str):
        check_separate_streams(args.instance, plan)
    source = read_once(args.instance, placement.InvalidInstanceError, "instance")
    try:
        try:
            instance = load_announced(source, progress)
        except placement.InvalidInstanceError:
            instance = loaded_as_overridden(source, lambda: taken_overrides(read if read is not None else [], plan,
                                                                            **devices(args)))
    except placement.InvalidInstanceError as exc:
        if source is args.instance:
            raise
        raise naming_the_file(args.instance, exc) from None
    return dataclasses.replace(instance, name="") if names_a_stream(args.instance) else instance


def names_a_stream(path: str) -> bool:
    """Whether ``path`` names an open file of the process rather than a file of its own: ``/dev/stdin``,
    ``/dev/fd/N``, ``/proc/self/fd/N`` (what ``-`` and ``<(…)`` give), whatever they are opened on."""
    absolute = os.path.abspath(path)
    return (absolute == "/dev/stdin" or os.path.dirname(absolute) in ("/dev/fd", "/proc/self/fd")
            or re.fullmatch(r"/proc/\d+/fd/\d+", absolute) is not None)


def naming_the_file(path: str, exc: PlacementError) -> PlacementError:
    """``exc`` (an error about the file at ``path``, read as a document), of its type, its message starting with
    the path."""
    message = str(exc)
    return type(exc)(message if message.startswith(f"{path}:") else f"{path}: {message}")


def json_text(document: Any) -> str:
    """``document`` as strict JSON text (non-finite numbers as ``null``), two-space indent."""
    return json.dumps(strict_json(document), indent=2, allow_nan=False)


def to_devnull(stream: Any) -> None:
    """Point ``stream``'s file descriptor at ``/dev/null``: what is still buffered or written later goes
    nowhere, and closing the stream at exit cannot fail on a broken pipe or a full device."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


class ClosedOutput:
    """Standard output for a command started without one (``placement solve ... >&-``): each write fails as on
    a closed descriptor, so that the command ends with one ``error:`` line and status 2, as it does where a
    full device takes nothing, instead of a result that went nowhere. Its descriptor (1) is ``/dev/null``
    (:func:`open_standard_descriptors`)."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed: the result has nowhere to go")

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return 1


def open_standard_descriptors() -> None:
    """Open ``/dev/null`` on the standard descriptors (0-2) the process was started without (``2>&-``), so that
    no file the command opens takes their number: a solver's log written to descriptor 1 would land in a plan
    file. Python's streams for them are ``None``: standard error becomes ``/dev/null`` (progress and
    messages are no result), standard output a :class:`ClosedOutput`."""
    for fd in (0, 1, 2):   # in order: a new descriptor takes the lowest free number, the one found closed
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")
    if sys.stdout is None:
        sys.stdout = ClosedOutput()


class ReaderOutput:
    """Standard output (or error) that, once its reader has gone (``placement verify ... | head``), discards
    what is written, so that the command finishes and exits with its own status: an invalid plan stays 1.
    ``diagnostics`` (standard error): any failure to write (a full device) discards too, since progress and
    messages are no result; on standard output such a failure goes on, to be reported."""

    def __init__(self, stream: Any, diagnostics: bool = False) -> None:
        self._stream = stream
        self._gone = False
        self._lost = OSError if diagnostics else BrokenPipeError

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except self._lost:
                self._discard()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except self._lost:
                self._discard()

    def _discard(self) -> None:
        self._gone = True
        to_devnull(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def callers_stdout() -> Iterator[None]:
    """Within the block, ``print`` writes on the standard output the command was given, also while a
    solver that Ctrl-C could not stop still has file descriptor 1 sent to its log
    (:func:`placement.solvers.native_output.callers_stdout`; where that module was never loaded, no solver
    redirected anything, and it is not loaded to be asked)."""
    redirections = sys.modules.get("placement.solvers.native_output")
    fd = None if redirections is None else redirections.callers_stdout()
    if fd is None:
        yield
        return
    stream = open(fd, "w", encoding=getattr(sys.stdout, "encoding", None) or "utf-8", errors="backslashreplace")
    output = ReaderOutput(stream)   # its reader gone (| head), what is left goes nowhere, as on standard output
    try:
        with contextlib.redirect_stdout(output):
            yield
    finally:
        output.flush()
        stream.close()


def print_json(document: Any) -> None:
    """One strict JSON document on stdout."""
    print(json_text(document))


def write_text(path: str, text: str, mode: str = "w") -> None:
    """Write ``text`` to ``path`` (``mode`` ``"a"`` appends); a failure is a one-line usage error
    naming the file."""
    from placement.whole_file import appending, replacing

    try:
        if mode == "a":
            with appending(path) as fh:
                fh.write(text)
        else:
            with replacing(path) as fh:   # whole or not at all
                fh.write(text)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None


def read_once(path: str, error: type[PlacementError], what: str) -> str | dict:
    """``path`` itself where it names a regular file (which the library reads once, and names in messages),
    else the JSON object it holds, read now: a pipe (``<(…)``, ``/dev/stdin``) can be read once. A
    document that is no object is refused as the file would be (``the instance must be a JSON object``)."""
    if os.path.isfile(path):
        return path
    from placement.jsonfile import json_type_name, load_json

    document = load_json(path, error)
    if not isinstance(document, dict):
        raise error(f"{path}: the {what} must be a JSON object, got {json_type_name(document)}")
    return document


def check_writable(path: str | None, inputs: tuple[str | None, ...] = (), parameter: str | None = None) -> None:
    """Fail before any work when ``path`` cannot be written (:func:`placement.whole_file.probe_writable`: it
    stays as it was; :func:`placement.whole_file.empty_write`: a device that takes no byte, ``/dev/full``), or
    is one of the command's ``inputs`` (:func:`check_not_input`). ``parameter``: the library's name of the file,
    in whose words (:func:`placement.errors.unwritable`) such a device is refused, as the library refuses it."""
    if path is None:
        return
    from placement.errors import unwritable
    from placement.whole_file import empty_write, probe_writable

    check_not_input(path, inputs)
    try:
        probe_writable(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None
    try:
        empty_write(path)
    except OSError as exc:
        if parameter is not None:
            raise unwritable(path, exc, parameter) from None
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None


def write_plan_file(path: str | None, result: Any, quiet: bool) -> None:
    """Write ``result``'s plan file to ``path`` where it has a plan; a solve without one writes nothing,
    and says so unless ``quiet``."""
    if path is None:
        return
    if not result.ok:
        if not quiet:
            print(f"no plan: nothing written to {path}", file=sys.stderr)
        return
    write_text(path, json_text(result.to_json()) + "\n")


def shown_then_written(show: Callable[[], None], path: str | None, result: Any, quiet: bool) -> None:
    """``show()`` the result of a solve, then write its plan file to ``path`` (:func:`write_plan_file`), also
    where showing it failed (a closed terminal): after the result is shown, so that a disk that filled during a
    long solve loses no result."""
    try:
        show()
    finally:
        write_plan_file(path, result, quiet)


def check_distinct(outputs: dict[str, str | None], json: bool = False) -> None:
    """Fail when two of the command's output files (option name → path) are one file, or, where the command
    prints one JSON document (``json``), one of them is its standard output, a file or a pipe (a terminal or
    ``/dev/null`` takes both)."""
    from placement.whole_file import standard_stream

    seen: dict[str, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        if json and standard_stream(path) == 1 and not _terminal_or_device(1):
            raise UsageError(f"{option} {path} and --json both write on standard output, which would hold two "
                             "documents; give another file, or leave out --json")
        key = os.path.realpath(path)
        if key in seen:
            raise UsageError(f"{seen[key]} and {option} name the same file {path}; choose two names")
        seen[key] = option


def _terminal_or_device(fd: int) -> bool:
    """Whether the file descriptor ``fd`` is open on a terminal or another character device (``/dev/null``),
    where two documents spoil no file a program reads."""
    import stat

    try:
        return stat.S_ISCHR(os.fstat(fd).st_mode)
    except OSError:
        return False


def check_not_input(path: str, inputs: tuple[str | None, ...]) -> None:
    """Fail when the output file ``path`` is one of the command's ``inputs``, which writing it would
    overwrite."""
    for source in inputs:
        if source is not None and os.path.exists(path) and os.path.exists(source) and os.path.samefile(path, source):
            raise UsageError(f"{path}: is also an input of the command, which writing would overwrite; "
                             "choose another name")
