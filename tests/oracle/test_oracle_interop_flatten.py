"""The oracle's interop conversion and flattening against spec/interop.md and st-flatten.md."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.oracle.flatten import flatten_entry, flatten_verdict, matches
from conformance.oracle.interop import to_sharded_metadata, to_sharded_metadata_verdict
from conformance.oracle.st_metadata import ShardMeta, TensorMeta
from conformance.oracle.st_sharding_spec import ChunkSpec, build_metadata, chunk_shards
from conformance.oracle.st_validation import layout_verdict
from conformance.oracle.vocabulary import VALID, value_error
from conformance.vocabulary import Mesh, parse_placements

P = parse_placements


def boxes(meta):
    return [(list(s.offsets), list(s.sizes), s.placement) for s in meta.shards]


@pytest.mark.rules("INTEROP-1")
def test_one_box_per_canonical_coordinate():
    mesh = Mesh((2, 2), (0, 1, 2, 3))
    assert boxes(to_sharded_metadata((5,), "float32", mesh, P(["S(0)", "R"]))) == [
        ([0], [3], "rank:0/cpu"),
        ([3], [2], "rank:2/cpu"),
    ]
    assert boxes(to_sharded_metadata((5,), "float32", mesh, P(["R", "R"]))) == [
        ([0], [5], "rank:0/cpu")
    ]


@pytest.mark.rules("INTEROP-2", "INTEROP-3", "INTEROP-4", "INTEROP-7")
def test_boxes_are_valid_metadata():
    meta = to_sharded_metadata((3,), "float32", Mesh((2, 3), tuple(range(6))), P(["S(0)", "S(0)"]))
    assert [(s.offsets, s.sizes) for s in meta.shards] == [
        ((0,), (1,)),
        ((1,), (1,)),
        ((3,), (0,)),
        ((2,), (1,)),
        ((3,), (0,)),
        ((3,), (0,)),
    ]
    assert layout_verdict(meta) == VALID
    four = to_sharded_metadata((5,), "float32", Mesh((4,), (0, 1, 2, 3)), P(["S(0)"]))
    assert four.shards[3] == ShardMeta((5,), (0,), "rank:3/cpu")
    chunked = chunk_shards((5,), ChunkSpec(0, tuple(f"rank:{r}/cpu" for r in range(4))))
    assert [s for s in four.shards if s.volume] == [s for s in chunked if s.volume]


@pytest.mark.rules("INTEROP-5", "INTEROP-6")
def test_layouts_without_boxes():
    assert to_sharded_metadata_verdict((4,), (3,), P(["P(sum)"])) == value_error("INTEROP-5")
    assert to_sharded_metadata_verdict((4,), (2,), P(["_S(0, 2)"])) == value_error("INTEROP-6")
    assert to_sharded_metadata_verdict((8,), (2, 2), P(["_S(0, 2)", "S(0)"])) == VALID
    # Columns [0, 2] are no interval, but coordinate 0 holds no element.
    assert to_sharded_metadata_verdict((0, 3), (2,), P(["_S(1, 2)"])) == VALID
    meta = to_sharded_metadata((8,), "float32", Mesh((2, 2), (0, 1, 2, 3)), P(["_S(0, 2)", "S(0)"]))
    assert [(s.offsets[0], s.sizes[0]) for s in meta.shards] == [(0, 2), (4, 2), (2, 2), (6, 2)]


@settings(max_examples=100)
@given(
    st.lists(st.integers(0, 7), min_size=1, max_size=2),
    st.lists(st.integers(1, 3), min_size=1, max_size=3),
    st.data(),
)
@pytest.mark.rules("INTEROP-2")
def test_boxes_tile_the_tensor(shape, mesh_shape, data):
    texts = st.sampled_from(["R", "S(0)", "S(-1)", "_S(0, 2)"])
    ps = P(data.draw(st.lists(texts, min_size=len(mesh_shape), max_size=len(mesh_shape))))
    if not to_sharded_metadata_verdict(shape, mesh_shape, ps).ok:
        return
    mesh = Mesh(mesh_shape, tuple(range(math.prod(mesh_shape))))
    meta = to_sharded_metadata(shape, "int64", mesh, ps)
    count = torch.zeros(shape, dtype=torch.int64)
    for s in meta.shards:
        count[tuple(slice(o, o + n) for o, n in zip(s.offsets, s.sizes, strict=True))] += 1
    assert count.eq(1).all()
    assert layout_verdict(meta) == VALID


def nested(world):
    """The 2-D example of ST-FLAT-6/7: outer ``(2 * world, 4)`` chunked on dim 0, inner
    ``(2, 4)`` chunked on dim 1 over the same ranks."""
    ranks = tuple(f"rank:{r}/cpu" for r in range(world))
    outer = build_metadata(ChunkSpec(0, ranks), (2 * world, 4))
    inner = build_metadata(ChunkSpec(1, ranks), (2, 4))
    return outer, inner


@pytest.mark.rules("ST-FLAT-5", "ST-FLAT-6", "ST-FLAT-7", "ST-FLAT-8")
def test_flat_layout_of_two_ranks():
    outer, inner = nested(2)
    flat0, flat1 = flatten_entry(outer, inner, 0), flatten_entry(outer, inner, 1)
    assert flat0.size == (4, 4)
    assert flat0.local == ShardMeta((0, 0), (2, 2), "rank:0/cpu")
    assert flat1.local == ShardMeta((2, 2), (2, 2), "rank:1/cpu")
    assert list(flat0.boxes) == sorted([((2, 0), (2, 4)), ((0, 2), (2, 2)), ((0, 0), (2, 2))])
    assert list(flat1.boxes) == sorted([((0, 0), (2, 4)), ((2, 0), (2, 2)), ((2, 2), (2, 2))])
    pytorch_like = [
        ShardMeta((2, 0), (2, 4), "rank:1/cpu"),
        ShardMeta((0, 2), (2, 2), "rank:1/cpu"),
        flat0.local,
    ]
    assert matches(flat0, pytorch_like, 0)
    assert not matches(flat0, [*pytorch_like[:2], ShardMeta((0, 0), (2, 2), "rank:1/cpu")], 0)
    assert (
        layout_verdict(
            TensorMeta(tuple(ShardMeta(o, s, "rank:0/cpu") for o, s in flat0.boxes), flat0.size)
        )
        == VALID
    )


@pytest.mark.rules("ST-FLAT-7")
def test_flat_layout_keeps_empty_local_box():
    outer, inner = nested(3)  # inner chunk lengths 2, 2, 0 on dim 1
    flat = flatten_entry(outer, inner, 2)
    assert flat.local.offsets == (4, 4)
    assert flat.local.sizes == (2, 0)
    assert ((4, 4), (2, 0)) in flat.boxes


@pytest.mark.rules("ST-FLAT-2", "ST-FLAT-3", "ST-FLAT-4")
def test_entries_that_are_not_rewritten():
    lone = build_metadata(ChunkSpec(0, ("rank:0/cpu",)), (4,))
    assert flatten_entry(lone, None, 0) == "same"
    assert flatten_entry(lone, None, 1) == "dropped"
    two = build_metadata(ChunkSpec(0, ("rank:0/cpu", "rank:1/cpu")), (4,))
    assert flatten_entry(two, None, 1) == "same"
    outer, _ = nested(2)
    inner = build_metadata(ChunkSpec(1, ("rank:0/cpu", "rank:1/cpu") * 2), (2, 4))
    assert flatten_verdict(outer, inner, 0) == value_error("ST-FLAT-4")


def two_rank_outer(rows, cols):
    return build_metadata(ChunkSpec(0, ("rank:0/cpu", "rank:1/cpu")), (2 * rows, cols))


@pytest.mark.rules("ST-FLAT-7", "ST-FLAT-8")
def test_flat_layout_may_leave_out_empty_boxes_but_not_the_local_one():
    # Outer (2, 0), inner (1, 0) chunked on dim 1: every box is empty, both inner boxes equal.
    inner = build_metadata(ChunkSpec(1, ("rank:0/cpu", "rank:1/cpu")), (1, 0))
    flat = flatten_entry(two_rank_outer(1, 0), inner, 0)
    assert list(flat.boxes) == [((0, 0), (1, 0)), ((0, 0), (1, 0)), ((1, 0), (1, 0))]
    local, elsewhere = flat.local, "rank:1/cpu"
    pytorch_like = [ShardMeta((1, 0), (1, 0), elsewhere), local]
    assert matches(flat, pytorch_like, 0)
    assert matches(flat, [local], 0)
    assert not matches(flat, [ShardMeta((1, 0), (1, 0), elsewhere)], 0)
    assert not matches(flat, [*pytorch_like, ShardMeta((0, 0), (2, 0), elsewhere)], 0)


@pytest.mark.rules("ST-FLAT-7")
def test_flat_layout_keeps_a_full_box_starting_where_the_empty_local_one_starts():
    inner = TensorMeta(
        (ShardMeta((0, 0), (1, 1), "rank:0/cpu"), ShardMeta((0, 0), (1, 0), "rank:1/cpu")), (1, 1)
    )
    flat = flatten_entry(two_rank_outer(1, 1), inner, 1)
    assert list(flat.boxes) == [((0, 0), (1, 1)), ((1, 0), (1, 0)), ((1, 0), (1, 1))]
    assert not matches(flat, [ShardMeta((0, 0), (1, 1), "rank:0/cpu"), flat.local], 1)
