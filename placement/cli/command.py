"""The parser of every command, the rendering of errors, and the run of one command line (:mod:`placement.cli`,
which imports this module once it handles the signals that stop a command).

One module per command (:data:`COMMANDS`), each with ``register(subparsers)``, which adds
its parser, and ``run(args) -> int``, which parses nothing more, calls the library and
renders.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import re
import signal
import sys
from typing import Any, Callable, Iterator, Sequence

from placement import __version__
from placement.cli import INTERRUPTED
from placement.cli.options import (ReaderOutput, UsageError, open_standard_descriptors, option_name, to_devnull,
                                   unknown_options_hint)
from placement.errors import InvalidParameterError, PlacementError
from placement.report.table import printable

COMMANDS: tuple[str, ...] = ("solve", "verify", "info", "simulate", "hypar", "importer", "split", "codesign")
#: The command each module registers, where the two names differ.
_COMMAND_NAMES = {"importer": "import"}
#: Each command's summary, which its module's parser gives it and ``placement --help`` lists.
SUMMARIES: dict[str, str] = {
    "solve": "find an optimal placement of an instance",
    "verify": "check a plan against an instance, independently of any solver",
    "info": "describe an instance, or list the MILP solvers",
    "simulate": "run a plan through a pipeline schedule, micro-batch by micro-batch",
    "hypar": "plan hybrid data/model parallelism of a layer chain (HyPar/AccPar communication model)",
    "import": "turn a PyTorch or ONNX model into an instance",
    "split": "turn a plan of an imported model into runtime split points",
    "codesign": "co-design accelerator chips and the pipeline placement",
}


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (raised, then printed by :func:`main`)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)

    def _print_message(self, message: str, file: Any = None) -> None:
        """``--help`` and ``--version`` written out, a failed write raised (argparse drops it, and the text went
        nowhere with status 0): it is reported as any other output that cannot be written (:func:`run`)."""
        if message:
            (file or sys.stderr).write(message)


def build_parser(argv: Sequence[str] | None = None) -> Parser:
    """The parser of every command; given ``argv`` that names a command, only that command's parser
    (each command imports what its options need, so building one is cheaper than building all); given
    ``argv`` that asks for the version or the list of commands (or is empty), each command by its summary
    alone, none of their modules imported."""
    modules = COMMANDS
    named = argv[0] if argv else None   # a command comes first: after an option (even "--") it is no command
    wanted = [m for m in COMMANDS if _COMMAND_NAMES.get(m, m) == named]
    if wanted:
        modules = tuple(wanted)
    parser = Parser(prog="placement",
                    description="Provably optimal placement of DNN graphs onto pipelines of heterogeneous devices.")
    parser.add_argument("--version", action="version", version=f"placement {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    if argv is not None and _names_the_commands_only(argv):
        for name, summary in SUMMARIES.items():
            sub.add_parser(name, help=summary)
        return parser
    for name in modules:
        importlib.import_module(f"placement.cli.{name}").register(sub)
    return parser


def _names_the_commands_only(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is answered before any command's options are read: it is empty, or it opens with
    ``-h``, ``--help`` or ``--version`` (or a prefix of one that argparse takes for it)."""
    if not argv:
        return True
    first = argv[0]
    return first == "-h" or (len(first) > 2 and any(o.startswith(first) for o in ("--help", "--version")))


def _message(exc: PlacementError, parser: argparse.ArgumentParser, argv: Sequence[str],
             args: argparse.Namespace | None = None) -> str:
    """The error's text, with a library parameter named by the command-line option that sets it, or,
    for a positional argument (a file), by the value given."""
    if isinstance(exc, InvalidParameterError):   # the library's None is an option left out
        detail = _options_named(re.sub(r' or None(?=[,;)]|$)', '', exc.detail), parser, argv)
        return f"{_argument_name(parser, argv, args, exc.parameter)} {detail}"
    parameter = getattr(exc, "parameter", None)
    if parameter:  # a limit set by a parameter: name the option instead
        name = _argument_name(parser, argv, args, parameter)
        if name == parameter:   # no option of the command sets it: the library's name means nothing here
            return re.sub(rf" \({re.escape(parameter)}\)", "", str(exc))
        return _options_named(_outside_input(rf"\b{re.escape(parameter)}\b", lambda _: name, str(exc), argv),
                              parser, argv)
    return _options_named(str(exc), parser, argv)   # "objective='latency'" as "--objective latency"


def _argument_name(parser: argparse.ArgumentParser, argv: Sequence[str], args: argparse.Namespace | None,
                   parameter: str) -> str:
    """The option that sets ``parameter``, or, for a positional argument, the value given (a file name)."""
    name = option_name(parser, argv, parameter)
    given = getattr(args, parameter, None)
    if not name.startswith("-") and name != parameter and isinstance(given, str):
        return given
    return name


def _options_named(detail: str, parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """``detail`` with the other library parameters it names written as the command's options:
    ``backward='split'`` as ``--backward split``, ``devices=N`` as ``--devices N``, a flag
    ``exhaustive=True`` as ``--exhaustive``, and the names listed
    in ``(it takes a, b)``; words that name no option of the command stay as they are."""
    def option(word: str) -> str | None:
        name = option_name(parser, argv, word)
        return name if name.startswith("-") else None

    def assignment(match: re.Match[str]) -> str:
        name = option(match[1])
        if name is None:
            return match[0]
        if match[4] is not None:     # flag=True (or False, of a --no-x option): the flag itself
            return name
        return f"{name} {match[3] if match[3] is not None else ''}"

    detail = _outside_input(r"\ba solve with ([a-z][a-z_]*)=(?:'([^']*)'|([0-9]+)\b)", _solve_option, detail, argv)
    detail = _outside_input(r"\b([a-z][a-z_]*)=(?:(['\"])(.*?)\2|(True|False)\b)?", assignment, detail,
                            argv).rstrip()
    return re.sub(r"\(it takes ([a-z_, ]+)\)",
                  lambda m: "(it takes " + ", ".join(option(w) or w for w in m[1].split(", ")) + ")", detail)


def _solve_option(match: re.Match[str]) -> str:
    """``a solve with name='value'`` (a parameter of ``placement.solve`` that another command's message names)
    with the option of ``placement solve`` that sets it: ``a placement solve with --name value``; unchanged
    where ``solve`` has no such option."""
    name = option_name(build_parser(["solve"]), ["solve"], match[1])
    if not name.startswith("-"):
        return match[0]
    return f"a placement solve with {name} {match[2] if match[2] is not None else match[3]}"


def _options_for_parameters(text: str, parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """``text`` (a progress line of the library) with the library parameters it names that have an
    underscore (``max_ideals``, ``time_limit``) written as the command's options that set them."""
    def option(match: re.Match[str]) -> str:
        name = option_name(parser, argv, match[0])
        return name if name.startswith("-") else match[0]

    return _outside_input(r"\b[a-z]+(?:_[a-z]+)+\b", option, text, argv)


#: a quote that opens a literal: one that follows no letter or digit (as the apostrophe of "plan's" does)
_OPENING_QUOTE = re.compile(r"(?<!\w)(['\"])")


def _outside_input(pattern: str, replace: Callable[[re.Match[str]], str], text: str, argv: Sequence[str]) -> str:
    """``re.sub(pattern, replace, text)`` where a match begins outside what ``text`` quotes of the input
    (:func:`_input_spans`): a file or node named ``memory=16GiB`` or ``max_ideals`` is named as it is written."""
    spans = _input_spans(text, argv)
    return re.sub(pattern, lambda m: m[0] if any(a <= m.start() < b for a, b in spans) else replace(m), text)


def _input_spans(text: str, argv: Sequence[str]) -> list[tuple[int, int]]:
    """The parts of ``text`` that name the input as it is written: quoted literals (``'a'``, ``"it's"``, as
    ``repr`` and JSON write names; an apostrophe after a letter opens none), and the words of ``argv`` (files,
    values of options) that hold more than letters, digits and hyphens (``runs/memory=16GiB/a.json``)."""
    spans = []
    start = 0
    while (match := _OPENING_QUOTE.search(text, start)) is not None:
        opening = match.start()
        closing = re.compile(rf"(?:\\.|[^\\{match[1]}]|{match[1]}(?=\w))*{match[1]}(?!\w)")
        end = closing.match(text, opening + 1)
        if end is None:
            start = opening + 1
            continue
        spans.append((opening, end.end()))
        start = end.end()
    for word in argv:
        if word.startswith("-"):
            word = word.split("=", 1)[1] if word.startswith("--") and "=" in word else ""
        if word and not re.fullmatch(r"[A-Za-z0-9-]+", word):
            spans += [(m.start(), m.end()) for m in re.finditer(re.escape(word), text)]
    return spans


@contextlib.contextmanager
def _silenced(quiet: bool) -> Iterator[None]:
    """Within the block, where ``quiet``, the warnings of the libraries the command uses are not shown: neither
    Python's warnings nor those of their loggers (matplotlib's "created a temporary cache directory", where its
    configuration folder cannot be written). The command's own, which it prints, it leaves out itself."""
    if not quiet:
        yield
        return
    import logging
    import warnings

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status instead of exiting."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(argv)
    except KeyboardInterrupt:   # while it imports what the command's options need (numpy: half a second)
        print("error: interrupted", file=sys.stderr)
        return INTERRUPTED
    args = None
    try:
        args = parser.parse_args(argv)
        args.rename = lambda text: _options_for_parameters(_options_named(text, parser, argv), parser, argv)
        with _silenced(getattr(args, "quiet", False)):
            return args.handler(args)
    except SystemExit as exc:  # --help, --version
        return int(exc.code or 0)
    except UsageError as exc:
        print(f"error: {printable(unknown_options_hint(parser, argv, _message(exc, parser, argv, args)))}",
              file=sys.stderr)
        return 2
    except PlacementError as exc:
        print(f"error: {printable(_message(exc, parser, argv, args))}", file=sys.stderr)   # a file name's newline too
        return 2
    except MemoryError:   # what the library could not bound beforehand: one line, not a traceback
        print("error: out of memory: this machine cannot hold what the command needs (a coarser graph, fewer "
              "devices or micro-batches, or a lower limit takes less)", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:   # its own words where it has them ("interrupted before the DP found a plan")
        said = exc.args[0] if exc.args and str(exc.args[0]).startswith("interrupted") else "interrupted"
        print(f"error: {said}", file=sys.stderr)
        return INTERRUPTED


#: the exit status of a command whose output pipe closed before it finished (128 + SIGPIPE)
BROKEN_PIPE = 141


def _removed_folder() -> str:
    """Why a relative name cannot be resolved, where the current folder was removed after the shell entered it
    (its error, "No such file or directory", names no file); else ``""``."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return "the current folder no longer exists (removed after the shell entered it); change to one that does"
    return ""


def run(terminated: list[int]) -> None:
    """The command line of this process, run to its exit; ``terminated`` lists the signals that stopped it, as
    :func:`placement.cli.run`'s handler records them."""
    open_standard_descriptors()   # `2>&-`, `>&-`: the result and the status as with the stream open
    for stream in (sys.stdout, sys.stderr):  # names from an instance may hold text no encoding takes
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    sys.stdout = ReaderOutput(sys.stdout)
    sys.stderr = ReaderOutput(sys.stderr, diagnostics=True)   # `2>&1 | head`, `2>/dev/full`: no result lost
    status = None
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # output piped into a command that stopped reading (e.g. head)
        to_devnull(sys.stdout)
        status = BROKEN_PIPE if status is None else status   # where the output was not written through ReaderOutput
    except ImportError:   # numpy's compiled import raises an interrupt that reaches it as an ImportError
        if not terminated:
            raise
        print("error: interrupted", file=sys.stderr)
        status = INTERRUPTED
    except OSError as exc:   # a full disk or device behind the output, a log file that cannot be written
        to_devnull(sys.stdout)
        stopped = [number for number in terminated if number != signal.SIGINT]   # by SIGTERM or SIGHUP
        if stopped and exc.errno in (errno.EIO, errno.EPIPE):   # the terminal that closed (SIGHUP) takes no output
            status = INTERRUPTED
        else:
            print(f"error: {printable(str(_removed_folder() or exc.strerror or exc))}", file=sys.stderr)
            status = 2
    if status == INTERRUPTED and terminated:   # 143 for SIGTERM, 129 for SIGHUP: as the signal's default would
        status = 128 + terminated[0]
    # a search left running (after Ctrl-C, or past its time limit by a solver that cannot be stopped): torn down
    # by the interpreter's exit, OR-Tools aborted the process (SIGABRT), and waited for, the command ran on
    searching = sys.modules.get("placement.solvers.milp.interrupt")
    if searching is not None and searching.still_searching():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
