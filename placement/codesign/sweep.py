"""Design studies: sweeps of the co-design over models × chips × budgets × grids on a Dask cluster.

A sweep specification (:class:`SweepSpec`, or a JSON file read by :func:`load_spec`) names
lists of models, chip counts ``k``, budgets ``(area mm², power W)`` per chip, grids,
objectives and design modes (homogeneous or one design per stage); a *configuration* is one
element of their Cartesian product (:func:`configurations`). :func:`run_sweep` runs every
configuration that the results file does not hold yet as one Dask task
(:func:`run_configuration`: the exact co-design and the baselines), on a
``distributed.LocalCluster`` by default or on the cluster at ``scheduler``, and appends each
record to the JSON Lines file as soon as it arrives, flushed to disk. The models and grids are
read where the sweep starts, once each, and what was read travels to the workers with the tasks
(scattered to the cluster): a worker may run in another folder or on another machine, where the
configuration's paths name nothing. A sweep that was
interrupted (a killed process, a lost cluster) is resumed by running it again: records are
matched to configurations by their ``id`` (:func:`configuration_id`, a digest of the
configuration), the configurations already there are skipped, and a last line cut short by the
interruption is dropped first. A file whose records of the same configurations were made with other
baselines settings (:func:`baseline_settings`), or from model or grid files whose bytes have changed since
(:func:`input_digests`), is refused: skipped, those records would stand for baselines the sweep did not ask
for, or for the files as they were. Every DP of a sweep runs at its ``max_ideals`` (the most ideals it
enumerates); a record made at another limit is kept where it holds a result (a proven optimum, or no design
within the budgets, is the same at every limit under which the DP runs), and run again where it is an
``error`` (the limit's refusal, which the error asks to raise): the new record is appended, and the last
record of an ``id`` replaces the earlier ones (:func:`read_records`), so that the file is only ever
appended to. A sweep holds a lock on its results file while it runs: a second
sweep started on the same file (by mistake, or from another shell) waits for the first to end,
then skips what it wrote, so that no record is written twice and no line is cut into another.

Record fields (one JSON object per line): ``id``, ``config`` (the configuration), ``status``
(the exact method's: ``optimal``, or ``infeasible`` with ``error`` saying why, e.g. no design of
the grid fits the budgets; ``error`` when the configuration cannot be run at all, e.g. an unknown
model), ``value`` (the objective: batches per second, or per second per watt), ``throughput``
(batches per second), ``time_per_input_ms``, ``power_w`` (summed TDP of the chips used),
``designs`` (per stage: the template parameters, ``label``, ``area_mm2`` and ``tdp_w``),
``area_mm2`` and ``tdp_w`` (the largest over the stages), ``evaluated``, ``pruned``,
``runtime_s``, and ``baselines``: per baseline its ``value``, ``throughput``, ``ratio`` (its
value over the optimum's: at most 1), ``runtime_s``, ``evaluated`` and ``designs`` (labels), or
``error`` when it cannot run (the TPU-like design over the budgets); ``settings``, the baselines
settings the record was made with (:func:`baseline_settings`) and its ``max_ideals`` (a record without it was
made at the default, 200,000); ``inputs``, the digests of the model and grid files it was made from
(:func:`input_digests`).

Dask is imported only here and only when a sweep runs (the ``sweep`` extra).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from placement.errors import (InvalidInstanceError, InvalidParameterError, PlacementError, SolverUnavailableError,
                              unwritable)
from placement.jsonfile import (RepeatedKey, json_type_name, json_value_text, load_json, not_utf8, read_bytes,
                                refuse_non_finite, strict_json, unique_keys)
from placement.problem.instance import is_flag
from placement.sigint import held_interrupts
from placement.solvers.ideals import DEFAULT_MAX_IDEALS
from placement import parameters
from placement.whole_file import text_path
from placement.wording import rounded_duration

#: the keys of a configuration, in the order records show them
CONFIG_KEYS = ("model", "chips", "area_mm2", "power_w", "grid", "objective", "homogeneous")
#: the keys of a sweep specification file
SPEC_KEYS = ("models", "chips", "budgets", "grids", "objectives", "homogeneous", "baselines", "random_budget", "seed",
             "max_ideals")


@parameters.keywords_checked
@dataclass(frozen=True)
class SweepSpec:
    """The lists a sweep multiplies out, and the baselines each configuration also runs.

    ``budgets`` are ``(area_mm2, power_w)`` pairs, per chip; ``grids`` are grid files (or
    ``None`` for the default grid); ``random_budget`` and ``seed`` set the random-search baseline;
    ``max_ideals`` is the most ideals each DP enumerates, of the exact method and of the baselines (the default of
    :func:`placement.solve`). A model or grid given as a path object (:class:`os.PathLike`) is held as its name
    (:func:`os.fspath`).
    """

    models: tuple[str, ...]
    chips: tuple[int, ...]
    budgets: tuple[tuple[float, float], ...]
    grids: tuple[str | None, ...] = (None,)
    objectives: tuple[str, ...] = ("throughput",)
    homogeneous: tuple[bool, ...] = (False,)
    baselines: tuple[str, ...] = ("wham", "random", "fixed")
    random_budget: int = 64
    seed: int = 0
    max_ideals: int = DEFAULT_MAX_IDEALS

    def __post_init__(self) -> None:
        for name in ("models", "chips", "budgets", "grids", "objectives", "homogeneous", "baselines"):
            value = getattr(self, name)
            if not isinstance(value, (tuple, list)):   # a string would be read as a list of its characters
                shown = json_value_text(value) if isinstance(value, (str, int, float, bool, type(None))) \
                    else type(value).__name__
                raise InvalidParameterError(name, f"must be a list (or tuple) of values, not {shown}")
        for name in ("models", "chips", "budgets", "grids", "objectives", "homogeneous"):
            if not getattr(self, name):
                raise InvalidParameterError(name, "must list at least one value")
        for name in ("models", "grids"):   # a path object as its name: a configuration records the name
            object.__setattr__(self, name, tuple(os.fspath(value) if isinstance(value, os.PathLike) else value
                                                 for value in getattr(self, name)))
        for name, allowed in (("models", (str,)), ("grids", (str, type(None)))):
            for value in getattr(self, name):
                if not isinstance(value, allowed):
                    raise InvalidParameterError(name, f"must list file paths{' (or null)' * (name == 'grids')}, "
                                                      f"not {_as_written(value)}")
        for k in self.chips:
            parameters.integer("chips", k, smallest=1, show=_as_written)
        for budget in self.budgets:
            if not (isinstance(budget, (tuple, list)) and len(budget) == 2):
                shown = json.dumps(list(budget), default=repr) if isinstance(budget, (tuple, list)) else \
                    json_value_text(budget)
                raise InvalidParameterError("budgets", f"must be [area_mm2, power_w] pairs, not {shown}")
            try:
                parameters.number("area_mm2", budget[0], positive=True)
                parameters.number("power_w", budget[1], positive=True)
            except InvalidParameterError:   # named as the spec names it, with the budget
                raise InvalidParameterError("budgets", f"must be [area_mm2, power_w] pairs of finite numbers > 0, "
                                                       f"not {json.dumps(list(budget), default=repr)}") from None
        for objective in self.objectives:
            parameters.one_of("objectives", objective, ("throughput", "perf-per-watt"), show=_as_written)
        for flag in self.homogeneous:
            if not is_flag(flag):   # named as a spec file writes them
                raise InvalidParameterError("homogeneous", f"must hold true or false, not {json_value_text(flag)}")
        for baseline in self.baselines:
            parameters.one_of("baselines", baseline, ("wham", "random", "fixed"), show=_as_written)
        parameters.integer("random_budget", self.random_budget, smallest=1, show=_as_written)
        parameters.integer("seed", self.seed, largest=parameters.MAX_SEED, show=_as_written)
        parameters.integer("max_ideals", self.max_ideals, smallest=1, show=_as_written)   # as solve checks it

    @property
    def size(self) -> int:
        """The number of configurations."""
        return (len(self.models) * len(self.chips) * len(self.budgets) * len(self.grids) * len(self.objectives)
                * len(self.homogeneous))


def _as_written(value: Any) -> str:
    """A value of a specification as a sweep file writes it (``true``, ``null``, ``NaN``, an array by its type),
    as every check of :class:`SweepSpec` names it; a huge integer cut short."""
    return parameters.shown(value) if isinstance(value, int) and not isinstance(value, bool) else \
        json_value_text(value)


def load_spec(path: str | Path) -> SweepSpec:
    """The sweep specification in the JSON file at ``path``: an object with the fields of
    :class:`SweepSpec` (``budgets`` as ``[[area_mm2, power_w], ...]``); relative grid and model
    paths are taken relative to the current directory. A file that is not such an object raises
    :class:`InvalidInstanceError` whose message starts with ``path``."""
    data = load_json(path, InvalidInstanceError)
    if not isinstance(data, dict):
        raise InvalidInstanceError(f"{path}: a sweep specification is a JSON object with the keys "
                                   f"{', '.join(SPEC_KEYS)}")
    from placement.loading import design_document, other_document

    other = "a model file (or an instance)" if "nodes" in data else other_document(data)
    if not other and design_document(data) != "a sweep specification":   # a design grid or a co-design result
        other = design_document(data)
    if other:
        raise InvalidInstanceError(f"{path}: the document is {other}, not a sweep specification, which has the "
                                   "lists models, chips and budgets")
    unknown = sorted(set(data) - set(SPEC_KEYS))
    if unknown:
        raise InvalidInstanceError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(SPEC_KEYS)})")
    missing = [key for key in ("models", "chips", "budgets") if key not in data]
    if missing:
        raise InvalidInstanceError(f"{path}: missing key {missing[0]!r}")
    fields: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("random_budget", "seed", "max_ideals"):
            fields[key] = _whole(value)
        elif not isinstance(value, list):
            raise InvalidInstanceError(f"{path}: {key} must be a list, not {json_value_text(value)}")
        else:
            fields[key] = tuple(tuple(v) if key == "budgets" and isinstance(v, list)
                                else _whole(v) if key == "chips" else v for v in value)
    try:
        return SweepSpec(**fields)
    except InvalidParameterError as exc:
        raise InvalidInstanceError(f"{path}: {exc}") from None


def _whole(value: Any) -> Any:
    """A count a sweep file writes as a whole float (``2.0``) as that integer, as instance and plan files read
    one (:func:`placement.io.plans.whole_number`); any other value as it is, for :class:`SweepSpec` to check."""
    from placement.io.plans import whole_number

    count = whole_number(value)
    return value if count is None else count


def configurations(spec: SweepSpec) -> list[dict[str, Any]]:
    """Every configuration of ``spec``, in a fixed order (models outermost, design modes innermost)."""
    return [dict(zip(CONFIG_KEYS, (model, k, float(area), float(power), grid, objective, homogeneous)))
            for model, k, (area, power), grid, objective, homogeneous
            in itertools.product(spec.models, spec.chips, spec.budgets, spec.grids, spec.objectives,
                                 spec.homogeneous)]


#: how every record line begins (its ``id`` first, compact separators: :func:`append_record`)
RECORD_START = '{"id":"'


def configuration_id(config: dict[str, Any]) -> str:
    """A digest of ``config`` (its canonical JSON): the same configuration always has the same id."""
    text = json.dumps(strict_json(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def file_digest(path: str | os.PathLike) -> str:
    """A digest of the bytes of the file at ``path``: the first 16 hex digits of their SHA-256."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def input_digests(config: dict[str, Any]) -> dict[str, str]:
    """What ``config`` reads besides its settings, by the bytes of its files: ``model`` and ``grid``, the
    :func:`file_digest` of the model file and of the grid file it names. A generated model and the default grid
    (``None``), which the package makes, are no file and have none, nor has a file that cannot be read (the
    sweep refuses it, or records its error, where it reads it)."""
    digests = {}
    for name in ("model", "grid"):
        path = config[name]
        if isinstance(path, str) and (name == "grid" or _is_file(path)):
            try:
                digests[name] = file_digest(path)
            except OSError:
                continue
    return digests


def baseline_settings(baselines: Iterable[str], random_budget: int, seed: int) -> dict[str, Any]:
    """What decides the baselines of a record besides its configuration: the ``baselines`` run (sorted)
    and, where the random search is one of them, its ``random_budget`` and ``seed``."""
    settings: dict[str, Any] = {"baselines": sorted(set(baselines))}
    if "random" in settings["baselines"]:
        settings.update(random_budget=random_budget, seed=seed)
    return settings


def record_settings(item: dict[str, Any]) -> dict[str, Any]:
    """The ``settings`` of the record of the task ``item``: its :func:`baseline_settings` and the ``max_ideals``
    each of its DPs ran at."""
    return {**baseline_settings(item["baselines"], item["random_budget"], item["seed"]),
            "max_ideals": item["max_ideals"]}


def _made_with(settings: Any) -> tuple[Any, int | None]:
    """A record's ``settings`` apart: its baselines settings, and the ``max_ideals`` it was made at (the default
    where they name none: made before records kept it). The limit is ``None`` where the record's is no positive
    integer (edited by hand), and the baselines settings are then the whole ``settings``, to be shown as they are."""
    if not (isinstance(settings, dict) and "max_ideals" in settings):
        return settings, DEFAULT_MAX_IDEALS
    limit = settings["max_ideals"]
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        return settings, None
    return {key: value for key, value in settings.items() if key != "max_ideals"}, limit


def _settings_text(settings: Any) -> str:
    """``settings`` (:func:`baseline_settings`) as a message shows them; a record's settings that are not what a
    sweep writes for their baselines (no object, baselines that are no array of names, other fields: edited by
    hand) as their JSON text, which shows how they differ."""
    names = settings.get("baselines") if isinstance(settings, dict) else None
    if not (isinstance(names, list) and all(isinstance(name, str) for name in names)
            and settings == baseline_settings(names, settings.get("random_budget"), settings.get("seed"))):
        return f"settings {json.dumps(settings, ensure_ascii=False)}"
    text = "baselines " + (", ".join(names) or "none")
    if "seed" in settings:
        text += f", random_budget {settings.get('random_budget')}, seed {settings['seed']}"
    return text


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of the JSON Lines file at ``path`` (none when it does not exist).

    A path that is no regular file (a folder, a pipe, a device), or that cannot be looked up (a name too long),
    raises :class:`InvalidParameterError`.
    One record per ``id``: where a configuration was run again (an error made at another ``max_ideals``), its
    last record, which replaces the earlier ones, at the place of the first.
    A last line without its newline (a write cut short by an interruption: the start of a record,
    which begins ``{"id":"``) is ignored; any other line that is not a JSON object with an ``id``, that names
    a key twice in one object or holds a number that is not finite (records are written without either), or a
    last line that is no record's start, raises :class:`InvalidParameterError` (parameter ``out``)
    naming the line (the run cuts a record cut short off the file, and nothing else).
    """
    path = Path(text_path(path, "out"))
    try:
        exists, regular = path.exists(), path.is_file()
    except OSError as exc:   # a name too long for the file system: no file to read or to write
        raise InvalidParameterError("out", f"{path}: cannot be read: {exc.strerror}") from None
    if not exists:
        return []
    if not regular:   # a pipe or a device never gives the records back (a FIFO blocks the read)
        raise InvalidParameterError("out", f"{path}: is not a regular file; a sweep appends its records to a file "
                                           "and reads them back to resume")
    out_error = partial(InvalidParameterError, "out")
    data = read_bytes(path, out_error)  # type: ignore[arg-type]
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidParameterError("out", f"{path}: {not_utf8(exc)}") from None
    lines = text.split("\n")
    tail = lines.pop()  # the text after the last newline: empty, or a cut-short record
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, object_pairs_hook=unique_keys)
        except RepeatedKey as exc:
            raise InvalidParameterError("out", f"{path}: line {number}: the key {exc.args[0]!r} appears twice in one "
                                               "object; which one is meant is not clear") from None
        except (ValueError, RecursionError) as exc:  # malformed, nested too deep, an integer too long
            whole = _one_document(text) if number == 1 else None
            if whole:   # its first line, '{', was said to be no JSON
                raise InvalidParameterError("out", f"{path}: the file is {whole}, not sweep records (JSON Lines: a "
                                                   "record a line)") from None
            detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deep or a number too long"
            raise InvalidParameterError("out", f"{path}: line {number} is not JSON ({detail})") from None
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            whole = _document_kind(record) if len(lines) == 1 and not tail.strip() else None
            if whole:   # one document written on one line
                raise InvalidParameterError("out", f"{path}: the file is {whole}, not sweep records (JSON Lines: a "
                                                   "record a line)")
            raise InvalidParameterError("out", f"{path}: line {number} is not a sweep record (no id)")
        refuse_non_finite(record, f"{path}: line {number}", out_error)  # type: ignore[arg-type]
        records.append(record)
    if not (tail.startswith(RECORD_START) or RECORD_START.startswith(tail)):
        raise InvalidParameterError("out", f"{path}: line {len(lines) + 1} does not end in a newline and is no "
                                           "sweep record cut short: not a file of sweep records")
    return list({record["id"]: record for record in records}.values())


def _one_document(text: str) -> str | None:
    """What ``text`` is where it is one JSON document written over several lines (:func:`_document_kind`, or
    just one document); ``None`` where it is none."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return _document_kind(document) or "one JSON document"


def _document_kind(document: Any) -> str | None:
    """What another document of the package is, where its fields say (a plan, a specification, ...:
    :func:`placement.loading.document_kind`); else ``None``."""
    from placement.loading import document_kind

    return document_kind(document) if isinstance(document, dict) else None


def _hold(fh: Any, path: Path, quiet: bool) -> None:
    """Take the exclusive lock (``flock``) on ``fh``, the records' file ``path`` open, for as long as it stays
    open: another sweep writing the same file (another process, here or on a machine sharing a file system
    that takes locks) is waited for, which is said on standard error unless ``quiet``, and its records are
    then read as done, so that two sweeps never write the same record twice nor cut one another's lines.
    Where no lock can be had (no ``fcntl``, a file system that takes no locks), the sweep goes on without."""
    try:
        import fcntl
    except ImportError:   # not a POSIX system
        return
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:   # held by another sweep
        pass
    except OSError:   # no locks on this file system
        return
    if not quiet:
        print(f"{path}: another sweep is writing these records; waiting for it to end", file=sys.stderr, flush=True)
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
    except OSError:
        return


def _drop_partial_line(path: Path) -> None:
    """Cut the file at ``path`` after its last newline (a record whose write was interrupted)."""
    if not path.exists():
        return
    with open(path, "rb+") as fh:
        data = fh.read()
        if data and not data.endswith(b"\n"):
            fh.truncate(data.rfind(b"\n") + 1)


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one line to ``path`` and flush it to disk (the sweep's checkpoint)."""
    line = json.dumps(strict_json(record), separators=(",", ":"), allow_nan=False) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


class ProgressBar:
    """A one-line progress bar on standard error: done/total, elapsed time and the estimated rest.

    ``quiet`` prints nothing. On a terminal the line is redrawn in place (carriage return) and ended by
    :meth:`close`; elsewhere (a log file, a pipe) every state is a line of its own.
    """

    WIDTH = 30

    def __init__(self, total: int, done: int = 0, *, quiet: bool = False, stream: Any = None) -> None:
        self.total, self.done, self.quiet = total, done, quiet
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.in_place = bool(isatty and isatty())
        self.start, self.new = time.perf_counter(), 0
        self._draw()

    def update(self, n: int = 1) -> None:
        self.done += n
        self.new += n
        self._draw()

    def _draw(self) -> None:
        if self.quiet:
            return
        share = self.done / self.total if self.total else 1.0
        filled = int(round(self.WIDTH * share))
        elapsed = time.perf_counter() - self.start
        rest = elapsed / self.new * (self.total - self.done) if self.new else math.nan
        eta = f", about {rounded_duration(rest)} left" if math.isfinite(rest) and self.done < self.total else ""
        line = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total} configurations, " \
               f"{elapsed:.0f} s{eta}"
        self.stream.write(f"\r{line}   " if self.in_place else f"{line}\n")
        self.stream.flush()

    def close(self) -> None:
        if not self.quiet and self.in_place:
            self.stream.write("\n")
            self.stream.flush()


@dataclass(frozen=True)
class SweepSummary:
    """What :func:`run_sweep` did: configurations in the spec, already in the file, run now, and of
    those run now how many have no design within their budgets (``infeasible``: proven, an answer of the
    study) and how many could not be solved (``errors``: any other status than ``optimal``)."""

    total: int
    skipped: int
    ran: int
    errors: int
    out: str
    plots: tuple[str, ...] = ()
    infeasible: int = 0


#: seconds Dask may take to connect to a scheduler, and the most the whole handshake may take
CONNECT_S = 30
HANDSHAKE_S = 45


def connect(scheduler: str) -> Any:
    """A Dask client on the running cluster whose scheduler is at ``scheduler`` (Dask imported by the caller);
    :class:`InvalidParameterError` when it cannot be reached, the address cannot be read, or what answers
    is no Dask scheduler. Dask's own timeout covers the connection only: a service that accepts it and
    never answers held the client for good, and one that answers with other bytes made it read a length
    of exabytes; so the client is made in a thread given :data:`HANDSHAKE_S` seconds."""
    import threading

    from dask.distributed import Client

    made: dict[str, Any] = {}

    def make() -> None:
        try:
            made["client"] = Client(scheduler, timeout=f"{CONNECT_S}s")
        except (Exception, MemoryError) as exc:   # whatever a stranger's bytes make of the handshake
            made["error"] = exc

    worker = threading.Thread(target=make, name="dask-connect", daemon=True)
    worker.start()
    worker.join(HANDSHAKE_S)
    if "client" in made:
        return made["client"]
    if "error" in made:
        exc = made["error"]
        why = (str(exc) if isinstance(exc, (OSError, TimeoutError, ValueError))   # ValueError: an address Dask
               else f"what answers is no Dask scheduler ({type(exc).__name__})")    # cannot parse
    else:
        why = f"no Dask scheduler answered within {HANDSHAKE_S} s"
    raise InvalidParameterError("scheduler", f"cannot reach a Dask scheduler at {scheduler!r}: {why}")


def require_dask(need: str) -> None:
    """Raise :class:`SolverUnavailableError` (``need``, such as "sweeps need Dask", and the extra that installs
    it) where ``dask.distributed`` cannot be imported."""
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        raise SolverUnavailableError(f"{need}: pip install 'placement[sweep]'") from None


def _client(scheduler: str | None, workers: int | None, processes: bool) -> tuple[Any, Any]:
    """A Dask client on the cluster at ``scheduler``, or on a new local cluster (returned too, to close). Ctrl-C
    while the local cluster starts is held until it has started, then closes it and is raised: a cluster
    interrupted half made could not be closed (Dask's exit hook failed on its worker, with a traceback)."""
    require_dask("sweeps need Dask")
    from dask.distributed import Client, LocalCluster

    if scheduler is not None:
        return connect(scheduler), None
    cluster = client = None
    try:
        with held_interrupts():
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                                   dashboard_address=":0", silence_logs=logging.ERROR)
            client = Client(cluster)
    except BaseException:
        for made in (client, cluster):
            if made is not None:
                made.close()
        raise
    return client, cluster


def _done(spec: SweepSpec, out: Path) -> dict[str, dict[str, Any]]:
    """The records of ``out`` by ``id`` (:func:`read_records`: the last of each). A record of one of
    ``spec``'s configurations whose ``config`` is another configuration (one that its id is not the digest of,
    :func:`configuration_id`: edited by hand) is refused (:class:`InvalidParameterError` about ``out``): a run
    matches records to configurations by their id alone, and would keep it as the record of the configuration
    its id names."""
    records = read_records(out)
    wanted = {configuration_id(config): config for config in configurations(spec)}
    for record in records:
        config = wanted.get(record["id"])
        if config is None or "config" not in record:
            continue
        given = record["config"]
        digest = configuration_id(given) if isinstance(given, dict) else None
        if digest != record["id"]:
            got = f"digests to {digest}" if digest is not None else f"is no JSON object but {json_type_name(given)}"
            raise InvalidParameterError("out", f"{out}: the record of id {record['id']!r} ({config['model']} on "
                                               f"{config['chips']} chip{'s' * (config['chips'] != 1)}) holds another "
                                               f"configuration, whose 'config' {got}: a record edited by hand, which "
                                               "resuming would keep as the record of the configuration its id names")
    return {record["id"]: record for record in records}


def _to_run(spec: SweepSpec, done: dict[str, dict[str, Any]], settings: Any,
            inputs: dict[str, dict[str, str]]) -> tuple[list[dict[str, Any]], int]:
    """The tasks of ``spec``'s configurations to run, and the number of distinct configurations (a value listed
    twice in the sweep file makes one, run once): those that ``done`` (the records by ``id``) holds no record of,
    and those whose record is an ``error`` made at another ``max_ideals`` than ``spec``'s (the limit may have been
    what refused it; the new record replaces it). A record that is kept, made with other baselines ``settings``
    (:func:`baseline_settings`), or from a model or grid file whose bytes have changed since (its ``inputs``
    against ``inputs``, the :func:`input_digests` by ``id``), is refused (:class:`InvalidParameterError` about
    ``out``): resuming would keep it; one made before records kept their settings is taken (as made at the
    default ``max_ideals``), and one made before they kept their inputs is taken as it is."""
    todo = []
    distinct = set()
    for config in configurations(spec):
        ident = configuration_id(config)
        if ident in distinct:
            continue
        distinct.add(ident)
        record = done.get(ident)
        made, limit = _made_with(record.get("settings")) if record is not None else (None, None)
        of = f"a record of {config['model']} on {config['chips']} chip{'s' * (config['chips'] != 1)}"
        if record is None or limit not in (None, spec.max_ideals) and record.get("status") == "error":
            todo.append({"id": ident, "config": config, "baselines": list(spec.baselines),
                         "random_budget": spec.random_budget, "seed": spec.seed, "max_ideals": spec.max_ideals,
                         "inputs": inputs[ident]})
        elif made is not None and (limit is None or made != settings):
            raise InvalidParameterError("out", f"holds {of} made with {_settings_text(made)}, and this sweep asks "
                                               f"for {_settings_text(settings)}: resuming would keep that record; "
                                               "write to another file")
        elif isinstance(record.get("inputs"), dict) and record["inputs"] != inputs[ident]:
            name = next((name for name in ("model", "grid") if record["inputs"].get(name) != inputs[ident].get(name)
                         and config[name] is not None), "model")
            raise InvalidParameterError("out", f"holds {of} made from another version of the {name} file "
                                               f"{config[name]} (it has changed since): resuming would keep that "
                                               "record; write to another file")
    return todo, len(distinct)


def _check_run_options(scheduler: Any, plots: Any, task: Any, quiet: Any) -> None:
    """Refuse, before any work, a :func:`run_sweep` option of the wrong kind (:class:`InvalidParameterError`
    naming it): a ``scheduler`` that is no address, ``plots`` that is no folder path, a ``task`` that cannot be
    called, a ``quiet`` that is no flag."""
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler):
        raise InvalidParameterError("scheduler", f"must be a Dask scheduler address, not {scheduler!r}")
    if plots is not None:
        text_path(plots, "plots", "a folder path")
    if task is not None and not callable(task):
        raise InvalidParameterError("task", f"must be a function of one configuration or None, not "
                                            f"{type(task).__name__}")
    parameters.flag("quiet", quiet)


@parameters.keywords_checked
def run_sweep(spec: SweepSpec | str | Path, out: str | Path, *, scheduler: str | None = None,
              workers: int | None = None, processes: bool | None = None, quiet: bool = False,
              plots: str | Path | None = None,
              task: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> SweepSummary:
    """Run every configuration of ``spec`` (a :class:`SweepSpec`, or the path of a sweep file, read by
    :func:`load_spec`) not yet in the JSON Lines file ``out``, appending records.

    ``scheduler`` is the address of a running Dask scheduler (``tcp://host:8786``); without it a
    ``distributed.LocalCluster`` of ``workers`` worker processes (threads when ``processes`` is
    false; not given, ``None``: Dask's count of workers, processes) runs here and is closed at the end;
    ``workers`` and ``processes`` size that local cluster only, and are refused given with ``scheduler``,
    whatever their value. Every DP runs at ``spec.max_ideals``; resuming at another limit runs again the
    configurations whose record is an error (a changed limit does not make a configuration another one, with
    another ``id``: the records that hold results stand at every limit, and would be run again for nothing),
    and their new records replace those errors (:func:`read_records`). A progress bar goes to standard error unless
    ``quiet``. ``plots`` is a folder to write the plots of every record of ``out`` into
    (:func:`placement.codesign.plots.write_plots`). ``task`` replaces :func:`run_configuration`
    (it takes a configuration, with its baselines settings, ``max_ideals`` and the model and grid read here, and
    returns a record without ``id``).

    Every model and grid is read here before any cluster is reached (a worker may not see this
    machine's files): an unknown model or a grid that cannot be read raises
    :class:`InvalidParameterError` or :class:`InvalidInstanceError`; a model file that cannot be read
    as a model makes each of its configurations a record with status ``error``, as a configuration
    that cannot be solved does.

    The run holds an exclusive lock on ``out`` (``flock``) from before it reads the records done to its end:
    another sweep writing the same file is waited for (said on standard error unless ``quiet``), and the
    records it wrote are then skipped, so that each configuration's record is written once.
    """
    if isinstance(spec, (str, os.PathLike)):
        spec = load_spec(spec)
    elif not isinstance(spec, SweepSpec):
        raise InvalidParameterError("spec", f"must be a SweepSpec or the path of a sweep file, not "
                                            f"{type(spec).__name__}")
    out = Path(text_path(out, "out"))
    _check_run_options(scheduler, plots, task, quiet)
    parameters.integer("workers", workers, smallest=1, optional=True)
    if processes is not None:
        parameters.flag("processes", processes)
    for name, value in (("workers", workers), ("processes", processes)):
        if scheduler is not None and value is not None:   # given, whatever its value
            raise InvalidParameterError(name, "applies to the local cluster only; with a scheduler the sweep runs "
                                              "on the cluster at that address, whose workers are its own")
    plots_missing = None   # fail before hours of work when the plots cannot be drawn (below, with Dask's check)
    if plots is not None:
        from placement.codesign.plots import matplotlib_modules
        try:
            matplotlib_modules()
        except SolverUnavailableError as exc:
            plots_missing = exc
    from placement.codesign.grid import load_grid
    for model in spec.models:  # fail before starting a cluster: an unknown model, a bad grid file
        if not _known_model(model):
            raise InvalidParameterError("models", f"lists {_unknown_model(model)}")
    grids = {grid: load_grid(grid) for grid in dict.fromkeys(spec.grids)}   # read here, sent to the workers
    # before cutting anything: out may not be records
    done = _done(spec, out)
    settings = baseline_settings(spec.baselines, spec.random_budget, spec.seed)
    inputs = {configuration_id(config): input_digests(config) for config in configurations(spec)}
    # a record of other settings or inputs: refused now, not after waiting for another sweep
    if _to_run(spec, done, settings, inputs)[0]:
        try:
            require_dask("sweeps need Dask")   # before the records' file or its folders are made
        except SolverUnavailableError:
            if plots_missing is None:
                raise
            raise SolverUnavailableError("sweeps need Dask, and the sweep plots matplotlib: pip install "
                                         "'placement[sweep,plot]'") from None
    if plots_missing is not None:
        raise plots_missing
    try:   # fail before hours of work when the records or the plots cannot be written
        out.parent.mkdir(parents=True, exist_ok=True)
        held = open(out, "a", encoding="utf-8")   # kept open to the end: the lock is on it
    except FileExistsError:   # a folder on the way is a file
        raise InvalidParameterError("out", f"names a file in a folder that is a file: {out}") from None
    except OSError as exc:
        raise unwritable(out, exc, "out") from None
    with held:
        _hold(held, out, quiet)   # another sweep writing out: waited for, then what it wrote is skipped
        done = _done(spec, out)
        if plots is not None:
            try:
                Path(plots).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InvalidParameterError("plots", f"names a folder that cannot be written: {plots}: "
                                                     f"{exc.strerror}") from None
        _drop_partial_line(out)
        todo, total = _to_run(spec, done, settings, inputs)
        errors = infeasible = 0
        if todo:
            models = {model: _read_model(model) for model in dict.fromkeys(item["config"]["model"] for item in todo)}
            client, cluster = _client(scheduler, workers, True if processes is None else processes)
            bar = ProgressBar(total, total - len(todo), quiet=quiet)
            try:
                from dask.distributed import as_completed

                # each model and grid goes to the cluster once, and every task that runs it names it
                sent_models = dict(zip(models, client.scatter(list(models.values()), hash=False)))
                sent_grids = dict(zip(grids, client.scatter(list(grids.values()), hash=False)))
                futures = client.map(_run_task, todo, [task or run_configuration] * len(todo),
                                     [sent_models[item["config"]["model"]] for item in todo],
                                     [sent_grids[item["config"]["grid"]] for item in todo], pure=False)
                for future in as_completed(futures):
                    record = future.result()
                    infeasible += record.get("status") == "infeasible"
                    errors += record.get("status") not in ("optimal", "infeasible")
                    append_record(out, record)
                    bar.update()
            finally:
                bar.close()
                client.close()
                if cluster is not None:
                    cluster.close()
        written: tuple[str, ...] = ()
        if plots is not None:
            from placement.codesign.plots import write_plots
            written = tuple(str(p) for p in write_plots(read_records(out), plots))
        return SweepSummary(total=total, skipped=total - len(todo), ran=len(todo), errors=errors, out=str(out),
                            plots=written, infeasible=infeasible)


@dataclass(frozen=True)
class _Unreadable:
    """A model that could not be read where the sweep started: the message of the error, which each of its
    configurations records."""

    message: str


def _read_model(model: str) -> Any:
    """The :class:`~placement.codesign.workload.Workload` of the model a configuration names (:func:`sweep_model`),
    read here; :class:`_Unreadable` with the error's message when it is no model."""
    from placement.codesign.workload import load_workload

    try:
        return load_workload(sweep_model(model))
    except PlacementError as exc:
        return _Unreadable(str(exc))


def _run_task(item: dict[str, Any], task: Callable[[dict[str, Any]], dict[str, Any]], workload: Any,
              grid: Any) -> dict[str, Any]:
    """One configuration on a worker, with the ``workload`` and ``grid`` read where the sweep started (a
    worker reads no file): its record with its ``id`` first; a :class:`PlacementError` (the configuration
    cannot be solved) or an :class:`_Unreadable` model becomes a record with status ``error`` and the message."""
    start = time.perf_counter()
    try:
        if isinstance(workload, _Unreadable):
            raise InvalidInstanceError(workload.message)
        body = task({**item, "workload": workload, "grid": grid})
    except PlacementError as exc:
        body = {"config": item["config"], "status": "error", "error": str(exc),
                "runtime_s": time.perf_counter() - start}
    return {"id": item["id"], **body, "settings": record_settings(item), "inputs": item.get("inputs", {})}


def _known_model(model: str) -> bool:
    from placement.zoo.codesign_models import model_names
    return _is_file(model) or model in model_names()


def _is_file(model: str) -> bool:
    """Whether ``model`` names something on this machine (a name too long for the file system names nothing, and
    an empty one, which ``Path`` reads as the working directory, names nothing either)."""
    if not model:
        return False
    try:
        return Path(model).exists()
    except OSError:
        return False


def _unknown_model(model: str) -> str:
    """What is said of ``model``, neither a model file nor a generated model: a relative path (a name with a
    folder or a suffix) is read from the working directory, not the sweep file's folder, which is named."""
    from placement.zoo.codesign_models import model_names
    path = Path(model)
    relative = not path.is_absolute() and (path.suffix or len(path.parts) > 1)
    where = f" (a relative path is read from the working directory, {Path.cwd()})" if relative else ""
    return f"{model!r}, neither a model file{where} nor one of {', '.join(model_names())}"


def sweep_model(model: str) -> Any:
    """The model a configuration names: a model file's path, or a generated model of
    :func:`placement.zoo.codesign_models.model_names` (e.g. ``gnmt-training``) as a decoded model file."""
    from placement.codesign.template import LINK_BYTES_PER_S
    from placement.zoo.codesign_models import model_file

    if not _known_model(model):
        raise InvalidParameterError("model", f"is {_unknown_model(model)}")
    return model if _is_file(model) else model_file(model, LINK_BYTES_PER_S)


def run_configuration(item: dict[str, Any]) -> dict[str, Any]:
    """The record of one configuration: the exact co-design, then each baseline of ``item["baselines"]``
    on the same model, grid and budgets (see the module docstring for the fields), every DP at
    ``item["max_ideals"]`` (the default where the item has none). A baseline that
    cannot run (the TPU-like design over the budget) has ``error`` instead of a throughput.
    ``item["workload"]`` and ``item["grid"]``, where given (as :func:`run_sweep` gives them, read where
    the sweep started), are the model and the grid; without them, the configuration's are read here."""
    from placement.codesign import baselines
    from placement.codesign.exact import solve_exact
    from placement.codesign.grid import load_grid
    from placement.codesign.workload import load_workload

    config = item["config"]
    workload = item["workload"] if "workload" in item else load_workload(sweep_model(config["model"]))
    grid = item["grid"] if "grid" in item else load_grid(config["grid"])
    max_ideals = item.get("max_ideals", DEFAULT_MAX_IDEALS)
    common = {"grid": grid, "objective": config["objective"], "max_ideals": max_ideals}
    exact = solve_exact(workload, grid, config["chips"], config["area_mm2"], config["power_w"],
                        homogeneous=config["homogeneous"], objective=config["objective"], max_ideals=max_ideals)
    solved = exact.status == "optimal"
    record: dict[str, Any] = {
        "config": config, "status": exact.status, "value": exact.value if solved else None,
        "throughput": (1000.0 / exact.time_per_input_ms if exact.time_per_input_ms > 0 else math.inf)
        if solved else None,
        "time_per_input_ms": exact.time_per_input_ms if solved else None, "power_w": exact.power_w if solved else None,
        "designs": [d.as_dict() for d in exact.designs],
        "area_mm2": max((d.area_mm2 for d in exact.designs), default=None),
        "tdp_w": max((d.tdp_w for d in exact.designs), default=None),
        "evaluated": exact.evaluated, "pruned": exact.pruned, "runtime_s": exact.runtime_s, "baselines": {}}
    if exact.status != "optimal":
        record["error"] = exact.message or exact.status
        return record
    runs = {"wham": lambda: baselines.wham(workload, config["chips"], config["area_mm2"], config["power_w"],
                                           homogeneous=config["homogeneous"], **common),
            "random": lambda: baselines.random_search(workload, config["chips"], config["area_mm2"],
                                                      config["power_w"], homogeneous=config["homogeneous"],
                                                      budget=item["random_budget"], seed=item["seed"], **common),
            "fixed": lambda: baselines.fixed(workload, config["chips"], config["area_mm2"], config["power_w"],
                                             **common)}
    for name in item["baselines"]:
        try:
            found = runs[name]()
        except InvalidParameterError as exc:
            record["baselines"][name] = {"error": str(exc)}
            continue
        record["baselines"][name] = {
            "value": found.value, "throughput": found.throughput, "ratio": found.value / exact.value,
            "runtime_s": found.runtime_s, "evaluated": found.evaluated, "designs": [d.label for d in found.designs]}
    return record
