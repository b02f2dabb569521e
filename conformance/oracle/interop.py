"""Interop (spec/interop.md): a DTensor's layout as ShardedTensor metadata.

Models INTEROP-1 to INTEROP-7: one box per canonical coordinate (position 0 along every ``R``
mesh dim), in row-major order, owned by the rank at that coordinate; and for a checkpoint of a
live DTensor (INTEROP-8), which ranks may write each box.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from conformance.oracle.layout import index_sequences, is_interval, local_shape_and_offset
from conformance.oracle.mesh import coordinates, rank_at
from conformance.oracle.st_metadata import Properties, ShardMeta, TensorMeta
from conformance.oracle.vocabulary import VALID, Verdict, value_error
from conformance.vocabulary import Mesh, Partial, Placement, Replicate


def canonical_coordinates(
    mesh_shape: Sequence[int], placements: Sequence[Placement]
) -> Iterator[tuple[int, ...]]:
    """Coordinates at position 0 along every ``R`` mesh dim, row-major (INTEROP-1)."""
    for c in coordinates(mesh_shape):
        if all(ci == 0 for ci, p in zip(c, placements, strict=True) if isinstance(p, Replicate)):
            yield c


def to_sharded_metadata_verdict(
    global_shape: Sequence[int], mesh_shape: Sequence[int], placements: Sequence[Placement]
) -> Verdict:
    """Whether a valid layout has boxes. Check order: INTEROP-5 (no ``P``), INTEROP-6 (every
    index sequence of every coordinate that holds an element an interval)."""
    # INTEROP-5
    if any(isinstance(p, Partial) for p in placements):
        return value_error("INTEROP-5")
    # INTEROP-6
    for c in coordinates(mesh_shape):
        sequences = index_sequences(global_shape, mesh_shape, placements, c)
        if all(sequences) and not all(map(is_interval, sequences)):
            return value_error("INTEROP-6")
    return VALID


def to_sharded_metadata(
    global_shape: Sequence[int],
    dtype: str,
    mesh: Mesh,
    placements: Sequence[Placement],
    device_type: str = "cpu",
) -> TensorMeta:
    """``to_sharded_metadata`` for a valid case (INTEROP-1 to 4, 7): the boxes tile the tensor
    (INTEROP-2) and empty ones sit at the end of their dim (INTEROP-3)."""
    shards = []
    for c in canonical_coordinates(mesh.shape, placements):
        shape, offset = local_shape_and_offset(global_shape, mesh.shape, placements, c)
        shards.append(ShardMeta(offset, shape, f"rank:{rank_at(mesh, c)}/{device_type}"))
    return TensorMeta(tuple(shards), tuple(global_shape), Properties(dtype=dtype))


Box = tuple[tuple[int, ...], tuple[int, ...]]


def holders(
    global_shape: Sequence[int], mesh: Mesh, placements: Sequence[Placement]
) -> dict[Box, set[int]]:
    """Each non-empty box of the layout, as ``(offsets, sizes)``, with the ranks whose coordinate
    holds exactly it: the ranks that may write it in a checkpoint (INTEROP-8)."""
    held: dict[Box, set[int]] = {}
    for c in coordinates(mesh.shape):
        shape, offset = local_shape_and_offset(global_shape, mesh.shape, placements, c)
        if all(shape):
            held.setdefault((tuple(offset), tuple(shape)), set()).add(rank_at(mesh, c))
    return held
