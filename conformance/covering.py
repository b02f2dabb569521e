"""Pairwise coverage of edge classes: every class of one dimension a test declares, drawn
together with every class of each other dimension it declares.

Classes drawn one at a time miss the faults that need two at once (an integer dtype and a
partition into ``P(sum)``; a rank holding several boxes and a sub-group). The ``ci`` and
``thorough`` profiles draw a pool of candidate examples without running them (``pairwise``: up
to the first case, where the test has noted its classes), and once the property's own draws
pass, run as explicit examples the fewest candidates that cover every pair the pool reached
(greedy set cover: within a factor ``ln(pairs)`` of the fewest possible, in time linear in the
pool).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from conformance.edges import FAMILIES, NEEDS_RANKS

Pair = frozenset[str]


def pair(a: str, b: str) -> Pair:
    return frozenset((a, b))


def _each(first: str, others: tuple[str, ...], reason: str) -> dict[Pair, str]:
    return {pair(first, other): reason for other in others}


_SHARDED = (
    "chunks: uneven", "chunks: an empty chunk of a non-empty tensor",
    "transition: R -> S", "transition: S -> R", "transition: S -> S on another tensor dim",
    "transition: a tensor dim two mesh dims shard, changed",
    "transition: _S on the source", "transition: _S on the target",
    "checkpoint: indices that are not an interval",
    "checkpoint: strided shards, every index sequence an interval",
)  # fmt: skip
_VALID_ONLY = ("layout: boxes off a grid",)
_FAULTS = (
    "layout fault: overlap", "layout fault: an overlap a gap hides", "layout fault: gap",
    "layout fault: out of bounds", "layout fault: wrong ndim", "layout fault: no shards",
)  # fmt: skip
_LAYOUT = ("layout: one box", "layout: an empty box", "layout: boxes out of order")

# Pairs no input can have, and why. A required pair that no example draws is an error of the
# suite under --require-edges, unless it is here.
IMPOSSIBLE: dict[Pair, str] = {
    **_each("tensor: 0-d", _SHARDED, "a 0-d tensor has no dim to shard, so it is never cut"),
    **_each(
        "tensor: 0-d",
        ("checkpoint: an empty box",),
        "a 0-d tensor's one element is in every box",
    ),
    **_each(
        "tensor: a zero-length dim",
        (
            "chunks: an empty chunk of a non-empty tensor",
            "checkpoint: indices that are not an interval",
            "layout: boxes off a grid",
        ),
        "a tensor with a zero-length dim has no elements: no chunk of it holds any, and a box "
        "that holds none has an index sequence and a grid place that nothing depends on",
    ),
    **_each(
        "mesh: 1-D",
        ("transition: a tensor dim two mesh dims shard, changed",),
        "two mesh dims that shard one tensor dim need a mesh of two dims",
    ),
    **_each(
        "mesh: 1-D",
        ("flattening: some dims", "flattening: dims not adjacent"),
        "a 1-D mesh's one dim is every dim, and it has no dims apart",
    ),
    **{
        pair(two_d, "flattening: dims not adjacent"): "two mesh dims are adjacent"
        for two_d in ("mesh: 2-D", "mesh: 1 x k", "mesh: k x 1")
    },
    **_each(
        "fault: on one rank, holding no shard",
        ("memory: a transposed view",),
        "a case has one fault: a transposed local tensor is one of a rank that holds it",
    ),
    **_each(
        "layout: a 0-d tensor",
        (
            "layout fault: gap",
            "layout fault: out of bounds",
            "layout fault: an overlap a gap hides",
        ),
        "a 0-d tensor has one element and no dim: its one box cannot leave a hole or pass an end",
    ),
    **_each(
        "layout: a 0-d tensor",
        ("layout: an empty box", "layout: boxes off a grid", "layout: boxes out of order"),
        "a box of no dims holds the one element: it is never empty, and every box of a 0-d "
        "tensor has the same (empty) offsets",
    ),
    **{
        pair(outside, order): "a new order is of the group's own ranks: a spec that names a "
        "rank outside the group orders no permutation of them"
        for outside in FAMILIES["outside rank"]
        for order in FAMILIES["permutation"]
    },
    **_each(
        "group: the whole world",
        ("outside rank: a world rank outside the group",),
        "the whole world leaves no rank of the world out",
    ),
    **_each(
        "mesh: ranks out of order",
        ("permutation: identity",),
        "the permutation is of the mesh's ranks against their ascending order",
    ),
    **{
        pair(fault, grid): "off a grid is a class of valid layouts (an invalid one is its fault)"
        for fault in _FAULTS
        for grid in _VALID_ONLY
    },
    **{
        pair("layout fault: no shards", shape): "a layout of no shards has no boxes"
        for shape in _LAYOUT
    },
    **_each(
        "layout: one box",
        (
            "layout fault: overlap",
            "layout fault: an overlap a gap hides",
            "local shards: a rank with several",
            "local shards: a rank's boxes apart along dim 0 only",
            "local shards: a rank's boxes apart along dim 1 only",
            "local shards: a rank's boxes apart along both dims",
        ),
        "one box overlaps no other, and is one rank's, once",
    ),
    pair("tensor: float64", "tensor: int64"): "a tensor has one dtype",
    **{
        pair(second, c): "only a comparison, copy_ and type_as take a second sharded tensor"
        for second in ("st op: another layout", "st op: no member holding boxes of both tensors")
        for c in FAMILIES["st op"]
        if c
        not in (
            "st op: equal",
            "st op: allclose",
            "st op: copy_",
            "st op: type_as",
            "st op: a refusal expected",
            "st op: the ranks' own shards disagree",
            "st op: a refusal, a member holding no box",
        )
    },
    **_each(
        "tensor: int64",
        (
            "st op: uniform_",
            "st op: normal_",
            "st op: kaiming_uniform_",
            "st op: a box whose fan is not the tensor's",
        ),
        "an integer tensor takes no random draw: the single-device op refuses it",
    ),
    **_each(
        "st op: the ranks' own shards disagree",
        ("st op: another layout", "st op: no member holding boxes of both tensors"),
        "a rank's own answer is a question of two tensors of one layout",
    ),
    pair("st op: x requires grad", "st op: copy_"): "copy_ into a leaf that requires grad is "
    "refused by the single-device op",
    pair(
        "tensor: int64", "st op: boxes on two ranks compared"
    ): "an integer tensor takes no random draw",
}


# Pairs that need a larger world than either class alone: a cycle of three inside a group, or a
# mesh, that leaves a rank of the world out.
PAIR_NEEDS_RANKS: dict[Pair, int] = {
    pair("group: a sub-group", "st op: the ranks' own shards disagree"): 3,
    pair("group: a sub-group", "st op: a refusal, a member holding no box"): 3,
    pair("group: a sub-group", "st op: no member holding boxes of both tensors"): 3,
    pair("group: a sub-group", "permutation: a longer cycle"): 4,
    pair("mesh: smaller than the world", "permutation: a longer cycle"): 4,
}


def required(families: Sequence[str], max_ranks: int) -> set[Pair]:
    """The pairs of classes from two different declared families (a class two of them share
    pairs with neither), that worlds of up to ``max_ranks`` ranks can draw, less the
    impossible ones."""
    wanted = set()
    for first, second in itertools.combinations(dict.fromkeys(families), 2):
        for a, b in itertools.product(FAMILIES[first], FAMILIES[second]):
            if _same_family(a, b, families):
                continue
            p = pair(a, b)
            needs = max(NEEDS_RANKS.get(a, 1), NEEDS_RANKS.get(b, 1), PAIR_NEEDS_RANKS.get(p, 1))
            if needs <= max_ranks and p not in IMPOSSIBLE:
                wanted.add(p)
    return wanted


def _same_family(a: str, b: str, families: Sequence[str]) -> bool:
    return a == b or any(a in FAMILIES[f] and b in FAMILIES[f] for f in families)


def drawn(examples: Iterable[Iterable[str]]) -> set[Pair]:
    """Every pair of classes some example drew together."""
    return {pair(a, b) for labels in examples for a, b in itertools.combinations(set(labels), 2)}


def cover(
    candidates: Sequence[frozenset[str]], wanted: set[Pair], sizes: Sequence[int] = ()
) -> list[int]:
    """Indices of candidates that together draw every pair of ``wanted`` that any candidate
    draws: each pick the candidate that adds the most pairs still undrawn, the smallest of those
    (``sizes``: a failing covering example is reported as drawn, not shrunk), then the first,
    so one pool always gives one cover."""
    offers = [drawn([labels]) & wanted for labels in candidates]
    sizes = list(sizes) or [0] * len(candidates)
    left, chosen = set().union(*offers) if offers else set(), []
    while left:
        best = max(range(len(offers)), key=lambda i: (len(offers[i] & left), -sizes[i], -i))
        chosen.append(best)
        left -= offers[best]
    return chosen
