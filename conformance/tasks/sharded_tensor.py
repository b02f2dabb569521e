"""Rank tasks for the ShardedTensor family: each makes its calls through the adapter (objects
built from the case by ``codec``) and reports what it saw as data; the driver judges."""

from __future__ import annotations

import io
from typing import Any

import torch

from conformance import adapters
from conformance.tasks import codec
from conformance.tasks.codec import make_global, placements_of, torch_dtype
from conformance.world import RankContext


def shard_then_gather(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    dim: int,
    order: list[int],
    group: list[int],
    src: int,
    dst: int,
    seed: int = 0,
    data: Any = None,
) -> dict[str, Any] | None:
    """Shard the global tensor (``data``, or the seeded one) from group rank ``src`` with chunks
    placed on ``order`` (global ranks), gather it to group rank ``dst``; report what each rank
    holds and whether the source's tensor survived unchanged."""
    adapter = adapters.load(impl)
    process_group = ctx.group(group)
    if ctx.rank not in group:
        return None
    source = make_global(shape, dtype, seed, data).to(ctx.device)
    before = source.clone()
    st = adapter.st_shard(source, dim, placements_of(order, ctx.backend), src, process_group)
    local = [(t.cpu(), meta) for t, meta in adapter.st_local_shards(st)]
    is_dst = group.index(ctx.rank) == dst
    out = torch.zeros(shape, dtype=torch_dtype(dtype), device=ctx.device) if is_dst else None
    adapter.st_gather(st, dst, out)
    return {
        "local": local,
        "describe": adapter.st_describe(st),
        "out": out,
        "source_unchanged": bool(torch.equal(source, before)),
    }


def gather_layout(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    boxes: list[dict[str, Any]],
    group: list[int],
    dst: int,
) -> dict[str, Any] | None:
    """Build the global tensor laid out as ``boxes`` (``{"offsets", "sizes", "rank"}``, global
    ranks) on ``group`` from each rank's own boxes and the global metadata, not by ``shard``;
    gather it to group rank ``dst``. Reports ``out`` (``None`` off ``dst``)."""
    adapter = adapters.load(impl)
    process_group = ctx.group(group)
    if ctx.rank not in group:
        return None
    whole = make_global(shape, dtype, seed).to(ctx.device)
    with codec.building():
        st = codec.from_boxes(adapter, ctx.rank, ctx.backend, whole, boxes, process_group)
    is_dst = group.index(ctx.rank) == dst
    out = torch.zeros(shape, dtype=torch_dtype(dtype), device=ctx.device) if is_dst else None
    adapter.st_gather(st, dst, out)
    return {"out": out}


def reshard(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    dim: int,
    order: list[int],
    new_dim: int,
    new_order: list[int],
    seed: int = 0,
    data: Any = None,
) -> dict[str, Any]:
    """Shard the global tensor (``data``, or the seeded one) from rank 0, reshard to
    ``(new_dim, new_order)``; report old and new local data."""
    adapter = adapters.load(impl)
    source = make_global(shape, dtype, seed, data).to(ctx.device)
    st = adapter.st_shard(source, dim, placements_of(order, ctx.backend), 0, None)
    old = [(t.clone(), meta) for t, meta in adapter.st_local_shards(st)]
    moved = adapter.st_reshard(st, new_dim, placements_of(new_order, ctx.backend))
    held = adapter.st_local_shards(st)
    return {
        "before": old,
        "local": adapter.st_local_shards(moved),
        "describe": adapter.st_describe(moved),
        "old_unchanged": len(held) == len(old)
        and all(torch.equal(a, b) for (a, _), (b, _) in zip(held, old, strict=True)),
    }


def gather_checked(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    dim: int,
    order: list[int],
    dst_by_rank: list[Any],
    out_by_rank: list[Any],
) -> dict[str, Any]:
    """Shard from rank 0 over the world, gather with this rank's ``dst`` and ``out``. Raises what
    gather raised, with whether ``out`` and the tensor are unchanged attached (ERR-8); returns
    ``out``, whether it kept its strides, and whether the tensor is unchanged (ST-GATHER-11)."""
    adapter = adapters.load(impl)
    source = make_global(shape, dtype, seed).to(ctx.device)
    with codec.building():
        t = adapter.st_shard(source, dim, placements_of(order, ctx.backend), 0, None)
    out = codec.out_tensor(out_by_rank[ctx.rank], ctx.device)
    strides = out.stride() if isinstance(out, torch.Tensor) else None
    out_before = out.clone() if isinstance(out, torch.Tensor) else None
    describe_before = adapter.st_describe(t)
    local_before = [(x.clone(), m) for x, m in adapter.st_local_shards(t)]

    def unchanged() -> bool:
        local = adapter.st_local_shards(t)
        return (
            adapter.st_describe(t) == describe_before
            and len(local) == len(local_before)
            and all(
                torch.equal(a, b) and ma == mb
                for (a, ma), (b, mb) in zip(local, local_before, strict=True)
            )
        )

    def facts() -> dict[str, bool]:
        out_unchanged = out_before is None or bool(torch.equal(out, out_before))
        return {"out_unchanged": out_unchanged, "unchanged": unchanged()}

    with codec.facts_on_raise(facts):
        returned = t.gather(dst=dst_by_rank[ctx.rank], out=out)
    return {
        "returned": returned,
        "out": out.cpu() if isinstance(out, torch.Tensor) else out,
        "strides_kept": strides is None or out.stride() == strides,
        "unchanged": unchanged(),
    }


def reshard_checked(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    spec: Any,
    new_spec: Any,
    group: list[int],
    new_spec_by_rank: dict[str, Any] | None = None,
    requires_grad: bool = False,
) -> dict[str, Any] | None:
    """Build a tensor of ``spec`` on ``group`` (a chunk spec: sharded from group rank 0; an
    enumerable one: ``zeros``), with ``requires_grad``, reshard it to ``new_spec`` (to
    ``new_spec_by_rank[str(rank)]`` on the ranks listed there); report the result and whether
    the local tensors held before are unchanged (ST-RESHARD-6), attached to the exception when
    reshard raised."""
    adapter = adapters.load(impl)
    process_group = ctx.group(group)
    if ctx.rank not in group:
        return None
    with codec.building():
        old_spec = codec.make_spec(adapter, spec, ctx.backend)
        if "boxes" in spec:
            t = adapter.st_create(
                "zeros", old_spec, shape, dtype=torch_dtype(dtype),
                requires_grad=requires_grad, process_group=process_group,
            )  # fmt: skip
        else:
            source = make_global(shape, dtype, seed).to(ctx.device).requires_grad_(requires_grad)
            t = adapter.st_shard_by_spec(source, old_spec, 0, process_group)
    held = [s.tensor for s in t.local_shards()]
    before = [x.detach().clone() for x in held]
    new_spec = (new_spec_by_rank or {}).get(str(ctx.rank), new_spec)

    def kept() -> dict[str, bool]:
        same = all(torch.equal(a, b) for a, b in zip(held, before, strict=True))
        return {"held_unchanged": same}

    with codec.facts_on_raise(kept):
        moved = t.reshard(codec.make_spec(adapter, new_spec, ctx.backend))
    return {**codec.describe(adapter, moved), **kept()}


def from_local_checked(
    ctx: RankContext,
    impl: str,
    kind: str,
    shards_by_rank: list[list[dict[str, Any]]],
    size_by_rank: list[list[int]],
    metadata_by_rank: list[dict[str, Any] | None],
) -> dict[str, Any]:
    """``init_from_local_shards`` (``kind == "local"``) or
    ``init_from_local_shards_and_global_metadata`` (``"global"``) over the world with this
    rank's shards ``{"metadata": shard, "tensor": {"shape", "dtype", ...}}``, the i-th tensor
    filled with ``10 * rank + i``. Reports the result and whether it holds the given values."""
    adapter = adapters.load(impl)
    given = [
        adapter.st_local_shard(
            codec.filled(s["tensor"], 10 * ctx.rank + i, ctx.device),
            codec.shard_metadata(adapter, s["metadata"]),
        )
        for i, s in enumerate(shards_by_rank[ctx.rank])
    ]
    if kind == "local":
        t = adapter.st_init_from_local_shards(given, *size_by_rank[ctx.rank], group=None)
    else:
        md = metadata_by_rank[ctx.rank]
        props = adapter.st_tensor_properties(
            dtype=torch_dtype(md["properties"]["dtype"]),
            requires_grad=md["properties"]["requires_grad"],
        )
        meta = adapter.st_sharded_tensor_metadata(
            [codec.shard_metadata(adapter, s) for s in md["shards"]], torch.Size(md["size"]), props
        )
        t = adapter.st_init_from_global_metadata(given, meta, None)
    result = codec.describe(adapter, t)
    result["given_values_kept"] = [
        bool(torch.equal(s.tensor.detach(), g.tensor.detach()))
        for s, g in zip(t.local_shards(), given, strict=False)
    ]
    return result


def _accessors(t: Any) -> dict[str, Any]:
    """What ST-LIFE-15 and 16 read without communication."""
    try:
        local: Any = t.local_tensor().detach().cpu()
    except NotImplementedError:
        local = "NotImplementedError"
    return {
        "size()": list(t.size()),
        "size(d)": [t.size(d) for d in range(-t.dim(), t.dim())],
        "dim()": t.dim(),
        "dtype": str(t.dtype).removeprefix("torch."),
        "local_tensor()": local,
        "leaf_requires_grad": [
            s.tensor.is_leaf and s.tensor.requires_grad for s in t.local_shards()
        ],
    }


def create_checked(
    ctx: RankContext,
    impl: str,
    fill: str,
    spec_by_rank: list[Any],
    size_by_rank: list[list[Any]],
    options_by_rank: list[dict[str, Any]],
    as_sequence: bool,
) -> dict[str, Any]:
    """``st.<fill>(spec, *size, **options)`` (one sequence when ``as_sequence``; ``full`` takes
    ``options["fill_value"]``) with this rank's arguments; the result and its accessors."""
    adapter = adapters.load(impl)
    spec = codec.make_spec(adapter, spec_by_rank[ctx.rank], ctx.backend)
    size = size_by_rank[ctx.rank]
    options = dict(options_by_rank[ctx.rank])
    kwargs = {
        "dtype": torch_dtype(options["dtype"]) if options.get("dtype") else None,
        "layout": getattr(torch, options.get("layout", "strided")),
        "memory_format": getattr(torch, options.get("memory_format", "contiguous_format")),
        "requires_grad": options.get("requires_grad", False),
    }
    if fill == "full":
        t = adapter.st_create(fill, spec, size, options["fill_value"], **kwargs)
    elif as_sequence:
        t = adapter.st_create(fill, spec, size, **kwargs)
    else:
        t = adapter.st_create(fill, spec, *size, **kwargs)
    return {**codec.describe(adapter, t), **_accessors(t)}


def shard_checked(
    ctx: RankContext,
    impl: str,
    spec_by_rank: list[Any],
    src_by_rank: list[Any],
    tensor_by_rank: list[dict[str, Any]],
    requires_grad: bool,
) -> dict[str, Any]:
    """``shard(tensor, spec, src_rank)`` over the world with this rank's arguments; the tensor
    of rank ``r`` holds ``make_global(shape, dtype, seed + r)`` (``transposed``: the same values
    in a non-contiguous view). Reports the result, whether any local shard aliases the tensor
    and whether the tensor is unchanged."""
    adapter = adapters.load(impl)
    desc = tensor_by_rank[ctx.rank]
    source = codec.seeded(desc["shape"], desc["dtype"], desc["seed"], desc.get("transposed", False))
    source = source.to(ctx.device).requires_grad_(requires_grad and source.is_floating_point())
    before = source.detach().clone()
    t = adapter.st_shard_by_spec(
        source,
        codec.make_spec(adapter, spec_by_rank[ctx.rank], ctx.backend),
        src_by_rank[ctx.rank],
        None,
    )
    storage = source.untyped_storage().data_ptr()
    return {
        **codec.describe(adapter, t),
        **_accessors(t),
        "aliases": any(
            s.tensor.numel() and s.tensor.untyped_storage().data_ptr() == storage
            for s in t.local_shards()
        ),
        "source_unchanged": bool(torch.equal(source.detach(), before)),
    }


def copies(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    ranks: list[int],
    requires_grad: bool = False,
) -> dict[str, Any]:
    """``to(float64)``, ``to(same dtype)``, ``cpu()``, ``clone()`` and a ``torch.save`` /
    ``torch.load`` round trip (ST-LIFE-17, 18) of a tensor chunked over ``ranks``, made with
    ``zeros`` (``requires_grad`` as given) and each local shard filled with its box of the
    seeded tensor: construction (ST-LIFE-1) takes any placement list, where ``shard`` need not
    (ST-LIFE-7)."""
    adapter = adapters.load(impl)
    source = make_global(shape, dtype, seed).to(ctx.device)
    with codec.building(), torch.no_grad():
        spec = codec.make_spec(adapter, {"dim": 0, "ranks": ranks}, ctx.backend)
        t = adapter.st_create("zeros", spec, shape, dtype=source.dtype, requires_grad=requires_grad)
        for s in t.local_shards():
            if s.tensor.numel():  # an empty box may lie past the end (ST-SPEC-2)
                offsets, sizes = s.metadata.shard_offsets, s.metadata.shard_sizes
                s.tensor.copy_(codec.box_of(source, offsets, sizes))

    def describe(x: Any) -> dict[str, Any]:
        return codec.describe(adapter, x)

    original = describe(t)
    converted = describe(t.to(torch.float64))
    after_to = describe(t)
    cloned = t.clone()
    shares = any(
        a.tensor.numel()
        and a.tensor.untyped_storage().data_ptr() == b.tensor.untyped_storage().data_ptr()
        for a, b in zip(cloned.local_shards(), t.local_shards(), strict=True)
    )
    buffer = io.BytesIO()
    torch.save(t, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    return {
        "original": original,
        "to_float64": converted,
        "unchanged_by_to": _same(after_to, original),
        "to_same": describe(t.to(t.dtype)),
        "cpu": describe(t.cpu()),
        "clone": describe(cloned),
        "clone_shares_storage": bool(shares),
        "loaded": describe(loaded),
    }


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {k: v for k, v in a.items() if k != "local"} == {
        k: v for k, v in b.items() if k != "local"
    } and all(
        torch.equal(x, y) and m == n for (x, m), (y, n) in zip(a["local"], b["local"], strict=True)
    )


def flatten_checked(
    ctx: RankContext,
    impl: str,
    rows: int,
    cols: int,
    outer_ranks: list[int],
    inner_boxes: list[list[list[list[int]]]],
    caller: int | None,
) -> dict[str, Any] | None:
    """A 2-D nested tensor: outer ``(rows * len(outer_ranks), cols)`` chunked on dim 0 over
    ``outer_ranks``; on each rank with one outer shard, its tensor is an inner ``(rows, cols)``
    tensor whose local shards are ``inner_boxes[rank]`` (``[offsets, sizes]`` each), filled with
    the rank. Flattens a state dict holding it (only on ``caller`` unless ``None``: ST-FLAT-9)
    and reports the result, or the error type flattening raised on this rank (ST-FLAT-4)."""
    adapter = adapters.load(impl)
    group = ctx.group()
    chunk = adapter.st_chunk_spec(0, placements_of(outer_ranks, ctx.backend))
    size = torch.Size([rows * len(outer_ranks), cols])
    outer_md = chunk.build_metadata(size, adapter.st_tensor_properties(dtype=torch.float32))
    mine = [m for m in outer_md.shards_metadata if m.placement.rank() == ctx.rank]
    # The inner layout comes as boxes, not as a sharding spec, so that flattening is tested on
    # the layout the test chose, whatever the implementation's chunking does (ST-SPEC).
    pieces = [
        adapter.st_local_shard(
            torch.full(sizes, float(ctx.rank), device=ctx.device),
            adapter.st_shard_metadata(offsets, sizes, ctx.backend.placement(ctx.rank)),
        )
        for offsets, sizes in inner_boxes[ctx.rank]
    ]
    # Every rank builds the inner tensor: construction is collective.
    inner = adapter.st_init_from_local_shards(pieces, rows, cols, group=group)
    plain = adapter.st_create("zeros", chunk, size, process_group=group)
    outer = adapter.st_create("zeros", chunk, size, process_group=group)  # nested where 1 shard
    if len(mine) == 1:
        outer = adapter.st_nest([adapter.st_local_shard(inner, mine[0])], outer_md, group)
    only0 = adapter.st_create("zeros", adapter.st_chunk_spec(0, placements_of([0], ctx.backend)), 4)
    state = {"w": outer, "b": torch.ones(2), "x": {"y": 3, "p": plain, "o": only0}}
    if caller is not None and ctx.rank != caller:
        return None
    shards_before = list(outer.metadata().shards_metadata)
    entries_before = (dict(state), dict(state["x"]))
    try:
        flat = adapter.st_flatten(state)
    except Exception as exc:
        return {"error": type(exc).__name__, "is_value_error": isinstance(exc, ValueError)}
    w: Any = flat.get("w", "dropped")
    x = flat.get("x", {})
    return {
        "error": None,
        "keys": sorted(flat),
        "x_keys": sorted(x),
        "b_same": flat.get("b") is entries_before[0]["b"],
        "y": x.get("y"),
        "plain_same": x.get("p") is plain,
        "w": w if isinstance(w, str) else "same" if w is outer else codec.describe(adapter, w),
        "local_values": None
        if isinstance(w, str) or w is outer
        else [s.tensor.detach().cpu() for s in w.local_shards()],
        # the same entries, each the same object, at both levels; the outer metadata as it was
        "input_intact": _same_entries(state, entries_before[0])
        and _same_entries(state.get("x"), entries_before[1])
        and list(outer.metadata().shards_metadata) == shards_before,
    }


def _same_entries(now: Any, before: dict[str, Any]) -> bool:
    return (
        isinstance(now, dict)
        and now.keys() == before.keys()
        and all(now[k] is v for k, v in before.items())
    )
