"""Redistribute (spec/dt-redistribute.md): which transitions raise, what each rank holds after
the others, and how far a result may round.

Models DT-REDIST-1 to DT-REDIST-14. A transition is computed as the spec defines it, not as a
collective would run it: take the logical value of the source (reducing the ``P`` mesh dims
that change) and lay it out by the target (partitioning the new ``P`` mesh dims). Mesh dims that
stay ``P(op)`` keep their partial values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from conformance.oracle.mesh import by_rank, coordinates
from conformance.oracle.placements import normalize, placements_verdict
from conformance.oracle.values import logical_value, place
from conformance.oracle.vocabulary import VALID, Verdict, unsupported, value_error
from conformance.vocabulary import Mesh, Partial, Placement

INTEGER_DTYPES = ("int64", "bool")


def redistribute_verdict(
    source: Sequence[Placement],
    target: Sequence[Placement] | None,
    mesh_ndim: int,
    tensor_ndim: int,
    dtype: str,
    *,
    same_mesh: bool = True,
) -> Verdict:
    """Whether ``d.redistribute(mesh, target)`` succeeds for a valid source DTensor.

    Check order: DT-REDIST-10 (placements given), DT-REDIST-11 (same mesh, NotImplementedError
    that an implementation may lift), the target placements (DT-PLACE-1, 5, 7, 3, 6),
    DT-REDIST-7 (no partition into ``P(product)``), DT-REDIST-9 (no integer ``P(avg)``
    reduction)."""
    # DT-REDIST-10
    if target is None:
        return value_error("DT-REDIST-10")
    # DT-REDIST-11
    if not same_mesh:
        return unsupported("DT-REDIST-11", optional=False)
    if not (v := placements_verdict(target, mesh_ndim, tensor_ndim)).ok:
        return v
    for s, t in zip(source, target, strict=True):
        # DT-REDIST-7
        if t == Partial("product") and s != t:
            return value_error("DT-REDIST-7")
        # DT-REDIST-9
        if s == Partial("avg") and s != t and dtype in INTEGER_DTYPES:
            return value_error("DT-REDIST-9")
    return VALID


def redistribute_by_coordinate(
    locals_: Mapping[tuple[int, ...], torch.Tensor],
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    source: Sequence[Placement],
    target: Sequence[Placement],
) -> dict[tuple[int, ...], torch.Tensor]:
    """Every coordinate's local tensor after a valid redistribution.

    Same placements after normalisation: the locals, bitwise (DT-REDIST-2). Otherwise, for each
    slice of the mesh along the dims that stay ``P(op)``, the slice's logical value laid out by
    the target (DT-REDIST-1, 3, 4, 6)."""
    ndim = len(global_shape)
    source, target = normalize(source, ndim), normalize(target, ndim)
    if source == target:
        return {c: t.clone() for c, t in locals_.items()}
    pairs = enumerate(zip(source, target, strict=True))
    keep = [i for i, (s, t) in pairs if isinstance(s, Partial) and s == t]
    values: dict[tuple[int, ...], torch.Tensor] = {}
    result = {}
    for c in coordinates(mesh_shape):
        key = tuple(c[i] for i in keep)
        if key not in values:
            fixed = dict(zip(keep, key, strict=True))
            values[key] = logical_value(locals_, global_shape, mesh_shape, source, fixed)
        result[c] = place(values[key], mesh_shape, target, c, keep)
    return result


def redistribute(
    locals_: Mapping[int, torch.Tensor],
    global_shape: Sequence[int],
    mesh: Mesh,
    source: Sequence[Placement],
    target: Sequence[Placement],
    world_size: int,
) -> dict[int, torch.Tensor]:
    """Every rank's ``to_local()`` after ``redistribute``, keyed by global rank; ranks outside
    the mesh hold the empty 1-D tensor (DT-REDIST-14)."""
    coords = by_rank(mesh)
    by_coord = {coords[r]: t for r, t in locals_.items() if r in coords}
    moved = redistribute_by_coordinate(by_coord, global_shape, mesh.shape, source, target)
    dtype = next(iter(by_coord.values())).dtype
    return {
        r: moved[coords[r]] if r in coords else torch.empty(0, dtype=dtype)
        for r in range(world_size)
    }
