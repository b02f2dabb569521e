"""Layout (spec/dt-layout.md): which global indices every mesh coordinate holds.

Models DT-LAYOUT-1 to DT-LAYOUT-12 by following the Semantics literally: start from the full
index sequence of every tensor dim and let mesh dims ``0..N-1`` cut it, left to right. The
sequences are explicit tuples, so strided shards need no special case, and the local tensor is
the global tensor indexed by them. Shard dims may be negative: they are normalised here
(DT-PLACE-2).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from conformance.oracle.placements import normalize
from conformance.oracle.tensors import make_global
from conformance.oracle.vocabulary import chunk_bounds
from conformance.vocabulary import Partial, Placement, Shard, StridedShard, parse_placements

IndexSequences = tuple[tuple[int, ...], ...]


def _chunk(seq: tuple[int, ...], k: int, c: int) -> tuple[int, ...]:
    """Chunk ``c`` of ``k`` of a sequence by the chunk rule (DT-LAYOUT-2)."""
    lo, hi = chunk_bounds(len(seq), k, c)
    return seq[lo:hi]


def index_sequences(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coordinate: Sequence[int],
) -> IndexSequences:
    """The index sequence ``I_d`` of every tensor dim at ``coordinate`` (DT-LAYOUT-1, 2, 5-8).

    ``R`` and ``P`` leave the sequences alone (DT-LAYOUT-5); ``S(d)`` keeps chunk ``c`` of the
    current ``I_d``, so several mesh dims on one tensor dim nest left to right (DT-LAYOUT-7);
    ``_S(d, f)`` cuts ``I_d`` into ``f`` pieces and keeps chunk ``c`` of each (DT-LAYOUT-8,
    DT-PLACE-12)."""
    seqs = [tuple(range(n)) for n in global_shape]
    placements = normalize(placements, len(global_shape))
    for k, c, p in zip(mesh_shape, coordinate, placements, strict=True):
        if isinstance(p, Shard):
            seqs[p.dim] = _chunk(seqs[p.dim], k, c)
        elif isinstance(p, StridedShard):
            pieces = (_chunk(seqs[p.dim], p.split_factor, j) for j in range(p.split_factor))
            seqs[p.dim] = tuple(i for piece in pieces for i in _chunk(piece, k, c))
    return tuple(seqs)


def local_shape_and_offset(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coordinate: Sequence[int],
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(local_shape, global_offset)`` of a coordinate (DT-LAYOUT-1). The offset of an empty
    sequence is the global size of its dim (DT-LAYOUT-4, 10); a 0-d tensor gives ``((), ())``
    (DT-LAYOUT-9)."""
    seqs = index_sequences(global_shape, mesh_shape, placements, coordinate)
    shape = tuple(len(s) for s in seqs)
    offset = tuple(s[0] if s else n for s, n in zip(seqs, global_shape, strict=True))
    return shape, offset


def is_interval(seq: Sequence[int]) -> bool:
    """Whether a sequence is ``[a, a + n)`` in increasing order (INTEROP-6); empty ones are."""
    return all(b == a + 1 for a, b in itertools.pairwise(seq))


def take(global_tensor: torch.Tensor, seqs: IndexSequences) -> torch.Tensor:
    """``global[I_0][:, I_1][...]``: a new tensor holding exactly those indices (DT-LAYOUT-12)."""
    out = global_tensor
    for d, seq in enumerate(seqs):
        out = out.index_select(d, torch.tensor(seq, dtype=torch.long))
    return out.clone() if out is global_tensor else out


def put(out: torch.Tensor, seqs: IndexSequences, local: torch.Tensor) -> None:
    """The inverse of ``take``: write ``local`` into ``out`` at the indices ``seqs``."""
    if not seqs:
        out.copy_(local)
        return
    index = torch.meshgrid(*(torch.tensor(s, dtype=torch.long) for s in seqs), indexing="ij")
    out.index_put_(index, local)


def local_tensor(
    global_tensor: torch.Tensor,
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coordinate: Sequence[int],
) -> torch.Tensor:
    """The local tensor a coordinate holds of ``global_tensor`` when no placement is ``P``
    (DT-LAYOUT-12); with ``P`` it is the slice before any partition (see ``dt_api``)."""
    return take(
        global_tensor, index_sequences(global_tensor.shape, mesh_shape, placements, coordinate)
    )


def source_local(
    shape: list[int],
    dtype: str,
    seed: int,
    mesh_shape: list[int],
    placements: list[str],
    coord: tuple[int, ...],
) -> torch.Tensor:
    """The local tensor coordinate ``coord`` passes to ``from_local``: the layout slice of a
    global tensor whose seed differs along the ``P`` mesh dims only (so replicas agree and the
    partial values differ)."""
    parsed = parse_placements(placements)
    offset = 0
    for k, c, p in zip(mesh_shape, coord, parsed, strict=True):
        offset = offset * k + (c if isinstance(p, Partial) else 0)
    value = make_global(shape, dtype, seed + 7919 * offset)
    return local_tensor(value, mesh_shape, parsed, coord)
