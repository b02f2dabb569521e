"""The layout classes of an op's tensor arguments and the correlations between them
(spec/dt-ops.md, "Inputs the suite draws"), and the placements that make each.

A *class* describes one argument's layout over the mesh dims of more than one coordinate:
replicated, sharded evenly, unevenly, or with a coordinate that holds nothing, each kind of
partial, and the strided shard that FSDP stacked on tensor parallelism gives a parameter
(``[_S(d, k), S(d)]``, ``k`` the size of the mesh dim of the later shard). A *correlation*
describes how two arguments' layouts meet (``anatomy``): equal dims sharded on one mesh dim, a
dim the call names sharded, a partial fed to an input the op is linear in, an empty shard of
every input. Both are read from the placements a case has, whatever drew them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from conformance.oracle.layout import local_shape_and_offset
from conformance.oracle.mesh import coordinates
from conformance.vocabulary import parse_placements

if TYPE_CHECKING:
    from conformance.ops.anatomy import Anatomy

CLASSES = (
    "R",
    "S even",
    "S uneven",
    "S with an empty shard",
    "P(sum)",
    "P(avg)",
    "P(max)",
    "P(min)",
    "_S as FSDP with TP",
)
CORRELATIONS = (
    "drawn apart",
    "equal dims sharded alike",
    "a dim the call names sharded",
    "a partial into an input the op is linear in",
    "an empty shard of every input",
)
# What a call holds in place of a tensor argument after the first: a Python number of a kind, or
# a 0-d tensor, as a DTensor of the mesh or as a plain tensor.
NUMBERS = {
    "int": "a Python int",
    "float": "a Python float",
    "bool": "a Python bool",
    "0-d": "a 0-d DTensor",
    "plain": "a 0-d plain tensor",
}
POWERS_OF_TWO = (1, 2, 4, 8)


def classes(shape: Sequence[int], texts: Sequence[str], mesh_shape: Sequence[int]) -> set[str]:
    """The classes of an argument of ``shape`` laid out as ``texts``: those of its mesh dims of
    more than one coordinate (a ``P`` only where the tensor has elements), ``R`` where none
    shards it or holds a part."""
    found = set()
    cut = False
    for m, (text, k) in enumerate(zip(texts, mesh_shape, strict=True)):
        if k == 1:
            continue
        if text.startswith("P(") and math.prod(shape):
            found.add(text)
        elif text.startswith(("S(", "_S(")):
            cut = True
            if text.startswith("_S(") and _fsdp_with_tp(texts, mesh_shape, m):
                found.add("_S as FSDP with TP")
    if cut:
        found.add(_chunk_class(tuple(shape), tuple(texts), tuple(mesh_shape)))
    return found or {"R"}


def _fsdp_with_tp(texts: Sequence[str], mesh_shape: Sequence[int], m: int) -> bool:
    """Whether ``texts[m]``, ``_S(d, f)``, is followed on a later mesh dim of size ``f`` by
    ``S(d)``: FSDP's shard of a parameter that tensor parallelism already shards on ``d``."""
    dim, factor = (int(x) for x in texts[m][3:-1].split(","))
    return any(
        texts[later] == f"S({dim})" and mesh_shape[later] == factor
        for later in range(m + 1, len(texts))
    )


@functools.cache
def _chunk_class(shape: Sequence[int], texts: Sequence[str], mesh_shape: Sequence[int]) -> str:
    placements = parse_placements(list(texts))
    held = [local_shape_and_offset(shape, mesh_shape, placements, c)[0]
            for c in coordinates(mesh_shape)]  # fmt: skip
    if math.prod(shape) and not all(map(math.prod, held)):
        return "S with an empty shard"
    return "S uneven" if len(set(held)) > 1 else "S even"


def correlations(
    anatomy: Anatomy, placements: Sequence[Sequence[str] | None], mesh_shape: Sequence[int]
) -> set[str]:
    """The correlations of a case's layouts (``placements[i]`` ``None`` for an argument that is
    no DTensor of the mesh): ``drawn apart`` where there is none."""
    found = set()
    shards = {
        (i, m): _shard_dim(texts[m]) % len(anatomy.shapes[i])
        for i, texts in enumerate(placements)
        if texts
        for m, k in enumerate(mesh_shape)
        if k > 1 and _shard_dim(texts[m]) is not None
    }
    for (i, a), (j, b) in anatomy.equal_dims:
        if any(shards.get((i, m)) == a and shards.get((j, m)) == b for m in range(len(mesh_shape))):
            found.add("equal dims sharded alike")
    if any(shards.get((i, m)) == d for i, d in anatomy.named_dims for m in range(len(mesh_shape))):
        found.add("a dim the call names sharded")
    for linear in anatomy.linear:
        if all(placements[i] for i in linear) and any(
            all(placements[i][m].startswith("P(") for i in linear)
            for m, k in enumerate(mesh_shape)
            if k > 1
        ):
            found.add("a partial into an input the op is linear in")
            break
    held = [i for i, texts in enumerate(placements)
            if texts and anatomy.shapes[i] and math.prod(anatomy.shapes[i])]  # fmt: skip
    if held and all(
        "S with an empty shard" in classes(anatomy.shapes[i], placements[i], mesh_shape)
        for i in held
    ):
        found.add("an empty shard of every input")
    return found or {"drawn apart"}


def _shard_dim(text: str) -> int | None:
    """The tensor dim an ``S(d)`` names, as written (normalised by the caller's shape)."""
    return int(text[2:-1]) if text.startswith("S(") else None


def partial_kinds(dtype: str, mesh_shape: Sequence[int], finite_sums: bool) -> list[str]:
    """The ``P`` kinds an argument of ``dtype`` may take on this mesh (spec/dt-ops.md): none
    for ``bool``; ``avg`` for floating values whose sums over the mesh stay finite, over
    mesh dims of power-of-two sizes only."""
    if dtype == "bool":
        return []
    kinds = ["sum", "max", "min"]
    floating = dtype.startswith(("float", "bfloat"))
    if floating and finite_sums and all(k in POWERS_OF_TWO for k in mesh_shape):
        kinds.insert(1, "avg")
    return kinds


def realizations(
    shape: Sequence[int], mesh_shape: Sequence[int], wanted: str, kinds: Sequence[str],
    strided: bool, free: Sequence[int], held: dict[int, str] | None = None,
) -> Iterator[dict[int, str]]:  # fmt: skip
    """Placements on the mesh dims ``free`` that give an argument of ``shape`` the class
    ``wanted`` (with ``R`` on the others of ``free``), each as ``{mesh dim: text}``, the
    simplest first; ``kinds``: the ``P`` kinds it may take; ``strided``: whether strided shards
    are claimed; ``held``: what the other mesh dims already hold (FSDP's strided shard stacks on
    a shard already there)."""
    ndim = len(shape)
    wide = [m for m in free if mesh_shape[m] > 1]
    held = held or {}
    if wanted == "R":
        yield {}
    elif wanted.startswith("P("):
        if wanted[2:-1] in kinds and math.prod(shape):
            for m in wide:
                yield {m: wanted}
    elif wanted == "_S as FSDP with TP" and strided:
        for m in wide:
            for later in range(m + 1, len(mesh_shape)):
                for d in range(ndim):
                    fsdp = f"_S({d}, {mesh_shape[later]})"
                    if later in wide:
                        yield {m: fsdp, later: f"S({d})"}
                    elif mesh_shape[later] > 1 and held.get(later) == f"S({d})":
                        yield {m: fsdp}
    elif wanted.startswith("S"):
        singles = [{m: f"S({d})"} for m in wide for d in range(ndim)]
        nested = [{m: f"S({d})", n: f"S({d})"} for m in wide for n in wide if m < n
                  for d in range(ndim)]  # fmt: skip
        for choice in singles + nested:
            texts = tuple(choice.get(m, "R") for m in range(len(mesh_shape)))
            if _chunk_class(tuple(shape), texts, tuple(mesh_shape)) == wanted:
                yield choice
