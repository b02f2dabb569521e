"""spec/st-validation.md: which shard layouts describe a tensor (pure checks)."""

from __future__ import annotations

import math

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
from conformance.rank_devices import device, placement


def _local_inputs(args: dict, group: list[int]) -> dict[int, list[LocalShard]]:
    """What each rank of a from_local case passes, as the oracle reads it."""
    return {
        r: [LocalShard(ShardMeta.from_json(s["metadata"]), _tensor_info(s["tensor"], r))
            for s in args["shards_by_rank"][r]]
        for r in group
    }  # fmt: skip


@st.composite
def layouts(draw):
    """A tiling of a 0-d to 3-d shape (``ss.tilings``: grids and layouts off a grid; a 0-d
    tensor's one box of no dims), its boxes in any order on any ranks, then at most one way to
    be wrong (ERR-11; see ``_FAULTS``), and maybe an empty box, which changes no verdict."""
    shape = draw(ss.shapes(min_dims=0, max_dims=3, max_side=6))
    boxes = draw(ss.tilings(shape))
    if draw(st.booleans()):
        boxes = draw(st.permutations(boxes))
    shards = [{"offsets": list(o), "sizes": list(s), "placement": f"rank:{r}/cpu"}
              for (o, s), r in zip(boxes, draw(_ranks(len(boxes))), strict=True)]  # fmt: skip
    fault = draw(st.sampled_from(list(_FAULTS)))
    shards = _FAULTS[fault](draw, shape, shards)
    if shards and shape and draw(st.booleans()):  # an empty box too: it overlaps nothing
        shards = _an_empty_box(draw, shape, shards)
    return shape, shards


def _ranks(n: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, 7), min_size=n, max_size=n)


def _box(shards: list[dict], i: int, offsets: list[int], sizes: list[int]) -> list[dict]:
    """``shards`` with box ``i`` moved to ``offsets`` and resized to ``sizes``."""
    return [*shards[:i], {**shards[i], "offsets": offsets, "sizes": sizes}, *shards[i + 1 :]]


def _an_empty_box(draw, shape, shards):
    """A box of no elements anywhere in bounds, its offset up to the end of each dim: valid
    (ST-VALID-1, an empty box overlaps nothing). A 0-d tensor has no dim to be empty along."""
    if not shape:
        return shards
    offsets = [draw(st.integers(0, n)) for n in shape]
    sizes = [draw(st.integers(0, n - o)) for o, n in zip(offsets, shape, strict=True)]
    sizes[draw(st.integers(0, len(shape) - 1))] = 0
    at = draw(st.integers(0, len(shards)))
    box = {"offsets": offsets, "sizes": sizes, "placement": "rank:0/cpu"}
    return [*shards[:at], box, *shards[at:]]


def _a_copy(draw, shape, shards):
    """A box that holds elements, twice: an overlap in every dim (ST-VALID-2)."""
    full = [s for s in shards if all(s["sizes"])]
    if not full:
        return shards
    at = draw(st.integers(0, len(shards)))
    return [*shards[:at], dict(draw(st.sampled_from(full))), *shards[at:]]


def _moves(shape, shards):
    """``(box, dim, room before, room after)`` for each box that holds elements and is not as
    long as the tensor along ``dim``: how far it can grow or move without leaving the tensor."""
    return [
        (i, d, s["offsets"][d], n - s["offsets"][d] - s["sizes"][d])
        for i, s in enumerate(shards)
        if all(s["sizes"])
        for d, n in enumerate(shape)
        if s["sizes"][d] < n
    ]


def _step(draw, before: int, after: int) -> int:
    """A step of at least one back (up to ``before``) or forward (up to ``after``)."""
    forward = draw(st.booleans()) if before and after else bool(after)
    return draw(st.integers(1, after)) if forward else -draw(st.integers(1, before))


def _grown(draw, shape, shards):
    """A box grown along one dim into its neighbours, in bounds: a partial overlap along that
    dim only (ST-VALID-2), and more volume than the tensor."""
    moves = _moves(shape, shards)
    if not moves:
        return shards
    i, d, before, after = draw(st.sampled_from(moves))
    offsets, sizes = list(shards[i]["offsets"]), list(shards[i]["sizes"])
    k = _step(draw, before, after)
    offsets[d] += min(k, 0)
    sizes[d] += abs(k)
    return _box(shards, i, offsets, sizes)


def _shifted(draw, shape, shards):
    """A box moved along one dim, in bounds: it overlaps a neighbour and leaves a hole of the
    same volume, so only a check of overlaps sees it (ST-VALID-2), not a count of elements."""
    moves = _moves(shape, shards)
    if not moves:
        return shards
    i, d, before, after = draw(st.sampled_from(moves))
    offsets = list(shards[i]["offsets"])
    offsets[d] += _step(draw, before, after)
    return _box(shards, i, offsets, list(shards[i]["sizes"]))


def _with_a_gap(draw, shape, shards):
    """The layout with a hole (ST-VALID-4): a box that holds elements removed, or where it is
    the only one, cut short by one along a dim. A layout of empty boxes, or the one box of a
    0-d tensor, has no hole to make."""
    full = [i for i, s in enumerate(shards) if all(s["sizes"])]
    if not full or not shape:
        return shards
    i = draw(st.sampled_from(full))
    if len(shards) > 1:
        return shards[:i] + shards[i + 1 :]
    d = draw(st.integers(0, len(shards[i]["sizes"]) - 1))
    sizes = [n - 1 if k == d else n for k, n in enumerate(shards[i]["sizes"])]
    return _box(shards, i, list(shards[i]["offsets"]), sizes)


def _out_of_bounds(draw, shape, shards):
    """A box, empty or not, that ends past the end of one dim (ST-VALID-3); a 0-d tensor has
    no end to pass."""
    if not shape:
        return shards
    i = draw(st.integers(0, len(shards) - 1))
    d = draw(st.integers(0, len(shape) - 1))
    offsets = list(shards[i]["offsets"])
    offsets[d] = shape[d] - shards[i]["sizes"][d] + draw(st.integers(1, 3))
    return _box(shards, i, offsets, list(shards[i]["sizes"]))


def _wrong_ndim(draw, shape, shards):
    """A box with a dim more or a dim less than the tensor (ST-VALID-5)."""
    i = draw(st.integers(0, len(shards) - 1))
    offsets, sizes = list(shards[i]["offsets"]), list(shards[i]["sizes"])
    if not sizes or draw(st.booleans()):
        return _box(shards, i, [*offsets, 0], [*sizes, 1])
    return _box(shards, i, offsets[:-1], sizes[:-1])


_FAULTS = {
    "none": lambda draw, shape, shards: shards,
    "an empty box": _an_empty_box,
    "a copy": _a_copy,
    "grown": _grown,
    "shifted": _shifted,
    "gap": _with_a_gap,
    "out of bounds": _out_of_bounds,
    "wrong ndim": _wrong_ndim,
    "no shards": lambda draw, shape, shards: [],
}


def _layout_classes(shape: list[int], shards: list[dict], verdict) -> None:
    """Note the edge classes of a drawn layout: what the oracle finds wrong with it (the rule it
    breaks first; an overlap whose hole makes the element count right is a class of its own)
    and the shape of its boxes."""
    fault = FAULT_OF_RULE[verdict.rule]
    volume = sum(math.prod(s["sizes"]) for s in shards)
    if fault == "overlap" and volume == math.prod(shape):
        fault = "an overlap a gap hides"
    edges.note(f"layout fault: {fault}")
    edges.layout_ndim(shape)
    edges.layout(shape, [(s["offsets"], s["sizes"]) for s in shards], valid=verdict.ok)


# What a layout the oracle judges breaks, by the rule it breaks first.
FAULT_OF_RULE = {
    None: "none",
    "ST-VALID-2": "overlap",
    "ST-VALID-3": "out of bounds",
    "ST-VALID-4": "gap",
    "ST-VALID-5": "wrong ndim",
    "ST-VALID-14": "no shards",
}


@pytest.mark.rules(
    "ST-VALID-1", "ST-VALID-2", "ST-VALID-3", "ST-VALID-4", "ST-VALID-5", "ST-VALID-14",
    "ERR-1", "ERR-4",
)  # fmt: skip
@pytest.mark.edges("layout fault", "layout", "layout ndim")
@pytest.mark.volume(50)
@given(layout=layouts())
def test_a_layout_is_accepted_exactly_when_it_tiles_the_tensor(impl, pure, layout):
    judge.requires(impl, "sharded_tensor")
    shape, shards = layout
    verdict = layout_verdict(
        TensorMeta(tuple(ShardMeta.from_json(s) for s in shards), tuple(shape))
    )
    _layout_classes(shape, shards, verdict)
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
    """A 2-d tensor's boxes held by the ranks, passed to ``init_from_local_shards`` (``local``)
    or with the global metadata (``global``): row chunks, one per rank, or any tiling whose boxes
    any ranks hold (some none, some several). Then at most one fault (ERR-11), on one rank, on
    every rank that holds a box, or on two ranks in two different ways (ERR-6: a rank's own
    input decides nothing alone). ``faults`` draws only those (local ones only)."""
    world_size = draw(st.sampled_from(world_sizes))
    kind = draw(st.sampled_from(["local", "global"] if faults is None else ["local"]))
    # Two non-empty halves of a box need a row and two columns.
    split = faults is not None and "two_properties" in faults
    size = [draw(st.integers(int(split), 6)), draw(st.integers(1 + split, 4))]
    dtype = draw(st.sampled_from(ss.DTYPES[:3]))
    ranks = list(range(world_size))
    if split or draw(st.booleans()):
        layout = [m.to_json() for m in chunk_shards(size, ChunkSpec(0, tuple(
            placement(r) for r in ranks)))]  # fmt: skip
    else:
        boxes = draw(ss.tilings(size))
        owners = draw(st.lists(st.sampled_from(ranks), min_size=len(boxes), max_size=len(boxes)))
        layout = [{"offsets": list(o), "sizes": list(n), "placement": placement(r)}
                  for (o, n), r in zip(boxes, owners, strict=True)]  # fmt: skip
    props = {"dtype": dtype, "requires_grad": False}
    shards = [[{"metadata": dict(m), "tensor": {"shape": m["sizes"], "dtype": dtype}}
               for m in layout if m["placement"] == placement(r)] for r in ranks]  # fmt: skip
    case = {
        "kind": kind,
        "shards_by_rank": shards,
        "size_by_rank": [list(size) for _ in ranks],
        "metadata_by_rank": [{"shards": layout, "size": size, "properties": props} for _ in ranks],
    }
    fault = draw(st.sampled_from(faults or (LOCAL_FAULTS if kind == "local" else GLOBAL_FAULTS)))
    if fault == "two_properties":
        _two_properties(draw, case, dtype)
    elif fault in _GLOBAL_LAYOUT_FAULTS:
        _GLOBAL_LAYOUT_FAULTS[fault](draw, case, world_size)
    elif fault != "none":
        # A fault of an argument every rank passes (the size, the global metadata) may hit a
        # rank that holds no shard; a fault of a shard hits a rank that holds one.
        holders = [r for r in ranks if shards[r]] or ranks
        hit = ranks if fault in ("size", "metadata") else holders
        spread = draw(st.sampled_from(["one rank", "every rank", "two ranks, differently"]))
        if spread == "two ranks, differently" and len(hit) < 2:
            spread = "one rank"
        targets = {
            "one rank": [draw(st.sampled_from(hit))],
            "every rank": hit,
            "two ranks, differently": draw(st.permutations(hit))[:2],
        }[spread]
        if spread == "one rank" and not shards[targets[0]]:
            edges.note("fault: on one rank, holding no shard")
        for way, rank in enumerate(targets):
            _RANK_FAULTS[fault](case, rank, way if spread.startswith("two") else 0, world_size)
        edges.note(f"fault: on {spread}")
    return world_size, case


def _other_dtype(dtype: str, way: int) -> str:
    """A dtype other than ``dtype``; ``way`` 0 and 1 give two different ones."""
    return [d for d in ss.DTYPES[:3] if d != dtype][way]


def _first(case: dict, rank: int) -> dict | None:
    held = case["shards_by_rank"][rank]
    return held[0] if held else None


def _set_tensor(shard: dict, **changes) -> None:
    shard["tensor"] = {**shard["tensor"], **changes}


def _dtype(case, rank, way, world_size):
    if (mine := _first(case, rank)) is not None:
        _set_tensor(mine, dtype=_other_dtype(mine["tensor"]["dtype"], way))


def _requires_grad(case, rank, way, world_size):
    if (mine := _first(case, rank)) is not None and mine["tensor"]["dtype"] != "int64":
        _set_tensor(mine, requires_grad=True)


def _size(case, rank, way, world_size):
    rows, cols = case["size_by_rank"][rank]
    case["size_by_rank"][rank] = [rows + 1 + way, cols]


def _shape(case, rank, way, world_size):
    if (mine := _first(case, rank)) is not None:
        rows, cols = mine["tensor"]["shape"]
        _set_tensor(mine, shape=[rows, cols + 1 + way])


def _non_contiguous(case, rank, way, world_size):
    if (mine := _first(case, rank)) is not None and min(mine["tensor"]["shape"]) > 1:
        _set_tensor(mine, transposed=True)


def _placement_rank(case, rank, way, world_size):
    if (mine := _first(case, rank)) is not None:
        other = (rank + 1 + way) % (world_size + 1)
        mine["metadata"] = {**mine["metadata"], "placement": placement(other)}


def _no_shards(case, rank, way, world_size):
    case["shards_by_rank"][rank] = []


def _metadata(case, rank, way, world_size):
    """This rank's global metadata, and its tensors, of another dtype."""
    meta = case["metadata_by_rank"][rank]
    other = _other_dtype(meta["properties"]["dtype"], way)
    case["metadata_by_rank"][rank] = {**meta, "properties": {**meta["properties"], "dtype": other}}
    for shard in case["shards_by_rank"][rank]:
        shard["tensor"] = {**shard["tensor"], "dtype": other}


def _extra(case, rank, way, world_size):
    if (mine := _first(case, rank)) is not None:
        case["shards_by_rank"][rank] = [*case["shards_by_rank"][rank], *[mine] * (1 + way)]


_RANK_FAULTS = {
    "dtype": _dtype,
    "requires_grad": _requires_grad,
    "size": _size,
    "shape": _shape,
    "non_contiguous": _non_contiguous,
    "placement_rank": _placement_rank,
    "no_shards": _no_shards,
    "missing": _no_shards,
    "metadata": _metadata,
    "extra": _extra,
}


def _placed_elsewhere(placement: str):
    """A global layout fault: one box of the metadata every rank passes is placed on
    ``placement`` (no rank, a worker name, a rank outside the world), and no rank holds it."""

    def fault(draw, case, world_size):
        layout = case["metadata_by_rank"][0]["shards"]
        i = draw(st.integers(0, len(layout) - 1))
        held = layout[i]["placement"]
        changed = [dict(m) for m in layout]
        changed[i]["placement"] = placement.format(world_size=world_size)
        case["metadata_by_rank"] = [{**m, "shards": changed} for m in case["metadata_by_rank"]]
        owner = int(held.removeprefix("rank:").split("/")[0])
        case["shards_by_rank"][owner] = [
            s for s in case["shards_by_rank"][owner] if s["metadata"] != layout[i]
        ]

    return fault


_GLOBAL_LAYOUT_FAULTS = {
    "rankless": _placed_elsewhere("cpu"),
    "worker": _placed_elsewhere("worker0/cpu"),
    "non_member": _placed_elsewhere("rank:{world_size}/cpu"),
}


def _two_properties(draw, case, dtype):
    """A rank's box (rank 0's if empty) in two column halves, one of another dtype or requiring
    grad: two local tensors of one rank disagree (ST-VALID-6)."""
    shards = case["shards_by_rank"]
    bad = draw(st.sampled_from(range(len(shards))))
    bad = bad if shards[bad] and shards[bad][0]["metadata"]["sizes"][0] else 0
    box = shards[bad][0]["metadata"]
    row, (h, w) = box["offsets"][0], box["sizes"]
    c = draw(st.integers(1, w - 1))
    halves = [
        {"metadata": {"offsets": [row, o], "sizes": [h, n], "placement": placement(bad)},
         "tensor": {"shape": [h, n], "dtype": dtype}}
        for o, n in ((0, c), (c, w - c))
    ]  # fmt: skip
    odd = halves[draw(st.integers(0, 1))]
    if dtype == "int64" or draw(st.booleans()):
        odd["tensor"]["dtype"] = "float64" if dtype != "float64" else "int64"
    else:
        odd["tensor"]["requires_grad"] = True
    shards[bad] = halves


def _tensor_info(desc, rank):
    shape = list(desc["shape"])
    return TensorInfo(
        tuple(shape),
        desc["dtype"],
        device(rank),
        requires_grad=bool(desc.get("requires_grad")),
        contiguous=not desc.get("transposed") or min(shape) <= 1,
    )


@pytest.mark.rules(
    "ST-VALID-6", "ST-VALID-7", "ST-VALID-8", "ST-VALID-9", "ST-VALID-10", "ST-VALID-11",
    "ST-VALID-12", "ST-VALID-13", "ST-VALID-14", "ST-LIFE-12", "ST-LIFE-13", "ST-LIFE-14",
    "ERR-1", "ERR-3", "ERR-6", "ERR-11",
)  # fmt: skip
@pytest.mark.edges("local shards", "fault spread", "transposed", "construction")
@given(data=st.data())
def test_construction_from_local_shards_checks_every_rank_and_keeps_the_data(
    impl, available_world_sizes, run_case, data
):
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(from_local_cases(available_world_sizes))
    edges.note("construction: from local shards" if args["kind"] == "local"
               else "construction: with the global metadata")  # fmt: skip
    edges.local_shards(args["shards_by_rank"])
    edges.transposed([s["tensor"]["shape"] for held in args["shards_by_rank"] for s in held
                      if s["tensor"].get("transposed")])  # fmt: skip
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
