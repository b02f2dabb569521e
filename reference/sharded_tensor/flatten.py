"""Flattening 2-D nested sharded tensors for checkpoints (spec/st-flatten.md).

A local rewrite, no communication (ST-FLAT-9): the outer tensor's single local shard holds an
inner sharded tensor, and the flat tensor lists this rank's inner piece in global coordinates.

Rules and where they live:

- ST-FLAT-1: ``_rewrite``
- ST-FLAT-2: ``_rewrite``, ``_flatten``
- ST-FLAT-3, ST-FLAT-4, ST-FLAT-5, ST-FLAT-6, ST-FLAT-8: ``_flatten``
- ST-FLAT-7: ``_flatten``, ``_without``
- ST-FLAT-9: ``flatten_sharded_tensors``
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from reference.sharded_tensor.metadata import Shard, ShardedTensorMetadata, ShardMetadata
from reference.sharded_tensor.sharded_tensor import ShardedTensor

_DROP = object()  # marks a value this rank leaves out (ST-FLAT-2)


def flatten_sharded_tensors(state_dict: dict[str, Any]) -> dict[str, Any]:
    """A new state dict in which every nested sharded tensor is replaced by its flat form.

    Note: PyTorch names this ``_flatten_sharded_tensors`` in torch.distributed.checkpoint.
    """
    return _rewrite(state_dict)


def _rewrite(value: Any) -> Any:
    # ST-FLAT-1: dicts and lists keep their structure; other values are passed as they are.
    if isinstance(value, dict):
        rewritten = {key: _rewrite(item) for key, item in value.items()}
        return {key: item for key, item in rewritten.items() if item is not _DROP}
    if isinstance(value, list):
        return [item for item in map(_rewrite, value) if item is not _DROP]
    if isinstance(value, ShardedTensor):
        return _flatten(value)
    return value


def _flatten(outer: ShardedTensor) -> ShardedTensor | object:
    local = outer.local_shards()
    # ST-FLAT-2: nothing here to write.
    if not local:
        return _DROP
    # ST-FLAT-3: only the single-shard nested form is rewritten.
    if len(local) > 1 or not isinstance(local[0].tensor, ShardedTensor):
        return outer
    o, inner = local[0].metadata, local[0].tensor
    # ST-FLAT-4: one inner local shard.
    if len(inner.local_shards()) != 1:
        raise ValueError(
            f"[ST-FLAT-4] the inner tensor has {len(inner.local_shards())} local shards here, "
            "flattening needs exactly 1"
        )
    i, x = inner.local_shards()[0].metadata, inner.local_shards()[0].tensor
    me = dist.get_rank()

    def shifted(box: ShardMetadata, placement: str) -> ShardMetadata:
        offsets = [a + b for a, b in zip(o.shard_offsets, box.shard_offsets, strict=True)]
        return ShardMetadata(offsets, box.shard_sizes, placement)

    # ST-FLAT-6: the inner local shard, in outer coordinates, placed here.
    here = shifted(i, f"rank:{me}/{x.device}")
    # ST-FLAT-8: other entries name another rank (a placeholder, as PyTorch does).
    elsewhere = f"rank:{1 if me == 0 else 0}/cpu"
    outer_md, inner_md = outer.metadata(), inner.metadata()
    # ST-FLAT-7: the outer boxes but this rank's, then the inner boxes but the local one, shifted.
    boxes = _without(outer_md.shards_metadata, o)
    boxes = [ShardMetadata(b.shard_offsets, b.shard_sizes, elsewhere) for b in boxes]
    boxes += [shifted(b, elsewhere) for b in _without(inner_md.shards_metadata, i)]
    # ST-FLAT-5: the outer size and properties.
    metadata = ShardedTensorMetadata([*boxes, here], outer_md.size, outer_md.tensor_properties)
    return ShardedTensor(metadata, [Shard(x, here)], outer.process_group)


def _without(shards: list[ShardMetadata], box: ShardMetadata) -> list[ShardMetadata]:
    """``shards`` less one entry with ``box``'s offsets and sizes."""
    key = (box.shard_offsets, box.shard_sizes)
    index = next(n for n, s in enumerate(shards) if (s.shard_offsets, s.shard_sizes) == key)
    return shards[:index] + shards[index + 1 :]
