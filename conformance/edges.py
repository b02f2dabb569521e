"""Edge classes: the kinds of input the suite must reach, counted as its tests draw them.

A test names the classes of what it drew (``note``, which is also a Hypothesis ``event``, so
``--hypothesis-show-statistics`` lists them) and declares the families it must cover
(``@pytest.mark.edges("tensor", "permutation")``). A run reports, per test, how many examples drew
each class; with ``--require-edges`` a declared class that no example drew makes the run an error
of the suite (exit 3): a strategy that never reaches a class tests nothing about it, and a
wrong implementation that only fails there passes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from hypothesis import currently_in_test_context, event

from conformance.ops import layouts
from conformance.oracle.layout import local_shape_and_offset
from conformance.oracle.mesh import coordinates
from conformance.oracle.placements import normalize
from conformance.vocabulary import (
    Partial,
    Placement,
    Replicate,
    Shard,
    StridedShard,
    parse_placements,
)

FAMILIES: dict[str, tuple[str, ...]] = {
    "tensor": (
        "tensor: 0-d",
        "tensor: a zero-length dim",
        "tensor: fewer elements than shards",
        "tensor: float64",
        "tensor: int64",
        "tensor: bool",
    ),
    "permutation": (
        "permutation: identity",
        "permutation: a swap",
        "permutation: a longer cycle",
    ),
    "group": ("group: the whole world", "group: a sub-group"),
    "layout fault": (
        "layout fault: none",
        "layout fault: overlap",
        "layout fault: an overlap a gap hides",
        "layout fault: gap",
        "layout fault: out of bounds",
        "layout fault: wrong ndim",
        "layout fault: no shards",
    ),
    "layout ndim": ("layout: a 0-d tensor", "layout: a tensor with dims"),
    "layout": (
        "layout: one box",
        "layout: an empty box",
        "layout: boxes out of order",
        "layout: boxes off a grid",
    ),
    "local shards": (
        "local shards: a rank with none",
        "local shards: a rank with several",
        "local shards: a rank's boxes apart along dim 0 only",
        "local shards: a rank's boxes apart along dim 1 only",
        "local shards: a rank's boxes apart along both dims",
    ),
    "construction": (
        "construction: from local shards",
        "construction: with the global metadata",
    ),
    "fault spread": (
        "fault: on one rank",
        "fault: on every rank",
        "fault: on two ranks, differently",
        "fault: on one rank, holding no shard",
    ),
    "dt layout": (
        "mesh: 1-D",
        "mesh: 2-D",
        "mesh: 3-D",
        "mesh: 1 x k",
        "mesh: k x 1",
        "placements: none shards",
        "placements: a negative dim",
        "placements: mesh dims nested on one tensor dim",
        "tensor: fewer elements than shards",
    ),
    "transition": (
        "transition: R -> S",
        "transition: S -> R",
        "transition: S -> S on another tensor dim",
        "transition: a mesh dim unchanged",
        "transition: a tensor dim two mesh dims shard, changed",
    ),
    "strided transition": (
        "transition: _S on the source",
        "transition: _S on the target",
        "transition: R or S -> P",
        "transition: R or S -> P(sum)",
        "transition: P -> R or S",
        "transition: P -> P of another op",
    ),
    "chunks": (
        "chunks: uneven",
        "chunks: an empty chunk of a non-empty tensor",
    ),
    "memory": ("memory: a transposed view", "memory: a strided slice"),
    "tensor properties": ("tensor properties: the defaults", "tensor properties: requires_grad"),
    "outside rank": (
        "outside rank: past the world",
        "outside rank: a world rank outside the group",
    ),
    "from_local args": (
        "from_local: shape and stride given",
        "from_local: shape given",
        "from_local: neither given",
    ),
    "placement list": (
        "placement list: every rank named once",
        "placement list: a rank twice",
        "placement list: a rank missing",
    ),
    "transposed": ("memory: a transposed view",),
    "checkpoint": (
        "checkpoint: a replicated box",
        "checkpoint: an empty box",
        "checkpoint: a partial layout",
        "checkpoint: indices that are not an interval",
        "checkpoint: strided shards, every index sequence an interval",
    ),
    "mesh": (
        "mesh: 1-D",
        "mesh: 2-D",
        "mesh: 3-D",
        "mesh: 1 x k",
        "mesh: k x 1",
        "mesh: ranks out of order",
        "mesh: smaller than the world",
    ),
    "flattening": (
        "flattening: every dim",
        "flattening: some dims",
        "flattening: dims not adjacent",
        "flattening: one dim under its own name",
        "flattening: the default name",
    ),
    "flattening fault": tuple(
        f"flattening fault: {f}"
        for f in (
            "no names",
            "unknown name",
            "a name twice",
            "nothing chosen",
            "out of order",
            "a dim's name",
            "taken by other dims",
            "another name",
        )
    ),
}

# A torch function on ShardedTensors (spec/st-ops.md), each op a class where the single-device op
# returns (so its value rules judged it), paired with the classes of its inputs: the layout of x,
# the second tensor's, what x holds and requires.
FAMILIES["st op"] = (
    *(
        f"st op: {op}"
        for op in (
            "equal",
            "allclose",
            "clone",
            "detach",
            "contiguous",
            "type_as",
            "requires_grad_",
            "copy_",
            "empty_like",
            "zeros_like",
            "ones_like",
            "full_like",
            "rand_like",
            "randn_like",
            "constant_",
            "uniform_",
            "normal_",
            "kaiming_uniform_",
        )
    ),
    "st op: boxes on two ranks compared",
    "st op: the ranks' own shards disagree",
    "st op: a refusal expected",
    "st op: a refusal, a member holding no box",
    "st op: a box whose fan is not the tensor's",
)
FAMILIES["st op input"] = (
    "layout: an empty box",
    "layout: boxes off a grid",
    "local shards: a rank with none",
    "local shards: a rank with several",
    "group: a sub-group",
    "tensor: float64",
    "tensor: int64",
    "st op: another layout",
    "st op: no member holding boxes of both tensors",
    "st op: x requires grad",
)

# Classes that need a world of at least this many ranks: a run whose worlds are all smaller
# cannot draw them, and is not asked to.
NEEDS_RANKS = {
    "local shards: a rank with none": 2,
    "placement list: a rank missing": 2,
    "fault: on two ranks, differently": 2,
    "permutation: a swap": 2,
    "permutation: a longer cycle": 3,
    "group: a sub-group": 2,
    "mesh: 1 x k": 2,
    "mesh: k x 1": 2,
    "mesh: ranks out of order": 2,
    "mesh: smaller than the world": 2,
    "transition: a tensor dim two mesh dims shard, changed": 2,
    "flattening fault: another name": 2,
    "outside rank: a world rank outside the group": 2,
    "fault: on one rank, holding no shard": 2,
    "st op: boxes on two ranks compared": 2,
    "st op: the ranks' own shards disagree": 2,
    "st op: a refusal, a member holding no box": 2,
    "st op: no member holding boxes of both tensors": 2,
}

# A ShardedTensor has at least one dim: its family is the tensor's but for 0-d.
FAMILIES["sharded tensor"] = tuple(c for c in FAMILIES["tensor"] if c != "tensor: 0-d")
# An op's tensor arguments (spec/dt-ops.md), one family: its classes are counted over every op of
# the per-op test, whose examples are too few per op for pairs of them. An op's mesh holds every
# rank of the world.
FAMILIES["op inputs"] = (
    *(f"op input: {kind}" for kind in ("R", "S", "S of a negative dim", "_S")),
    *(f"op input: P({op})" for op in ("sum", "avg", "max", "min")),
    *FAMILIES["chunks"],
    *(c for c in FAMILIES["tensor"] if c != "tensor: bool"),
    *(c for c in FAMILIES["mesh"] if c != "mesh: smaller than the world"),
)
# One op's cases (conformance/ops/cases.py), counted per op and paired across families: the
# layout class of each of its first three tensor arguments, how their layouts meet, the numbers
# a call holds in place of an argument, and the mesh.
FAMILIES |= {f"op arg {k}": tuple(f"op arg {k}: {c}" for c in layouts.CLASSES) for k in range(3)}
FAMILIES["op layouts"] = tuple(f"op layouts: {c}" for c in layouts.CORRELATIONS)
FAMILIES["op numbers"] = tuple(f"op numbers: {n}" for n in layouts.NUMBERS.values())
NEEDS_RANKS |= {
    label: 4 if label.endswith("_S as FSDP with TP") else 2
    for family in ("op arg 0", "op arg 1", "op arg 2", "op layouts")
    for label in FAMILIES[family]
    if not label.endswith((": R", ": drawn apart"))
}

# The call between an op's call and its repeat (DT-OP-9): on the same metadata with other
# non-tensor arguments (a dim either call names sharded, where one does), with another number,
# or on another sample and layout.
FAMILIES["op history"] = (
    "op history: other arguments",
    "op history: other arguments on a named dim sharded",
    "op history: another number",
    "op history: another layout",
)

# A training step's calls (DT-OP-9): an op's forward and backward, an optimizer update, again.
FAMILIES["training step"] = ("op grad: an optimizer update between two steps",)

# A chain of API calls and its backward pass (spec/dt-grad.md), one family, as for operators. A
# P(max) leaf is drawn, but ci's 60 chains hold none over more than one coordinate: not required.
FAMILIES["grad chain"] = (
    *(f"grad: {call}" for call in ("distribute", "from_local", "to_local", "full_tensor")),
    "grad: redistributed",
    "grad: no redistribution",
    "grad: grad_placements given",
    "grad: a gradient in parts",
    "grad: two backward passes",
    "grad: nothing requires grad",
    "op input: P(sum)",
    "op input: _S",
    "chunks: uneven",
    "tensor: 0-d",
    "mesh: ranks out of order",
)

# A backward pass through an op (DT-GRAD-6, 7), one family, as for the ops' values.
FAMILIES["op grad"] = (
    "op grad: a distribute leaf",
    "op grad: a from_local leaf",
    "op grad: a partial leaf",
    "op grad: a leaf the program gives no gradient",
    "op grad: several outputs",
    "op grad: some outputs unused",
    "op grad: a gradient of zeros",
    "op input: S",
    "op input: P(sum)",
    "op input: P(max)",
    "chunks: uneven",
    "tensor: float64",
    "mesh: ranks out of order",
)

# A random call (spec/dt-random.md) and what its judgement could compare, paired with the layout
# classes it meets: DT-RAND-4 judges only draws large enough that a correct one cannot look
# repeated, so those classes are required like the calls.
FAMILIES["random call"] = (
    *(
        f"random: {call}"
        for call in ("rand", "randn", "uniform_", "normal_", "bernoulli_", "dropout")
    ),
    "random: rand_like",
    "random: randn_like",
    "random: parts compared",
    "random: values compared",
    "random: a certain outcome",
    "tensor: int64",
)
# Random calls one after another on one world (spec/dt-random.md): what follows an uneven draw,
# and what comes between draws.
FAMILIES["random sequence"] = (
    "random sequence: a replicated draw after an uneven one",
    "random sequence: a sharded draw after an uneven one",
    "random sequence: a partial draw after an uneven one",
    "random sequence: a reseed between draws",
    "random sequence: dropout between draws",
)
NEEDS_RANKS |= dict.fromkeys(FAMILIES["random sequence"], 2)
FAMILIES["random layout"] = (
    "op input: R",
    "op input: S",
    "op input: _S",
    "op input: P(sum)",
    "op input: P(max)",
    "chunks: uneven",
    "tensor: 0-d",
    "tensor: float64",
    "mesh: ranks out of order",
)

DRAWN: Counter[str] = Counter()
# The classes of each example the test ran, as sets: what pair coverage is counted from.
EXAMPLES: list[frozenset[str]] = []
_current: set[str] = set()


def note(*labels: str) -> None:
    """Count each label once for the example being drawn."""
    for label in labels:
        if not any(label in family for family in FAMILIES.values()):
            raise ValueError(f"{label!r} is no edge class of {sorted(FAMILIES)}")
        DRAWN[label] += 1
        _current.add(label)
        if currently_in_test_context():  # a covering example runs outside Hypothesis's draws
            event(label)


@contextmanager
def example() -> Iterator[set[str]]:
    """Collect the classes one example notes (the plugin wraps each example in it); they are
    kept in ``EXAMPLES`` however the example ends."""
    _current.clear()
    try:
        yield _current
    finally:
        if _current:
            EXAMPLES.append(frozenset(_current))
        _current.clear()


def noted() -> frozenset[str]:
    """The classes the example being drawn has noted so far."""
    return frozenset(_current)


def clear() -> None:
    DRAWN.clear()
    EXAMPLES.clear()
    _current.clear()


def tensor(shape: Sequence[int], dtype: str, shards: int) -> None:
    """The classes of a drawn tensor split into ``shards`` pieces; a dtype's class only where
    the tensor holds values."""
    labels = []
    if not shape:
        labels.append("tensor: 0-d")
    if 0 in shape:
        labels.append("tensor: a zero-length dim")
    if math.prod(shape) < shards:
        labels.append("tensor: fewer elements than shards")
    if dtype in ("float64", "int64", "bool") and math.prod(shape):
        # values of the dtype: an empty tensor has none, and pairs a dtype's values with other
        # classes (integer values split into P(sum) parts) only where there are some
        labels.append(f"tensor: {dtype}")
    note(*labels)


def permutation(before: Sequence[int], after: Sequence[int]) -> None:
    """The class of the permutation taking the order ``before`` to ``after`` (the same items):
    the identity, swaps only, or one with a cycle of three or more."""
    position = {item: i for i, item in enumerate(after)}
    longest, seen = 1, set()
    for start in range(len(before)):
        length, i = 0, start
        while i not in seen:
            seen.add(i)
            i, length = position[before[i]], length + 1
        longest = max(longest, length)
    labels = {1: "permutation: identity", 2: "permutation: a swap"}
    note(labels.get(longest, "permutation: a longer cycle"))


def group(members: Sequence[int], world_size: int) -> None:
    note("group: the whole world" if len(members) == world_size else "group: a sub-group")


def outside_ranks(ranks: Sequence[int], members: Sequence[int], world_size: int) -> None:
    """The classes of placement ranks that are not members of the group: past the world, or
    real ranks of the world that the group leaves out (ST-VALID-12)."""
    for r in set(ranks) - set(members):
        note("outside rank: past the world" if r >= world_size
             else "outside rank: a world rank outside the group")  # fmt: skip


def mesh(shape: Sequence[int], ranks: Sequence[int], world_size: int) -> None:
    note(*mesh_classes(shape, ranks, world_size))


def mesh_classes(shape: Sequence[int], ranks: Sequence[int], world_size: int) -> list[str]:
    """The classes of a mesh of ``shape`` over ``ranks`` of a world of ``world_size``."""
    labels = [f"mesh: {len(shape)}-D"]
    if len(shape) == 2 and shape[0] == 1 < shape[1]:
        labels.append("mesh: 1 x k")
    if len(shape) == 2 and shape[1] == 1 < shape[0]:
        labels.append("mesh: k x 1")
    if list(ranks) != sorted(ranks):
        labels.append("mesh: ranks out of order")
    if len(ranks) < world_size:
        labels.append("mesh: smaller than the world")
    return labels


def op_input(
    shape: Sequence[int], dtype: str, texts: Sequence[str], mesh_shape: Sequence[int]
) -> None:
    """The classes of an op's tensor argument of ``shape`` and ``dtype`` laid out as ``texts``
    (``S(-1)``, ``_S(0, 2)``, ``P(avg)``) over a mesh of ``mesh_shape``; a ``P`` class only
    over a mesh dim of more than one coordinate, of a tensor with elements."""
    kinds = {"R": "op input: R", "S": "op input: S", "_S": "op input: _S"}
    # A P over one coordinate, or of no elements, has one part, the value: no partial in effect.
    labels = {kinds.get(text.split("(")[0], f"op input: {text}") for text, k in
              zip(texts, mesh_shape, strict=True) if not text.startswith("P(") or
              (k > 1 and math.prod(shape))}  # fmt: skip
    if any(text.startswith("S(-") for text in texts):
        labels.add("op input: S of a negative dim")
    note(*sorted(labels))
    tensor(shape, dtype, math.prod(mesh_shape))
    chunks(shape, mesh_shape, normalize(parse_placements(texts), len(shape)))


def flattening(ndim: int, dims: Sequence[int], name: str | None, names: Sequence[str]) -> None:
    """The classes of flattening the mesh dims ``dims`` of an ``ndim``-D mesh under ``name``."""
    labels = ["flattening: every dim" if len(dims) == ndim else "flattening: some dims"]
    if list(dims) != list(range(dims[0], dims[0] + len(dims))):
        labels.append("flattening: dims not adjacent")
    if len(dims) == 1 and (name or names[dims[0]]) == names[dims[0]]:  # the default: its own
        labels.append("flattening: one dim under its own name")
    if not name:
        labels.append("flattening: the default name")
    note(*labels)


def placement_list(ranks: Sequence[int], world_size: int) -> None:
    """The class of a chunk spec's placement ranks over a group of ``world_size``."""
    twice = len(set(ranks)) < len(ranks)
    note("placement list: a rank twice" if twice else "placement list: every rank named once")
    if set(ranks) != set(range(world_size)):
        note("placement list: a rank missing")


def local_shards(shards_by_rank: Sequence[Sequence[dict]]) -> None:
    """The classes of what the ranks of a ``from_local`` case hold: ``[]``, or several boxes,
    and along which dims a rank's boxes lie apart."""
    labels = set()
    for held in shards_by_rank:
        if not held:
            labels.add("local shards: a rank with none")
        if len(held) > 1:
            labels.add("local shards: a rank with several")
            offsets = [s["metadata"]["offsets"] for s in held]
            apart = [d for d in range(len(offsets[0])) if len({o[d] for o in offsets}) > 1]
            which = {(0,): "dim 0 only", (1,): "dim 1 only", (0, 1): "both dims"}.get(tuple(apart))
            if which:
                labels.add(f"local shards: a rank's boxes apart along {which}")
    note(*sorted(labels))


def layout(
    shape: Sequence[int],
    boxes: Sequence[tuple[Sequence[int], Sequence[int]]],
    valid: bool = True,
) -> None:
    """The classes of a layout's ``(offsets, sizes)`` boxes: one box, an empty box, boxes not in
    offset order, and, for a valid layout, boxes with elements that no grid of cuts makes."""
    labels = []
    if len(boxes) == 1:
        labels.append("layout: one box")
    if any(not all(sizes) for _, sizes in boxes):
        labels.append("layout: an empty box")
    offsets = [list(o) for o, _ in boxes]
    if offsets != sorted(offsets):
        labels.append("layout: boxes out of order")
    full = [o for o, s in boxes if all(s)]
    if valid and len(full) != math.prod(len({o[d] for o in full}) for d in range(len(shape))):
        labels.append("layout: boxes off a grid")
    note(*labels)


def layout_ndim(shape: Sequence[int]) -> None:
    note("layout: a 0-d tensor" if not shape else "layout: a tensor with dims")


def transition(
    source: Sequence[Placement], target: Sequence[Placement], mesh_shape: Sequence[int]
) -> None:
    """The classes of a redistribution, mesh dim by mesh dim (placements normalised): what each
    dim's placement becomes, and where strided shards and ``P`` stand. A ``P`` counts on a mesh
    dim of two coordinates or more: over one, a partition or a reduction moves nothing."""
    labels = set()
    for s, t, k in zip(source, target, mesh_shape, strict=True):
        kinds = (_kind(s), _kind(t))
        if "P" in kinds and k == 1:
            continue
        if s == t:
            labels.add("transition: a mesh dim unchanged")
        elif kinds in {("R", "S"), ("S", "R"), ("S", "S")}:
            labels.add({("R", "S"): "transition: R -> S", ("S", "R"): "transition: S -> R",
                        ("S", "S"): "transition: S -> S on another tensor dim"}[kinds])  # fmt: skip
        elif kinds[1] == "P" and kinds[0] == "P":
            labels.add("transition: P -> P of another op")
        elif kinds[1] == "P":
            # a sum partition splits values (exactly, for integers: DT-REDIST-6); others copy
            labels.add("transition: R or S -> P(sum)" if t == Partial("sum")
                       else "transition: R or S -> P")  # fmt: skip
        elif kinds[0] == "P":
            labels.add("transition: P -> R or S")
        if kinds[0] == "_S":
            labels.add("transition: _S on the source")
        if kinds[1] == "_S":
            labels.add("transition: _S on the target")
    if any(_nested_and_changed(side, source, target) for side in (source, target)):
        labels.add("transition: a tensor dim two mesh dims shard, changed")
    note(*sorted(labels))


def _nested_and_changed(
    side: Sequence[Placement], source: Sequence[Placement], target: Sequence[Placement]
) -> bool:
    """Whether two mesh dims of ``side`` shard one tensor dim and one of them changes."""
    dims = [i for i, p in enumerate(side) if isinstance(p, Shard)]
    return any(
        side[i].dim == side[j].dim and (source[i] != target[i] or source[j] != target[j])
        for i in dims
        for j in dims
        if i < j
    )


def _kind(p: Placement) -> str:
    return {Shard: "S", StridedShard: "_S", Replicate: "R", Partial: "P"}[type(p)]


def chunks(
    shape: Sequence[int], mesh_shape: Sequence[int], placements: Sequence[Placement]
) -> None:
    """The classes of the chunks a layout cuts: coordinates of different local shapes, and one
    that holds nothing of a tensor that has elements. A chunk spec over ``k`` ranks along
    ``dim`` cuts as the 1-D layout ``[S(dim)]`` on ``k`` coordinates (the same chunk rule)."""
    held = [
        local_shape_and_offset(shape, mesh_shape, placements, c)[0] for c in coordinates(mesh_shape)
    ]
    labels = []
    if len(set(held)) > 1:
        labels.append("chunks: uneven")
    if math.prod(shape) and not all(map(math.prod, held)):
        labels.append("chunks: an empty chunk of a non-empty tensor")
    note(*labels)


def memory(tensor: torch.Tensor, memory: str) -> None:
    """The class of an input laid out in ``memory`` (``oracle.tensors.laid_out``), where it is
    not contiguous in effect."""
    if not tensor.is_contiguous():
        note(_MEMORY_CLASSES[memory])


_MEMORY_CLASSES = {"transposed": "memory: a transposed view", "strided": "memory: a strided slice"}


def transposed(shapes: Sequence[Sequence[int]]) -> None:
    """The class of the inputs of ``shapes`` given as transposed views (``codec.filled``,
    ``codec.seeded``), where one of them is not contiguous in effect."""
    if any(len(s) >= 2 and min(s) > 1 for s in shapes):
        note("memory: a transposed view")


def never_drawn(families: Sequence[str], drawn: Counter[str], max_ranks: int) -> list[str]:
    """The classes of ``families`` that no example drew, of those worlds of up to ``max_ranks``
    ranks can draw."""
    return [
        label
        for family in families
        for label in FAMILIES[family]
        if not drawn[label] and NEEDS_RANKS.get(label, 1) <= max_ranks
    ]
