"""A readable ShardedTensor (spec/st-*.md) on plain torch.distributed collectives.

One module per job: ``placement`` and ``metadata`` (the value objects), ``validation`` (pure
layout checks), ``verdict`` (every rank raises or none), ``sharding_spec``, ``transfer`` (the one
data path), the constructors ``create``, ``shard`` and ``from_local``, ``gather``, ``reshard``
and ``flatten``.

Each module's docstring lists the rules it implements and where they live.
"""

from reference.sharded_tensor.create import empty, full, ones, rand, randn, zeros
from reference.sharded_tensor.flatten import flatten_sharded_tensors
from reference.sharded_tensor.from_local import (
    init_from_local_shards,
    init_from_local_shards_and_global_metadata,
)
from reference.sharded_tensor.metadata import (
    MEM_FORMAT_ENCODING,
    Shard,
    ShardedTensorMetadata,
    ShardMetadata,
    TensorProperties,
)
from reference.sharded_tensor.placement import Placement
from reference.sharded_tensor.shard import shard
from reference.sharded_tensor.sharded_tensor import ShardedTensor, load_with_process_group
from reference.sharded_tensor.sharding_spec import (
    ChunkShardingSpec,
    EnumerableShardingSpec,
    ShardingSpec,
)
from reference.sharded_tensor.validation import check_layout, find_overlap

__all__ = [
    "MEM_FORMAT_ENCODING",
    "ChunkShardingSpec",
    "EnumerableShardingSpec",
    "Placement",
    "Shard",
    "ShardMetadata",
    "ShardedTensor",
    "ShardedTensorMetadata",
    "ShardingSpec",
    "TensorProperties",
    "check_layout",
    "empty",
    "find_overlap",
    "flatten_sharded_tensors",
    "full",
    "init_from_local_shards",
    "init_from_local_shards_and_global_metadata",
    "load_with_process_group",
    "ones",
    "rand",
    "randn",
    "shard",
    "zeros",
]
