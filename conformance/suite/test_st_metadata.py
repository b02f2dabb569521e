"""spec/st-metadata.md: ShardMetadata, placements, TensorProperties, ShardedTensorMetadata (pure,
in the driver, where no process group exists)."""

from __future__ import annotations

import pickle

import pytest
import torch
import torch.distributed as dist
from hypothesis import given
from hypothesis import strategies as st

from conformance import judge
from conformance.oracle.st_metadata import (
    MEM_FORMAT_ENCODING,
    Properties,
    parse_remote_device,
    serialized,
    shard_metadata_verdict,
)
from conformance.oracle.vocabulary import VALID, type_error, value_error
from conformance.world import attach

PLACEMENTS = st.sampled_from(
    ["rank:0/cpu", "rank:3/cuda:1", "rank:01/cpu", "rank:2", "cpu", "rank:1/meta", None, 3]
)


@pytest.fixture
def api(impl):
    judge.requires(impl, "sharded_tensor")
    return impl.st_api()


@st.composite
def shard_metadata_args(draw):
    """Offsets and sizes of one length or not, entries of every type, placements of every type;
    at most one violation (ERR-11)."""
    n = draw(st.integers(0, 3))
    offsets = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    sizes = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    placement = "rank:0/cpu"
    fault = draw(st.sampled_from(["none", "length", "negative", "type", "placement"]))
    target = offsets if draw(st.booleans()) else sizes
    if fault == "length":
        target.append(draw(st.integers(0, 6)))
    elif fault in ("negative", "type") and target:
        target[draw(st.integers(0, len(target) - 1))] = draw(
            st.integers(-3, -1) if fault == "negative" else st.sampled_from([0.5, 1.0, True, "0"])
        )
    elif fault == "placement":
        placement = draw(PLACEMENTS)
    return offsets, sizes, placement


@pytest.mark.rules("ST-META-1", "ST-META-2", "ST-META-3", "ST-META-7", "ERR-1", "ERR-2", "ERR-11")
@given(args=shard_metadata_args())
def test_shard_metadata_accepts_exactly_non_negative_int_boxes(api, args):
    offsets, sizes, placement = args
    verdict = shard_metadata_verdict(offsets, sizes, placement)
    context = f"ShardMetadata({offsets}, {sizes}, {placement!r})"
    made = judge.assert_pure_verdict(
        lambda: api.ShardMetadata(offsets, sizes, placement), verdict, context, rule="ST-META-1"
    )
    if verdict == VALID:
        judge.assert_equal(
            "len(shard_offsets)", len(made.shard_offsets), len(offsets), context, rule="ST-META-1"
        )
        judge.assert_equal(
            "list(shard_sizes)", list(made.shard_sizes), sizes, context, rule="ST-META-1"
        )


@pytest.mark.rules("ST-META-7", "ERR-2")
@pytest.mark.parametrize("placement", [3, torch.device("cpu")], ids=["int", "device"])
def test_a_placement_that_is_not_a_string_is_a_type_error(api, placement):
    judge.assert_pure_verdict(
        lambda: api.ShardMetadata([0], [1], placement),
        type_error("ST-META-7"),
        f"ShardMetadata([0], [1], {placement!r})",
    )


PLACEMENT_TEXTS = [
    "rank:0/cpu",
    "rank:3/cuda:1",
    "rank:01/cpu",
    "rank:2",
    "cpu",
    "rank:1/meta",
    "worker0/cpu",
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
    "rank:\u0661/cpu",
]


@pytest.mark.rules("ST-META-5", "ST-META-6", "ERR-1")
@pytest.mark.parametrize("text", PLACEMENT_TEXTS)
def test_placement_strings_follow_the_grammar_and_print_canonically(api, text):
    try:
        expected = parse_remote_device(text)
        verdict = VALID
    except ValueError:
        verdict = value_error("ST-META-5")
    context = f"placement({text!r})"
    parsed = judge.assert_pure_verdict(
        lambda: api.placement(text), verdict, context, rule="ST-META-5"
    )
    if verdict == VALID:
        # What the string means is the grammar's (ST-META-5); how it prints is ST-META-6's.
        judge.assert_equal("rank()", parsed.rank(), expected.rank, context, rule="ST-META-5")
        judge.assert_equal(
            "device()", parsed.device(), torch.device(expected.device), context, rule="ST-META-5"
        )
        if expected.rank is not None:
            judge.assert_equal("str()", str(parsed), str(expected), context, rule="ST-META-6")


@pytest.mark.rules("ST-META-6")
def test_placements_compare_by_rank_and_device(api):
    judge.assert_equal(
        "rank:0/cpu == rank:00/cpu",
        api.placement("rank:0/cpu") == api.placement("rank:00/cpu"),
        True,
        "placement equality",
        rule="ST-META-6",
    )
    judge.assert_equal(
        "rank:0/cpu == rank:0/cpu:0",
        api.placement("rank:0/cpu") == api.placement("rank:0/cpu:0"),
        False,
        "placement equality",
        rule="ST-META-6",
    )
    judge.assert_equal(
        "rank:0/cpu == rank:1/cpu",
        api.placement("rank:0/cpu") == api.placement("rank:1/cpu"),
        False,
        "placement equality",
        rule="ST-META-6",
    )


BOXES = st.integers(0, 2).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
    )
)


@pytest.mark.rules("ST-META-4")
@given(
    a=BOXES,
    b=BOXES,
    placements=st.tuples(
        st.sampled_from(["rank:0/cpu", "rank:1/cpu", "rank:01"]),
        st.sampled_from(["rank:0/cpu", "rank:1/cpu", "rank:1"]),
    ),
)
def test_shard_metadata_equality_is_by_value_whatever_the_sequence_type(api, a, b, placements):
    (o1, s1), (o2, s2) = a, b
    left = api.ShardMetadata(tuple(o1), tuple(s1), placements[0])
    right = api.ShardMetadata(list(o2), list(s2), placements[1])
    expected = (o1, s1) == (o2, s2) and parse_remote_device(placements[0]) == parse_remote_device(
        placements[1]
    )
    context = (
        f"SM({tuple(o1)}, {tuple(s1)}, {placements[0]!r}) == SM({o2}, {s2}, {placements[1]!r})"
    )
    judge.assert_equal("==", left == right, expected, context, rule="ST-META-4")
    if expected:
        judge.assert_equal("hash equal", hash(left) == hash(right), True, context, rule="ST-META-4")


@pytest.mark.rules("ST-META-8")
def test_tensor_properties_defaults_are_read_when_created(api):
    before = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        props = api.TensorProperties()
    finally:
        torch.set_default_dtype(before)
    context = "set_default_dtype(float64); TensorProperties()"
    judge.assert_equal("dtype", props.dtype, torch.float64, context, rule="ST-META-8")
    judge.assert_equal("layout", props.layout, torch.strided, context, rule="ST-META-8")
    judge.assert_equal("requires_grad", props.requires_grad, False, context, rule="ST-META-8")
    judge.assert_equal(
        "memory_format", props.memory_format, torch.contiguous_format, context, rule="ST-META-8"
    )
    judge.assert_equal("pin_memory", props.pin_memory, False, context, rule="ST-META-8")


PROPERTIES = st.builds(
    Properties,
    dtype=st.sampled_from(["float32", "float64", "int64", "bool"]),
    requires_grad=st.booleans(),
    memory_format=st.sampled_from(sorted(MEM_FORMAT_ENCODING)),
    pin_memory=st.booleans(),
)


def _torch_properties(api, props: Properties):
    return api.TensorProperties(
        dtype=getattr(torch, props.dtype),
        layout=getattr(torch, props.layout),
        requires_grad=props.requires_grad,
        memory_format=getattr(torch, props.memory_format),
        pin_memory=props.pin_memory,
    )


@pytest.mark.rules("ST-META-8", "ST-META-9", "ST-META-12")
@given(props=PROPERTIES)
def test_tensor_properties_serialise_to_the_encoded_five_tuple(api, props):
    made = _torch_properties(api, props)
    context = f"{made!r}.__getstate__()"
    dtype, layout, requires_grad, encoding, pin_memory = made.__getstate__()
    actual = (
        str(dtype).removeprefix("torch."),
        str(layout).removeprefix("torch."),
        requires_grad,
        encoding.value,
        pin_memory,
    )
    judge.assert_equal("state", actual, serialized(props), context, rule="ST-META-9")
    judge.assert_equal(
        "encoding type", type(encoding), api.MEM_FORMAT_ENCODING, context, rule="ST-META-9"
    )
    judge.assert_equal(
        "pickle round trip",
        pickle.loads(pickle.dumps(made)) == made,
        True,
        context,
        rule="ST-META-12",
    )


@pytest.mark.rules("ST-META-10", "ERR-1")
def test_a_memory_format_outside_the_table_is_a_value_error(api):
    def make_and_pickle():
        pickle.dumps(api.TensorProperties(memory_format=torch.channels_last_3d))

    judge.assert_pure_verdict(
        make_and_pickle,
        value_error("ST-META-10"),
        "pickle.dumps(TensorProperties(memory_format=channels_last_3d))",
    )


@st.composite
def tensor_metadata(draw):
    n = draw(st.integers(1, 4))
    boxes = [
        (
            draw(st.lists(st.integers(0, 5), min_size=2, max_size=2)),
            draw(st.lists(st.integers(0, 5), min_size=2, max_size=2)),
            f"rank:{draw(st.integers(0, 3))}/cpu",
        )
        for _ in range(n)
    ]
    size = draw(st.lists(st.integers(0, 8), min_size=2, max_size=2))
    return boxes, size, draw(PROPERTIES)


@pytest.mark.rules("ST-META-11", "ST-META-12", "ST-META-13")
@given(data=tensor_metadata(), swap=st.booleans())
def test_sharded_tensor_metadata_compares_in_order_and_pickles_by_value(api, data, swap):
    if attach.CURRENT is None:  # under a launcher the driver is rank 0 and has its group
        assert not (dist.is_available() and dist.is_initialized()), "driver has a process group"
    boxes, size, props = data
    shards = [api.ShardMetadata(o, s, p) for o, s, p in boxes]
    meta = api.ShardedTensorMetadata(shards, torch.Size(size), _torch_properties(api, props))
    context = f"ShardedTensorMetadata({boxes}, {size}, {props})"
    judge.assert_equal(
        "list(shards_metadata)", list(meta.shards_metadata), shards, context, rule="ST-META-11"
    )
    judge.assert_equal("size", meta.size, torch.Size(size), context, rule="ST-META-11")
    back = pickle.loads(pickle.dumps(meta))
    judge.assert_equal("pickle round trip", back == meta, True, context, rule="ST-META-12")
    judge.assert_equal(
        "placements after pickling",
        [(m.placement.rank(), m.placement.device()) for m in back.shards_metadata],
        [(m.placement.rank(), m.placement.device()) for m in shards],
        context,
        rule="ST-META-12",
    )
    for m in shards:
        judge.assert_equal(
            "ShardMetadata round trip",
            pickle.loads(pickle.dumps(m)) == m,
            True,
            context,
            rule="ST-META-12",
        )
    reordered = shards[::-1]
    other = api.ShardedTensorMetadata(reordered, torch.Size(size), _torch_properties(api, props))
    judge.assert_equal(
        "equal after reversing shards",
        other == meta,
        reordered == shards,
        context,
        rule="ST-META-11",
    )


@pytest.mark.rules("ST-META-11")
def test_sharded_tensor_metadata_defaults(api):
    meta = api.ShardedTensorMetadata()
    context = "ShardedTensorMetadata()"
    judge.assert_equal(
        "shards_metadata", list(meta.shards_metadata), [], context, rule="ST-META-11"
    )
    judge.assert_equal("size", meta.size, torch.Size([]), context, rule="ST-META-11")
    judge.assert_equal(
        "tensor_properties",
        meta.tensor_properties,
        api.TensorProperties(),
        context,
        rule="ST-META-11",
    )
