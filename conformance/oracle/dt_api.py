"""DTensor API (spec/dt-api.md): what ``distribute_tensor``, ``from_local``, ``to_local`` and
``full_tensor`` return on every rank, and when they raise.

Models DT-API-1 to DT-API-15. Results are keyed by global rank; ranks outside the mesh get the
empty 1-D tensor of DT-API-13. Partial values follow ``values.place`` (DT-API-14).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from conformance.oracle.dt_redistribute import redistribute_verdict
from conformance.oracle.layout import local_shape_and_offset
from conformance.oracle.mesh import by_rank, coordinate, rank_at
from conformance.oracle.placements import normalize, placements_verdict
from conformance.oracle.values import logical_value, place
from conformance.oracle.vocabulary import VALID, Verdict, value_error
from conformance.vocabulary import Mesh, Partial, Placement, Replicate, ShardLike

Shape = tuple[int, ...]


def outside(dtype: torch.dtype) -> torch.Tensor:
    """The local tensor of a rank outside the mesh: 1-D, empty, of the call's dtype (DT-API-13)."""
    return torch.empty(0, dtype=dtype)


def contiguous_stride(shape: Sequence[int]) -> Shape:
    """The contiguous stride of a shape (DT-API-1)."""
    stride, acc = [], 1
    for n in reversed(shape):
        stride.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(stride))


def distribute_verdict(
    global_shape: Sequence[int],
    mesh: Mesh,
    placements: Sequence[Placement],
    src_data_rank: int | None = 0,
) -> Verdict:
    """Whether ``distribute_tensor`` succeeds (DT-API-4: for every valid layout).

    Check order: the placements (DT-PLACE-1, 5, 7, 3, 6), then DT-API-2 (``src_data_rank`` a
    rank of the mesh), then DT-API-14 (no ``P(product)``, as DT-REDIST-7)."""
    if not (v := placements_verdict(placements, mesh.ndim, len(global_shape))).ok:
        return v
    # DT-API-2
    if src_data_rank is not None and src_data_rank not in mesh.ranks:
        return value_error("DT-API-2")
    # DT-API-14
    if any(isinstance(p, Partial) and p.op == "product" for p in placements):
        return value_error("DT-API-14")
    return VALID


def distribute_tensor(
    sources: Mapping[int, torch.Tensor],
    mesh: Mesh,
    placements: Sequence[Placement],
    world_size: int,
    src_data_rank: int | None = 0,
) -> dict[int, torch.Tensor]:
    """Every rank's ``to_local()`` after ``distribute_tensor(sources[rank], ...)``: the layout
    slice of the source rank's tensor (DT-API-2), or of each rank's own with
    ``src_data_rank=None`` (DT-API-3), partitioned along ``P`` mesh dims (DT-API-14)."""
    coords = by_rank(mesh)
    dtype = next(iter(sources.values())).dtype
    result = {}
    for rank in range(world_size):
        if rank not in coords:
            result[rank] = outside(dtype)
            continue
        source = sources[rank if src_data_rank is None else src_data_rank]
        result[rank] = place(source, mesh.shape, placements, coords[rank])
    return result


def full_tensor(
    locals_: Mapping[int, torch.Tensor],
    global_shape: Sequence[int],
    mesh: Mesh,
    placements: Sequence[Placement],
    world_size: int,
) -> dict[int, torch.Tensor]:
    """Every rank's ``full_tensor()``: the logical value on in-mesh ranks (DT-API-12, with
    reductions judged by ``tolerance``), the empty tensor elsewhere (DT-API-13)."""
    coords = by_rank(mesh)
    by_coord = {coords[r]: t for r, t in locals_.items() if r in coords}
    value = logical_value(by_coord, global_shape, mesh.shape, placements)
    return {r: value.clone() if r in coords else outside(value.dtype) for r in range(world_size)}


def infer_global_shape(
    local_shape: Sequence[int], mesh_shape: Sequence[int], placements: Sequence[Placement]
) -> Shape:
    """The global shape ``from_local`` infers without ``shape``: each dim's local size times the
    sizes of the mesh dims that shard it (DT-API-6)."""
    shape = list(local_shape)
    for k, p in zip(mesh_shape, normalize(placements, len(shape)), strict=True):
        if isinstance(p, ShardLike):
            shape[p.dim] *= k
    return tuple(shape)


def from_local_verdict(
    local_shapes: Mapping[int, Sequence[int]],
    local_dtypes: Mapping[int, str],
    mesh: Mesh,
    placements: Sequence[Placement],
    *,
    shape: Sequence[int] | None = None,
    stride: Sequence[int] | None = None,
    run_check: bool = True,
) -> Verdict:
    """Whether ``from_local`` succeeds on the in-mesh ranks, given each rank's local shape and
    dtype (keyed by global rank).

    Check order: the placements against the local ndim (DT-PLACE-1, 5, 7, 3, 6), DT-API-6
    (``shape`` and ``stride`` both or neither), then with ``run_check`` the checks of DT-API-8:
    one dtype, one inferred global shape (without ``shape``), each local shape the layout's."""
    coords = by_rank(mesh)
    inside = [r for r in mesh.ranks if r in local_shapes]
    ndim = len(local_shapes[inside[0]])
    if not (v := placements_verdict(placements, mesh.ndim, ndim)).ok:
        return v
    # DT-API-6
    if (shape is None) != (stride is None):
        return value_error("DT-API-6")
    if not run_check:
        return VALID
    # DT-API-8
    if len({local_dtypes[r] for r in inside}) > 1:
        return value_error("DT-API-8")
    if shape is None:
        inferred = {infer_global_shape(local_shapes[r], mesh.shape, placements) for r in inside}
        if len(inferred) > 1:
            return value_error("DT-API-8")
        shape = inferred.pop()
    for r in inside:
        expected, _ = local_shape_and_offset(shape, mesh.shape, placements, coords[r])
        if tuple(local_shapes[r]) != expected:
            return value_error("DT-API-8")
    return VALID


def verdicts_by_rank(
    api: str,
    global_shape: Sequence[int],
    dtype: str,
    mesh: Mesh,
    placements: Mapping[int, Sequence[Placement]],
    world_size: int,
    *,
    src_data_ranks: Mapping[int, int | None] | None = None,
    run_check: bool = False,
) -> dict[int, Verdict]:
    """Every rank's verdict when each rank passes its own ``placements`` (and ``src_data_ranks``),
    keyed by global rank: ``distribute_tensor`` of a tensor of ``global_shape``, ``from_local``
    of that tensor as the local one (no ``shape`` or ``stride``), or ``redistribute`` of an
    all-``R`` DTensor of it.

    A local call is judged on each rank's own arguments alone (ERR-6): every rank of
    ``distribute_tensor`` with ``src_data_rank=None`` (DT-API-3) and of ``from_local`` without
    ``run_check`` (DT-API-7), and every rank outside the mesh (DT-API-13). The in-mesh ranks of
    a collective call share one verdict. Check order: each in-mesh rank's own arguments, in mesh
    order, as ``distribute_verdict``, ``placements_verdict`` or ``redistribute_verdict`` judge
    them; then DT-API-15 (one normalised placement list, one ``src_data_rank``); then, for
    ``from_local``, the checks of DT-API-8. In-mesh ranks that mix ``src_data_rank=None`` with a
    rank are outside the spec (DT-API-15)."""
    src_data_ranks = src_data_ranks or dict.fromkeys(range(world_size), 0)
    ndim = len(global_shape)

    def own(rank: int) -> Verdict:
        if api == "distribute":
            return distribute_verdict(global_shape, mesh, placements[rank], src_data_ranks[rank])
        if api == "from_local":
            return placements_verdict(placements[rank], mesh.ndim, ndim)
        replicated = [Replicate()] * mesh.ndim
        return redistribute_verdict(replicated, placements[rank], mesh.ndim, ndim, dtype)

    verdicts = {rank: own(rank) for rank in range(world_size)}
    inside = list(mesh.ranks)
    if api == "distribute":
        local = {src_data_ranks[r] is None for r in inside}
        if len(local) > 1:
            raise ValueError("in-mesh ranks mix src_data_rank=None with a rank (DT-API-15)")
        collective = local == {False}
    else:
        collective = api == "redistribute" or run_check
    if not collective:
        return verdicts
    shared = next((verdicts[r] for r in inside if not verdicts[r].ok), VALID)
    if shared.ok:
        shared = _agreement_verdict(
            [normalize(placements[r], ndim) for r in inside],
            [src_data_ranks[r] for r in inside] if api == "distribute" else [],
        )
    if shared.ok and api == "from_local":
        shared = from_local_verdict(
            dict.fromkeys(inside, tuple(global_shape)),
            dict.fromkeys(inside, dtype),
            mesh,
            placements[inside[0]],
        )
    return {**verdicts, **dict.fromkeys(inside, shared)}


def _agreement_verdict(placements: Sequence[Sequence[Placement]], sources: Sequence) -> Verdict:
    # DT-API-15
    if len({tuple(p) for p in placements}) > 1 or len(set(sources)) > 1:
        return value_error("DT-API-15")
    return VALID


def from_local(
    locals_: Mapping[int, torch.Tensor],
    mesh: Mesh,
    placements: Sequence[Placement],
    world_size: int,
    *,
    shape: Sequence[int] | None = None,
    run_check: bool = True,
) -> tuple[Shape, dict[int, torch.Tensor]]:
    """The global shape and every rank's ``to_local()`` after a valid ``from_local``.

    The locals are kept (DT-API-7), except that with ``run_check`` every ``R`` mesh dim takes
    the local of its coordinate 0 (DT-API-9). Ranks outside the mesh hold the empty tensor
    (DT-API-13)."""
    coords = by_rank(mesh)
    first = locals_[mesh.ranks[0]]
    if shape is None:
        shape = infer_global_shape(first.shape, mesh.shape, placements)
    result = {}
    for rank in range(world_size):
        if rank not in coords:
            result[rank] = outside(first.dtype)
            continue
        source = tuple(
            0 if run_check and isinstance(p, Replicate) else c
            for c, p in zip(coords[rank], placements, strict=True)
        )
        result[rank] = locals_[rank_at(mesh, source)].clone()
    return tuple(shape), result


def layout_by_rank(
    global_shape: Sequence[int], mesh: Mesh, placements: Sequence[Placement], world_size: int
) -> dict[int, tuple[Shape, Shape] | None]:
    """Every rank's ``(local_shape, global_offset)``, ``None`` outside the mesh (DT-LAYOUT-1,
    DT-MESH-6)."""
    return {
        r: None
        if (c := coordinate(mesh, r)) is None
        else local_shape_and_offset(global_shape, mesh.shape, placements, c)
        for r in range(world_size)
    }
