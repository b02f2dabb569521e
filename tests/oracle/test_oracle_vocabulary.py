"""The oracle's vocabulary and global tensors against spec/vocabulary.md and DT-PLACE-8/9."""

import itertools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance.oracle.tensors import laid_out, make_global
from conformance.oracle.vocabulary import ceil_div, chunk_bounds
from conformance.vocabulary import (
    Mesh,
    Partial,
    Replicate,
    Shard,
    StridedShard,
    parse_placement,
    parse_placements,
)


@pytest.mark.parametrize(
    ("length", "k", "lengths", "starts"),
    [
        (8, 4, [2, 2, 2, 2], [0, 2, 4, 6]),
        (5, 4, [2, 2, 1, 0], [0, 2, 4, 5]),
        (6, 4, [2, 2, 2, 0], [0, 2, 4, 6]),
        (7, 3, [3, 3, 1], [0, 3, 6]),
        (2, 4, [1, 1, 0, 0], [0, 1, 2, 2]),
        (0, 3, [0, 0, 0], [0, 0, 0]),
    ],
)
def test_chunk_bounds_table(length, k, lengths, starts):
    bounds = [chunk_bounds(length, k, c) for c in range(k)]
    assert [hi - lo for lo, hi in bounds] == lengths
    assert [lo for lo, _ in bounds] == starts


@given(st.integers(0, 40), st.integers(1, 9))
def test_chunk_bounds_is_torch_chunk(length, k):
    """torch.chunk is the independent model (vocabulary.md): it returns the first
    ``ceil_div(L, cs)`` chunks, the non-empty ones, for ``L > 0``, and all ``k`` empty chunks for
    ``L = 0``; the chunks it leaves out are empty."""
    bounds = [chunk_bounds(length, k, c) for c in range(k)]
    chunks = [c.tolist() for c in torch.chunk(torch.arange(length), k)]
    cs = ceil_div(length, k)
    count = k if length == 0 else ceil_div(length, cs)
    assert [list(range(lo, hi)) for lo, hi in bounds[:count]] == chunks
    assert all(lo == hi == length for lo, hi in bounds[count:])
    assert bounds[0][0] == 0
    assert bounds[-1][1] == length
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))


@pytest.mark.rules("DT-PLACE-9")
@pytest.mark.parametrize(
    ("text", "placement"),
    [
        ("S(1)", Shard(1)),
        ("S(-1)", Shard(-1)),
        ("R", Replicate()),
        ("P(sum)", Partial()),
        ("P(avg)", Partial("avg")),
        ("_S(0, 2)", StridedShard(0, 2)),
    ],
)
def test_short_notation_round_trip(text, placement):
    assert parse_placement(text) == placement
    assert str(placement) == text


def test_strided_shard_parses_without_space():
    assert parse_placement("_S(0,2)") == StridedShard(0, 2)


@pytest.mark.parametrize("text", ["", "S", "S(x)", "Shard(0)", "r", "P()", "_S(0)", "S(١)"])
def test_malformed_placements_are_rejected(text):
    with pytest.raises(ValueError, match="DT-PLACE-9"):
        parse_placement(text)


@pytest.mark.rules("DT-PLACE-8")
def test_placement_equality_and_hashing():
    assert Shard(-1) != Shard(1)
    assert Shard(0) != StridedShard(0, 1)
    assert Partial() == Partial("sum") != Partial("avg")
    texts = ["S(0)", "S(0)", "R", "R", "P(sum)", "_S(0, 2)", "_S(0, 2)"]
    assert len({*parse_placements(texts), Partial()}) == 4


def test_mesh_json_round_trip_and_nesting():
    mesh = Mesh.from_json({"shape": [2, 2], "ranks": [3, 1, 0, 2]})
    assert Mesh.from_json(mesh.to_json()) == mesh
    assert mesh.nested() == [[3, 1], [0, 2]]
    with pytest.raises(ValueError, match="needs 4 ranks"):
        Mesh((2, 2), (0, 1, 2))


@pytest.mark.rules("ERR-10")
@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_global_values_do_not_survive_float32(dtype):
    x = make_global((3, 4), dtype, seed=5)
    assert x.dtype == getattr(torch, dtype)
    assert not (x.to(torch.float32).to(x.dtype) == x).any()


@given(
    st.lists(st.integers(0, 4), max_size=3),
    st.sampled_from(["float32", "float64", "int64", "bool"]),
    st.integers(0, 2**40),
)
def test_make_global_is_deterministic(shape, dtype, seed):
    a, b = make_global(shape, dtype, seed), make_global(tuple(shape), dtype, seed)
    assert a.shape == tuple(shape)
    assert a.is_contiguous()
    assert torch.equal(a, b)


def test_make_global_golden():
    """The recipe is part of the fixture format: other languages rebuild these values."""
    assert make_global((3,), "float32", 0).tolist() == [3.0, 201.25, 111.0]
    assert make_global((), "int64", 1).item() == make_global((1,), "int64", 1).item()


@pytest.mark.parametrize(
    ("memory", "shape", "stride"),
    [
        ("contiguous", [2, 3], (3, 1)),
        ("transposed", [2, 3], (1, 2)),
        ("transposed", [2, 3, 4], (1, 2, 6)),
        ("strided", [2, 3], (6, 2)),
        ("strided", [5], (2,)),
        ("transposed", [], ()),
    ],
)
def test_an_input_laid_out_keeps_its_values_in_another_memory_layout(memory, shape, stride):
    value = make_global(shape, "float64", 7)
    view = laid_out(value, memory)
    assert torch.equal(view, value)
    assert view.stride() == stride
    assert view.is_contiguous() == (memory == "contiguous" or not shape)
