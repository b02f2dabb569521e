"""Rank tasks for the DeviceMesh/DTensor family: each makes its calls through the adapter, with
inputs built from the case by ``codec``, and reports what it saw as data; the driver judges."""

from __future__ import annotations

from typing import Any

import torch

from conformance import adapters
from conformance.tasks import codec
from conformance.tasks.codec import contiguous_stride, laid_out, make_global, torch_dtype
from conformance.world import RankContext


def mesh(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    ranks: list[int],
    names: list[str] | None = None,
) -> Any:
    """The adapter's mesh, made once per world (creating one is collective and slow). Only for
    valid meshes: an invalid one raises, and is built uncached by ``mesh_facts``."""
    adapter = adapters.load(impl)
    key = ("mesh", impl, tuple(shape), tuple(ranks), tuple(names) if names else None)
    return ctx.cached(key, lambda: adapter.dt_mesh(ctx.device.type, shape, ranks, names))


def alike_everywhere(adapter: Any, device_mesh: Any) -> int | None:
    """The ``src_data_rank`` that distributes a tensor every rank holds alike: none, so that each
    rank slices its own copy and no source rank is involved (DT-API-3), where the adapter claims
    ``distribute_source``; else the mesh's first rank, whose copy is the same."""
    if "distribute_source" in adapter.capabilities:
        return None
    return torch.tensor(adapter.dt_mesh_describe(device_mesh)["mesh"]).flatten()[0].item()


def distribute_redistribute(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    source: list[str],
    target: list[str],
    seed: int = 0,
    data: Any = None,
) -> dict[str, Any]:
    """Distribute the global tensor (``data``, or the seeded one, the same on every rank) with
    ``source`` and ``src_data_rank=None``, redistribute to ``target``; report local tensors,
    metadata, ``full_tensor`` and whether inputs survived. Each rank slices its own copy
    (DT-API-3), so the redistribution is judged on every mesh whatever ``distribute_tensor``
    does with a source rank (DT-API-2 has its own test)."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    tensor = make_global(shape, dtype, seed, data).to(ctx.device)
    before = tensor.clone()
    with codec.building():
        dt = adapter.dt_distribute(
            tensor, device_mesh, source, alike_everywhere(adapter, device_mesh)
        )
    first = adapter.dt_to_local(dt).clone()
    moved = adapter.dt_redistribute(dt, target)
    return {
        "source_stride": adapter.dt_describe(dt)["stride"],
        "distributed": first,
        "redistributed": adapter.dt_to_local(moved),
        "redistributed_device": adapter.dt_to_local(moved).device.type,
        "describe": adapter.dt_describe(moved),
        "full": adapter.dt_full_tensor(moved),
        "source_local_unchanged": bool(torch.equal(adapter.dt_to_local(dt), first)),
        "input_unchanged": bool(torch.equal(tensor, before)),
    }


def factory(
    ctx: RankContext,
    impl: str,
    op: str,
    size: list[int],
    mesh_shape: list[int],
    mesh_ranks: list[int],
    placements: list[str] | None,
    fill_value: bool | int | float | None,
    dtype: str | None,
    requires_grad: bool,
) -> dict[str, Any]:
    """A DTensor factory on every rank; report its metadata and its local tensor (with that
    tensor's device and contiguity, and the DTensor's ``requires_grad``). Nothing is computed
    from it: gradients are out of scope, the flag is not (DT-API-18)."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    wanted = None if dtype is None else torch_dtype(dtype)
    made = adapter.dt_factory(op, size, device_mesh, placements, fill_value, wanted, requires_grad)
    local = adapter.dt_to_local(made)
    return {
        "describe": adapter.dt_describe(made),
        "requires_grad": made.requires_grad,
        "local": local.detach().clone(),
        "local_device": local.device.type,
        "local_contiguous": local.is_contiguous(),
    }


def checkpoint_plan(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    placements: list[str],
) -> dict[str, Any]:
    """The checkpoint plan of the layout's DTensor (``_wrapped``) on every rank of the world."""
    adapter = adapters.load(impl)
    dt = _wrapped(ctx, impl, shape, dtype, seed, mesh_shape, mesh_ranks, placements)
    return adapter.dt_checkpoint_plan(dt)


def _wrapped(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    placements: list[str],
) -> Any:
    """The DTensor of ``placements`` built with ``from_local`` from each coordinate's slice of
    the seeded tensor (``source_local``), ``run_check=False``, the global shape and stride given:
    the constructor that takes any layout, ``P`` and strided shards included, as it is."""
    local = codec.local_input(ctx.rank, shape, dtype, seed, mesh_shape, mesh_ranks, placements)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    return adapters.load(impl).dt_from_local(
        local.to(ctx.device), device_mesh, placements, False, shape, contiguous_stride(shape)
    )


def mesh_facts(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    ranks: list[int],
    names: list[str] | None = None,
    cached: bool = True,
    fault: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the mesh (uncached unless ``cached``; ``fault = {"rank", "shape", "ranks"}`` gives
    that one rank another mesh) and report what the rank sees: describe, and inside the mesh its
    group and local rank along every dim and the sub-mesh of every name."""
    adapter = adapters.load(impl)
    if fault and fault["rank"] == ctx.rank:
        shape, ranks = fault["shape"], fault["ranks"]
    if cached:
        device_mesh = mesh(ctx, impl, shape, ranks, names)
    else:
        device_mesh = adapter.dt_mesh(ctx.device.type, shape, ranks, names)
    facts = adapter.dt_mesh_describe(device_mesh)
    if facts["coordinate"] is not None:
        groups = [adapter.dt_mesh_group(device_mesh, i) for i in range(facts["ndim"])]
        facts["groups"] = [[list(g), local] for g, local in groups]
        facts["named"] = {n: adapter.dt_mesh_named(device_mesh, n) for n in names or ()}
    return facts


def flatten_facts(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    ranks: list[int],
    names: list[str] | None,
    flatten: list[str] | None,
    name: str | None,
    before: list[dict[str, Any]] | None = None,
    fault: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """On a mesh of its own (flattenings are the mesh's state: DT-MESH-13), make the
    flattenings ``before`` (``{"flatten", "name"}``), then flatten the dims called ``flatten``
    under ``name`` (``fault = {"rank", "flatten", "name"}`` gives that one rank other
    arguments), and again; report what the rank sees of the flat mesh (outside it, only that
    it is outside) and its group and ``mesh[name]`` of the mesh it came from."""
    adapter = adapters.load(impl)
    device_mesh = adapter.dt_mesh(ctx.device.type, shape, ranks, names)
    for earlier in before or []:
        adapter.dt_mesh_flatten(device_mesh, earlier["flatten"], earlier["name"])
    if fault and fault["rank"] == ctx.rank:
        flatten, name = fault["flatten"], fault["name"]
    flat = adapter.dt_mesh_flatten(device_mesh, flatten, name)
    again = adapter.dt_mesh_flatten(device_mesh, flatten, name)
    if adapter.dt_mesh_coordinate(flat) is None:  # outside the mesh: the spec says no more
        return {"coordinate": None, "again": {"coordinate": adapter.dt_mesh_coordinate(again)}}
    facts = adapter.dt_mesh_describe(flat)
    facts["again"] = adapter.dt_mesh_describe(again)
    facts["group"] = list(adapter.dt_mesh_group(flat, 0))
    facts["named"] = adapter.dt_mesh_named(device_mesh, facts["names"][0])
    return facts


def flat_redistribute(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    names: list[str],
    flatten: list[str],
    source: str,
    target: str,
) -> dict[str, Any]:
    """Flatten the dims called ``flatten`` of the named mesh (its default name: flattening the
    same dims again returns the same mesh, DT-MESH-13, so the mesh is cached), distribute the
    seeded tensor over the flat mesh with ``[source]``, redistribute to ``[target]``; report the
    local tensors and ``full_tensor``."""
    adapter = adapters.load(impl)
    flat = adapter.dt_mesh_flatten(mesh(ctx, impl, mesh_shape, mesh_ranks, names), flatten, None)
    tensor = make_global(shape, dtype, seed).to(ctx.device)
    with codec.building():
        dt = adapter.dt_distribute(tensor, flat, [source], alike_everywhere(adapter, flat))
    first = adapter.dt_to_local(dt).clone()
    moved = adapter.dt_redistribute(dt, [target])
    return {
        "distributed": first,
        "redistributed": adapter.dt_to_local(moved),
        "full": adapter.dt_full_tensor(moved),
    }


def with_placements(
    ctx: RankContext,
    impl: str,
    api: str,
    shape: list[int],
    dtype: str,
    seed: int,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    placements: list[str],
    fault: dict[str, Any] | None = None,
    src_data_rank: Any = "first",
    run_check: bool = False,
) -> dict[str, Any]:
    """Call ``api`` (``distribute`` with ``src_data_rank``: a global rank, ``None``, or
    ``"first"`` for ``mesh_ranks[0]``; ``from_local`` with the global tensor as local and
    ``run_check``; or ``redistribute`` of an all-``R`` DTensor, built by ``from_local`` so that
    no source rank is involved) with ``placements``;
    ``fault = {"rank", "placements"}`` gives one rank other placements, and with a
    ``"src_data_rank"`` key another source too. Reports the result's placements."""
    adapter = adapters.load(impl)
    if fault and fault["rank"] == ctx.rank:
        placements = fault["placements"]
        src_data_rank = fault.get("src_data_rank", src_data_rank)
    if src_data_rank == "first":
        src_data_rank = mesh_ranks[0]
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    tensor = make_global(shape, dtype, seed).to(ctx.device)
    if api == "distribute":
        result = adapter.dt_distribute(tensor, device_mesh, placements, src_data_rank)
    elif api == "from_local":
        result = adapter.dt_from_local(tensor, device_mesh, placements, run_check, None, None)
    else:
        with codec.building():
            replicated = adapter.dt_from_local(
                tensor, device_mesh, ["R"] * len(mesh_shape), False, None, None
            )
        result = adapter.dt_redistribute(replicated, placements)
    return adapter.dt_describe(result)


def distribute(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    placements: list[str],
    src_data_rank: int | None,
    memory: str = "contiguous",
) -> dict[str, Any]:
    """``distribute_tensor`` of a tensor that differs per rank (seed ``seed + rank``), laid out
    in ``memory`` (``codec.laid_out``); report the local tensor, metadata, ``full_tensor`` and
    whether the input survived."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    tensor = laid_out(make_global(shape, dtype, seed + ctx.rank).to(ctx.device), memory)
    before = tensor.clone()
    dt = adapter.dt_distribute(tensor, device_mesh, placements, src_data_rank)
    local = adapter.dt_to_local(dt).clone()
    return {
        "local": local,
        "describe": adapter.dt_describe(dt),
        "full": adapter.dt_full_tensor(dt),
        "input_unchanged": bool(torch.equal(tensor, before)),
    }


def from_local(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    placements: list[str],
    run_check: bool,
    give_shape: bool,
    give_stride: bool,
    fault: dict[str, Any] | None = None,
    full: bool = True,
    memory: str = "contiguous",
) -> dict[str, Any]:
    """``from_local`` of each coordinate's layout slice (``source_local``) laid out in
    ``memory``, with ``shape`` and ``stride`` of the global tensor if asked. ``fault = {"rank",
    "kind"}`` changes that rank's local: ``size`` (one more row), ``dtype`` (another dtype),
    ``drift`` (add 1 to it; every rank if ``rank`` is ``None``). Reports the local tensor,
    metadata, ``full_tensor`` (if ``full``: it is unspecified for locals that do not form the
    layout) and whether the input survived."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    local = codec.local_input(ctx.rank, shape, dtype, seed, mesh_shape, mesh_ranks, placements)
    local = local.to(ctx.device)
    if fault and fault["rank"] in (ctx.rank, None):
        local = _faulty(local, fault["kind"], ctx.rank)
    local = laid_out(local, memory)
    before = local.clone()
    dt = adapter.dt_from_local(
        local,
        device_mesh,
        placements,
        run_check,
        shape if give_shape else None,
        contiguous_stride(shape) if give_stride else None,
    )
    return {
        "local": adapter.dt_to_local(dt).clone(),
        "describe": adapter.dt_describe(dt),
        "full": adapter.dt_full_tensor(dt) if full else None,
        "input_unchanged": bool(torch.equal(local, before)),
    }


def _faulty(local: torch.Tensor, kind: str, rank: int) -> torch.Tensor:
    if kind == "size":
        grown = [local.shape[0] + 1, *local.shape[1:]]
        return torch.zeros(grown, dtype=local.dtype, device=local.device)
    if kind == "dtype":
        return local.to(torch.float64 if local.dtype != torch.float64 else torch.float32)
    return local + (rank + 1)


def partial_redistribute(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    source: list[str],
    target: list[str] | None,
    other_mesh: bool = False,
    full: bool = True,
) -> dict[str, Any]:
    """Build the source (``_wrapped``), redistribute to ``target`` (on the mesh of the reversed
    rank list if ``other_mesh``); report the new local (with its contiguity and device, which a
    copy would not keep), metadata, ``full_tensor`` (if ``full``) and the source DTensor's stride,
    local tensor and placements after the call."""
    adapter = adapters.load(impl)
    dt = _wrapped(ctx, impl, shape, dtype, seed, mesh_shape, mesh_ranks, source)
    held = adapter.dt_to_local(dt).clone()
    other = mesh(ctx, impl, mesh_shape, mesh_ranks[::-1]) if other_mesh else None
    moved = adapter.dt_redistribute(dt, target, other)
    local = adapter.dt_to_local(moved)
    return {
        "source_stride": adapter.dt_describe(dt)["stride"],
        "local": local.clone(),
        "local_contiguous": local.is_contiguous(),
        "local_device": local.device.type,
        "describe": adapter.dt_describe(moved),
        "full": adapter.dt_full_tensor(moved) if full else None,
        "source_local_unchanged": bool(torch.equal(adapter.dt_to_local(dt), held)),
        "source_placements": adapter.dt_describe(dt)["placements"],
    }
