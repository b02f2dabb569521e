"""Gradients through the DTensor API (spec/dt-grad.md).

One invariant keeps the backward passes short: the gradient of a DTensor's local tensor is laid
out by the DTensor's *gradient placements*, its placements with every ``P`` read as ``R``
(``gradient_placements``, DT-GRAD-2). A sum of parts, an average, a maximum: whatever reduces the
parts, the gradient of the value is one tensor, and each rank holds it whole, or its shard.

Every call that changes what a local tensor stands for is an autograd function whose backward
moves the gradient between two layouts with the same plans as ``redistribute`` (``execute``):

- ``Redistribute``: the forward moves the value from ``source`` to ``target``; the backward moves
  the gradient from ``target``'s gradient placements back to ``source``'s (DT-GRAD-5).
- ``Declare``: the forward keeps the local tensor; the backward moves the gradient from the
  layout it arrives in to the one the caller asked for. ``to_local`` and ``full_tensor`` declare
  the layout of the gradient their plain tensor will get (``grad_placements``, DT-GRAD-3);
  ``from_local`` declares the layout its caller's local tensor's gradient takes (DT-GRAD-4).

Rules and where they live:

- DT-GRAD-1: ``Redistribute``, ``Declare`` (their results require grad as their input does)
- DT-GRAD-2: ``gradient_placements``
- DT-GRAD-3, DT-GRAD-4: ``Declare``
- DT-GRAD-5: ``Redistribute``
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from reference.dtensor.mesh import DeviceMesh
from reference.dtensor.placements import Partial, Placement, Replicate
from reference.dtensor.redistribute import execute, plan


def gradient_placements(placements: Sequence[Placement]) -> tuple[Placement, ...]:
    """DT-GRAD-2: the layout of a gradient of a DTensor laid out by ``placements``."""
    return tuple(Replicate() if isinstance(p, Partial) else p for p in placements)


def move(
    grad: torch.Tensor,
    mesh: DeviceMesh,
    shape: tuple[int, ...],
    source: tuple[Placement, ...],
    target: tuple[Placement, ...],
) -> torch.Tensor:
    """``grad`` laid out by ``source``, laid out by ``target``; a rank outside the mesh holds
    nothing and moves nothing."""
    if source == target or mesh.get_coordinate() is None:
        return grad
    return execute(plan(source, target), mesh, shape, grad)


class Redistribute(torch.autograd.Function):
    """``redistribute``'s data movement; its gradient goes back the other way (DT-GRAD-5)."""

    @staticmethod
    def forward(ctx, local, mesh, shape, source, target):
        ctx.mesh, ctx.shape = mesh, shape
        ctx.layouts = gradient_placements(target), gradient_placements(source)
        return execute(plan(source, target), mesh, shape, local)

    @staticmethod
    def backward(ctx, grad):
        return move(grad, ctx.mesh, ctx.shape, *ctx.layouts), None, None, None, None


class Declare(torch.autograd.Function):
    """The local tensor unchanged; its gradient, arriving laid out by ``arrives``, leaves laid
    out by ``leaves`` (DT-GRAD-3, DT-GRAD-4)."""

    @staticmethod
    def forward(ctx, local, mesh, shape, arrives, leaves):
        ctx.mesh, ctx.shape, ctx.layouts = mesh, shape, (arrives, leaves)
        return local.view_as(local)

    @staticmethod
    def backward(ctx, grad):
        return move(grad, ctx.mesh, ctx.shape, *ctx.layouts), None, None, None, None
