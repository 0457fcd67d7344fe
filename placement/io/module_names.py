"""Names of a model's state that torch cannot give the module it makes of an exported program.

``ExportedProgram.module()`` registers the program's parameters, buffers and tensor constants, under the
model's names, on a ``torch.fx.GraphModule``; the stages of :func:`placement.torch.plan_pipeline`, the program of
:func:`placement.io.exporters.pipe_split_module` and ``torch.distributed.pipelining.pipeline()`` are all built
from that module. A name whose first part is an attribute the module holds itself (``graph``, ``code``, ``meta``,
``recompile``, and those it sets on itself after the state: ``validate_inputs``, ``range_constraints``,
``_in_spec``) cannot be registered there: torch raises a ``KeyError`` or a ``TypeError``, or, for a submodule so
named, leaves its parameters out and fails on the first operator that reads them. Such a model is refused by
the name to change (:func:`check_state_names`); an import warns of it (:func:`warn_of_state_names`), as the
instance is planned and split for DeepSpeed and Megatron all the same.
"""

from __future__ import annotations

from typing import Any

from placement.errors import InvalidParameterError
from placement.io.opgraph import CostModelWarning


class GraphModuleNameWarning(CostModelWarning):
    """An imported model's state has a name that ``ExportedProgram.module()`` cannot register (module docstring):
    torch's pipeline runtime cannot split it (a ``CostModelWarning``, which ``placement import`` prints, as the
    other warnings of an import)."""


def _graph_module_attributes() -> Any:
    """A module as ``ExportedProgram.module()`` makes it, of a program with no state: the attributes any such
    module holds itself."""
    import torch

    class Stateless(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x + 1

    return torch.export.export(Stateless(), (torch.zeros(1),)).module()


def clashing_state_name(program: Any) -> tuple[str, str] | None:
    """The first state of the ``torch.export.ExportedProgram`` ``program`` whose name ``program.module()`` cannot
    register (module docstring), as ``(kind, name)``: a ``"submodule"`` and its name where the state lies inside
    one, else ``"parameter"``, ``"buffer"`` or ``"tensor attribute"`` (a tensor the model holds unregistered);
    ``None`` where there is none."""
    signature = program.graph_signature
    named = [("parameter", signature.parameters), ("buffer", signature.buffers),
             ("tensor attribute", signature.lifted_tensor_constants)]
    probe = None
    for kind, targets in named:
        for target in targets:
            first, dot, _ = target.partition(".")
            probe = _graph_module_attributes() if probe is None else probe
            if hasattr(probe, first):
                return ("submodule" if dot else kind), first
    return None


def check_state_names(program: Any, parameter: str) -> None:
    """Refuse ``program`` (an ``ExportedProgram``) where :func:`clashing_state_name` finds a name, naming it; the
    error is about ``parameter`` (``model`` for a model the caller gave, ``program`` for a program)."""
    clash = clashing_state_name(program)
    if clash is not None:
        kind, name = clash
        raise InvalidParameterError(parameter, f"has a {kind} named {name!r}, which torch.fx.GraphModule uses for an "
                                               "attribute of its own: torch cannot make a module of the exported "
                                               "program (ExportedProgram.module(), from which the stages and "
                                               f"torch.distributed.pipelining.pipeline() are built); rename the {kind}")


def warn_of_state_names(program: Any) -> None:
    """Warn (:class:`GraphModuleNameWarning`) where :func:`clashing_state_name` finds a name in the exported
    ``program``, naming it and the hand-off forms that cannot be built."""
    import warnings

    clash = clashing_state_name(program)
    if clash is not None:
        kind, name = clash
        warnings.warn(GraphModuleNameWarning(
            f"model has a {kind} named {name!r}, which torch.fx.GraphModule uses for an attribute of its own: torch "
            "cannot make a module of the exported program, so torch.distributed.pipelining.pipeline() (the "
            "split-spec and pipe-split forms) fails on it, and pipe_split_module refuses it; rename the "
            f"{kind} (the deepspeed and megatron forms are not affected)"), stacklevel=3)
