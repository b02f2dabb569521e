"""Operators on DTensors (spec/dt-ops.md): ``call(fn, *args, **kwargs)`` runs a tensor function
on arguments some of which are DTensors.

An op has one meaning, the single-device program on the inputs' full tensors. This module gets
there two ways:

1. **Locally**, where a propagation rule knows that running ``fn`` on every rank's local tensors
   gives the local tensors of an output with placements it can name. Four rules teach the idea:
   an elementwise op keeps a common sharding (``_elementwise``); a sum over a sharded dim leaves
   partial sums (``_sum``); a matrix product's contraction dim leaves partial sums
   (``_matrix_product``); a transpose moves a shard with its dim (``_transpose``).
2. **Replicated**, always correct: bring every DTensor input to ``R`` (``full_tensor``), run
   ``fn`` on the full tensors, and return ``R`` outputs (``_replicated``).

Either way, an output's global metadata is what the single-device program gives: the replicated
way runs that program, and the local way runs ``fn`` on meta tensors with the inputs' global
shapes and strides (DT-OP-4, DT-OP-5). The inputs are never written (DT-OP-8), but for the
first argument of an in-place op, which takes the op's result (DT-OP-11), and nothing is cached
between calls (DT-OP-9).

Rules and where they live:

- DT-OP-1, DT-OP-2, DT-OP-3: ``call`` (the two ways above)
- DT-OP-4, DT-OP-5: ``_full_tensor_with_global_strides``, ``_global_metadata``
- DT-OP-6: ``_elementwise``, ``summed_placements``, ``_matrix_product``, ``_transpose``,
  ``_replicated`` (placements that describe the local results)
- DT-OP-7: ``call``, ``_into`` (it refuses only an out= tensor it cannot write: an op that raises
  on a single device raises alike on every rank, the replicated way running the same program on
  the same tensors everywhere)
- DT-OP-8, DT-OP-9: ``call``
- DT-OP-11: ``_replicated`` (an op that returns its first argument wrote it)
- DT-OP-12: ``call`` (a plain tensor argument is a value, passed as it is; the replicated way
  brings each DTensor to R on its own mesh, so inputs on two meshes of the same ranks meet)
- DT-OP-13: ``_into``
- DT-GRAD-6, DT-GRAD-7: ``call`` (no code of its own: both ways run the op on local tensors
  that autograd tracks, and every move of data between layouts is an autograd function of the
  autograd module, so a backward pass runs the single-device backward on the same local
  tensors and moves each gradient back the way its value came)

A random op (``uniform_``, ``dropout``, ...) goes to ``reference.dtensor.random``
(spec/dt-random.md): its values are one draw, no function of the inputs' full tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

from reference.dtensor import random
from reference.dtensor.dtensor import DTensor
from reference.dtensor.placements import Partial, Placement, Replicate, Shard

# Ops that compute each output element from the input elements at its index alone.
ELEMENTWISE = frozenset(
    [torch.add, torch.sub, torch.mul, torch.div, torch.neg, torch.abs, torch.exp, torch.log,
     torch.tanh, torch.sigmoid, torch.sqrt, torch.maximum, torch.minimum, torch.where]
)  # fmt: skip


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with DTensors among the arguments: their op on the full tensors,
    as DTensors on the inputs' mesh."""
    out = kwargs.get("out")
    if isinstance(out, DTensor):
        return _into(out, fn, args, {k: v for k, v in kwargs.items() if k != "out"})
    leaves, spec = pytree.tree_flatten((args, kwargs))
    dtensors = [x for x in leaves if isinstance(x, DTensor)]
    if not dtensors:
        return fn(*args, **kwargs)
    if fn in random.RANDOM and isinstance(args[0], DTensor):
        return random.call(fn, *args, **kwargs)
    for rule in (_elementwise, _sum, _matrix_product, _transpose):
        result = rule(fn, dtensors, args, kwargs)
        if result is not None:
            return result
    return _replicated(fn, leaves, spec)


def _into(out: DTensor, fn: Callable[..., Any], args: Any, kwargs: Any) -> DTensor:
    """``fn(*args, **kwargs, out=out)``: the op as any call computes it, then written into
    ``out``, which the call returns (DT-OP-13). ``out``'s old values are never read, nor moved.
    An ``out`` of another shape or dtype than the result (which a single device resizes or
    casts into) is refused, as DT-OP-7 allows."""
    result = call(fn, *args, **kwargs)
    if not isinstance(result, DTensor) or (result.shape, result.dtype) != (out.shape, out.dtype):
        raise NotImplementedError(
            "DT-OP-7: out= is supported for one output of the result's shape and dtype"
        )
    out.assign(result)
    return out


def _replicated(fn: Callable[..., Any], leaves: list[Any], spec: Any) -> Any:
    """The always-correct way: ``fn`` on every DTensor input's full tensor, laid out as the
    single-device program holds it, so its outputs are the single-device result, data and
    strides alike (DT-OP-5); every tensor output ``R``."""
    mesh = next(x for x in leaves if isinstance(x, DTensor)).device_mesh
    replicate = [Replicate()] * mesh.ndim
    full = [_full_tensor_with_global_strides(x) if isinstance(x, DTensor) else x for x in leaves]
    args, kwargs = pytree.tree_unflatten(full, spec)
    before = full[0].clone() if isinstance(leaves[0], DTensor) else None
    result = fn(*args, **kwargs)
    if before is not None and result is full[0]:
        # The op returned its first argument, as an in-place op does (``x.add_(y)``, ``x.t_()``,
        # ``F.silu(x, inplace=True)``), and some others (``x.contiguous()`` of a contiguous
        # ``x``): the call returns that DTensor, which takes the value written, replicated.
        if _changed(before, result):
            leaves[0].assign(_wrap(result, mesh, replicate, result.shape, result.stride()))
        return leaves[0]
    return pytree.tree_map(
        lambda y: (
            _wrap(y, mesh, replicate, y.shape, y.stride()) if isinstance(y, torch.Tensor) else y
        ),
        result,
    )


def _changed(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Whether an op changed its argument: its shape, strides or values (NaN equal to NaN). One
    that wrote nothing new (``x.add_(0)``, an in-place op on an empty ``x``) leaves the DTensor
    as it is."""
    if (before.shape, before.stride()) != (after.shape, after.stride()):
        return True
    return not bool(torch.eq(before, after).logical_or(before.isnan() & after.isnan()).all())


def _full_tensor_with_global_strides(d: DTensor) -> torch.Tensor:
    """``d``'s full tensor in a new tensor with ``d``'s global strides (``fn`` may write it: it
    is no input's local tensor, DT-OP-8)."""
    full = d.full_tensor()
    return torch.empty_strided(d.shape, d.stride(), dtype=d.dtype, device=full.device).copy_(full)


def _local(
    fn: Callable[..., Any],
    args: Any,
    kwargs: Any,
    placements: Sequence[Placement],
) -> Any:
    """``fn`` on every rank's local tensors, the outputs with ``placements``."""
    mesh = _mesh_of((args, kwargs))
    local = pytree.tree_map(lambda x: x.to_local() if isinstance(x, DTensor) else x, (args, kwargs))
    out = fn(*local[0], **local[1])
    return _wrap_outputs(out, _global_metadata(fn, args, kwargs), mesh, placements)


def _global_metadata(fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """DT-OP-4, DT-OP-5: the single-device result as meta tensors (shapes, strides and dtypes,
    no data, no cost), from ``fn`` on meta tensors with the inputs' global metadata."""
    meta = pytree.tree_map(
        lambda x: (
            torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
            if isinstance(x, DTensor)
            else x
        ),
        (args, kwargs),
    )
    return fn(*meta[0], **meta[1])


def _wrap_outputs(out: Any, meta: Any, mesh: Any, placements: Sequence[Placement]) -> Any:
    """Each tensor of ``out`` as a DTensor of ``placements`` with the global metadata of its
    twin in ``meta``."""
    leaves, spec = pytree.tree_flatten(out)
    wrapped = [
        _wrap(y, mesh, placements, m.shape, m.stride()) if isinstance(y, torch.Tensor) else y
        for y, m in zip(leaves, pytree.tree_leaves(meta), strict=True)
    ]
    return pytree.tree_unflatten(wrapped, spec)


def _wrap(local: torch.Tensor, mesh: Any, placements: Any, shape: Any, stride: Any) -> DTensor:
    return DTensor(local, mesh, tuple(placements), tuple(shape), tuple(stride))


def _mesh_of(tree: Any) -> Any:
    return next(x for x in pytree.tree_leaves(tree) if isinstance(x, DTensor)).device_mesh


def _same_mesh(dtensors: list[DTensor]) -> bool:
    return all(d.device_mesh is dtensors[0].device_mesh for d in dtensors)


# -- the propagation rules: each returns None where it does not apply ---------------------------


def _elementwise(fn: Callable[..., Any], dtensors: list[DTensor], args: Any, kwargs: Any) -> Any:
    """Inputs of one shape sharded alike give outputs sharded alike: element ``i`` of the output
    needs element ``i`` of every input, and every rank holds the same ``i``s of each. Partial
    inputs are left to the replicated way (``exp(a + b)`` is not ``exp(a) + exp(b)``)."""
    first = dtensors[0]
    if fn not in ELEMENTWISE or not _same_mesh(dtensors):
        return None
    if any(d.shape != first.shape or d.placements != first.placements for d in dtensors):
        return None
    if any(isinstance(p, Partial) for p in first.placements):
        return None
    if any(isinstance(x, torch.Tensor) for x in pytree.tree_leaves((args, kwargs))):
        return None  # a plain tensor would broadcast against a local tensor, not the global one
    return _local(fn, args, kwargs, first.placements)


def _sum(fn: Callable[..., Any], dtensors: list[DTensor], args: Any, kwargs: Any) -> Any:
    """``torch.sum(d, dim, keepdim=...)``: each rank sums what it holds (``summed_placements``
    names what that gives)."""
    if fn is not torch.sum or len(args) > 2 or set(kwargs) - {"dim", "keepdim"}:
        return None
    d, dims = args[0], args[1] if len(args) == 2 else kwargs.get("dim")
    if len(dtensors) != 1 or not isinstance(d, DTensor) or dims is None or not d.ndim:
        return None
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not all(isinstance(x, int) for x in dims):
        return None
    placements = summed_placements(d.placements, d.ndim, dims, kwargs.get("keepdim", False))
    return None if placements is None else _local(fn, args, kwargs, placements)


def summed_placements(
    placements: Sequence[Placement], ndim: int, dims: Sequence[int], keepdim: bool
) -> tuple[Placement, ...] | None:
    """The placements of the local sums over ``dims`` (all of them if empty, as ``torch.sum``
    reads it): a mesh dim that shards a summed dim leaves each coordinate a part of the sum,
    ``P(sum)``; a shard of a kept dim stays a shard of it, renumbered where summed dims before
    it disappear; ``R`` stays. ``None`` for partial or strided inputs (no rule here)."""
    summed = {x % ndim for x in dims} if dims else set(range(ndim))
    out: list[Placement] = []
    for p in placements:
        if isinstance(p, Replicate):
            out.append(p)
        elif type(p) is Shard and p.dim in summed:
            out.append(Partial("sum"))
        elif type(p) is Shard:
            out.append(Shard(p.dim - (0 if keepdim else sum(x < p.dim for x in summed))))
        else:
            return None
    return tuple(out)


def _matrix_product(fn: Callable[..., Any], dtensors: list[DTensor], args: Any, kwargs: Any) -> Any:
    """``torch.mm(a, b)``: per mesh dim, ``a``'s rows sharded with ``b`` replicated shard the
    output's rows, ``b``'s columns likewise its columns, and the contraction dim sharded on
    both (``a`` by columns, ``b`` by rows, cut alike) leaves partial sums."""
    if fn is not torch.mm or len(args) != 2 or kwargs or len(dtensors) != 2:
        return None
    a, b = args
    if not (isinstance(a, DTensor) and isinstance(b, DTensor)) or not _same_mesh(dtensors):
        return None
    products = {
        (Replicate(), Replicate()): Replicate(),
        (Shard(0), Replicate()): Shard(0),
        (Replicate(), Shard(1)): Shard(1),
        (Shard(1), Shard(0)): Partial("sum"),
    }
    placements = [products.get(pair) for pair in zip(a.placements, b.placements, strict=True)]
    if any(p is None for p in placements):
        return None
    return _local(fn, args, kwargs, placements)


def _transpose(fn: Callable[..., Any], dtensors: list[DTensor], args: Any, kwargs: Any) -> Any:
    """``torch.transpose(d, i, j)``, ``d.t()``: a shard of dim ``i`` becomes a shard of dim
    ``j``; the local transpose is the transpose's layout."""
    if fn not in (torch.transpose, torch.Tensor.t, torch.t) or kwargs or len(dtensors) != 1:
        return None
    d, *dims = args
    if not isinstance(d, DTensor) or not all(isinstance(x, int) for x in dims):
        return None
    if not dims:
        dims = [0, 1] if d.ndim == 2 else [0, 0]
    i, j = (x % max(d.ndim, 1) for x in dims)
    swap = {i: j, j: i}
    placements: list[Placement] = []
    for p in d.placements:
        if type(p) is Shard:
            placements.append(Shard(swap.get(p.dim, p.dim)))
        elif isinstance(p, (Replicate, Partial)):
            placements.append(p)
        else:
            return None
    return _local(fn, args, kwargs, placements)
