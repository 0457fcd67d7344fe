"""The interface a MILP formulation builds its model through, and what the backends share.

A formulation builds its model through :class:`Backend` only (0/1 variables, bounded numeric
variables, linear rows ``lo ≤ Σ a·x ≤ hi`` optionally enforced by a 0/1 literal, a linear
objective to minimise, hints) and reads the answer from a :class:`RawResult`.

Each backend class declares, as class-level data, its ``name``, its capabilities
(``integer_only``: it needs integer data; ``warm_start``: it accepts a starting solution;
``threads``: it honours a thread count; ``seed``: it takes a random seed), the Python package it
needs (``package``, as pip names it), an availability check (:meth:`Backend.availability`: ``None``
or why it cannot run here) and ``STATUS``, a map from the solver's own status names to our status
words.

The relative MIP gap is 0 unless a ``gap`` is given, so that a solver's ``OPTIMAL`` means
proven; the formulation still checks the bound against the verified objective before it says
``optimal``. Status words of :class:`RawResult` are those of
:class:`placement.solution.Status`: ``optimal`` only when the solver proved it, ``feasible``
when a limit stopped it with a solution, ``infeasible`` only when proven, ``no_solution`` when
it stopped without one, ``error`` otherwise; the driver's own ``skipped`` says it did not run
the backend, its starting plan meeting the instance's lower bound.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import re
import time
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from importlib import metadata
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

from placement.errors import log_not_written, unwritable

Terms = Sequence[tuple[float, Any]]

#: the status words a backend reports (the values of :class:`placement.solution.Status`)
STATUS_WORDS = ("optimal", "feasible", "infeasible", "no_solution", "error")

#: the capabilities every backend declares, as class attributes of the same names
CAPABILITIES = ("integer_only", "warm_start", "threads", "seed")

#: what installs every backend's package
INSTALL = "pip install 'placement[milp]'"
INSTALL_HINT = f"the MILP backends come with {INSTALL}"   # what makes a missing backend run


@dataclass(frozen=True)
class SolveOptions:
    """Solver settings, separate from the data: time limit (s, always set), relative gap at which
    the solver may stop (0: prove optimality), threads, random seed, and a file for the solver log."""

    time_limit: float
    gap: float = 0.0
    threads: int = 1
    seed: int = 0
    log_path: str | None = None
    #: called with (objective, bound, seconds) in model units for each improving solution, where the
    #: backend can report them (CP-SAT)
    on_solution: Callable[[float, float, float], None] | None = None
    #: ``time.perf_counter()`` by which the whole call (model, start, solve, verification) must end; the
    #: solver then gets the smaller of ``time_limit`` and what is left (:meth:`left`)
    deadline: float | None = None

    def left(self, reserve: float = 0.0) -> float:
        """Seconds the solver may run: ``time_limit``, cut to what is left before the deadline less
        ``reserve`` (for the work after the solver); 0 when nothing is left."""
        if self.deadline is None:
            return self.time_limit
        return max(0.0, min(self.time_limit, self.deadline - time.perf_counter() - reserve))


class OutOfTime(Exception):
    """The deadline passed while the model was being built (raised by :meth:`Backend.tick`)."""


#: rows added between two looks at the clock while a model is built
ROWS_PER_TICK = 512
#: seconds between the lines that say how far a model's build is (:meth:`Backend.start_build`)
BUILD_NEWS_S = 10.0


@dataclass
class RawResult:
    """What a backend reports, in model units: status word, objective, bound, values."""

    status: str
    objective: float | None = None
    bound: float | None = None
    value: Callable[[Any], float] = lambda var: math.nan
    wall_s: float = 0.0
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    ran: bool = True                # False: the solver was not started (the time limit had run out)
    stopped: bool = False           # True: its search was ended before it could return a plan (its process killed)
    interrupted: bool = False       # True: Ctrl-C ended the search (:class:`.interrupt.SearchInterrupted`)


#: Fraction of the time limit after which a backend's "infeasible" is not taken as a proof: CBC,
#: stopped by its limit inside its preprocessing, says "Cut generators found to be infeasible! …
#: Pre-processing says infeasible" and OR-Tools and PuLP both report that as INFEASIBLE (on a
#: feasible 40-node instance at a 50 ms limit, 3 runs in 5).
LIMIT_REACHED = 0.9


def limit_infeasible(name: str, wall: float) -> str:
    """The note for an infeasibility reported as the time limit ran out (see :data:`LIMIT_REACHED`)."""
    return f"{name} reported infeasible after {wall:.2f} s, as its time limit ran out: not a proof"


#: CBC's closing line: the CPU seconds it counts against its limit (through OR-Tools), and the wall seconds
_CBC_TOTAL_TIME = re.compile(r"Total time \(CPU seconds\):\s*([0-9.eE+-]+)")


#: CBC's own doubt about an infeasibility its preprocessing found
_CBC_TOLERANCE_DOUBT = "possible tolerance issue"


def cbc_limit_infeasible(raw: RawResult, log_text: str, time_limit: float, name: str) -> RawResult:
    """``raw``, or, when it is ``infeasible`` and CBC's log shows that its own clock (CPU seconds, which
    run faster than the wall clock with several threads) had reached :data:`LIMIT_REACHED` of the time
    limit, ``no_solution``: CBC cut short by its limit may call a feasible model infeasible. So too
    when its log doubts the infeasibility itself ("Postprocessed model is infeasible - possible
    tolerance issue"): it called a model with a plan of value 1 infeasible (sizes 1e-9 and 0.7, a
    bound of 0.7)."""
    if raw.status == "infeasible" and _CBC_TOLERANCE_DOUBT in log_text:
        raw.status = "no_solution"
        raw.message = "; ".join(m for m in (raw.message, f"{name} reported infeasible, but its log says "
                                            f"'{_CBC_TOLERANCE_DOUBT}': not a proof") if m)
        return raw
    found = _CBC_TOTAL_TIME.findall(log_text)
    if raw.status != "infeasible" or not found or float(found[-1]) < time_limit * LIMIT_REACHED:
        return raw
    raw.status = "no_solution"
    raw.message = "; ".join(m for m in (raw.message, limit_infeasible(name, float(found[-1])) + " (CBC's clock)") if m)
    return raw


#: What CBC's objective is multiplied by (its values and bounds are divided by it on the way back).
#: CBC analyses the objective of its preprocessed model and, when it concludes that every
#: objective value is a multiple of some step, prunes every node that cannot beat the incumbent by
#: a whole step. The analysis takes a continuous objective variable for integral whenever the
#: single row it appears in has ±1 coefficients on continuous variables and an integral right-hand
#: side, without asking whether those other variables are integral: ``min L`` with ``L ≥ F`` and
#: times in quarters gives a step of 1, and the optimum 0.5 is cut off by the incumbent 0.75, which
#: is then claimed optimal. The factor ``1 + 2⁻³⁰`` breaks the step: the analysis scales the
#: largest objective coefficient to between 10⁷ and 10⁸ and needs it within 10⁻⁸ of an integer,
#: which it then misses by 0.009 to 0.093 (our coefficients are small integers). The power of
#: two 2⁷ shrinks CBC's default cutoff increment (an absolute 10⁻⁵, which OR-Tools gives no way
#: to lower) to under 10⁻⁷ of our units, inside the 10⁻⁶ tolerance of a claim of optimality.
CBC_OBJECTIVE_SCALE = 2.0 ** 7 * (1.0 + 2.0 ** -30)

#: CBC's log line when its analysis raised the cutoff increment (see :data:`CBC_OBJECTIVE_SCALE`)
_CBC_INCREMENT = re.compile(r"Cutoff increment increased from\s+(\S+)\s+to\s+(\S+)")


def cbc_increment_raised(log_text: str) -> str:
    """A note when CBC's log says its objective analysis raised the cutoff increment (its claim of
    optimality and its bound then rest on that analysis and are not trusted), else ''."""
    found = _CBC_INCREMENT.findall(log_text)
    if not found:
        return ""
    return (f"CBC raised its cutoff increment to {found[-1][1]} (objective analysis); its optimality "
            "claim and bound are not trusted")


def distrust_cbc(raw: RawResult, log_text: str) -> RawResult:
    """``raw`` unchanged, or, when CBC's log shows the raised cutoff increment, with ``optimal``
    turned into ``feasible`` and the bound dropped (nodes were pruned that may hold better plans)."""
    note = cbc_increment_raised(log_text)
    if not note or raw.status not in ("optimal", "feasible"):
        return raw
    raw.status = "feasible"
    raw.bound = None
    raw.message = "; ".join(m for m in (raw.message, note) if m)
    raw.stats["cbc_increment_raised"] = True
    return raw


def append_log(path: str | None, text: str) -> None:
    """Add a run's solver log, written to a scratch file, to the user's log ``path`` (if any): the
    scratch file is what a backend reads back, since the user's may be no regular file (reading
    ``/dev/full`` back never ends). The search has run by now, and ``log`` was found writable before it
    began: a failed write (a disk that filled meanwhile) is a :class:`~placement.errors.LogWriteWarning`,
    and the run's result stands."""
    if path is None:
        return
    from placement.whole_file import appending

    try:
        with appending(path) as fh:
            fh.write(text)
    except OSError as exc:
        warn_log_not_written(path, exc)


def warn_log_not_written(path: str, exc: OSError, stacklevel: int = 3) -> None:
    """Warn (:class:`~placement.errors.LogWriteWarning`) that the solver's log ``path`` could not be written,
    with ``exc``, after the search began: its result is kept. The warning names the backend's line that wrote the
    log: ``stacklevel`` counts from this function (3: the caller of :func:`append_log`)."""
    warnings.warn(log_not_written(path, exc), stacklevel=stacklevel)


@contextlib.contextmanager
def search_log(path: str | None) -> Iterator[Callable[[str], None] | None]:
    """A function that appends text to the user's solver log ``path`` while a search runs (``None`` without a
    log). Opening the log raises the error about the ``log`` parameter, before the search; a write or the
    closing flush that fails afterwards (a disk that filled during the search) drops the rest of the log and,
    when the block ends, warns (:class:`~placement.errors.LogWriteWarning`): the search and its result go on. A
    log on standard output whose reader stopped reading (``| head``) ends with no warning, as standard output
    does."""
    if path is None:
        yield None
        return
    from placement.whole_file import appending

    opened = appending(path)
    try:
        fh = opened.__enter__()
    except OSError as exc:
        raise unwritable(path, exc, "log") from None
    failed: list[OSError] = []

    def write(text: str) -> None:
        if failed:
            return
        try:
            fh.write(text)
        except OSError as exc:
            failed.append(exc)

    try:
        yield write
    finally:
        try:
            opened.__exit__(None, None, None)
        except OSError as exc:
            failed.append(exc)
        if failed and not isinstance(failed[0], BrokenPipeError):   # named: the with block, past contextlib's exit
            warn_log_not_written(path, failed[0], stacklevel=4)


def from_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` comes, through its causes and contexts, from a ``KeyboardInterrupt``."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def package_version(distribution: str) -> str | None:
    """The installed version of a distribution (``"ortools"``), ``None`` when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


#: what makes a backend that needs a working directory run where the process's own has been removed
NO_DIRECTORY_HINT = "run it from a folder that exists"


def working_directory_problem() -> str | None:
    """Why a solver that works in the current directory cannot run (it was removed), else ``None``. CBC
    behind OR-Tools ends the whole process (``std::bad_alloc``) there, and PuLP cannot list its solvers."""
    try:
        os.getcwd()
    except OSError as exc:
        return f"the working directory cannot be read ({exc.strerror or exc}), and this solver needs one"
    return None


def unavailable_message(name: str, reason: str, hint: str = INSTALL_HINT) -> str:
    """The one-line message of a backend that cannot run here, with ``hint``: what would make it run."""
    return f"MILP backend {name!r} cannot run here: {reason}; {hint}"


def upper_side_only(lo: float) -> None:
    """Enforced rows take an upper side only."""
    if math.isfinite(lo):
        raise ValueError("enforced rows take an upper side only")


class Backend(ABC):
    """The interface a formulation talks to, and the data each backend declares about itself."""

    #: the name it is chosen by (``pulp:NAME`` instances set their own)
    name: str = ""
    #: every coefficient and bound must be an integer (the formulation scales its data first)
    integer_only: ClassVar[bool] = False
    #: :meth:`hint` gives the solver a starting solution (otherwise it returns why not)
    warm_start: ClassVar[bool] = True
    #: the solver runs with :attr:`SolveOptions.threads` threads
    threads: ClassVar[bool] = True
    #: the solver is given :attr:`SolveOptions.seed` (``placement.solve`` refuses a seed for one that is not)
    seed: ClassVar[bool] = True
    #: a starting plan's value bounds the objective by a row (:func:`placement.solvers.milp.driver.start_from`)
    cutoff_row: ClassVar[bool] = True
    #: the Python package it needs, as pip names it, and as people write it
    package: ClassVar[str] = ""
    package_label: ClassVar[str] = ""
    #: the solver's own status names → our status words
    STATUS: ClassVar[Mapping[str, str]] = {}
    #: relative gap between the proven bound and the verified objective under which ``optimal`` stands
    #: (CP-SAT: float noise of the evaluator; floating-point MIP solvers: their feasibility tolerances)
    optimality_tolerance: ClassVar[float] = 1e-6

    #: ``time.perf_counter()`` after which building the model stops (:meth:`tick`); ``None``: never
    deadline: float | None = None
    #: the seconds of the whole call the model is built in (its time limit; ``None``: none), which size
    #: work done while building, such as the packing bound's search, the same on every run
    time_limit: float | None = None
    #: put every row, enforced ones too, into the solver's LP relaxation where it leaves some out by
    #: default (CP-SAT: linearization level 2); set by a formulation whose proofs it speeds up
    full_relaxation: bool = False
    #: let the solver add its own cutting planes to the LP relaxation (CP-SAT: ``cut_level``); cleared by
    #: a formulation whose proofs go faster on the plain, cheaper LP
    solver_cuts: bool = True
    _ticks: int = 0
    _variable_ticks: int = 0
    _build_progress: Callable[[str], None] | None = None
    _build_said: float = 0.0

    def tick(self) -> None:
        """Count a row; every :data:`ROWS_PER_TICK` rows, raise :class:`OutOfTime` past :attr:`deadline`."""
        self._ticks += 1
        if self._ticks % ROWS_PER_TICK == 0:
            self.check_time()

    def tick_variable(self) -> None:
        """Count a variable; every :data:`ROWS_PER_TICK` of them, :meth:`check_time`."""
        self._variable_ticks += 1
        if self._variable_ticks % ROWS_PER_TICK == 0:
            self.check_time()

    def start_build(self, deadline: float | None, progress: Callable[[str], None] | None = None,
                    time_limit: float | None = None) -> None:
        """Build the model from here within ``deadline`` (:attr:`deadline`), saying on ``progress`` every
        :data:`BUILD_NEWS_S` seconds how many variables and rows it has (a model of 10^6 rows takes a
        minute to build); ``time_limit``: :attr:`time_limit`."""
        self.deadline = deadline
        self.time_limit = time_limit
        self._build_progress = progress
        self._build_said = time.perf_counter()

    def end_build(self) -> None:
        """The model is built: no deadline, no more news."""
        self.deadline = None
        self._build_progress = None

    def check_time(self) -> None:
        """Raise :class:`OutOfTime` past :attr:`deadline` (for work between rows that may take long), and
        say how far the build is where :meth:`start_build` was given a progress callback."""
        now = time.perf_counter()
        if self._build_progress is not None and now - self._build_said >= BUILD_NEWS_S:
            self._build_said = now
            self._build_progress(f"  building the model: {self._variable_ticks:,} variables, "
                                 f"{self._ticks:,} rows so far")
        if self.deadline is not None and now > self.deadline:
            raise OutOfTime(f"the time limit ran out while the {self.name} model was built "
                            f"({self._variable_ticks:,} variables, {self._ticks:,} rows)")

    @classmethod
    def capabilities(cls) -> dict[str, bool]:
        """The declared capabilities (:data:`CAPABILITIES`) by name."""
        return {key: bool(getattr(cls, key)) for key in CAPABILITIES}

    @classmethod
    @abstractmethod
    def availability(cls, argument: str | None = None) -> str | None:
        """``None`` when the backend (given ``argument``, the ``NAME`` of ``name:NAME``, where it takes
        one) can run here, otherwise why not (one line, with versions)."""

    @classmethod
    def detail(cls, argument: str | None = None) -> str:
        """What runs the backend here: its package and version."""
        return f"{cls.package_label} {package_version(cls.package)}"

    @classmethod
    def variants(cls) -> list[str]:
        """Arguments (``NAME`` of ``name:NAME``) this backend can run with here, beyond its default."""
        return []

    @classmethod
    def install_hint(cls, argument: str | None = None) -> str:
        """What would make the backend run where :meth:`availability` says it cannot."""
        return INSTALL_HINT

    @classmethod
    def import_problem(cls, module: str) -> str | None:
        """``None`` when ``module`` imports, otherwise why not. A Ctrl-C while it imports stays an interrupt:
        an extension module that an interrupt stops while it initialises raises ``ImportError``
        ("initialization failed") from the ``KeyboardInterrupt``, which read as a package that cannot be
        imported."""
        try:
            importlib.import_module(module)
        except ImportError as exc:
            if from_interrupt(exc):
                raise KeyboardInterrupt from None
            version = package_version(cls.package)
            if version is None:
                return f"{cls.package_label} is not installed"
            return f"{cls.package_label} {version} cannot be imported ({exc})"
        return None

    @classmethod
    def status_word(cls, solver_status: str, default: str = "error") -> str:
        """Our status word for the solver's status name (``default`` for a name :attr:`STATUS` lacks)."""
        return cls.STATUS.get(solver_status, default)

    @abstractmethod
    def bool_var(self, name: str, fixed: int | None = None) -> Any:
        """A 0/1 variable (fixed to ``fixed`` when given)."""

    @abstractmethod
    def num_var(self, ub: float, name: str) -> Any:
        """A numeric variable in ``[0, ub]`` (integer in integer-only backends)."""

    @abstractmethod
    def add(self, terms: Terms, lo: float = -math.inf, hi: float = math.inf, enforce: Any = None) -> None:
        """Row ``lo ≤ Σ a·x ≤ hi``; with ``enforce`` (a 0/1 variable) only when it is 1 (``hi`` side only)."""

    @abstractmethod
    def minimize(self, terms: Terms) -> None:
        """Minimise ``Σ a·x``."""

    @abstractmethod
    def hint(self, values: dict[Any, float]) -> str:
        """Give a starting solution; returns a note ('' when accepted)."""

    def build_stats(self) -> dict[str, Any]:
        """Figures about the model as built, reported whether or not it is solved."""
        return {}

    @abstractmethod
    def solve(self, options: SolveOptions) -> RawResult: ...

    def interrupt(self) -> bool:
        """Ask a :meth:`solve` running in another thread to stop now; whether the solver takes such a
        request (none by default)."""
        return False

    @property
    @abstractmethod
    def size(self) -> dict[str, int]:
        """Model size: ``variables``, ``binaries``, ``rows``."""


def big_m_row(coef: dict[Any, float], bounds: Callable[[Any], tuple[float, float]], hi: float,
              enforce: Any) -> tuple[dict[Any, float], float] | None:
    """``Σ a·x ≤ hi`` only when ``enforce`` = 1, as ``Σ a·x + M·enforce ≤ hi + M`` with ``M`` the largest
    excess the variable bounds allow; ``None`` when the row can never bind."""
    top = sum(a * (bounds(v)[1] if a > 0 else bounds(v)[0]) for v, a in coef.items())
    big_m = top - hi
    if big_m <= 0:
        return None
    coef = dict(coef)
    coef[enforce] = coef.get(enforce, 0.0) + big_m
    return coef, hi + big_m


class BigMBackend(Backend):
    """A floating-point MIP solver: continuous numeric variables, enforced rows as big-M rows with
    ``M`` computed from the variable bounds (:func:`big_m_row`). Subclasses key variables by
    :meth:`key` and write a row with :meth:`write_row`."""

    def __init__(self) -> None:
        self._bounds: dict[Any, tuple[float, float]] = {}
        self._binaries = 0
        self._rows = 0

    @property
    def size(self) -> dict[str, int]:
        return {"variables": len(self._bounds), "binaries": self._binaries, "rows": self._rows}

    def key(self, var: Any) -> Any:
        """What identifies ``var`` in a row's coefficients."""
        return var

    def declared(self, var: Any, lb: float, ub: float, binary: bool) -> Any:
        """Record a new variable's bounds; returns it."""
        self._bounds[self.key(var)] = (lb, ub)
        self._binaries += binary
        return var

    @abstractmethod
    def write_row(self, coef: dict[Any, float], lo: float, hi: float) -> None:
        """Add ``lo ≤ Σ coef·x ≤ hi`` (coefficients keyed by :meth:`key`) and count its rows."""

    def add(self, terms: Terms, lo: float = -math.inf, hi: float = math.inf, enforce: Any = None) -> None:
        self.tick()
        coef: dict[Any, float] = {}
        for a, v in terms:
            k = self.key(v)
            coef[k] = coef.get(k, 0.0) + a
        if enforce is not None:
            upper_side_only(lo)
            row = big_m_row(coef, self._bounds.__getitem__, hi, self.key(enforce))
            if row is None:
                return
            coef, hi = row
        self.write_row(coef, lo, hi)
