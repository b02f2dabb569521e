"""DT-GRAD-9: how far the gradients of ``softmax``, ``log_softmax``, ``var`` and ``std`` may
round, from the single-device input ``x``, result ``y`` and upstream gradient ``h``, in float64.

Each backward pass reduces along the op's dims and some read the forward result, which itself
rounds within DT-OP-10's bound ``δ`` (``composite_bounds``): ``softmax``'s gradient is
``y·(h − Σ h·y)``, ``log_softmax``'s ``h − exp(y)·Σ h``, ``var``'s ``h·2(x − mean)/(n − c)``
and ``std``'s that of ``var`` for ``h/(2y)``. Each bound below is twice the error of one
evaluation (two are compared), the sums taken in any order over ``n`` terms plus two roundings
for partial sums combined across shards (``γ(n + 2)``, as DT-OP-3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.oracle import composite_bounds
from conformance.oracle.dt_ops import gamma


def _along(args, y: torch.Tensor, h: torch.Tensor, delta: torch.Tensor):
    """A softmax's result, upstream gradient and forward bound in float64 in the input's shape
    (0-d as 1-element), the softmax dim as a non-negative index, its length and ``u``."""
    x = args[0].reshape(1) if args[0].dim() == 0 else args[0]
    dim = args[1] % x.dim()
    shape = x.shape
    u = torch.finfo(y.dtype).eps / 2
    as_x = [t.double().reshape(shape) for t in (y, h, delta)]
    return *as_x, dim, shape[dim], u


def softmax(args: tuple[Any, ...], kwargs: dict[str, Any], y: torch.Tensor, h: torch.Tensor):
    """``2·(|y|·Δa + δ·(|a| + Δa) + u·|y|·|a|)`` with ``a = h − s``, ``s = Σ h·y``: ``s`` is
    within ``Δs = Σ|h|·δ + γ(n + 2)·(Σ|h·y| + Σ|h|·δ)`` (the terms' own error, then the sum's),
    the difference within ``Δa = Δs + u·|a|``, and the product carries ``y``'s ``δ``."""
    e, g, delta, dim, n, u = _along(args, y, h, composite_bounds.softmax_bound(args, kwargs, y))
    terms = (g.abs() * delta).sum(dim, keepdim=True)
    ds = terms + gamma(n + 2, y.dtype) * ((g * e).abs().sum(dim, keepdim=True) + terms)
    a = (g - (g * e).sum(dim, keepdim=True)).abs() + ds
    da = ds + u * a
    one = e.abs() * da + delta * (a + da) + u * e.abs() * a
    return [(2 * one).reshape(y.shape)]


def log_softmax(args: tuple[Any, ...], kwargs: dict[str, Any], y: torch.Tensor, h: torch.Tensor):
    """``2·(p·ΔT + (|T| + ΔT)·Δp + 2u·(|h| + p·(|T| + ΔT)))`` with ``p = exp(y)``, ``T = Σ h``:
    ``T`` is within ``ΔT = γ(n + 2)·Σ|h|``, ``p`` within ``Δp = p·(expm1(δ) + 8u)`` (``y``'s
    absolute ``δ`` through the exponential, and its 3.5 ulp), and the product and difference
    round once each."""
    bound = composite_bounds.log_softmax_bound(args, kwargs, y)
    e, g, delta, dim, n, u = _along(args, y, h, bound)
    p = e.exp()
    total = g.sum(dim, keepdim=True).abs()
    dt = gamma(n + 2, y.dtype) * g.abs().sum(dim, keepdim=True)
    dp = p * (torch.expm1(delta) + 8 * u)
    one = p * dt + (total + dt) * dp + 2 * u * (g.abs() + p * (total + dt))
    return [(2 * one).reshape(y.shape)]


def _variance_parts(args, kwargs, y):
    """``n − c`` (the divisor), ``|x − mean|`` in float64, its error ``Δd`` in one
    evaluation (the mean's ``γ(n + 2)·mean|x|``, then the difference's rounding), and how to
    spread an upstream gradient of ``y``'s shape over ``x``."""
    x, dims, keepdim, correction = composite_bounds.variance_form(args, kwargs)
    x = x.double().reshape(1) if x.dim() == 0 else x.double()
    dims = sorted(d % x.dim() for d in dims)
    n = math.prod(x.shape[d] for d in dims)
    u = torch.finfo(y.dtype).eps / 2
    mean = x.mean(dims, keepdim=True)
    mean_error = gamma(n + 2, y.dtype) * x.abs().mean(dims, keepdim=True)
    d = (x - mean).abs()

    def spread(h: torch.Tensor) -> torch.Tensor:
        if not keepdim and h.dim() < x.dim():
            for dim in dims:
                h = h.unsqueeze(dim)
        return h.expand(x.shape)

    return n - correction, d, mean_error + u * (d + mean_error), spread


def var(args: tuple[Any, ...], kwargs: dict[str, Any], y: torch.Tensor, h: torch.Tensor):
    """``2·|h|·(2/(n − c))·(Δd + 3u·(|d| + Δd))``, ``d = x − mean``: the single-device gradient
    is ``h·2·d/(n − c)``, ``d`` within ``Δd`` and three products rounding once each; infinite
    where ``n ≤ c``."""
    divisor, d, dd, spread = _variance_parts(args, kwargs, y)
    if divisor <= 0:
        return [torch.full(args[0].shape, math.inf, dtype=torch.float64)]
    u = torch.finfo(y.dtype).eps / 2
    one = spread(h.double().abs()) * (2 / divisor) * (dd + 3 * u * (d + dd))
    return [(2 * one).reshape(args[0].shape)]


def std(args: tuple[Any, ...], kwargs: dict[str, Any], y: torch.Tensor, h: torch.Tensor):
    """``var``'s bound for the upstream ``h/(2y)``, plus ``|g|·(δ/(|y| − δ) + 2u)``: the
    single-device gradient is ``var``'s of ``h/(2y)``, ``y`` within DT-OP-10's ``δ``; infinite
    where ``|y| ≤ δ`` or ``n ≤ c``."""
    divisor, d, dd, spread = _variance_parts(args, kwargs, y)
    if divisor <= 0:
        return [torch.full(args[0].shape, math.inf, dtype=torch.float64)]
    u = torch.finfo(y.dtype).eps / 2
    e = y.double()
    delta = composite_bounds.std_bound(args, kwargs, y).double()
    relative = torch.where(e.abs() > delta, delta / (e.abs() - delta), math.inf) + 2 * u
    upstream = spread((h.double() / (2 * e)).abs())
    own = upstream * (2 / divisor) * (dd + 3 * u * (d + dd))
    through_y = upstream * (2 / divisor) * (d + dd) * spread(relative)
    return [(2 * (own + through_y)).nan_to_num(nan=math.inf).reshape(args[0].shape)]


def layer_norm(args: tuple[Any, ...], kwargs: dict[str, Any], y: torch.Tensor, h: torch.Tensor):
    """The bounds of the gradients of ``x``, ``weight`` and ``bias``, each twice one
    evaluation's error. With ``z = (x − μ)·r`` within DT-OP-10's ``Δz`` and ``r`` within
    ``ρ`` relative (``composite_bounds.layer_norm_parts``), ``v = h·w``: ``x``'s gradient
    ``r·t``, ``t = v − mean(v) − z·mean(v·z)``, is within ``r·Δt + r·ρ·(|t| + Δt) + u·r·|t|``,
    ``Δt`` from the two means' ``γ(n + 2)`` and ``Δz`` and the two subtractions' rounding;
    ``weight``'s ``Σ h·z`` over the other dims within ``Σ|h|·Δz + γ(m + 2)·Σ|h|·(|z| + Δz)``,
    ``bias``'s ``Σ h`` within ``γ(m + 2)·Σ|h|``."""
    x = args[0].double()
    weight = composite_bounds.optional(args, kwargs, 2, "weight", None)
    bias = composite_bounds.optional(args, kwargs, 3, "bias", None)
    z, dz, r, rho, dims = composite_bounds.layer_norm_parts(args, kwargs, y.dtype)
    u = torch.finfo(y.dtype).eps / 2
    n = math.prod(x.shape[d] for d in dims)
    g = h.double()
    w = torch.ones(()) if weight is None else weight.double()
    v = g * w
    mean_v = v.mean(dims, keepdim=True)
    d_mean_v = (gamma(n + 2, y.dtype) + u) * v.abs().mean(dims, keepdim=True)
    vz = v * z
    mean_vz = vz.mean(dims, keepdim=True)
    d_mean_vz = (v.abs() * dz).mean(dims, keepdim=True) + (gamma(n + 2, y.dtype) + u) * (
        v.abs() * (z.abs() + dz)
    ).mean(dims, keepdim=True)
    t = (v - mean_v - z * mean_vz).abs()
    dt = (
        u * v.abs() + d_mean_v + dz * (mean_vz.abs() + d_mean_vz) + z.abs() * d_mean_vz
        + 2 * u * (v.abs() + mean_v.abs() + (z * mean_vz).abs())
    )  # fmt: skip
    bounds = [2 * (r * dt + r * rho * (t + dt) + u * r * t)]
    m = x.numel() // n  # the elements each weight's and bias's gradient sums
    if weight is not None:
        spread = g.abs() * dz + gamma(m + 2, y.dtype) * g.abs() * (z.abs() + dz)
        bounds.append(2 * spread.sum_to_size(weight.shape))
    if bias is not None:
        bounds.append(2 * (gamma(m + 2, y.dtype) * g.abs()).sum_to_size(bias.shape))
    return [composite_bounds.free_where_nan(b) for b in bounds]


def rms_norm(args: tuple[Any, ...], kwargs: dict[str, Any], y: torch.Tensor, h: torch.Tensor):
    """The bounds of the gradients of ``x`` and ``weight``, each twice one evaluation's error.
    With ``r`` within ``ρ`` relative (``composite_bounds.rms_norm_parts``) and ``v = h·w``:
    ``x``'s gradient ``r·v − x·r³·M``, ``M = mean(v·x)`` within ``ΔM = (γ(n + 2) + u)·
    mean|v·x|``, is within ``|v|·r·(ρ + 2u) + |x|·r³·(|M|·(3ρ + 4u) + ΔM) + u·(r·|v| +
    |x|·r³·|M|)``; ``weight``'s ``Σ h·x·r`` over the other dims within ``Σ|h·x|·r·(ρ + 2u) +
    γ(m + 2)·Σ|h·x|·r``."""
    x = args[0].double()
    weight = composite_bounds.optional(args, kwargs, 2, "weight", None)
    r, rho, dims = composite_bounds.rms_norm_parts(args, kwargs, y.dtype)
    u = torch.finfo(y.dtype).eps / 2
    n = math.prod(x.shape[d] for d in dims)
    g = h.double()
    v = g * (torch.ones(()) if weight is None else weight.double())
    mean = (v * x).mean(dims, keepdim=True)
    d_mean = (gamma(n + 2, y.dtype) + u) * (v * x).abs().mean(dims, keepdim=True)
    cube = x.abs() * r**3
    one = (
        v.abs() * r * (rho + 2 * u) + cube * (mean.abs() * (3 * rho + 4 * u) + d_mean)
        + u * (r * v.abs() + cube * mean.abs())
    )  # fmt: skip
    bounds = [2 * one]
    if weight is not None:
        m = x.numel() // n  # the elements each weight's gradient sums
        terms = (g * x).abs() * r
        spread = terms * (rho + 2 * u) + gamma(m + 2, y.dtype) * terms
        bounds.append(2 * spread.sum_to_size(weight.shape))
    return [composite_bounds.free_where_nan(b) for b in bounds]


def _cross_entropy_loss(ls, target, weight, kwargs):
    """Cross entropy as the linear map of ``ls = log_softmax(x)`` it is (PyTorch's forms: index
    or probability targets, class weights, label smoothing, ignored targets, the three
    reductions), and the sum of the kept targets' weights, a mean's denominator (``None``
    over probability targets)."""
    reduction = kwargs.get("reduction", "mean")
    smoothing = float(kwargs.get("label_smoothing", 0.0))
    class_dim = 1 if ls.dim() > 1 else 0
    classes = ls.shape[class_dim]
    shape = [1] * ls.dim()
    shape[class_dim] = classes
    w = (torch.ones(classes, dtype=ls.dtype) if weight is None else weight).reshape(shape)
    if target.is_floating_point():
        p = target * (1 - smoothing) + smoothing / classes
        per_item = -(w * p * ls).sum(class_dim)
        count = ls.numel() // max(classes, 1)
        den = None
        total = per_item.sum() / count if reduction == "mean" else per_item.sum()
    else:
        kept = target != kwargs.get("ignore_index", -100)
        picked = target.masked_fill(~kept, 0).unsqueeze(class_dim)
        chosen = w.expand_as(ls).gather(class_dim, picked) * ls.gather(class_dim, picked)
        smooth = (w * ls).sum(class_dim) * smoothing / classes
        per_item = -(chosen.squeeze(class_dim) * (1 - smoothing) + smooth) * kept
        w_flat = w.flatten()
        den = (w_flat.gather(0, picked.flatten()) * kept.flatten()).sum()
        total = per_item.sum() / den if reduction == "mean" else per_item.sum()
    return (per_item if reduction == "none" else total), den


def cross_entropy(args: tuple[Any, ...], kwargs: dict[str, Any], y: torch.Tensor, h: torch.Tensor):
    """The bound of the logits' gradient: ``log_softmax``'s above for the upstream gradient
    ``q = ∂loss/∂ls`` (the linear map's adjoint, from autograd in float64), plus ``q``'s own
    error ``Δq = |q|·(γ(5) + ΔD/(D − ΔD))`` (five roundings of ``w``, the target, smoothing,
    ``h`` and the mean's ``1/D``, ``D`` within ``ΔD = 2γ(m + 2)·Σ|w|``) carried through it,
    ``2·(Δq + p·ΣΔq)``. A probability target's gradient ``−w·p'·ls·h/count`` is within
    ``2·|w·(1 − s)·h/count|·(δ + γ(5)·|ls|)``, ``δ`` the log-softmax's DT-OP-10 bound, and
    the class weights' (a sum over the items of ``−p·ls·h/count``) within twice those terms'
    errors and their sum's ``γ(items + 2)``; over index targets the class weights' gradient
    (a quotient's, for a mean) is not bounded (``None``)."""
    x, target = args[0], args[1]
    weight = kwargs.get("weight")
    class_dim = 1 if x.dim() > 1 else 0
    ls = torch.log_softmax(x, class_dim)
    wide = ls.detach().double().requires_grad_()
    loss, den = _cross_entropy_loss(wide, target.double() if target.is_floating_point()
                                    else target, None if weight is None else weight.double(),
                                    kwargs)  # fmt: skip
    (q,) = torch.autograd.grad((loss * h.double()).sum(), wide)
    relative = gamma(5, x.dtype)
    if den is not None and kwargs.get("reduction", "mean") == "mean":
        w_abs = torch.ones(x.shape[class_dim]) if weight is None else weight.double().abs()
        kept = target != kwargs.get("ignore_index", -100)
        picked = target.masked_fill(~kept, 0).flatten()
        den_error = (
            2
            * gamma(target.numel() + 2, x.dtype)
            * (w_abs.gather(0, picked) * kept.flatten()).sum()
        )
        room = den.abs() - den_error
        relative = relative + (den_error / room if room > 0 else math.inf)
    dq = q.abs() * relative
    p = ls.detach().double().exp()
    (through,) = log_softmax((x, class_dim), {}, ls.detach(), q)
    carried = 2 * (dq + p * dq.sum(class_dim, keepdim=True))
    bounds = [composite_bounds.free_where_nan(through + carried).reshape(x.shape)]
    if not target.is_floating_point():
        return bounds + ([None] if weight is not None else [])
    smoothing = float(kwargs.get("label_smoothing", 0.0))
    classes = x.shape[class_dim]
    delta = composite_bounds.log_softmax_bound((x, class_dim), {}, ls.detach()).double()
    shape = [1] * x.dim()
    shape[class_dim] = classes
    w_abs = torch.ones(()) if weight is None else weight.double().abs().reshape(shape)
    reduction = kwargs.get("reduction", "mean")
    items = x.numel() // classes
    g = h.double().abs() / (items if reduction == "mean" else 1)
    g = g.unsqueeze(class_dim) if reduction == "none" else g
    lsd = ls.detach().double().abs()
    bounds.append(2 * w_abs * (1 - smoothing) * g * (delta + relative * lsd))
    if weight is not None:
        # Σ over the items of −p·ls·h/N, p the smoothed target: each term within
        # |p·h/N|·(δ + γ(5)·|ls|), their sum within γ(items + 2) of its terms' size
        p_abs = (target.double() * (1 - smoothing) + smoothing / classes).abs()
        terms = p_abs * g
        spread = terms * (delta + relative * lsd) + gamma(items + 2, x.dtype) * terms * lsd
        bounds.append(2 * spread.sum_to_size(shape).reshape(weight.shape))
    return bounds


BOUNDS: dict[str, Callable[..., list[torch.Tensor]]] = {
    "softmax": softmax,
    "log_softmax": log_softmax,
    "var": var,
    "std": std,
    "nn.functional.layer_norm": layer_norm,
    "nn.functional.rms_norm": rms_norm,
    "nn.functional.cross_entropy": cross_entropy,
}


def bounds(
    op: str, args: tuple[Any, ...], kwargs: dict[str, Any], y: torch.Tensor, h: torch.Tensor
) -> list[torch.Tensor | None]:
    """``BOUNDS[op]``'s bounds, one per tensor argument in order (``None`` for an integer one,
    or one whose gradient no bound here covers); zeros where the result is empty, whose
    gradients are empty or sums of nothing (exactly zero)."""
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if y.numel():
        found = iter(BOUNDS[op](args, kwargs, y, h))
    else:
        found = iter(torch.zeros(t.shape, dtype=torch.float64) for t in tensors)
    return [next(found) if t.is_floating_point() else None for t in tensors]
