"""The pure parts of the ShardedTensor reference: placements, metadata objects, layout checks and
sharding specs. No process group (ST-META-13, ST-SPEC-10)."""

from __future__ import annotations

import itertools
import pickle

import pytest
import torch
from expecttest import TestCase
from hypothesis import given
from hypothesis import strategies as hs

from reference.sharded_tensor import (
    MEM_FORMAT_ENCODING,
    ChunkShardingSpec,
    EnumerableShardingSpec,
    Placement,
    ShardedTensorMetadata,
    TensorProperties,
    check_layout,
    find_overlap,
)
from reference.sharded_tensor import ShardMetadata as SM

P = "rank:0/cpu"


def spec(k: int, dim: int = 0) -> ChunkShardingSpec:
    return ChunkShardingSpec(dim, [f"rank:{i}/cpu" for i in range(k)])


def layout(spec_: ChunkShardingSpec, *size: int) -> list[tuple[list[int], list[int]]]:
    md = spec_.build_metadata(torch.Size(size), TensorProperties())
    return [(m.shard_offsets, m.shard_sizes) for m in md.shards_metadata]


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
def test_placement_strings_of_the_grammar_parse_to_their_canonical_form(text, canonical):
    assert str(Placement(text)) == canonical
    assert pickle.loads(pickle.dumps(Placement(text))) == Placement(text)


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
def test_placement_strings_outside_the_grammar_raise_value_error(text):
    with pytest.raises(ValueError, match=r"\[ST-META-5\]"):
        Placement(text)


@pytest.mark.rules("ST-META-6")
def test_placements_compare_by_rank_and_device():
    assert Placement("rank:0/cpu") != Placement("rank:0/cpu:0")
    assert Placement("rank:01") == Placement("rank:1/cpu")
    assert (Placement("rank:3/cuda:1").rank(), Placement("cpu").rank()) == (3, None)
    assert Placement("rank:3/cuda:1").device() == torch.device("cuda", 1)


@pytest.mark.rules("ST-META-1", "ST-META-2", "ST-META-3", "ST-META-7")
@pytest.mark.parametrize(
    ("args", "error"),
    [
        (([0, 0], [1], P), ValueError),
        (([-1], [1], P), ValueError),
        (([0], [-1], P), ValueError),
        (([0.5], [1], P), TypeError),
        (([True], [1], P), TypeError),
        ((["0"], [1], P), TypeError),
        (([0], [1], 3), TypeError),
        (([0], [1], torch.device("cpu")), TypeError),
    ],
)
def test_shard_metadata_rejects_bad_boxes_and_placements(args, error):
    with pytest.raises(error, match=r"\[ST-META-[1237]\]"):
        SM(*args)


@pytest.mark.rules("ST-META-1", "ST-META-2", "ST-META-4", "ST-META-12", "ST-META-13")
def test_shard_metadata_is_a_value():
    assert SM((0,), (1,), P) == SM([0], [1], P)
    assert hash(SM((0,), (1,), P)) == hash(SM([0], [1], "rank:00/cpu"))
    assert SM([], [], P).volume == 1
    assert SM([4], [0], "rank:3/cpu").volume == 0
    m = SM([0, 2], [3, 1], "rank:1/cpu")
    assert pickle.loads(pickle.dumps(m)) == m


@pytest.mark.rules("ST-META-8", "ST-META-9", "ST-META-10", "ST-META-11", "ST-META-12")
def test_tensor_properties_defaults_serialised_form_and_rejected_formats():
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        assert TensorProperties().dtype == torch.float64
    finally:
        torch.set_default_dtype(previous)
    p = TensorProperties(dtype=torch.int64, requires_grad=True, memory_format=torch.channels_last)
    assert p.__getstate__() == (
        torch.int64,
        torch.strided,
        True,
        MEM_FORMAT_ENCODING.TORCH_CHANNELS_LAST,
        False,
    )
    assert [e.value for e in MEM_FORMAT_ENCODING] == [0, 1, 2]
    assert pickle.loads(pickle.dumps(p)) == p
    with pytest.raises(ValueError, match=r"\[ST-META-10\]"):
        TensorProperties(memory_format=torch.channels_last_3d)
    md = ShardedTensorMetadata(
        [SM([0, 0], [2, 2], P), SM([2, 0], [1, 2], "rank:1/cpu")],
        torch.Size([3, 2]),
        TensorProperties(dtype=torch.float64),
    )
    assert pickle.loads(pickle.dumps(md)) == md
    assert ShardedTensorMetadata() == ShardedTensorMetadata([], torch.Size([]), TensorProperties())


class TestGoldenText(TestCase):
    def test_metadata_and_error_messages_read_well(self):
        self.assertExpectedInline(
            repr(SM((0, 2), (3, 1), "rank:01")),
            """ShardMetadata(shard_offsets=[0, 2], shard_sizes=[3, 1], placement=rank:1/cpu)""",
        )
        with pytest.raises(ValueError, match=r"\[ST-VALID-2\]") as info:
            check_layout(ShardedTensorMetadata([SM([0], [3], P), SM([2], [2], P)], torch.Size([4])))
        self.assertExpectedInline(
            str(info.value),
            """[ST-VALID-2] shards 0 and 1 overlap: ShardMetadata(shard_offsets=[0], shard_sizes=[3], placement=rank:0/cpu) and ShardMetadata(shard_offsets=[2], shard_sizes=[2], placement=rank:0/cpu)""",  # noqa: E501
        )


@pytest.mark.rules("ST-VALID-1")
@pytest.mark.parametrize(
    ("a", "b", "overlap"),
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
def test_overlap_means_a_shared_element(a, b, overlap):
    assert (find_overlap([SM(*a, P), SM(*b, P)]) is not None) == overlap


def brute_force_overlap(shards: list[SM]) -> bool:
    return any(
        all(
            max(x.shard_offsets[d], y.shard_offsets[d])
            < min(x.shard_offsets[d] + x.shard_sizes[d], y.shard_offsets[d] + y.shard_sizes[d])
            for d in range(x.ndim)
        )
        for x, y in itertools.combinations(shards, 2)
    )


@pytest.mark.rules("ST-VALID-1", "ST-VALID-2")
@given(
    hs.integers(1, 3).flatmap(
        lambda n: hs.lists(
            hs.tuples(
                hs.lists(hs.integers(0, 4), min_size=n, max_size=n),
                hs.lists(hs.integers(0, 3), min_size=n, max_size=n),
            ),
            max_size=7,
        )
    )
)
def test_the_sweep_finds_an_overlap_exactly_when_some_pair_overlaps(boxes):
    shards = [SM(o, s, P) for o, s in boxes]
    pair = find_overlap(shards)
    assert (pair is not None) == brute_force_overlap(shards)
    if pair is not None:
        assert brute_force_overlap([shards[pair[0]], shards[pair[1]]])


@pytest.mark.rules("ST-VALID-3", "ST-VALID-4", "ST-VALID-5", "ST-VALID-14")
@pytest.mark.parametrize(
    ("shards", "size", "rule"),
    [
        ([([0], [4]), ([6], [0])], [4], "ST-VALID-3"),
        ([([0], [2])], [4], "ST-VALID-4"),
        ([([0], [4]), ([0, 0], [0, 0])], [4], "ST-VALID-5"),
        ([], [0], "ST-VALID-14"),
        ([([0], [4]), ([4], [0])], [4], None),
    ],
)
def test_a_layout_is_valid_when_its_shards_tile_the_size(shards, size, rule):
    md = ShardedTensorMetadata([SM(o, s, P) for o, s in shards], torch.Size(size))
    if rule is None:
        check_layout(md)
        return
    with pytest.raises(ValueError, match=rf"\[{rule}\]"):
        check_layout(md)


@pytest.mark.rules("ST-SPEC-1", "ST-SPEC-2", "ST-SPEC-3", "ST-SPEC-4", "ST-SPEC-6", "ST-SPEC-10")
def test_chunk_layouts_follow_chunk_bounds():
    assert layout(spec(4), 5, 3) == [
        ([0, 0], [2, 3]),
        ([2, 0], [2, 3]),
        ([4, 0], [1, 3]),
        ([5, 0], [0, 3]),
    ]
    assert layout(spec(4), 2, 3) == [
        ([0, 0], [1, 3]),
        ([1, 0], [1, 3]),
        ([2, 0], [0, 3]),
        ([2, 0], [0, 3]),
    ]
    assert layout(spec(3), 0, 3) == [([0, 0], [0, 3])] * 3
    assert [s[1][0] for s in layout(spec(4), 6)] == [2, 2, 2, 0]
    assert layout(spec(2, dim=-1), 2, 5) == [([0, 0], [2, 3]), ([0, 3], [2, 2])]
    for dim in (2, -3):
        with pytest.raises(ValueError, match=r"\[ST-SPEC-6\]"):
            layout(spec(2, dim), 2, 5)
    with pytest.raises(ValueError, match=r"\[ST-SPEC-6\]"):
        layout(spec(1))


@pytest.mark.rules("ST-SPEC-7", "ST-SPEC-8", "ST-SPEC-11", "ST-SPEC-12")
def test_spec_construction_checks_types_and_layouts():
    for dim in ("x", 0.0, True):
        with pytest.raises(TypeError, match=r"\[ST-SPEC-7\]"):
            ChunkShardingSpec(dim, [P])
    with pytest.raises(ValueError, match=r"\[ST-SPEC-8\]"):
        ChunkShardingSpec(0, [])
    for shards in (
        [],
        [SM([0], [3], P), SM([2], [2], P)],
        [SM([0], [1], P), SM([0, 0], [1, 1], P)],
    ):
        with pytest.raises(ValueError, match=r"\[ST-SPEC-11\]"):
            EnumerableShardingSpec(shards)
    enumerable = EnumerableShardingSpec([SM([0], [4], P), SM([1], [0], P)])
    assert enumerable.build_metadata(torch.Size([4]), TensorProperties()).shards_metadata == [
        SM([0], [4], P),
        SM([1], [0], P),
    ]
    with pytest.raises(ValueError, match=r"\[ST-VALID-4\]"):
        enumerable.build_metadata(torch.Size([5]), TensorProperties())
    # ST-SPEC-12: build_metadata reports the ST-VALID rule the tiling breaks, and leaves
    # placements (ST-VALID-12, 13) to the operations that build a sharded tensor.
    with pytest.raises(ValueError, match=r"\[ST-VALID-3\]"):
        enumerable.build_metadata(torch.Size([3]), TensorProperties())
    with pytest.raises(ValueError, match=r"\[ST-VALID-5\]"):
        enumerable.build_metadata(torch.Size([4, 1]), TensorProperties())
    for where in ("cpu", "worker0/cpu", "rank:9/cpu"):
        rankless = EnumerableShardingSpec([SM([0], [4], where)])
        assert rankless.build_metadata(torch.Size([4]), TensorProperties()).shards_metadata == [
            SM([0], [4], where)
        ]
