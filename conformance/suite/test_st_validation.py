"""spec/st-validation.md: which shard layouts describe a tensor (pure checks)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge
from conformance import strategies as ss
from conformance.oracle.st_metadata import ShardMeta, TensorMeta
from conformance.oracle.st_sharding_spec import ChunkSpec, chunk_shards
from conformance.oracle.st_validation import (
    LocalShard,
    TensorInfo,
    init_from_local_shards_metadata,
    init_from_local_shards_verdict,
    init_with_global_metadata_verdict,
    layout_verdict,
)
from conformance.oracle.vocabulary import VALID


def _local_inputs(args: dict, group: list[int]) -> dict[int, list[LocalShard]]:
    """What each rank of a from_local case passes, as the oracle reads it."""
    return {
        r: [LocalShard(ShardMeta.from_json(s["metadata"]), _tensor_info(s["tensor"]))
            for s in args["shards_by_rank"][r]]
        for r in group
    }  # fmt: skip


@st.composite
def grid_layouts(draw):
    """A valid grid of boxes over a 1-d to 3-d shape, then at most one violation (ERR-11):
    an overlap, a gap, a box out of bounds, a box of the wrong ndim, or no box at all."""
    shape = draw(ss.shapes(min_dims=1, max_dims=3, max_side=6))
    boxes = draw(ss.grid_boxes(shape, max_cuts=3))
    shards = [{"offsets": list(o), "sizes": list(s), "placement": f"rank:{i % 4}/cpu"}
              for i, (o, s) in enumerate(boxes)]  # fmt: skip
    fault = draw(st.sampled_from(["none", "overlap", "gap", "out", "ndim", "empty"]))
    i = draw(st.integers(0, len(shards) - 1))
    d = draw(st.integers(0, len(shape) - 1))
    if fault == "overlap":
        shards.append(dict(shards[i]))
    elif fault == "gap":
        shards = _with_a_gap(shards, draw)
    elif fault == "out":
        shards[i] = {**shards[i], "offsets": [*shards[i]["offsets"]]}
        shards[i]["offsets"][d] += 1
    elif fault == "ndim":
        shards[i] = {**shards[i], "offsets": [*shards[i]["offsets"], 0],
                     "sizes": [*shards[i]["sizes"], 1]}  # fmt: skip
    elif fault == "empty":
        shards = []
    return shape, shards


# What a layout the oracle judges breaks, by the rule it breaks first.
FAULT_OF_RULE = {
    None: "none",
    "ST-VALID-2": "overlap",
    "ST-VALID-3": "out of bounds",
    "ST-VALID-4": "gap",
    "ST-VALID-5": "wrong ndim",
    "ST-VALID-14": "no shards",
}


def _with_a_gap(shards: list[dict], draw) -> list[dict]:
    """The layout with a hole (ST-VALID-4): a box that holds elements removed, or where it is
    the only one, cut short by one along a dim. A layout of empty boxes has no hole to make."""
    full = [i for i, s in enumerate(shards) if all(s["sizes"])]
    if not full:
        return shards
    i = draw(st.sampled_from(full))
    if len(shards) > 1:
        return shards[:i] + shards[i + 1 :]
    d = draw(st.integers(0, len(shards[i]["sizes"]) - 1))
    sizes = [n - 1 if k == d else n for k, n in enumerate(shards[i]["sizes"])]
    return [{**shards[i], "sizes": sizes}]


@pytest.mark.rules(
    "ST-VALID-1", "ST-VALID-2", "ST-VALID-3", "ST-VALID-4", "ST-VALID-5", "ST-VALID-14",
    "ERR-1", "ERR-4",
)  # fmt: skip
@pytest.mark.edges("layout fault")
@given(layout=grid_layouts())
def test_a_layout_is_accepted_exactly_when_it_tiles_the_tensor(impl, pure, layout):
    judge.requires(impl, "sharded_tensor")
    shape, shards = layout
    verdict = layout_verdict(
        TensorMeta(tuple(ShardMeta.from_json(s) for s in shards), tuple(shape))
    )
    edges.note(f"layout fault: {FAULT_OF_RULE[verdict.rule]}")
    # A valid layout refused is most likely an overlap seen where ST-VALID-1 sees none.
    judge.assert_pure_verdict(pure("validate", shards=shards, shape=shape), verdict,
                              f"validate({shards}, size={shape})", rule="ST-VALID-1")  # fmt: skip


@pytest.mark.rules("ST-VALID-1")
@pytest.mark.parametrize(
    ("size", "empty_boxes"),
    [([4], [([1], [0])]), ([4], [([1], [0]), ([1], [0])]), ([4, 4], [([1, 1], [2, 0])])],
    ids=["empty-inside", "two-identical-empty", "empty-2d"],
)
def test_an_empty_box_overlaps_nothing(impl, pure, size, empty_boxes):
    judge.requires(impl, "sharded_tensor")
    full = {"offsets": [0] * len(size), "sizes": size, "placement": "rank:0/cpu"}
    empties = [{"offsets": o, "sizes": s, "placement": "rank:1/cpu"} for o, s in empty_boxes]
    shards = [full, *empties]
    judge.assert_pure_verdict(pure("validate", shards=shards, shape=size), VALID,
                              f"validate({shards}, size={size})", rule="ST-VALID-1")  # fmt: skip


LOCAL_FAULTS = ["none", "dtype", "requires_grad", "size", "shape", "non_contiguous",
                "placement_rank", "no_shards"]  # fmt: skip
GLOBAL_FAULTS = ["none", "metadata", "dtype", "requires_grad", "shape", "non_contiguous",
                 "missing", "extra", "rankless", "worker", "non_member"]  # fmt: skip


@st.composite
def from_local_cases(draw, world_sizes: list[int], faults: list[str] | None = None):
    """Row chunks of a 2-d tensor, one per rank, passed to ``init_from_local_shards`` (``local``)
    or with the global metadata (``global``); then at most one fault (ERR-11), on one rank
    ``bad`` where it is per rank (ERR-6). ``faults`` draws only those (local ones only)."""
    world_size = draw(st.sampled_from(world_sizes))
    kind = draw(st.sampled_from(["local", "global"] if faults is None else ["local"]))
    # Two non-empty halves of a box need a row and two columns.
    split = faults is not None and "two_properties" in faults
    size = [draw(st.integers(int(split), 6)), draw(st.integers(1 + split, 4))]
    dtype = draw(st.sampled_from(ss.DTYPES[:3]))
    ranks = list(range(world_size))
    layout = [s.to_json() for s in chunk_shards(size, ChunkSpec(0, tuple(
        f"rank:{r}/cpu" for r in ranks)))]  # fmt: skip
    props = {"dtype": dtype, "requires_grad": False}
    shards = [[{"metadata": dict(m), "tensor": {"shape": m["sizes"], "dtype": dtype}}]
              for m in layout]  # fmt: skip
    sizes = [list(size) for _ in ranks]
    metadata = [{"shards": layout, "size": size, "properties": props} for _ in ranks]
    fault = draw(st.sampled_from(faults or (LOCAL_FAULTS if kind == "local" else GLOBAL_FAULTS)))
    bad = draw(st.sampled_from(ranks))
    mine = shards[bad][0]
    if fault == "two_properties":
        # ``bad``'s box (rank 0's if empty) in two column halves, one of another dtype or
        # requiring grad: two local tensors of one rank disagree (ST-VALID-6).
        bad = bad if mine["metadata"]["sizes"][0] else 0
        box = shards[bad][0]["metadata"]
        row, (h, w) = box["offsets"][0], box["sizes"]
        c = draw(st.integers(1, w - 1))
        placement = f"rank:{bad}/cpu"
        halves = [
            {"metadata": {"offsets": [row, o], "sizes": [h, n], "placement": placement},
             "tensor": {"shape": [h, n], "dtype": dtype}}
            for o, n in ((0, c), (c, w - c))
        ]  # fmt: skip
        odd = halves[draw(st.integers(0, 1))]
        if dtype == "int64" or draw(st.booleans()):
            odd["tensor"]["dtype"] = "float64" if dtype != "float64" else "int64"
        else:
            odd["tensor"]["requires_grad"] = True
        shards[bad] = halves
    elif fault == "dtype":
        mine["tensor"] = {**mine["tensor"], "dtype": "float64" if dtype != "float64" else "int64"}
    elif fault == "requires_grad":
        if dtype == "int64":
            fault = "none"
        else:
            mine["tensor"] = {**mine["tensor"], "requires_grad": True}
    elif fault == "size":
        sizes[bad] = [size[0] + 1, size[1]]
    elif fault == "shape":
        mine["tensor"] = {**mine["tensor"], "shape": [mine["tensor"]["shape"][0], size[1] + 1]}
    elif fault == "non_contiguous":
        if min(mine["tensor"]["shape"]) > 1:
            mine["tensor"] = {**mine["tensor"], "transposed": True}
        else:
            fault = "none"
    elif fault == "placement_rank":
        other = (bad + 1) % (world_size + 1)
        mine["metadata"] = {**mine["metadata"], "placement": f"rank:{other}/cpu"}
    elif fault == "no_shards":
        shards = [[] for _ in ranks]
    elif fault == "metadata":
        other = "float64" if dtype != "float64" else "int64"
        metadata[bad] = {**metadata[bad], "properties": {**props, "dtype": other}}
        mine["tensor"] = {**mine["tensor"], "dtype": other}
    elif fault == "missing":
        shards[bad] = []
    elif fault == "extra":
        shards[bad] = [mine, mine]
    elif fault in ("rankless", "worker", "non_member"):
        placement = {"rankless": "cpu", "worker": "worker0/cpu",
                     "non_member": f"rank:{world_size}/cpu"}[fault]  # fmt: skip
        changed = [dict(m) for m in layout]
        changed[bad]["placement"] = placement
        metadata = [{**m, "shards": changed} for m in metadata]
        shards[bad] = []
    return world_size, {
        "kind": kind,
        "shards_by_rank": shards,
        "size_by_rank": sizes,
        "metadata_by_rank": metadata,
    }


def _tensor_info(desc):
    shape = list(desc["shape"])
    return TensorInfo(
        tuple(shape),
        desc["dtype"],
        requires_grad=bool(desc.get("requires_grad")),
        contiguous=not desc.get("transposed") or min(shape) <= 1,
    )


@pytest.mark.rules(
    "ST-VALID-6", "ST-VALID-7", "ST-VALID-8", "ST-VALID-9", "ST-VALID-10", "ST-VALID-11",
    "ST-VALID-12", "ST-VALID-13", "ST-VALID-14", "ST-LIFE-12", "ST-LIFE-13", "ST-LIFE-14",
    "ERR-1", "ERR-3", "ERR-6", "ERR-11",
)  # fmt: skip
@given(data=st.data())
def test_construction_from_local_shards_checks_every_rank_and_keeps_the_data(
    impl, available_world_sizes, run_case, data
):
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(from_local_cases(available_world_sizes))
    result = run_case("sharded_tensor:from_local_checked", world_size, **args)
    group = list(range(world_size))
    inputs = _local_inputs(args, group)
    if args["kind"] == "local":
        verdict = init_from_local_shards_verdict(inputs, dict(enumerate(args["size_by_rank"])),
                                                 group)  # fmt: skip
        expected = init_from_local_shards_metadata(inputs, args["size_by_rank"][0], group)
        built, kept = "ST-LIFE-12", "ST-LIFE-13"  # the rules of the layout, of the local shards
    else:
        metas = {r: TensorMeta.from_json(args["metadata_by_rank"][r]) for r in group}
        verdict = init_with_global_metadata_verdict(inputs, metas, group)
        expected = metas[0]
        built = kept = "ST-LIFE-14"
    values = judge.assert_collective_verdict(result, verdict, rule=built)
    if values is None or not verdict.ok:
        return
    context = result.replay_command()
    for rank, value in enumerate(values):
        judge.assert_equal(f"rank {rank}: metadata", TensorMeta.from_json(value), expected,
                           context, rule=built)  # fmt: skip
        judge.assert_equal(f"rank {rank}: local shards", [m for _, m in value["local"]],
                           [s["metadata"] for s in args["shards_by_rank"][rank]],
                           context, rule=kept)  # fmt: skip
        judge.assert_equal(f"rank {rank}: given values kept", value["given_values_kept"],
                           [True] * len(value["local"]), context, rule=kept)  # fmt: skip


@pytest.mark.rules("ST-VALID-6", "ERR-6")
@given(data=st.data())
def test_two_local_tensors_of_one_rank_that_differ_in_properties_fail_on_every_rank(
    impl, available_world_sizes, run_case, data
):
    """``init_from_local_shards`` where one rank passes two local tensors, one of another dtype
    or requiring grad: every rank raises ValueError (ST-VALID-6), not only the rank that sees
    the difference."""
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(from_local_cases(available_world_sizes, ["two_properties"]))
    result = run_case("sharded_tensor:from_local_checked", world_size, **args)
    group = list(range(world_size))
    inputs = _local_inputs(args, group)
    verdict = init_from_local_shards_verdict(inputs, dict(enumerate(args["size_by_rank"])), group)
    judge.assert_collective_verdict(result, verdict)
