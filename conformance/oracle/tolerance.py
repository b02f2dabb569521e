"""How far a result may round, where the spec lets it (DT-REDIST-5, DT-REDIST-8).

Everything else is exact (ERR-10): data movement, ``min``/``max``, integer reductions, and
floating ``sum``/``product``/``avg`` whenever every partial result of every order is exactly
representable. The bounds are element-wise and compare the implementation's result with the
oracle's (``placements.reduce``), each computed in some order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

# The largest power of two up to which every integer multiple of 2**-q (q below) is exact.
_EXACT_UP_TO = {torch.float32: 2.0**24, torch.float64: 2.0**53}
_SCALES = (1.0, 256.0)  # integers, and multiples of 1/256 such as make_global's quarters


def _exact_sums(parts: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Where every partial sum of the parts, in any order, is exactly representable."""
    exact = torch.zeros(parts.shape[1:], dtype=torch.bool)
    for scale in _SCALES:
        scaled = parts * scale
        integral = (scaled == scaled.round()).all(0)
        exact |= integral & (scaled.abs().sum(0) <= _EXACT_UP_TO[dtype])
    return exact


def _exact_products(parts: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Where the parts are integers whose non-zero magnitudes multiply to an exact value."""
    integral = (parts == parts.round()).all(0)
    magnitudes = torch.where(parts == 0, torch.ones_like(parts), parts.abs())
    return integral & (magnitudes.prod(0) <= _EXACT_UP_TO[dtype])


def tolerance(op: str, parts: Sequence[torch.Tensor]) -> torch.Tensor:
    """Element-wise bound on ``|result - reduce(op, parts)|`` for reducing ``parts`` (the local
    tensors of one group of ``P(op)`` coordinates) in any order (DT-REDIST-5).

    Zero for integer dtypes, for ``min``/``max`` and where the reduction is exact; otherwise
    ``(n - 1) * eps`` times ``sum |x|`` (sum), ``|prod x|`` (product, plus ``(n - 1)`` smallest
    subnormals times ``prod max(1, |x|)`` for underflow), plus one rounding of the division for
    ``avg``: two orders each within ``(n - 1) * eps / 2`` of the exact value."""
    dtype = parts[0].dtype
    zero = torch.zeros(parts[0].shape, dtype=torch.float64)
    if not dtype.is_floating_point or op in ("min", "max"):
        return zero
    x = torch.stack(parts).to(torch.float64)
    n, eps = len(parts), torch.finfo(dtype).eps
    if op == "product":
        # A product that underflows rounds to the subnormal grid: each multiplication may add an
        # absolute error of half the smallest subnormal, scaled by the factors after it.
        tiny = torch.finfo(dtype).smallest_normal * eps
        scale = x.abs().clamp(min=1).prod(0)
        bound = (n - 1) * (eps * x.prod(0).abs() + tiny * scale)
        return torch.where(_exact_products(x, dtype), zero, bound)
    bound = (n - 1) * eps * x.abs().sum(0)
    if op == "avg":
        bound = bound / n + eps * (x.sum(0) / n).abs()
    return torch.where(_exact_sums(x, dtype), zero, bound)


def partition_tolerance(partitioned: Sequence[torch.Tensor], n: int, m: int) -> torch.Tensor:
    """Element-wise bound on ``|s - s'|`` for two evaluations (the implementation's and the
    oracle's) of a ``P(sum)`` partition reduced again (DT-REDIST-8).

    ``partitioned`` are the values the ``n`` members of a partial group divided (the same value
    ``n`` times when one source is partitioned; any superset bounds from above), over ``m`` mesh
    dims of size above 1. Each piece ``x / n`` is rounded once per dim and the ``n`` pieces are
    summed in any order, so each evaluation is within ``(n - 1 + m) * eps / 2 * sum |x_i| / n``
    of the exact value (to first order), and the two within ``(n + m) * eps * sum |x_i| / n`` of
    each other. The bound scales with the pieces, not with the result: pieces of different
    sources may cancel. Zero for ``n <= 2`` (halves are exact, their sum rounds once) and for
    integer dtypes."""
    dtype = partitioned[0].dtype
    if not dtype.is_floating_point or n <= 2:
        return torch.zeros(partitioned[0].shape, dtype=torch.float64)
    magnitude = torch.stack([x.to(torch.float64).abs() for x in partitioned]).sum(0) / n
    return (n + m) * torch.finfo(dtype).eps * magnitude


def _inexact_divisions(sizes: Sequence[int]) -> int:
    """How many of the divisions by ``sizes`` can round: dividing by a power of two is exact
    (barring underflow, which the suite's values never reach)."""
    return sum(1 for k in sizes if k & (k - 1))


def partitioned_local_tolerance(
    reduced: torch.Tensor, moved: torch.Tensor, sizes: Sequence[int]
) -> torch.Tensor:
    """Element-wise bound on ``|l - l'|`` between two evaluations of a local tensor that a
    redistribution reduced (two orders within ``reduced``, DT-REDIST-5; ``reduced`` sliced as the
    local is) and then divided by the ``sizes`` of its new ``P(sum)`` dims (DT-REDIST-6).

    With ``S`` and ``S'`` the two reductions and ``q`` the divisions that can round, each side
    is ``S / k`` times at most ``q`` factors ``(1 + d)``, ``|d| <= eps / 2``, so
    ``|l - l'| <= |S - S'| / k + q * eps / 2 * (|S| + |S'|) / k`` to first order, and
    ``|S| / k <= |l'| + |S - S'| / k``: ``reduced + (q + 1) * eps * |l'|`` bounds it with room
    for the second-order terms. Exact where every reduction is (``S == S'``, and both sides
    divide the same value the same way, DT-REDIST-8)."""
    if not bool(reduced.any()):
        return reduced
    q = _inexact_divisions(sizes)
    return reduced + (q + 1) * torch.finfo(moved.dtype).eps * moved.to(torch.float64).abs()


def partitioned_full_tolerance(
    reduced: torch.Tensor, full: torch.Tensor, sizes: Sequence[int]
) -> torch.Tensor:
    """Element-wise bound on ``|s - s'|`` between two evaluations of ``full_tensor()`` after a
    redistribution that reduced (two orders within ``reduced``) and then partitioned into
    ``P(sum)`` over ``sizes`` (``n`` pieces over ``m`` dims), ``full`` being the oracle's.

    Each side is its reduction ``S`` re-summed from its pieces: within
    ``(n - 1 + m) * eps / 2 * |S|`` of ``S`` (DT-REDIST-8). So
    ``|s - s'| <= |S - S'| + (n - 1 + m) * eps / 2 * (|S| + |S'|)``, and with
    ``|S| <= |S'| + |S - S'|`` and ``|S'| <= |s'| (1 + O(eps))`` that is within
    ``reduced * (1 + (n + m) * eps / 2)`` plus the partition bound of ``full``
    (``partition_tolerance``, ``(n + m) * eps * |s'|``, whose extra ``eps * |s'|`` covers the
    second-order terms). For ``n <= 2`` the pieces are exact halves and re-sum exactly."""
    n, m = math.prod(sizes), len(sizes)
    if not full.is_floating_point():
        return torch.zeros(full.shape, dtype=torch.float64)
    partition = partition_tolerance([full] * n, n, m) if m else torch.zeros_like(reduced)
    return reduced * (1 + (n + m) * torch.finfo(full.dtype).eps / 2) + partition


def within(actual: torch.Tensor, expected: torch.Tensor, bound: torch.Tensor) -> bool:
    """Same shape and dtype, and ``|actual - expected| <= bound`` element-wise (exact where the
    bound is 0, ``-0.0 == 0.0`` as for ``torch.equal``). A bound of another shape than
    ``expected`` is the caller's error, never broadcast into a verdict."""
    if bound.shape != expected.shape:
        raise ValueError(f"a bound of shape {list(bound.shape)} for {list(expected.shape)}")
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False
    if not actual.dtype.is_floating_point:
        return torch.equal(actual, expected)
    diff = (actual.to(torch.float64) - expected.to(torch.float64)).abs()
    return bool((diff <= bound).all())
