"""A DTensor's layout as ShardedTensor metadata: the boxes checkpointing saves (spec/interop.md).

A pure function: no process group, the same answer on every rank (INTEROP-7). The boxes are the
layout's, so they tile the tensor as a ShardedTensor's must.

Rules and where they live:

- INTEROP-1, INTEROP-2, INTEROP-3, INTEROP-4, INTEROP-5, INTEROP-6, INTEROP-7:
  ``to_sharded_metadata``
- INTEROP-8, INTEROP-9: ``checkpoint_plan``
- DT-LAYOUT-4: see ``reference.dtensor.layout``
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from reference.dtensor.dtensor import DTensor
from reference.dtensor.layout import index_sequences, is_interval, local_shape_and_offset
from reference.dtensor.placements import Partial, Placement, Replicate, normalize
from reference.sharded_tensor.metadata import (
    ShardedTensorMetadata,
    ShardMetadata,
    TensorProperties,
)


def to_sharded_metadata(
    global_shape: Sequence[int],
    dtype: torch.dtype,
    mesh_tensor: torch.Tensor,
    placements: Sequence[Placement],
    device_type: str,
) -> ShardedTensorMetadata:
    """One box per canonical coordinate (position 0 along every ``R`` mesh dim), row-major."""
    mesh_shape = tuple(mesh_tensor.shape)
    placements = normalize(placements, len(global_shape), len(mesh_shape))
    # INTEROP-5
    if any(isinstance(p, Partial) for p in placements):
        raise ValueError("[INTEROP-5] a Partial layout has no boxes; redistribute to R or S first")
    boxes = []
    for coordinate in itertools.product(*(range(k) for k in mesh_shape)):
        # INTEROP-1: replicas (non-zero position along an R dim) hold copies.
        if any(c and isinstance(p, Replicate) for c, p in zip(coordinate, placements, strict=True)):
            continue
        sequences = index_sequences(global_shape, mesh_shape, placements, coordinate)
        # INTEROP-6: a box of no element (some sequence empty) describes nothing wrongly.
        if all(sequences) and not all(is_interval(s) for s in sequences):
            raise ValueError(
                f"[INTEROP-6] coordinate {coordinate} holds indices that are not an interval"
            )
        # INTEROP-3: empty boxes stay, at the end of their dim (DT-LAYOUT-4).
        sizes, offsets = local_shape_and_offset(global_shape, mesh_shape, placements, coordinate)
        rank = int(mesh_tensor[coordinate])
        boxes.append(ShardMetadata(list(offsets), list(sizes), f"rank:{rank}/{device_type}"))
    return ShardedTensorMetadata(boxes, torch.Size(global_shape), TensorProperties(dtype=dtype))


def checkpoint_plan(dtensor: DTensor) -> ShardedTensorMetadata:
    """The boxes a checkpoint of ``dtensor`` writes, each with its writer: those of its layout.

    Each box is written once, by the canonical coordinate that holds it (INTEROP-8), under the
    DTensor's global shape and dtype (INTEROP-9). Every rank computes the whole plan from what it
    already holds, so nothing is sent: a save planner gathers every rank's boxes to drop the
    copies of replicas, which a pure conversion never makes (INTEROP-7)."""
    mesh = dtensor.device_mesh
    return to_sharded_metadata(
        dtensor.shape, dtensor.dtype, mesh.mesh, dtensor.placements, mesh.device_type
    )
