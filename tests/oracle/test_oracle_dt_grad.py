"""The oracle of DT-GRAD-6 to 8: the single-device gradient of an op, and the bounds within which
every evaluation order of a linear backward, and every evaluation of a kernel's derivative, lies."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.ops import catalogue
from conformance.oracle import dt_grad, dt_ops, grad_composite
from conformance.oracle.grad_coefficients import COEFFICIENTS


def mm(tensors):
    return [torch.mm(*tensors)]


def test_op_gradients_are_autograds_on_the_full_tensors():
    a = torch.arange(6.0).reshape(2, 3)
    b = torch.ones(3, 2)
    chosen, (ga, gb) = dt_grad.op_gradients(mm, [a, b], upstream_seed=7)
    (h,) = dt_grad.upstream([torch.mm(a, b)], 7)
    assert chosen == [0]
    assert torch.equal(ga, h @ b.t())
    assert torch.equal(gb, a.t() @ h)


def test_integer_arguments_and_integer_outputs_get_no_gradient():
    x = torch.tensor([3.0, 1.0, 2.0])
    index = torch.tensor([2, 0])
    chosen, grads = dt_grad.op_gradients(
        lambda ts: [torch.index_select(ts[0], 0, ts[1])], [x, index], 0
    )
    assert chosen == [0]
    assert grads[1] is None
    chosen, grads = dt_grad.op_gradients(lambda ts: list(torch.max(ts[0], 0)), [x], 0)
    assert chosen == [0]  # the values, not the indices


def _split_evaluation(a, b, h, pieces, order):
    """``a``'s gradient of ``mm(a, b)`` as a sharded backward may compute it: the output's
    columns cut into ``pieces`` blocks, each block's product computed alone, the blocks summed
    in ``order``."""
    cuts = torch.tensor_split(torch.arange(h.shape[1]), pieces)
    parts = [h[:, c] @ b[:, c].t() for c in cuts]
    total = torch.zeros_like(parts[0])
    for i in order:
        total = total + parts[i % len(parts)]
    return total


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 4),
    inner=st.integers(1, 5),
    cols=st.integers(1, 40),
    pieces=st.integers(1, 4),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    reverse=st.booleans(),
)
def test_the_bound_admits_every_split_and_order_of_a_linear_backward(
    rows, inner, cols, pieces, seed, dtype, reverse
):
    generator = torch.Generator().manual_seed(seed)
    a = (torch.randn(rows, inner, generator=generator) * 1e3).to(dtype)
    b = (torch.randn(inner, cols, generator=generator) * 1e-3).to(dtype)
    chosen, (ga, _) = dt_grad.op_gradients(mm, [a, b], seed)
    bound = dt_grad.op_gradient_bound(mm, [a, b], chosen, seed, [pieces])[0]
    (h,) = dt_grad.upstream([torch.mm(a, b)], seed)
    order = range(pieces - 1, -1, -1) if reverse else range(pieces)
    other = _split_evaluation(a, b, h, pieces, order)
    assert dt_ops.within(other, ga, bound)


def test_a_gradient_counted_once_per_rank_is_outside_the_bound():
    a, b = torch.arange(6.0).reshape(2, 3) / 7, torch.ones(3, 2) / 3
    chosen, (ga, gb) = dt_grad.op_gradients(mm, [a, b], 1)
    bounds = dt_grad.op_gradient_bound(mm, [a, b], chosen, 1, [2])
    assert dt_ops.within(ga, ga, bounds[0])
    assert dt_ops.within(gb, gb, bounds[1])
    assert not dt_ops.within(2 * ga, ga, bounds[0])
    assert not dt_ops.within(2 * gb, gb, bounds[1])


def test_the_bound_counts_terms_and_pieces():
    """``sum`` of ``n`` elements: each element's gradient is one term, ``h`` itself."""
    x = torch.ones(5)
    run = lambda ts: [ts[0].sum()]  # noqa: E731
    chosen, (g,) = dt_grad.op_gradients(run, [x], 3)
    (bound,) = dt_grad.op_gradient_bound(run, [x], chosen, 3, [2, 2])
    (h,) = dt_grad.upstream([x.sum()], 3)
    terms = 1 * 4 + 2 + 4
    u = torch.finfo(torch.float32).eps / 2
    expected = 4 * terms * u / (1 - terms * u) * abs(h.item())
    assert torch.allclose(bound, torch.full((5,), expected, dtype=torch.float64))
    assert torch.equal(g, h.expand(5))


def test_an_infinite_coefficient_times_a_zero_gradient_is_not_bounded():
    x = torch.tensor([math.inf, 1.0])
    y = torch.tensor([2.0, 3.0])
    run = lambda ts: [ts[0] * ts[1]]  # noqa: E731
    bounds = dt_grad.op_gradient_bound(run, [x, y], [0], 0, [1])
    assert bounds[1][0].item() == math.inf  # y's gradient at x = inf


def test_inputs_without_elements_have_an_empty_bound():
    x = torch.ones(0, 3)
    run = lambda ts: [ts[0].sum(0)]  # noqa: E731
    (bound,) = dt_grad.op_gradient_bound(run, [x], [0], 0, [2])
    assert bound.shape == (0, 3)


def _samples_gradients(op):
    """For each float32 gradient sample of ``op``: the sample, the single-device gradients,
    which outputs were differentiated and the float64 gradients."""
    for index in catalogue.grad_samples(op, "float32"):
        sample = catalogue.samples(op, "float32")[index]
        with catalogue.quietly():
            chosen, grads = dt_grad.op_gradients(catalogue.runner(op, sample), sample.tensors(), 7)
            yield index, sample, chosen, grads, _float64_gradients(op, sample, chosen, 7)


def _float64_gradients(op, sample, chosen, seed):
    """The op's gradients computed in float64 from the same inputs and upstream gradients."""
    wide = sample.with_tensors(
        [t.double() if t.is_floating_point() else t for t in sample.tensors()]
    )
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in wide.tensors()]
    outputs = catalogue.runner(op, wide)(leaves)
    ys = [outputs[j] for j in chosen]
    hs = [h.double() for h in dt_grad.upstream([y.float() for y in ys], seed)]
    torch.autograd.backward(ys, hs)
    return [t.grad for t in leaves]


@pytest.mark.parametrize("op", sorted(COEFFICIENTS))
def test_a_kernel_derivatives_float32_gradient_is_well_within_dt_grad_8s_bound(op):
    """Each evaluation may use half the bound (two are compared); on OpInfo's samples one
    device's float32 gradient stays within a tenth of that half of the float64 gradient, and
    the bound stays below the gradient's size almost everywhere (a gradient off by a whole
    term breaks it)."""
    judged = below = 0
    for index, sample, chosen, grads, wide in _samples_gradients(op):
        run = catalogue.runner(op, sample)
        magnitudes = catalogue.gradient_magnitudes(op, sample)
        with catalogue.quietly():
            bounds = dt_grad.op_gradient_bound(run, sample.tensors(), chosen, 7, [2, 2], magnitudes)
        for got, exact, bound in zip(grads, wide, bounds, strict=True):
            if got is None:
                continue
            finite = exact.isfinite() & bound.isfinite()
            off = (got.double() - exact).abs()[finite]
            assert bool((off <= bound[finite] / 20).all()), (index, (off / bound[finite]).max())
            judged += int(finite.sum())
            below += int((bound[finite] < got.double().abs()[finite]).sum())
    assert judged
    assert below >= 0.7 * judged, (judged, below)


@pytest.mark.parametrize("op", sorted(grad_composite.BOUNDS))
def test_a_reductions_float32_gradient_is_within_half_dt_grad_9s_bound(op):
    """One evaluation may use half the bound; on OpInfo's samples one device's float32
    gradient stays within half of it from the float64 gradient, and the bound stays below the
    gradient's size almost everywhere it is not zero."""
    judged = below = 0
    for index, sample, _chosen, grads, wide in _samples_gradients(op):
        with catalogue.quietly():
            (y,) = catalogue.runner(op, sample)(sample.tensors())
        (h,) = dt_grad.upstream([y], 7)
        bounds = grad_composite.bounds(op, sample.args, sample.kwargs, y, h)
        assert len(bounds) == len(grads)
        for got, exact, bound in zip(grads, wide, bounds, strict=True):
            if bound is None:  # an integer argument, or cross_entropy's class weights
                continue
            finite = exact.isfinite() & bound.isfinite()
            off = (got.double() - exact).abs()[finite]
            assert bool((off <= bound[finite] / 2).all()), index
            nonzero = finite & (exact != 0)
            judged += int(nonzero.sum())
            below += int((bound < got.double().abs())[nonzero].sum())
    assert judged
    assert below >= 0.9 * judged, (judged, below)
