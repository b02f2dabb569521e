"""Rank task for operators on DTensors (spec/dt-ops.md): build the sample's DTensor inputs, run
the op through the adapter, and report every output and whether the inputs survived."""

from __future__ import annotations

import re
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance import adapters
from conformance.ops import catalogue
from conformance.tasks import codec
from conformance.tasks.codec import contiguous_stride, make_global
from conformance.tasks.dtensor import alike_everywhere, mesh
from conformance.tasks.grad import gradient_of
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
    starts: list[str | None] | None = None,
    backward: list[int] | None = None,
    upstream_seed: int = 0,
    scalars: list[str | None] | None = None,
    upstream_zeros: list[int] | None = None,
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
    from a single-device call here), and the outputs are it after the call.

    ``starts`` (DT-GRAD-7) makes the ``i``-th tensor argument a leaf that requires grad where
    ``starts[i]`` is given: ``"distribute"`` (a leaf DTensor of ``distribute_tensor``) or
    ``"from_local"`` (a leaf local tensor). Then one backward pass runs from the outputs
    ``backward`` lists, output ``j`` getting ``h_j``, the seeded values of its shape and dtype
    (``upstream_seed + j``) on every rank, through ``full_tensor``; the report adds whether each
    output leaf requires grad and each leaf's gradient (``gradient_of``). ``upstream_zeros``:
    the positions in ``backward`` whose ``h_j`` is zeros instead.

    ``scalars`` puts a number in place of the ``i``-th tensor argument where ``scalars[i]`` is
    given (``catalogue.as_scalar``): a Python ``int``, ``float`` or ``bool``, passed as it is,
    or a 0-d tensor (``"0-d"``), laid out as ``homes`` and ``placements`` say."""
    adapter = adapters.load(impl)
    call = catalogue.samples(op, dtype)[sample]
    homes = homes or ["mesh"] * len(placements)
    scalars = scalars or [None] * len(placements)
    inputs, locals_ = [], []
    with codec.building():
        for i, (value, texts, home, form) in enumerate(zip(call.tensors(), placements, homes,
                                                            scalars, strict=True)):  # fmt: skip
            if form is not None:
                value = catalogue.as_scalar(value, form)
            if not isinstance(value, torch.Tensor):  # a Python number: part of the program
                inputs.append(value)
                locals_.append(None)
                continue
            # a copy: the catalogue's sample is this process's for every later case, and a local
            # tensor or plain argument may be a view of it, which an op may write
            value = value.clone(memory_format=torch.contiguous_format)
            if home == "plain":
                inputs.append(value.to(ctx.device))
                locals_.append(None)
                continue
            shape, ranks = other_mesh if home == "other" else (mesh_shape, mesh_ranks)
            start = starts[i] if starts else None
            dtensor, local = _dtensor(ctx, impl, value, shape, ranks, texts, seed + i, start)
            inputs.append(dtensor)
            locals_.append(local)
        if out is not None:
            (result,) = pytree.tree_leaves(
                catalogue.call(op, catalogue.with_scalars(call, scalars))
            )
            filler = catalogue.out_filler(result)
            out_dt, _ = _dtensor(ctx, impl, filler, mesh_shape, mesh_ranks, out, seed - 1)
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
        read = [_output(adapter, leaf) for leaf in leaves]
        outputs = [report for report, _ in read]
    kept = all(
        _held(adapter, d) == was for d, was in zip(inputs, held, strict=True) if d is not written
    )
    report = {"inputs_full": inputs_full, "outputs": outputs, "inputs_unchanged": kept}
    if written is not None:
        report["returned_self"] = returned is written
    if starts is not None:
        fulls = [full for _, full in read]
        report |= _backward(adapter, inputs, locals_, starts, leaves, fulls, backward or [],
                            upstream_seed, upstream_zeros or [])  # fmt: skip
    return report


# The fact a raise in the backward pass carries: the op returned, its gradient did not.
BACKWARD = "backward"


def _backward(
    adapter: Any, inputs: list[Any], locals_: list[Any], starts: list[str | None],
    outputs: list[Any], fulls: list[Any], backward: list[int], upstream_seed: int,
    zeros: list[int],
) -> dict[str, Any]:  # fmt: skip
    """One backward pass from ``outputs[j]`` for ``j`` in ``backward``, each through the
    ``full_tensor`` its report read (``fulls[j]``: an output is read once) with ``h_j`` as its
    gradient (zeros at the positions ``zeros`` names); what each output and each leaf
    became."""
    flags = [getattr(y, "requires_grad", None) for y in outputs]
    chosen = [fulls[j] for j in backward]
    if chosen and all(getattr(outputs[j], "requires_grad", False) for j in backward):
        with codec.facts_on_raise(lambda: {BACKWARD: True}):
            hs = [
                torch.zeros(y.shape, dtype=y.dtype) if k in zeros
                else make_global(list(y.shape), str(y.dtype).removeprefix("torch."),
                                 upstream_seed + k)
                for k, y in enumerate(chosen)
            ]  # fmt: skip
            torch.autograd.backward(
                chosen, [h.to(y.device) for h, y in zip(hs, chosen, strict=True)]
            )
    grads = [None if start is None else gradient_of(adapter, start, x, local)
             for x, local, start in zip(inputs, locals_, starts, strict=True)]  # fmt: skip
    return {"output_requires_grad": flags, "grads": grads}


def hung_in(stack: str) -> str:
    """Where a rank's Python stacks show this task: ``"backward"`` in its backward pass,
    ``"forward"`` elsewhere in it, ``""`` where they show no frame of it (no stack, or one cut
    short at faulthandler's depth of 100 frames). Read from faulthandler's format (a local
    world's ranks: ``line 12 in f``) and traceback's (an attached world's: ``line 12, in f``)."""
    frames = re.findall(
        r'[/\\]conformance[/\\]tasks[/\\]ops\.py", line (?:\d+|\?\?\?),? in (\w+)$',
        stack,
        re.MULTILINE,
    )
    if not frames:
        return ""
    return "backward" if _backward.__name__ in frames else "forward"


def _dtensor(
    ctx: RankContext,
    impl: str,
    value: torch.Tensor,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    texts: list[str],
    seed: int,
    start: str | None = None,
) -> tuple[Any, torch.Tensor]:
    """A DTensor of ``value`` with ``texts`` over the mesh ``mesh_shape``/``mesh_ranks``, built by
    ``from_local`` from this rank's part of it, and that local tensor; for a ``start``, a leaf
    that requires grad: the local tensor (``"from_local"``) or, from the whole value, the
    DTensor of ``distribute_tensor`` (``"distribute"``)."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    if start == "distribute":
        leaf = value.to(ctx.device).requires_grad_()
        source = alike_everywhere(adapter, device_mesh)
        return adapter.dt_distribute(leaf, device_mesh, texts, source), leaf
    local = codec.op_input(ctx.rank, value, mesh_shape, mesh_ranks, texts, seed).to(ctx.device)
    local.requires_grad_(start == "from_local")
    shape, stride = list(value.shape), contiguous_stride(value.shape)
    return adapter.dt_from_local(local, device_mesh, texts, False, shape, stride), local


def _held(adapter: Any, x: Any) -> tuple[Any, ...]:
    """What an input is before and after the call: its local values (NaN-aware, as ``_Same``)
    and, for a DTensor, its metadata; a Python number as it is."""
    if isinstance(x, (bool, int, float)):
        return (x,)
    if type(x) is torch.Tensor:
        return (_Same(x.detach().cpu().clone()),)
    return (_Same(adapter.dt_to_local(x).detach().cpu().clone()), adapter.dt_describe(x))


def _full(adapter: Any, x: Any) -> torch.Tensor:
    """What the implementation takes an input to be: a DTensor's ``full_tensor``, a plain
    tensor itself; a copy, which no in-place op can write (a Python number as it is)."""
    if isinstance(x, (bool, int, float)):
        return x
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


def _output(adapter: Any, leaf: Any) -> tuple[dict[str, Any], Any]:
    """One output leaf as data: a plain ``torch.Tensor`` or a non-tensor value as it is, anything
    else as the implementation's DTensor (``full_tensor`` is collective: every rank reaches it
    for the same leaves, in order); and the tensor a backward pass starts from: a DTensor's
    ``full_tensor`` as returned, a plain tensor itself (``None`` for a value)."""
    if type(leaf) is torch.Tensor:
        return {"kind": "plain tensor", "value": leaf.detach().cpu()}, leaf
    if leaf is None or isinstance(leaf, (bool, int, float, torch.Size, torch.dtype)):
        return {"kind": "value", "value": leaf}, None
    local = adapter.dt_to_local(leaf)
    full = adapter.dt_full_tensor(leaf)
    report = {
        "kind": "dtensor",
        "describe": adapter.dt_describe(leaf),
        "local_shape": list(local.shape),
        "local_device": local.device.type,
        "full": full.detach().cpu(),
    }
    return report, full


def warm(ctx: RankContext) -> None:
    """Import OpInfo's database on this rank (seconds, once per process), in a case of its own
    with a timeout of its own, so that no op case's time includes it."""
    catalogue.load()
