"""spec/st-metadata.md: ShardMetadata, placements, TensorProperties, ShardedTensorMetadata (pure:
each call runs in the sandbox, ``conformance.tasks.pure``, where no process group exists)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
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

PLACEMENTS = st.sampled_from(
    ["rank:0/cpu", "rank:3/cuda:1", "rank:01/cpu", "rank:2", "cpu", "rank:1/meta", None, 3]
)


@pytest.fixture
def api(impl, pure):
    """The pure tasks, for an implementation that claims the ShardedTensor family."""
    judge.requires(impl, "sharded_tensor")
    return pure


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
        api("shard_metadata", offsets=offsets, sizes=sizes, placement=placement),
        verdict,
        context,
        rule="ST-META-1",
    )
    if verdict == VALID:
        judge.assert_equal(
            "len(shard_offsets)", made["offsets"], len(offsets), context, rule="ST-META-1"
        )
        judge.assert_equal("list(shard_sizes)", made["sizes"], sizes, context, rule="ST-META-1")


@pytest.mark.rules("ST-META-7", "ERR-2")
@pytest.mark.parametrize("placement", [3, {"torch.device": "cpu"}], ids=["int", "device"])
def test_a_placement_that_is_not_a_string_is_a_type_error(api, placement):
    judge.assert_pure_verdict(
        api("shard_metadata", offsets=[0], sizes=[1], placement=placement),
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


def _placement_case(text: str) -> Any:
    """A text cites what it checks: the grammar (ST-META-5) and, if the grammar refuses it, the
    ValueError (ERR-1), or if it names a rank, how it prints (ST-META-6)."""
    try:
        cited = ["ST-META-6"] if parse_remote_device(text).rank is not None else []
    except ValueError:
        cited = ["ERR-1"]
    return pytest.param(text, marks=pytest.mark.rules("ST-META-5", *cited))


@pytest.mark.parametrize("text", [_placement_case(text) for text in PLACEMENT_TEXTS])
def test_placement_strings_follow_the_grammar_and_print_canonically(api, text):
    try:
        expected = parse_remote_device(text)
        verdict = VALID
    except ValueError:
        verdict = value_error("ST-META-5")
    context = f"placement({text!r})"
    parsed = judge.assert_pure_verdict(
        api("remote_device", text=text), verdict, context, rule="ST-META-5"
    )
    if verdict == VALID:
        # What the string means is the grammar's (ST-META-5); how it prints is ST-META-6's.
        judge.assert_equal("rank()", parsed["rank"], expected.rank, context, rule="ST-META-5")
        device = str(torch.device(expected.device))
        judge.assert_equal("device()", parsed["device"], device, context, rule="ST-META-5")
        if expected.rank is not None:
            judge.assert_equal("str()", parsed["str"], str(expected), context, rule="ST-META-6")


@pytest.mark.rules("ST-META-6")
@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [("rank:0/cpu", "rank:00/cpu", True), ("rank:0/cpu", "rank:0/cpu:0", False),
     ("rank:0/cpu", "rank:1/cpu", False)],
)  # fmt: skip
def test_placements_compare_by_rank_and_device(api, a, b, equal):
    context = "placement equality"
    result = api("remote_devices_equal", a=a, b=b)
    judge.assert_equal(f"{a} == {b}", judge.pure_value(result, context, rule="ST-META-6"), equal,
                       context, rule="ST-META-6")  # fmt: skip


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
    result = api("shard_metadata_equal", left=[o1, s1, placements[0]],
                 right=[o2, s2, placements[1]])  # fmt: skip
    expected = (o1, s1) == (o2, s2) and parse_remote_device(placements[0]) == parse_remote_device(
        placements[1]
    )
    context = (
        f"SM({tuple(o1)}, {tuple(s1)}, {placements[0]!r}) == SM({o2}, {s2}, {placements[1]!r})"
    )
    compared = judge.pure_value(result, context, rule="ST-META-4")
    judge.assert_equal("==", compared["eq"], expected, context, rule="ST-META-4")
    if expected:
        judge.assert_equal("hash equal", compared["hash_eq"], True, context, rule="ST-META-4")


@pytest.mark.rules("ST-META-8")
def test_tensor_properties_defaults_are_read_when_created(api):
    context = "set_default_dtype(float64); TensorProperties()"
    props = judge.pure_value(
        api("tensor_properties_defaults", default_dtype="float64"), context, rule="ST-META-8"
    )
    expected = {"dtype": "float64", "layout": "strided", "requires_grad": "False",
                "memory_format": "contiguous_format", "pin_memory": "False"}  # fmt: skip
    for name, value in expected.items():
        judge.assert_equal(name, props[name], value, context, rule="ST-META-8")


PROPERTIES = st.builds(
    Properties,
    dtype=st.sampled_from(["float32", "float64", "int64", "bool"]),
    requires_grad=st.booleans(),
    memory_format=st.sampled_from(sorted(MEM_FORMAT_ENCODING)),
    pin_memory=st.booleans(),
)


@pytest.mark.rules("ST-META-8", "ST-META-9", "ST-META-12")
@given(props=PROPERTIES)
def test_tensor_properties_serialise_to_the_encoded_five_tuple(api, props):
    context = f"{props}.__getstate__()"
    made = judge.pure_value(
        api("tensor_properties_state", props=dataclasses.asdict(props)), context, rule="ST-META-9"
    )
    judge.assert_equal("state", tuple(made["state"]), serialized(props), context,
                       rule="ST-META-9")  # fmt: skip
    judge.assert_equal("encoding type is MEM_FORMAT_ENCODING", made["encoding_is_the_table"], True,
                       context, rule="ST-META-9")  # fmt: skip
    judge.assert_equal("pickle round trip", made["pickle_round_trip"], True, context,
                       rule="ST-META-12")  # fmt: skip


@pytest.mark.rules("ST-META-10", "ERR-1")
def test_a_memory_format_outside_the_table_is_a_value_error(api):
    judge.assert_pure_verdict(
        api("pickle_tensor_properties", memory_format="channels_last_3d"),
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
    boxes, size, props = data
    context = f"ShardedTensorMetadata({boxes}, {size}, {props})"
    made = judge.pure_value(
        api("sharded_tensor_metadata", boxes=boxes, size=size, props=dataclasses.asdict(props)),
        context,
        rule="ST-META-11",
    )
    judge.assert_equal("list(shards_metadata) == shards", made["shards_as_given"], True, context,
                       rule="ST-META-11")  # fmt: skip
    judge.assert_equal("size", made["size"], size, context, rule="ST-META-11")
    judge.assert_equal("pickle round trip", made["pickle_round_trip"], True, context,
                       rule="ST-META-12")  # fmt: skip
    judge.assert_equal("placements after pickling", made["placements_after_pickling"],
                       made["placements"], context, rule="ST-META-12")  # fmt: skip
    judge.assert_equal("ShardMetadata round trips", made["shard_round_trips"],
                       [True] * len(boxes), context, rule="ST-META-12")  # fmt: skip
    judge.assert_equal("equal after reversing shards", made["equal_reversed"],
                       made["shards_equal_reversed"], context, rule="ST-META-11")  # fmt: skip


@pytest.mark.rules("ST-META-11")
def test_sharded_tensor_metadata_defaults(api):
    context = "ShardedTensorMetadata()"
    meta = judge.pure_value(api("sharded_tensor_metadata_defaults"), context, rule="ST-META-11")
    judge.assert_equal("len(shards_metadata)", meta["shards"], 0, context, rule="ST-META-11")
    judge.assert_equal("size", meta["size"], [], context, rule="ST-META-11")
    judge.assert_equal("tensor_properties == TensorProperties()", meta["default_properties"],
                       True, context, rule="ST-META-11")  # fmt: skip
