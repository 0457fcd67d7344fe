"""Co-design of accelerator chips and the pipeline that runs a model on them.

A chip follows one template (:mod:`.template`): DRAM → a global buffer → tensor cores (systolic
arrays) and vector cores, at one clock. A grid (:mod:`.grid`) lists the designs the template
may take; :mod:`.opcost` times a model's operators on each design; :mod:`.exact` finds the
designs and the pipeline placement that maximise throughput (or throughput per watt) under
per-chip area and power budgets, proven optimal over the grid; :mod:`.exhaustive` checks it by
running the DP on every design combination. :func:`placement.codesign.api.codesign` is the
library's entry point (``placement.codesign``).
"""

import sys as _sys
import types as _types
from typing import Any as _Any


class _CallablePackage(_types.ModuleType):
    """This package, callable: ``placement.codesign(...)`` is :func:`placement.codesign.api.codesign`,
    and ``placement.codesign.exact`` etc. stay its modules, whichever is used first."""

    def __call__(self, *args: _Any, **kwargs: _Any) -> _Any:
        from placement.codesign.api import codesign

        return codesign(*args, **kwargs)

    @property
    def __signature__(self) -> _Any:   # inspect.signature(placement.codesign): the entry point's parameters
        import inspect

        from placement.codesign.api import codesign

        return inspect.signature(codesign)


def __getattr__(name: str) -> _Any:
    if name == "codesign":   # placement's lazy export: the package itself, callable
        return _sys.modules[__name__]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_sys.modules[__name__].__class__ = _CallablePackage
