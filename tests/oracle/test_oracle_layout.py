"""The oracle's DT layout, mesh and placement verdicts against the worked examples of
spec/dt-layout.md, dt-mesh.md and dt-placements.md, and against torch as an independent model."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance.oracle.layout import (
    index_sequences,
    local_shape_and_offset,
    local_tensor,
    put,
    take,
)
from conformance.oracle.mesh import coordinate, coordinates, dim_group, mesh_verdict, rank_at
from conformance.oracle.placements import construction_verdict, normalize, placements_verdict
from conformance.oracle.tensors import make_global
from conformance.oracle.vocabulary import VALID, value_error
from conformance.vocabulary import Mesh, Replicate, Shard, StridedShard, parse_placements


def layout(shape, mesh_shape, texts):
    ps = parse_placements(texts)
    return {c: local_shape_and_offset(shape, mesh_shape, ps, c) for c in coordinates(mesh_shape)}


def arange_locals(length, mesh_shape, texts):
    ps = parse_placements(texts)
    g = torch.arange(length)
    return {c: local_tensor(g, mesh_shape, ps, c).tolist() for c in coordinates(mesh_shape)}


@pytest.mark.rules("DT-LAYOUT-1", "DT-LAYOUT-6")
def test_two_tensor_dims_two_mesh_dims():
    assert layout((5, 3), (2, 2), ["S(0)", "S(1)"]) == {
        (0, 0): ((3, 2), (0, 0)),
        (0, 1): ((3, 1), (0, 2)),
        (1, 0): ((2, 2), (3, 0)),
        (1, 1): ((2, 1), (3, 2)),
    }


@pytest.mark.rules("DT-LAYOUT-2", "DT-LAYOUT-3", "DT-LAYOUT-4")
@pytest.mark.parametrize(
    ("length", "sizes", "offsets"),
    [
        (5, [2, 2, 1, 0], [0, 2, 4, 5]),
        (8, [2, 2, 2, 2], [0, 2, 4, 6]),
        (6, [2, 2, 2, 0], None),
        (10, [3, 3, 3, 1], None),
        (2, [1, 1, 0, 0], [0, 1, 2, 2]),
    ],
)
def test_chunk_rule_on_four(length, sizes, offsets):
    got = layout((length,), (4,), ["S(0)"])
    assert [got[(c,)][0][0] for c in range(4)] == sizes
    if offsets:
        assert [got[(c,)][1][0] for c in range(4)] == offsets


@pytest.mark.rules("DT-LAYOUT-4", "DT-LAYOUT-10")
def test_empty_offsets():
    assert layout((3,), (2, 2), ["S(0)", "S(0)"])[(1, 1)] == ((0,), (3,))
    assert layout((0,), (2,), ["S(0)"]) == {(0,): ((0,), (0,)), (1,): ((0,), (0,))}
    assert set(layout((0, 3), (4,), ["S(0)"]).values()) == {((0, 3), (0, 0))}
    assert layout((1,), (2,), ["S(0)"]) == {(0,): ((1,), (0,)), (1,): ((0,), (1,))}


@pytest.mark.rules("DT-LAYOUT-5")
def test_replicate_and_partial_do_not_shard():
    got = layout((5, 3), (2, 2), ["R", "S(0)"])
    assert got[(0, 0)] == got[(1, 0)] == ((3, 3), (0, 0))
    assert got[(0, 1)] == got[(1, 1)] == ((2, 3), (3, 0))
    assert set(layout((5, 3), (2, 2), ["P(sum)", "R"]).values()) == {((5, 3), (0, 0))}


@pytest.mark.rules("DT-LAYOUT-7")
def test_nesting_left_to_right():
    assert arange_locals(3, (2, 2), ["S(0)", "S(0)"]) == {
        (0, 0): [0],
        (0, 1): [1],
        (1, 0): [2],
        (1, 1): [],
    }
    assert arange_locals(5, (2, 2), ["S(0)", "S(0)"]) == {
        (0, 0): [0, 1],
        (0, 1): [2],
        (1, 0): [3],
        (1, 1): [4],
    }
    got = layout((3,), (2, 3), ["S(0)", "S(0)"])
    assert [(got[c][0][0], got[c][1][0]) for c in coordinates((2, 3))] == [
        (1, 0),
        (1, 1),
        (0, 3),
        (1, 2),
        (0, 3),
        (0, 3),
    ]


@pytest.mark.rules("DT-LAYOUT-8", "DT-PLACE-12")
def test_strided_shards():
    assert arange_locals(8, (2, 2), ["_S(0, 2)", "S(0)"]) == {
        (0, 0): [0, 1],
        (0, 1): [4, 5],
        (1, 0): [2, 3],
        (1, 1): [6, 7],
    }
    assert arange_locals(3, (2, 2), ["_S(0, 2)", "S(0)"]) == {
        (0, 0): [0],
        (0, 1): [2],
        (1, 0): [1],
        (1, 1): [],
    }
    assert layout((3,), (2, 2), ["_S(0, 2)", "S(0)"])[(1, 1)] == ((0,), (3,))
    assert arange_locals(5, (2,), ["_S(0, 2)"]) == {(0,): [0, 1, 3], (1,): [2, 4]}
    assert arange_locals(7, (3, 2), ["_S(0, 2)", "S(0)"])[(2, 0)] == [6]


@pytest.mark.rules("DT-LAYOUT-9")
def test_zero_d():
    assert layout((), (2,), ["R"]) == {(0,): ((), ()), (1,): ((), ())}
    x = torch.tensor(3.0)
    assert torch.equal(local_tensor(x, (2,), parse_placements(["R"]), (1,)), x)


@pytest.mark.rules("DT-LAYOUT-12", "DT-PLACE-10")
def test_local_tensors():
    g = torch.arange(6.0).reshape(2, 3)
    ps = parse_placements(["S(1)", "R"])
    assert local_tensor(g, (2, 2), ps, (0, 1)).tolist() == [[0.0, 1.0], [3.0, 4.0]]
    assert local_tensor(g, (2, 2), ps, (1, 0)).tolist() == [[2.0], [5.0]]
    assert arange_locals(5, (2, 2), ["R", "S(0)"]) == {
        (0, 0): [0, 1, 2],
        (0, 1): [3, 4],
        (1, 0): [0, 1, 2],
        (1, 1): [3, 4],
    }


placement_texts = st.sampled_from(["R", "P(sum)", "S(0)", "S(1)", "S(-1)", "_S(0, 2)", "_S(1, 3)"])


@st.composite
def layouts(draw):
    shape = tuple(draw(st.lists(st.integers(0, 7), min_size=2, max_size=2)))
    mesh_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    texts = draw(st.lists(placement_texts, min_size=len(mesh_shape), max_size=len(mesh_shape)))
    return shape, mesh_shape, parse_placements(texts)


@pytest.mark.rules("DT-LAYOUT-11", "DT-LAYOUT-12")
@given(layouts(), st.integers(0, 100))
def test_shards_partition_and_reassemble(case, seed):
    """Every element is held by exactly one group of sharding coordinates, and writing every
    local tensor back gives the global tensor (a per-element count with torch)."""
    shape, mesh_shape, ps = case
    g = make_global(shape, "float64", seed)
    count = torch.zeros(shape, dtype=torch.int64)
    out = torch.full(shape, float("nan"), dtype=torch.float64)
    sharding = [i for i, p in enumerate(ps) if isinstance(p, Shard | StridedShard)]
    for c in coordinates(mesh_shape):
        seqs = index_sequences(shape, mesh_shape, ps, c)
        if all(c[i] == 0 for i in range(len(c)) if i not in sharding):
            put(count, seqs, take(count, seqs) + 1)
        put(out, seqs, local_tensor(g, mesh_shape, ps, c))
    assert torch.equal(count, torch.ones(shape, dtype=torch.int64))
    assert torch.equal(out, g)


@pytest.mark.rules("DT-LAYOUT-2")
@given(st.lists(st.integers(0, 9), min_size=1, max_size=3), st.integers(1, 5), st.data())
def test_one_shard_dim_is_torch_chunk(shape, k, data):
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    g = make_global(shape, "int64", 1)
    ps = (Shard(d),)
    locals_ = [local_tensor(g, (k,), ps, (c,)) for c in range(k)]
    nonempty = [t for t in locals_ if t.shape[d]]
    chunks = [t for t in torch.chunk(g, k, d) if t.shape[d]]
    assert len(nonempty) == len(chunks)
    assert all(torch.equal(a, b) for a, b in zip(nonempty, chunks, strict=True))
    assert sum(t.shape[d] for t in locals_) == shape[d]


@pytest.mark.rules("DT-MESH-1", "DT-MESH-6", "DT-MESH-7")
def test_coordinates_and_groups():
    mesh = Mesh((2, 2), (3, 1, 0, 2))
    assert math.prod(mesh.shape) == 4
    assert mesh.nested() == [[3, 1], [0, 2]]
    assert [coordinate(mesh, r) for r in range(4)] == [(1, 0), (0, 1), (1, 1), (0, 0)]
    assert coordinate(Mesh((2,), (0, 1)), 3) is None
    rows = {
        r: (dim_group(mesh, coordinate(mesh, r), 0), dim_group(mesh, coordinate(mesh, r), 1))
        for r in range(4)
    }
    assert rows == {
        0: ((3, 0), (0, 2)),
        1: ((1, 2), (3, 1)),
        2: ((1, 2), (0, 2)),
        3: ((3, 0), (3, 1)),
    }
    assert all(rank_at(mesh, coordinate(mesh, r)) == r for r in range(4))


@pytest.mark.rules("DT-MESH-2", "DT-MESH-3", "DT-MESH-4", "DT-MESH-5")
@pytest.mark.parametrize(
    ("shape", "ranks", "names", "rule"),
    [
        ((2, 2), (0, 1, 2, 3), ("dp", "tp"), None),
        ((4,), (0, 0, 1, 2), None, "DT-MESH-2"),
        ((4,), (0, 1, 2, 5), None, "DT-MESH-3"),
        ((3,), (0, 1, -1), None, "DT-MESH-3"),
        ((5,), (0, 1, 2, 3, 4), None, "DT-MESH-3"),
        ((0,), (), None, "DT-MESH-4"),
        ((0, 2), (), None, "DT-MESH-4"),
        ((), (0,), None, "DT-MESH-4"),
        ((2, 2), (0, 1, 2, 3), ("a", "a"), "DT-MESH-5"),
        ((2, 2), (0, 1, 2, 3), ("a",), "DT-MESH-5"),
    ],
)
def test_mesh_verdicts(shape, ranks, names, rule):
    expected = VALID if rule is None else value_error(rule)
    assert mesh_verdict(Mesh(shape, ranks), 4, names) == expected


@pytest.mark.rules("DT-PLACE-1", "DT-PLACE-3", "DT-PLACE-5", "DT-PLACE-6", "DT-PLACE-7")
@pytest.mark.parametrize(
    ("texts", "mesh_ndim", "ndim", "rule"),
    [
        (["S(0)", "R"], 1, 1, "DT-PLACE-1"),
        (["S(1)"], 1, 1, "DT-PLACE-3"),
        (["S(-2)"], 1, 1, "DT-PLACE-3"),
        (["S(0)"], 1, 0, "DT-PLACE-3"),
        (["P(foo)"], 1, 1, "DT-PLACE-5"),
        (["P(sum)", "P(max)"], 2, 1, "DT-PLACE-6"),
        (["P(sum)", "P(sum)"], 2, 1, None),
        (["_S(0, 0)"], 1, 1, "DT-PLACE-7"),
        (["_S(0, -1)"], 1, 1, "DT-PLACE-7"),
        (["_S(0, 2)", "S(-1)"], 2, 1, None),
        (["R"], 1, 0, None),
    ],
)
def test_placement_verdicts(texts, mesh_ndim, ndim, rule):
    expected = VALID if rule is None else value_error(rule)
    assert placements_verdict(parse_placements(texts), mesh_ndim, ndim) == expected


@pytest.mark.rules("DT-PLACE-4", "DT-PLACE-5", "DT-PLACE-7")
def test_construction_verdicts():
    assert construction_verdict("Shard", 1.5).error == "TypeError"
    assert construction_verdict("Partial", 3).error == "TypeError"
    assert construction_verdict("Shard", True).error == "TypeError"
    assert construction_verdict("Partial").ok
    assert construction_verdict("Partial", "max").ok
    assert construction_verdict("Partial", "foo") == value_error("DT-PLACE-5")
    assert construction_verdict("_StridedShard", 0, 0) == value_error("DT-PLACE-7")
    assert construction_verdict("_StridedShard", 0, 2).ok
    assert construction_verdict("Replicate").ok


@pytest.mark.rules("DT-PLACE-2")
def test_normalisation():
    assert normalize(parse_placements(["S(-1)", "_S(-2, 2)", "R"]), 2) == (
        Shard(1),
        StridedShard(0, 2),
        Replicate(),
    )
