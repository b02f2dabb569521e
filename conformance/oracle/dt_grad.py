"""spec/dt-grad.md from the single-device program: the gradient ``torch.autograd`` gives on the
full tensors, the layouts gradients take, and how far a gradient may round."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from conformance.oracle.tensors import make_global
from conformance.oracle.tolerance import partition_tolerance
from conformance.vocabulary import Partial, Placement, Replicate


def gradient_placements(placements: Sequence[Placement]) -> tuple[Placement, ...]:
    """DT-GRAD-2: the layout of the gradient of a DTensor laid out by ``placements``: every
    ``P`` read as ``R``."""
    return tuple(Replicate() if isinstance(p, Partial) else p for p in placements)


def gradient(shape: Sequence[int], dtype: str, seed: int, upstream_seed: int, backwards: int):
    """The single-device program's gradient: ``backwards`` passes of ``(x * h).sum()`` through
    the identity the chain of API calls is, ``x`` and ``h`` the seeded values, accumulated in
    ``x.grad`` by ``torch.autograd``."""
    x = make_global(shape, dtype, seed).requires_grad_()
    h = make_global(shape, dtype, upstream_seed)
    for _ in range(backwards):
        (x * h).sum().backward()
    return x.grad


def tolerance(
    expected: torch.Tensor,
    placements: Sequence[Placement],
    mesh_shape: Sequence[int],
    backwards: int,
) -> torch.Tensor:
    """Element-wise bound on how far the value of a gradient laid out by ``placements`` may be
    from ``expected`` (DT-GRAD-2).

    Moving a gradient only copies, sums exact parts and divides by powers of two, except where
    a gradient is partitioned into ``P(sum)`` over ``n`` coordinates: each pass's parts sum to
    within DT-REDIST-8's bound ``b`` of its gradient. Accumulating ``backwards`` passes adds
    their parts, each addition rounding once (at most ``eps / 2`` of the sum's magnitude per
    coordinate, ``eps |g|`` over all of them to first order), so the whole is within
    ``backwards * (b + eps * |g|)`` of the accumulated gradient ``g``. Zero without ``P(sum)``
    and for exact dtypes."""
    zero = torch.zeros(expected.shape, dtype=torch.float64)
    sizes = [k for p, k in zip(placements, mesh_shape, strict=True) if p == Partial("sum")]
    if not expected.is_floating_point() or not sizes:
        return zero
    n, m = math.prod(sizes), sum(1 for k in sizes if k > 1)
    one_pass = expected / backwards
    b = partition_tolerance([one_pass] * n, n, m)
    eps = torch.finfo(expected.dtype).eps
    return backwards * (b + eps * expected.to(torch.float64).abs())
