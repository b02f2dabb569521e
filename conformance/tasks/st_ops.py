"""The rank task of spec/st-ops.md: a torch function on ShardedTensors of drawn layouts, called as
a user calls it, and what every rank holds afterwards."""

from __future__ import annotations

from typing import Any

import torch

from conformance import adapters
from conformance.tasks import codec
from conformance.world import RankContext

LIKE = ("empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like")
INIT = ("constant_", "uniform_", "normal_", "kaiming_uniform_")
# The torch functions a user calls on sharded tensors; the other ops are methods of ``x``.
FUNCTIONS = {
    "equal": torch.equal,
    "allclose": torch.allclose,
    **{name: getattr(torch, name) for name in LIKE},
    **{name: getattr(torch.nn.init, name) for name in INIT},
}


def _method(name: str) -> Any:
    """A caller of ``x.<name>(...)``: how a user calls the shard-wise ops and ``copy_``."""

    def call(x: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(x, name)(*args, **kwargs)

    call.__name__ = name
    return call


def _arguments(op: str, x: Any, other: Any, params: dict[str, Any]) -> tuple[Any, list, dict]:
    """The callable, positional and keyword arguments of the call, as a user writes it."""
    if op == "equal":
        return FUNCTIONS[op], [x, other], {}
    if op == "allclose":
        return FUNCTIONS[op], [x, other], {k: params[k] for k in ("rtol", "atol", "equal_nan")}
    if op == "type_as":
        y = other if other is not None else torch.zeros(1, dtype=getattr(torch, params["dtype"]))
        return _method(op), [x, y], {}
    if op == "requires_grad_":
        return _method(op), [x, params["flag"]], {}
    if op in ("copy_", "clone", "detach", "contiguous"):
        return _method(op), [x] + ([other] if op == "copy_" else []), {}
    if op in LIKE:
        fill = [params["fill"]] if op == "full_like" else []
        dtype = {"dtype": getattr(torch, params["dtype"])} if params.get("dtype") else {}
        return FUNCTIONS[op], [x, *fill], {"requires_grad": params["requires_grad"], **dtype}
    if op == "kaiming_uniform_":
        return FUNCTIONS[op], [x], {k: params[k] for k in ("a", "mode", "nonlinearity")}
    given = {"constant_": ["val"], "uniform_": ["a", "b"], "normal_": ["mean", "std"]}[op]
    return FUNCTIONS[op], [x, *(params[k] for k in given)], {}


def _bitwise(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same bytes (a NaN equals itself)."""
    return a.shape == b.shape and torch.equal(
        a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)
    )


def _locals(adapter: Any, t: Any) -> list[torch.Tensor]:
    return [x for x, _ in adapter.st_local_shards(t)]


def apply(
    ctx: RankContext,
    impl: str,
    op: str,
    shape: list[int],
    dtype: str,
    seed: int,
    boxes: list[dict[str, Any]],
    group: list[int],
    params: dict[str, Any],
    other: dict[str, Any] | None,
    rng_seed: int,
) -> dict[str, Any] | None:
    """Build ``x`` (the seeded value, ``params["x_requires_grad"]``) laid out as ``boxes`` on
    ``group`` and, for a binary op, the second tensor (``other``: its relation to ``x``, dtype
    and boxes; ``st_ops.other_value``); after ``torch.manual_seed(rng_seed)``, call ``op``.
    Reports ``x``'s layout before the call; what the call returned (a bool, ``x`` itself, a
    sharded tensor as data, with whether its local tensors share storage with ``x``'s, require
    grad and are contiguous); ``x`` as data afterwards; and whether the second tensor is
    unchanged. Where the call raised, ``x`` is attached (ST-OP-9)."""
    adapter = adapters.load(impl)
    process_group = ctx.group(group)
    if ctx.rank not in group:
        return None
    value, y_value = codec.st_op_inputs(shape, dtype, seed, other)
    y = None
    with codec.building():
        if other is not None:
            y = codec.from_boxes(adapter, ctx.rank, ctx.backend, y_value.to(ctx.device),
                                 other["boxes"], process_group)  # fmt: skip
        x = codec.from_boxes(adapter, ctx.rank, ctx.backend, value.to(ctx.device), boxes,
                             process_group, params.get("x_requires_grad", False))  # fmt: skip
    y_before = [t.detach().clone() for t in _locals(adapter, y)] if y is not None else []

    def x_now() -> dict[str, Any]:
        return {"x": codec.describe(adapter, x)}

    before = adapter.st_describe(x)
    before["local"] = [box for _, box in adapter.st_local_shards(x)]
    fn, args, kwargs = _arguments(op, x, y, params)
    torch.manual_seed(rng_seed)
    with codec.facts_on_raise(x_now):
        result = adapter.st_op(fn, args, kwargs)
    report: dict[str, Any] = {
        **x_now(),
        "x_before": before,
        "other_unchanged": y is None
        or all(_bitwise(a.detach(), b) for a, b in zip(_locals(adapter, y), y_before, strict=True)),
    }
    if isinstance(result, bool):
        return {**report, "returned": "bool", "bool": result}
    if not hasattr(result, "local_shards"):
        return {**report, "returned": type(result).__name__}
    held = {t.untyped_storage().data_ptr() for t in _locals(adapter, x) if t.numel()}
    mine = _locals(adapter, result)
    return {
        **report,
        "returned": "x" if result is x else "sharded tensor",
        "result": codec.describe(adapter, result),
        "shares_storage": any(t.numel() and t.untyped_storage().data_ptr() in held for t in mine),
        "local_requires_grad": [t.requires_grad for t in mine],
        "local_contiguous": [t.is_contiguous() for t in mine],
        "same_group": adapter.st_group_ranks(result) == group,
    }
