"""spec/st-lifecycle.md: construction from a spec, shard, accessors, copies and pickling."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge
from conformance import strategies as ss
from conformance.oracle.st_collectives import (
    create_verdict,
    local_shards,
    shard_tensor,
    shard_verdict,
)
from conformance.oracle.st_metadata import Properties, TensorMeta
from conformance.oracle.st_sharding_spec import ChunkSpec, EnumerableSpec, build_metadata
from conformance.oracle.st_validation import TensorInfo
from conformance.oracle.tensors import make_global, torch_dtype
from conformance.rank_devices import device, placement

TASKS = "conformance.tasks.sharded_tensor"


def oracle_spec(data):
    if isinstance(data, dict) and "boxes" in data:
        from conformance.oracle.st_metadata import ShardMeta

        return EnumerableSpec(tuple(ShardMeta(tuple(o), tuple(s), placement(r))
                                    for o, s, r in data["boxes"]))  # fmt: skip
    if isinstance(data, dict):
        return ChunkSpec(data["dim"], tuple(placement(r) for r in data["ranks"]))
    return data


CREATE_FAULTS = ["none", "none", "none", "float_size", "bool_size", "negative_size", "layout",
                 "memory_format", "not_spec", "size_differs", "dtype_differs"]  # fmt: skip


@st.composite
def create_cases(draw, world_sizes: list[int]):
    """``zeros/ones/full/empty`` of a chunk spec whose placements may name a rank twice or not
    at all; then at most one fault (ERR-11), on every rank, or on one rank for disagreement."""
    world_size = draw(st.sampled_from(world_sizes))
    shape = draw(ss.shapes(min_dims=1, max_dims=3, max_side=5))
    ranks = draw(st.lists(st.integers(0, world_size - 1), min_size=1, max_size=world_size + 1))
    spec = {"dim": draw(st.integers(-len(shape), len(shape) - 1)), "ranks": ranks}
    fill = draw(st.sampled_from(["zeros", "ones", "full", "empty"]))
    options = {"dtype": draw(st.sampled_from([None, *ss.DTYPES])),
               "requires_grad": False}  # fmt: skip
    if options["dtype"] in (None, "float32", "float64"):
        options["requires_grad"] = draw(st.booleans())
    if fill == "full":
        options["fill_value"] = draw(st.sampled_from([7, 1, 0]))
    specs, sizes = [spec] * world_size, [list(shape)] * world_size
    optionss = [options] * world_size
    fault = draw(st.sampled_from(CREATE_FAULTS))
    bad = draw(st.integers(0, world_size - 1))
    if fault in ("float_size", "bool_size", "negative_size"):
        i = draw(st.integers(0, len(shape) - 1))
        wrong = {"float_size": float(shape[i]), "bool_size": True, "negative_size": -1}[fault]
        sizes = [[*shape[:i], wrong, *shape[i + 1 :]]] * world_size
    elif fault in ("layout", "memory_format"):
        if fault == "memory_format" and len(shape) != 4:
            shape = [1, 1, 2, 2]
            sizes = [shape] * world_size
            spec = {**spec, "dim": 0}
            specs = [spec] * world_size
        value = {"layout": "sparse_coo", "memory_format": "channels_last"}[fault]
        optionss = [{**options, fault: value}] * world_size
    elif fault == "not_spec":
        specs = [draw(st.sampled_from(["x", 0]))] * world_size
    elif fault == "size_differs" and world_size > 1:
        sizes = [list(shape) for _ in range(world_size)]
        sizes[bad] = [*shape[:-1], shape[-1] + 1]
    elif fault == "dtype_differs" and world_size > 1:
        optionss = [options] * world_size
        optionss[bad] = {**options, "dtype": "int64" if options["dtype"] != "int64" else
                         "float64", "requires_grad": False}  # fmt: skip
    return world_size, {
        "fill": fill,
        "spec_by_rank": specs,
        "size_by_rank": sizes,
        "options_by_rank": optionss,
        "as_sequence": draw(st.booleans()),
    }


def _expected_fill(fill, options, dtype):
    if fill == "empty":
        return None
    return {"zeros": 0, "ones": 1, "full": options.get("fill_value")}[fill]


@pytest.mark.rules(
    "ST-LIFE-1", "ST-LIFE-2", "ST-LIFE-3", "ST-LIFE-4", "ST-LIFE-5", "ST-LIFE-6", "ST-LIFE-15",
    "ST-LIFE-16", "ST-SPEC-9", "ERR-1", "ERR-2", "ERR-3", "ERR-6", "ERR-11",
)  # fmt: skip
@given(data=st.data())
def test_construction_from_a_spec_follows_its_layout_and_fill(
    impl, available_world_sizes, run_case, data
):
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(create_cases(available_world_sizes))
    result = run_case("sharded_tensor:create_checked", world_size, **args)
    group = list(range(world_size))
    options = {r: {k: v for k, v in args["options_by_rank"][r].items() if k != "fill_value"}
               for r in group}  # fmt: skip
    verdict = create_verdict(
        {r: oracle_spec(args["spec_by_rank"][r]) for r in group},
        dict(enumerate(args["size_by_rank"])),
        options,
        group,
    )
    values = judge.assert_collective_verdict(result, verdict, rule="ST-LIFE-1")
    if values is None or not verdict.ok:
        return
    context = result.replay_command()
    opts = args["options_by_rank"][0]
    dtype = opts["dtype"] or "float32"
    size = args["size_by_rank"][0]
    meta = build_metadata(oracle_spec(args["spec_by_rank"][0]), size,
                          Properties(dtype=dtype, requires_grad=opts["requires_grad"]))  # fmt: skip
    value_of = _expected_fill(args["fill"], opts, dtype)
    for rank, value in enumerate(values):
        judge.assert_equal(f"rank {rank}: metadata", TensorMeta.from_json(value), meta, context,
                           rule="ST-LIFE-1")  # fmt: skip
        mine = local_shards(meta, rank)
        judge.assert_equal(f"rank {rank}: local shards", [m for _, m in value["local"]],
                           [s.to_json() for s in mine], context, rule="ST-LIFE-1")  # fmt: skip
        for (tensor, _), s in zip(value["local"], mine, strict=True):
            if value_of is not None:
                want = torch.full(s.sizes, value_of, dtype=torch_dtype(dtype))
                judge.assert_tensor_exact(f"rank {rank}: local values", tensor, want, context,
                                          rule="ST-LIFE-2")  # fmt: skip
        judge.assert_equal(f"rank {rank}: leaf requires_grad", value["leaf_requires_grad"],
                           [opts["requires_grad"]] * len(mine), context,
                           rule="ST-LIFE-2")  # fmt: skip
        judge.assert_equal(f"rank {rank}: size()", value["size()"], list(size), context,
                           rule="ST-LIFE-15")  # fmt: skip
        judge.assert_equal(f"rank {rank}: size(d)", value["size(d)"], list(size) * 2, context,
                           rule="ST-LIFE-15")  # fmt: skip
        judge.assert_equal(f"rank {rank}: dim()", value["dim()"], len(size), context,
                           rule="ST-LIFE-15")  # fmt: skip
        judge.assert_equal(f"rank {rank}: dtype", value["dtype"], dtype, context,
                           rule="ST-LIFE-15")  # fmt: skip
        if len(mine) == 1:
            judge.assert_equal(f"rank {rank}: local_tensor().shape",
                               list(value["local_tensor()"].shape), list(mine[0].sizes),
                               context, rule="ST-LIFE-16")  # fmt: skip
        else:
            judge.assert_equal(f"rank {rank}: local_tensor()", value["local_tensor()"],
                               "NotImplementedError", context, rule="ST-LIFE-16")  # fmt: skip


# "none" four times: a fault-free case draws a placement list of any class (ss.placement_lists)
SHARD_FAULTS = ["none", "none", "none", "none", "non_contiguous", "src_range", "src_type",
                "src_differs", "spec_differs", "shape_differs", "dtype_differs",
                "enumerable"]  # fmt: skip


@st.composite
def shard_cases(draw, world_sizes: list[int]):
    """``shard`` over the world from any source rank and a placement list of any class; or a
    permutation of the world and one fault (ERR-11)."""
    world_size = draw(st.sampled_from(world_sizes))
    shape = draw(ss.shapes(min_dims=2, max_dims=2, max_side=5))
    dtype = draw(st.sampled_from(ss.DTYPES))
    seed = draw(st.integers(0, 2**16))
    fault = draw(st.sampled_from(SHARD_FAULTS))
    # A fault comes with a permutation: its verdict must not hinge on how the list is formed. A
    # non-contiguous source is no fault (ST-LIFE-11): it comes with a list of any class.
    valid = fault in ("none", "non_contiguous")
    ranks = draw(ss.placement_lists(world_size) if valid else st.permutations(range(world_size)))
    spec = {"dim": draw(st.integers(-2, 1)), "ranks": list(ranks)}
    src = draw(st.integers(0, world_size - 1))
    specs, srcs = [spec] * world_size, [src] * world_size
    tensors = [{"shape": shape, "dtype": dtype, "seed": seed + r} for r in range(world_size)]
    bad = draw(st.sampled_from([r for r in range(world_size) if r != src] or [src]))
    if world_size == 1 and fault.endswith("differs"):
        fault = "none"
    if fault == "non_contiguous":
        tensors[src] = {**tensors[src], "transposed": True}
    elif fault == "src_range":
        srcs = [draw(st.sampled_from([world_size, -1]))] * world_size
    elif fault == "src_type":
        srcs = [float(src)] * world_size
    elif fault == "src_differs":
        srcs = [src] * world_size
        srcs[bad] = (src + 1) % world_size
    elif fault == "spec_differs":
        specs = [spec] * world_size
        specs[bad] = {**spec, "dim": (spec["dim"] + 1) % 2}
    elif fault == "shape_differs":
        tensors[bad] = {**tensors[bad], "shape": [shape[0] + 1, shape[1]]}
    elif fault == "dtype_differs":
        tensors[bad] = {**tensors[bad], "dtype": "int64" if dtype != "int64" else "float64"}
    elif fault == "enumerable":
        boxes = build_metadata(oracle_spec(spec), shape).shards
        specs = [{"boxes": [[list(b.offsets), list(b.sizes), b.rank] for b in boxes]}] * world_size
    return world_size, {
        "spec_by_rank": specs,
        "src_by_rank": srcs,
        "tensor_by_rank": tensors,
        "requires_grad": dtype in ("float32", "float64") and draw(st.booleans()),
    }


@pytest.mark.rules(
    "ST-LIFE-7", "ST-LIFE-8", "ST-LIFE-9", "ST-LIFE-10", "ST-LIFE-11", "ST-SPEC-9", "ST-SPEC-13",
    "ERR-1", "ERR-6", "ERR-8", "ERR-9", "ERR-10", "ERR-11",
)  # fmt: skip
@pytest.mark.edges("transposed", "placement list")
@pytest.mark.volume(2)  # cases cost milliseconds; ten faults and four kinds of list to meet
@given(data=st.data())
def test_shard_scatters_the_source_ranks_tensor_or_every_rank_raises(
    impl, available_world_sizes, run_case, data
):
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(shard_cases(available_world_sizes))
    edges.transposed([t["shape"] for t in args["tensor_by_rank"] if t.get("transposed")])
    ranks = args["spec_by_rank"][0].get("ranks")  # None for an enumerable spec
    if ranks is not None:
        edges.placement_list(ranks, world_size)
    result = run_case("sharded_tensor:shard_checked", world_size, **args)
    group = list(range(world_size))
    tensors = args["tensor_by_rank"]
    verdict = shard_verdict(
        {r: oracle_spec(args["spec_by_rank"][r]) for r in group},
        dict(enumerate(args["src_by_rank"])),
        {r: TensorInfo(tuple(tensors[r]["shape"]), tensors[r]["dtype"], device(r)) for r in group},
        group,
    )
    # shard gives the source's boxes (ST-LIFE-7), also from a non-contiguous source (ST-LIFE-11)
    # and to a rank that the placements name twice (ST-SPEC-9)
    scattered = "ST-LIFE-7"
    if any(d.get("transposed") for d in tensors):
        scattered = "ST-LIFE-11"
    elif ranks is not None and len(set(ranks)) < len(ranks):
        scattered = "ST-SPEC-9"
    values = judge.assert_collective_verdict(result, verdict, rule=scattered)
    if values is None or not result.ok:
        return
    context = result.replay_command()
    src = args["src_by_rank"][0]
    t = tensors[src]
    if t.get("transposed"):
        source = make_global(t["shape"][::-1], t["dtype"], t["seed"]).t()
    else:
        source = make_global(t["shape"], t["dtype"], t["seed"])
    props = Properties(dtype=t["dtype"], requires_grad=args["requires_grad"])
    meta = build_metadata(oracle_spec(args["spec_by_rank"][0]), t["shape"], props)
    expected = shard_tensor(source, meta, group)
    for rank, value in enumerate(values):
        judge.assert_equal(f"rank {rank}: metadata", TensorMeta.from_json(value), meta, context,
                           rule="ST-LIFE-7")  # fmt: skip
        for (tensor, _), want in zip(value["local"], expected[rank], strict=True):
            judge.assert_tensor_exact(f"rank {rank}: local shard", tensor, want, context,
                                      rule=scattered)  # fmt: skip
        judge.assert_equal(f"rank {rank}: leaf requires_grad", value["leaf_requires_grad"],
                           [args["requires_grad"]] * len(expected[rank]), context,
                           rule="ST-LIFE-7")  # fmt: skip
        judge.assert_equal(f"rank {rank}: local shard aliases the source", value["aliases"],
                           False, context, rule="ST-LIFE-7")  # fmt: skip
        judge.assert_equal(f"rank {rank}: source unchanged", value["source_unchanged"], True,
                           context, rule="ERR-9")  # fmt: skip


def _on_cpu(meta: TensorMeta) -> TensorMeta:
    """``meta`` as ``cpu()`` leaves it: every placement's device ``cpu`` (ST-LIFE-17)."""
    shards = [dataclasses.replace(s, placement=f"rank:{s.rank}/cpu") for s in meta.shards]
    return dataclasses.replace(meta, shards=tuple(shards))


@pytest.mark.rules("ST-LIFE-17", "ST-LIFE-18", "ST-LIFE-1", "ERR-9", "ERR-10")
@pytest.mark.edges("tensor properties", "placement list")
@given(data=st.data())
def test_to_cpu_clone_and_pickling_keep_layout_and_values(
    impl, available_world_sizes, run_case, data
):
    judge.requires(impl, "sharded_tensor")
    world_size = data.draw(st.sampled_from(available_world_sizes))
    shape = data.draw(ss.shapes(min_dims=1, max_dims=2, max_side=5))
    dtype = data.draw(st.sampled_from(ss.DTYPES[:3]))
    args = {
        "shape": shape,
        "dtype": dtype,
        # properties other than the defaults, which every copy and a save/load keep
        "requires_grad": dtype != "int64" and data.draw(st.booleans()),
        "seed": data.draw(st.integers(0, 2**16)),
        # one chunk per rank in any order, or any ranks with repeats: a rank with several
        # shards, or with none, whose copies must keep every one of them apart
        "ranks": data.draw(st.one_of(
            st.permutations(range(world_size)),
            st.lists(st.integers(0, world_size - 1), min_size=1, max_size=2 * world_size),
        )),
    }  # fmt: skip
    edges.note(f"tensor properties: {'requires_grad' if args['requires_grad'] else 'the defaults'}")
    edges.placement_list(args["ranks"], world_size)
    result = run_case("sharded_tensor:copies", world_size, **args)
    judge.assert_built(result, rule="ST-LIFE-1")
    values = judge.all_returned(result, rule="ST-LIFE-17")
    context = result.replay_command()
    for rank, value in enumerate(values):
        original = value["original"]
        for key in ("to_same", "cpu", "clone", "loaded"):
            rule = "ST-LIFE-18" if key == "loaded" else "ST-LIFE-17"
            expected = TensorMeta.from_json(original)
            if key == "cpu":
                expected = _on_cpu(expected)
            judge.assert_equal(f"rank {rank}: {key} metadata", TensorMeta.from_json(value[key]),
                               expected, context, rule=rule)  # fmt: skip
            for (a, _), (b, _) in zip(value[key]["local"], original["local"], strict=True):
                judge.assert_tensor_exact(f"rank {rank}: {key} local", a, b, context, rule=rule)
        on_cpu = ["cpu"] * len(original["local"])
        judge.assert_equal(f"rank {rank}: cpu() local devices", value["cpu"]["local_devices"],
                           on_cpu, context, rule="ST-LIFE-17")  # fmt: skip
        converted = value["to_float64"]
        judge.assert_equal(f"rank {rank}: to(float64) dtype", converted["properties"]["dtype"],
                           "float64", context, rule="ST-LIFE-17")  # fmt: skip
        judge.assert_equal(f"rank {rank}: to(float64) shards", converted["shards"],
                           original["shards"], context, rule="ST-LIFE-17")  # fmt: skip
        for (a, _), (b, _) in zip(converted["local"], original["local"], strict=True):
            judge.assert_tensor_exact(f"rank {rank}: to(float64) local", a,
                                      b.to(torch.float64), context, rule="ST-LIFE-17")  # fmt: skip
        judge.assert_equal(f"rank {rank}: t unchanged by to", value["unchanged_by_to"], True,
                           context, rule="ST-LIFE-17")  # fmt: skip
        judge.assert_equal(f"rank {rank}: clone shares storage", value["clone_shares_storage"],
                           False, context, rule="ST-LIFE-17")  # fmt: skip
