"""The op chapter's oracle (conformance/oracle/dt_ops.py) and catalogue
(conformance/ops/catalogue.py): partial inputs that reduce exactly in every order, the value
bounds of DT-OP-2 and DT-OP-3, and samples every process regenerates alike."""

from __future__ import annotations

import functools
import itertools
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import profiles
from conformance.ops import catalogue
from conformance.oracle import dt_grad, dt_ops

REDUCE = {"sum": torch.add, "avg": torch.add, "max": torch.maximum, "min": torch.minimum}
# max and min as comparisons (std::max, Gloo's reductions): NaN survives only where it comes first
BY_COMPARISON = {"max": lambda a, b: torch.where(a < b, b, a),
                 "min": lambda a, b: torch.where(b < a, b, a)}  # fmt: skip
SPECIAL = [float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 0.5, -0.5, 2.5, 1e30, 3e-39]


@given(
    values=st.lists(st.floats(width=32) | st.sampled_from(SPECIAL), min_size=1, max_size=12),
    op=st.sampled_from(["sum", "avg", "max", "min"]),
    n=st.sampled_from([1, 2, 3, 4]),
    seed=st.integers(0, 100),
)
def test_partial_parts_reduce_to_the_value_exactly_in_every_order(values, op, n, seed):
    if op == "avg" and n == 3:
        n = 4  # avg parts are drawn over power-of-two mesh dims only
    value = torch.tensor(values, dtype=torch.float32)
    parts = dt_ops.partial_parts(value, op, n, seed)
    for order in itertools.permutations(parts):
        for reduce in (REDUCE[op], BY_COMPARISON.get(op, REDUCE[op])):
            reduced = functools.reduce(reduce, order)
            if op == "avg":
                reduced = reduced / n
            assert dt_ops.exact(reduced, value), (order, value)


@given(
    values=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=12),
    op=st.sampled_from(["sum", "max", "min"]),
    n=st.sampled_from([2, 3, 4]),
)
def test_integer_partial_parts_reduce_to_the_value(values, op, n):
    value = torch.tensor(values, dtype=torch.int64)
    parts = dt_ops.partial_parts(value, op, n, seed=7)
    assert torch.equal(functools.reduce(REDUCE[op], parts), value)


def test_partial_parts_spread_the_value_over_every_coordinate():
    """Which part holds what varies per element: no coordinate holds the whole value, so an
    implementation that reads one coordinate's part as the value is wrong somewhere."""
    value = torch.linspace(-5.3, 7.7, 64)
    for op in ("sum", "max", "min"):
        parts = dt_ops.partial_parts(value, op, 3, seed=1)
        assert not any(torch.equal(p, value) for p in parts), op


def test_elementwise_bound_is_8_ulp():
    expected = torch.tensor([1.0, -3.0, 1e-20, 0.0])
    bound = dt_ops.elementwise_bound(expected)
    eps = torch.finfo(torch.float32).eps
    inside = expected + (7 * eps * expected.abs()).clamp(min=0)
    outside = expected.double() + 9 * eps * expected.abs().double().clamp(min=1.2e-38)
    assert dt_ops.within(inside, expected, bound)
    assert not dt_ops.within(outside[:3].float(), expected[:3], bound[:3])


@settings(max_examples=200)
@given(
    values=st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=200),
    chunks=st.integers(1, 9),
)
def test_a_sum_in_any_chunking_is_within_the_bound_and_a_lost_chunk_is_not(values, chunks):
    """DT-OP-3's proof, tried: summing chunks and then their sums (what a sharded ``sum``
    does) stays within ``6 γ(n + 2) Σ|x|`` of ``torch.sum``."""
    x = torch.tensor(values, dtype=torch.float32)
    expected = x.sum()
    sharded = torch.stack([c.sum() for c in x.chunk(chunks)]).flip(0).sum()
    bound = dt_ops.sums_bound(expected, x.abs().double().sum(), x.numel())
    assert dt_ops.within(sharded, expected, bound)
    last = x.chunk(chunks)[-1]
    lost = x[: x.numel() - last.numel()].sum()
    if last.double().sum().abs() > 2 * bound:
        assert not dt_ops.within(lost, expected, bound)


def test_within_wants_infinities_and_nan_where_the_result_has_them():
    expected = torch.tensor([float("inf"), float("nan"), 1.0])
    big = torch.tensor(1e30)
    assert dt_ops.within(expected.clone(), expected, big)
    assert not dt_ops.within(torch.tensor([float("-inf"), float("nan"), 1.0]), expected, big)
    assert not dt_ops.within(torch.tensor([float("inf"), 0.0, 1.0]), expected, big)
    assert not dt_ops.within(torch.tensor([float("inf"), float("nan"), float("nan")]), expected,
                             big)  # fmt: skip


def test_reading_the_catalogue_keeps_the_runs_hypothesis_profile():
    """PyTorch's test utilities load their own Hypothesis profile when OpInfo is imported; the
    run's profile must survive it."""
    before = profiles.current_name()
    assert catalogue.known("add")
    assert profiles.current_name() == before


SAMPLE_DIGEST = """
import sys
from conformance.ops import catalogue
tensors = [t for op in sys.argv[1:] for s in catalogue.samples(op, "float32") for t in s.tensors()]
print(sum(float(t.double().abs().sum()) for t in tensors), sum(t.numel() for t in tensors))
"""


@pytest.mark.parametrize("ops", [["add", "mm", "gather", "nn.functional.embedding"]])
def test_another_process_regenerates_the_same_samples(ops):
    """The driver judges what the ranks ran: both regenerate a sample from its op, dtype and
    index, so both must get the same tensors."""
    there = subprocess.run([sys.executable, "-c", SAMPLE_DIGEST, *ops], capture_output=True,
                           text=True, check=True).stdout  # fmt: skip
    tensors = [t for op in ops for s in catalogue.samples(op, "float32") for t in s.tensors()]
    numel = sum(t.numel() for t in tensors)
    mine = f"{sum(float(t.double().abs().sum()) for t in tensors)} {numel}"
    assert there.strip() == mine


def test_an_op_that_writes_an_argument_is_not_held_to_leaving_its_inputs_unchanged():
    """DT-OP-8 is about out-of-place calls: an in-place variant and batch_norm's running
    statistics write their arguments on one device too."""
    assert catalogue.writes_its_inputs("normal/in_place")
    assert catalogue.writes_its_inputs("nn.functional.batch_norm")
    assert not catalogue.writes_its_inputs("add")
    assert not catalogue.writes_its_inputs("softmax")


def test_the_catalogue_holds_only_samples_its_op_runs_on():
    """Every kept sample has a single-device result: OpInfo's samples for error tests would
    leave a case with nothing to compare."""
    for op in ("var", "nn.functional.nll_loss", "index_select", "scatter"):
        for dtype in catalogue.dtypes(op):
            for sample in catalogue.samples(op, dtype):
                catalogue.call(op, sample)


def test_copy_is_derived_from_adds_pairs_of_tensors_its_destination_unchanged():
    """OpInfo has no ``copy_``: the catalogue's takes each ``add`` sample with two tensors, the
    second broadcast into the first, and leaves out the pairs that do not broadcast that way
    (``add`` broadcasts both ways; ``copy_`` raises on one device); out of place it writes a
    clone, in place the destination itself."""
    for dtype in catalogue.dtypes("copy_"):
        pairs = [s.tensors() for s in catalogue.samples("copy_", dtype)]
        assert pairs
        for dst, src in pairs:
            assert torch.broadcast_shapes(dst.shape, src.shape) == dst.shape
    dst, src = catalogue.samples("copy_", "float32")[3].tensors()
    before = dst.clone()
    result = catalogue.call("copy_", catalogue.samples("copy_", "float32")[3])
    assert torch.equal(result, src.expand_as(dst))
    assert torch.equal(dst, before)
    assert catalogue.in_place("copy_") is torch.Tensor.copy_
    assert catalogue.value_class("copy_") == catalogue.value_class("fill") == "exact"
    assert {"copy_", "fill"} <= set(catalogue.in_place_ops())


def test_ops_of_no_class_are_in_the_catalogue_and_have_no_value_rule():
    ops = catalogue.all_ops()
    assert set(catalogue.CORE_OPS) <= set(ops)
    assert catalogue.value_class("empty_like") is None
    assert "empty_like" in ops
    assert catalogue.value_class("softmax") == "composite"


def test_gradient_cases_are_floating_samples_a_backward_pass_runs_through():
    catalogue.load()
    assert catalogue.grad_samples("mm", "float32")
    assert catalogue.grad_samples("mm", "int64") == ()
    for op in ("argmax", "eq", "ones_like", "heaviside"):  # no gradient to judge
        assert op not in catalogue.grad_ops()
    # embedding's max_norm samples renormalise the weight in place: a leaf cannot be written
    weight_written = [i for i, s in enumerate(catalogue.samples("nn.functional.embedding",
                                                                "float32"))
                      if s.kwargs.get("max_norm") is not None]  # fmt: skip
    assert weight_written
    # sparse=True makes the weight's gradient sparse, which no DTensor layout holds
    sparse = [i for i, s in enumerate(catalogue.samples("nn.functional.embedding", "float32"))
              if s.kwargs.get("sparse")]  # fmt: skip
    assert sparse
    assert not set(sparse) & set(catalogue.grad_samples("nn.functional.embedding", "float32"))
    assert not set(weight_written) & set(catalogue.grad_samples("nn.functional.embedding",
                                                                "float32"))  # fmt: skip


def test_the_gradient_classes_are_named_from_the_core_list():
    """DT-GRAD-7's linear ops, DT-GRAD-8's kernel derivatives (every other elementwise op) and
    DT-GRAD-9's reductions and normalizations."""
    assert set(catalogue.LINEAR_GRADIENT) <= set(catalogue.CORE_OPS)
    assert catalogue.gradient_class("mm") == "linear"
    assert catalogue.gradient_class("nn.functional.nll_loss") == "linear"
    elementwise = set(catalogue.ELEMENTWISE) - set(catalogue.LINEAR_GRADIENT)
    assert {op for op in elementwise if catalogue.gradient_class(op) == "kernel"} == elementwise
    composite = {op: catalogue.gradient_class(op) for op in catalogue.COMPOSITE}
    assert composite == {
        "softmax": "composite", "log_softmax": "composite", "var": "composite",
        "std": "composite", "nn.functional.layer_norm": "composite",
        "nn.functional.rms_norm": "composite", "nn.functional.nll_loss": "linear",
        "nn.functional.cross_entropy": "composite",
    }  # fmt: skip


def test_every_op_the_gradient_test_runs_has_its_gradients_value_judged():
    """No op of the gradient test is judged on its gradient's layout alone, so its edge family
    has no class for that (one no example could draw would fail every --require-edges run)."""
    assert [op for op in catalogue.grad_ops() if catalogue.gradient_class(op) is None] == []


def test_a_backward_pass_from_some_outputs_gives_the_others_no_gradient():
    """DT-GRAD-7 with outputs unused: ``split``'s first chunk alone carries a gradient back, and
    the rows of the other chunks get none."""
    catalogue.load()
    x = torch.arange(6.0).reshape(6, 1)
    sample = catalogue.Sample((x, 2), {})
    run = catalogue.runner("split", sample)
    chosen, (grad,) = dt_grad.op_gradients(run, [x], 0, among=[0])
    assert chosen == [0]
    assert grad[2:].eq(0).all()
    assert grad[:2].ne(0).any()
    every, (whole,) = dt_grad.op_gradients(run, [x], 0)
    assert every == [0, 1, 2]
    assert torch.equal(whole[:2], grad[:2])


def test_a_gradient_of_zeros_is_what_its_output_sends_back():
    catalogue.load()
    x = torch.arange(6.0).reshape(6, 1)
    run = catalogue.runner("split", catalogue.Sample((x, 3), {}))
    _, (grad,) = dt_grad.op_gradients(run, [x], 0, zeros=[1])
    assert grad[3:].eq(0).all()
    assert grad[:3].ne(0).any()


def test_the_gradient_test_adds_the_layers_of_common_models_to_the_core_list():
    """Every model layer is an op of this release's OpInfo with a sample a backward pass runs
    through, so ci judges its backward (spec/dt-grad.md)."""
    catalogue.load()
    ops = catalogue.grad_core_ops()
    assert set(catalogue.CORE_OPS) <= set(ops)
    for op in catalogue.MODEL_LAYERS:
        assert op in ops
        assert any(catalogue.grad_samples(op, d) for d in catalogue.dtypes(op)), op
