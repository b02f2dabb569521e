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
    homes: list[str] | None = None,
    other_mesh: list[list[int]] | None = None,
    out: list[str] | None = None,
) -> dict[str, Any]:
    """The catalogue's sample ``sample`` of ``op`` with its ``i``-th tensor argument a DTensor
    of ``placements[i]`` (built by ``from_local`` from this rank's part of it, the partial parts
    from ``seed + i``), run by the implementation; report each output leaf (a DTensor's
    ``full_tensor``, metadata, local shape and device; a plain tensor or a value as it is), each
    input's ``full_tensor`` (what the implementation takes the input to be), and whether every
    input kept its placements and local values. ``in_place``: the op's in-place variant, which
    writes its first input (DT-OP-11): the outputs are that input after the call, and the report
    says whether the call returned it.

    ``homes`` (DT-OP-12) says where each tensor argument lives: ``"mesh"`` (a DTensor, as
    above), ``"plain"`` (the sample's tensor itself on every rank) or ``"other"`` (a DTensor on
    ``other_mesh``, ``[shape, ranks]``, of its placements there). ``out`` (DT-OP-13): the call
    gets ``out=``, a DTensor of those placements holding the result's shape and dtype (made
    from a single-device call here), and the outputs are it after the call."""
    adapter = adapters.load(impl)
    call = catalogue.samples(op, dtype)[sample]
    homes = homes or ["mesh"] * len(placements)
    inputs = []
    with codec.building():
        for i, (value, texts, home) in enumerate(zip(call.tensors(), placements, homes,
                                                      strict=True)):  # fmt: skip
            # a copy: the catalogue's sample is this process's for every later case, and a local
            # tensor or plain argument may be a view of it, which an op may write
            value = value.clone(memory_format=torch.contiguous_format)
            if home == "plain":
                inputs.append(value.to(ctx.device))
                continue
            shape, ranks = other_mesh if home == "other" else (mesh_shape, mesh_ranks)
            inputs.append(_dtensor(ctx, impl, value, shape, ranks, texts, seed + i))
        if out is not None:
            (result,) = pytree.tree_leaves(catalogue.call(op, call))
            filler = catalogue.out_filler(result)
            out_dt = _dtensor(ctx, impl, filler, mesh_shape, mesh_ranks, out, seed - 1)
    held = [_held(adapter, d) for d in inputs]
    with codec.building():
        # copies: a full tensor may share the local one, which an in-place op then writes
        inputs_full = [_full(adapter, d) for d in inputs]
    run = call.with_tensors(inputs)
    fn = catalogue.in_place(op) if in_place else catalogue.function(op)
    kwargs = run.kwargs if out is None else {**run.kwargs, "out": out_dt}
    returned = adapter.dt_op(fn, run.args, kwargs)
    with codec.facts_on_raise(lambda: {OUTPUT_READ: False}):
        written = inputs[0] if in_place else out_dt if out is not None else None
        leaves = pytree.tree_leaves(returned) if written is None else [written]
        outputs = [_output(adapter, leaf) for leaf in leaves]
    kept = all(
        _held(adapter, d) == was for d, was in zip(inputs, held, strict=True) if d is not written
    )
    report = {"inputs_full": inputs_full, "outputs": outputs, "inputs_unchanged": kept}
    if written is not None:
        report["returned_self"] = returned is written
    return report


def _dtensor(
    ctx: RankContext,
    impl: str,
    value: torch.Tensor,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    texts: list[str],
    seed: int,
) -> Any:
    """A DTensor of ``value`` with ``texts`` over the mesh ``mesh_shape``/``mesh_ranks``, built by
    ``from_local`` from this rank's part of it."""
    adapter = adapters.load(impl)
    local = codec.op_input(ctx.rank, value, mesh_shape, mesh_ranks, texts, seed).to(ctx.device)
    shape, stride = list(value.shape), contiguous_stride(value.shape)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    return adapter.dt_from_local(local, device_mesh, texts, False, shape, stride)


def _held(adapter: Any, x: Any) -> tuple[Any, ...]:
    """What an input is before and after the call: its local values (NaN-aware, as ``_Same``)
    and, for a DTensor, its metadata."""
    if type(x) is torch.Tensor:
        return (_Same(x.detach().cpu().clone()),)
    return (_Same(adapter.dt_to_local(x).detach().cpu().clone()), adapter.dt_describe(x))


def _full(adapter: Any, x: Any) -> torch.Tensor:
    """What the implementation takes an input to be: a DTensor's ``full_tensor``, a plain
    tensor itself; a copy, which no in-place op can write."""
    full = x if type(x) is torch.Tensor else adapter.dt_full_tensor(x)
    return full.detach().cpu().clone()


class _Same:
    """A tensor compared by its values, NaN equal to NaN (``torch.equal`` is False on NaN); a
    task never reads the oracle, so not ``oracle.dt_ops.exact``."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def __eq__(self, other: object) -> bool:
        a, b = self.tensor, getattr(other, "tensor", None)
        return (
            isinstance(b, torch.Tensor)
            and (a.shape, a.dtype) == (b.shape, b.dtype)
            and bool(torch.eq(a, b).logical_or(a.isnan() & b.isnan()).all())
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
