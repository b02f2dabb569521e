"""Random draws on DTensors (spec/dt-random.md): what a draw's values may be, how likely a
correct draw is to look like a repeated stream, and the single-device draw that parity means.

A random value is never compared with an expected one, except under parity (DT-RAND-7), whose
expected value is torch's own single-device call. The other rules judge properties every correct
draw has (DT-RAND-2, 3, 5, 6) or has except by a chance this module bounds (DT-RAND-4).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from conformance.oracle.tensors import make_global
from conformance.oracle.tolerance import partition_tolerance

FACTORIES = ("rand", "randn")
IN_PLACE = ("uniform_", "normal_", "bernoulli_")
CALLS = (*FACTORIES, *IN_PLACE, "dropout", "rand_like", "randn_like")
CONTINUOUS = ("rand", "randn", "rand_like", "randn_like", "uniform_", "normal_")

# DT-RAND-4 compares where a correct draw looks repeated with at most this probability.
CHANCE = 2.0**-40


def input_value(shape: list[int], dtype: str, seed: int) -> torch.Tensor:
    """The value of a random op's DTensor input: the seeded tensor, made ``>= 1`` in magnitude so
        that ``dropout`` zeroes an element only where its mask does (any floating dtype: the float64
    one rounded to it)."""
    kind = getattr(torch, dtype)
    if not kind.is_floating_point:
        return make_global(shape, dtype, seed)
    return (make_global(shape, "float64", seed).abs() + 1).to(kind)


def distribution(call: str, params: list[float]) -> tuple[str, ...]:
    """The call's distribution (spec/dt-random.md's table): ``("uniform", a, b)``,
    ``("normal", mean, std)``, ``("bernoulli", p)`` or ``("dropout", p)``."""
    if call in ("rand", "rand_like"):
        return ("uniform", 0.0, 1.0)
    if call in ("randn", "randn_like"):
        return ("normal", 0.0, 1.0)
    if call == "uniform_":
        return ("uniform", *params) if params else ("uniform", 0.0, 1.0)
    if call == "normal_":
        return ("normal", *params) if params else ("normal", 0.0, 1.0)
    return ("bernoulli" if call == "bernoulli_" else "dropout", params[0])


def outside_support(
    call: str,
    params: list[float],
    value: torch.Tensor,
    x: torch.Tensor | None,
    partial_sums: list[int],
) -> torch.Tensor:
    """DT-RAND-3: the elements of ``value`` (a result's logical value) outside its call's
        support, as a mask. Where the layout holds ``P(sum)`` over mesh dims of ``partial_sums``
        sizes, an element may be off by DT-REDIST-8's rounding of re-summed parts (``slack``);
        ``dropout``'s nonzero elements are ``x / (1 - p)`` as a kernel rounds the scale and the
        product, and a partial input's parts scaled one by one and summed (each step within
    ``eps / 2`` of what it rounds; ``8 eps`` bounds them with room, as DT-OP-2 does)."""
    kind, *args = distribution(call, params)
    v = value.to(torch.float64)
    slack = _slack(value, partial_sums)
    if kind == "uniform":
        a, b = args
        return (v < a - slack) | (v > b + slack) | v.isnan()
    if kind == "normal":
        return ~v.isfinite()
    if kind == "bernoulli":
        return ((v - 0).abs() > slack) & ((v - 1).abs() > slack) | v.isnan()
    (p,) = args
    scaled = x.to(torch.float64) / (1 - p)
    tolerance = 8 * torch.finfo(value.dtype).eps * scaled.abs() + slack
    return (v.abs() > slack) & ((v - scaled).abs() > tolerance) | v.isnan()


def parity_bound(expected: torch.Tensor, partial_sums: list[int], scaled: bool) -> torch.Tensor:
    """DT-RAND-7's bound on a value's distance from the single-device draw ``expected``: the
    rounding of parts re-summed over ``P(sum)`` mesh dims of ``partial_sums`` sizes
    (DT-REDIST-8), and for ``dropout`` (``scaled``) of a partial input's parts scaled one by one
    before they are summed (``8 eps |e|``, as ``outside_support``)."""
    bound = _slack(expected, partial_sums)
    if scaled and partial_sums:
        bound = bound + 8 * torch.finfo(expected.dtype).eps * expected.to(torch.float64).abs()
    return bound


def _slack(value: torch.Tensor, partial_sums: list[int]) -> torch.Tensor:
    if not value.is_floating_point() or not partial_sums:
        return torch.zeros(value.shape, dtype=torch.float64)
    n, m = math.prod(partial_sums), sum(1 for k in partial_sums if k > 1)
    eps = torch.finfo(value.dtype).eps
    return partition_tolerance([value] * n, n, m) + eps * value.to(torch.float64).abs()


def element_chance(call: str, params: list[float], dtype: str) -> float:
    """The most probability a correct draw puts on any one value of an element (or of its
    dropout mask): for a continuous draw, the density's maximum times the widest rounding
    interval of the dtype over the values it reaches (``eps * M``; a normal's values beyond
    ``|mean| + 10 std`` have probability below 2^-70), plus one step of the generator's own
    uniform (2^-53 for float64, 2^-24 below); ``max(p, 1 - p)`` for a mask."""
    kind, *args = distribution(call, params)
    if kind in ("bernoulli", "dropout"):
        return max(args[0], 1 - args[0])
    eps = torch.finfo(getattr(torch, dtype)).eps
    step = 2.0**-53 if dtype == "float64" else 2.0**-24
    if kind == "uniform":
        a, b = args
        return eps * max(abs(a), abs(b)) / (b - a) + step
    mean, std = args
    return eps * (abs(mean) + 10 * std) * 0.4 / std + step


def parts_comparable(call: str, params: list[float], dtype: str, elements: int) -> bool:
    """DT-RAND-4's first clause: whether two parts of ``elements`` elements each may be
    compared, a correct draw making them equal with probability at most ``CHANCE``."""
    p = element_chance(call, params, dtype)
    return elements > 0 and p < 1 and elements * math.log2(p) <= math.log2(CHANCE)


def values_comparable(call: str, params: list[float], dtype: str, elements: int) -> bool:
    """DT-RAND-4's second clause: whether a float64 continuous draw of ``elements`` elements
    may be required to repeat no value, its ``elements^2 / 2`` pairs tying with probability at
    most ``CHANCE`` in all."""
    if call not in CONTINUOUS or dtype != "float64":
        return False
    return elements * (elements - 1) / 2 * element_chance(call, params, dtype) <= CHANCE


def single_device(
    call: str,
    params: list[float],
    shape: list[int],
    dtype: str,
    seed: int,
    x: torch.Tensor | None,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DT-RAND-7: the single-device call after ``torch.manual_seed(seed)`` on ``device``, and
    the ``torch.rand(8)`` that follows it; the driver's own generators are left as they were."""
    kind = getattr(torch, dtype)
    if device.type == "cpu":
        forked = torch.random.fork_rng(devices=[])
    else:  # the accelerator's generator is forked beside the CPU's
        forked = torch.random.fork_rng(devices=[device], device_type=device.type)
    with forked:
        torch.manual_seed(seed)
        if call in FACTORIES:
            drawn = getattr(torch, call)(shape, dtype=kind, device=device)
        elif call == "dropout":
            drawn = F.dropout(x.to(device), params[0])
        else:
            like = torch.empty(shape, dtype=kind, device=device)
            drawn = getattr(like, call)(*params) if call in IN_PLACE else getattr(torch, call)(like)
        after = torch.rand(8, device=device)
    return drawn.cpu(), after.cpu()
