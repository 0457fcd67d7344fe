"""Checks of the public functions' parameter values, each raising :class:`InvalidParameterError`
that names the parameter and says what it accepts."""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Iterable

from placement.errors import InvalidParameterError


def one_of(name: str, value: Any, choices: Iterable[str], *, show: Callable[[Any], str] = repr) -> str:
    """``value`` when it is one of ``choices``; a refusal names it as ``show`` writes it."""
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise InvalidParameterError(name, f"must be one of {', '.join(map(repr, choices))}, not {show(value)}")
    return value


#: the most solver threads ``threads`` may ask for
MAX_THREADS = 1024
#: the largest ``seed``: the MILP solvers take a 32-bit signed seed
MAX_SEED = 2**31 - 1
#: the longest ``time_limit`` in seconds (about 31 years; the solvers count it in 64-bit milliseconds)
MAX_TIME_LIMIT = 1e9


def integer(name: str, value: Any, *, smallest: int = 0, largest: int | None = None,
            optional: bool = False, show: Callable[[Any], str] | None = None) -> int | None:
    """``value`` when it is an integer ≥ ``smallest`` and ≤ ``largest`` (``None`` too when ``optional``);
    bools are not integers. A refusal names ``value`` as ``show`` writes it (default :func:`shown`)."""
    if value is None and optional:
        return None
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < smallest
            or largest is not None and value > largest):
        if largest is not None:
            noun = f"an integer from {smallest} to {largest}"
        else:
            noun = {0: "a non-negative integer", 1: "a positive integer"}.get(smallest, f"an integer ≥ {smallest}")
        raise InvalidParameterError(name, f"must be {noun}{' or None' if optional else ''}, "
                                          f"not {(show or shown)(value)}")
    return int(value)


def recordable(name: str, value: Any) -> Any:
    """``value``, unless it is an integer past the float range: a plan file recording it could not be read back
    (every number read is taken as a double). Other values are left to the parameter's own checks."""
    from placement.jsonfile import past_floats

    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and past_floats(int(value)):
        raise InvalidParameterError(name, f"is {past_floats(int(value))}: a plan file recording it could not be "
                                          "read back")
    return value


def shown(value: Any) -> str:
    """``repr(value)``, cut short for a huge one (an error message is one readable line)."""
    if isinstance(value, int) and abs(value) >= 10**30:
        return f"an integer of about {int(abs(value).bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def number(name: str, value: Any, *, positive: bool = False, below_one: bool = False,
           largest: float | None = None, optional: bool = False) -> float | None:
    """``value`` when it is a finite real number ≥ 0 (> 0 when ``positive``; < 1 when ``below_one``;
    ≤ ``largest`` when given)."""
    if value is None and optional:
        return None
    try:
        finite = isinstance(value, numbers.Real) and math.isfinite(value)
    except OverflowError:   # an integer past the largest float
        finite = False
    ok = (not isinstance(value, bool) and finite
          and (value > 0 if positive else value >= 0) and (not below_one or value < 1)
          and (largest is None or value <= largest))
    if not ok:
        what = ("a finite number " + ("> 0" if positive else "≥ 0") + (" and < 1" if below_one else "")
                + (f" and ≤ {largest:g}" if largest is not None else ""))
        raise InvalidParameterError(name, f"must be {what}{' or None' if optional else ''}, not {shown(value)}")
    return float(value) + 0.0   # -0 reads as 0


def flag(name: str, value: Any) -> bool:
    """``value`` as a ``bool`` when it is a boolean, Python's or numpy's (as integers and numbers of numpy's types
    are taken)."""
    from placement.problem.instance import is_flag

    if not is_flag(value):
        raise InvalidParameterError(name, f"must be True or False, not {value!r}")
    return bool(value)


def callback(name: str, value: Any) -> Any:
    """``value`` when it is ``None`` or callable with one argument (a line of text); one whose signature
    refuses one argument is refused here, before any work (it raised TypeError at its first line, or
    never, where the method had nothing to say). A callable without a signature to read is taken."""
    if value is None:
        return value
    if not callable(value):
        raise InvalidParameterError(name, f"must be a function of one string or None, not {type(value).__name__}")
    import inspect

    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):   # builtins and extension types without one
        return value
    try:
        signature.bind("line")
    except TypeError as exc:
        called = getattr(value, "__qualname__", type(value).__name__)
        raise InvalidParameterError(name, f"must be a function of one string or None; {called} cannot be called with "
                                          f"one argument ({exc})") from None
    return value


def stage_count(instance: Any, stages: Any) -> int | None:
    """``stages`` when it is ``None`` or an integer from 1 to the number of devices of ``instance``:
    the ``stages=N`` parameter (exactly ``N`` non-empty pipeline stages) of every method that takes it."""
    stages = integer("stages", stages, smallest=1, optional=True)
    total = sum(t.count for t in instance.device_types)
    if stages is not None and stages > total:
        raise InvalidParameterError("stages", f"must be at most the number of devices ({total}), got {shown(stages)}")
    return stages


def keywords_checked(function: Callable) -> Callable:
    """``function`` refusing a keyword it does not take as Python does (a :class:`TypeError`), naming the keyword it
    takes that the unknown one is a misspelling of, where there is one (``time_limt``: ``time_limit``): one alike
    it as a misspelt field is (:data:`placement.misspelling.NEAR_MISS`), not private (``_index``) and not given
    already, by position or by keyword. A class (a dataclass, whose fields are its keywords) is given back with its
    ``__init__`` so checked, named as Python names it (``SweepSpec.__init__()``).

    Python's own binding of the arguments refuses the keyword; the check runs only on the :class:`TypeError` it
    raises, so a call that binds costs one plain call more and nothing else (the readers build
    :class:`~placement.problem.instance.Node` and ``Edge`` by the hundred thousand)."""
    if isinstance(function, type):
        function.__init__ = keywords_checked(function.__init__)
        return function
    import functools
    import inspect

    from placement.misspelling import NEAR_MISS

    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(function).parameters.values()
    names = tuple(p.name for p in parameters if p.kind in kinds)
    positional = tuple(p.name for p in parameters if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD)
    known = frozenset(names)

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except TypeError:
            if known.issuperset(kwargs):
                raise
        import difflib

        unknown = next(name for name in kwargs if name not in known)
        open_names = [name for name in names if name not in positional[:len(args)] and name not in kwargs
                      and not name.startswith("_")]
        near = difflib.get_close_matches(unknown, open_names, n=1, cutoff=NEAR_MISS)
        raise TypeError(f"{function.__qualname__}() got an unexpected keyword argument {unknown!r}"
                        + (f"; did you mean {near[0]!r}?" if near else ""))

    return checked
