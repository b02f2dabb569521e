"""spec/st-gather.md and spec/st-lifecycle.md: shard from a source, gather to any destination."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge
from conformance import strategies as ss
from conformance.oracle.st_collectives import box, gather_verdict
from conformance.oracle.st_metadata import Properties, ShardMeta
from conformance.oracle.st_sharding_spec import ChunkSpec, build_metadata, chunk_shards
from conformance.oracle.st_validation import TensorInfo
from conformance.oracle.tensors import make_global
from conformance.rank_devices import device, placement


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
@pytest.mark.edges("sharded tensor", "permutation", "group")
@given(data=st.data())
def test_shard_then_gather_returns_the_source_exactly(impl, available_world_sizes, run_case, data):
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(gather_cases(available_world_sizes))
    edges.tensor(args["shape"], args["dtype"], len(args["group"]))
    edges.group(args["group"], world_size)
    edges.permutation(args["group"], args["order"])
    if len(args["group"]) < world_size:
        judge.assume_claimed(impl, "sub_groups")
    result = run_case("sharded_tensor:shard_then_gather", world_size, **args)
    # Gather works on every layout (ST-GATHER-9), and on a sub-group (ST-GATHER-2).
    sub_group = len(args["group"]) < world_size
    values = judge.all_returned(result, rule="ST-GATHER-2" if sub_group else "ST-GATHER-9")
    context = result.replay_command()
    expected = make_global(args["shape"], args["dtype"], args["seed"])
    layout = chunk_shards(args["shape"], ChunkSpec(args["dim"], tuple(
        placement(r) for r in args["order"])))  # fmt: skip
    for rank, value in enumerate(values):
        if rank not in args["group"]:
            continue
        mine = [s for s in layout if s.rank == rank]
        judge.assert_equal(f"rank {rank}: number of local shards", len(value["local"]),
                           len(mine), context, rule="ST-SPEC-5")  # fmt: skip
        for (tensor, meta), want in zip(value["local"], mine, strict=True):
            judge.assert_equal(f"rank {rank}: shard box", ShardMeta.from_json(meta).sizes,
                               want.sizes, context, rule="ST-SPEC-5")  # fmt: skip
            judge.assert_tensor_exact(f"rank {rank}: local shard", tensor, box(expected, want),
                                      context, rule="ST-LIFE-7")  # fmt: skip
        judge.assert_equal(f"rank {rank}: source unchanged", value["source_unchanged"], True,
                           context, rule="ERR-9")  # fmt: skip
        if args["group"].index(rank) == args["dst"]:
            judge.assert_tensor_exact(f"rank {rank}: out", value["out"], expected, context,
                                      rule=out_rule(value["out"], expected))  # fmt: skip
        else:
            judge.assert_equal(f"rank {rank}: out", value["out"], None, context,
                               rule="ST-GATHER-1")  # fmt: skip


@st.composite
def layout_gather_cases(draw, world_sizes: list[int]):
    """A valid layout drawn apart from any spec: a tiling of the shape (grids and layouts off a
    grid) with up to two empty boxes, in any order, each box on any member of the group, so
    that a rank holds several boxes or none; the group the world or a sub-group."""
    world_size = draw(st.sampled_from(world_sizes))
    group = sorted(draw(st.permutations(range(world_size)))[: draw(st.integers(1, world_size))])
    shape = draw(ss.shapes(min_dims=1, max_dims=3, max_side=5))
    boxes = draw(ss.owned_layouts(shape, group))
    return world_size, {
        "shape": shape,
        "dtype": draw(st.sampled_from(ss.DTYPES)),
        "seed": draw(st.integers(0, 2**16)),
        "boxes": boxes,
        "group": group,
        "dst": draw(st.integers(0, len(group) - 1)),
    }


@pytest.mark.rules("ST-GATHER-1", "ST-GATHER-2", "ST-GATHER-9", "ST-GATHER-10", "ST-LIFE-14",
                   "ST-VALID-1")  # fmt: skip
@pytest.mark.edges("sharded tensor", "group", "local shards", "layout")
@given(data=st.data())
def test_gather_returns_the_global_tensor_of_any_layout(impl, available_world_sizes, run_case,
                                                         data):  # fmt: skip
    """Gather judged on tensors not built by ``shard``: every valid layout, enumerable ones and
    ranks with several boxes or none among them, on the world and on sub-groups (ST-GATHER-9,
    ST-GATHER-2)."""
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(layout_gather_cases(available_world_sizes))
    group, boxes = args["group"], args["boxes"]
    if len(group) < world_size:
        judge.assume_claimed(impl, "sub_groups")
    edges.tensor(args["shape"], args["dtype"], len(boxes))
    edges.group(group, world_size)
    edges.local_shards([[{"metadata": b} for b in boxes if b["rank"] == r] for r in group])
    edges.layout(args["shape"], [(b["offsets"], b["sizes"]) for b in boxes])
    result = run_case("sharded_tensor:gather_layout", world_size, **args)
    # A valid layout refused: with an empty box, most likely one seen to overlap another.
    empty = any(not all(b["sizes"]) for b in boxes)
    judge.assert_built(result, rule="ST-VALID-1" if empty else "ST-LIFE-14")
    sub_group = len(group) < world_size
    values = judge.all_returned(result, rule="ST-GATHER-2" if sub_group else "ST-GATHER-9")
    context = result.replay_command()
    expected = make_global(args["shape"], args["dtype"], args["seed"])
    for rank in group:
        out = values[rank]["out"]
        if group.index(rank) == args["dst"]:
            judge.assert_tensor_exact(f"rank {rank}: out", out, expected, context,
                                      rule=out_rule(out, expected))  # fmt: skip
        else:
            judge.assert_equal(f"rank {rank}: out", out, None, context, rule="ST-GATHER-1")


def out_rule(out, expected: torch.Tensor) -> str:
    """The rule a wrong gathered ``out`` breaks: ST-GATHER-10 when it differs from the global
    tensor only as a trip through float32 would make it (inexact transport), otherwise
    ST-GATHER-1 (data missing or in the wrong place)."""
    return "ST-GATHER-10" if judge.rounded_through_float32(out, expected) else "ST-GATHER-1"


GATHER_FAULTS = ["none", "strided_out", "dst_range", "dst_type", "dst_differs", "out_none",
                 "out_shape", "out_dtype", "out_not_tensor", "out_elsewhere"]  # fmt: skip


@st.composite
def gather_arg_cases(draw, world_sizes: list[int]):
    """A valid gather over the world, then at most one broken argument (ERR-11), on one rank
    where the fault is per rank (ERR-6)."""
    world_size = draw(st.sampled_from(world_sizes))
    shape = draw(ss.shapes(min_dims=1, max_dims=3, max_side=5))
    dtype = draw(st.sampled_from(ss.DTYPES))
    dst = draw(st.integers(0, world_size - 1))
    fault = draw(st.sampled_from(GATHER_FAULTS))
    if world_size == 1 and fault in ("dst_differs", "out_elsewhere"):
        fault = "none"
    dsts: list = [dst] * world_size
    outs: list = [None] * world_size
    outs[dst] = {"shape": shape, "dtype": dtype, "transposed": fault == "strided_out"}
    other = draw(st.sampled_from([r for r in range(world_size) if r != dst] or [dst]))
    if fault == "dst_range":
        dsts = [draw(st.sampled_from([world_size, world_size + 3, -1]))] * world_size
        outs = [None] * world_size
    elif fault == "dst_type":
        dsts = [draw(st.sampled_from([float(dst), str(dst)]))] * world_size
        outs = [None] * world_size
    elif fault == "dst_differs":
        dsts[other] = draw(st.sampled_from([r for r in range(world_size) if r != dst]))
    elif fault == "out_none":
        outs[dst] = None
    elif fault == "out_shape":
        outs[dst] = {"shape": [*shape[:-1], shape[-1] + 1], "dtype": dtype}
    elif fault == "out_dtype":
        outs[dst] = {"shape": shape, "dtype": "float64" if dtype != "float64" else "int64"}
    elif fault == "out_not_tensor":
        outs[dst] = [0] * shape[0]
    elif fault == "out_elsewhere":
        outs[other] = {"shape": shape, "dtype": dtype}
    return world_size, {
        "shape": shape,
        "dtype": dtype,
        "seed": draw(st.integers(0, 2**16)),
        "dim": draw(st.integers(-len(shape), len(shape) - 1)),
        "order": draw(st.permutations(range(world_size))),
        "dst_by_rank": dsts,
        "out_by_rank": outs,
    }


def _out_info(desc, rank):
    if isinstance(desc, dict):
        return TensorInfo(tuple(desc["shape"]), desc["dtype"], device(rank))
    return desc


@pytest.mark.rules(
    "ST-GATHER-1", "ST-GATHER-3", "ST-GATHER-4", "ST-GATHER-5", "ST-GATHER-6", "ST-GATHER-7",
    "ST-GATHER-8", "ST-GATHER-9", "ST-GATHER-10", "ST-GATHER-11", "ST-LIFE-7", "ERR-1", "ERR-2",
    "ERR-6", "ERR-7", "ERR-8", "ERR-11",
)  # fmt: skip
@pytest.mark.edges("transposed")
@given(data=st.data())
def test_gather_arguments_are_validated_on_every_rank_before_data_moves(
    impl, available_world_sizes, run_case, data
):
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(gather_arg_cases(available_world_sizes))
    edges.transposed([d["shape"] for d in args["out_by_rank"]
                      if isinstance(d, dict) and d.get("transposed")])  # fmt: skip
    result = run_case("sharded_tensor:gather_checked", world_size, **args)
    judge.assert_built(result, rule="ST-LIFE-7")
    group = list(range(world_size))
    spec = ChunkSpec(args["dim"], tuple(placement(r) for r in args["order"]))
    meta = build_metadata(spec, args["shape"], Properties(dtype=args["dtype"]))
    verdict = gather_verdict(
        meta,
        group,
        dict(enumerate(args["dst_by_rank"])),
        {r: _out_info(d, r) for r, d in enumerate(args["out_by_rank"])},
    )
    strided = any(isinstance(d, dict) and d.get("transposed") for d in args["out_by_rank"])
    rule = "ST-GATHER-8" if strided else "ST-GATHER-9"
    values = judge.assert_collective_verdict(result, verdict, rule=rule)
    context = result.replay_command()
    judge.assert_facts_of_raises(result, {"out_unchanged": "out unchanged before raising",
                                          "unchanged": "tensor unchanged before raising"},
                                 context, rule="ERR-8")  # fmt: skip
    if values is None:
        return
    expected = make_global(args["shape"], args["dtype"], args["seed"])
    for rank, value in enumerate(values):
        judge.assert_equal(f"rank {rank}: gather returned", value["returned"], None, context,
                           rule="ST-GATHER-11")  # fmt: skip
        judge.assert_equal(f"rank {rank}: tensor unchanged", value["unchanged"], True, context,
                           rule="ST-GATHER-11")  # fmt: skip
        judge.assert_equal(f"rank {rank}: out strides kept", value["strides_kept"], True, context,
                           rule="ST-GATHER-8")  # fmt: skip
        if rank == args["dst_by_rank"][0]:
            out = value["out"].contiguous()
            # a strided out holding data not merely rounded was not written through its elements
            given = args["out_by_rank"][rank]
            rule = out_rule(out, expected)
            if rule == "ST-GATHER-1" and isinstance(given, dict) and given.get("transposed"):
                rule = "ST-GATHER-8"
            judge.assert_tensor_exact(f"rank {rank}: out", out, expected, context, rule=rule)
