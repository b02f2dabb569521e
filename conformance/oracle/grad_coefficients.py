"""DT-GRAD-8's table: for each elementwise op whose derivative goes through a kernel's own error,
the magnitude ``M`` that bounds how far two correct evaluations of its derivative ``c = ∂y/∂x``
may differ at one element (``128·u·M`` apart, spec/dt-grad.md).

``M`` is the largest value among the quantities a natural evaluation of ``c`` computes: the forward
result ``y`` where the derivative reads it (``tanh``'s ``1 − y²``, which cancels where ``y``
rounds near 1, so ``M = 1 + y²``, not ``|c|``), the sum before a cancellation (``gelu``'s
``Φ(x)``, computed as ``(1 + erf(x/√2)) / 2``), and the growth of an argument's rounding through
an exponential (``erf``'s ``exp(−x²)``: ``2x²`` times ``|c|``). Each entry takes the op's
floating arguments and its result, in float64 and broadcast to the result's shape, and its
keyword arguments, and returns ``M`` for each floating argument, in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

Magnitudes = Callable[[list[torch.Tensor], torch.Tensor, dict], list[torch.Tensor]]

_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_GELU_CUBIC = 0.044715


def _ones(y: torch.Tensor) -> torch.Tensor:
    return torch.ones_like(y)


def _gelu(xs: list[torch.Tensor], y: torch.Tensor, kwargs: dict) -> list[torch.Tensor]:
    (x,) = xs
    if kwargs.get("approximate", "none") == "tanh":
        # y = x/2 · (1 + t), t = tanh(k(x + a·x³)): the derivative adds (1 + t)/2 and
        # x/2 · (1 − t²) · k(1 + 3a·x²), each read from t, which rounds with its argument.
        inner = _SQRT_2_OVER_PI * (x + _GELU_CUBIC * x**3)
        t = torch.tanh(inner)
        slope = _SQRT_2_OVER_PI * (1 + 3 * _GELU_CUBIC * x**2)
        return [(1 + x.abs() * slope * (1 + t**2)) * (1 + inner.abs())]
    # y = x·Φ(x): the derivative Φ(x) + x·φ(x), Φ a sum (1 + erf) / 2 that cancels for x < 0.
    density = torch.exp(-(x**2) / 2) / math.sqrt(2 * math.pi)
    return [1 + x.abs() * density * (1 + x**2)]


def _silu(xs: list[torch.Tensor], y: torch.Tensor, kwargs: dict) -> list[torch.Tensor]:
    (x,) = xs
    s = torch.sigmoid(x)
    return [s * (1 + x.abs() * (1 + s))]  # σ · (1 + x·(1 − σ)), 1 − σ cancelling for x > 0


def _pow(xs: list[torch.Tensor], y: torch.Tensor, kwargs: dict) -> list[torch.Tensor]:
    # ∂/∂x = p·x^(p−1), ∂/∂p = y·ln x; a power rounds as exp(q·ln x) does, q·ln x times u.
    x, p = xs
    log = x.abs().log().abs()
    base = (p * x.abs() ** (p - 1)).abs() * (1 + (p.abs() + 1) * log)
    exponent = (y * log).abs() * (1 + p.abs() * log) + y.abs()
    return [base, exponent]


def _atan2(xs: list[torch.Tensor], y: torch.Tensor, kwargs: dict) -> list[torch.Tensor]:
    a, b = xs
    both = (a.abs() + b.abs()) / (a**2 + b**2)  # b/(a² + b²) and −a/(a² + b²)
    return [both, both]


def _xlogy(xs: list[torch.Tensor], y: torch.Tensor, kwargs: dict) -> list[torch.Tensor]:
    x, other = xs
    return [other.log().abs(), (x / other).abs()]  # ln(other), x / other


COEFFICIENTS: dict[str, Magnitudes] = {
    "exp": lambda xs, y, kw: [y.abs()],
    "exp2": lambda xs, y, kw: [y.abs()],  # y · ln 2
    "expm1": lambda xs, y, kw: [y.abs() + 1],  # y + 1
    "rsqrt": lambda xs, y, kw: [y.abs() ** 3],  # −y³ / 2
    "sin": lambda xs, y, kw: [_ones(y)],  # cos x, at most 1
    "cos": lambda xs, y, kw: [_ones(y)],  # −sin x
    "tan": lambda xs, y, kw: [1 + y**2],  # 1 + y²
    "tanh": lambda xs, y, kw: [1 + y**2],  # 1 − y²
    "sigmoid": lambda xs, y, kw: [y.abs() * (1 + y.abs())],  # y · (1 − y)
    "erf": lambda xs, y, kw: [
        2 / math.sqrt(math.pi) * torch.exp(-(xs[0] ** 2)) * (1 + 2 * xs[0] ** 2)
    ],
    "sinh": lambda xs, y, kw: [torch.cosh(xs[0])],  # cosh x
    "cosh": lambda xs, y, kw: [torch.cosh(xs[0])],  # sinh x, which cancels near 0
    "asinh": lambda xs, y, kw: [(xs[0] ** 2 + 1).rsqrt()],  # 1 / √(x² + 1)
    "hypot": lambda xs, y, kw: [_ones(y), _ones(y)],  # a / y and b / y, at most 1
    "atan2": _atan2,
    "xlogy": _xlogy,
    "pow": _pow,
    "nn.functional.gelu": _gelu,
    "nn.functional.silu": _silu,
}
