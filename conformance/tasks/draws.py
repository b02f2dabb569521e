"""The rank task of spec/dt-random.md: a random call on a DTensor, made as a training script
makes it (after ``torch.manual_seed`` on every rank), twice, and what each rank holds."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from conformance import adapters
from conformance.tasks import codec
from conformance.tasks.codec import contiguous_stride
from conformance.tasks.dtensor import mesh
from conformance.world import RankContext

FACTORIES = ("rand", "randn")
# The callables an adapter's ``dt_op`` gets for the calls that are not factories.
FUNCTIONS = {
    "uniform_": torch.Tensor.uniform_,
    "normal_": torch.Tensor.normal_,
    "bernoulli_": torch.Tensor.bernoulli_,
    "dropout": F.dropout,
    "rand_like": torch.rand_like,
    "randn_like": torch.randn_like,
}


def draw(
    ctx: RankContext,
    impl: str,
    call: str,
    params: list[float],
    shape: list[int],
    dtype: str,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    placements: list[str],
    seed: int,
    input_seed: int,
) -> dict[str, Any]:
    """``call`` after ``torch.manual_seed(seed)``: a factory of ``placements``, or an op on a
    DTensor of ``placements`` (built by ``from_local`` of this rank's part of the seeded
    ``input_value``). Then a plain ``torch.rand(8)`` on the rank's device. Then, after other
    draws (plain, and the same call unseeded), the seed and the call again. Reports the first
    result's metadata, local tensor and device, whether an in-place call returned its DTensor,
    the plain draw, the second result's local tensor, and the input's local tensor after
    both calls."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    step = {"call": call, "params": params, "shape": shape, "dtype": dtype,
            "placements": placements, "input_seed": input_seed}  # fmt: skip
    x = _input(ctx, adapter, device_mesh, mesh_shape, mesh_ranks, step)
    torch.manual_seed(seed)
    report = _drawn(ctx, adapter, device_mesh, step, x)
    torch.rand(7, device=ctx.device)
    _make(adapter, device_mesh, step, x)
    torch.manual_seed(seed)
    report["again"] = adapter.dt_to_local(_make(adapter, device_mesh, step, x)).detach().clone()
    if x is not None:
        report["input_local"] = adapter.dt_to_local(x).detach().clone()
    return report


def sequence(
    ctx: RankContext,
    impl: str,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    seed: int,
    steps: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The random calls of ``steps`` one after another on one world, after
    ``torch.manual_seed(seed)``, as a training script makes them: each step a call as ``draw``
    takes it (``call``, ``params``, ``shape``, ``dtype``, ``placements``, ``input_seed``), on an
    input of its own, after ``torch.manual_seed(step["reseed"])`` where given; a plain
    ``torch.rand(8)`` after each. Then the seed and every step again. Reports each step as
    ``draw`` does, ``again`` from the second pass; a step that raised as ``{"raised": the
    exception's type}``, and the sequence goes on (the judge reads no step after it)."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    passes = []
    for _ in range(2):
        torch.manual_seed(seed)
        made = []
        for step in steps:
            x = _input(ctx, adapter, device_mesh, mesh_shape, mesh_ranks, step)
            if step.get("reseed") is not None:
                torch.manual_seed(step["reseed"])
            try:
                made.append(_drawn(ctx, adapter, device_mesh, step, x))
            except Exception as exc:  # judged step by step: which call raised, and what
                made.append({"raised": type(exc).__name__})
                continue
            if x is not None:
                made[-1]["input_local"] = adapter.dt_to_local(x).detach().clone()
        passes.append(made)
    first, second = passes
    return [{**a, "again": b.get("local")} for a, b in zip(first, second, strict=True)]


def _input(
    ctx: RankContext, adapter: Any, device_mesh: Any, mesh_shape: list[int],
    mesh_ranks: list[int], step: dict[str, Any],
) -> Any:  # fmt: skip
    """The DTensor a random op draws into or reads (``None`` for a factory)."""
    if step["call"] in FACTORIES:
        return None
    shape, placements = step["shape"], step["placements"]
    with codec.building():
        value = codec.random_input(shape, step["dtype"], step["input_seed"])
        local = codec.op_input(ctx.rank, value, mesh_shape, mesh_ranks, placements,
                               step["input_seed"]).to(ctx.device)  # fmt: skip
        return adapter.dt_from_local(local, device_mesh, placements, False, shape,
                                     contiguous_stride(shape))  # fmt: skip


def _make(adapter: Any, device_mesh: Any, step: dict[str, Any], x: Any) -> Any:
    if x is None:
        kind = getattr(torch, step["dtype"])
        return adapter.dt_factory(step["call"], step["shape"], device_mesh, step["placements"],
                                  None, kind, False)  # fmt: skip
    return adapter.dt_op(FUNCTIONS[step["call"]], [x, *step["params"]], {})


def _drawn(ctx: RankContext, adapter: Any, device_mesh: Any, step: dict[str, Any],
           x: Any) -> dict[str, Any]:  # fmt: skip
    """One call and a plain ``torch.rand(8)`` after it: the result's metadata, local tensor and
    device, whether it is ``x``, and the plain draw."""
    result = _make(adapter, device_mesh, step, x)
    local = adapter.dt_to_local(result)
    return {
        "describe": adapter.dt_describe(result),
        "local": local.detach().clone(),
        "device": local.device.type,
        "returned_self": result is x,
        "after": torch.rand(8, device=ctx.device),
    }
