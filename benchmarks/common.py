"""What the benchmark scripts share: argument types that refuse nonsense (the command line's own), the
one-line refusal of a run that would measure nothing, could not write what it measured or needs a MILP
backend that cannot run here, and the description of the machine a timing was measured on."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NoReturn

from placement.cli.options import integer_at_least, positive_float, positive_int
from placement.errors import InvalidInstanceError, SolverUnavailableError
from placement.io.tarnawski import read_instance
from placement.jsonfile import strict_json
from placement.solvers.milp.backends import check_backend_available
from placement.whole_file import probe_writable

__all__ = ["integer_at_least", "positive_float", "positive_int", "refuse", "cannot_write", "milp_unavailable",
           "read_instances", "cpu_model", "machine", "merged_rows", "merged_and_counted", "said_merge",
           "kept_table", "write_json"]

CPUINFO = Path("/proc/cpuinfo")


def exit_with(main: Callable[[], int]) -> NoReturn:
    """End the process with the exit status ``main()`` returns; Ctrl-C (SIGINT) ends it with one line on standard
    error, ``error: interrupted``, and status 130, as it ends a ``placement`` command, where the traceback of wherever
    the interrupt fell was shown."""
    try:
        status = main()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        status = 130
    sys.exit(status)


def refuse(message: str) -> int:
    """Print ``error: message`` on standard error and return the exit status of a refused run, 2."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def cannot_write(files: Mapping[str, str | Path | None], folders: Mapping[str, str | Path | None] | None = None,
                 *, parents: bool = True) -> str | None:
    """Check, before any work, that a run's outputs can be written: the refusal ``OPTION PATH: cannot write:
    REASON`` (the OS's reason) of the first that cannot, or None. ``files``, then ``folders``, map each output's
    option to its path (None: this run writes nothing there). A file must take writing in place
    (:func:`placement.whole_file.probe_writable`); a folder must be one, or be creatable with its parents, and
    take a new file. ``parents``: the script makes a file's missing folders before writing it, so they need only
    be creatable. Folders made for the check are removed again: every output is left as it was."""
    outputs = [(option, path, False) for option, path in files.items()]
    outputs += [(option, path, True) for option, path in (folders or {}).items()]
    for option, path, folder in outputs:
        if path is None:
            continue
        try:
            _probe(Path(path), folder, parents)
        except OSError as exc:
            return f"{option} {path}: cannot write: {exc.strerror or exc}"
    return None


def milp_unavailable(backend: str = "cp-sat") -> str | None:
    """Why the MILP backend ``backend`` (the library's default, CP-SAT) cannot run here, in the library's one
    line (the backend, why, and what to install), or None where it can: checked before a run whose
    measurements need it."""
    try:
        check_backend_available(backend)
    except SolverUnavailableError as exc:
        return str(exc)
    return None


def read_instances(files: Iterable[Path]) -> tuple[dict, str | None]:
    """Every instance file of ``files`` read and validated, before a run measures anything: the instances by
    path, and None, or, at the first file that is no instance, nothing and the library's reason (which names
    the file) for the one-line refusal, where the run would have stopped there with a traceback."""
    try:
        return {path: read_instance(path) for path in files}, None
    except InvalidInstanceError as exc:
        return {}, str(exc)


def _probe(path: Path, folder: bool, parents: bool) -> None:
    """Raise :class:`OSError` as writing the file or filling the folder ``path`` would (creating the folders
    that are missing where ``folder`` or ``parents``), removing the folders it made for the probe."""
    missing = []
    where = path if folder else path.parent
    while (folder or parents) and not os.path.lexists(where) and where != where.parent:
        missing.append(where)
        where = where.parent
    made = []
    try:
        for name in reversed(missing):   # outermost first, as mkdir(parents=True) does
            os.mkdir(name)
            made.append(name)
        if not folder:
            probe_writable(path, replaced=False)
        elif not path.is_dir():
            raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))   # as mkdir(exist_ok=True) says
        else:
            with tempfile.TemporaryFile(dir=path):   # a real file: root passes os.access where writing fails
                pass
    finally:
        for name in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(name)


def cpu_model(cpuinfo: Path = CPUINFO) -> str | None:
    """The CPU's model name as ``/proc/cpuinfo`` gives it, or None where that file does not say."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return value.strip()
    return None


def machine() -> dict:
    """What the numbers were measured on: Python, CPU count, platform, processor, CPU model and load average."""
    return {"python": sys.version.split()[0], "cpus": os.cpu_count(), "machine": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpu_model": cpu_model(),
            "load_average": os.getloadavg()}


def write_json(path: Path, document: Any) -> None:
    """Write ``document`` to ``path`` as strict JSON, indented: a bound that is not finite (an
    infeasible setting's) as null, which every JSON reader takes, not Python's ``Infinity``."""
    path.write_text(json.dumps(strict_json(document), indent=1, allow_nan=False) + "\n")


def merged_rows(path: Path, rows: list[dict], key: tuple[str, ...],
                settings: Mapping[str, Any], table: str | None = "rows",
                weak: Callable[[dict], bool] = lambda row: False, fields: tuple[str, ...] = ()) -> list[dict]:
    """The rows a results file holds after a run: those of the JSON file at ``path`` (its ``table``) that the
    run's ``rows`` do not replace (the same values of the fields ``key``), then the run's ``rows``. So a run
    of some of the instances or settings updates their rows and keeps the others. A run's row that is
    ``weak`` (measured nothing: a case refused) replaces none, and is kept only where the file holds no row of
    its case. A file that is absent, not JSON or holds no list of rows keeps nothing (a note on standard
    error says so where it exists). A row of the file without one of the fields ``key`` and ``fields`` is a
    row of another table (another benchmark's file, a hand edit) and is not kept either (a note says so).
    ``table`` None: the file is the list of rows itself.

    ``settings`` are what the file records of the run at its top level (the machine, threads, ...), which
    describe the run's rows only: each row takes them as its ``run`` (rows kept from the file take the
    file's own, where they have none yet); with no ``settings`` (a file that records none) no row takes a
    ``run``."""
    return merged_and_counted(path, rows, key, settings, table, weak, fields)[0]


def merged_and_counted(path: Path, rows: list[dict], key: tuple[str, ...], settings: Mapping[str, Any],
                       table: str | None = "rows", weak: Callable[[dict], bool] = lambda row: False,
                       fields: tuple[str, ...] = ()) -> tuple[list[dict], int, int]:
    """The rows of :func:`merged_rows`, how many of them are the file's rows kept, and how many of the file's
    rows the run's replaced."""
    document, kept = _held_rows(path, table)
    needed = (*key, *fields)
    foreign = [row for row in kept if not all(k in row for k in needed)]
    if foreign:
        missing = next(k for k in needed if k not in foreign[0])
        print(f"note: {path}: {len(foreign)} of its {table or 'rows'} lack a field of this table's rows (the first: "
              f"{missing!r}) and are not kept", file=sys.stderr)
        kept = [row for row in kept if all(k in row for k in needed)]

    def name(row: dict) -> str:
        return json.dumps([row.get(k) for k in key], sort_keys=True, default=str)

    def stamped(row: dict, run: Mapping[str, Any]) -> dict:
        return {**row, "run": row.get("run", dict(run))} if settings else dict(row)

    new = {name(row) for row in rows if not weak(row)}
    earlier = {k: document[k] for k in settings if k in document}
    held = len(kept)
    kept = [stamped(row, earlier) for row in kept if name(row) not in new]
    names = {name(row) for row in kept}
    merged = kept + [stamped(row, settings) for row in rows if not (weak(row) and name(row) in names)]
    return merged, len(kept), held - len(kept)


def _held_rows(path: Path, table: str | None) -> tuple[dict, list[dict]]:
    """The JSON document at ``path`` (empty where it is a list or unreadable) and its rows: the list ``table``
    of the document, or the document itself where ``table`` is None; none where the file is absent, or,
    with a note on standard error, where it is not JSON or holds no such list of objects."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        return {}, []
    except (OSError, ValueError):
        document = None
    kept = document if table is None else document.get(table) if isinstance(document, dict) else None
    if not isinstance(kept, list) or not all(isinstance(row, dict) for row in kept):
        print(f"note: {path} holds no {table or 'rows'} to keep; it is written with this run's rows only",
              file=sys.stderr)
        kept = []
    return document if isinstance(document, dict) else {}, kept


def said_merge(path: Path, run: int, kept: int, replaced: int, table: str | None = None) -> str:
    """The line that says what a results file holds after a run merged its rows into it: ``wrote PATH: R of
    this run's rows, K of the file's kept, P replaced`` (``wrote PATH: TABLE: ...`` of its list ``table``)."""
    where = f"{path}" if table is None else f"{path}: {table}"
    return f"wrote {where}: {run} of this run's rows, {kept} of the file's kept, {replaced} replaced"


def kept_table(path: Path, key: str) -> list[dict]:
    """The rows of the table ``key`` of the JSON file at ``path`` (none where the file is absent, not JSON or
    holds no such list), each with the machine the file records as its ``run`` where it has none yet: what a
    run that skips that table (its option, or its instances absent) keeps instead of writing it empty."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    rows = document.get(key) if isinstance(document, dict) else None
    if not isinstance(rows, list):
        return []
    earlier = {"machine": document.get("machine")}
    return [{**row, "run": row.get("run", earlier)} for row in rows if isinstance(row, dict)]
