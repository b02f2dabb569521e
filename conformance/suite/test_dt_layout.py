"""spec/dt-layout.md: the local shape and global offset of every coordinate (pure: each call runs
in the sandbox)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge
from conformance import strategies as ss
from conformance.oracle import layout as oracle
from conformance.vocabulary import Shard, parse_placements


@st.composite
def layouts(draw, strided: bool):
    shape = draw(ss.shapes())
    mesh_shape, _ = draw(ss.meshes(world_size=8))
    placements = draw(ss.placements(len(mesh_shape), len(shape), partial=True, strided=strided))
    return shape, mesh_shape, placements


def check_every_coordinate(pure_each, shape, mesh_shape, placements, rule: str | None) -> None:
    """Every coordinate's local shape and offset, as the oracle computes them (one trip to the
    sandbox); a difference blames ``rule``, or where it is ``None`` the rule the case exercises
    (``_layout_rule``)."""
    parsed = parse_placements(placements)
    size = math.prod(mesh_shape)
    edges.mesh(mesh_shape, list(range(size)), size)
    edges.note(*_classes(shape, mesh_shape, parsed))
    coordinates = list(itertools.product(*(range(n) for n in mesh_shape)))
    calls = [{"shape": shape, "mesh_shape": mesh_shape, "placements": placements,
              "coordinate": list(c)} for c in coordinates]  # fmt: skip

    def check(coordinate, result):
        context = f"shape={shape}, mesh={mesh_shape}, {placements}, coordinate={coordinate}"
        expected = oracle.local_shape_and_offset(shape, mesh_shape, parsed, coordinate)
        blamed = rule or _layout_rule(shape, parsed, expected, None)
        actual = tuple(map(tuple, judge.pure_value(result, context, rule=blamed)))
        blamed = rule or _layout_rule(shape, parsed, expected, actual)
        judge.assert_equal("(local_shape, offset)", actual, expected, context, rule=blamed)

    judge.each(zip(coordinates, pure_each("local_shape_and_offset", calls), strict=True), check)


def _classes(shape, mesh_shape, parsed) -> list[str]:
    """The edge classes of a DTensor layout's placements (its mesh's are ``edges.mesh``)."""
    found = []
    shards = [p for p in parsed if isinstance(p, Shard)]
    if not shards:
        found.append("placements: none shards")
    if any(p.dim < 0 for p in shards):
        found.append("placements: a negative dim")
    if shape and len({p.dim % len(shape) for p in shards}) < len(shards):
        found.append("placements: mesh dims nested on one tensor dim")
    if math.prod(shape) < math.prod(mesh_shape):
        found.append("tensor: fewer elements than shards")
    return found


def _layout_rule(shape, parsed, expected, actual) -> str:
    """The rule of dt-layout.md a coordinate's layout rests on: 0-d tensors (DT-LAYOUT-9), no
    shard (DT-LAYOUT-5), mesh dims nested on one tensor dim (DT-LAYOUT-7), an empty chunk's size
    (DT-LAYOUT-3) or offset (DT-LAYOUT-4), else the chunk rule (DT-LAYOUT-2)."""
    if not shape:
        return "DT-LAYOUT-9"
    dims = [p.dim % len(shape) for p in parsed if isinstance(p, Shard)]
    if not dims:
        return "DT-LAYOUT-5"
    if len(set(dims)) < len(dims):
        return "DT-LAYOUT-7"
    if 0 in expected[0] and not any(n == 0 for n in shape):
        return "DT-LAYOUT-4" if actual is not None and actual[0] == expected[0] else "DT-LAYOUT-3"
    return "DT-LAYOUT-2"


@pytest.mark.rules(
    "DT-LAYOUT-1", "DT-LAYOUT-2", "DT-LAYOUT-3", "DT-LAYOUT-4", "DT-LAYOUT-5",
    "DT-LAYOUT-6", "DT-LAYOUT-7", "DT-LAYOUT-9", "DT-LAYOUT-10", "DT-PLACE-2",
)  # fmt: skip
@pytest.mark.edges("dt layout")
@pytest.mark.volume(50)
@given(layout=layouts(strided=False))
def test_local_shape_and_offset_of_every_coordinate(impl, pure_each, layout):
    judge.requires(impl, "dtensor")
    check_every_coordinate(pure_each, *layout, rule=None)


@pytest.mark.rules("DT-LAYOUT-8", "DT-PLACE-12")
@pytest.mark.volume(50)
@given(layout=layouts(strided=True))
def test_strided_shards_in_the_nesting(impl, pure_each, layout):
    judge.requires(impl, "dtensor", "strided_shard")
    check_every_coordinate(pure_each, *layout, rule="DT-LAYOUT-8")


@pytest.mark.rules("DT-LAYOUT-2", "DT-LAYOUT-3", "DT-LAYOUT-4")
@pytest.mark.parametrize(("length", "parts"), [(5, 4), (2, 4), (0, 3), (1, 8)])
def test_trailing_coordinates_are_empty_at_the_end_of_the_dim(impl, pure, length, parts):
    judge.requires(impl, "dtensor")
    for c in range(parts):
        result = pure("local_shape_and_offset", shape=[length], mesh_shape=[parts],
                      placements=["S(0)"], coordinate=[c])  # fmt: skip
        shape, offset = judge.pure_value(result, f"L={length}, c={c}", rule="DT-LAYOUT-3")
        step = math.ceil(length / parts)
        expected = ([max(0, min(length, (c + 1) * step) - min(length, c * step))],
                    [min(length, c * step)])  # fmt: skip
        if list(shape) != expected[0]:
            rule = "DT-LAYOUT-3"  # the sizes of the chunk rule, trailing ones empty
        elif expected[0] == [0]:
            rule = "DT-LAYOUT-4"  # an empty shard sits at the end of the dim
        else:
            rule = "DT-LAYOUT-2"  # a chunk's offset
        judge.assert_equal("(local_shape, offset)", (shape, offset), expected, f"L={length}, c={c}",
                           rule=rule)  # fmt: skip
