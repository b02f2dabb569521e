"""Operators on ShardedTensors (spec/st-ops.md): what each call on the arguments' values gives
on one device, the second argument a case builds from the first, and the support of a draw.

The single-device op is torch's own, applied to the values (ST-OP-1, 2, 5, 11, 15). Random draws
are judged by the support and chance bounds of ``dt_random``, a ShardedTensor draw read as the
DTensor call with the same distribution.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from conformance.oracle import dt_random
from conformance.oracle.tensors import make_global

COMPARISONS = ("equal", "allclose")
SHARD_WISE = ("clone", "detach", "contiguous", "type_as", "requires_grad_")
LIKE = ("empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like")
INIT = ("constant_", "uniform_", "normal_", "kaiming_uniform_")
OPS = (*COMPARISONS, *SHARD_WISE, "copy_", *LIKE, *INIT)
RANDOM = ("rand_like", "randn_like", "uniform_", "normal_", "kaiming_uniform_")
# The ops whose second argument is a ShardedTensor (type_as: where ``params["sharded"]``).
BINARY = (*COMPARISONS, "copy_", "type_as")

# How the second tensor's value is made from the first's (``other_value``).
RELATIONS = (
    "same",
    "one element differs",
    "scaled",
    "a nan in both",
    "another draw",
    "another size",
)


def value_of(shape: list[int], dtype: str, seed: int) -> torch.Tensor:
    """The seeded value of ``x``; bfloat16 as the float64 one rounded to it."""
    if dtype == "bfloat16":
        return make_global(shape, "float64", seed).to(torch.bfloat16)
    return make_global(shape, dtype, seed)


def other_shape(shape: list[int], relation: str) -> list[int]:
    """The second argument's size: ``shape``, or one more row for "another size"."""
    if relation != "another size":
        return list(shape)
    return [shape[0] + 1, *shape[1:]] if shape else [1]


def other_value(
    value: torch.Tensor, relation: str, dtype: str, where: int, scale: float
) -> torch.Tensor:
    """The second argument's value: ``value`` as ``dtype``; with its element ``where`` (flat,
    modulo the size) increased by one; times ``1 + scale``; with a NaN at ``where`` in both
    (``with_nan`` makes the first's); another seeded tensor (``where`` its seed); or of another
    size (``other_shape``)."""
    kind = getattr(torch, dtype)
    if relation in ("another size", "another draw"):
        return value_of(other_shape(list(value.shape), relation), dtype, where)
    out = value.clone().to(kind)
    if relation == "same" or not out.numel():
        return out
    flat = out.view(-1)
    i = where % flat.numel()
    if relation == "one element differs":
        flat[i] = (flat[i] == 0).to(kind) if kind == torch.bool else flat[i] + 1
    elif relation == "scaled" and out.is_floating_point():
        out = (value.to(torch.float64) * (1 + scale)).to(kind)
    elif relation == "a nan in both" and out.is_floating_point():
        flat[i] = math.nan
    return out


def with_nan(value: torch.Tensor, relation: str, where: int) -> torch.Tensor:
    """The first argument's value under ``relation``: a NaN at ``where`` for "a nan in both"."""
    if relation != "a nan in both" or not value.is_floating_point() or not value.numel():
        return value
    out = value.clone()
    out.view(-1)[where % out.numel()] = math.nan
    return out


def inputs(
    shape: list[int], dtype: str, seed: int, other: dict[str, Any] | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The values of a case's ``x`` and second tensor (``other``: its relation, dtype, position
    and scale), as the ranks build them."""
    x = value_of(shape, dtype, seed)
    if other is None:
        return x, None
    relation, where = other["relation"], other["where"]
    y = other_value(x, relation, other["dtype"], where, other["scale"])
    return with_nan(x, relation, where), y


def single_device(op: str, x: torch.Tensor, params: dict[str, Any], other: Any) -> Any:
    """The op on the values, on one device: a bool, a tensor, or the exception type's name where
    torch refuses it (ST-OP-15). ``other`` is the second argument's value (a tensor), if any.
    Random draws and ``empty_like`` give their tensor (its dtype and ``requires_grad`` are what
    is judged)."""
    x = x.clone().requires_grad_(params.get("x_requires_grad", False))
    try:
        with torch.random.fork_rng(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # kaiming_uniform_ of no elements says it does nothing
            return _call(op, x, params, other)
    except Exception as exc:  # the single-device verdict is data here
        return type(exc).__name__


def _call(op: str, x: torch.Tensor, params: dict[str, Any], other: Any) -> Any:
    if op == "equal":
        return torch.equal(x, other)
    if op == "allclose":
        return torch.allclose(x, other, params["rtol"], params["atol"], params["equal_nan"])
    if op == "type_as":
        return x.type_as(torch.zeros(0, dtype=getattr(torch, params["dtype"])))
    if op == "requires_grad_":
        return x.detach().requires_grad_(params["flag"])
    if op in ("clone", "detach", "contiguous"):
        return getattr(x, op)()
    if op == "copy_":  # into a leaf that requires grad: refused
        return x.copy_(other)
    if op in LIKE:
        options = like_options(params)
        fill = [params["fill"]] if op == "full_like" else []
        return getattr(torch, op)(x, *fill, **options)
    x = x.detach()
    if op == "constant_":
        return torch.nn.init.constant_(x, params["val"])
    if op == "uniform_":
        return torch.nn.init.uniform_(x, params["a"], params["b"])
    if op == "normal_":
        return torch.nn.init.normal_(x, params["mean"], params["std"])
    return torch.nn.init.kaiming_uniform_(x, **kaiming_options(params))


def like_options(params: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of a ``*_like`` call: ``dtype`` where given, ``requires_grad``."""
    options: dict[str, Any] = {"requires_grad": params["requires_grad"]}
    if params.get("dtype"):
        options["dtype"] = getattr(torch, params["dtype"])
    return options


def kaiming_options(params: dict[str, Any]) -> dict[str, Any]:
    return {"a": params["a"], "mode": params["mode"], "nonlinearity": params["nonlinearity"]}


def kaiming_bound(shape: list[int], params: dict[str, Any]) -> float:
    """``gain * sqrt(3 / fan)``, the fan of the global ``shape`` (ST-OP-13), as
    ``torch.nn.init.kaiming_uniform_`` computes it for the value."""
    if len(shape) < 2 or 0 in shape:  # refused, or a no-op: no element to bound
        return math.inf
    meta = torch.empty(shape, device="meta")
    fan = torch.nn.init._calculate_correct_fan(meta, params["mode"])
    gain = torch.nn.init.calculate_gain(params["nonlinearity"], params["a"])
    return gain * math.sqrt(3.0 / fan)


def as_random_call(op: str, params: dict[str, Any], shape: list[int]) -> tuple[str, list[float]]:
    """The DTensor random call (spec/dt-random.md's table) with the draw's distribution."""
    if op in ("rand_like", "randn_like"):
        return op, []
    if op == "uniform_":
        return "uniform_", [params["a"], params["b"]]
    if op == "normal_":
        return "normal_", [params["mean"], params["std"]]
    bound = kaiming_bound(shape, params)
    return "uniform_", [-bound, bound]


def outside_support(op: str, params: dict[str, Any], value: torch.Tensor) -> torch.Tensor:
    """ST-OP-13: the elements of a draw's value outside its support, as a mask."""
    call, args = as_random_call(op, params, list(value.shape))
    # the bounds as the dtype holds them: rounding is monotone, so a draw within [a, b] rounds
    # into [round(a), round(b)] (kaiming's bound is no float of any dtype)
    if call == "uniform_" and value.is_floating_point():
        args = [float(torch.tensor(v, dtype=value.dtype)) for v in args]
    return dt_random.outside_support(call, args, value, None, [])


def boxes_comparable(op: str, params: dict[str, Any], shape: list[int], dtype: str, n: int) -> bool:
    """ST-OP-14: whether two boxes of ``n`` elements of a draw may be compared (a correct draw
    makes them equal with a chance of at most 2^-40)."""
    if op not in RANDOM or n == 0 or not getattr(torch, dtype).is_floating_point:
        return False
    call, args = as_random_call(op, params, shape)
    # a kaiming_uniform_ that is refused (fewer than two dims) has no bound
    return all(map(math.isfinite, args)) and dt_random.parts_comparable(call, args, dtype, n)


def prefix_length(op: str, params: dict[str, Any], shape: list[int], dtype: str) -> int | None:
    """ST-OP-14: the fewest leading elements two boxes of a draw are compared by (equal with a
    chance of at most 2^-40 in a correct draw), or ``None`` where no prefix of up to 64 is."""
    return next((n for n in range(1, 65) if boxes_comparable(op, params, shape, dtype, n)), None)


def result_dtype(op: str, x_dtype: str, params: dict[str, Any]) -> str:
    """The dtype of a ShardedTensor result: the cast's, a ``*_like``'s given one, else ``x``'s."""
    if op == "type_as" or (op in LIKE and params.get("dtype")):
        return params["dtype"]
    return x_dtype
