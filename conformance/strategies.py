"""Hypothesis strategies that reach the corners on purpose: sizes 0 and 1, fewer elements than
ranks, 0-d tensors, negative dims, meshes with ranks in any order, several mesh dims on one
tensor dim, dtypes whose values a float32 round trip would change."""

from __future__ import annotations

import itertools
import math
from typing import Any

from hypothesis import strategies as st

DTYPES = ["float32", "float64", "int64", "bool"]


@st.composite
def shapes(draw, min_dims: int = 0, max_dims: int = 3, max_side: int = 7) -> list[int]:
    """Small shapes with many 0s, 1s and sizes that do not divide evenly."""
    ndim = draw(st.integers(min_dims, max_dims))
    return draw(st.lists(st.integers(0, max_side), min_size=ndim, max_size=ndim))


@st.composite
def grid_boxes(draw, shape: list[int], max_cuts: int = 2) -> list[tuple[tuple[int, ...], ...]]:
    """``(offsets, sizes)`` boxes that tile ``shape`` as a grid, each dim cut at up to
    ``max_cuts`` interior points (a dim of size 0 gives one empty span), in row-major order.
    Cuts are drawn inside ``(0, n)``: a cut at an end adds no box, and drawing there (as
    Hypothesis favours ends) would make layouts of boxes that touch, the common case, rare."""
    cuts = [
        sorted(set(draw(st.lists(st.integers(1, n - 1), max_size=max_cuts))) | {0, n})
        if n > 1
        else [0, n]
        for n in shape
    ]
    boxes: list[tuple[tuple[int, ...], ...]] = [((), ())]
    for d_cuts in cuts:
        spans = list(itertools.pairwise(d_cuts)) or [(0, 0)]
        boxes = [((*o, a), (*s, b - a)) for o, s in boxes for a, b in spans]
    return boxes


Box = tuple[tuple[int, ...], tuple[int, ...]]


@st.composite
def tilings(draw, shape: list[int], max_cuts: int = 5) -> list[Box]:
    """``(offsets, sizes)`` boxes that tile ``shape``: the whole box cut in two, then one of
    the pieces in two, up to ``max_cuts`` times, each cut at an interior point of any dim
    (guillotine cuts). Every grid is such a tiling, and so are layouts no grid gives (rows cut
    at different columns). Boxes come in the order the cuts left them."""
    boxes: list[Box] = [((0,) * len(shape), tuple(shape))]
    for _ in range(draw(st.integers(0, max_cuts))):
        cuttable = [(i, d) for i, (_, s) in enumerate(boxes) for d, n in enumerate(s) if n > 1]
        if not cuttable:
            break
        i, d = draw(st.sampled_from(cuttable))
        (o, s), c = boxes[i], draw(st.integers(1, boxes[i][1][d] - 1))
        first = (o, (*s[:d], c, *s[d + 1 :]))
        second = ((*o[:d], o[d] + c, *o[d + 1 :]), (*s[:d], s[d] - c, *s[d + 1 :]))
        boxes[i : i + 1] = [first, second]
    return boxes


@st.composite
def placement_lists(draw, world_size: int) -> list[int]:
    """The ranks of a chunk spec's placements, every class drawn first (ST-SPEC-9, ST-LIFE-7):
    each rank once, in any order; a rank named twice or more; a rank of the group missing (it
    holds no chunk); both."""
    kinds = ["every rank once", "a rank twice"] + ["a rank missing", "both"] * (world_size > 1)
    kind = draw(st.sampled_from(kinds))
    ranks = list(draw(st.permutations(range(world_size))))
    if kind in ("a rank missing", "both"):
        ranks = ranks[: draw(st.integers(1, world_size - 1))]
    if kind in ("a rank twice", "both"):
        extra = draw(st.lists(st.sampled_from(ranks), min_size=1, max_size=world_size))
        ranks = draw(st.permutations(ranks + extra))
    return list(ranks)


@st.composite
def meshes(draw, world_size: int, max_dims: int = 3) -> tuple[list[int], list[int]]:
    """``(mesh_shape, ranks)``: a mesh of at most ``world_size`` ranks, in any order."""
    ndim = draw(st.integers(1, max_dims))
    shape = [1] * ndim
    for d in range(ndim):
        room = world_size // math.prod(shape)
        shape[d] = draw(st.integers(1, max(1, room)))
    size = math.prod(shape)
    ranks = draw(st.permutations(range(world_size)))[:size]
    return shape, list(ranks)


@st.composite
def placements(
    draw, mesh_ndim: int, tensor_ndim: int, partial: bool = False, strided: bool = False
) -> list[str]:
    """One placement per mesh dim: ``R``, ``S(d)`` (negative ``d`` too), optionally ``P(sum)``
    and strided shards."""
    choices = ["R"]
    if tensor_ndim:
        choices += [f"S({d})" for d in range(-tensor_ndim, tensor_ndim)]
        if strided:
            choices += [f"_S({d}, {k})" for d in range(tensor_ndim) for k in (2, 3)]
    if partial:
        choices.append("P(sum)")
    return draw(st.lists(st.sampled_from(choices), min_size=mesh_ndim, max_size=mesh_ndim))


def with_placements_args(
    draw, api: str, shape: list[int], mesh: tuple[list[int], list[int]], placements: list[str],
    fault: dict | None, **options: object,
) -> dict:  # fmt: skip
    """Arguments of the ``with_placements`` rank task (conformance/tasks/dtensor.py): the case
    as given, with a drawn dtype and seed for the global tensor."""
    mesh_shape, mesh_ranks = mesh
    return {
        "api": api,
        "shape": shape,
        "dtype": draw(st.sampled_from(["float32", "int64"])),
        "seed": draw(st.integers(0, 2**16)),
        "mesh_shape": mesh_shape,
        "mesh_ranks": mesh_ranks,
        "placements": placements,
        "fault": fault,
        **options,
    }


# Mesh dim sizes over which a P(avg) part (one coordinate k·v, the others 0) averages exactly.
POWERS_OF_TWO = (1, 2, 4, 8)


@st.composite
def dtensor_placements(draw, impl: Any, mesh_shape: list[int], ndim: int) -> list[str]:
    """One placement per mesh dim of a DTensor the suite builds: ``S(d)`` (negative ``d`` too),
    ``R``, strided shards where claimed, and one ``P(op)`` where claimed (``avg`` over meshes
    whose dims are powers of two, where its parts are exact)."""
    ops = ["sum", "max", "min"] + ["avg"] * all(k in POWERS_OF_TWO for k in mesh_shape)
    ops = [op for op in ops if f"partial:{op}" in impl.capabilities]
    kinds = ["R"] + ["S", "S"] * bool(ndim)
    if ndim and "strided_shard" in impl.capabilities:
        kinds.append("_S")
    if ops:
        kinds.append(f"P({draw(st.sampled_from(ops))})")
    return [concrete(draw, draw(st.sampled_from(kinds)), ndim) for _ in mesh_shape]


def concrete(draw, kind: str, ndim: int) -> str:
    """A placement of ``kind`` (``S``, ``_S`` or as it is) with its dim and split drawn."""
    if kind == "S":
        return f"S({draw(st.integers(-ndim, ndim - 1))})"
    if kind == "_S":
        return f"_S({draw(st.integers(0, ndim - 1))}, {draw(st.sampled_from([2, 3]))})"
    return kind


def _factorizations(n: int, ndim: int) -> list[list[int]]:
    return [list(f) for f in itertools.product(range(1, n + 1), repeat=ndim) if math.prod(f) == n]


@st.composite
def world_meshes(draw, world_size: int) -> tuple[list[int], list[int]]:
    """A 1-D to 3-D mesh of every rank of the world, its ranks ascending or in any order (as
    often as each other)."""
    shape = draw(st.sampled_from(_factorizations(world_size, draw(st.integers(1, 3)))))
    ranks = list(range(world_size))
    return shape, list(draw(st.permutations(ranks))) if draw(st.booleans()) else ranks


@st.composite
def owned_layouts(
    draw, shape: list[int], group: list[int], empty_at_ends: bool = False
) -> list[dict[str, Any]]:
    """A valid layout of ``shape`` on ``group`` drawn apart from any spec: a tiling (grids and
    layouts off a grid) with up to two empty boxes, in any order, each box
    ``{"offsets", "sizes", "rank"}`` on any member, so that a rank holds several boxes or none.
    ``empty_at_ends``: an empty box starts at the end of its empty dim, past every other box
    (where no implementation can take it for an overlap, ST-VALID-1): of a dim with elements,
    so that it lies past the tiling's boxes, and none where every dim is empty."""
    boxes = [(list(o), list(s)) for o, s in draw(tilings(shape, max_cuts=4))]
    for _ in range(draw(st.integers(0, 2))):
        offsets = [draw(st.integers(0, n)) for n in shape]
        sizes = [draw(st.integers(0, n - o)) for o, n in zip(offsets, shape, strict=True)]
        if not empty_at_ends:
            sizes[draw(st.integers(0, len(shape) - 1))] = 0
        elif any(shape):
            empty = draw(st.sampled_from([d for d, n in enumerate(shape) if n]))
            offsets[empty], sizes[empty] = shape[empty], 0
        else:
            continue
        boxes.append((offsets, sizes))
    boxes = draw(st.permutations(boxes))
    owners = draw(st.lists(st.sampled_from(group), min_size=len(boxes), max_size=len(boxes)))
    return [{"offsets": o, "sizes": s, "rank": r} for (o, s), r in zip(boxes, owners, strict=True)]
