"""spec/dt-grad.md from the single-device program: the gradient ``torch.autograd`` gives on the
full tensors, the layouts gradients take, and how far a gradient may round."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from conformance.oracle.tensors import make_global
from conformance.oracle.tolerance import partition_tolerance
from conformance.vocabulary import Partial, Placement, Replicate

# DT-GRAD-8: two correct evaluations of an elementwise derivative differ by at most this many
# units of roundoff times its magnitude M (spec/dt-grad.md says why).
KERNEL_ERROR_ULPS = 128


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


def upstream(
    outputs: Sequence[torch.Tensor], seed: int, zeros: Sequence[int] = ()
) -> list[torch.Tensor]:
    """The gradient each output receives (DT-GRAD-7): the seeded values of its shape and dtype,
    ``seed + j`` for output ``j``; zeros for the outputs ``zeros`` names (positions in
    ``outputs``)."""
    return [
        torch.zeros(y.shape, dtype=y.dtype) if j in zeros
        else make_global(tuple(y.shape), str(y.dtype).removeprefix("torch."), seed + j)
        for j, y in enumerate(outputs)
    ]  # fmt: skip


def differentiated(outputs: Sequence[object]) -> list[int]:
    """The outputs a backward pass starts from: the floating tensors that require grad."""
    return [
        j
        for j, y in enumerate(outputs)
        if isinstance(y, torch.Tensor) and y.is_floating_point() and y.requires_grad
    ]


def op_gradients(
    run: Callable[[list[torch.Tensor]], list[object]],
    tensors: Sequence[torch.Tensor],
    upstream_seed: int,
    among: Sequence[int] | None = None,
    zeros: Sequence[int] = (),
) -> tuple[list[int], list[torch.Tensor | None]]:
    """The single-device program of DT-GRAD-7: ``run`` (the op on a list of its tensor
    arguments, returning its output leaves) on copies of ``tensors``, every floating one a leaf
    that requires grad, then one backward pass of ``sum_j (y_j * h_j).sum()`` over the
    differentiated outputs, or those of ``among`` (the others unused, their gradient ``None``),
    ``h_j`` zeros for the positions ``zeros`` names. Returns those outputs' indices and each
    argument's ``.grad`` (``None`` for an integer argument, or one the program gives no
    gradient)."""
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in tensors]
    outputs = run(leaves)
    chosen = differentiated(outputs)
    if among is not None:
        chosen = [j for j in chosen if j in among]
    if chosen:
        ys = [outputs[j] for j in chosen]
        torch.autograd.backward(ys, upstream(ys, upstream_seed, zeros))
    return chosen, [t.grad if t.requires_grad else None for t in leaves]


def op_gradient_bound(
    run: Callable[[list[torch.Tensor]], list[object]],
    tensors: Sequence[torch.Tensor],
    chosen: Sequence[int],
    upstream_seed: int,
    mesh_shape: Sequence[int],
    magnitudes: Callable[[list[torch.Tensor], torch.Tensor], list[torch.Tensor]] | None = None,
    zeros: Sequence[int] = (),
) -> list[torch.Tensor | None]:
    """DT-GRAD-7's bound on each floating argument's gradient: ``4·γ(n·N + d + 4)·m`` per
    element, ``m = Σ |c|·|h|`` over its terms (the op's Jacobian ``J`` at the inputs, from
    autograd, with the upstream gradients ``h``, in float64), ``n`` the number of its nonzero
    terms, ``N`` and ``d`` the mesh's size and number of dims. With ``magnitudes`` (an
    elementwise op of DT-GRAD-8, ``grad_coefficients``: its floating arguments and result, in
    float64 and broadcast to the result's shape, to ``M`` per argument), each element adds
    ``128·u·Σ |h|·M`` over the result's elements it reaches, for the derivative's own error.
    ``zeros``: the positions in ``chosen`` whose ``h`` is zeros (``upstream``).

    Each term ``c·h`` is computed with at most four roundings (three in ``c``, one in the
    product), and a partition into ``P(sum)`` may split it into ``N`` pieces, each rounded once
    per mesh dim; summed in any order, ``n·N`` pieces are within ``γ(n·N + d + 4)·m`` of the
    exact gradient (Higham's bound for a sum, each piece carrying its own relative error). Two
    evaluations (the implementation's and the oracle's) are within twice that, and ``m`` from
    the Jacobian's computed coefficients within another factor ``1 + γ(3)``, which the ``4``
    covers."""
    floating = [i for i, t in enumerate(tensors) if t.is_floating_point()]
    bounds: list[torch.Tensor | None] = [None] * len(tensors)
    for i in floating:
        bounds[i] = torch.zeros(tensors[i].shape, dtype=torch.float64)
    inputs = tuple(tensors[i].detach().clone() for i in floating)
    if not any(t.numel() for t in inputs):
        return bounds

    def outputs(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        args = list(tensors)
        for i, x in zip(floating, inputs, strict=True):
            args[i] = x
        leaves = run(args)
        return tuple(leaves[j] for j in chosen if leaves[j].numel())

    every = run(list(tensors))
    pairs = zip(chosen, upstream([every[j] for j in chosen], upstream_seed, zeros), strict=True)
    h = [x.double().abs() for j, x in pairs if every[j].numel()]
    if not h:
        return bounds
    jacobian = torch.autograd.functional.jacobian(outputs, inputs)
    ys = [every[j] for j in chosen if every[j].numel()]
    size, ndim = math.prod(mesh_shape), len(mesh_shape)
    for k, i in enumerate(floating):
        shape = tensors[i].shape
        m = torch.zeros(shape, dtype=torch.float64)
        n = torch.zeros(shape, dtype=torch.float64)
        for j, y in enumerate(ys):
            block = jacobian[j][k].double().abs().reshape(y.numel(), *shape)
            m += (block * h[j].reshape(-1, *([1] * len(shape)))).sum(0)
            n += (block != 0).double().sum(0)
        terms = n * size + ndim + 4
        u = torch.finfo(tensors[i].dtype).eps / 2
        # an infinite coefficient times a zero gradient: an element no bound constrains
        bounds[i] = (4 * terms * u / (1 - terms * u) * m).nan_to_num(nan=math.inf)
    if magnitudes is not None:
        (y,) = ys  # the ops of DT-GRAD-8 have one result
        xs = [tensors[i].double().broadcast_to(y.shape) for i in floating]
        for i, big in zip(floating, magnitudes(xs, y.detach().double()), strict=True):
            u = torch.finfo(tensors[i].dtype).eps / 2
            own = (KERNEL_ERROR_ULPS * u * h[0] * big).nan_to_num(nan=math.inf)
            bounds[i] = bounds[i] + own.sum_to_size(tensors[i].shape)
    return bounds
