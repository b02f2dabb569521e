"""DT-OP-10's bounds: how far a composite op's output may lie from the single-device result
(spec/dt-ops.md, "Composite ops").

A composite op (a softmax, a variance, a normalisation, a loss) chains reductions and
elementwise kernels; any order of its sums, and any split of its reductions across shards, gives
a result within a bound of the exact value that follows from the steps' own error bounds. Each
function here computes, from the single-device sample and result, the bound on the difference of
two such results (twice the bound on one), element by element, in float64. An element whose
bound is ``inf`` is not constrained: its exact value is so ill-conditioned that a correct result
may be anything, NaN included (a variance plus a negative ``eps`` whose sign rounding decides).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from conformance.oracle.dt_ops import gamma

INF = math.inf


def bound(op: str, args: tuple[Any, ...], kwargs: dict[str, Any], expected: torch.Tensor):
    """The bound for ``op(*args, **kwargs)`` whose single-device result is ``expected``."""
    if expected.numel() == 0:
        return torch.zeros(expected.shape, dtype=torch.float64)
    return BOUNDS[op](args, kwargs, expected)


def _eps(expected: torch.Tensor) -> tuple[float, float]:
    info = torch.finfo(expected.dtype)
    return info.eps, info.tiny


def free_where_nan(b: torch.Tensor) -> torch.Tensor:
    """A bound that came out NaN (an infinite input's ``inf - inf``) constrains nothing."""
    return torch.where(b.isnan(), INF, b)


def _softmax_terms(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``x`` in float64 (0-d as 1-element), its max along ``dim``, and the length ``n``."""
    x = x.double().reshape(1) if x.dim() == 0 else x.double()
    return x, x.amax(dim, keepdim=True), x.shape[dim]


def softmax_bound(args, kwargs, expected):
    """``(eps·(t + 2n + 64) + 4γ(n+2)) · max(e, tiny)``, ``t = max(x) − x`` along ``dim``: the
    relative error of ``exp(x − max)`` grows with ``t`` (the subtraction's rounding), the sum
    of ``n`` positive terms is within ``γ(n)`` of its value, rescaled partial sums add a few ulp."""
    x, top, n = _softmax_terms(args[0], args[1])
    eps, tiny = _eps(expected)
    e = expected.double().reshape(x.shape)
    b = (eps * ((top - x) + 2 * n + 64) + 4 * gamma(n + 2, expected.dtype)) * e.clamp(min=tiny)
    return free_where_nan(b).reshape(expected.shape)


def log_softmax_bound(args, kwargs, expected):
    """``eps·(2|x| + 4|max| + 2|e| + 4 log n + 2n + 64) + 4γ(n+2)``: an absolute bound, each
    subtraction rounding at the size of its operands, the log of a sum within ``γ(n)`` plus a
    few ulp of ``1 + |log n|``."""
    x, top, n = _softmax_terms(args[0], args[1])
    eps, _ = _eps(expected)
    e = expected.double().reshape(x.shape)
    size = 2 * x.abs() + 4 * top.abs() + 2 * e.abs() + 4 * math.log(n) + 2 * n + 64
    b = eps * size + 4 * gamma(n + 2, expected.dtype)
    return free_where_nan(b).reshape(expected.shape)


def variance_form(args, kwargs) -> tuple[torch.Tensor, tuple[int, ...], bool, float]:
    """``var``/``std``'s input, reduced dims, ``keepdim`` and correction, from a call written
    with keywords (OpInfo's form); a positional form is an error of the suite, not a verdict."""
    if len(args) != 1:
        raise ValueError(f"var/std samples are read by keyword; got positional {args[1:]!r}")
    x = args[0]
    dim = kwargs.get("dim")
    dims = tuple(range(x.dim())) if dim is None else (dim,) if isinstance(dim, int) else dim
    if "unbiased" in kwargs:
        correction = 1.0 if kwargs["unbiased"] else 0.0
    else:
        given = kwargs.get("correction")
        correction = 1.0 if given is None else float(given)
    return x, dims, bool(kwargs.get("keepdim", False)), correction


def _variance_error(args, kwargs, expected_var: torch.Tensor) -> torch.Tensor:
    """``8γ(n+2) · Σx² / max(0, n − c) + 2·eps·|var|``: every standard variance algorithm
    (two-pass, Welford's updates, the textbook one-pass, Chan's combination of shards' moments)
    is within ``n·u·κ²·S = n·u·Σx²`` of the exact sum of squared deviations ``S`` to first order
    (Chan, Golub and LeVeque 1983); 4 of it per result covers the second-order terms."""
    x, dims, keepdim, correction = variance_form(args, kwargs)
    x = x.double()
    n = math.prod(x.shape[d] for d in dims) if x.dim() else 1
    squares = (x * x).sum(dim=dims, keepdim=keepdim) if x.dim() else x * x
    divisor = max(0.0, n - correction)
    eps, _ = _eps(expected_var)
    scale = squares / divisor if divisor else torch.full_like(squares, INF)
    b = 8 * gamma(n + 2, expected_var.dtype) * scale
    return b.reshape(expected_var.shape) + 2 * eps * expected_var.double().abs()


def var_bound(args, kwargs, expected):
    return free_where_nan(_variance_error(args, kwargs, expected))


def std_bound(args, kwargs, expected):
    """``2·min(√B, B/e) + 4·eps·e``, ``B`` the variance's bound: ``|√a − √b| ≤ √|a − b|`` and
    ``≤ |a − b| / √b``, and each square root rounds once."""
    e = expected.double()
    var_b = _variance_error(args, kwargs, expected.detach().double().square().to(expected.dtype))
    eps, _ = _eps(expected)
    over_e = torch.where(e > 0, var_b / e, INF)
    return free_where_nan(2 * torch.minimum(var_b.sqrt(), over_e) + 4 * eps * e)


def optional(args, kwargs, position: int, name: str, default: Any) -> Any:
    if len(args) > position:
        return args[position]
    return kwargs.get(name, default)


def _rsqrt_error(mean_square, mean_square_error, eps_term, eps):
    """``r = |D|^(-1/2)`` for ``D = mean + eps_term``, and a bound on the relative error of two
    computed ``r``: ``2q + 8·eps`` for ``q = ΔD/|D| ≤ 1/2``, ``inf`` where ``D``'s sign or size
    is not known to within a half."""
    d = mean_square + eps_term
    q = mean_square_error / d.abs()
    rho = torch.where(q <= 0.5, 2 * q + 8 * eps, INF)
    return d.abs().rsqrt(), rho


def layer_norm_parts(args, kwargs, dtype: torch.dtype):
    """``z = (x − μ)·r`` in float64, its bound ``Δz = Δμ·r + |x − μ|·r·(ρ + 2eps)``, ``r`` and
    its relative error ``ρ`` (``_rsqrt_error``), and the normalised dims: ``Δμ = 2γ(n+1)
    mean|x|`` and ``Δv = 8γ(n+2) mean x²`` over them. DT-GRAD-9 reads them too."""
    x, shape = args[0].double(), tuple(args[1])
    ln_eps = float(optional(args, kwargs, 4, "eps", 1e-5))
    dims = tuple(range(x.dim() - len(shape), x.dim()))
    n = math.prod(shape)
    eps = torch.finfo(dtype).eps
    mu = x.mean(dims, keepdim=True)
    centred = x - mu
    v = (centred * centred).mean(dims, keepdim=True)
    d_mu = 2 * gamma(n + 1, dtype) * x.abs().mean(dims, keepdim=True)
    d_v = 8 * gamma(n + 2, dtype) * (x * x).mean(dims, keepdim=True)
    r, rho = _rsqrt_error(v, d_v, ln_eps, eps)
    dz = d_mu * r + centred.abs() * r * (rho + 2 * eps)
    return centred * r, dz, r, rho, dims


def layer_norm_bound(args, kwargs, expected):
    """``|w|·Δz + 4eps·(|z·w| + |b|)`` per element (``layer_norm_parts``)."""
    weight = optional(args, kwargs, 2, "weight", None)
    bias = optional(args, kwargs, 3, "bias", None)
    eps, _ = _eps(expected)
    z, dz, _r, _rho, _dims = layer_norm_parts(args, kwargs, expected.dtype)
    w = torch.ones(()) if weight is None else weight.double().abs()
    b = torch.zeros(()) if bias is None else bias.double().abs()
    return free_where_nan(w * dz + 4 * eps * ((z * w).abs() + b))


def rms_norm_parts(args, kwargs, dtype: torch.dtype):
    """``r = (mean x² + eps)^(-1/2)`` over the normalised dims, its relative error ``ρ``
    (``_rsqrt_error``) and those dims: the mean of squares is a sum of ``n`` positive terms
    (``Δ = 2γ(n+1)·mean x²``), and ``eps`` defaults to the dtype's own. DT-GRAD-9 reads them
    too."""
    x, shape = args[0].double(), tuple(args[1])
    eps = torch.finfo(dtype).eps
    given = optional(args, kwargs, 3, "eps", None)
    rms_eps = eps if given is None else float(given)
    dims = tuple(range(x.dim() - len(shape), x.dim()))
    n = math.prod(shape)
    square = (x * x).mean(dims, keepdim=True)
    r, rho = _rsqrt_error(square, 2 * gamma(n + 1, dtype) * square, rms_eps, eps)
    return r, rho, dims


def rms_norm_bound(args, kwargs, expected):
    """``|w|·|x|·r·(ρ + 2eps) + 4eps·|e|`` (``rms_norm_parts``)."""
    weight = optional(args, kwargs, 2, "weight", None)
    eps, _ = _eps(expected)
    r, rho, _dims = rms_norm_parts(args, kwargs, expected.dtype)
    w = torch.ones(()) if weight is None else weight.double().abs()
    x = args[0].double()
    return free_where_nan(w * x.abs() * r * (rho + 2 * eps) + 4 * eps * expected.double().abs())


def _ratio(numerator_error, denominator, denominator_error, expected, eps):
    """The bound on ``N/D`` from bounds on ``N`` and ``D``: ``(ΔN + |e|·ΔD) / (|D| − ΔD) +
    2eps|e|``, ``inf`` where ``D`` may be zero."""
    e = expected.double().abs()
    room = denominator.abs() - denominator_error
    b = torch.where(room > 0, (numerator_error + e * denominator_error) / room, INF)
    return b + 2 * eps * e


def nll_loss_bound(args, kwargs, expected):
    """``reduction="none"`` selects and scales once: 0 (exact). ``"sum"``: ``6γ(n+2)·Σ|w·x|``.
    ``"mean"``: that sum over ``Σw``, itself within ``2γ(n+2)·Σ|w|``, by ``_ratio``."""
    x, target = args[0].double(), args[1]
    weight = kwargs.get("weight")
    reduction = kwargs.get("reduction", "mean")
    ignore = kwargs.get("ignore_index", -100)
    eps, _ = _eps(expected)
    if reduction == "none":
        return torch.zeros(expected.shape, dtype=torch.float64)
    w = torch.ones(x.shape[1] if x.dim() > 1 else x.shape[0], dtype=torch.float64)
    w = w if weight is None else weight.double()

    def total(values, weights):
        return F.nll_loss(-values, target, weight=weights, ignore_index=ignore, reduction="sum")

    g = gamma(target.numel() + 2, expected.dtype)
    numerator_error = 6 * g * total(x.abs(), w.abs())
    if reduction == "sum":
        return numerator_error.reshape(expected.shape)
    ones = torch.ones_like(x)
    den, den_error = total(ones, w), 2 * g * total(ones, w.abs())
    return _ratio(numerator_error, den, den_error, expected, eps).reshape(expected.shape)


def cross_entropy_bound(args, kwargs, expected):
    """``log_softmax`` along the class dim, each element within its DT-OP-10 bound ``δ``, then a
    linear map ``L`` (the targets' weights, label smoothing, the reduction): ``|L|(δ) +
    6γ(K+2)·|L|(|ls|)``, ``|L|`` the map with its coefficients' absolute values and ``K`` the
    terms it sums; a ``"mean"`` over index targets divides by ``Σw`` (``_ratio``)."""
    x, target = args[0], args[1]
    weight = kwargs.get("weight")
    reduction = kwargs.get("reduction", "mean")
    ignore = kwargs.get("ignore_index", -100)
    smoothing = float(kwargs.get("label_smoothing", 0.0))
    class_dim = 1 if x.dim() > 1 else 0
    classes = x.shape[class_dim]
    eps, _ = _eps(expected)
    ls = torch.log_softmax(x.double(), class_dim)
    delta = log_softmax_bound((x, class_dim), {}, ls.to(expected.dtype))
    w = torch.ones(classes, dtype=torch.float64) if weight is None else weight.double()
    shape = [1] * x.dim()
    shape[class_dim] = classes
    w_c = w.abs().reshape(shape)
    if target.is_floating_point():
        p = target.double() * (1 - smoothing) + smoothing / classes

        def absolute(v):
            return (w_c * p.abs() * v).sum(class_dim)

        count = x.numel() // max(classes, 1)
        den, den_error = torch.tensor(float(count), dtype=torch.float64), 0.0
    else:
        kept = target != ignore
        picked = target.masked_fill(~kept, 0).unsqueeze(class_dim)

        def absolute(v):
            chosen = w_c.expand_as(v).gather(class_dim, picked) * v.gather(class_dim, picked)
            smooth = (w_c * v).sum(class_dim) * smoothing / classes
            return (chosen.squeeze(class_dim) * (1 - smoothing) + smooth) * kept

        selected = w.gather(0, picked.flatten())[kept.flatten()]
        den = selected.sum() if weight is not None else kept.sum().double()
        den_error = 2 * gamma(target.numel() + 2, expected.dtype) * selected.abs().sum()
    terms = classes + target.numel()
    per_item = absolute(delta) + 6 * gamma(terms + 2, expected.dtype) * absolute(ls.abs())
    if reduction == "none":
        return free_where_nan(per_item).reshape(expected.shape)
    numerator_error = per_item.sum()
    if reduction == "sum":
        return free_where_nan(numerator_error).reshape(expected.shape)
    ratio = _ratio(numerator_error, den, den_error, expected, eps)
    return free_where_nan(ratio).reshape(expected.shape)


BOUNDS: dict[str, Callable[..., torch.Tensor]] = {
    "softmax": softmax_bound,
    "log_softmax": log_softmax_bound,
    "var": var_bound,
    "std": std_bound,
    "nn.functional.layer_norm": layer_norm_bound,
    "nn.functional.rms_norm": rms_norm_bound,
    "nn.functional.nll_loss": nll_loss_bound,
    "nn.functional.cross_entropy": cross_entropy_bound,
}
