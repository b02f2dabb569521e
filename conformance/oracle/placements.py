"""Placements (spec/dt-placements.md): validity, normalisation and the meaning of Partial.

Models DT-PLACE-1 to DT-PLACE-7 (verdicts), DT-PLACE-2 (normalisation), DT-PLACE-8 (equality is
the dataclasses' own) and DT-PLACE-11 (the reduction a Partial stands for).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from conformance.oracle.vocabulary import VALID, Verdict, is_int, normdim, type_error, value_error
from conformance.vocabulary import Partial, Placement, Shard, ShardLike, StridedShard

REDUCE_OPS = ("sum", "avg", "min", "max", "product")


def construction_verdict(kind: str, *args: object) -> Verdict:
    """Whether constructing a placement from raw arguments is valid (DT-PLACE-4, 5, 7).

    ``kind`` is ``"Shard"``, ``"_StridedShard"``, ``"Replicate"`` or ``"Partial"``; ``Partial()``
    means ``Partial("sum")``. Types are checked before values."""
    if kind == "Shard":
        return VALID if is_int(args[0]) else type_error("DT-PLACE-4")
    if kind == "_StridedShard":
        if not all(is_int(a) for a in args):
            return type_error("DT-PLACE-4")
        return VALID if args[1] >= 1 else value_error("DT-PLACE-7")
    if kind == "Partial":
        op = args[0] if args else "sum"
        if not isinstance(op, str):
            return type_error("DT-PLACE-4")
        return VALID if op in REDUCE_OPS else value_error("DT-PLACE-5")
    return VALID


def placements_verdict(
    placements: Sequence[Placement], mesh_ndim: int, tensor_ndim: int
) -> Verdict:
    """Whether a placement list is valid for a mesh and a tensor, in any API that takes one.

    Check order: DT-PLACE-1 (one per mesh dim), then per entry DT-PLACE-5 (op) and DT-PLACE-7
    (split factor), which PyTorch-like APIs meet at construction, then DT-PLACE-3 (shard dim in
    range), then DT-PLACE-6 (one Partial op)."""
    # DT-PLACE-1
    if len(placements) != mesh_ndim:
        return value_error("DT-PLACE-1")
    for p in placements:
        # DT-PLACE-5
        if isinstance(p, Partial) and p.op not in REDUCE_OPS:
            return value_error("DT-PLACE-5")
        # DT-PLACE-7
        if isinstance(p, StridedShard) and p.split_factor < 1:
            return value_error("DT-PLACE-7")
    # DT-PLACE-3
    dims = [p.dim for p in placements if isinstance(p, ShardLike)]
    if any(not -tensor_ndim <= d < tensor_ndim for d in dims):
        return value_error("DT-PLACE-3")
    # DT-PLACE-6
    if len({p.op for p in placements if isinstance(p, Partial)}) > 1:
        return value_error("DT-PLACE-6")
    return VALID


def normalize(placements: Sequence[Placement], ndim: int) -> tuple[Placement, ...]:
    """Shard dims made non-negative against a tensor of ``ndim`` dims (DT-PLACE-2)."""

    def one(p: Placement) -> Placement:
        if isinstance(p, Shard):
            return Shard(normdim(p.dim, ndim))
        if isinstance(p, StridedShard):
            return StridedShard(normdim(p.dim, ndim), p.split_factor)
        return p

    return tuple(one(p) for p in placements)


def partial_op(placements: Sequence[Placement]) -> str | None:
    """The one reduce op of a placement list (DT-PLACE-6), or ``None`` without Partial."""
    return next((p.op for p in placements if isinstance(p, Partial)), None)


_FOLDS = {
    "sum": torch.add,
    "avg": torch.add,
    "product": torch.mul,
    "max": torch.maximum,
    "min": torch.minimum,
}


def reduce(op: str, parts: Sequence[torch.Tensor]) -> torch.Tensor:
    """The element-wise ``op``-reduction of the parts (DT-PLACE-11), folded left to right in
    their dtype; ``avg`` is that sum divided once by the count (DT-REDIST-5). Integer ``avg``
    cannot be reduced (DT-REDIST-9): callers check ``redistribute_verdict`` first."""
    result = functools.reduce(_FOLDS[op], parts[1:], parts[0].clone())
    if op == "avg":
        if not result.is_floating_point():
            raise ValueError("DT-REDIST-9: P(avg) of an integer dtype cannot be reduced")
        result = result / len(parts)
    return result
