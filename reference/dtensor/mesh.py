"""DeviceMesh: some ranks of the world arranged in an N-d grid (spec/dt-mesh.md).

A rank's *coordinate* is its index in the mesh tensor, and the coordinate, never the rank
number, decides what the rank holds (DT-MESH-8). Each mesh dim gets one process group per line
of the grid along that dim; ``members(i)`` lists the line in coordinate order. The collectives
keep that order (``collectives.py``), and the DTensor API keeps ranks outside the mesh local
(``dtensor.py``).

Rules and where they live:

- DT-MESH-1: ``DeviceMesh.mesh``, ``DeviceMesh.ndim``, ``DeviceMesh.shape``, ``DeviceMesh.size``
- DT-MESH-2, DT-MESH-3: ``_check_mesh``
- DT-MESH-4: ``_mesh_tensor``
- DT-MESH-5: ``_check_mesh``, ``DeviceMesh.mesh_dim_names``
- DT-MESH-6: ``DeviceMesh._setup``, ``DeviceMesh.get_coordinate``
- DT-MESH-7: ``DeviceMesh._lines``, ``DeviceMesh.members``, ``DeviceMesh.get_local_rank``,
  ``DeviceMesh.__getitem__``
- DT-MESH-8: see ``reference.dtensor.collectives``
- DT-MESH-9: see ``reference.dtensor.dtensor``
- DT-MESH-10: ``DeviceMesh.__init__``, ``MeshFacts``
- DT-MESH-11, DT-MESH-12: ``DeviceMesh.flatten``, ``DeviceMesh._flat_lines``
- DT-MESH-13: ``DeviceMesh.flatten``, ``DeviceMesh.__getitem__``
- DT-MESH-14: ``DeviceMesh._check_flattening``
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.distributed as dist

from reference import verdict


def _mesh_tensor(mesh: object) -> torch.Tensor:
    """Validate the ``mesh`` argument as a value; the world size is checked separately."""
    tensor = mesh if isinstance(mesh, torch.Tensor) else torch.tensor(mesh)
    # DT-MESH-4
    if tensor.ndim == 0 or tensor.numel() == 0:
        raise ValueError(
            f"[DT-MESH-4] a mesh needs >= 1 dim and >= 1 rank; got shape {tuple(tensor.shape)}"
        )
    if tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool:
        raise TypeError(f"mesh must hold integer ranks; got dtype {tensor.dtype}")
    return tensor.to(torch.long).cpu().clone()


def _check_mesh(tensor: torch.Tensor, names: object, world_size: int) -> None:
    ranks = tensor.flatten().tolist()
    # DT-MESH-3
    outside = [r for r in ranks if not 0 <= r < world_size]
    if outside:
        raise ValueError(f"[DT-MESH-3] ranks {outside} are not in a world of {world_size}")
    # DT-MESH-2
    if len(set(ranks)) != len(ranks):
        duplicates = sorted({r for r in ranks if ranks.count(r) > 1})
        raise ValueError(f"[DT-MESH-2] ranks {duplicates} appear more than once in the mesh")
    if names is None:
        return
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise TypeError(f"mesh_dim_names must be a tuple of str; got {names!r}")
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"mesh_dim_names must be a tuple of str; got {names!r}")
    # DT-MESH-5
    if len(names) != tensor.ndim or len(set(names)) != len(names):
        raise ValueError(
            f"[DT-MESH-5] mesh_dim_names must be {tensor.ndim} distinct names; got {tuple(names)}"
        )


class MeshFacts(NamedTuple):
    """What each rank passed to ``DeviceMesh``; every rank must pass the same (DT-MESH-10)."""

    device_type: str
    mesh: list
    names: tuple[str, ...] | None


class DeviceMesh:
    """An N-d grid of global ranks, with the process groups its collectives need.

    Construction is collective over the world (DT-MESH-10): every rank validates, the ranks
    exchange their verdicts and their mesh, and every rank either gets the same mesh or raises.
    """

    def __init__(
        self, device_type: str, mesh: object, *, mesh_dim_names: Sequence[str] | None = None
    ) -> None:
        def validate() -> torch.Tensor:
            if not isinstance(device_type, str):
                raise TypeError(f"device_type must be a str; got {device_type!r}")
            tensor = _mesh_tensor(mesh)
            _check_mesh(tensor, mesh_dim_names, dist.get_world_size())
            return tensor

        error, tensor = verdict.check(validate)
        names = None if mesh_dim_names is None else tuple(mesh_dim_names)
        facts = None if error else MeshFacts(device_type, tensor.tolist(), names)
        # DT-MESH-10
        verdict.require_same(
            verdict.exchange(dist.group.WORLD, error, facts), "DT-MESH-10", "the mesh"
        )
        self._setup(device_type, tensor, names)
        self._make_groups()

    def _setup(self, device_type: str, tensor: torch.Tensor, names: tuple[str, ...] | None) -> None:
        self.device_type = device_type
        self._tensor = tensor
        self._names = names
        self._rank = dist.get_rank()
        self._flattened: dict[str, tuple[tuple[int, ...], DeviceMesh]] = {}
        # DT-MESH-6
        where = (tensor == self._rank).nonzero().tolist()
        self._coordinate = tuple(where[0]) if where else None

    def _make_groups(self) -> None:
        """One group per line of the grid along each mesh dim, and one for the whole mesh.

        ``dist.new_group`` is collective over the world, so every rank creates every group, in
        the same order, and keeps the ones it belongs to.
        """
        self._groups: list[dist.ProcessGroup | None] = []
        self._members: list[list[int]] = []
        for dim in range(self.ndim):
            mine: tuple[dist.ProcessGroup | None, list[int]] = (None, [])
            for line in self._lines(dim):
                group = _new_group(line)
                if self._rank in line:
                    mine = (group, line)
            self._groups.append(mine[0])
            self._members.append(mine[1])
        everyone = self._tensor.flatten().tolist()
        self._mesh_group = _new_group(everyone)

    def _lines(self, dim: int) -> list[list[int]]:
        """The ranks of every line along ``dim``, each in coordinate order (DT-MESH-7)."""
        moved = self._tensor.movedim(dim, -1).reshape(-1, self._tensor.shape[dim])
        return moved.tolist()

    # -- accessors (DT-MESH-1, -5, -6, -7) -----------------------------------------------------

    @property
    def mesh(self) -> torch.Tensor:
        return self._tensor.clone()

    @property
    def ndim(self) -> int:
        return self._tensor.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._tensor.shape)

    def size(self, dim: int | None = None) -> int:
        return self._tensor.numel() if dim is None else self._tensor.shape[dim]

    @property
    def mesh_dim_names(self) -> tuple[str, ...] | None:
        return self._names

    def get_coordinate(self) -> tuple[int, ...] | None:
        return self._coordinate

    def get_local_rank(self, dim: int) -> int:
        """The position in the group of ``dim``: the coordinate there (DT-MESH-7).

        Note: PyTorch reports the position in a group sorted by global rank instead.
        """
        if self._coordinate is None:
            raise ValueError(f"rank {self._rank} is not in the mesh")
        return self._coordinate[dim]

    def get_group(self, dim: int) -> dist.ProcessGroup | None:
        return self._groups[dim]

    def members(self, dim: int) -> list[int]:
        """The global ranks of this rank's line along ``dim``, in coordinate order."""
        return self._members[dim]

    @property
    def mesh_group(self) -> dist.ProcessGroup | None:
        """The group of every rank in the mesh: verdicts and checks are exchanged over it."""
        return self._mesh_group

    def rank_at(self, coordinate: Sequence[int]) -> int:
        return int(self._tensor[tuple(coordinate)])

    def coordinates(self) -> list[tuple[int, ...]]:
        """Every coordinate, in row-major order."""
        return list(itertools.product(*(range(k) for k in self.shape)))

    def __getitem__(self, name: str) -> DeviceMesh:
        """The 1-d mesh of this rank's line along the dim called ``name`` (DT-MESH-7), or the
        flattening that took ``name`` (DT-MESH-13)."""
        if name in self._flattened:
            return self._flattened[name][1]
        if self._names is None or name not in self._names:
            raise KeyError(f"no mesh dim named {name!r}; names are {self._names}")
        if self._coordinate is None:
            raise ValueError(f"rank {self._rank} is not in the mesh")
        dim = self._names.index(name)
        return self._one_dim(name, self._groups[dim], self._members[dim])

    def _one_dim(self, name: str, group: dist.ProcessGroup | None, line: list[int]) -> DeviceMesh:
        """The 1-d mesh of ``line``, whose one group is ``group`` (``None`` outside it)."""
        mesh = DeviceMesh.__new__(DeviceMesh)
        mesh._setup(self.device_type, torch.tensor(line), (name,))
        mesh._groups, mesh._members = [group], [line if self._rank in line else []]
        mesh._mesh_group = group
        return mesh

    # -- flattening (DT-MESH-11 to -14) ------------------------------------------------------

    def flatten(self, names: Sequence[str] | None = None, name: str | None = None) -> DeviceMesh:
        """The 1-d mesh of this rank's ranks along the dims called ``names`` (every dim when
        ``None``), in row-major order of their coordinates there (DT-MESH-11); PyTorch spells it
        ``mesh[names]._flatten(name)``. Afterwards ``self[name]`` returns it (DT-MESH-13).

        Collective over the world, as construction is: every rank validates, the ranks agree on
        one verdict and one request, then every rank creates every flat group in the same order
        (DT-MESH-14).
        """

        def validate() -> tuple[tuple[int, ...], str]:
            return self._check_flattening(names, name)

        error, request = verdict.check(validate)
        verdict.require_same(
            verdict.exchange(dist.group.WORLD, error, request), "DT-MESH-14", "the flattening"
        )
        dims, flat_name = request
        if flat_name in self._flattened:
            return self._flattened[flat_name][1]
        if len(dims) == 1 and self._names[dims[0]] == flat_name:
            # A dim flattened under its own name is that dim, whose groups exist already.
            line = self._members[dims[0]] or self._lines(dims[0])[0]
            return self._one_dim(flat_name, self._groups[dims[0]], line)
        lines = self._flat_lines(dims)
        group, line = None, lines[0]
        for each in lines:
            created = _new_group(each)
            if self._rank in each:
                group, line = created, each
        flat = self._one_dim(flat_name, group, line)
        self._flattened[flat_name] = (dims, flat)
        return flat

    def _check_flattening(
        self, names: Sequence[str] | None, name: str | None
    ) -> tuple[tuple[int, ...], str]:
        """The dims to flatten and the flat mesh's name, or the ``ValueError`` of DT-MESH-14."""
        if self._names is None:
            raise ValueError("[DT-MESH-14] only a mesh with mesh_dim_names can be flattened")
        chosen = tuple(self._names) if names is None else tuple(names)
        unknown = [n for n in chosen if n not in self._names]
        if not chosen or unknown or len(set(chosen)) != len(chosen):
            raise ValueError(
                f"[DT-MESH-14] flatten needs distinct dim names of {self._names}; got {chosen}"
            )
        dims = tuple(self._names.index(n) for n in chosen)
        if list(dims) != sorted(dims):
            raise ValueError(
                f"[DT-MESH-14] flatten names dims in mesh order {self._names}; got {chosen}"
            )
        flat_name = name or "_".join(chosen)
        single = len(dims) == 1 and self._names[dims[0]] == flat_name
        if flat_name in self._names and not single:
            raise ValueError(f"[DT-MESH-14] {flat_name!r} already names a dim of the mesh")
        if flat_name in self._flattened and self._flattened[flat_name][0] != dims:
            raise ValueError(
                f"[DT-MESH-14] {flat_name!r} already names the flattening of other dims"
            )
        return dims, flat_name

    def _flat_lines(self, dims: tuple[int, ...]) -> list[list[int]]:
        """Every group of the flattening of ``dims``: the ranks that agree on every other dim,
        row-major over ``dims`` (DT-MESH-11)."""
        others = [d for d in range(self.ndim) if d not in dims]
        width = math.prod(self.shape[d] for d in dims)
        return self._tensor.permute(*others, *dims).reshape(-1, width).tolist()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, DeviceMesh)
            and self.device_type == other.device_type
            and torch.equal(self._tensor, other._tensor)
            and self._names == other._names
        )

    def __hash__(self) -> int:
        return hash((self.device_type, tuple(self._tensor.flatten().tolist()), self.shape))

    def __repr__(self) -> str:
        names = "" if self._names is None else f", mesh_dim_names={self._names}"
        return f"DeviceMesh({self.device_type!r}, {self._tensor.tolist()}{names})"


def _new_group(ranks: list[int]) -> dist.ProcessGroup | None:
    """A group of ``ranks``; the world's own group when they are the whole world.

    Note: inside a group, group ranks follow ascending global rank, whatever order ``ranks`` is
    in. ``collectives`` maps them back to coordinates; PyTorch's DTensor does not (DT-MESH-7).
    """
    if sorted(ranks) == list(range(dist.get_world_size())):
        return dist.group.WORLD
    return dist.new_group(ranks)
