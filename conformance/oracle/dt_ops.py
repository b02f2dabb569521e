"""Operators on DTensors (spec/dt-ops.md): the inputs an op case distributes, and the bounds
within which an output's value must hold the single-device result.

The single-device result is torch itself, run on the full tensors in the driver; what this
module adds is what the spec says around it. A partial input is split into parts whose reduction
is exact in every order ("Inputs the suite draws"), so the op's input is known exactly whatever
the implementation does; and the value rules' bounds (DT-OP-1 to 3) are computed here from the
inputs, as the spec states them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from conformance.oracle.layout import local_tensor
from conformance.oracle.placements import normalize
from conformance.vocabulary import Partial, Placement


def partial_parts(value: torch.Tensor, op: str, n: int, seed: int) -> list[torch.Tensor]:
    """``n`` tensors whose ``op`` reduction is ``value`` exactly, in every order: for ``sum``,
    one holds ``round(v)`` and another ``v - round(v)`` (both exact; integers split in halves),
    the rest ``0``; for ``avg`` (``n`` a power of two), one holds ``n * v``, the rest ``0``; for
    ``max`` (``min``), one holds ``v``, the rest ``-inf`` (``inf``; integers: the lowest (highest)
    value), and NaN everywhere ``v`` is NaN. Which part holds what is drawn per element from
    ``seed``."""
    if n == 1:
        return [value.clone()]
    generator = torch.Generator().manual_seed(seed)
    first = torch.randint(0, n, value.shape, generator=generator)
    second = (first + torch.randint(1, n, value.shape, generator=generator)) % n
    floating = value.is_floating_point()
    if op == "sum":
        if floating:
            whole = torch.where(value.isfinite(), value.round(), value)
        else:
            whole = torch.div(value, 2, rounding_mode="floor")
        filler = torch.zeros_like(value)
        main, rest = whole, torch.where(value.isfinite(), value - whole, filler)
    elif op == "avg":
        main, rest, filler = value * n, torch.zeros_like(value), torch.zeros_like(value)
    else:
        lowest = op == "max"
        if floating:
            extreme = -math.inf if lowest else math.inf
        else:
            extreme = torch.iinfo(value.dtype).min if lowest else torch.iinfo(value.dtype).max
        # NaN in every part: a max by comparisons (Gloo's, std::max) keeps whichever operand
        # comes first when one is NaN, so one NaN part would reduce by the order.
        filler = torch.full_like(value, extreme)
        if floating:
            filler = torch.where(value.isnan(), value, filler)
        main, rest = value, filler
    parts = []
    for i in range(n):
        part = torch.where(first == i, main, filler)
        parts.append(torch.where(second == i, rest, part))
    return parts


def partial_sizes(placements: Sequence[Placement], mesh_shape: Sequence[int]) -> list[int]:
    return [k for k, p in zip(mesh_shape, placements, strict=True) if isinstance(p, Partial)]


def input_local(
    value: torch.Tensor,
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coord: Sequence[int],
    seed: int,
) -> torch.Tensor:
    """What coordinate ``coord`` hands ``from_local`` for an input of ``value``: the layout
    slice (DT-LAYOUT-12) of its part (``partial_parts``, indexed by its position along the ``P``
    mesh dims, row-major) of the value."""
    placements = normalize(placements, value.dim())
    ops = {p.op for p in placements if isinstance(p, Partial)}
    index = 0
    for k, c, p in zip(mesh_shape, coord, placements, strict=True):
        if isinstance(p, Partial):
            index = index * k + c
    if ops:
        (op,) = ops
        part = partial_parts(value, op, math.prod(partial_sizes(placements, mesh_shape)), seed)
        value = part[index]
    return local_tensor(value, mesh_shape, placements, coord)


def significant_stride(shape: Sequence[int], stride: Sequence[int]) -> list[int | None]:
    """DT-OP-5's stride: each dim's, ``None`` for a dim of length 1, whose stride addresses no
    other element; nothing for a tensor without elements (PyTorch's own significant strides,
    ``torch._prims_common.check_significant_strides``)."""
    if math.prod(shape) == 0:
        return []
    return [s if n > 1 else None for n, s in zip(shape, stride, strict=True)]


def gamma(k: int, dtype: torch.dtype) -> float:
    """``γ(k) = k·u / (1 − k·u)``, ``u`` the unit roundoff (Higham §3.1)."""
    u = torch.finfo(dtype).eps / 2
    return k * u / (1 - k * u)


def elementwise_bound(expected: torch.Tensor) -> torch.Tensor:
    """DT-OP-2: ``8 · eps · max(|e|, tiny)`` per element."""
    info = torch.finfo(expected.dtype)
    return 8 * info.eps * expected.abs().double().clamp(min=info.tiny)


def sums_bound(expected: torch.Tensor, magnitude: torch.Tensor, terms: int) -> torch.Tensor:
    """DT-OP-3: ``6 · γ(n + 2) · m`` per element, ``m`` the op on the inputs' absolute values in
    float64 (``magnitude``)."""
    return 6 * gamma(terms + 2, expected.dtype) * magnitude.double().abs()


def within(
    got: torch.Tensor, expected: torch.Tensor, bound: torch.Tensor, free: torch.Tensor | None = None
) -> bool:
    """``|got − expected| ≤ bound`` element for element, with infinities and NaN where the
    expected result has them and nowhere else; elements where ``free`` is true are not
    compared (DT-OP-10: an exact value too ill-conditioned to constrain)."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return False
    g, e = got.double(), expected.double()
    judged = torch.ones_like(e, dtype=torch.bool) if free is None else ~free.expand_as(e)
    g, e, bound = g[judged], e[judged], bound.expand(judged.shape)[judged]
    special = g.isinf() | e.isinf()
    if not torch.equal(g.isnan(), e.isnan()) or not torch.equal(g[special], e[special]):
        return False
    finite = e.isfinite()
    return bool(((g - e).abs() <= bound)[finite].all())


def exact(got: torch.Tensor, expected: torch.Tensor) -> bool:
    """DT-OP-1: equal element for element, NaN equal to NaN (``-0.0`` equal to ``0.0``)."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return False
    if not got.is_floating_point():
        return torch.equal(got, expected)
    return bool(torch.eq(got, expected).logical_or(got.isnan() & expected.isnan()).all())
