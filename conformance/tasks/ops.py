"""Rank task for operators on DTensors (spec/dt-ops.md): build the sample's DTensor inputs, run
the op through the adapter, and report every output and whether the inputs survived."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance import adapters
from conformance.ops import catalogue
from conformance.tasks import codec
from conformance.tasks.codec import contiguous_stride
from conformance.tasks.dtensor import mesh
from conformance.world import RankContext

# The fact a raise carries when the op returned and reading its outputs failed (DT-OP-6).
OUTPUT_READ = "output_read"


def apply(
    ctx: RankContext,
    impl: str,
    op: str,
    dtype: str,
    sample: int,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    placements: list[list[str]],
    seed: int,
    in_place: bool = False,
) -> dict[str, Any]:
    """The catalogue's sample ``sample`` of ``op`` with its ``i``-th tensor argument a DTensor
    of ``placements[i]`` (built by ``from_local`` from this rank's part of it, the partial parts
    from ``seed + i``), run by the implementation; report each output leaf (a DTensor's
    ``full_tensor``, metadata, local shape and device; a plain tensor or a value as it is), each
    input's ``full_tensor`` (what the implementation takes the input to be), and whether every
    input kept its placements and local values. ``in_place``: the op's in-place variant, which
    writes its first input (DT-OP-11): the outputs are that input after the call, and the report
    says whether the call returned it."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    call = catalogue.samples(op, dtype)[sample]
    inputs = []
    with codec.building():
        for i, (value, texts) in enumerate(zip(call.tensors(), placements, strict=True)):
            value = value.contiguous()
            local = codec.op_input(ctx.rank, value, mesh_shape, mesh_ranks, texts, seed + i)
            shape, stride = list(value.shape), contiguous_stride(value.shape)
            local = local.to(ctx.device)
            inputs.append(adapter.dt_from_local(local, device_mesh, texts, False, shape, stride))
    held = [(adapter.dt_to_local(d).clone(), adapter.dt_describe(d)) for d in inputs]
    with codec.building():
        # copies: a full tensor may share the local one, which an in-place op then writes
        inputs_full = [adapter.dt_full_tensor(d).detach().cpu().clone() for d in inputs]
    run = call.with_tensors(inputs)
    fn = catalogue.in_place(op) if in_place else catalogue.function(op)
    out = adapter.dt_op(fn, run.args, run.kwargs)
    with codec.facts_on_raise(lambda: {OUTPUT_READ: False}):
        leaves = [inputs[0]] if in_place else pytree.tree_leaves(out)
        outputs = [_output(adapter, leaf) for leaf in leaves]
    written = 1 if in_place else 0
    kept = all(
        _same(adapter.dt_to_local(d), local) and adapter.dt_describe(d) == facts
        for d, (local, facts) in zip(inputs[written:], held[written:], strict=True)
    )
    report = {"inputs_full": inputs_full, "outputs": outputs, "inputs_unchanged": kept}
    if in_place:
        report["returned_self"] = out is inputs[0]
    return report


def _same(now: torch.Tensor, before: torch.Tensor) -> bool:
    """The same values, NaN where NaN was (``torch.equal`` is False on NaN); a task never reads
    the oracle, so not ``oracle.dt_ops.exact``."""
    return now.shape == before.shape and bool(
        torch.eq(now, before).logical_or(now.isnan() & before.isnan()).all()
    )


def _output(adapter: Any, leaf: Any) -> dict[str, Any]:
    """One output leaf as data: a plain ``torch.Tensor`` or a non-tensor value as it is, anything
    else as the implementation's DTensor (``full_tensor`` is collective: every rank reaches it
    for the same leaves, in order)."""
    if type(leaf) is torch.Tensor:
        return {"kind": "plain tensor", "value": leaf.detach().cpu()}
    if leaf is None or isinstance(leaf, (bool, int, float, torch.Size, torch.dtype)):
        return {"kind": "value", "value": leaf}
    local = adapter.dt_to_local(leaf)
    return {
        "kind": "dtensor",
        "describe": adapter.dt_describe(leaf),
        "local_shape": list(local.shape),
        "local_device": local.device.type,
        "full": adapter.dt_full_tensor(leaf).detach().cpu(),
    }


def warm(ctx: RankContext) -> None:
    """Import OpInfo's database on this rank (seconds, once per process), in a case of its own
    with a timeout of its own, so that no op case's time includes it."""
    catalogue.load()
