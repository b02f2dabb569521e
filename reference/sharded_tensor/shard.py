"""shard (ST-LIFE-7 to 11): lay out the source rank's tensor by a spec and scatter it.

Every rank builds the layout from its own tensor's shape, so the ranks first agree on the spec,
the source and the tensor's shape and dtype; only then does the source send each rank its boxes.

Rules and where they live:

- ST-LIFE-5, ST-LIFE-7, ST-LIFE-8, ST-LIFE-11: ``shard``
- ST-LIFE-9, ST-LIFE-10: ``shard``, ``ShardFacts``
- ST-SPEC-13: ``shard`` (an EnumerableShardingSpec is declined)
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import torch
import torch.distributed as dist

from reference.sharded_tensor.create import check_properties
from reference.sharded_tensor.metadata import Shard, ShardMetadata, TensorProperties
from reference.sharded_tensor.sharded_tensor import ShardedTensor
from reference.sharded_tensor.sharding_spec import EnumerableShardingSpec, ShardingSpec
from reference.sharded_tensor.transfer import transfer
from reference.sharded_tensor.validation import check_layout, check_placements
from reference.verdict import group_of, reach_verdict, require_same


class ShardFacts(NamedTuple):
    """What each rank tells the others before any data moves: its arguments and its tensor."""

    spec: ShardingSpec
    src_rank: int
    shape: tuple[int, ...]
    dtype: torch.dtype
    properties: TensorProperties


def shard(
    tensor: torch.Tensor,
    spec: ShardingSpec,
    src_rank: int = 0,
    process_group: dist.ProcessGroup | None = None,
) -> ShardedTensor:
    """Every rank gets its boxes of ``tensor`` as held by group rank ``src_rank``.

    The other ranks' tensors give only their shape and dtype, which must match the source's.
    """
    group = group_of(process_group)

    def check():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"expected a tensor to shard, got {type(tensor).__name__}")
        # ST-LIFE-5: a ShardingSpec.
        if not isinstance(spec, ShardingSpec):
            raise TypeError(f"[ST-LIFE-5] expected a ShardingSpec, got {type(spec).__name__}")
        # ST-SPEC-13: scattering arbitrary boxes is left out.
        if isinstance(spec, EnumerableShardingSpec):
            raise NotImplementedError("[ST-SPEC-13] shard with an EnumerableShardingSpec")
        # ST-LIFE-8: src_rank is a group rank.
        if type(src_rank) is not int:
            raise TypeError(f"[ST-LIFE-8] src_rank must be an int, got {src_rank!r}")
        if not 0 <= src_rank < group.size():
            raise ValueError(
                f"[ST-LIFE-8] src_rank {src_rank} is not a rank of a group of {group.size()}"
            )
        # ST-LIFE-7: the source's properties, always contiguous (ST-LIFE-11).
        props = TensorProperties.of(tensor)
        check_properties(props)
        metadata = spec.build_metadata(tensor.shape, props)
        check_layout(metadata)
        check_placements(metadata.shards_metadata, dist.get_process_group_ranks(group))
        return metadata, ShardFacts(spec, src_rank, tuple(tensor.shape), tensor.dtype, props)

    metadata, shared = reach_verdict(group, check)
    # ST-LIFE-9: one source, one spec.
    require_same([(f.spec, f.src_rank) for f in shared], "ST-LIFE-9", "(spec, src_rank)")
    # ST-LIFE-10: one shape and dtype.
    require_same([(f.shape, f.dtype) for f in shared], "ST-LIFE-10", "the tensor's (shape, dtype)")
    # ST-LIFE-7: requires_grad and pinning follow the source.
    props = shared[src_rank].properties
    metadata = dataclasses.replace(metadata, tensor_properties=props)

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
    source = dist.get_global_rank(group, src_rank)
    kind = metadata.shards_metadata[0].placement.device().type  # the shards' device type
    whole = ShardMetadata([0] * tensor.dim(), list(tensor.shape), f"rank:{source}/{kind}")
    sources = {0: tensor} if me == source else {}
    transfer(group, [whole], sources, metadata.shards_metadata, new_tensors)
    shards = [Shard(new_tensors[j].requires_grad_(props.requires_grad), s) for j, s in mine]
    return ShardedTensor(metadata, shards, group, spec)
