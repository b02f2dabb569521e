"""Rank tasks of ``python -m conformance fixtures verify``: the data cases of ``fixtures/``
(explicit nested-list data instead of a seed), run through the adapter. They never judge."""

from __future__ import annotations

from typing import Any

import torch

from conformance import adapters
from conformance.oracle.tensors import torch_dtype
from conformance.tasks.dtensor import mesh
from conformance.tasks.sharded_tensor import placements_of
from conformance.world import RankContext


def tensor_of(data: Any, shape: list[int], dtype: str) -> torch.Tensor:
    return torch.tensor(data, dtype=torch_dtype(dtype)).reshape(shape)


def gather(
    ctx: RankContext,
    impl: str,
    source: Any,
    shape: list[int],
    dtype: str,
    dim: int,
    order: list[int],
    group: list[int],
    src: int,
    dst: int,
) -> dict[str, Any] | None:
    """Shard ``source`` from group rank ``src``, gather it to group rank ``dst``."""
    adapter = adapters.load(impl)
    process_group = ctx.group(group)
    if ctx.rank not in group:
        return None
    tensor = tensor_of(source, shape, dtype).to(ctx.device)
    st = adapter.st_shard(tensor, dim, placements_of(order, ctx.device), src, process_group)
    local = [(t.cpu(), meta) for t, meta in adapter.st_local_shards(st)]
    is_dst = group.index(ctx.rank) == dst
    out = torch.zeros(shape, dtype=torch_dtype(dtype), device=ctx.device) if is_dst else None
    adapter.st_gather(st, dst, out)
    return {"local": local, "out": out}


def reshard(
    ctx: RankContext,
    impl: str,
    source: Any,
    shape: list[int],
    dtype: str,
    dim: int,
    order: list[int],
    new_dim: int,
    new_order: list[int],
) -> dict[str, Any]:
    """Shard ``source`` from rank 0, reshard; every rank's shards before and after."""
    adapter = adapters.load(impl)
    tensor = tensor_of(source, shape, dtype).to(ctx.device)
    st = adapter.st_shard(tensor, dim, placements_of(order, ctx.device), 0, None)
    before = [(t.clone(), meta) for t, meta in adapter.st_local_shards(st)]
    moved = adapter.st_reshard(st, new_dim, placements_of(new_order, ctx.device))
    return {"before": before, "local": adapter.st_local_shards(moved)}


def redistribute(
    ctx: RankContext,
    impl: str,
    source: Any,
    shape: list[int],
    dtype: str,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    source_placements: list[str],
    target: list[str],
) -> dict[str, Any]:
    """Distribute ``source`` from ``mesh_ranks[0]``, redistribute; local tensors before/after."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    tensor = tensor_of(source, shape, dtype).to(ctx.device)
    dt = adapter.dt_distribute(tensor, device_mesh, source_placements, mesh_ranks[0])
    before = adapter.dt_to_local(dt).clone()
    moved = adapter.dt_redistribute(dt, target)
    return {"before": before, "local": adapter.dt_to_local(moved)}
