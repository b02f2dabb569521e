"""DT-OP-10's bounds (conformance/oracle/composite_bounds.py): a correct result computed another
way, shard by shard as a sharded implementation would, lies within them on every input drawn;
a result that lost or misread a shard does not."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.utils import _pytree as pytree

from conformance.ops import catalogue
from conformance.oracle import composite_bounds, dt_ops

# var and std with a correction of at least n warn, and return inf or NaN: samples OpInfo has.
pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")


def _holds(op: str, args, kwargs, got: torch.Tensor, expected: torch.Tensor) -> bool:
    bound = composite_bounds.bound(op, args, kwargs, expected)
    return dt_ops.within(got, expected, bound, bound.isinf())


@pytest.mark.parametrize("op", catalogue.COMPOSITE)
def test_a_float64_result_rounded_once_is_within_the_bound_on_every_sample(op):
    """The most accurate implementation (float64, rounded to the dtype once) on every OpInfo
    sample of the op."""
    for dtype in catalogue.dtypes(op):
        for sample in catalogue.samples(op, dtype):
            (expected,) = pytree.tree_leaves(catalogue.call(op, sample))
            wide = sample.with_tensors(
                [t.double() if t.is_floating_point() else t for t in sample.tensors()]
            )
            (got,) = pytree.tree_leaves(catalogue.call(op, wide))
            assert _holds(op, sample.args, sample.kwargs, got.to(expected.dtype), expected)


def _chunks(n: int, parts: int) -> list[tuple[int, int]]:
    """``torch.chunk``'s cuts of ``n`` into ``parts`` (the last ones may be empty)."""
    size = -(-n // parts) if n else 0
    return [(min(i * size, n), min((i + 1) * size, n)) for i in range(parts)]


def _online_softmax(x: torch.Tensor, parts: int, log: bool) -> torch.Tensor:
    """Softmax along the last dim as a sharded kernel computes it: each shard's max and sum of
    exponentials, rescaled to the global max, then each element over the global sum."""
    maxima, sums = [], []
    for start, stop in _chunks(x.shape[-1], parts):
        piece = x[..., start:stop]
        if piece.shape[-1] == 0:
            continue
        m = piece.amax(-1, keepdim=True)
        maxima.append(m)
        sums.append(torch.exp(piece - m).sum(-1, keepdim=True))
    top = torch.stack(maxima).amax(0)
    total = sum(s * torch.exp(m - top) for s, m in zip(sums, maxima, strict=True))
    if log:
        return x - top - torch.log(total)
    return torch.exp(x - top) / total


def _chan_variance(x: torch.Tensor, parts: int, correction: float) -> torch.Tensor:
    """The variance of the last dim from each shard's count, mean and sum of squared
    deviations, combined pairwise (Chan, Golub and LeVeque's formula)."""
    count = torch.zeros(x.shape[:-1], dtype=x.dtype)
    mean = torch.zeros_like(count)
    m2 = torch.zeros_like(count)
    for start, stop in _chunks(x.shape[-1], parts):
        piece = x[..., start:stop]
        k = stop - start
        if k == 0:
            continue
        piece_mean = piece.mean(-1)
        piece_m2 = ((piece - piece_mean.unsqueeze(-1)) ** 2).sum(-1)
        total = count + k
        delta = piece_mean - mean
        mean = mean + delta * (k / total)
        m2 = m2 + piece_m2 + delta * delta * (count * k / total)
        count = total
    return m2 / max(0.0, x.shape[-1] - correction)


def _one_pass_layer_norm(x, weight, bias, eps):
    """``E[x²] − E[x]²``: the least accurate variance, by shard sums of ``x`` and ``x²``."""
    mean = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mean * mean
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias


def _normal(offset: float, scale: float, seed: int, shape: tuple[int, int]) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return offset + scale * torch.randn(shape, generator=generator, dtype=torch.float64)


# Offsets far from the spread (a variance's worst conditioning) and scales across magnitudes.
values = st.builds(
    _normal,
    offset=st.sampled_from([0.0, 1.0, -30.0, 1e3]),
    scale=st.sampled_from([1.0, 1e-2, 10.0, 100.0]),
    seed=st.integers(0, 2**16),
    shape=st.tuples(st.integers(1, 3), st.integers(1, 40)),
)


@given(x=values, parts=st.integers(1, 5), dtype=st.sampled_from([torch.float32, torch.float64]))
def test_shard_by_shard_algorithms_are_within_the_bounds(x, parts, dtype):
    x = x.to(dtype)
    for log, op in ((False, "softmax"), (True, "log_softmax")):
        expected = getattr(torch, op)(x, -1)
        assert _holds(op, (x, -1), {}, _online_softmax(x, parts, log), expected)
    for correction in (0, 1):
        kwargs = {"dim": -1, "correction": correction}
        got = _chan_variance(x, parts, correction)
        assert _holds("var", (x,), kwargs, got, torch.var(x, **kwargs))
        assert _holds("std", (x,), kwargs, got.sqrt(), torch.std(x, **kwargs))
    n = x.shape[-1]
    weight, bias = torch.linspace(-2, 2, n, dtype=dtype), torch.linspace(1, -1, n, dtype=dtype)
    args = (x, (n,), weight, bias)
    expected = F.layer_norm(*args, eps=1e-5)
    assert _holds("nn.functional.layer_norm", args, {"eps": 1e-5},
                  _one_pass_layer_norm(x, weight, bias, 1e-5), expected)  # fmt: skip


@given(x=values, weighted=st.booleans(), reduction=st.sampled_from(["mean", "sum", "none"]))
def test_a_loss_from_log_probabilities_computed_by_shards_is_within_the_bound(
    x, weighted, reduction
):
    """Cross entropy as a vocabulary-parallel loss computes it: log-softmax by shards, then
    the targets' terms."""
    x = x.float()
    classes = x.shape[-1]
    target = torch.arange(x.shape[0]) % classes
    weight = torch.linspace(0.5, 2, classes) if weighted else None
    kwargs = {"weight": weight, "reduction": reduction}
    ls = _online_softmax(x, 3, log=True)
    got = F.nll_loss(ls, target, **kwargs)
    assert _holds("nn.functional.cross_entropy", (x, target), kwargs, got,
                  F.cross_entropy(x, target, **kwargs))  # fmt: skip


def test_a_softmax_normalised_over_one_shard_breaks_the_bound():
    """Each shard's exponentials over its own sum: the values a softmax over a sharded dim
    gives when the sums are never combined."""
    x = torch.linspace(-3, 3, 12).reshape(2, 6)
    halves = torch.cat([torch.softmax(x[:, :3], -1), torch.softmax(x[:, 3:], -1)], -1)
    assert not _holds("softmax", (x, -1), {}, halves, torch.softmax(x, -1))


def test_a_variance_without_one_shard_breaks_the_bound():
    x = torch.linspace(-3, 3, 12).reshape(2, 6)
    kwargs = {"dim": -1}
    assert not _holds("var", (x,), kwargs, torch.var(x[:, :4], dim=-1), torch.var(x, **kwargs))


def test_a_layer_norm_by_each_shards_own_statistics_breaks_the_bound():
    x = torch.linspace(-3, 3, 12).reshape(2, 6)
    args = (x, (6,))
    local = torch.cat([F.layer_norm(x[:, :3], (3,)), F.layer_norm(x[:, 3:], (3,))], -1)
    assert not _holds("nn.functional.layer_norm", args, {}, local, F.layer_norm(*args))


def test_a_mean_loss_over_one_shards_targets_breaks_the_bound():
    x = torch.linspace(-3, 3, 12).reshape(4, 3)
    target = torch.tensor([0, 0, 2, 1])
    half = F.cross_entropy(x[:2], target[:2])
    assert not _holds("nn.functional.cross_entropy", (x, target), {}, half,
                      F.cross_entropy(x, target))  # fmt: skip


def test_a_weighted_mean_loss_averaged_over_shards_breaks_the_bound():
    """Each rank's weighted mean, averaged: pytorch#185167's wrong value (-2.5 for -3.75)."""
    x, target = torch.arange(6.0).reshape(2, 3), torch.tensor([0, 2])
    weight = torch.tensor([1.0, 2.0, 3.0])
    kwargs = {"weight": weight}
    parts = [F.nll_loss(x[i : i + 1], target[i : i + 1], **kwargs) for i in range(2)]
    averaged = (parts[0] + parts[1]) / 2
    assert not _holds("nn.functional.nll_loss", (x, target), kwargs, averaged,
                      F.nll_loss(x, target, **kwargs))  # fmt: skip


def test_an_unknown_variance_form_is_an_error_of_the_suite():
    x = torch.ones(3, 3)
    with pytest.raises(ValueError, match="by keyword"):
        composite_bounds.bound("var", (x, 1), {}, torch.var(x, 1))


def test_elements_whose_variance_plus_eps_may_be_zero_are_not_constrained():
    """A row whose variance is within rounding of ``-eps``: NaN or any number is correct."""
    x = torch.tensor([[0.0, 1.0]])  # variance 0.25
    bound = composite_bounds.bound("nn.functional.layer_norm", (x, (2,)), {"eps": -0.25},
                                   F.layer_norm(x, (2,), eps=-0.25))  # fmt: skip
    assert bound.isinf().all()
    assert math.isfinite(composite_bounds.bound(
        "nn.functional.layer_norm", (x, (2,)), {"eps": -0.5}, F.layer_norm(x, (2,), eps=-0.5)
    ).min())  # fmt: skip
