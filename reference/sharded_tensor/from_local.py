"""Construction from local shards (ST-LIFE-12 to 14): wrap tensors every rank already holds.

Every rank passes its own shards, so the checks of spec/st-validation.md about those shards and
across ranks live here, not in ``validation.py``: one size and one set of properties on every
rank (ST-VALID-6), one global metadata (7), each shard placed on the rank that passes it (10) and
exactly that rank's entries (11). The checks one rank makes alone are ``validation.py``'s.

Rules and where they live:

- ST-LIFE-12, ST-LIFE-13: ``init_from_local_shards``, ``LocalFacts``
- ST-LIFE-14: ``init_from_local_shards_and_global_metadata``
- ST-LIFE-15: ``init_from_local_shards_and_global_metadata`` (local shards in metadata order)
- ST-VALID-6: ``init_from_local_shards``
- ST-VALID-7, ST-VALID-11: ``init_from_local_shards_and_global_metadata``
- ST-VALID-10: ``_check_own``
- ST-VALID-14: ``init_from_local_shards`` (no rank passed a shard)
- ST-VALID-2, ST-VALID-3, ST-VALID-4, ST-VALID-5, ST-VALID-8, ST-VALID-9, ST-VALID-12,
  ST-VALID-13: see ``reference.sharded_tensor.validation``
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.distributed as dist

from reference.sharded_tensor.create import check_properties, parse_size
from reference.sharded_tensor.metadata import (
    Shard,
    ShardedTensorMetadata,
    ShardMetadata,
    TensorProperties,
)
from reference.sharded_tensor.sharded_tensor import ShardedTensor
from reference.sharded_tensor.validation import check_layout, check_local_tensor, check_placements
from reference.verdict import group_of, reach_verdict, require_same


class LocalFacts(NamedTuple):
    """What each rank tells the others: the size it was given, its shards' properties (``None``
    where it holds none) and its boxes, which concatenated in group-rank order are the layout."""

    size: torch.Size
    properties: TensorProperties | None
    boxes: list[ShardMetadata]


def _check_own(shards: Sequence[Shard], members: list[int]) -> None:
    """Each local shard is a Shard placed on this rank (ST-VALID-10, 12, 13)."""
    if not all(isinstance(s, Shard) and isinstance(s.tensor, torch.Tensor) for s in shards):
        raise TypeError("local_shards must be a list of Shard holding tensors")
    check_placements([s.metadata for s in shards], members)
    me = dist.get_rank()
    for shard in shards:
        # ST-VALID-10: placed on the rank that holds it (its global rank).
        if shard.metadata.placement.rank() != me:
            raise ValueError(
                f"[ST-VALID-10] global rank {me} holds a shard placed on "
                f"rank {shard.metadata.placement.rank()}: {shard.metadata}"
            )


def init_from_local_shards(
    local_shards: Sequence[Shard], *size: int | Sequence[int], process_group=None
) -> ShardedTensor:
    """The layout is every rank's local shard metadata, concatenated in group-rank order."""
    group = group_of(process_group)

    def check():
        shape = parse_size(size)
        shards = list(local_shards)
        _check_own(shards, dist.get_process_group_ranks(group))
        for shard in shards:
            # ST-VALID-8, 9: size and device as the metadata says, contiguous. No properties are
            # given here, so they are not checked against any (ST-VALID-6 compares them).
            check_local_tensor(shard.tensor, shard.metadata, None)
        kinds = [TensorProperties.of(s.tensor) for s in shards]
        # ST-VALID-6: this rank's local tensors share one set of properties.
        for kind in kinds[1:]:
            if kind != kinds[0]:
                raise ValueError(
                    f"[ST-VALID-6] the local tensors of rank {dist.get_rank()} differ in their "
                    f"properties: {kinds[0]} and {kind}"
                )
        props = kinds[0] if kinds else None
        return shards, LocalFacts(shape, props, [s.metadata for s in shards])

    shards, shared = reach_verdict(group, check)
    # ST-VALID-6: one global size; one set of properties among the ranks that hold shards.
    require_same([f.size for f in shared], "ST-VALID-6", "the global size")
    given = [f.properties for f in shared if f.properties is not None]
    # ST-VALID-14: some rank holds a shard.
    if not given:
        raise ValueError("[ST-VALID-14] no rank passed a local shard")
    require_same(given, "ST-VALID-6", "the tensor properties")
    layout = [box for f in shared for box in f.boxes]
    metadata = ShardedTensorMetadata(layout, shared[0].size, given[0])
    # ST-VALID-2 to 5: the concatenated layout tiles the size (same answer on every rank).
    check_layout(metadata)
    return ShardedTensor(metadata, shards, group)


def init_from_local_shards_and_global_metadata(
    local_shards: Sequence[Shard], metadata: ShardedTensorMetadata, process_group=None
) -> ShardedTensor:
    """The layout is given on every rank; each rank's shards must be exactly its entries."""
    group = group_of(process_group)

    def check():
        if not isinstance(metadata, ShardedTensorMetadata):
            raise TypeError(f"expected ShardedTensorMetadata, got {type(metadata).__name__}")
        check_properties(metadata.tensor_properties)
        check_layout(metadata)
        # ST-VALID-12, 13: every entry names a rank of the group.
        members = dist.get_process_group_ranks(group)
        check_placements(metadata.shards_metadata, members)
        shards = list(local_shards)
        _check_own(shards, members)
        me = dist.get_rank()
        entries = [s for s in metadata.shards_metadata if s.placement.rank() == me]
        # ST-VALID-11: the local shards are this rank's entries, no more, no fewer.
        if Counter(s.metadata for s in shards) != Counter(entries):
            raise ValueError(
                f"[ST-VALID-11] rank {me} passed shards {[s.metadata for s in shards]}, "
                f"the metadata places {entries} here"
            )
        for shard in shards:
            check_local_tensor(shard.tensor, shard.metadata, metadata.tensor_properties)
        # ST-LIFE-15: local shards in shards_metadata order.
        ordered = sorted(shards, key=lambda s: entries.index(s.metadata))
        return ordered, metadata

    shards, layouts = reach_verdict(group, check)
    # ST-VALID-7: one layout on every rank.
    require_same(layouts, "ST-VALID-7", "the global metadata")
    return ShardedTensor(metadata, shards, group)
