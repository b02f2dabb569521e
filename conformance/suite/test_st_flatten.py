"""spec/st-flatten.md: flattening of 2-D nested sharded tensors in a state dict."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance import judge
from conformance.oracle.flatten import (
    Flat,
    boxes_match,
    flatten_entry,
    flatten_verdict,
    names_match,
)
from conformance.oracle.st_metadata import Properties, ShardMeta, TensorMeta
from conformance.oracle.st_sharding_spec import ChunkSpec, build_metadata
from conformance.rank_devices import device, placement


def _spec(ranks):
    return ChunkSpec(0, tuple(placement(r) for r in ranks))


@st.composite
def nested_cases(draw, world_sizes: list[int]):
    """Outer placements a permutation of the world, or with a rank twice or missing (ST-FLAT-2,
    3); the inner tensor chunked on dim 1 over a permutation, or with a rank twice (ST-FLAT-4),
    given to the ranks as the spec's chunk boxes; flattening on every rank or on one
    (ST-FLAT-9)."""
    world_size = draw(st.sampled_from(world_sizes))
    outer = draw(st.permutations(range(world_size)))
    inner = draw(st.permutations(range(world_size)))
    change = draw(st.sampled_from(["none", "none", "outer_repeat", "inner_repeat"]))
    if change == "outer_repeat":
        outer = [*outer, draw(st.sampled_from(outer))][-max(1, world_size) :]
    elif change == "inner_repeat":
        inner = [*inner, draw(st.sampled_from(inner))]
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(0, 5))
    chunks = build_metadata(ChunkSpec(1, _spec(inner).placements), (rows, cols)).shards
    return world_size, {
        "rows": rows,
        "cols": cols,
        "outer_ranks": list(outer),
        "inner_boxes": [
            [[list(s.offsets), list(s.sizes)] for s in chunks if s.rank == r]
            for r in range(world_size)
        ],
        "caller": draw(st.sampled_from([None, *range(world_size)])),
    }


@st.composite
def empty_inner_shard_cases(draw, world_sizes: list[int]):
    """Every rank holds one outer shard; one rank holds the whole inner ``(rows, cols)`` tensor,
    each other rank an empty inner box starting where that one starts or at the end of dim 1
    (in bounds: ST-VALID-3)."""
    world_size = draw(st.sampled_from(world_sizes))
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    holder = draw(st.sampled_from(range(world_size)))
    starts = draw(st.lists(st.sampled_from([0, cols]), min_size=world_size, max_size=world_size))
    boxes = [
        [[[0, 0], [rows, cols]]] if r == holder else [[[0, start], [rows, 0]]]
        for r, start in enumerate(starts)
    ]
    return world_size, {
        "rows": rows,
        "cols": cols,
        "outer_ranks": list(draw(st.permutations(range(world_size)))),
        "inner_boxes": boxes,
        "caller": None,
    }


def _outer(args) -> TensorMeta:
    size = (args["rows"] * len(args["outer_ranks"]), args["cols"])
    return build_metadata(_spec(args["outer_ranks"]), size, Properties())


def _inner(args) -> TensorMeta:
    shards = [
        ShardMeta(offsets, sizes, placement(r))
        for r, boxes in enumerate(args["inner_boxes"])
        for offsets, sizes in boxes
    ]
    return TensorMeta(tuple(shards), (args["rows"], args["cols"]))


def _judge_boxes(value, entry: Flat, rank: int, context: str) -> list[ShardMeta]:
    """The boxes of one rank's rewritten entry ``w`` against the oracle's (ST-FLAT-7)."""
    judge.assert_equal(f"rank {rank}: error", value["error"], None, context, rule="ST-FLAT-7")
    shards = [ShardMeta.from_json(s) for s in value["w"]["shards"]]
    boxes = sorted(((list(s.offsets), list(s.sizes)) for s in shards), key=str)
    judge.assert_equal(f"rank {rank}: boxes {boxes} are those of ST-FLAT-7 {list(entry.boxes)}",
                       boxes_match(entry, shards), True, context, rule="ST-FLAT-7")  # fmt: skip
    return shards


def _judge_flat(value, entry: Flat, rank: int, context: str) -> None:
    """One rank's rewritten entry ``w`` against the oracle's ``entry`` (ST-FLAT-5 to 8)."""
    flat = value["w"]
    judge.assert_equal(f"rank {rank}: size", tuple(flat["size"]), entry.size, context,
                       rule="ST-FLAT-5")  # fmt: skip
    judge.assert_equal(f"rank {rank}: properties", Properties(**flat["properties"]),
                       entry.properties, context, rule="ST-FLAT-5")  # fmt: skip
    judge.assert_equal(f"rank {rank}: local shards", [m for _, m in flat["local"]],
                       [entry.local.to_json()], context, rule="ST-FLAT-6")  # fmt: skip
    judge.assert_tensor_exact(f"rank {rank}: local values", value["local_values"][0],
                              torch.full(entry.local.sizes, float(rank)), context,
                              rule="ST-FLAT-6")  # fmt: skip
    shards = _judge_boxes(value, entry, rank, context)
    named = [s.placement for s in shards]
    judge.assert_equal(f"rank {rank}: only the local entry of {named} names rank {rank}",
                       names_match(entry, shards, rank), True, context,
                       rule="ST-FLAT-8")  # fmt: skip


@pytest.mark.rules(
    "ST-FLAT-1", "ST-FLAT-2", "ST-FLAT-3", "ST-FLAT-4", "ST-FLAT-5", "ST-FLAT-6", "ST-FLAT-7",
    "ST-FLAT-8", "ST-FLAT-9", "ST-FLAT-10", "ERR-9",
)  # fmt: skip
@given(data=st.data())
def test_flattening_rewrites_nested_tensors_into_outer_coordinates(
    impl, available_world_sizes, run_case, data
):
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(nested_cases(available_world_sizes))
    result = run_case("sharded_tensor:flatten_checked", world_size, **args)
    # Flattening is local (ST-FLAT-9): every rank returns, whether it flattens or not.
    values = judge.all_returned(result, rule="ST-FLAT-9")
    context = result.replay_command()
    outer = _outer(args)
    inner = _inner(args)
    for rank, value in enumerate(values):
        if args["caller"] is not None and rank != args["caller"]:
            continue
        holds_one = len([s for s in outer.shards if s.rank == rank]) == 1
        nested = inner if holds_one else None
        verdict = flatten_verdict(outer, nested, rank)
        if not verdict.ok:
            judge.assert_equal(f"rank {rank}: flatten raised ValueError",
                               value.get("is_value_error"), True, context,
                               rule="ST-FLAT-4")  # fmt: skip
            continue
        entry = flatten_entry(outer, nested, rank, device(rank))
        dropped = entry == "dropped"
        judge.assert_equal(f"rank {rank}: error", value["error"], None, context,
                           rule="ST-FLAT-2" if dropped else "ST-FLAT-3" if entry == "same"
                           else "ST-FLAT-7")  # fmt: skip
        judge.assert_equal(f"rank {rank}: input intact", value["input_intact"], True, context,
                           rule="ST-FLAT-10")  # fmt: skip
        judge.assert_equal(f"rank {rank}: 'w' kept", "w" in value["keys"], not dropped, context,
                           rule="ST-FLAT-2")  # fmt: skip
        judge.assert_equal(f"rank {rank}: other keys", [k for k in value["keys"] if k != "w"],
                           ["b", "x"], context, rule="ST-FLAT-1")  # fmt: skip
        judge.assert_equal(f"rank {rank}: b is the same object", value["b_same"], True, context,
                           rule="ST-FLAT-1")  # fmt: skip
        judge.assert_equal(f"rank {rank}: x.y", value["y"], 3, context, rule="ST-FLAT-1")
        plain_held = any(s.rank == rank for s in outer.shards)
        x_keys = sorted(["y", *(["p"] if plain_held else []), *(["o"] if rank == 0 else [])])
        judge.assert_equal(f"rank {rank}: keys of x (o, p dropped where not held)",
                           value["x_keys"], x_keys, context, rule="ST-FLAT-2")  # fmt: skip
        judge.assert_equal(f"rank {rank}: plain tensor kept", value["plain_same"], plain_held,
                           context, rule="ST-FLAT-3")  # fmt: skip
        if isinstance(entry, Flat):
            _judge_flat(value, entry, rank, context)
        else:
            judge.assert_equal(f"rank {rank}: w", value["w"], entry, context,
                               rule="ST-FLAT-2" if dropped else "ST-FLAT-3")  # fmt: skip


@pytest.mark.rules("ST-FLAT-7")
@given(data=st.data())
def test_an_empty_inner_shard_starting_where_a_full_one_starts_is_flattened_like_any_other(
    impl, available_world_sizes, run_case, data
):
    judge.requires(impl, "sharded_tensor")
    sizes = [n for n in available_world_sizes if n > 1]  # one rank holds no empty box
    if not sizes:
        pytest.skip("needs a world of 2 ranks or more")
    world_size, args = data.draw(empty_inner_shard_cases(sizes))
    result = run_case("sharded_tensor:flatten_checked", world_size, **args)
    # The layout is valid (ST-VALID): every rank builds it and flattens it to ST-FLAT-7's boxes.
    values = judge.all_returned(result, rule="ST-FLAT-7")
    context = result.replay_command()
    outer, inner = _outer(args), _inner(args)
    for rank, value in enumerate(values):
        entry = flatten_entry(outer, inner, rank, device(rank))
        assert isinstance(entry, Flat)  # every rank holds one outer and one inner shard
        _judge_boxes(value, entry, rank, context)
