"""What each coordinate holds: pure functions of plain data (spec/dt-layout.md).

An *index sequence* is the list of global indices along one tensor dim that a coordinate holds,
in local order. It is a ``range`` while it is an interval (always, without strided shards), so
the arithmetic stays cheap for large tensors; a strided shard may turn it into a ``list``.

Beside each shard step sits its data side (``take``) and its inverse (``assemble``), used by
``distribute_tensor`` and ``redistribute``. The chunk rule itself is ``reference/chunks.py``'s,
shared with ``ChunkShardingSpec``; what a strided shard keeps (DT-PLACE-12) is computed here, not
in ``placements.py``.

Rules and where they live:

- DT-LAYOUT-1: ``index_sequences``, ``local_shape_and_offset``
- DT-LAYOUT-2, DT-LAYOUT-3: see ``reference.chunks``
- DT-LAYOUT-4: ``local_shape_and_offset``
- DT-LAYOUT-5, DT-LAYOUT-6, DT-LAYOUT-7: ``sequences_before``
- DT-LAYOUT-8: ``sequences_before``, ``local_shape_and_offset``
- DT-LAYOUT-12: ``take``
- DT-PLACE-12: ``shard_positions``
- INTEROP-6: ``is_interval``
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from reference.chunks import chunk_bounds
from reference.dtensor.placements import Placement, Shard, StridedShard, normalize

Positions = Sequence[int]


def shard_positions(
    placement: Shard | StridedShard, length: int, parts: int, coord: int
) -> Positions:
    """Positions, within a current sequence of ``length``, that coordinate ``coord`` keeps.

    DT-LAYOUT-2: ``S`` keeps chunk ``coord`` (chunk rule). DT-PLACE-12: ``_S`` splits into
    ``split_factor`` pieces, each piece into ``parts`` chunks, and keeps chunk ``coord`` of each.
    """
    if isinstance(placement, Shard):
        return range(*chunk_bounds(length, parts, coord))
    kept: list[int] = []
    for piece in range(placement.split_factor):
        piece_start, piece_stop = chunk_bounds(length, placement.split_factor, piece)
        start, stop = chunk_bounds(piece_stop - piece_start, parts, coord)
        kept.extend(range(piece_start + start, piece_start + stop))
    return range(kept[0], kept[-1] + 1) if is_interval(kept) and kept else kept


def is_interval(sequence: Sequence[int]) -> bool:
    """Whether ``sequence`` is ``[a, a + n)`` in increasing order (INTEROP-6)."""
    if isinstance(sequence, range):
        return sequence.step == 1 or len(sequence) <= 1
    return all(b == a + 1 for a, b in itertools.pairwise(sequence))


def _check_plain(
    global_shape: Sequence[int], mesh_shape: Sequence[int], coordinate: Sequence[int]
) -> None:
    if any(not isinstance(s, int) or isinstance(s, bool) for s in (*global_shape, *mesh_shape)):
        raise TypeError(f"shapes must hold ints; got {tuple(global_shape)}, {tuple(mesh_shape)}")
    if any(s < 0 for s in global_shape):
        raise ValueError(f"global_shape must be non-negative; got {tuple(global_shape)}")
    if not mesh_shape or any(k < 1 for k in mesh_shape):
        raise ValueError(f"mesh_shape must be positive with >= 1 dim; got {tuple(mesh_shape)}")
    if len(coordinate) != len(mesh_shape) or not all(
        0 <= c < k for c, k in zip(coordinate, mesh_shape, strict=True)
    ):
        raise ValueError(f"coordinate {tuple(coordinate)} is not in a mesh of {tuple(mesh_shape)}")


def index_sequences(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coordinate: Sequence[int],
) -> tuple[Positions, ...]:
    """The index sequence of every tensor dim at ``coordinate`` (dt-layout.md, Semantics).

    Mesh dims are visited left to right and each shard step narrows the *current* sequence, so
    several mesh dims on one tensor dim nest (DT-LAYOUT-7). ``R`` and ``P`` change nothing
    (DT-LAYOUT-5).
    """
    _check_plain(global_shape, mesh_shape, coordinate)
    placements = normalize(placements, len(global_shape), len(mesh_shape))
    return sequences_before(global_shape, mesh_shape, placements, coordinate, len(mesh_shape))


def sequences_before(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coordinate: Sequence[int],
    mesh_dim: int,
) -> tuple[Positions, ...]:
    """The index sequences after mesh dims ``0 .. mesh_dim - 1`` only: what mesh dim
    ``mesh_dim`` splits. Inputs are trusted (``index_sequences`` checks them)."""
    sequences: list[Positions] = [range(size) for size in global_shape]
    for placement, parts, coord in zip(
        placements[:mesh_dim], mesh_shape[:mesh_dim], coordinate[:mesh_dim], strict=True
    ):
        if isinstance(placement, Shard | StridedShard):
            current = sequences[placement.dim]
            kept = shard_positions(placement, len(current), parts, coord)
            sequences[placement.dim] = (
                current[kept.start : kept.stop]
                if isinstance(kept, range)
                else [current[p] for p in kept]
            )
    return tuple(sequences)


def local_shape_and_offset(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coordinate: Sequence[int],
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(local_shape, global_offset)`` of one coordinate (DT-LAYOUT-1).

    An empty sequence has its offset at the end of the dim, never past it (DT-LAYOUT-4).
    """
    sequences = index_sequences(global_shape, mesh_shape, placements, coordinate)
    shape = tuple(len(s) for s in sequences)
    offset = tuple(
        s[0] if len(s) else size for s, size in zip(sequences, global_shape, strict=True)
    )
    return shape, offset


def take(tensor: torch.Tensor, dim: int, positions: Positions) -> torch.Tensor:
    """The data side of a shard step: the entries of ``tensor`` at ``positions`` along ``dim``.

    An interval is a view (``narrow``); other position lists copy (``index_select``).
    """
    if isinstance(positions, range):
        return tensor.narrow(dim, positions.start, len(positions))
    index = torch.tensor(positions, dtype=torch.long, device=tensor.device)
    return tensor.index_select(dim, index)


def assemble(
    pieces: Sequence[torch.Tensor], dim: int, positions: Sequence[Positions]
) -> torch.Tensor:
    """The inverse of ``take`` over all coordinates of a mesh dim: put each coordinate's piece
    back at its positions. ``pieces[c]`` holds ``positions[c]``, and the positions of all
    coordinates together are a permutation of ``range(total)``."""
    whole = pieces[0] if len(pieces) == 1 else torch.cat(list(pieces), dim)
    order = [p for coord_positions in positions for p in coord_positions]
    if order == list(range(len(order))):
        return whole
    # A strided shard interleaves: row ``order[i]`` of the result is row ``i`` of ``whole``.
    device = whole.device
    inverse = torch.empty(len(order), dtype=torch.long, device=device)
    inverse[torch.tensor(order, device=device)] = torch.arange(len(order), device=device)
    return whole.index_select(dim, inverse)
