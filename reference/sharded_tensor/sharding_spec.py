"""Sharding specs (spec/st-sharding-spec.md): pure rules from a global size to a layout.

Pure, so every rank computes the same layout alone and a constructor only has to check that the
ranks were given equal specs. The chunk rule itself is ``reference/chunks.py``'s, shared with
DTensor's ``Shard``; whether ``shard`` takes an ``EnumerableShardingSpec`` is ``shard.py``'s.

Rules and where they live:

- ST-SPEC-1, ST-SPEC-5, ST-SPEC-6: ``ChunkShardingSpec.build_metadata``
- ST-SPEC-2, ST-SPEC-3, ST-SPEC-4: see ``reference.chunks``
- ST-SPEC-7, ST-SPEC-8: ``ChunkShardingSpec.__init__``
- ST-SPEC-10: ``ChunkShardingSpec.build_metadata``, ``EnumerableShardingSpec.build_metadata``
- ST-SPEC-11: ``EnumerableShardingSpec.__init__``
- ST-SPEC-12: ``EnumerableShardingSpec.build_metadata``
- ST-SPEC-13: see ``reference.sharded_tensor.shard``
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from reference.chunks import chunk_bounds
from reference.sharded_tensor.metadata import (
    ShardedTensorMetadata,
    ShardMetadata,
    TensorProperties,
)
from reference.sharded_tensor.placement import Placement, as_placement
from reference.sharded_tensor.validation import check_layout, find_overlap


class ShardingSpec:
    """A rule that lays out a tensor of any size: ``build_metadata(size, properties)``.

    Pure and deterministic (ST-SPEC-10): every rank computes the same layout alone.
    """

    def build_metadata(
        self, size: torch.Size, properties: TensorProperties
    ) -> ShardedTensorMetadata:
        raise NotImplementedError


class ChunkShardingSpec(ShardingSpec):
    """Split ``dim`` into ``len(placements)`` chunks the way ``torch.chunk`` does; chunk ``c``
    goes to ``placements[c]`` (ST-SPEC-1, ST-SPEC-5)."""

    def __init__(self, dim: int, placements: Sequence[str | Placement]) -> None:
        # ST-SPEC-7: dim is an int, not a bool, a float or a name.
        if type(dim) is not int:
            raise TypeError(f"[ST-SPEC-7] dim must be an int, got {dim!r}")
        # ST-SPEC-8: at least one placement.
        if not placements:
            raise ValueError("[ST-SPEC-8] a ChunkShardingSpec needs at least one placement")
        self.dim = dim
        self.placements = [as_placement(p) for p in placements]

    def build_metadata(
        self, size: torch.Size, properties: TensorProperties
    ) -> ShardedTensorMetadata:
        n = len(size)
        # ST-SPEC-6: -n <= dim < n; a 0-d tensor has no dim to split.
        if not -n <= self.dim < n:
            raise ValueError(f"[ST-SPEC-6] dim {self.dim} is out of range for size {list(size)}")
        d = self.dim % n
        k = len(self.placements)
        shards = []
        for c, placement in enumerate(self.placements):
            # ST-SPEC-1, 2, 3, 4: chunk_bounds, so an empty chunk starts at size[d].
            lo, hi = chunk_bounds(size[d], k, c)
            offsets = [lo if i == d else 0 for i in range(n)]
            sizes = [hi - lo if i == d else s for i, s in enumerate(size)]
            shards.append(ShardMetadata(offsets, sizes, placement))
        return ShardedTensorMetadata(shards, torch.Size(size), properties)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChunkShardingSpec) and (self.dim, self.placements) == (
            other.dim,
            other.placements,
        )

    def __repr__(self) -> str:
        return f"ChunkShardingSpec(dim={self.dim}, placements={self.placements})"


class EnumerableShardingSpec(ShardingSpec):
    """An explicit list of shards: the spec is the layout."""

    def __init__(self, shards: Sequence[ShardMetadata]) -> None:
        # ST-SPEC-11: non-empty, one ndim, no overlap.
        if not shards:
            raise ValueError("[ST-SPEC-11] an EnumerableShardingSpec needs at least one shard")
        if not all(isinstance(s, ShardMetadata) for s in shards):
            raise TypeError("[ST-SPEC-11] shards must be ShardMetadata")
        if len({s.ndim for s in shards}) > 1:
            raise ValueError(f"[ST-SPEC-11] shards of different ndim: {list(shards)}")
        pair = find_overlap(shards)
        if pair is not None:
            a, b = pair
            raise ValueError(f"[ST-SPEC-11] shards {a} and {b} overlap: {shards[a]}, {shards[b]}")
        self.shards = list(shards)

    def build_metadata(
        self, size: torch.Size, properties: TensorProperties
    ) -> ShardedTensorMetadata:
        metadata = ShardedTensorMetadata(list(self.shards), torch.Size(size), properties)
        # ST-SPEC-12: the shards must tile the size.
        check_layout(metadata)
        return metadata

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EnumerableShardingSpec) and self.shards == other.shards

    def __repr__(self) -> str:
        return f"EnumerableShardingSpec({self.shards})"


def spec_of(metadata: ShardedTensorMetadata) -> ShardingSpec:
    """The spec a layout follows: the chunk spec that builds exactly it, else the enumeration."""
    placements = [s.placement for s in metadata.shards_metadata]
    if metadata.size and all(p is not None for p in placements):
        for dim in range(len(metadata.size)):
            chunk = ChunkShardingSpec(dim, placements)
            built = chunk.build_metadata(metadata.size, metadata.tensor_properties)
            if built.shards_metadata == metadata.shards_metadata:
                return chunk
    return EnumerableShardingSpec(metadata.shards_metadata)
