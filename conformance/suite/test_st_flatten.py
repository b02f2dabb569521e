"""spec/st-flatten.md: flattening of 2-D nested sharded tensors in a state dict."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance import judge
from conformance.oracle.flatten import flatten_entry, flatten_verdict, matches
from conformance.oracle.st_metadata import Properties, ShardMeta
from conformance.oracle.st_sharding_spec import ChunkSpec, build_metadata
from conformance.world import Case


@st.composite
def nested_cases(draw, world_sizes: list[int]):
    """Outer placements a permutation of the world, or with a rank twice or missing (ST-FLAT-2,
    3); inner placements likewise (ST-FLAT-4); flattening on every rank or on one (ST-FLAT-9)."""
    world_size = draw(st.sampled_from(world_sizes))
    outer = draw(st.permutations(range(world_size)))
    inner = draw(st.permutations(range(world_size)))
    change = draw(st.sampled_from(["none", "none", "outer_repeat", "inner_repeat"]))
    if change == "outer_repeat":
        outer = [*outer, draw(st.sampled_from(outer))][-max(1, world_size) :]
    elif change == "inner_repeat":
        inner = [*inner, draw(st.sampled_from(inner))]
    return world_size, {
        "rows": draw(st.integers(1, 3)),
        "cols": draw(st.integers(0, 5)),
        "outer_ranks": list(outer),
        "inner_ranks": list(inner),
        "caller": draw(st.sampled_from([None, *range(world_size)])),
    }


def _spec(ranks):
    return ChunkSpec(0, tuple(f"rank:{r}/cpu" for r in ranks))


@pytest.mark.rules(
    "ST-FLAT-1", "ST-FLAT-2", "ST-FLAT-3", "ST-FLAT-4", "ST-FLAT-5", "ST-FLAT-6", "ST-FLAT-7",
    "ST-FLAT-8", "ST-FLAT-9", "ST-FLAT-10", "ERR-9",
)  # fmt: skip
@given(data=st.data())
def test_flattening_rewrites_nested_tensors_into_outer_coordinates(
    impl, impl_name, world_pool, available_world_sizes, data
):
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(nested_cases(available_world_sizes))
    result = world_pool.get(world_size).run(
        Case("conformance.tasks.sharded_tensor:flatten_checked", {"impl": impl_name, **args})
    )
    values = judge.all_returned(result)
    context = result.replay_command()
    rows, cols = args["rows"], args["cols"]
    size = (rows * len(args["outer_ranks"]), cols)
    outer = build_metadata(_spec(args["outer_ranks"]), size, Properties())
    inner = build_metadata(ChunkSpec(1, _spec(args["inner_ranks"]).placements), (rows, cols))
    for rank, value in enumerate(values):
        if args["caller"] is not None and rank != args["caller"]:
            continue
        holds_one = len([s for s in outer.shards if s.rank == rank]) == 1
        nested = inner if holds_one else None
        verdict = flatten_verdict(outer, nested, rank)
        if not verdict.ok:
            judge.assert_equal(f"rank {rank}: flatten raised ValueError",
                               value.get("is_value_error"), True, context)  # fmt: skip
            continue
        judge.assert_equal(f"rank {rank}: error", value["error"], None, context)
        entry = flatten_entry(outer, nested, rank)
        keys = ["b", "x"] if entry == "dropped" else ["b", "w", "x"]
        judge.assert_equal(f"rank {rank}: keys", value["keys"], keys, context)
        judge.assert_equal(f"rank {rank}: b is the same object", value["b_same"], True, context)
        judge.assert_equal(f"rank {rank}: x.y", value["y"], 3, context)
        judge.assert_equal(f"rank {rank}: input intact", value["input_intact"], True, context)
        plain_held = any(s.rank == rank for s in outer.shards)
        judge.assert_equal(f"rank {rank}: plain tensor kept", value["plain_same"], plain_held,
                           context)  # fmt: skip
        if isinstance(entry, str):
            judge.assert_equal(f"rank {rank}: w", value["w"], entry, context)
            continue
        flat = value["w"]
        judge.assert_equal(f"rank {rank}: size", tuple(flat["size"]), entry.size, context)
        judge.assert_equal(f"rank {rank}: properties", Properties(**flat["properties"]),
                           entry.properties, context)  # fmt: skip
        judge.assert_equal(f"rank {rank}: local shards", [m for _, m in flat["local"]],
                           [entry.local.to_json()], context)  # fmt: skip
        shards = [ShardMeta.from_json(s) for s in flat["shards"]]
        judge.assert_equal(f"rank {rank}: boxes and placements match ST-FLAT-7/8",
                           matches(entry, shards, rank), True, context)  # fmt: skip
        judge.assert_tensor_exact(f"rank {rank}: local values", value["local_values"][0],
                                  torch.full(entry.local.sizes, float(rank)), context)  # fmt: skip
