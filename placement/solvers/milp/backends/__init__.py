"""Solver backends for the MILP formulations: one small interface (:mod:`.base`), one module per solver.

The registry below maps each backend's name to its class (``"module:Class"``), imported on
first use: importing this package imports neither OR-Tools nor PuLP. A backend whose class
takes an argument is also chosen as ``name:ARGUMENT`` (``pulp:NAME``: any solver PuLP knows).

* ``cp-sat`` — native CP-SAT, integer data only (:mod:`.cpsat`);
* ``cbc``, ``scip``, ``highs`` — OR-Tools ``pywraplp`` (:mod:`.linear_solver`, and :mod:`.cbc`,
  :mod:`.scip`, :mod:`.highs` for each solver's quirks);
* ``pulp`` — PuLP with its bundled CBC; ``pulp:NAME`` — any solver PuLP knows by that name
  that is installed (:mod:`.pulp`).

An unknown name is an :class:`~placement.errors.InvalidParameterError` on ``backend``; a
backend that cannot run here is a :class:`~placement.errors.SolverUnavailableError` saying why.
"""

from __future__ import annotations

import importlib

from placement.errors import InvalidParameterError, SolverUnavailableError
from placement.solvers.milp.backends.base import (CAPABILITIES, INSTALL, INSTALL_HINT, Backend, OutOfTime, RawResult,
                                                  SolveOptions, Terms, from_interrupt, unavailable_message)

_PACKAGE = "placement.solvers.milp.backends"

#: backend name → ``"module:Class"`` (module relative to this package), in the order they are offered
_REGISTRY: dict[str, str] = {
    "cp-sat": "cpsat:CpSatBackend",
    "cbc": "cbc:CbcBackend",
    "scip": "scip:ScipBackend",
    "highs": "highs:HighsBackend",
    "pulp": "pulp:PulpBackend",
}

#: the backends always offered; ``pulp:NAME`` names any other solver PuLP knows
BACKENDS: tuple[str, ...] = tuple(_REGISTRY)

#: backends that also take an argument, ``name:ARGUMENT``
_WITH_ARGUMENT = ("pulp",)


def backend_class(name: str) -> type[Backend]:
    """The class of a registered backend (``name`` one of :data:`BACKENDS`), imported now."""
    module, _, attr = _REGISTRY[name].partition(":")
    return getattr(importlib.import_module(f"{_PACKAGE}.{module}"), attr)


def _parse(name: str) -> tuple[type[Backend], tuple[str, ...]]:
    """The class and constructor arguments a backend name stands for."""
    if isinstance(name, str):
        base, colon, argument = name.partition(":")
        if not colon and base in _REGISTRY:
            return backend_class(base), ()
        if colon and argument and base in _WITH_ARGUMENT:
            return backend_class(base), (argument,)
    choices = ", ".join(repr(b) for b in BACKENDS)
    variants = " or ".join(repr(f"{b}:NAME") for b in _WITH_ARGUMENT)
    raise InvalidParameterError("backend", f"must be one of {choices} or {variants}, not {name!r}")


def check_backend_name(name: str) -> None:
    """Raise :class:`InvalidParameterError` unless ``name`` is one of :data:`BACKENDS` or ``pulp:NAME``."""
    _parse(name)


def check_backend_available(name: str) -> None:
    """Raise :class:`InvalidParameterError` for an unknown name, :class:`SolverUnavailableError` (one
    line: the backend, why, and what to install) for one that cannot run here."""
    cls, args = _parse(name)
    reason = cls.availability(*args)
    if reason is not None:
        hint = cls.install_hint(*args)
        raise SolverUnavailableError(unavailable_message(name, reason, hint) + _others(name, hint))


def _others(name: str, hint: str) -> str:
    """Where ``name`` cannot run for want of its package (``hint`` is to install it), the backends that can run
    here, as words to end its refusal with (``""`` where there are none)."""
    if hint != INSTALL_HINT:
        return ""
    found = [other for other in BACKENDS if other != name and backend_class(other).availability() is None]
    if not found:
        return ""
    return f" (or backend{'s' if len(found) > 1 else ''} {', '.join(map(repr, found))}, which can run here)"


def make_backend(name: str) -> Backend:
    """A fresh backend by name (one of :data:`BACKENDS`, or ``pulp:NAME``)."""
    cls, args = _parse(name)
    try:
        return cls(*args)
    except ImportError as exc:
        if from_interrupt(exc):   # Ctrl-C while the solver's extension module initialised
            raise KeyboardInterrupt from None
        hint = cls.install_hint(*args)
        raise SolverUnavailableError(unavailable_message(name, cls.availability(*args) or str(exc), hint)
                                     + _others(name, hint)) from None


def backend_capabilities(name: str) -> dict[str, bool]:
    """The capabilities the backend declares (:data:`~.base.CAPABILITIES`: ``integer_only``,
    ``warm_start``, ``threads``, ``seed``), without importing its solver."""
    cls, _ = _parse(name)
    return cls.capabilities()


def backend_availability() -> list[tuple[str, bool, str]]:
    """``(name, available, detail)`` for every backend, and every other PuLP solver found installed:
    the detail is the package and version that runs it, or why it cannot run here."""
    rows: list[tuple[str, bool, str]] = []
    for name in BACKENDS:
        cls = backend_class(name)
        reason = cls.availability()
        hint = cls.install_hint() if reason is not None else None
        rows.append((name, True, cls.detail()) if reason is None
                    else (name, False, f"{reason} ({INSTALL if hint == INSTALL_HINT else hint})"))
        for argument in cls.variants():
            rows.append((f"{name}:{argument}", True, cls.detail(argument)))
    return rows


__all__ = ["BACKENDS", "CAPABILITIES", "Backend", "OutOfTime", "RawResult", "SolveOptions", "Terms", "backend_availability",
           "backend_capabilities", "backend_class", "check_backend_available", "check_backend_name", "make_backend"]
