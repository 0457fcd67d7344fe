"""Forward hooks of a model, which ``torch.export`` traces through and no stage calls.

The export runs a module's forward hooks and pre-hooks as part of its call, so the program, and every stage
cut from it, computes what they returned (a changed input or output) with the values they read as traced. The
hooks themselves are Python the stages never call: a hook that records an activation, logs, counts calls or
reads a value that changes between steps does nothing of it in a pipeline step. Hooks that torch registers
to compute a module's weights before each call (``weight_norm``, ``spectral_norm``, pruning) are read as the
operators they run and are not counted here. An import (:func:`placement.io.torch_export.import_torch`) warns
alike (:class:`ImportedForwardHookWarning`): the split-spec and pipe-split forms of its plans run such a program.
"""

from __future__ import annotations

import functools
from typing import Any

from placement.io.opgraph import CostModelWarning
from placement.wording import first_few


class ForwardHookWarning(UserWarning):
    """The model's modules hold forward hooks or forward pre-hooks (or torch holds global ones): the stages
    compute what the hooks returned when the model was exported, and call none of them."""


class ImportedForwardHookWarning(ForwardHookWarning, CostModelWarning):
    """An imported model holds forward hooks or pre-hooks: the programs that the split-spec and pipe-split forms
    run compute what the hooks returned when exported, and call none of them (a ``CostModelWarning``, which
    ``placement import`` prints, as the other warnings of an import)."""


def _is_torch_own(hook: Any) -> bool:
    """Whether ``hook`` is torch's own (a weight-computing hook of ``torch.nn.utils``, a lazy module's)."""
    while isinstance(hook, functools.partial):
        hook = hook.func
    home = getattr(hook, "__module__", None) or type(hook).__module__
    return home == "torch" or home.startswith("torch.")


def forward_hooks(model: Any) -> list[str]:
    """The forward hooks ``model`` holds, one entry per module (``"module '0' (a forward hook)"``) in the order
    of ``named_modules``, then torch's global ones; those torch registers itself are left out."""
    from torch.nn.modules import module as torch_module

    def kinds(pre: dict, post: dict) -> list[str]:
        return [kind for kind, hooks in (("a forward pre-hook", pre), ("a forward hook", post))
                if any(not _is_torch_own(hook) for hook in hooks.values())]

    found = []
    for name, module in model.named_modules():
        held = kinds(getattr(module, "_forward_pre_hooks", {}), getattr(module, "_forward_hooks", {}))
        if held:
            found.append(f"module {name or type(module).__name__!r} ({' and '.join(held)})")
    held = kinds(getattr(torch_module, "_global_forward_pre_hooks", {}),
                 getattr(torch_module, "_global_forward_hooks", {}))
    if held:
        found.append(f"torch's global hooks ({' and '.join(held)})")
    return found


def forward_hook_note(found: list[str]) -> str | None:
    """The warning (:class:`ForwardHookWarning`) for what :func:`forward_hooks` found, or ``None``."""
    if not found:
        return None
    return (f"the stages call no forward hook of {first_few(found)}: torch.export traced what the hooks "
            "returned into the program, which the stages compute (with the Python values the hooks read, fixed "
            "as they were when it was exported), but no hook runs in a pipeline step, so what a hook records, "
            "logs or counts is not done; compute in forward what a hook should do at every step")


def imported_hook_note(found: list[str]) -> str | None:
    """The warning of an import (:class:`ImportedForwardHookWarning`) for what :func:`forward_hooks` found, or
    ``None``: it speaks of the hand-off forms, which run the exported program (a DeepSpeed ``PipelineModule`` calls
    the modules it is given as layers, whose own hooks it runs)."""
    if not found:
        return None
    return (f"forward hooks of {first_few(found)} run in the model's forward: the split-spec and pipe-split forms run "
            "a program that torch.export traced through the hooks (in torch.distributed.pipelining.pipeline(), or "
            "export_program for pipe_split_module), which computes what they returned, with the Python values they "
            "read fixed as they were when it was exported, as the instance costs it, but calls no hook, so what a "
            "hook records, logs or counts is not done in a pipeline step; compute in forward what a hook should do "
            "at every step (a DeepSpeed PipelineModule calls the hooks of the modules it is given as layers, no "
            "others)")
