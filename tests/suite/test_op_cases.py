"""What the op draws line up (conformance/ops/anatomy.py, layouts.py, cases.py): correlations
read from each sample and its schema, the classes of a layout, and the per-op cover that holds
every pair of them."""

from __future__ import annotations

import pytest

from conformance import covering
from conformance.ops import anatomy, cases, catalogue, layouts

CLAIMS = frozenset({"partial:sum", "partial:avg", "partial:max", "partial:min", "strided_shard"})


@pytest.fixture(scope="module", autouse=True)
def _op_db():
    catalogue.load()


def _first(op: str, shapes: list[tuple[int, ...]], dtype: str = "float32") -> int:
    """The index of the op's first sample whose tensors have ``shapes``."""
    for i, sample in enumerate(catalogue.samples(op, dtype)):
        if [tuple(t.shape) for t in sample.tensors()] == shapes:
            return i
    raise LookupError(f"{op}: no sample of shapes {shapes}")


def test_a_contraction_is_a_pair_of_equal_dims_and_each_side_is_linear_alone():
    index = _first("mm", [(5, 10), (10, 5)])
    body = anatomy.of("mm", "float32", index)
    assert ((0, 1), (1, 0)) in body.equal_dims  # a's columns against b's rows
    assert (0,) in body.linear
    assert (1,) in body.linear
    assert (0, 1) not in body.linear  # a product is not linear in both sides at once


def test_a_sum_is_linear_in_its_operands_together_and_in_neither_alone():
    index = _first("add", [(5, 5), (5, 5)])
    assert anatomy.of("add", "float32", index).linear == ((0, 1),)


def test_an_op_that_takes_a_maximum_is_linear_in_nothing():
    for op in ("clamp", "max/binary", "nn.functional.relu"):
        for i in range(len(catalogue.samples(op, "float32"))):
            assert anatomy.of(op, "float32", i).linear == (), (op, i)


def test_the_dims_a_call_names_are_read_from_the_schemas_it_reaches():
    sample = catalogue.samples("index_select", "float32")
    for i, s in enumerate(sample):
        x = s.tensors()[0]
        if x.dim():
            dim = s.args[1] % x.dim()
            assert (0, dim) in anatomy.of("index_select", "float32", i).named_dims
    softmax = catalogue.samples("softmax", "float32")
    for i, s in enumerate(softmax):
        if s.tensors()[0].dim():
            dim = s.args[1] % s.tensors()[0].dim()
            assert anatomy.of("softmax", "float32", i).named_dims == ((0, dim),)
    assert anatomy.of("mm", "float32", 0).named_dims == ()  # a matrix product names no dim


def test_number_forms_are_what_the_single_device_call_takes():
    index = _first("add", [(5, 5), (5, 5)])
    forms = anatomy.number_forms("add", "float32", index, "plain")
    assert forms[0] == ()  # the first argument stays a DTensor
    assert set(forms[1]) == {"int", "float", "bool", "0-d"}
    sub = anatomy.number_forms("sub", "float32", _first("sub", [(5, 5), (5, 5)]), "plain")
    assert "bool" not in sub[1]  # torch.sub refuses a bool operand
    for i in range(len(catalogue.samples("index_select", "float32"))):
        forms = anatomy.number_forms("index_select", "float32", i, "plain")
        assert not {"int", "float", "bool"} & set(forms[1])  # an index is a tensor


def test_a_number_the_op_reads_as_a_dim_is_no_value_a_0_d_dtensor_stands_for():
    """``torch.max(x, 1)`` reduces over dim 1 where ``torch.max(x, tensor(1))`` is elementwise:
    DT-OP-12's twin with a 0-d R DTensor would be another op."""
    index = _first("max/binary", [(), ()])
    assert "int" in anatomy.number_forms("max/binary", "float32", index, "plain")[1]
    assert not anatomy.reads_as_a_value("max/binary", "float32", index, "plain", 1, "int")
    add = _first("add", [(5, 5), (5, 5)])
    assert anatomy.reads_as_a_value("add", "float32", add, "plain", 1, "int")


def test_a_number_form_stands_for_the_first_element():
    sample = catalogue.samples("add", "int64")[_first("add", [(5, 5), (5, 5)], "int64")]
    y = sample.tensors()[1]
    forms = catalogue.arguments(sample, [None, "float"])
    assert forms[1] == float(y.reshape(-1)[0])
    assert isinstance(forms[1], float)
    assert catalogue.arguments(sample, [None, "0-d"])[1].shape == ()
    first = sample.tensors()[0].reshape(-1)[0]
    assert catalogue.as_scalar(sample.tensors()[0], "bool") is bool(first)


@pytest.mark.parametrize(
    ("shape", "texts", "mesh", "expected"),
    [
        ((4, 6), ["R", "R"], [2, 2], {"R"}),
        ((4, 6), ["S(0)", "R"], [2, 2], {"S even"}),
        ((5, 6), ["S(0)", "R"], [2, 2], {"S uneven"}),
        ((1, 6), ["S(0)", "R"], [2, 2], {"S with an empty shard"}),
        ((4, 6), ["S(0)", "P(max)"], [2, 2], {"S even", "P(max)"}),
        ((4, 6), ["P(sum)", "S(1)"], [1, 2], {"S even"}),  # a P over one coordinate is none
        ((0, 6), ["P(sum)"], [2], {"R"}),  # nor a P of no elements
        ((4, 8), ["_S(1, 2)", "S(1)"], [2, 2], {"S even", "_S as FSDP with TP"}),
        ((4, 12), ["_S(1, 3)", "S(1)"], [2, 2], {"S even"}),  # a split factor FSDP never makes
    ],
)
def test_a_layout_class_describes_the_mesh_dims_of_several_coordinates(
    shape, texts, mesh, expected
):
    assert layouts.classes(shape, texts, mesh) == expected


def test_correlations_are_read_from_the_placements_whatever_drew_them():
    mm = anatomy.of("mm", "float32", _first("mm", [(5, 10), (10, 5)]))
    assert layouts.correlations(mm, [["S(1)"], ["S(0)"]], [2]) == {"equal dims sharded alike"}
    assert layouts.correlations(mm, [["S(1)"], ["S(0)"]], [1]) == {"drawn apart"}
    assert layouts.correlations(mm, [["P(sum)"], ["R"]], [2]) == {
        "a partial into an input the op is linear in"
    }
    softmax = anatomy.of("softmax", "float32", _first("softmax", [(5, 5)]))
    (_, dim), *_ = softmax.named_dims
    named = ["R", "R"]
    named[0] = f"S({dim - 2})"  # a negative dim names the same dim
    assert "a dim the call names sharded" in layouts.correlations(softmax, [named[:1]], [2])


def test_every_class_a_cover_example_holds_is_one_its_case_gives():
    cover = cases.cover("mm", "plain", (1, 2, 3, 4), CLAIMS)
    held = set()
    for _, case, labels in cover.examples:
        assert labels == frozenset(cases.labels("mm", case))
        held |= covering.drawn([labels])
    assert cover.held <= held
    assert cover.held <= cover.offered


def test_the_cover_holds_a_contraction_sharded_on_both_sides_with_every_layout_class():
    cover = cases.cover("mm", "plain", (1, 2, 3, 4), CLAIMS)
    for c in layouts.CLASSES:
        if c != "R":  # a contraction shards both sides
            assert covering.pair(f"op arg 0: {c}", "op layouts: equal dims sharded alike") in (
                cover.held
            ), c
    assert covering.pair("op arg 0: P(sum)", "op arg 1: S uneven") in cover.held


def test_the_cover_holds_each_number_against_each_partial():
    cover = cases.cover("add", "plain", (1, 2, 3, 4), CLAIMS)
    for number in layouts.NUMBERS.values():
        for kind in ("sum", "avg", "max", "min"):
            assert covering.pair(f"op numbers: {number}", f"op arg 0: P({kind})") in cover.held


def test_a_cover_is_the_same_every_time_it_is_built():
    first = cases.cover("where", "plain", (1, 2, 4), CLAIMS)
    cases.situations.cache_clear()
    again = cases.cover("where", "plain", (1, 2, 4), CLAIMS)
    assert first == again


def test_without_a_claim_the_cover_asks_for_none_of_its_classes():
    cover = cases.cover("add", "plain", (1, 2, 3, 4), frozenset({"partial:sum"}))
    labels = set().union(*(labels for _, _, labels in cover.examples))
    assert not {label for label in labels if "P(max)" in label or "_S as FSDP" in label}
    assert "op arg 0: P(sum)" in labels


def test_each_pair_is_offered_only_by_the_families_it_pairs():
    families = cases.families("where", "plain")
    assert families == ["op arg 0", "op arg 1", "op arg 2", "op layouts", "op numbers", "mesh"]
    paired = cases.paired(families)
    assert ("op numbers", "op arg 0") in paired
    assert ("op layouts", "mesh") not in paired
    assert cases.families("neg", "plain") == ["op arg 0", "op layouts", "mesh"]
