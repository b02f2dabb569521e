"""Rank tasks for the DeviceMesh/DTensor family."""

from __future__ import annotations

from typing import Any

import torch

from conformance import adapters
from conformance.oracle.tensors import make_global
from conformance.world import RankContext


def mesh(ctx: RankContext, impl: str, shape: list[int], ranks: list[int]) -> Any:
    """The adapter's mesh, made once per world (creating one is collective and slow)."""
    adapter = adapters.load(impl)
    key = ("mesh", impl, tuple(shape), tuple(ranks))
    return ctx.cached(key, lambda: adapter.dt_mesh(ctx.device.type, shape, ranks, None))


def distribute_redistribute(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    source: list[str],
    target: list[str],
) -> dict[str, Any]:
    """Distribute the global tensor with ``source`` from rank ``mesh_ranks[0]``, redistribute to
    ``target``; report local tensors, metadata, ``full_tensor`` and whether inputs survived."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    tensor = make_global(shape, dtype, seed).to(ctx.device)
    before = tensor.clone()
    dt = adapter.dt_distribute(tensor, device_mesh, source, mesh_ranks[0])
    first = adapter.dt_to_local(dt).clone()
    moved = adapter.dt_redistribute(dt, target)
    return {
        "distributed": first,
        "redistributed": adapter.dt_to_local(moved),
        "describe": adapter.dt_describe(moved),
        "full": adapter.dt_full_tensor(moved),
        "source_local_unchanged": bool(torch.equal(adapter.dt_to_local(dt), first)),
        "input_unchanged": bool(torch.equal(tensor, before)),
    }
