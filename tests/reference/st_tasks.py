"""Tasks the ShardedTensor tests send to ranks (reference/sharded_tensor on real Gloo worlds).

Every task returns plain values, tensors and metadata; the tests compare them with a dense
oracle computed in the driver.
"""

from __future__ import annotations

import copy
import io
import unittest.mock
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.distributed as dist

import reference.sharded_tensor as st
from conformance.benchmarks.sharded_tensor import counting_sends
from conformance.world import RankContext
from reference import verdict
from reference.sharded_tensor import Shard
from reference.sharded_tensor import ShardMetadata as SM

DTYPES = {"float64": torch.float64, "int64": torch.int64, "float32": torch.float32}


def exact_values(shape: list[int], dtype: str) -> torch.Tensor:
    """Values a float32 round trip would change (ERR-10), with -0.0 and inf among the floats."""
    count = torch.Size(shape).numel()
    if dtype == "int64":
        values = torch.arange(count, dtype=torch.int64) * (2**40 + 1) + 2**53 + 1
    else:
        values = torch.arange(count, dtype=torch.float64) + 2**-40
        values[: min(count, 2)] = torch.tensor([-0.0, float("inf")], dtype=torch.float64)[:count]
    return values.to(DTYPES[dtype]).reshape(shape)


def chunk(dim: int, ranks: list[int]) -> st.ChunkShardingSpec:
    return st.ChunkShardingSpec(dim, [f"rank:{r}/cpu" for r in ranks])


def shards_of(t: st.ShardedTensor) -> list[tuple[list[int], list[int], torch.Tensor]]:
    return [(s.metadata.shard_offsets, s.metadata.shard_sizes, s.tensor) for s in t.local_shards()]


def transposed_buffer(shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    """A non-contiguous buffer of ``shape`` filled with -1 (ST-GATHER-8)."""
    return torch.full(shape[::-1], -1, dtype=dtype).permute(*reversed(range(len(shape))))


def round_trip(
    ctx: RankContext,
    shape: list[int],
    dtype: str,
    dim: int,
    placements: list[int],
    src: int,
    dst: int,
    new_dim: int,
    new_placements: list[int],
    ranks: list[int] | None = None,
) -> dict | None:
    """shard -> gather -> reshard -> gather, on the world or on the sub-group ``ranks``."""
    group = ctx.group(ranks)
    if ranks is not None and ctx.rank not in ranks:
        return None
    x = exact_values(shape, dtype)
    # ST-LIFE-7: only the source's values count; ST-LIFE-11: a non-contiguous source is fine.
    source = dist.get_rank(group) == src
    given = x.t().contiguous().t() if source and x.dim() == 2 else (x if source else x + 7)
    kept = given.clone()
    t = st.shard(given, chunk(dim, placements), src_rank=src, process_group=group)
    before = [s.tensor.clone() for s in t.local_shards()]
    out = transposed_buffer(shape, x.dtype) if dist.get_rank(group) == dst else None
    t.gather(dst=dst, out=out)
    r = t.reshard(chunk(new_dim, new_placements))
    again = torch.full(shape, -1, dtype=x.dtype) if dist.get_rank(group) == dst else None
    r.gather(dst=dst, out=again)
    return {
        "metadata": t.metadata(),
        "local": shards_of(t),
        "gathered": out,
        "out_strides": None if out is None else out.stride(),
        "resharded_metadata": r.metadata(),
        "resharded": shards_of(r),
        "regathered": again,
        # ERR-9 / ST-RESHARD-6 / ST-GATHER-11: nothing the caller held has changed.
        "source_intact": torch.equal(given, kept),
        "old_shards_intact": all(
            torch.equal(a, s.tensor) for a, s in zip(before, t.local_shards(), strict=True)
        ),
    }


def sent_bytes(
    ctx: RankContext, shape: list[int], dim: int, placements: list[int], new_placements: list[int]
) -> dict[str, int]:
    """The bytes this rank sends to shard from rank 0, gather to rank 0, and reshard from
    chunks on ``dim`` over ``placements`` to chunks on the last dim over ``new_placements``."""
    x = exact_values(shape, "float64")
    sent = {}
    with counting_sends() as count:
        t = st.shard(x, chunk(dim, placements))
    sent["shard"] = count[0]
    with counting_sends() as count:
        t.gather(dst=0, out=torch.empty_like(x) if ctx.rank == 0 else None)
    sent["gather"] = count[0]
    with counting_sends() as count:
        t.reshard(chunk(-1, new_placements))
    sent["reshard"] = count[0]
    return sent


def construct(ctx: RankContext, placements: list[int], shape: list[int], dtype: str) -> dict:
    """Each constructor from a spec, and the accessors of the result (ST-LIFE-1, 2, 15, 16)."""
    spec, kind = chunk(0, placements), DTYPES[dtype]
    made = {
        "empty": st.empty(spec, *shape, dtype=kind),
        "zeros": st.zeros(spec, shape, dtype=kind),
        "ones": st.ones(spec, *shape, dtype=kind, requires_grad=kind.is_floating_point),
        "full": st.full(spec, shape, 7, dtype=kind),
        "rand": st.rand(spec, *shape),
        "randn": st.randn(spec, *shape),
    }
    result: dict = {name: shards_of(t) for name, t in made.items()}
    t = made["ones"]
    try:
        single = t.local_tensor().shape
    except NotImplementedError as error:
        single = f"NotImplementedError {error}"
    result.update(
        metadata=t.metadata(),
        size=t.size(),
        size_last=t.size(-1),
        dim=t.dim(),
        dtype=t.dtype,
        spec=t.sharding_spec(),
        local_tensor=single,
        leaves=[s.tensor.is_leaf and s.tensor.requires_grad for s in t.local_shards()],
        rand_dtype=made["rand"].dtype,
    )
    return result


def from_local(ctx: RankContext, rows: int, holders: int) -> dict:
    """init_from_local_shards over the first ``holders`` ranks (the others pass []), then the
    variant with global metadata where rank 0 passes its two shards in reverse order."""
    n = ctx.world_size
    x = exact_values([rows, 3], "float64")
    bounds = [(rows * c // holders, rows * (c + 1) // holders) for c in range(holders)]
    mine = [
        Shard(x[lo:hi].clone(), SM([lo, 0], [hi - lo, 3], f"rank:{c}/cpu"))
        for c, (lo, hi) in enumerate(bounds)
        if c == ctx.rank
    ]
    t = st.init_from_local_shards(mine, rows, 3)
    out = torch.empty(rows, 3, dtype=torch.float64) if ctx.rank == 0 else None
    t.gather(0, out)
    # Two shards on rank 0 (the first two row blocks), one on every other rank after.
    edges = (
        [0, 1, 2, *[2 + (rows - 2) * k // (n - 1) for k in range(1, n)]] if n > 1 else [0, 1, rows]
    )
    owners = [0, 0, *range(1, n)] if n > 1 else [0, 0]
    layout = [
        SM([lo, 0], [hi - lo, 3], f"rank:{owner}/cpu")
        for owner, lo, hi in zip(owners, edges, edges[1:], strict=False)
    ]
    metadata = st.ShardedTensorMetadata(
        layout, torch.Size([rows, 3]), st.TensorProperties(dtype=torch.float64)
    )
    local = [Shard(x[m.shard_offsets[0] :][: m.shard_sizes[0]].clone(), m) for m in layout]
    local = [s for s in local if s.metadata.placement.rank() == ctx.rank][::-1]
    g = st.init_from_local_shards_and_global_metadata(local, metadata)
    return {
        "metadata": t.metadata(),
        "kept": [a.tensor is b.tensor for a, b in zip(mine, t.local_shards(), strict=True)],
        "gathered": out,
        "global_metadata": g.metadata() == metadata,
        "global_local": shards_of(g),
        "spec": t.sharding_spec(),
    }


def copies(ctx: RankContext) -> dict:
    """to, cpu, clone and pickling (ST-LIFE-17, 18)."""
    n = ctx.world_size
    x = exact_values([5, 2], "float64")
    t = st.shard(x, chunk(0, list(range(n))))
    buffer = io.BytesIO()
    torch.save(t, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    as32, cloned = t.to(torch.float32), t.clone()
    before = ([(o, z, v.tolist()) for o, z, v in shards_of(t)], copy.deepcopy(t.metadata()))
    same = t.reshard(t.sharding_spec())
    identity = ([(o, z, v.tolist()) for o, z, v in shards_of(same)], same.metadata()) == before
    return {
        "loaded_metadata": loaded.metadata() == t.metadata(),
        "loaded_local": shards_of(loaded),
        "local": shards_of(t),
        "to_dtype": (as32.dtype, t.dtype, as32.metadata().tensor_properties.dtype),
        "to_values": [
            torch.equal(a.tensor, b.tensor.to(torch.float32))
            for a, b in zip(as32.local_shards(), t.local_shards(), strict=True)
        ],
        "same_objects": (t.cpu() is t, t.to(torch.float64) is t),
        # ST-RESHARD-4: resharding to the current spec gives the same tensor (taken before the
        # reshard: a result that is ``t`` itself, changed in place, is allowed).
        "identity": identity,
        "clone_equal": cloned.metadata() == t.metadata()
        and all(
            torch.equal(a.tensor, b.tensor)
            for a, b in zip(cloned.local_shards(), t.local_shards(), strict=True)
        ),
        "clone_shares": any(
            a.tensor.untyped_storage().data_ptr() == b.tensor.untyped_storage().data_ptr()
            for a, b in zip(cloned.local_shards(), t.local_shards(), strict=True)
            if a.tensor.numel()
        ),
    }


def nested(ctx: RankContext) -> dict:
    """A 2-D nested tensor: outer (2n, 4) in row blocks, each block chunked again by columns."""
    n, r = ctx.world_size, ctx.rank
    group = ctx.group()
    outer_md = chunk(0, list(range(n))).build_metadata(
        torch.Size([2 * n, 4]), st.TensorProperties()
    )
    inner = st.full(chunk(1, list(range(n))), [2, 4], float(r))
    o = outer_md.shards_metadata[r]
    outer = st.ShardedTensor(outer_md, [Shard(inner, o)], group)
    plain = st.zeros(chunk(0, list(range(n))), 4)
    only0 = st.zeros(st.ChunkShardingSpec(0, ["rank:0/cpu"]), 4)
    state = {"w": outer, "b": torch.ones(2), "x": {"y": 3, "p": plain, "o": only0}, "l": [outer, 5]}
    flat = st.flatten_sharded_tensors(state)
    f = flat["w"]
    # ST-FLAT-4: an inner tensor with two local shards cannot be flattened (rank-local error).
    doubled = st.zeros(chunk(1, [r % n for r in range(2 * n)]), [2, 4 * n])
    try:
        st.flatten_sharded_tensors({"w": st.ShardedTensor(outer_md, [Shard(doubled, o)], group)})
        two_inner = None
    except ValueError as error:
        two_inner = str(error)
    return {
        "two_inner": two_inner,
        "list": [type(v).__name__ for v in flat["l"]],
        "keys": sorted(flat),
        "x_keys": sorted(flat["x"]),
        "b_same": flat["b"] is state["b"],
        "plain_same": flat["x"]["p"] is plain,
        "size": f.size(),
        "boxes": [
            (m.shard_offsets, m.shard_sizes, m.placement.rank())
            for m in f.metadata().shards_metadata
        ],
        "local": shards_of(f),
        "outer_intact": len(outer.metadata().shards_metadata) == n and state["w"] is outer,
    }


# Violations: each builds exactly one broken input (ERR-11), on group rank ``bad`` only unless
# the case says otherwise, and checks on the way out that nothing the caller holds was written
# (ERR-8, ERR-9): a write turns the expected error into an AssertionError.


def _row_shards(ctx: RankContext, rows_each: int = 2) -> list[Shard]:
    r = ctx.rank
    tensor = torch.full((rows_each, 3), float(r))
    return [Shard(tensor, SM([rows_each * r, 0], [rows_each, 3], f"rank:{r}/cpu"))]


def _gather_with(ctx: RankContext, dst: int, out_of: dict, bad: bool) -> None:
    n = ctx.world_size
    t = st.shard(exact_values([4, 2], "float64"), chunk(0, list(range(n))))
    out = out_of["bad" if bad else "good"]
    before = None if not isinstance(out, torch.Tensor) else out.clone()
    try:
        t.gather(dst=dst, out=out)
    finally:
        assert before is None or torch.equal(out, before), "out was written before raising"


def _local(ctx: RankContext, bad: bool, change) -> None:
    shards = _row_shards(ctx)
    size = [2 * ctx.world_size, 3]
    if bad:
        shards, size = change(shards, size)
    st.init_from_local_shards(shards, *size)


def _global(ctx: RankContext, bad: bool, change) -> None:
    n = ctx.world_size
    metadata = chunk(0, list(range(n))).build_metadata(
        torch.Size([2 * n, 3]), st.TensorProperties()
    )
    shards = [Shard(torch.zeros(2, 3), metadata.shards_metadata[ctx.rank])]
    if bad:
        shards, metadata = change(shards, metadata)
    st.init_from_local_shards_and_global_metadata(shards, metadata)


def _reshard_to(ctx: RankContext, bad: bool, target) -> None:
    n = ctx.world_size
    t = st.full(chunk(0, list(range(n))), [2, 4], 1.0)
    before = [s.tensor.clone() for s in t.local_shards()]
    try:
        t.reshard(target(n) if bad else chunk(1, list(range(n))))
    finally:
        assert all(torch.equal(a, s.tensor) for a, s in zip(before, t.local_shards(), strict=True))


def _other_dtype(shards, metadata):
    metadata = st.ShardedTensorMetadata(
        metadata.shards_metadata, metadata.size, st.TensorProperties(dtype=torch.float64)
    )
    return [Shard(shards[0].tensor.double(), shards[0].metadata)], metadata


class Violation(NamedTuple):
    """One bad input of a ShardedTensor collective: the error every rank must raise, the rule its
    message names first, the rank that gets the bad input (0: gather's dst; "last": a rank that is
    neither dst nor src; "all"), and how a rank runs it (``bad``: whether its own input is bad)."""

    error: str
    rule: str
    bad: str | int
    run: Callable[[RankContext, bool], object]


# Every validation rule of the ShardedTensor collectives, one case each
# (test_sharded_tensor_errors.py).
VIOLATIONS = {
    # gather (ST-GATHER-3 to 7)
    "gather_dst_out_of_range": Violation(
        "ValueError",
        "ST-GATHER-3",
        "last",
        lambda ctx, bad: _gather_with(
            ctx, ctx.world_size if bad else 0, {"bad": None, "good": _out0(ctx)}, False
        ),
    ),
    "gather_dst_not_int": Violation(
        "TypeError",
        "ST-GATHER-3",
        "last",
        lambda ctx, bad: _gather_with(ctx, 0.0 if bad else 0, {"good": _out0(ctx)}, False),
    ),
    "gather_dst_differs": Violation(
        "ValueError",
        "ST-GATHER-4",
        "last",
        lambda ctx, bad: _gather_with(
            ctx,
            ctx.rank if bad else 0,
            {"bad": torch.zeros(4, 2, dtype=torch.float64), "good": _out0(ctx)},
            bad,
        ),
    ),
    "gather_out_wrong_shape": Violation(
        "ValueError",
        "ST-GATHER-5",
        0,
        lambda ctx, bad: _gather_with(
            ctx, 0, {"bad": torch.zeros(3, 2, dtype=torch.float64), "good": _out0(ctx)}, bad
        ),
    ),
    "gather_out_missing": Violation(
        "ValueError",
        "ST-GATHER-5",
        0,
        lambda ctx, bad: _gather_with(ctx, 0, {"bad": None, "good": _out0(ctx)}, bad),
    ),
    "gather_out_not_tensor": Violation(
        "TypeError",
        "ST-GATHER-5",
        0,
        lambda ctx, bad: _gather_with(ctx, 0, {"bad": [0.0], "good": _out0(ctx)}, bad),
    ),
    "gather_out_wrong_dtype": Violation(
        "ValueError",
        "ST-GATHER-6",
        0,
        lambda ctx, bad: _gather_with(
            ctx, 0, {"bad": torch.full((4, 2), -1, dtype=torch.int64), "good": _out0(ctx)}, bad
        ),
    ),
    "gather_out_off_dst": Violation(
        "ValueError",
        "ST-GATHER-7",
        "last",
        lambda ctx, bad: _gather_with(
            ctx, 0, {"bad": torch.full((4, 2), -1.0, dtype=torch.float64), "good": _out0(ctx)}, bad
        ),
    ),
    # construction from a spec (ST-LIFE-3 to 6, ST-SPEC-6, ST-VALID-12, 13)
    "create_size_differs": Violation(
        "ValueError",
        "ST-LIFE-6",
        "last",
        lambda ctx, bad: st.zeros(chunk(0, _all(ctx)), 6 if bad else 4, 3),
    ),
    "create_negative_size": Violation(
        "ValueError",
        "ST-LIFE-3",
        "last",
        lambda ctx, bad: st.zeros(chunk(0, _all(ctx)), -1 if bad else 4, 3),
    ),
    "create_size_not_int": Violation(
        "TypeError",
        "ST-LIFE-3",
        "last",
        lambda ctx, bad: st.zeros(chunk(0, _all(ctx)), 4.0 if bad else 4, 3),
    ),
    "create_spec_not_spec": Violation(
        "TypeError",
        "ST-LIFE-5",
        "last",
        lambda ctx, bad: st.zeros("x" if bad else chunk(0, _all(ctx)), 4, 3),
    ),
    "create_channels_last": Violation(
        "NotImplementedError",
        "ST-LIFE-4",
        "last",
        lambda ctx, bad: st.empty(
            chunk(0, _all(ctx)),
            2,
            2,
            2,
            2,
            memory_format=torch.channels_last if bad else torch.contiguous_format,
        ),
    ),
    "create_sparse": Violation(
        "NotImplementedError",
        "ST-LIFE-4",
        "last",
        lambda ctx, bad: st.empty(
            chunk(0, _all(ctx)), 4, layout=torch.sparse_coo if bad else torch.strided
        ),
    ),
    "create_dim_out_of_range": Violation(
        "ValueError",
        "ST-SPEC-6",
        "last",
        lambda ctx, bad: st.zeros(chunk(2 if bad else 0, _all(ctx)), 4, 3),
    ),
    "create_placement_without_rank": Violation(
        "ValueError",
        "ST-VALID-13",
        "all",
        lambda ctx, bad: st.zeros(st.ChunkShardingSpec(0, ["cpu"] * ctx.world_size), 4),
    ),
    "create_placement_on_worker": Violation(
        "NotImplementedError",
        "ST-VALID-13",
        "all",
        lambda ctx, bad: st.zeros(
            st.ChunkShardingSpec(0, [f"worker{r}/cpu" for r in _all(ctx)]), 4
        ),
    ),
    "create_placement_not_member": Violation(
        "ValueError",
        "ST-VALID-12",
        "all",
        lambda ctx, bad: st.zeros(chunk(0, [*_all(ctx), ctx.world_size]), 4),
    ),
    # shard (ST-LIFE-8 to 10, ST-SPEC-13)
    "shard_src_differs": Violation(
        "ValueError",
        "ST-LIFE-9",
        "last",
        lambda ctx, bad: st.shard(torch.zeros(4), chunk(0, _all(ctx)), 1 if bad else 0),
    ),
    "shard_src_out_of_range": Violation(
        "ValueError",
        "ST-LIFE-8",
        "last",
        lambda ctx, bad: st.shard(
            torch.zeros(4), chunk(0, _all(ctx)), ctx.world_size if bad else 0
        ),
    ),
    "shard_shape_differs": Violation(
        "ValueError",
        "ST-LIFE-10",
        "last",
        lambda ctx, bad: st.shard(torch.zeros(6 if bad else 4), chunk(0, _all(ctx))),
    ),
    "shard_dtype_differs": Violation(
        "ValueError",
        "ST-LIFE-10",
        "last",
        lambda ctx, bad: st.shard(
            torch.zeros(4, dtype=torch.int64 if bad else torch.float32), chunk(0, _all(ctx))
        ),
    ),
    "shard_enumerable": Violation(
        "NotImplementedError",
        "ST-SPEC-13",
        "last",
        lambda ctx, bad: st.shard(
            torch.zeros(4),
            st.EnumerableShardingSpec([SM([0], [4], "rank:0/cpu")]) if bad else chunk(0, _all(ctx)),
        ),
    ),
    # init_from_local_shards (ST-VALID-2 to 6, 8 to 10, 14)
    "local_overlap": Violation(
        "ValueError",
        "ST-VALID-2",
        "last",
        lambda ctx, bad: _local(
            ctx,
            bad,
            lambda s, size: (
                [Shard(s[0].tensor, SM([1, 0], [2, 3], s[0].metadata.placement))],
                size,
            ),
        ),
    ),
    "local_gap": Violation(
        "ValueError",
        "ST-VALID-4",
        "last",
        lambda ctx, bad: _local(ctx, bad, lambda s, size: ([], size)),
    ),
    "local_out_of_bounds": Violation(
        "ValueError",
        "ST-VALID-3",
        "last",
        lambda ctx, bad: _local(
            ctx,
            bad,
            lambda s, size: (
                [
                    *s,
                    Shard(torch.zeros(0, 3), SM([size[0] + 2, 0], [0, 3], f"rank:{ctx.rank}/cpu")),
                ],
                size,
            ),
        ),
    ),
    "local_ndim": Violation(
        "ValueError",
        "ST-VALID-5",
        "last",
        lambda ctx, bad: _local(
            ctx,
            bad,
            lambda s, size: (
                [
                    Shard(
                        s[0].tensor.reshape(2, 3, 1),
                        SM([*s[0].metadata.shard_offsets, 0], [2, 3, 1], s[0].metadata.placement),
                    )
                ],
                size,
            ),
        ),
    ),
    "local_global_size_differs": Violation(
        "ValueError",
        "ST-VALID-6",
        "last",
        lambda ctx, bad: _local(ctx, bad, lambda s, size: (s, [size[0] + 1, 3])),
    ),
    "local_requires_grad_differs": Violation(
        "ValueError",
        "ST-VALID-6",
        "last",
        lambda ctx, bad: _local(
            ctx,
            bad,
            lambda s, size: ([Shard(s[0].tensor.clone().requires_grad_(), s[0].metadata)], size),
        ),
    ),
    "local_shards_of_one_rank_differ": Violation(
        "ValueError",
        "ST-VALID-6",
        "last",
        lambda ctx, bad: _local(
            ctx,
            bad,
            lambda s, size: (
                [
                    Shard(
                        s[0].tensor[:1].clone(),
                        SM(s[0].metadata.shard_offsets, [1, 3], s[0].metadata.placement),
                    ),
                    Shard(
                        s[0].tensor[1:].double(),
                        SM(
                            [s[0].metadata.shard_offsets[0] + 1, 0], [1, 3], s[0].metadata.placement
                        ),
                    ),
                ],
                size,
            ),
        ),
    ),
    "local_tensor_wrong_size": Violation(
        "ValueError",
        "ST-VALID-8",
        "last",
        lambda ctx, bad: _local(
            ctx, bad, lambda s, size: ([Shard(torch.zeros(1, 3), s[0].metadata)], size)
        ),
    ),
    "local_not_contiguous": Violation(
        "ValueError",
        "ST-VALID-9",
        "last",
        lambda ctx, bad: _local(
            ctx, bad, lambda s, size: ([Shard(torch.zeros(3, 2).t(), s[0].metadata)], size)
        ),
    ),
    "local_placed_elsewhere": Violation(
        "ValueError",
        "ST-VALID-10",
        "last",
        lambda ctx, bad: _local(
            ctx,
            bad,
            lambda s, size: (
                [
                    Shard(
                        s[0].tensor,
                        SM(
                            s[0].metadata.shard_offsets,
                            [2, 3],
                            f"rank:{(ctx.rank + 1) % ctx.world_size}/cpu",
                        ),
                    )
                ],
                size,
            ),
        ),
    ),
    "local_no_shard_anywhere": Violation(
        "ValueError", "ST-VALID-14", "all", lambda ctx, bad: st.init_from_local_shards([], 4, 3)
    ),
    # init_from_local_shards_and_global_metadata (ST-VALID-7, 8, 11)
    "global_metadata_differs": Violation(
        "ValueError", "ST-VALID-7", "last", lambda ctx, bad: _global(ctx, bad, _other_dtype)
    ),
    "global_tensor_wrong_dtype": Violation(
        "ValueError",
        "ST-VALID-8",
        "last",
        lambda ctx, bad: _global(
            ctx, bad, lambda s, md: ([Shard(s[0].tensor.long(), s[0].metadata)], md)
        ),
    ),
    "global_shard_missing": Violation(
        "ValueError",
        "ST-VALID-11",
        "last",
        lambda ctx, bad: _global(ctx, bad, lambda s, md: ([], md)),
    ),
    # reshard (ST-RESHARD-7 to 9, and one new spec on every rank)
    "reshard_enumerable": Violation(
        "NotImplementedError",
        "ST-RESHARD-7",
        "last",
        lambda ctx, bad: _reshard_to(
            ctx,
            bad,
            lambda n: st.EnumerableShardingSpec(
                chunk(1, list(range(n)))
                .build_metadata(torch.Size([2, 4]), st.TensorProperties())
                .shards_metadata
            ),
        ),
    ),
    "reshard_not_a_permutation": Violation(
        "NotImplementedError",
        "ST-RESHARD-8",
        "last",
        lambda ctx, bad: _reshard_to(ctx, bad, lambda n: chunk(1, [0] * (n + 1))),
    ),
    "reshard_dim_out_of_range": Violation(
        "ValueError",
        "ST-SPEC-6",
        "last",
        lambda ctx, bad: _reshard_to(ctx, bad, lambda n: chunk(5, list(range(n)))),
    ),
    "reshard_placement_not_member": Violation(
        "ValueError",
        "ST-VALID-12",
        "last",
        lambda ctx, bad: _reshard_to(ctx, bad, lambda n: chunk(1, list(range(1, n + 1)))),
    ),
    "reshard_not_a_spec": Violation(
        "TypeError", "ST-RESHARD-9", "last", lambda ctx, bad: _reshard_to(ctx, bad, lambda n: "x")
    ),
    "reshard_spec_differs": Violation(
        "ValueError",
        "ST-RESHARD-9",
        "last",
        lambda ctx, bad: _reshard_to(ctx, bad, lambda n: chunk(0, list(range(n)))),
    ),
}


def _all(ctx: RankContext) -> list[int]:
    return list(range(ctx.world_size))


def _out0(ctx: RankContext) -> torch.Tensor | None:
    return torch.zeros(4, 2, dtype=torch.float64) if ctx.rank == 0 else None


def violation(ctx: RankContext, case: str, bad: int) -> None:
    """Run violation ``case`` with the broken input on rank ``bad`` (-1: on every rank)."""
    VIOLATIONS[case].run(ctx, bad in (ctx.rank, -1))


def gathered_bytes(ctx: RankContext, lengths: list[int]) -> tuple[list[bytes], int]:
    """Every rank's message of ``lengths[rank]`` bytes, as ``verdict.gather_bytes`` returns it
    here, and how many all-gathers it took."""
    calls = [0]
    original = dist.all_gather_into_tensor

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    message = bytes((ctx.rank * 7 + i) % 256 for i in range(lengths[ctx.rank]))
    with unittest.mock.patch.object(dist, "all_gather_into_tensor", counted):
        messages = verdict.gather_bytes(dist.group.WORLD, message)
    return messages, calls[0]
