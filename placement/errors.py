"""Typed exceptions of the package.

Every error the package raises on purpose is a :class:`PlacementError`. Errors caused by
bad input are also :class:`ValueError`: a malformed or inconsistent instance
(:class:`InvalidInstanceError`), a malformed plan (:class:`InvalidPlanError`), or a
parameter value that makes no sense (:class:`InvalidParameterError`, which names the
parameter). :class:`SolverUnavailableError` says that a solver or an optional package is
not installed here; :class:`LimitExceededError` that a limit the caller set (or a default
one, such as the number of ideals the DP enumerates) would be exceeded. :class:`Interrupted` is no
error but a :class:`KeyboardInterrupt` that carries the plan a search had found when Ctrl-C stopped it.
:class:`LogWriteWarning` is a warning: the solver's log could not be written once the search had begun, and the
result was kept.

Messages speak of the library's parameters (``time_limit``, ``contiguity``), never of
command-line flags; the command line translates parameter names into its options.
"""

from __future__ import annotations


class PlacementError(Exception):
    """Base class of every error the package raises on purpose."""


class InvalidInstanceError(PlacementError, ValueError):
    """An instance (or a file holding one) is malformed or inconsistent."""


class InvalidPlanError(PlacementError, ValueError):
    """A plan (or a plan file) is malformed; unknown nodes in a well-formed plan are violations, not this."""


class InvalidParameterError(PlacementError, ValueError):
    """A parameter value, or a combination of parameters, that the called function cannot take.

    ``parameter`` is the parameter's name as the function spells it and ``detail`` the rest of
    the message: ``str(error)`` is ``f"{parameter} {detail}"``, e.g. ``contiguity must be one of
    'stages', 'sets', 'none', not 'nonee'``. Front ends that call the parameter something else
    (a command-line option) print their own name before ``detail``.
    """

    def __init__(self, parameter: str, detail: str) -> None:
        super().__init__(f"{parameter} {detail}")
        self.parameter = parameter
        self.detail = detail

    def __reduce__(self) -> tuple:
        # rebuilt from both parts: pickle (a process pool handing the error back) and copy call the
        # class with ``args``, which hold the joined message only
        return type(self), (self.parameter, self.detail), self.__dict__


class LogWriteWarning(UserWarning):
    """The solver's log (the ``log`` parameter of :func:`placement.solve`) could not be written after the search
    had begun (a disk that filled during a long solve): the log is incomplete, and the solve's result is returned
    as if it had been written. A log that cannot be written at the start is refused before any work
    (:class:`InvalidParameterError`)."""


def log_not_written(path: object, exc: OSError) -> LogWriteWarning:
    """The warning that the solver's log ``path`` could not be written after the search began, with ``exc``."""
    return LogWriteWarning(f"log names a file that cannot be written: {path}: {exc.strerror or exc}; the solver's "
                           "log there is incomplete, and the result is kept")


def unwritable(path: object, exc: OSError, parameter: str = "path") -> InvalidParameterError:
    """The error about ``parameter``, the file ``path``, when writing it failed with ``exc``."""
    return InvalidParameterError(parameter, f"names a file that cannot be written: {path}: {exc.strerror}")


class SolverUnavailableError(PlacementError):
    """A solver backend, or an optional package a method needs, cannot be used here.

    ``parameter`` names the parameter whose limit made the method need it, where one did (``max_ideals``:
    method ``auto`` takes the MILP where the DP refuses a graph of more ideals), as the message says.
    """

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class LimitExceededError(PlacementError):
    """A limit (ideal count, model size, memory) would be exceeded before any solving.

    ``parameter`` names the parameter that sets the limit, where one does (``max_ideals``).
    """

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped a MILP search or the DP.

    ``result`` is the :class:`placement.Result` of the best plan found until then (the solver's or the
    starting plan; the DP's upper bound's, from its chain DP), verified as every Result is, with the
    search's bound (the DP's: the instance's lower bound): status ``feasible``, or ``optimal`` where the
    plan meets a proven bound; ``no_solution`` where a MILP search had none. It is a
    :class:`KeyboardInterrupt`, so code that does not look for it stops as before; a second Ctrl-C
    while the solver winds down, one before the DP holds a plan, or one outside a MILP search and the DP,
    raises a plain ``KeyboardInterrupt``.
    """

    def __init__(self, result: object) -> None:
        super().__init__("interrupted")
        self.result = result
