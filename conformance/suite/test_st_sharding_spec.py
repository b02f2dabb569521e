"""spec/st-sharding-spec.md: the layout of a ChunkShardingSpec and of an EnumerableShardingSpec
(pure), and what building a sharded tensor from a spec without ranks does (collective)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import judge
from conformance import strategies as ss
from conformance.oracle.st_collectives import create_verdict
from conformance.oracle.st_metadata import ShardMeta
from conformance.oracle.st_sharding_spec import (
    ChunkSpec,
    EnumerableSpec,
    build_metadata_verdict,
    chunk_shards,
    chunk_spec_verdict,
    enumerable_spec_verdict,
)
from conformance.oracle.vocabulary import VALID


@st.composite
def chunk_specs(draw):
    shape = draw(ss.shapes(min_dims=1))
    dim = draw(st.integers(-len(shape) - 1, len(shape)))
    ranks = draw(st.lists(st.integers(0, 7), min_size=1, max_size=8))
    return shape, dim, [f"rank:{r}/cpu" for r in ranks]


@pytest.mark.rules(
    "ST-SPEC-1", "ST-SPEC-2", "ST-SPEC-3", "ST-SPEC-4", "ST-SPEC-5", "ST-SPEC-6", "ST-SPEC-9",
    "ST-SPEC-10",
)  # fmt: skip
@pytest.mark.volume(50)
@given(spec=chunk_specs())
def test_chunk_metadata_of_any_size_dim_and_placements(impl, pure_each, spec):
    judge.requires(impl, "sharded_tensor")
    shape, dim, placements = spec
    context = f"ChunkShardingSpec(dim={dim}, {placements}).build_metadata({shape})"
    # Built twice: the layout is a function of the spec's arguments (ST-SPEC-10).
    call = {"shape": shape, "dim": dim, "placements": placements}
    first, second = pure_each("chunk_metadata", [call, call])
    oracle_spec = ChunkSpec(dim, tuple(placements))
    verdict = build_metadata_verdict(oracle_spec, shape)
    actual = judge.assert_pure_verdict(first, verdict, context, rule="ST-SPEC-1")
    if verdict != VALID:
        return
    expected = [
        {"offsets": list(s.offsets), "sizes": list(s.sizes), "placement": s.placement}
        for s in chunk_shards(shape, oracle_spec)
    ]
    rule = _chunk_rule(actual, expected, dim % len(shape))
    judge.assert_equal("shards", actual, expected, context, rule=rule)
    again = judge.pure_value(second, context, rule="ST-SPEC-10")
    judge.assert_equal("shards of a second call", again, actual, context, rule="ST-SPEC-10")


def _chunk_rule(actual, expected, d: int) -> str:
    """The rule a wrong chunk layout breaks: ST-SPEC-2 when only the offsets of empty chunks
    differ, ST-SPEC-5 when only placements do, otherwise ST-SPEC-1."""
    if not isinstance(actual, list) or len(actual) != len(expected):
        return "ST-SPEC-1"
    wrong = [(a, e) for a, e in zip(actual, expected, strict=True) if a != e]
    if all(_differs_only_in("offsets", a, e) and e["sizes"][d] == 0 for a, e in wrong):
        return "ST-SPEC-2"
    if all(_differs_only_in("placement", a, e) for a, e in wrong):
        return "ST-SPEC-5"
    return "ST-SPEC-1"


def _differs_only_in(key: str, actual, expected: dict) -> bool:
    return isinstance(actual, dict) and actual == {**expected, key: actual.get(key)}


# Each case cites what it checks: a dim that is no int (ST-SPEC-7, a TypeError: ERR-2), or no
# placements (ST-SPEC-8, a ValueError: ERR-1).
_NOT_AN_INT = pytest.mark.rules("ST-SPEC-7", "ERR-2")
_NO_PLACEMENTS = pytest.mark.rules("ST-SPEC-8", "ERR-1")


@pytest.mark.parametrize(
    ("dim", "placements"),
    [
        pytest.param(0.0, ["rank:0/cpu"], marks=_NOT_AN_INT),
        pytest.param("x", ["rank:0/cpu"], marks=_NOT_AN_INT),
        pytest.param(True, ["rank:0/cpu"], marks=_NOT_AN_INT),
        pytest.param(0, [], marks=_NO_PLACEMENTS),
        pytest.param(1, [], marks=_NO_PLACEMENTS),
    ],
)
def test_chunk_spec_needs_an_int_dim_and_placements(impl, pure, dim, placements):
    judge.requires(impl, "sharded_tensor")
    verdict = chunk_spec_verdict(dim, placements)
    judge.assert_pure_verdict(
        pure("chunk_spec_build", dim=dim, placements=placements),
        verdict,
        f"ChunkShardingSpec({dim!r}, {placements}).build_metadata((4, 4))",
    )


@st.composite
def enumerable_shards(draw):
    """Boxes of a 1-d or 2-d grid over a shape, then at most one fault (ERR-11): no shards, a
    shard of another ndim, an overlap, a gap or a box out of bounds (the last two only break
    ``build_metadata``)."""
    shape = draw(ss.shapes(min_dims=1, max_dims=2, max_side=5))
    boxes = draw(ss.grid_boxes(shape))
    shards = [ShardMeta(o, s, f"rank:{i % 3}/cpu") for i, (o, s) in enumerate(boxes)]
    fault = draw(st.sampled_from(["none", "none", "empty", "ndim", "overlap", "gap", "out"]))
    i = draw(st.integers(0, len(shards) - 1))
    if fault == "empty":
        shards = []
    elif fault == "ndim":
        shards[i] = ShardMeta((*shards[i].offsets, 0), (*shards[i].sizes, 1), "rank:0/cpu")
    elif fault == "overlap" and shards[i].volume:
        shards.append(shards[i])
    elif fault == "gap" and len(shards) > 1:
        shards.pop(i)
    elif fault == "out":
        shards[i] = ShardMeta((shards[i].offsets[0] + 1, *shards[i].offsets[1:]),
                              shards[i].sizes, shards[i].placement)  # fmt: skip
    return shape, shards


@pytest.mark.rules("ST-SPEC-11", "ST-SPEC-12", "ERR-1", "ERR-11")
@given(case=enumerable_shards())
def test_enumerable_spec_builds_exactly_the_tilings_in_the_given_order(impl, pure, case):
    judge.requires(impl, "sharded_tensor")
    shape, shards = case
    context = f"EnumerableShardingSpec({[str(s) for s in shards]}).build_metadata({shape})"
    boxes = [[list(s.offsets), list(s.sizes), s.placement] for s in shards]
    verdict = enumerable_spec_verdict(shards)
    judge.assert_pure_verdict(pure("enumerable_spec", boxes=boxes), verdict, context,
                              rule="ST-SPEC-11")  # fmt: skip
    if not verdict.ok:
        return
    verdict = build_metadata_verdict(EnumerableSpec(tuple(shards)), shape)
    built = judge.assert_pure_verdict(pure("enumerable_spec_build", boxes=boxes, shape=shape),
                                      verdict, context, rule="ST-SPEC-12")  # fmt: skip
    if verdict.ok:
        _assert_built_as_given(built, shape, context)


def _assert_built_as_given(built: dict, shape: list[int], context: str) -> None:
    """``build_metadata`` keeps the spec's shards in order, the size and the properties."""
    judge.assert_equal("shards_metadata is the spec's", built["shards_as_given"], True,
                       f"{context}: {built['shards']}", rule="ST-SPEC-12")  # fmt: skip
    judge.assert_equal("size", built["size"], list(shape), context, rule="ST-SPEC-12")
    judge.assert_equal("tensor_properties are the ones given", built["properties_as_given"], True,
                       context, rule="ST-SPEC-12")  # fmt: skip


@st.composite
def rankless_specs(draw, world_sizes: list[int]):
    """A grid of boxes tiling a 1-d or 2-d shape, placed on ranks of the world, then some of them
    (one at least) placed on a bare device (``"cpu"``) or on a worker (``"worker0/cpu"``), one
    of the two per case (ERR-11)."""
    world_size = draw(st.sampled_from(world_sizes))
    shape = draw(ss.shapes(min_dims=1, max_dims=2, max_side=5))
    boxes = draw(ss.grid_boxes(shape))
    rankless = draw(st.sampled_from(["cpu", "worker0/cpu"]))
    chosen = draw(st.sets(st.integers(0, len(boxes) - 1), min_size=1))
    return (
        world_size,
        shape,
        [
            [list(o), list(s), rankless if i in chosen else i % world_size]
            for i, (o, s) in enumerate(boxes)
        ],
    )


@pytest.mark.rules("ST-SPEC-12", "ST-VALID-13", "ERR-6")
@given(data=st.data())
def test_a_spec_whose_placements_name_no_rank_builds_metadata_but_no_tensor(
    impl, pure, available_world_sizes, run_case, data
):
    """``build_metadata`` checks no placements (ST-SPEC-12); ``zeros`` of that spec raises on
    every rank: ValueError for a bare device, NotImplementedError (or a tensor, where worker
    names are supported) for a worker (ST-VALID-13)."""
    judge.requires(impl, "sharded_tensor")
    world_size, shape, boxes = data.draw(rankless_specs(available_world_sizes))
    placed = [[o, s, p if isinstance(p, str) else f"rank:{p}/cpu"] for o, s, p in boxes]
    shards = tuple(ShardMeta(tuple(o), tuple(s), p) for o, s, p in placed)
    context = f"EnumerableShardingSpec({[str(s) for s in shards]}).build_metadata({shape})"
    verdict = build_metadata_verdict(EnumerableSpec(shards), shape)
    built = judge.assert_pure_verdict(pure("enumerable_spec_build", boxes=placed, shape=shape),
                                      verdict, context, rule="ST-SPEC-12")  # fmt: skip
    _assert_built_as_given(built, shape, context)
    group = list(range(world_size))
    options = {"dtype": None, "requires_grad": False}
    args = {"fill": "zeros", "spec_by_rank": [{"boxes": boxes}] * world_size,
            "size_by_rank": [shape] * world_size, "options_by_rank": [options] * world_size,
            "as_sequence": False}  # fmt: skip
    result = run_case("sharded_tensor:create_checked", world_size, **args)
    verdict = create_verdict(dict.fromkeys(group, EnumerableSpec(shards)),
                             dict.fromkeys(group, shape), dict.fromkeys(group, options),
                             group)  # fmt: skip
    judge.assert_collective_verdict(result, verdict)
