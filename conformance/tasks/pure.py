"""Pure tasks: the calls of an implementation that need no process group (metadata, placements,
layouts), run in the sandbox (``LocalWorld(process_group=False)``), a child of the driver.

The driver never calls the implementation itself: a crash or a hang in a pure call is then a
failed case with its report, like a rank's, never the end of the run. Each task makes the call
and returns what the driver judges as plain data; it never judges. Values that are not JSON
(a ``torch.device`` placement, a memory format) travel as ``{"torch.device": "cpu"}`` or by name.
"""

from __future__ import annotations

import pickle
from typing import Any

import torch

from conformance import adapters
from conformance.world import Case, RankContext


def case(task: str, impl: str, **args: Any) -> Case:
    """The case that runs pure task ``task`` of this module with the adapter ``impl``."""
    return Case(f"{__name__}:{task}", {"impl": impl, **args})


# -- DTensor ----------------------------------------------------------------------------------


def local_shape_and_offset(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    mesh_shape: list[int],
    placements: list[str],
    coordinate: list[int],
) -> list[list[int]]:
    local, offset = adapters.load(impl).dt_local_shape_and_offset(
        shape, mesh_shape, placements, coordinate
    )
    return [list(local), list(offset)]


def placement(ctx: RankContext, impl: str, construction: list[Any]) -> str:
    """Construct a placement; its ``str``."""
    return str(adapters.load(impl).dt_placement(*construction))


def placements_compare(ctx: RankContext, impl: str, a: list[Any], b: list[Any]) -> dict[str, bool]:
    adapter = adapters.load(impl)
    pa, pb = adapter.dt_placement(*a), adapter.dt_placement(*b)
    return {"eq": pa == pb, "ne": pa != pb, "hash_eq": hash(pa) == hash(pb)}


def distinct_placements(ctx: RankContext, impl: str, constructions: list[list[Any]]) -> int:
    adapter = adapters.load(impl)
    return len({adapter.dt_placement(*c) for c in constructions})


def to_sharded_metadata(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    mesh_shape: list[int],
    ranks: list[int],
    placements: list[str],
) -> list[dict[str, Any]]:
    """The boxes of a DTensor layout (INTEROP-7: the sandbox has no process group)."""
    return adapters.load(impl).dt_to_sharded_metadata(
        shape, "float32", mesh_shape, ranks, placements, "cpu"
    )


# -- ShardedTensor: sharding specs and validation ---------------------------------------------


def chunk_metadata(
    ctx: RankContext, impl: str, shape: list[int], dim: int, placements: list[str]
) -> list[dict[str, Any]]:
    return adapters.load(impl).st_chunk_metadata(shape, dim, placements)


def chunk_spec_build(ctx: RankContext, impl: str, dim: Any, placements: list[str]) -> None:
    """``ChunkShardingSpec(dim, placements).build_metadata((4, 4))``, as given (any ``dim``)."""
    api = adapters.load(impl).st_api()
    api.ChunkShardingSpec(dim, placements).build_metadata(
        torch.Size([4, 4]), api.TensorProperties(dtype=torch.float32)
    )


def validate(ctx: RankContext, impl: str, shards: list[dict], shape: list[int]) -> None:
    adapters.load(impl).st_validate(shards, shape)


def enumerable_spec(ctx: RankContext, impl: str, boxes: list[list[Any]]) -> None:
    """``EnumerableShardingSpec`` of ``[offsets, sizes, placement]`` boxes."""
    api = adapters.load(impl).st_api()
    api.EnumerableShardingSpec([api.ShardMetadata(o, s, p) for o, s, p in boxes])


def enumerable_spec_build(
    ctx: RankContext, impl: str, boxes: list[list[Any]], shape: list[int]
) -> dict[str, Any]:
    """``build_metadata`` of an ``EnumerableShardingSpec``: does the result keep the spec's
    shards in order, the size and the properties given?"""
    api = adapters.load(impl).st_api()
    made = [api.ShardMetadata(o, s, p) for o, s, p in boxes]
    props = api.TensorProperties(dtype=torch.float32)
    built = api.EnumerableShardingSpec(made).build_metadata(torch.Size(shape), props)
    return {
        "shards": [str(m) for m in built.shards_metadata],
        "shards_as_given": list(built.shards_metadata) == made,
        "size": list(built.size),
        "properties_as_given": built.tensor_properties == props,
    }


# -- ShardedTensor: metadata ------------------------------------------------------------------


def _placement_arg(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"torch.device"}:
        return torch.device(value["torch.device"])
    return value


def shard_metadata(
    ctx: RankContext, impl: str, offsets: list[Any], sizes: list[Any], placement: Any
) -> dict[str, Any]:
    made = adapters.load(impl).st_api().ShardMetadata(offsets, sizes, _placement_arg(placement))
    return {"offsets": len(made.shard_offsets), "sizes": list(made.shard_sizes)}


def remote_device(ctx: RankContext, impl: str, text: str) -> dict[str, Any]:
    """A placement string as the implementation reads it: rank, device and how it prints."""
    parsed = adapters.load(impl).st_api().placement(text)
    return {"rank": parsed.rank(), "device": str(parsed.device()), "str": str(parsed)}


def remote_devices_equal(ctx: RankContext, impl: str, a: str, b: str) -> bool:
    api = adapters.load(impl).st_api()
    return api.placement(a) == api.placement(b)


def shard_metadata_equal(
    ctx: RankContext, impl: str, left: list[Any], right: list[Any]
) -> dict[str, bool]:
    """``ShardMetadata`` of tuples (``left``) against one of lists (``right``)."""
    api = adapters.load(impl).st_api()
    a = api.ShardMetadata(tuple(left[0]), tuple(left[1]), left[2])
    b = api.ShardMetadata(list(right[0]), list(right[1]), right[2])
    return {"eq": a == b, "hash_eq": hash(a) == hash(b)}


def _properties(api: Any, props: dict[str, Any]) -> Any:
    return api.TensorProperties(
        dtype=getattr(torch, props["dtype"]),
        layout=getattr(torch, props["layout"]),
        requires_grad=props["requires_grad"],
        memory_format=getattr(torch, props["memory_format"]),
        pin_memory=props["pin_memory"],
    )


def tensor_properties_defaults(ctx: RankContext, impl: str, default_dtype: str) -> dict[str, Any]:
    """``TensorProperties()`` made while ``default_dtype`` is torch's default dtype."""
    before = torch.get_default_dtype()
    try:
        torch.set_default_dtype(getattr(torch, default_dtype))
        props = adapters.load(impl).st_api().TensorProperties()
    finally:
        torch.set_default_dtype(before)
    names = ("dtype", "layout", "requires_grad", "memory_format", "pin_memory")
    return {name: str(getattr(props, name)).removeprefix("torch.") for name in names}


def tensor_properties_state(ctx: RankContext, impl: str, props: dict[str, Any]) -> dict[str, Any]:
    """``__getstate__`` of ``TensorProperties``, and whether it survives pickling."""
    api = adapters.load(impl).st_api()
    made = _properties(api, props)
    dtype, layout, requires_grad, encoding, pin_memory = made.__getstate__()
    return {
        "state": [
            str(dtype).removeprefix("torch."),
            str(layout).removeprefix("torch."),
            requires_grad,
            encoding.value,
            pin_memory,
        ],
        "encoding_is_the_table": type(encoding) is api.MEM_FORMAT_ENCODING,
        "pickle_round_trip": pickle.loads(pickle.dumps(made)) == made,
    }


def pickle_tensor_properties(ctx: RankContext, impl: str, memory_format: str) -> None:
    api = adapters.load(impl).st_api()
    pickle.dumps(api.TensorProperties(memory_format=getattr(torch, memory_format)))


def sharded_tensor_metadata(
    ctx: RankContext,
    impl: str,
    boxes: list[list[Any]],
    size: list[int],
    props: dict[str, Any],
) -> dict[str, Any]:
    """``ShardedTensorMetadata`` of ``boxes``: what it keeps, how it pickles, and whether it
    equals the same metadata with its shards reversed."""
    api = adapters.load(impl).st_api()
    shards = [api.ShardMetadata(o, s, p) for o, s, p in boxes]
    meta = api.ShardedTensorMetadata(shards, torch.Size(size), _properties(api, props))
    back = pickle.loads(pickle.dumps(meta))
    reordered = shards[::-1]
    other = api.ShardedTensorMetadata(reordered, torch.Size(size), _properties(api, props))
    return {
        "shards_as_given": list(meta.shards_metadata) == shards,
        "size": list(meta.size),
        "pickle_round_trip": back == meta,
        "placements_after_pickling": [
            [m.placement.rank(), str(m.placement.device())] for m in back.shards_metadata
        ],
        "placements": [[m.placement.rank(), str(m.placement.device())] for m in shards],
        "shard_round_trips": [pickle.loads(pickle.dumps(m)) == m for m in shards],
        "equal_reversed": other == meta,
        "shards_equal_reversed": reordered == shards,
    }


def sharded_tensor_metadata_defaults(ctx: RankContext, impl: str) -> dict[str, Any]:
    api = adapters.load(impl).st_api()
    meta = api.ShardedTensorMetadata()
    return {
        "shards": len(meta.shards_metadata),
        "size": list(meta.size),
        "default_properties": meta.tensor_properties == api.TensorProperties(),
    }
