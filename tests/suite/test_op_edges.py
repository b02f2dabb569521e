"""The edge classes of an op's tensor argument (``edges.op_input``): what the per-op test counts
and ``--require-edges`` demands over the core ops."""

from __future__ import annotations

from conformance import edges


def _classes_of(*args) -> set[str]:
    edges.clear()
    edges.op_input(*args)
    drawn = set(edges.DRAWN)
    edges.clear()
    return drawn


def test_an_op_input_counts_its_placement_kinds_and_the_chunks_they_cut():
    assert _classes_of((5, 3), "float32", ["S(-2)", "P(avg)"], [4, 2]) == {
        "op input: S",
        "op input: S of a negative dim",
        "op input: P(avg)",
        "chunks: uneven",
        "chunks: an empty chunk of a non-empty tensor",
    }
    assert _classes_of((4, 2), "int64", ["_S(0, 2)", "R"], [2, 2]) == {
        "op input: _S",
        "op input: R",
        "tensor: int64",
    }


def test_an_op_input_counts_its_tensors_classes():
    assert _classes_of((), "float64", ["R", "P(min)"], [2, 3]) == {
        "op input: R",
        "op input: P(min)",
        "tensor: 0-d",
        "tensor: fewer elements than shards",
        "tensor: float64",
    }
    # A P over one coordinate, or of no elements, has one part, the value: no P class.
    assert "op input: P(min)" not in _classes_of((), "float64", ["R", "P(min)"], [2, 1])
    assert "op input: P(sum)" not in _classes_of((0,), "float64", ["P(sum)"], [2])
    assert _classes_of((0, 3), "float64", ["S(1)"], [4]) == {
        "op input: S",
        "tensor: a zero-length dim",
        "tensor: fewer elements than shards",
        "chunks: uneven",
    }


def test_every_class_of_the_op_inputs_family_is_an_edge_class_something_counts():
    counted = set()
    for shape, dtype, texts, mesh in [
        ((5, 3), "float32", ["S(-2)", "P(avg)"], [4, 2]),
        ((4, 2), "int64", ["_S(0, 2)", "R"], [2, 2]),
        ((), "float64", ["P(sum)", "P(max)", "P(min)"], [2, 1, 2]),
        ((), "float64", ["P(max)"], [3]),
        ((0, 3), "float64", ["S(1)"], [4]),
    ]:
        counted |= _classes_of(shape, dtype, texts, mesh)
    edges.clear()
    edges.mesh([2], [1, 0], 2)
    edges.mesh([1, 2, 1], [0, 1], 2)
    edges.mesh([1, 2], [0, 1], 2)
    edges.mesh([2, 1], [0, 1], 2)
    counted |= set(edges.DRAWN)
    edges.clear()
    assert counted == set(edges.FAMILIES["op inputs"])
