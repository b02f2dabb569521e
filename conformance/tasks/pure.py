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
from conformance.tasks import codec
from conformance.world import Case, RankContext
from conformance.world.protocol import Outcome
from conformance.world.rank import execute


def case(task: str, impl: str, **args: Any) -> Case:
    """The case that runs pure task ``task`` of this module with the adapter ``impl``."""
    return Case(f"{__name__}:{task}", {"impl": impl, **args})


def each(ctx: RankContext, impl: str, name: str, calls: list[dict[str, Any]]) -> list[Outcome]:
    """Pure task ``name`` once per argument set of ``calls``, in one trip to the sandbox: each
    call's outcome is the one its own case would have (``case(name, impl, **args)``), so the
    driver judges, reports and replays every call alone: every coordinate of a layout costs one
    trip, not one each."""
    cases = [case(name, impl, **args) for args in calls]
    return [execute(ctx, c.task, c.args) for c in cases]


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
    adapter = adapters.load(impl)
    adapter.st_chunk_spec(dim, placements).build_metadata(
        torch.Size([4, 4]), adapter.st_tensor_properties(dtype=torch.float32)
    )


def validate(ctx: RankContext, impl: str, shards: list[dict], shape: list[int]) -> None:
    adapters.load(impl).st_validate(shards, shape)


def enumerable_spec(ctx: RankContext, impl: str, boxes: list[list[Any]]) -> None:
    """``EnumerableShardingSpec`` of ``[offsets, sizes, placement]`` boxes."""
    adapter = adapters.load(impl)
    adapter.st_enumerable_spec([adapter.st_shard_metadata(o, s, p) for o, s, p in boxes])


def enumerable_spec_build(
    ctx: RankContext, impl: str, boxes: list[list[Any]], shape: list[int]
) -> dict[str, Any]:
    """``build_metadata`` of an ``EnumerableShardingSpec``: does the result keep the spec's
    shards in order, the size and the properties given?"""
    adapter = adapters.load(impl)
    made = [adapter.st_shard_metadata(o, s, p) for o, s, p in boxes]
    props = adapter.st_tensor_properties(dtype=torch.float32)
    built = adapter.st_enumerable_spec(made).build_metadata(torch.Size(shape), props)
    return {
        "shards": [str(m) for m in built.shards_metadata],
        "shards_as_given": list(built.shards_metadata) == made,
        "size": list(built.size),
        "properties_as_given": built.tensor_properties == props,
    }


# -- ShardedTensor: metadata ------------------------------------------------------------------


def shard_metadata(
    ctx: RankContext, impl: str, offsets: list[Any], sizes: list[Any], placement: Any
) -> dict[str, Any]:
    made = adapters.load(impl).st_shard_metadata(offsets, sizes, codec.placement_arg(placement))
    return {"offsets": len(made.shard_offsets), "sizes": list(made.shard_sizes)}


def remote_device(ctx: RankContext, impl: str, text: str) -> dict[str, Any]:
    """A placement string as the implementation reads it: rank, device and how it prints."""
    parsed = adapters.load(impl).st_remote_device(text)
    return {"rank": parsed.rank(), "device": str(parsed.device()), "str": str(parsed)}


def remote_devices_equal(ctx: RankContext, impl: str, a: str, b: str) -> bool:
    adapter = adapters.load(impl)
    return adapter.st_remote_device(a) == adapter.st_remote_device(b)


def shard_metadata_equal(
    ctx: RankContext, impl: str, left: list[Any], right: list[Any]
) -> dict[str, bool]:
    """``ShardMetadata`` of tuples (``left``) against one of lists (``right``)."""
    adapter = adapters.load(impl)
    a = adapter.st_shard_metadata(tuple(left[0]), tuple(left[1]), left[2])
    b = adapter.st_shard_metadata(list(right[0]), list(right[1]), right[2])
    return {"eq": a == b, "hash_eq": hash(a) == hash(b)}


def tensor_properties_defaults(ctx: RankContext, impl: str, default_dtype: str) -> dict[str, Any]:
    """``TensorProperties()`` made while ``default_dtype`` is torch's default dtype."""
    before = torch.get_default_dtype()
    try:
        torch.set_default_dtype(getattr(torch, default_dtype))
        props = adapters.load(impl).st_tensor_properties()
    finally:
        torch.set_default_dtype(before)
    names = ("dtype", "layout", "requires_grad", "memory_format", "pin_memory")
    return {name: str(getattr(props, name)).removeprefix("torch.") for name in names}


def tensor_properties_state(ctx: RankContext, impl: str, props: dict[str, Any]) -> dict[str, Any]:
    """``__getstate__`` of ``TensorProperties``, and whether it survives pickling."""
    adapter = adapters.load(impl)
    made = codec.properties(adapter, props)
    dtype, layout, requires_grad, encoding, pin_memory = made.__getstate__()
    return {
        "state": [
            str(dtype).removeprefix("torch."),
            str(layout).removeprefix("torch."),
            requires_grad,
            encoding.value,
            pin_memory,
        ],
        "encoding_is_the_table": type(encoding) is adapter.st_memory_format_encoding(),
        "pickle_round_trip": pickle.loads(pickle.dumps(made)) == made,
    }


def pickle_tensor_properties(ctx: RankContext, impl: str, memory_format: str) -> None:
    adapter = adapters.load(impl)
    pickle.dumps(adapter.st_tensor_properties(memory_format=getattr(torch, memory_format)))


def sharded_tensor_metadata(
    ctx: RankContext,
    impl: str,
    boxes: list[list[Any]],
    size: list[int],
    props: dict[str, Any],
) -> dict[str, Any]:
    """``ShardedTensorMetadata`` of ``boxes``: what it keeps, how it pickles, and whether it
    equals the same metadata with its shards reversed."""
    adapter = adapters.load(impl)
    shards = [adapter.st_shard_metadata(o, s, p) for o, s, p in boxes]
    meta = adapter.st_sharded_tensor_metadata(
        shards, torch.Size(size), codec.properties(adapter, props)
    )
    back = pickle.loads(pickle.dumps(meta))
    reordered = shards[::-1]
    other = adapter.st_sharded_tensor_metadata(
        reordered, torch.Size(size), codec.properties(adapter, props)
    )
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
    adapter = adapters.load(impl)
    meta = adapter.st_sharded_tensor_metadata()
    return {
        "shards": len(meta.shards_metadata),
        "size": list(meta.size),
        "default_properties": meta.tensor_properties == adapter.st_tensor_properties(),
    }
