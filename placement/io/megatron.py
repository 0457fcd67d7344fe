"""A plan of an imported model as Megatron-Core's pipeline layout string.

Megatron-Core's ``pipeline_model_parallel_layout`` lists, per pipeline stage, its
embedding (``E``), its transformer layers (``t``, one per layer) and its loss part (``L``),
stages separated by ``|``. A Megatron layer is a *repeated block* (a transformer layer),
never a single Linear or activation, so the layers here are the entries ``P.0, P.1, …``
of a *block stack* ``P``: a numbered module list (``transformer.h``,
``bert.encoder.layer``, ``layers``) of at least two entries, each a module with
submodules, all with the same submodules (paths relative to the entry). Stacks nested in
a block of another stack (a ``mlp`` that is an ``nn.Sequential``) are parts of those
blocks; a model must have exactly one outermost stack.

The nodes before the first block are the embedding, those after the last block the loss
part; Megatron requires both, exactly once each. The layout exists for a plan whose stages
are intervals of program order when no stage boundary falls inside a block, no node outside
the blocks lies between two blocks, the embedding and the loss part are not empty and each
lies in one stage, and no stage runs on a CPU; the blocks are modules with weights of their own
(:func:`require_own_weights`), and no value skips past the next layer (:func:`require_layer_chain`). An entry
of the stack that the model's forward did not call when exported (a layer it skips, a spare) holds no node and
is no block of the layout; :func:`megatron_notes` names it.
"""

from __future__ import annotations

import re
from collections import Counter

from placement.errors import InvalidParameterError
from placement.io.exporters import (Layout, refuse, require_intervals, runtime_stages, stage_types,
                                    uncalled_note)
from placement.plan import Plan
from placement.problem.instance import CPU

_NUMBERED = re.compile(r"(?:^|\.)(\d+)(?=\.|$)")


def _entry(prefix: str, index: int) -> str:
    return f"{prefix}.{index}" if prefix else str(index)


def _modules(layout: Layout) -> set[str]:
    """Every module the layout names: the nodes' module keys and the modules beginning in them."""
    return {fqn for node in layout.nodes for fqn in (node.module, *node.starts, *node.inner) if fqn}


def block_stacks(layout: Layout) -> dict[str, list[int]]:
    """The outermost block stacks of the model (module docstring): prefix -> entry indices, sorted."""
    # prefix -> entry index -> the paths below that entry: one pass over the names and their numbers, since a
    # module below entry P.i names P.i. at a number of its own
    lists: dict[str, dict[int, set[str]]] = {}
    for fqn in _modules(layout):
        for match in _NUMBERED.finditer(fqn):
            prefix, index = fqn[:match.start()], int(match.group(1))
            below = lists.setdefault(prefix, {}).setdefault(index, set())
            entry = _entry(prefix, index) + "."
            if fqn.startswith(entry):
                below.add(fqn[len(entry):])
    stacks: dict[str, list[int]] = {}
    for prefix, entries in lists.items():
        if len(entries) < 2:
            continue
        shapes = {frozenset(below) for below in entries.values()}
        if len(shapes) == 1 and frozenset() not in shapes:
            stacks[prefix] = sorted(entries)
    return {prefix: indices for prefix, indices in stacks.items() if not _inside(prefix, stacks)}


def _inside(prefix: str, stacks: dict[str, list[int]]) -> bool:
    """Whether ``prefix`` lies in an entry of one of ``stacks``: an entry ``P.i`` it begins with is one of the
    numbers in its own path."""
    for match in _NUMBERED.finditer(prefix):
        other, index = prefix[:match.start()], int(match.group(1))
        if other in stacks and index in stacks[other] and prefix.startswith(_entry(other, index) + "."):
            return True
    return False


def block_of(prefix: str, module: str) -> int | None:
    """The index of the block of stack ``prefix`` that ``module`` is or lies in; ``None`` outside the stack."""
    match = re.match((re.escape(prefix) + r"\." if prefix else "") + r"(\d+)(?=\.|$)", module)
    return int(match.group(1)) if match else None


def layer_stack(layout: Layout) -> tuple[str, list[int | None]]:
    """The block stack ``P`` of the model and each node's block index (``None`` outside the blocks).

    Raises :class:`InvalidParameterError` (``layout``) when the model has no block stack or
    several, or when a node holds more than one block.
    """
    stacks = block_stacks(layout)
    if not stacks:
        raise InvalidParameterError("layout", "has no stack of repeated blocks (modules P.0, P.1, … with the same "
                                              "submodules); a Megatron layer is a block, not a single module")
    if len(stacks) > 1:
        raise InvalidParameterError("layout", f"has {len(stacks)} stacks of repeated blocks "
                                              f"({', '.join(sorted(stacks))}); a Megatron layout has one")
    prefix, indices = next(iter(stacks.items()))
    layer = [block_of(prefix, node.module) for node in layout.nodes]
    held = set(layer)
    for index in indices:
        if index not in held:
            holder = next((node.name for node in layout.nodes
                           if _entry(prefix, index) in (*node.starts, *node.inner)), "?")
            raise InvalidParameterError("layout", f"has node {holder!r} holding block {_entry(prefix, index)} with "
                                                  "other modules; import with a deeper module_depth")
    return prefix, layer


def require_own_weights(layout: Layout, prefix: str, layer: list[int | None]) -> None:
    """Refuse a stack whose blocks are not modules of their own: Megatron builds each layer with weights of
    its own, so a model whose block runs again as another block (one module registered under several
    names, or called as a block more than once) or whose blocks read a trained parameter of another block
    or of the part outside the blocks would train more weights than the model has. A module called more
    than once inside its own block (a dropout used twice) is the block's affair; the embedding and the loss
    part may share their weights (Megatron ties them)."""
    for node, index in zip(layout.nodes, layer):
        for module in node.repeats:
            other = block_of(prefix, module)
            if other is not None and (other != index or module == _entry(prefix, other)):
                refuse("megatron", f"{node.name!r} is a call of module {module}, which runs more than once, and "
                                   "each Megatron layer is a module of its own, called once, with weights of its own")
    block = {node.id: index for node, index in zip(layout.nodes, layer)}
    for name, readers in layout.shared:
        where = {block[v] for v in readers if v in block}
        if len(where) > 1 and where != {None}:
            named = sorted(f"block {_entry(prefix, i)}" for i in where if i is not None)
            if None in where:
                named.append("a node outside the blocks")
            refuse("megatron", f"trained parameter {name!r} is read by {', '.join(named[:-1])} and {named[-1]}, and "
                               "each Megatron layer has weights of its own")


def require_layer_chain(layout: Layout, prefix: str, layer: list[int | None], position: dict[int, int]) -> None:
    """Refuse a model whose values skip past the next Megatron layer: each layer passes on only its hidden
    states, to the layer after it, so a block may read the block before it or the embedding (the masks and
    positions every layer is given), and the loss part only the last block; a read of an earlier block, or of
    the embedding by the loss part, has no place in the layout. ``layer`` is each node's block (in program
    order, checked to be a chain), ``None`` outside the blocks."""
    order = list(dict.fromkeys(index for index in layer if index is not None))   # by first node, in order
    first = min(k for k, index in enumerate(layer) if index is not None)
    place = {index: k for k, index in enumerate(order)}
    rank = [place[index] + 1 if index is not None else 0 if k < first else len(order) + 1
            for k, index in enumerate(layer)]

    def part(k: int) -> str:
        if layer[k] is not None:
            return f"block {_entry(prefix, layer[k])}"
        return "the embedding" if rank[k] == 0 else "the loss part"

    for u, v in layout.edges:
        a, b = position[u], position[v]
        if rank[b] - rank[a] > 1 and not (rank[a] == 0 and rank[b] <= len(order)):
            refuse("megatron", f"{layout.nodes[b].name!r} of {part(b)} reads {layout.nodes[a].name!r} of {part(a)}, "
                               "and each Megatron layer passes on only its hidden states, to the layer after it")


def megatron_layout(layout: Layout, plan: Plan) -> str:
    """Megatron-Core's pipeline layout string for the plan (module docstring)."""
    parts = runtime_stages(layout, plan, "megatron")
    on_cpu = [s for s, kind in enumerate(stage_types(layout, plan)) if kind == CPU]
    if on_cpu:
        refuse("megatron", f"stage {on_cpu[0]} runs on a CPU, and every stage of a Megatron layout is a GPU's")
    require_intervals(layout, parts, "megatron")
    try:
        prefix, layer = layer_stack(layout)
    except InvalidParameterError as exc:
        refuse("megatron", f"the model {exc.detail}")
    require_own_weights(layout, prefix, layer)
    positions = [k for k, index in enumerate(layer) if index is not None]
    first, last = positions[0], positions[-1]
    for k in range(first, last + 1):
        if layer[k] is None:
            before = next(layer[j] for j in range(k - 1, first - 1, -1) if layer[j] is not None)
            after = next(layer[j] for j in range(k + 1, last + 1) if layer[j] is not None)
            if before == after:   # the calling code's own operators amid one block's modules
                refuse("megatron", f"{layout.nodes[k].name!r} runs between nodes of block {_entry(prefix, before)} "
                                   "but in none of its modules, and a Megatron layer holds its block's operators only")
            refuse("megatron", f"{layout.nodes[k].name!r} lies between blocks {_entry(prefix, before)} and "
                               f"{_entry(prefix, after)} but in none, and Megatron's layers follow one another")
        if k > first and layer[k] < layer[k - 1]:
            refuse("megatron", f"{layout.nodes[k].name!r} of block {_entry(prefix, layer[k])} runs after block "
                               f"{_entry(prefix, layer[k - 1])}, and Megatron runs its layers once each, in order")
    position = layout.position()
    require_layer_chain(layout, prefix, layer, position)
    stage_of = {position[v]: s for s, stage in enumerate(parts) for v in stage}
    block_stage: dict[int, int] = {}
    for k in positions:
        index = layer[k]
        if block_stage.setdefault(index, stage_of[k]) != stage_of[k]:
            refuse("megatron", f"stage {block_stage[index]} ends inside block {_entry(prefix, index)}")
    pre = sorted({stage_of[k] for k in range(first)})
    post = sorted({stage_of[k] for k in range(last + 1, len(layout.nodes))})
    if not pre:
        refuse("megatron", f"nothing runs before block {_entry(prefix, layer[first])}, and a Megatron layout begins "
                           "with the embedding (E)")
    if not post:
        refuse("megatron", f"nothing runs after block {_entry(prefix, layer[last])}, and a Megatron layout ends with "
                           "the loss part (L)")
    if len(pre) > 1:
        refuse("megatron", f"the part before the first block (the embedding) spans stages {pre[0]} to {pre[-1]}, "
                           "and Megatron keeps it in one stage")
    if len(post) > 1:
        refuse("megatron", f"the part after the last block (the loss part) spans stages {post[0]} to {post[-1]}, "
                           "and Megatron keeps it in one stage")
    counts = Counter(block_stage.values())
    text = []
    for s in range(len(parts)):
        text.append(("E" if s in pre else "") + "t" * counts[s] + ("L" if s in post else ""))
    return "|".join(text)


def megatron_notes(layout: Layout) -> list[str]:
    """What a Megatron layout of ``layout`` leaves out: the entries the instance records the model's forward
    did not call when exported (``uncalled``), which hold no stage's work; where some are entries of the block
    stack, the note says that the layout's count of blocks leaves them out, and how many blocks it counts."""
    if not layout.uncalled:
        return []
    prefix, layer = layer_stack(layout)
    note = uncalled_note(layout.uncalled)
    if any(index is not None and fqn == _entry(prefix, index)
           for fqn in layout.uncalled for index in (block_of(prefix, fqn),)):
        called = len({index for index in layer if index is not None})
        note += (f", and the layout leaves {'it' if len(layout.uncalled) == 1 else 'them'} out of its count of "
                 f"blocks: it counts the {called} entries of {prefix or 'the model'} that the forward calls")
    return [note]
