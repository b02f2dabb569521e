"""The oracle's ShardedTensor metadata, validation, specs and collectives against the worked
examples of spec/st-*.md, and against torch as an independent model."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.oracle.st_collectives import (
    gather,
    gather_verdict,
    local_shards,
    reshard,
    reshard_verdict,
    reshard_verdict_by_rank,
    shard_tensor,
    shard_verdict,
)
from conformance.oracle.st_metadata import (
    Properties,
    ShardMeta,
    TensorMeta,
    parse_remote_device,
    properties_verdict,
    serialized,
    shard_metadata_verdict,
)
from conformance.oracle.st_sharding_spec import (
    ChunkSpec,
    EnumerableSpec,
    build_metadata,
    build_metadata_verdict,
    chunk_shards,
    chunk_spec_verdict,
    enumerable_spec_verdict,
)
from conformance.oracle.st_validation import (
    LocalShard,
    TensorInfo,
    init_from_local_shards_verdict,
    init_with_global_metadata_verdict,
    layout_verdict,
    overlap,
)
from conformance.oracle.tensors import make_global
from conformance.oracle.vocabulary import VALID, type_error, value_error

P0 = "rank:0/cpu"


def SM(offsets, sizes, placement=P0):
    return ShardMeta(tuple(offsets), tuple(sizes), placement)


def spec(k, dim=0, order=None):
    return ChunkSpec(dim, tuple(f"rank:{i}/cpu" for i in (order or range(k))))


def boxes(shards):
    return [(list(s.offsets), list(s.sizes)) for s in shards]


# -- ST-META ---------------------------------------------------------------------------------------


@pytest.mark.rules("ST-META-1", "ST-META-2", "ST-META-3", "ST-META-5", "ST-META-7")
@pytest.mark.parametrize(
    ("offsets", "sizes", "placement", "verdict"),
    [
        ([], [], P0, VALID),
        ([4], [0], "rank:3/cpu", VALID),
        ([0, 0], [1], P0, value_error("ST-META-1")),
        ([-1], [1], P0, value_error("ST-META-2")),
        ([0], [-1], P0, value_error("ST-META-2")),
        ([0.5], [1], P0, type_error("ST-META-3")),
        ([True], [1], P0, type_error("ST-META-3")),
        (["0"], [1], P0, type_error("ST-META-3")),
        ([0], [1], 3, type_error("ST-META-7")),
        ([0], [1], None, VALID),
        ([0], [1], "rank:1/foo", value_error("ST-META-5")),
    ],
)
def test_shard_metadata_verdicts(offsets, sizes, placement, verdict):
    assert shard_metadata_verdict(offsets, sizes, placement) == verdict


@pytest.mark.rules("ST-META-5", "ST-META-6")
@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("rank:0/cpu", "rank:0/cpu"),
        ("rank:3/cuda:1", "rank:3/cuda:1"),
        ("rank:01/cpu", "rank:1/cpu"),
        ("rank:2", "rank:2/cpu"),
        ("cpu", "cpu"),
        ("rank:1/meta", "rank:1/meta"),
        ("worker0/cpu", "worker0/cpu"),
        ("worker0", "worker0/cpu"),
        ("trainer0", "trainer0/cpu"),
        ("cpu/cpu", "cpu/cpu"),
        ("cuda", "cuda"),
        ("cuda:1", "cuda:1"),
    ],
)
def test_placement_grammar_accepts(text, canonical):
    assert str(parse_remote_device(text)) == canonical


@pytest.mark.rules("ST-META-5")
@pytest.mark.parametrize(
    "text",
    [
        "",
        "/cpu",
        "rank:-1/cpu",
        "rank:+1/cpu",
        "rank: 1/cpu",
        "RANK:1/cpu",
        "rank:a/cpu",
        "rank:1:2/cpu",
        "rank:1/cpu/x",
        "rank:1/",
        "rank:1/foo",
        "foo:1",
        "rank:\u0661/cpu",
    ],
)
def test_placement_grammar_rejects(text):
    with pytest.raises(ValueError, match="ST-META-5"):
        parse_remote_device(text)


@pytest.mark.rules("ST-META-4", "ST-META-6")
def test_equality_by_value():
    assert ShardMeta((0,), (1,), "rank:0/cpu") == ShardMeta([0], [1], "rank:00")
    assert SM([0], [1], "rank:0/cpu") != SM([0], [1], "rank:0/cpu:0")


@pytest.mark.rules("ST-META-8", "ST-META-9", "ST-META-10")
def test_properties():
    assert Properties() == Properties("float32", "strided", False, "contiguous_format", False)
    p = Properties(dtype="int64", requires_grad=True, memory_format="channels_last")
    assert serialized(p) == ("int64", "strided", True, 1, False)
    assert properties_verdict(Properties(memory_format="channels_last_3d")) == value_error(
        "ST-META-10"
    )


# -- ST-VALID --------------------------------------------------------------------------------------


@pytest.mark.rules("ST-VALID-1")
@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (([0], [2]), ([2], [2]), False),
        (([0, 0], [2, 2]), ([2, 2], [2, 2]), False),
        (([0], [3]), ([2], [2]), True),
        (([0], [2]), ([0], [2]), True),
        (([0], [4]), ([1], [0]), False),
        (([0, 0], [4, 4]), ([1, 1], [2, 0]), False),
        (([1], [0]), ([1], [0]), False),
    ],
)
def test_overlap_table(a, b, expected):
    assert overlap(SM(*a), SM(*b)) is expected


@pytest.mark.rules(
    "ST-VALID-3", "ST-VALID-4", "ST-VALID-5", "ST-VALID-12", "ST-VALID-13", "ST-VALID-14"
)
@pytest.mark.parametrize(
    ("size", "shards", "verdict"),
    [
        ((4,), [([0], [4]), ([4], [0])], VALID),
        ((4,), [([0], [4]), ([6], [0])], value_error("ST-VALID-3")),
        ((4,), [([0], [4]), ([0, 0], [0, 0])], value_error("ST-VALID-5")),
        ((4, 3), [([0, 0], [1, 3]), ([2, 0], [1, 3])], value_error("ST-VALID-4")),
        ((4, 3), [([0, 0], [2, 3]), ([1, 0], [2, 3])], value_error("ST-VALID-2")),
        ((4,), [], value_error("ST-VALID-14")),
        ((0,), [], value_error("ST-VALID-14")),
    ],
)
def test_layout_verdicts(size, shards, verdict):
    assert layout_verdict(TensorMeta(tuple(SM(*s) for s in shards), size)) == verdict


@pytest.mark.rules("ST-VALID-12", "ST-VALID-13")
def test_placement_checks_of_a_layout():
    def meta(*placements):
        return TensorMeta((SM([0], [2], placements[0]), SM([2], [2], placements[1])), (4,))

    assert layout_verdict(meta("rank:1/cpu", "rank:2/cpu"), [1, 2]) == VALID
    assert layout_verdict(meta("rank:0/cpu", "rank:1/cpu"), [1, 2]) == value_error("ST-VALID-12")
    assert layout_verdict(meta("cpu", "cpu")) == value_error("ST-VALID-13")
    worker = layout_verdict(meta("worker0/cpu", "worker1/cpu"))
    assert (worker.error, worker.optional) == ("NotImplementedError", True)


def rows(r, size=2, rank=None, **tensor):
    meta = SM([size * r, 0], [size, 3], f"rank:{r if rank is None else rank}/cpu")
    return [LocalShard(meta, TensorInfo((size, 3), **tensor))]


@pytest.mark.rules(
    "ST-VALID-2",
    "ST-VALID-4",
    "ST-VALID-6",
    "ST-VALID-9",
    "ST-VALID-10",
    "ST-VALID-14",
    "ST-LIFE-12",
)
def test_init_from_local_shards_verdicts():
    sizes = {0: (4, 3), 1: (4, 3)}
    group = [0, 1]
    assert init_from_local_shards_verdict({0: rows(0), 1: rows(1)}, sizes, group) == VALID
    overlapping = {
        r: [LocalShard(SM([r, 0], [2, 3], f"rank:{r}/cpu"), TensorInfo((2, 3)))] for r in group
    }
    assert init_from_local_shards_verdict(overlapping, sizes, group) == value_error("ST-VALID-2")
    gap = {r: rows(r, size=1) for r in group}
    assert init_from_local_shards_verdict(gap, sizes, group) == value_error("ST-VALID-4")
    grad = {0: rows(0), 1: rows(1, requires_grad=True)}
    assert init_from_local_shards_verdict(grad, sizes, group) == value_error("ST-VALID-6")
    strided = {0: rows(0), 1: rows(1, contiguous=False)}
    assert init_from_local_shards_verdict(strided, sizes, group) == value_error("ST-VALID-9")
    elsewhere = {0: rows(0), 1: rows(1, rank=0)}
    assert init_from_local_shards_verdict(elsewhere, sizes, group) == value_error("ST-VALID-10")
    assert init_from_local_shards_verdict({}, sizes, group) == value_error("ST-VALID-14")


@pytest.mark.rules("ST-VALID-7", "ST-VALID-8", "ST-VALID-11", "ST-LIFE-14")
def test_init_with_global_metadata_verdicts():
    group = [0, 1]
    md = TensorMeta((SM([0, 0], [2, 3], "rank:0/cpu"), SM([2, 0], [2, 3], "rank:1/cpu")), (4, 3))
    same = dict.fromkeys(group, md)
    assert init_with_global_metadata_verdict({0: rows(0), 1: rows(1)}, same, group) == VALID
    md64 = TensorMeta(md.shards, md.size, Properties(dtype="float64"))
    differ = {0: md, 1: md64}
    ins = {0: rows(0), 1: rows(1, dtype="float64")}
    assert init_with_global_metadata_verdict(ins, differ, group) == value_error("ST-VALID-7")
    ints = {0: rows(0), 1: rows(1, dtype="int64")}
    assert init_with_global_metadata_verdict(ints, same, group) == value_error("ST-VALID-8")
    assert init_with_global_metadata_verdict({}, same, group) == value_error("ST-VALID-11")


# -- ST-SPEC ---------------------------------------------------------------------------------------


@pytest.mark.rules("ST-SPEC-1", "ST-SPEC-2", "ST-SPEC-3", "ST-SPEC-4")
def test_chunk_layouts():
    assert boxes(chunk_shards((5, 3), spec(4))) == [
        ([0, 0], [2, 3]),
        ([2, 0], [2, 3]),
        ([4, 0], [1, 3]),
        ([5, 0], [0, 3]),
    ]
    assert boxes(chunk_shards((2, 3), spec(4))) == [
        ([0, 0], [1, 3]),
        ([1, 0], [1, 3]),
        ([2, 0], [0, 3]),
        ([2, 0], [0, 3]),
    ]
    assert boxes(chunk_shards((0, 3), spec(3))) == [([0, 0], [0, 3])] * 3
    assert [s.sizes[0] for s in chunk_shards((6,), spec(4))] == [2, 2, 2, 0]


@pytest.mark.rules("ST-SPEC-5", "ST-SPEC-9", "ST-LIFE-1")
def test_placement_order_decides():
    x = torch.arange(8.0).reshape(4, 2)
    meta = build_metadata(spec(2, order=[1, 0]), (4, 2))
    got = shard_tensor(x, meta, [0, 1])
    assert got[0][0].tolist() == [[4.0, 5.0], [6.0, 7.0]]
    assert local_shards(meta, 0)[0].offsets == (2, 0)
    over = build_metadata(spec(4, order=[0, 1, 0, 1]), (8,))
    assert [s.offsets for s in local_shards(over, 0)] == [(0,), (4,)]


@pytest.mark.rules("ST-SPEC-6", "ST-SPEC-7", "ST-SPEC-8")
def test_chunk_spec_verdicts():
    assert boxes(chunk_shards((2, 5), spec(2, dim=-1))) == [([0, 0], [2, 3]), ([0, 3], [2, 2])]
    assert build_metadata_verdict(spec(2, dim=2), (2, 5)) == value_error("ST-SPEC-6")
    assert build_metadata_verdict(spec(2, dim=-3), (2, 5)) == value_error("ST-SPEC-6")
    assert build_metadata_verdict(spec(2), ()) == value_error("ST-SPEC-6")
    assert chunk_spec_verdict(0.0, [P0]) == type_error("ST-SPEC-7")
    assert chunk_spec_verdict(True, [P0]) == type_error("ST-SPEC-7")
    assert chunk_spec_verdict(0, []) == value_error("ST-SPEC-8")


@pytest.mark.rules("ST-SPEC-11", "ST-SPEC-12")
def test_enumerable_specs():
    assert enumerable_spec_verdict([SM([0], [3]), SM([2], [2])]) == value_error("ST-SPEC-11")
    assert enumerable_spec_verdict([]) == value_error("ST-SPEC-11")
    assert enumerable_spec_verdict([SM([0], [4]), SM([1], [0])]) == VALID
    two = EnumerableSpec((SM([0], [2], "rank:0/cpu"), SM([2], [2], "rank:1/cpu")))
    assert build_metadata_verdict(two, (4,)) == VALID
    assert build_metadata_verdict(two, (5,)) == value_error("ST-VALID-4")
    assert build_metadata_verdict(two, (3,)) == value_error("ST-VALID-3")
    assert build_metadata_verdict(two, (4, 1)) == value_error("ST-VALID-5")
    # Placements are not build_metadata's business (ST-VALID-12, 13 judge sharded tensors).
    for where in ("cpu", "worker0/cpu", "rank:9/cpu"):
        assert build_metadata_verdict(EnumerableSpec((SM([0], [4], where),)), (4,)) == VALID


@given(st.lists(st.integers(0, 9), min_size=1, max_size=3), st.integers(1, 6), st.data())
@settings(max_examples=100)
@pytest.mark.rules("ST-SPEC-1", "ST-SPEC-4", "ST-GATHER-1", "ST-VALID-4")
def test_chunk_layout_tiles_and_round_trips(size, k, data):
    """The non-empty boxes are torch.chunk's pieces, every element is in one box (a count with
    torch), and shard-then-gather gives the tensor back."""
    dim = data.draw(st.integers(-len(size), len(size) - 1))
    x = make_global(size, "float64", k)
    meta = build_metadata(spec(k, dim), size, Properties(dtype="float64"))
    assert layout_verdict(meta, list(range(k))) == VALID
    pieces = [
        x[tuple(slice(o, o + n) for o, n in zip(s.offsets, s.sizes, strict=True))]
        for s in meta.shards
        if s.volume
    ]
    chunks = [c for c in torch.chunk(x, k, dim) if c.numel()]
    assert all(torch.equal(a, b) for a, b in zip(pieces, chunks, strict=True))
    count = torch.zeros(size, dtype=torch.int64)
    for s in meta.shards:
        count[tuple(slice(o, o + n) for o, n in zip(s.offsets, s.sizes, strict=True))] += 1
    assert count.eq(1).all()
    assert math.prod(size) == sum(s.volume for s in meta.shards)
    assert torch.equal(gather(meta, shard_tensor(x, meta, list(range(k)))), x)


# -- shard, gather, reshard ------------------------------------------------------------------------


@pytest.mark.rules("ST-LIFE-8", "ST-LIFE-9", "ST-LIFE-10", "ST-SPEC-13")
def test_shard_verdicts():
    group = [0, 1]
    specs, info = dict.fromkeys(group, spec(2)), dict.fromkeys(group, TensorInfo((4, 2)))
    assert shard_verdict(specs, dict.fromkeys(group, 0), info, group) == VALID
    assert shard_verdict(specs, dict.fromkeys(group, 3), info, group) == value_error("ST-LIFE-8")
    assert shard_verdict(specs, {0: 0, 1: 1}, info, group) == value_error("ST-LIFE-9")
    shapes = {0: TensorInfo((4, 2)), 1: TensorInfo((6, 2))}
    assert shard_verdict(specs, dict.fromkeys(group, 0), shapes, group) == value_error("ST-LIFE-10")
    enum = dict.fromkeys(group, EnumerableSpec((SM([0], [2]),)))
    declined = shard_verdict(
        enum, dict.fromkeys(group, 0), dict.fromkeys(group, TensorInfo((2,))), group
    )
    assert (declined.rule, declined.error, declined.optional) == (
        "ST-SPEC-13",
        "NotImplementedError",
        True,
    )


@pytest.mark.rules("ST-GATHER-3", "ST-GATHER-4", "ST-GATHER-5", "ST-GATHER-6", "ST-GATHER-7")
def test_gather_verdicts():
    meta = build_metadata(spec(2), (4, 2))
    group = [0, 1]
    buf = TensorInfo((4, 2))

    def verdict(dst, out):
        return gather_verdict(meta, group, dst, out)

    assert verdict({0: 0, 1: 0}, {0: buf, 1: None}) == VALID
    assert verdict({0: 5, 1: 5}, {}) == value_error("ST-GATHER-3")
    assert verdict({0: 0.0, 1: 0.0}, {}) == type_error("ST-GATHER-3")
    assert verdict({0: 0, 1: 1}, {0: buf, 1: buf}) == value_error("ST-GATHER-4")
    assert verdict({0: 0, 1: 0}, {0: TensorInfo((3, 2))}) == value_error("ST-GATHER-5")
    assert verdict({0: 0, 1: 0}, {0: None}) == value_error("ST-GATHER-5")
    assert verdict({0: 0, 1: 0}, {0: "buffer"}) == type_error("ST-GATHER-5")
    assert verdict({0: 0, 1: 0}, {0: TensorInfo((4, 2), "int64")}) == value_error("ST-GATHER-6")
    assert verdict({0: 0, 1: 0}, {0: buf, 1: buf}) == value_error("ST-GATHER-7")


@pytest.mark.rules("ST-GATHER-2", "ST-GATHER-9", "ST-GATHER-10")
def test_gather_results():
    x = torch.tensor(
        [[1 + 2**-40, 0.1], [1e300, 3.0], [2.0**60 + 1, 5], [-0.0, 7]], dtype=torch.float64
    )
    meta = build_metadata(spec(4), (4, 2), Properties(dtype="float64"))
    assert torch.equal(gather(meta, shard_tensor(x, meta, [0, 1, 2, 3])), x)
    sub = build_metadata(ChunkSpec(0, ("rank:1/cpu", "rank:2/cpu")), (4,))
    assert gather(sub, shard_tensor(torch.arange(4.0), sub, [1, 2])).tolist() == [0.0, 1, 2, 3]
    empty = build_metadata(spec(4), (2, 3))
    zeros = {r: [torch.zeros(s.sizes) for s in local_shards(empty, r)] for r in range(4)}
    assert gather(empty, zeros).eq(0).all()


@pytest.mark.rules("ST-RESHARD-1", "ST-RESHARD-2", "ST-RESHARD-3", "ST-RESHARD-10")
def test_reshard_results():
    x = torch.arange(16.0).reshape(4, 4)
    _, got = reshard(x, build_metadata(spec(2), (4, 4)), spec(2, dim=1), [0, 1])
    assert torch.equal(got[1][0], x[:, 2:4])
    _, got = reshard(
        torch.arange(6.0), build_metadata(spec(3), (6,)), spec(3, order=[1, 2, 0]), [0, 1, 2]
    )
    assert {r: t[0].tolist() for r, t in got.items()} == {
        1: [0.0, 1.0],
        2: [2.0, 3.0],
        0: [4.0, 5.0],
    }
    y = torch.arange(12.0).reshape(4, 3)
    new_meta, got = reshard(y, build_metadata(spec(2), (4, 3)), spec(2, dim=1), [0, 1])
    assert torch.equal(got[1][0], y[:, 2:3])
    assert new_meta.size == (4, 3)
    sub = ChunkSpec(0, ("rank:2/cpu", "rank:1/cpu"))
    _, got = reshard(torch.arange(4.0), build_metadata(sub, (4,)), sub, [1, 2])
    assert (got[1][0].tolist(), got[2][0].tolist()) == ([2.0, 3.0], [0.0, 1.0])


@pytest.mark.rules("ST-RESHARD-7", "ST-RESHARD-8", "ST-RESHARD-9")
def test_reshard_verdicts():
    group = [0, 1]
    enum = EnumerableSpec((SM([0], [2], "rank:0/cpu"), SM([2], [2], "rank:1/cpu")))
    assert reshard_verdict(enum, spec(2), (4,), group).rule == "ST-RESHARD-7"
    over = reshard_verdict(spec(4, order=[0, 1, 0, 1]), spec(2), (8,), group)
    assert (over.rule, over.error, over.optional) == ("ST-RESHARD-8", "NotImplementedError", True)
    assert reshard_verdict(spec(2), ChunkSpec(0, (P0,)), (8,), group).rule == "ST-RESHARD-8"
    assert reshard_verdict(spec(2), spec(2, dim=5), (2, 4), group) == value_error("ST-RESHARD-9")
    strange = ChunkSpec(0, ("rank:0/cpu", "rank:7/cpu"))
    assert reshard_verdict(spec(2), strange, (2, 4), group) == value_error("ST-RESHARD-9")
    assert reshard_verdict(spec(2), "spec", (2, 4), group) == type_error("ST-RESHARD-9")
    assert reshard_verdict(spec(2), spec(2, order=[1, 0]), (4,), group) == VALID


@pytest.mark.rules("ST-RESHARD-4", "ST-RESHARD-9")
def test_reshard_specs_that_differ_between_ranks_are_invalid():
    group = [0, 1]
    same = {0: spec(2, dim=1), 1: spec(2, dim=1)}
    assert reshard_verdict_by_rank(spec(2), same, (4, 4), group) == VALID
    # Each alone is valid; rank 1's is even the current spec (no identity reshard, ST-RESHARD-4).
    differ = {0: spec(2, dim=1), 1: spec(2)}
    assert reshard_verdict_by_rank(spec(2), differ, (4, 4), group) == value_error("ST-RESHARD-9")
    # A member's own invalid spec is found first, in group order.
    bad = {0: spec(2), 1: "spec"}
    assert reshard_verdict_by_rank(spec(2), bad, (4, 4), group) == type_error("ST-RESHARD-9")
