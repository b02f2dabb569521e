"""Reshard (spec/st-reshard.md): chunk layout to chunk layout, moving only the pieces that
change rank.

The checks tell invalid requests (``ValueError``, ``TypeError``) from unsupported ones
(``NotImplementedError``) on every rank before any data moves; the move is ``transfer.py``'s.

Rules and where they live:

- ST-RESHARD-1, ST-RESHARD-2, ST-RESHARD-3, ST-RESHARD-4, ST-RESHARD-5, ST-RESHARD-6: ``reshard``
- ST-RESHARD-7, ST-RESHARD-8: ``check_reshard_args``
- ST-RESHARD-9: ``check_reshard_args``, ``reshard``
- ST-RESHARD-11: see ``reference.sharded_tensor.transfer``
- ST-SPEC-6: see ``reference.sharded_tensor.sharding_spec``
- ST-VALID-12: see ``reference.sharded_tensor.validation``
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from reference.sharded_tensor.metadata import Shard, ShardedTensorMetadata
from reference.sharded_tensor.sharding_spec import ChunkShardingSpec, ShardingSpec
from reference.sharded_tensor.transfer import transfer
from reference.sharded_tensor.validation import check_placements
from reference.verdict import reach_verdict, require_same

if TYPE_CHECKING:
    from reference.sharded_tensor.sharded_tensor import ShardedTensor


def check_reshard_args(t: ShardedTensor, spec: ShardingSpec) -> ShardedTensorMetadata:
    """The new layout, after the checks that tell invalid from unsupported requests."""
    # ST-RESHARD-9: a ShardingSpec.
    if not isinstance(spec, ShardingSpec):
        raise TypeError(f"[ST-RESHARD-9] expected a ShardingSpec, got {type(spec).__name__}")
    specs = {"the tensor's spec": t.sharding_spec(), "the new spec": spec}
    # ST-RESHARD-7: chunk to chunk only.
    for name, s in specs.items():
        if not isinstance(s, ChunkShardingSpec):
            raise NotImplementedError(f"[ST-RESHARD-7] {name} is not a ChunkShardingSpec: {s}")
    # ST-RESHARD-9: dim in range (ST-SPEC-6) and placements on members (ST-VALID-12).
    metadata = spec.build_metadata(t.size(), t.metadata().tensor_properties)
    members = dist.get_process_group_ranks(t.process_group)
    check_placements(metadata.shards_metadata, members)
    # ST-RESHARD-8: placements name every member exactly once.
    for name, s in specs.items():
        if sorted(p.rank() for p in s.placements) != sorted(members):
            raise NotImplementedError(
                f"[ST-RESHARD-8] {name} does not place one chunk on each member of {members}: {s}"
            )
    return metadata


def reshard(t: ShardedTensor, spec: ShardingSpec) -> tuple[ShardedTensorMetadata, list[Shard]]:
    metadata, specs = reach_verdict(t.process_group, lambda: (check_reshard_args(t, spec), spec))
    # ST-RESHARD-9: one new spec on every member.
    require_same(specs, "ST-RESHARD-9", "the new spec")
    props = metadata.tensor_properties
    me = dist.get_rank()
    mine = [(j, s) for j, s in enumerate(metadata.shards_metadata) if s.placement.rank() == me]
    new_tensors = {
        j: torch.empty(
            s.shard_sizes,
            dtype=props.dtype,
            device=s.placement.device(),
            pin_memory=props.pin_memory,
        )
        for j, s in mine
    }
    # ST-RESHARD-1: as if gathered and sharded again, but each piece moves once, owner to owner.
    old = t.metadata().shards_metadata
    transfer(t.process_group, old, t.local_shards_by_index(), metadata.shards_metadata, new_tensors)
    shards = [Shard(new_tensors[j].requires_grad_(props.requires_grad), s) for j, s in mine]
    return metadata, shards
