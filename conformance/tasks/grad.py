"""The rank task of spec/dt-grad.md: a chain of DTensor API calls as a training step makes them,
a backward pass through it, and what the leaf's gradient became."""

from __future__ import annotations

from typing import Any

import torch

from conformance import adapters
from conformance.tasks import codec
from conformance.tasks.codec import contiguous_stride, make_global
from conformance.tasks.dtensor import alike_everywhere, mesh
from conformance.world import RankContext


def chain(
    ctx: RankContext,
    impl: str,
    shape: list[int],
    dtype: str,
    seed: int,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    start: str,
    placements: list[str],
    steps: list[list[str]],
    end: str,
    upstream: list[str],
    upstream_seed: int,
    requires_grad: bool = True,
    backwards: int = 1,
    leaf_grad: list[str] | None = None,
    end_grad: list[str] | None = None,
) -> dict[str, Any]:
    """Make a DTensor of the seeded value laid out by ``placements``: ``start`` is
    ``"distribute"`` (a leaf DTensor) or ``"from_local"`` (of the rank's local tensor, a leaf,
    its gradient laid out by ``leaf_grad``). Then ``backwards`` times: ``redistribute`` to each
    of ``steps``, ``end`` (``"to_local"`` or ``"full_tensor"``, the gradient laid out by
    ``end_grad``), and ``(out * h).sum().backward()``, with ``h`` this rank's tensor of the
    upstream gradient (the value of ``upstream_seed`` laid out by ``upstream``). Reports every
    result's ``requires_grad`` and the plain tensor ``end`` returned (of the first pass), and the
    leaf's gradient: the DTensor's metadata and local tensor, or the local tensor's own."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    value = make_global(shape, dtype, seed).to(ctx.device)
    with codec.building():
        if start == "distribute":
            leaf = value.clone().requires_grad_(requires_grad)
            source = alike_everywhere(adapter, device_mesh)
            x = adapter.dt_distribute(leaf, device_mesh, placements, source)
        else:
            local = codec.op_input(ctx.rank, value.cpu(), mesh_shape, mesh_ranks, placements, seed)
            leaf = local.to(ctx.device).requires_grad_(requires_grad)
            given = {} if leaf_grad is None else {"grad_placements": leaf_grad}
            x = adapter.dt_from_local(leaf, device_mesh, placements, False, shape,
                                      contiguous_stride(shape), **given)  # fmt: skip
    full = make_global(shape, dtype, upstream_seed)
    h = codec.op_input(ctx.rank, full, mesh_shape, mesh_ranks, upstream, upstream_seed)
    h = h.to(ctx.device)
    flags = first = None
    for _ in range(backwards if requires_grad else 1):
        out, seen = _forward(adapter, x, steps, end, end_grad)
        flags = flags or seen
        first = out.detach().clone() if first is None else first
        if requires_grad:
            (out * h).sum().backward()
    is_leaf = x.is_leaf if start == "distribute" else None
    grad = gradient_of(adapter, start, x, leaf)
    return {"requires_grad": flags, "is_leaf": is_leaf, "out": first, "grad": grad}


# The fact a raise in the forward calls carries: which call raised (``redistribute``, ``to_local``
# or ``full_tensor``), so that the driver blames the call's own rule, not a gradient's.
FORWARD = "forward"


def _forward(adapter: Any, x: Any, steps: list[list[str]], end: str, end_grad: Any) -> tuple:
    """The chain's calls after the leaf: its plain tensor, and each result's ``requires_grad``."""
    seen, y, call = [x.requires_grad], x, "redistribute"
    with codec.facts_on_raise(lambda: {FORWARD: call}):
        for target in steps:
            y = adapter.dt_redistribute(y, target)
            seen.append(y.requires_grad)
        call = end
        given = {} if end_grad is None else {"grad_placements": end_grad}
        out = (adapter.dt_to_local if end == "to_local" else adapter.dt_full_tensor)(y, **given)
    seen.append(out.requires_grad)
    return out, seen


def gradient_of(adapter: Any, start: str, x: Any, leaf: torch.Tensor) -> dict[str, Any] | None:
    """A leaf's gradient as data: for ``"distribute"`` the DTensor ``x``'s (its metadata, local
    tensor and device; a plain tensor where the implementation left one, ``"plain"``), else the
    local tensor ``leaf``'s own; ``None`` where it has none."""
    if start == "from_local":
        grad = leaf.grad
        return None if grad is None else {"local": grad.detach().clone(), "describe": None}
    grad = adapter.dt_grad(x)
    if grad is None:
        return None
    if type(grad) is torch.Tensor:
        return {"local": grad.detach().clone(), "describe": None, "plain": True}
    local = adapter.dt_to_local(grad)
    return {"local": local.detach().clone(), "device": local.device.type,
            "describe": adapter.dt_describe(grad)}  # fmt: skip
