"""spec/st-gather.md and spec/st-lifecycle.md: shard from a source, gather to any destination."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import judge
from conformance import strategies as ss
from conformance.oracle.st_metadata import ShardMeta
from conformance.oracle.st_ops import box
from conformance.oracle.st_sharding_spec import ChunkSpec, chunk_shards
from conformance.oracle.tensors import make_global
from conformance.world import Case


@st.composite
def gather_cases(draw, world_sizes: list[int]):
    world_size = draw(st.sampled_from(world_sizes))
    shape = draw(ss.shapes(min_dims=1))
    group = sorted(draw(st.permutations(range(world_size)))[: draw(st.integers(1, world_size))])
    return world_size, {
        "shape": shape,
        "dtype": draw(st.sampled_from(ss.DTYPES)),
        "seed": draw(st.integers(0, 2**16)),
        "dim": draw(st.integers(-len(shape), len(shape) - 1)),
        "order": draw(st.permutations(group)),
        "group": group,
        "src": draw(st.integers(0, len(group) - 1)),
        "dst": draw(st.integers(0, len(group) - 1)),
    }


@pytest.mark.rules(
    "ST-LIFE-1", "ST-LIFE-7", "ST-GATHER-1", "ST-GATHER-2", "ST-GATHER-9", "ST-GATHER-10",
    "ST-SPEC-5", "ERR-9", "ERR-10",
)  # fmt: skip
@given(data=st.data())
def test_shard_then_gather_returns_the_source_exactly(impl, impl_name, world_pool,
                                                     available_world_sizes, data):  # fmt: skip
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(gather_cases(available_world_sizes))
    if len(args["group"]) < world_size:
        judge.requires(impl, "sub_groups")
    result = world_pool.get(world_size).run(
        Case("conformance.tasks.sharded_tensor:shard_then_gather", {"impl": impl_name, **args})
    )
    values = judge.all_returned(result)
    context = result.replay_command()
    expected = make_global(args["shape"], args["dtype"], args["seed"])
    layout = chunk_shards(args["shape"], ChunkSpec(args["dim"], tuple(
        f"rank:{r}/cpu" for r in args["order"])))  # fmt: skip
    for rank, value in enumerate(values):
        if rank not in args["group"]:
            continue
        mine = [s for s in layout if s.rank == rank]
        judge.assert_equal(f"rank {rank}: number of local shards", len(value["local"]),
                           len(mine), context)  # fmt: skip
        for (tensor, meta), want in zip(value["local"], mine, strict=True):
            judge.assert_equal(f"rank {rank}: shard box", ShardMeta.from_json(meta).sizes,
                               want.sizes, context)  # fmt: skip
            judge.assert_tensor_exact(f"rank {rank}: local shard", tensor, box(expected, want),
                                      context)  # fmt: skip
        judge.assert_equal(f"rank {rank}: source unchanged", value["source_unchanged"], True,
                           context)  # fmt: skip
        if args["group"].index(rank) == args["dst"]:
            judge.assert_tensor_exact(f"rank {rank}: out", value["out"], expected, context)
        else:
            judge.assert_equal(f"rank {rank}: out", value["out"], None, context)
