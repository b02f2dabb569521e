"""DeviceMesh (spec/dt-mesh.md): construction verdicts, coordinates and per-dim groups.

Models DT-MESH-1 to DT-MESH-7, DT-MESH-9, and flattening (DT-MESH-11, DT-MESH-14). A mesh is
the plain-data ``Mesh`` of ``vocabulary``; everything here is a function of it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from conformance.oracle.vocabulary import VALID, Verdict, value_error
from conformance.vocabulary import Mesh


def mesh_verdict(mesh: Mesh, world_size: int, dim_names: Sequence[str] | None = None) -> Verdict:
    """Whether ``DeviceMesh(mesh)`` is valid on a world of ``world_size`` (DT-MESH-2 to 5).

    Check order: DT-MESH-4 (0-d or empty), DT-MESH-3 (a rank outside the world), DT-MESH-2
    (a rank twice), DT-MESH-5 (names). Every failure is a ValueError on every rank (DT-MESH-10).
    """
    # DT-MESH-4
    if mesh.ndim == 0 or not mesh.ranks:
        return value_error("DT-MESH-4")
    # DT-MESH-3
    if any(not 0 <= r < world_size for r in mesh.ranks):
        return value_error("DT-MESH-3")
    # DT-MESH-2
    if len(set(mesh.ranks)) != len(mesh.ranks):
        return value_error("DT-MESH-2")
    # DT-MESH-5
    if dim_names is not None and (
        len(dim_names) != mesh.ndim or len(set(dim_names)) != len(dim_names)
    ):
        return value_error("DT-MESH-5")
    return VALID


def coordinates(mesh_shape: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """Every coordinate of a mesh shape, in row-major order."""
    return itertools.product(*(range(k) for k in mesh_shape))


def rank_at(mesh: Mesh, coordinate: Sequence[int]) -> int:
    """``mesh.mesh[coordinate]``: the row-major position of the coordinate."""
    index = 0
    for k, c in zip(mesh.shape, coordinate, strict=True):
        index = index * k + c
    return mesh.ranks[index]


def coordinate(mesh: Mesh, rank: int) -> tuple[int, ...] | None:
    """``get_coordinate()`` on ``rank``: its index in the mesh tensor, ``None`` outside the mesh
    (DT-MESH-6)."""
    return next((c for c in coordinates(mesh.shape) if rank_at(mesh, c) == rank), None)


def dim_group(mesh: Mesh, coord: Sequence[int], dim: int) -> tuple[int, ...]:
    """The group of mesh dim ``dim`` of the rank at ``coord``, in coordinate order; the rank's
    position in it is ``coord[dim]`` (DT-MESH-7). It is also the 1-D ``mesh[name]``."""
    return tuple(
        rank_at(mesh, (*coord[:dim], j, *coord[dim + 1 :])) for j in range(mesh.shape[dim])
    )


def by_rank(mesh: Mesh) -> dict[int, tuple[int, ...]]:
    """Every in-mesh rank with its coordinate; ranks outside the mesh are absent (DT-MESH-9)."""
    return {rank_at(mesh, c): c for c in coordinates(mesh.shape)}


def flat_group(mesh: Mesh, coord: Sequence[int], dims: Sequence[int]) -> tuple[int, ...]:
    """The flattening of mesh dims ``dims`` on the rank at ``coord``: the ranks that agree with
    ``coord`` on every other dim, in row-major order of their coordinates on ``dims``; the
    rank's coordinate in it is its position (DT-MESH-11)."""
    lines = itertools.product(*(range(mesh.shape[d]) for d in dims))
    group = []
    for along in lines:
        at = list(coord)
        for d, c in zip(dims, along, strict=True):
            at[d] = c
        group.append(rank_at(mesh, at))
    return tuple(group)


def flatten_verdict(
    dim_names: Sequence[str] | None,
    chosen: Sequence[str] | None,
    name: str | None,
    taken: dict[str, tuple[int, ...]],
) -> tuple[Verdict, tuple[int, ...], str]:
    """Whether flattening the dims called ``chosen`` (every dim when ``None``) under ``name`` is
    valid, given the names earlier flattenings ``taken`` (name to dims); with the dims and the
    flat mesh's name (DT-MESH-11, DT-MESH-14). Every failure is a ValueError on every rank."""
    if dim_names is None:
        return value_error("DT-MESH-14"), (), ""
    chosen = tuple(dim_names) if chosen is None else tuple(chosen)
    if not chosen or len(set(chosen)) != len(chosen) or set(chosen) - set(dim_names):
        return value_error("DT-MESH-14"), (), ""
    dims = tuple(dim_names.index(n) for n in chosen)
    flat_name = name or "_".join(chosen)
    single = len(dims) == 1 and dim_names[dims[0]] == flat_name
    if (
        list(dims) != sorted(dims)
        or (flat_name in dim_names and not single)
        or taken.get(flat_name, dims) != dims
    ):
        return value_error("DT-MESH-14"), dims, flat_name
    return VALID, dims, flat_name
