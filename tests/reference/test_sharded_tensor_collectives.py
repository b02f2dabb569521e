"""ShardedTensor collectives on real Gloo worlds: construction, shard, gather, reshard,
init_from_local_shards, copies, pickling and flattening, against a dense oracle."""

from __future__ import annotations

import pytest
import torch
from st_tasks import exact_values

from conformance.benchmarks.sharded_tensor import lower_bound
from conformance.world import Case
from conformance.world.backends import backend_named
from reference.sharded_tensor import ChunkShardingSpec, ShardMetadata, TensorProperties


def chunk(dim: int, ranks: list[int]) -> ChunkShardingSpec:
    return ChunkShardingSpec(dim, [f"rank:{r}/cpu" for r in ranks])


def box(x: torch.Tensor, offsets: list[int], sizes: list[int]) -> torch.Tensor:
    for d, (o, s) in enumerate(zip(offsets, sizes, strict=True)):
        x = x.narrow(d, o, s)
    return x


def assert_holds(x: torch.Tensor, shards, where: str) -> None:
    """Every local shard is bitwise its box of the dense tensor ``x`` (ERR-10)."""
    for offsets, sizes, tensor in shards:
        want = box(x, offsets, sizes)
        assert tensor.dtype == x.dtype, f"{where}: shard at {offsets} has dtype {tensor.dtype}"
        assert torch.equal(tensor, want), (
            f"{where}: shard at {offsets} holds {tensor.tolist()}, should be {want.tolist()}"
        )


def run_round_trip(world, ranks, **args):
    result = world.run(Case("st_tasks:round_trip", {**args, "ranks": ranks}))
    values = result.values()
    # new_group numbers its members in increasing global rank.
    members = sorted(ranks) if ranks is not None else list(range(len(values)))
    x = exact_values(args["shape"], args["dtype"])
    props = TensorProperties(dtype=x.dtype)
    first = chunk(args["dim"], args["placements"]).build_metadata(x.shape, props)
    second = chunk(args["new_dim"], args["new_placements"]).build_metadata(x.shape, props)
    for rank, value in enumerate(values):
        if rank not in members:
            assert value is None
            continue
        where = f"rank {rank} [{result.case.replay_command(len(values), backend_named('gloo'))}]"
        # ST-LIFE-7, ST-SPEC-1, 5: the spec's layout; the local shards are this rank's entries.
        assert value["metadata"] == first, where
        assert value["resharded_metadata"] == second, where
        for md, shards in ((first, value["local"]), (second, value["resharded"])):
            offsets = [m.shard_offsets for m in md.shards_metadata if m.placement.rank() == rank]
            assert [s[0] for s in shards] == offsets, where
        assert_holds(x, value["local"], where)
        assert_holds(x, value["resharded"], where + " after reshard")
        assert value["source_intact"], where
        assert value["old_shards_intact"], where
        # ST-GATHER-1, 2, 8: the group rank dst gets the whole tensor through its own strides.
        if members.index(rank) == args["dst"]:
            assert torch.equal(value["gathered"], x), where
            assert torch.equal(value["regathered"], x), where
            assert value["out_strides"] == value["gathered"].stride() != x.stride(), where
        else:
            assert value["gathered"] is None, where
            assert value["regathered"] is None, where


@pytest.mark.rules(
    "ST-LIFE-7",
    "ST-LIFE-11",
    "ST-SPEC-1",
    "ST-SPEC-2",
    "ST-SPEC-4",
    "ST-SPEC-5",
    "ST-GATHER-1",
    "ST-GATHER-8",
    "ST-GATHER-9",
    "ST-GATHER-10",
    "ST-GATHER-11",
    "ST-RESHARD-1",
    "ST-RESHARD-2",
    "ST-RESHARD-3",
    "ST-RESHARD-6",
    "ST-RESHARD-11",
    "ERR-9",
    "ERR-10",
)
@pytest.mark.parametrize(("shape", "dtype"), [([5, 3], "float64"), ([2, 7], "int64")])
def test_shard_gather_reshard_are_exact_for_uneven_empty_and_permuted_chunks(world, shape, dtype):
    n = world.world_size
    rotated = [(r + 1) % n for r in range(n)]
    run_round_trip(
        world,
        None,
        shape=shape,
        dtype=dtype,
        dim=0,
        placements=rotated,
        src=n // 2,
        dst=n - 1,
        new_dim=-1,
        new_placements=rotated[::-1],
    )


@pytest.mark.rules("ST-LIFE-8", "ST-GATHER-2", "ST-RESHARD-10", "ST-VALID-12")
@pytest.mark.parametrize(
    ("world_size", "ranks"),
    [(3, [1, 2]), (4, [3, 0, 2])],
    ids=["3-ranks-group-1-2", "4-ranks-group-3-0-2"],
)
def test_sub_groups_read_src_and_dst_as_group_ranks_and_placements_as_global(
    world_pool, world_size, ranks
):
    """Group rank 1 is the source and group rank 0 the destination, whatever their global
    ranks; the placements name global ranks, in an order unlike the group's."""
    members = sorted(ranks)
    run_round_trip(
        world_pool.get(world_size),
        ranks,
        shape=[5, 2],
        dtype="float64",
        dim=0,
        placements=members[::-1],
        src=1,
        dst=0,
        new_dim=1,
        new_placements=members,
    )


@pytest.mark.rules(
    "ST-LIFE-1", "ST-LIFE-2", "ST-LIFE-3", "ST-LIFE-15", "ST-LIFE-16", "ST-SPEC-3", "ST-SPEC-9"
)
def test_constructors_follow_the_spec_layout_and_fill_each_local_shard(world):
    n = world.world_size
    placements = [r % n for r in range(n + 2)]  # over-decomposed: ranks 0 and 1 hold two chunks
    shape = [3, 2]  # fewer rows than chunks for n >= 2: trailing chunks are empty, at offset 3
    values = world.run(
        Case("st_tasks:construct", {"placements": placements, "shape": shape, "dtype": "int64"})
    ).values()
    layout = chunk(0, placements).build_metadata(
        torch.Size(shape), TensorProperties(dtype=torch.int64)
    )
    fills = {"zeros": 0, "ones": 1, "full": 7}
    for rank, value in enumerate(values):
        mine = [m for m in layout.shards_metadata if m.placement.rank() == rank]
        assert value["metadata"].shards_metadata == layout.shards_metadata
        for name in ("empty", "zeros", "ones", "full", "rand", "randn"):
            assert [s[0] for s in value[name]] == [m.shard_offsets for m in mine], (rank, name)
            assert [s[1] for s in value[name]] == [list(s[2].shape) for s in value[name]]
        for name, fill in fills.items():
            assert all(bool((s[2] == fill).all()) for s in value[name]), (rank, name)
            assert all(s[2].dtype == torch.int64 for s in value[name])
        assert all(bool(((s[2] >= 0) & (s[2] < 1)).all()) for s in value["rand"])
        assert value["rand_dtype"] == torch.get_default_dtype()
        assert (value["size"], value["size_last"], value["dim"], value["dtype"]) == (
            torch.Size(shape),
            2,
            2,
            torch.int64,
        )
        assert value["spec"] == chunk(0, placements)
        if len(mine) == 1:
            assert value["local_tensor"] == torch.Size(mine[0].shard_sizes)
        else:
            assert value["local_tensor"].startswith("NotImplementedError [ST-LIFE-16]")
        assert value["leaves"] == [False] * len(mine)  # int64 cannot require grad


@pytest.mark.rules("ST-LIFE-12", "ST-LIFE-13", "ST-LIFE-14", "ST-LIFE-15")
def test_from_local_shards_concatenates_in_rank_order_and_keeps_the_tensors(world):
    n = world.world_size
    rows, holders = 7, max(1, n - 1)  # the last rank passes no shard when n > 1
    values = world.run(Case("st_tasks:from_local", {"rows": rows, "holders": holders})).values()
    x = exact_values([rows, 3], "float64")
    bounds = [(rows * c // holders, rows * (c + 1) // holders) for c in range(holders)]
    expected = [([lo, 0], [hi - lo, 3], c) for c, (lo, hi) in enumerate(bounds)]
    for rank, value in enumerate(values):
        got = [
            (m.shard_offsets, m.shard_sizes, m.placement.rank())
            for m in value["metadata"].shards_metadata
        ]
        assert got == expected, rank
        assert value["kept"] == ([True] if rank < holders else [])
        assert value["global_metadata"], rank
        offsets = [s[0][0] for s in value["global_local"]]
        assert offsets == sorted(offsets), "local shards follow shards_metadata order"
        assert_holds(x, value["global_local"], f"rank {rank}")
        assert value["spec"] == chunk(0, list(range(holders))) or holders * 3 != rows
    assert torch.equal(values[0]["gathered"], x)


@pytest.mark.rules("ST-LIFE-17", "ST-LIFE-18", "ST-RESHARD-4")
def test_to_clone_and_pickling_keep_layout_and_values(world_pool):
    for value in world_pool.get(2).run(Case("st_tasks:copies", {})).values():
        assert value["loaded_metadata"]
        for (o1, s1, t1), (o2, s2, t2) in zip(value["loaded_local"], value["local"], strict=True):
            assert (o1, s1) == (o2, s2)
            assert torch.equal(t1, t2)
        assert value["to_dtype"] == (torch.float32, torch.float64, torch.float32)
        assert all(value["to_values"])
        assert value["same_objects"] == (True, True)
        assert value["identity"]
        assert value["clone_equal"]
        assert not value["clone_shares"]


@pytest.mark.rules(*(f"ST-FLAT-{i}" for i in (1, 2, 3, 4, 5, 6, 7, 8, 10)))
def test_flatten_puts_the_inner_local_shard_in_outer_coordinates(world):
    n = world.world_size
    values = world.run(Case("st_tasks:nested", {})).values()
    for r, value in enumerate(values):
        assert value["keys"] == ["b", "l", "w", "x"]
        assert value["list"] == ["ShardedTensor", "int"]
        assert value["two_inner"].startswith("[ST-FLAT-4]")
        assert value["b_same"]
        assert value["plain_same"]
        assert value["x_keys"] == (["o", "p", "y"] if r == 0 else ["p", "y"])
        assert value["size"] == torch.Size([2 * n, 4])
        assert value["outer_intact"]
        ((offsets, sizes, tensor),) = value["local"]
        lo, hi = (min(4, r * -(-4 // n)), min(4, (r + 1) * -(-4 // n)))
        assert (offsets, sizes) == ([2 * r, lo], [2, hi - lo])
        assert bool((tensor == r).all())
        boxes = value["boxes"]
        assert [b[2] for b in boxes].count(r) == 1
        assert boxes[-1][2] == r
        # ST-FLAT-7: the boxes tile the outer size.
        volume = sum(torch.Size(b[1]).numel() for b in boxes)
        assert volume == 8 * n


@pytest.mark.parametrize(
    ("shape", "dim", "placements", "new_placements"),
    [
        ([8, 4], 0, [0, 1, 2, 3], [0, 1, 2, 3]),  # even: rows to columns
        ([5, 3], 0, [2, 0, 3, 1], [3, 1, 0, 2]),  # uneven, permuted, an empty chunk
        ([7], 0, [1, 2, 0, 3], [3, 0, 2, 1]),  # one dim: reshard permutes the chunks
    ],
)
def test_shard_gather_and_reshard_send_exactly_the_elements_whose_owner_changes(
    world_pool, shape, dim, placements, new_placements
):
    """The data path's lower bound (issue: bytes moved equal it): each element crosses the wire
    once, from the rank that holds it to the rank that needs it, and nothing else does."""
    world = world_pool.get(4)
    args = {"shape": shape, "dim": dim, "placements": placements, "new_placements": new_placements}
    sent = world.run(Case("st_tasks:sent_bytes", args)).values()
    size, props = torch.Size(shape), TensorProperties(dtype=torch.float64)
    rows = chunk(dim, placements).build_metadata(size, props).shards_metadata
    columns = chunk(-1, new_placements).build_metadata(size, props).shards_metadata
    whole = [ShardMetadata([0] * len(shape), shape, "rank:0/cpu")]
    moves = {"shard": (whole, rows), "gather": (rows, whole), "reshard": (rows, columns)}
    for op, (old, new) in moves.items():
        assert sum(rank[op] for rank in sent) == lower_bound(old, new, size, 8), (op, sent)
