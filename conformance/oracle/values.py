"""Between a logical value and the local tensors of every coordinate, both ways.

``place`` goes down: slice the value by the layout (DT-LAYOUT-12), then partition it along each
``P`` mesh dim (DT-REDIST-6). ``logical_value`` goes up: reduce over the ``P`` mesh dims
(DT-PLACE-11) and reassemble the slices (DT-LAYOUT-11). ``distribute_tensor``, ``full_tensor``
and ``redistribute`` are compositions of the two.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import torch

from conformance.oracle.layout import index_sequences, local_tensor, put
from conformance.oracle.mesh import coordinates
from conformance.oracle.placements import partial_op, reduce
from conformance.vocabulary import Partial, Placement, Replicate

Coordinate = tuple[int, ...]


def partition(value: torch.Tensor, op: str, k: int, c: int) -> torch.Tensor:
    """The share of coordinate ``c`` (of ``k``) of a value moved to ``P(op)`` (DT-REDIST-6):
    floating ``sum`` divides by ``k``; integer ``sum`` keeps the value at ``c == 0`` and zeros
    elsewhere; ``avg``, ``min``, ``max`` keep it. ``product`` has no partition (DT-REDIST-7)."""
    if op == "product":
        raise ValueError("DT-REDIST-7: nothing partitions into P(product)")
    if op != "sum":
        return value.clone()
    if value.is_floating_point():
        return value / k
    return value.clone() if c == 0 else torch.zeros_like(value)


def place(
    value: torch.Tensor,
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    coordinate: Coordinate,
    keep: Collection[int] = (),
) -> torch.Tensor:
    """The local tensor of ``coordinate`` for a value laid out by ``placements``: the layout
    slice, partitioned along every ``P`` mesh dim not in ``keep``, in mesh-dim order (each
    division rounded once, DT-REDIST-8). Mesh dims in ``keep`` already hold partial values."""
    local = local_tensor(value, mesh_shape, placements, coordinate)
    for i, p in enumerate(placements):
        if isinstance(p, Partial) and i not in keep:
            local = partition(local, p.op, mesh_shape[i], coordinate[i])
    return local


def logical_value(
    locals_: Mapping[Coordinate, torch.Tensor],
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    fixed: Mapping[int, int] | None = None,
) -> torch.Tensor:
    """The value the local tensors stand for (DT-PLACE-11, DT-API-12).

    Each group of coordinates that agree outside the ``P`` mesh dims is reduced with the one op;
    along ``R`` mesh dims coordinate 0 stands for its replicas (DT-PLACE-10); the results are
    written at their index sequences. ``fixed`` restricts to the coordinates with those
    positions along some ``P`` mesh dims and does not reduce over them: the value of that slice
    of the mesh (used for ``P → P`` with the same op, DT-REDIST-2)."""
    fixed = dict(fixed or {})
    free = [i for i, p in enumerate(placements) if isinstance(p, Partial | Replicate)]
    reduced = [i for i in free if isinstance(placements[i], Partial) and i not in fixed]
    op = partial_op(placements)
    coords = [c for c in coordinates(mesh_shape) if all(c[i] == v for i, v in fixed.items())]
    sample = next(iter(locals_.values()))
    out = torch.empty(tuple(global_shape), dtype=sample.dtype)
    for c in coords:
        if any(c[i] != 0 for i in free if i not in fixed):
            continue
        kept = [i for i in range(len(c)) if i not in reduced]
        parts = [locals_[g] for g in coords if all(g[i] == c[i] for i in kept)]
        piece = reduce(op, parts) if reduced else parts[0]
        put(out, index_sequences(global_shape, mesh_shape, placements, c), piece)
    return out
