"""Rank tasks for the ShardedTensor family."""

from __future__ import annotations

from typing import Any

import torch

from conformance import adapters
from conformance.oracle.tensors import make_global, torch_dtype
from conformance.world import RankContext


def placements_of(ranks: list[int], device: torch.device) -> list[str]:
    return [f"rank:{r}/{device}" for r in ranks]


def shard_then_gather(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    dim: int,
    order: list[int],
    group: list[int],
    src: int,
    dst: int,
) -> dict[str, Any] | None:
    """Shard the global tensor from group rank ``src`` with chunks placed on ``order`` (global
    ranks), gather it to group rank ``dst``; report what each rank holds and whether the
    source's tensor survived unchanged."""
    adapter = adapters.load(impl)
    process_group = ctx.group(group)
    if ctx.rank not in group:
        return None
    source = make_global(shape, dtype, seed).to(ctx.device)
    before = source.clone()
    st = adapter.st_shard(source, dim, placements_of(order, ctx.device), src, process_group)
    local = [(t.cpu(), meta) for t, meta in adapter.st_local_shards(st)]
    is_dst = group.index(ctx.rank) == dst
    out = torch.full(shape, 0, dtype=torch_dtype(dtype), device=ctx.device) if is_dst else None
    adapter.st_gather(st, dst, out)
    return {
        "local": local,
        "describe": adapter.st_describe(st),
        "out": out,
        "source_unchanged": bool(torch.equal(source, before)),
    }


def reshard(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    dim: int,
    order: list[int],
    new_dim: int,
    new_order: list[int],
) -> dict[str, Any]:
    """Shard from rank 0, reshard to ``(new_dim, new_order)``; report old and new local data."""
    adapter = adapters.load(impl)
    source = make_global(shape, dtype, seed).to(ctx.device)
    st = adapter.st_shard(source, dim, placements_of(order, ctx.device), 0, None)
    old = [(t.clone(), meta) for t, meta in adapter.st_local_shards(st)]
    moved = adapter.st_reshard(st, new_dim, placements_of(new_order, ctx.device))
    held = adapter.st_local_shards(st)
    return {
        "local": adapter.st_local_shards(moved),
        "describe": adapter.st_describe(moved),
        "old_unchanged": len(held) == len(old)
        and all(torch.equal(a, b) for (a, _), (b, _) in zip(held, old, strict=True)),
    }
