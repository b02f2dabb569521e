"""DTensor: a global tensor spread over a mesh, one local tensor per rank (spec/dt-api.md).

A plain class, not a ``torch.Tensor`` subclass: it records the global metadata (shape, stride,
dtype, mesh, placements) and this rank's local tensor. Every collective entry point validates
locally, exchanges one verdict over the mesh (``verdict``), and only then moves data; on a rank
outside the mesh every call is local (DT-MESH-9). ``DTensor.redistribute`` checks its arguments
here (DT-REDIST-7, 9 to 11) and leaves the plan and the data movement to ``redistribute.py``.

Rules and where they live:

- DT-API-1: ``DTensor.shape``, ``DTensor.size``, ``DTensor.stride``, ``DTensor.ndim``,
  ``DTensor.dtype``, ``_dense_stride``
- DT-API-2, DT-API-3, DT-API-4, DT-API-5: ``distribute_tensor``
- DT-API-6: ``DTensor.from_local``, ``_inferred_shape``, ``_require_sizes``
- DT-API-7, DT-API-9, DT-API-10: ``DTensor.from_local``
- DT-API-8: ``DTensor.from_local``, ``_check_layout``, ``RunCheckFacts``
- DT-API-11: ``DTensor.to_local``
- DT-API-12: ``DTensor.full_tensor``
- DT-API-13, DT-MESH-9: ``distribute_tensor``, ``DTensor.from_local``, ``DTensor.redistribute``
- DT-API-14: ``distribute_tensor``, ``_partitioned``
- DT-API-15: ``distribute_tensor``, ``SourceFacts``, ``DTensor.redistribute``, ``_check_layout``
- DT-GRAD-1: ``DTensor.requires_grad``, ``DTensor.is_leaf``, ``_partitioned``
- DT-GRAD-2: ``DTensor.grad``
- DT-GRAD-3: ``DTensor.to_local``, ``DTensor.full_tensor``
- DT-GRAD-4: ``DTensor.from_local``, ``_declared``
- DT-GRAD-5: ``DTensor.redistribute``
- DT-LAYOUT-12: ``_block``
- DT-OP-7: ``DTensor.assign`` (a result of another mesh is refused)
- DT-OP-11, DT-OP-13: ``DTensor.assign``
- DT-REDIST-6: see ``reference.dtensor.redistribute``
- DT-REDIST-7, DT-REDIST-9, DT-REDIST-10, DT-REDIST-11, DT-REDIST-13, DT-REDIST-14:
  ``DTensor.redistribute``
- ERR-2: ``_require_sizes``, ``_require_tensor_and_mesh``
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.distributed as dist

from reference import verdict
from reference.dtensor import autograd, collectives
from reference.dtensor.layout import index_sequences, take
from reference.dtensor.mesh import DeviceMesh
from reference.dtensor.placements import (
    Partial,
    Placement,
    Replicate,
    ShardLike,
    normalize,
    show,
)
from reference.dtensor.placements import _require_int as require_int
from reference.dtensor.redistribute import partition


class DTensor:
    """Use ``distribute_tensor`` or ``DTensor.from_local`` to make one."""

    def __init__(
        self,
        local: torch.Tensor,
        mesh: DeviceMesh,
        placements: tuple[Placement, ...],
        shape: tuple[int, ...],
        stride: tuple[int, ...],
    ) -> None:
        self._local = local
        self._mesh = mesh
        self._placements = placements
        self._shape = torch.Size(shape)
        self._stride = tuple(stride)

    # -- global metadata (DT-API-1) -----------------------------------------------------------

    @property
    def shape(self) -> torch.Size:
        return self._shape

    def size(self, dim: int | None = None) -> torch.Size | int:
        return self._shape if dim is None else self._shape[dim]

    def stride(self) -> tuple[int, ...]:
        return self._stride

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def dtype(self) -> torch.dtype:
        return self._local.dtype

    @property
    def requires_grad(self) -> bool:
        """DT-GRAD-1: the local tensor's flag, which every call keeps."""
        return self._local.requires_grad

    @property
    def is_leaf(self) -> bool:
        """DT-GRAD-1: whether no call made this DTensor from one that requires grad."""
        return self._local.is_leaf

    @property
    def grad(self) -> DTensor | None:
        """A leaf's gradient (DT-GRAD-2): its local tensor's, laid out by the gradient
        placements."""
        local = self._local.grad
        if local is None:
            return None
        placements = autograd.gradient_placements(self._placements)
        return DTensor(local, self._mesh, placements, self._shape, self._stride)

    @property
    def device_mesh(self) -> DeviceMesh:
        return self._mesh

    @property
    def placements(self) -> tuple[Placement, ...]:
        return self._placements

    def __repr__(self) -> str:
        return (
            f"DTensor(shape={tuple(self._shape)}, dtype={self.dtype}, "
            f"placements={show(self._placements)}, local={tuple(self._local.shape)})"
        )

    # -- data -----------------------------------------------------------------------------------

    def assign(self, result: DTensor) -> None:
        """Become ``result``, a DTensor of the same mesh: its local tensor, placements, global
        shape and stride. This is how an op writes a DTensor it was given, in place (DT-OP-11) or
        as ``out=`` (DT-OP-13): the caller's object holds the result."""
        if result.device_mesh is not self._mesh:
            raise NotImplementedError(
                "DT-OP-7: writing a result into a DTensor of another mesh is not supported"
            )
        self._local = result._local
        self._placements = result._placements
        self._shape = result._shape
        self._stride = result._stride

    def to_local(self, *, grad_placements: Sequence[Placement] | None = None) -> torch.Tensor:
        """This rank's local tensor, without communication (DT-API-11). Its gradient arrives
        laid out by ``grad_placements`` (default: the gradient placements) and is moved to the
        layout of this DTensor's gradient (DT-GRAD-3)."""
        if not self._local.requires_grad:
            return self._local
        own = autograd.gradient_placements(self._placements)
        arrives = own if grad_placements is None else self._normalized(grad_placements)
        return autograd.Declare.apply(self._local, self._mesh, self._shape, arrives, own)

    def full_tensor(self, *, grad_placements: Sequence[Placement] | None = None) -> torch.Tensor:
        """The logical value on every in-mesh rank (DT-API-12): a redistribution to all ``R``,
        whose gradient arrives laid out by ``grad_placements`` (default: all ``R``,
        DT-GRAD-3)."""
        # Every rank asks for the same target, so no verdict is exchanged: the one check that
        # can refuse it (DT-REDIST-9) reads metadata every rank shares, and refuses on each.
        target = (Replicate(),) * self._mesh.ndim
        self._require_reachable(target)
        return self._moved(target).to_local(grad_placements=grad_placements)

    def _normalized(self, placements: Sequence[Placement]) -> tuple[Placement, ...]:
        return normalize(placements, self.ndim, self._mesh.ndim)

    def redistribute(
        self,
        device_mesh: DeviceMesh | None = None,
        placements: Sequence[Placement] | None = None,
    ) -> DTensor:
        """The same logical tensor with ``placements`` (spec/dt-redistribute.md)."""

        def validate() -> tuple[Placement, ...]:
            # DT-REDIST-11
            if device_mesh is not None and device_mesh != self._mesh:
                raise NotImplementedError(
                    "[DT-REDIST-11] redistribute to another mesh is not supported"
                )
            # DT-REDIST-10
            if placements is None:
                raise ValueError("[DT-REDIST-10] redistribute needs target placements")
            target = normalize(placements, self.ndim, self._mesh.ndim)
            self._require_reachable(target)
            return target

        error, target = verdict.check(validate)
        if self._mesh.get_coordinate() is None:
            # DT-REDIST-14: ranks outside the mesh neither wait nor move data.
            if error:
                raise error
            return self._moved(target)
        facts = verdict.exchange(self._mesh.mesh_group, error, show(target) if target else None)
        verdict.require_same(facts, "DT-API-15", "the target placements")
        return self._moved(target)

    def _require_reachable(self, target: Sequence[Placement]) -> None:
        for source_p, target_p in zip(self._placements, target, strict=True):
            # DT-REDIST-7
            if target_p == Partial("product") and source_p != target_p:
                raise ValueError("[DT-REDIST-7] cannot partition a value into P(product)")
            # DT-REDIST-9
            if source_p == Partial("avg") != target_p and not self.dtype.is_floating_point:
                raise ValueError(f"[DT-REDIST-9] cannot average {self.dtype} partials")

    def _moved(self, target: tuple[Placement, ...]) -> DTensor:
        """This DTensor with ``target`` placements, its data moved (``redistribute.py``); on a
        rank outside the mesh, nothing moves (DT-REDIST-14)."""
        local = self._local
        if self._mesh.get_coordinate() is not None:
            local = autograd.Redistribute.apply(
                self._local, self._mesh, self._shape, self._placements, target
            )
        return DTensor(local, self._mesh, target, self._shape, self._stride)

    # -- construction from local tensors --------------------------------------------------------

    @staticmethod
    def from_local(
        local_tensor: torch.Tensor,
        device_mesh: DeviceMesh,
        placements: Sequence[Placement],
        *,
        run_check: bool = False,
        shape: Sequence[int] | None = None,
        stride: Sequence[int] | None = None,
        grad_placements: Sequence[Placement] | None = None,
    ) -> DTensor:
        """Wrap each rank's local tensor (DT-API-6 .. DT-API-10).

        Without ``run_check`` nothing is communicated and the local tensor is used as given.
        With it, the mesh checks that the local tensors form the layout and makes replicas equal.
        The local tensor's gradient is laid out by ``grad_placements`` (default: the gradient
        placements, DT-GRAD-4).
        """

        def validate() -> tuple[Placement, ...]:
            _require_tensor_and_mesh(local_tensor, device_mesh)
            placed = normalize(placements, local_tensor.ndim, device_mesh.ndim)
            # DT-API-6
            if (shape is None) != (stride is None):
                raise ValueError("[DT-API-6] give both shape and stride, or neither")
            if shape is not None:
                _require_sizes("shape", shape, local_tensor.ndim)
                _require_sizes("stride", stride, local_tensor.ndim)
            if grad_placements is not None:  # checked here, so that every rank refuses alike
                normalize(grad_placements, local_tensor.ndim, device_mesh.ndim)
            return placed

        error, placed = verdict.check(validate)
        coordinate = _coordinate(device_mesh)
        if not run_check or coordinate is None:
            # DT-API-7 (no communication), DT-API-10/13 (outside the mesh: no waiting).
            if error:
                raise error
            local = local_tensor
            if coordinate is None:
                local = local_tensor.new_empty(0).requires_grad_(local_tensor.requires_grad)
            return _declared(local_tensor, local, device_mesh, placed, shape, stride,
                             grad_placements)  # fmt: skip

        own = None
        if not error:
            global_shape = _global_shape(local_tensor, device_mesh, placed, shape)
            own = RunCheckFacts(show(placed), global_shape, str(local_tensor.dtype), coordinate,
                                tuple(local_tensor.shape))  # fmt: skip
        facts = verdict.exchange(device_mesh.mesh_group, error, own)
        _check_layout(facts, device_mesh, placed)  # no rank failed, so ``placed`` is checked
        local = local_tensor
        for mesh_dim, placement in enumerate(placed):
            # DT-API-9: replicas take coordinate 0's tensor, into a new tensor.
            if isinstance(placement, Replicate):
                local = collectives.broadcast(device_mesh, mesh_dim, local)
        return _declared(local_tensor, local, device_mesh, placed, shape, stride, grad_placements)


def _global_shape(
    local: torch.Tensor,
    mesh: DeviceMesh,
    placements: tuple[Placement, ...],
    shape: Sequence[int] | None,
) -> tuple[int, ...]:
    """DT-API-6: the ``shape`` given, else the one inferred from the local tensor."""
    return tuple(shape) if shape is not None else _inferred_shape(local.shape, mesh, placements)


def _declared(
    given: torch.Tensor,
    local: torch.Tensor,
    mesh: DeviceMesh,
    placements: tuple[Placement, ...],
    shape: Sequence[int] | None,
    stride: Sequence[int] | None,
    grad_placements: Sequence[Placement] | None,
) -> DTensor:
    """``from_local``'s DTensor holding ``local`` (made from the caller's ``given``), whose
    gradient ``given`` gets laid out by ``grad_placements`` (DT-GRAD-4)."""
    global_shape = _global_shape(given, mesh, placements, shape)
    global_stride = _dense_stride(global_shape, given) if stride is None else tuple(stride)
    if local.requires_grad:
        own = autograd.gradient_placements(placements)
        leaves = own
        if grad_placements is not None:
            leaves = normalize(grad_placements, given.ndim, mesh.ndim)
        local = autograd.Declare.apply(local, mesh, global_shape, own, leaves)
    return DTensor(local, mesh, placements, global_shape, global_stride)


class RunCheckFacts(NamedTuple):
    """What each rank of ``from_local(run_check=True)`` tells the others."""

    placements: str
    global_shape: tuple[int, ...]
    dtype: str
    coordinate: tuple[int, ...]
    local_shape: tuple[int, ...]


def _check_layout(
    facts: list[RunCheckFacts], mesh: DeviceMesh, placements: tuple[Placement, ...]
) -> None:
    """DT-API-15, then DT-API-8, on every rank from the same facts, so every rank reaches the
    same verdict."""
    verdict.require_same([f.placements for f in facts], "DT-API-15", "the placements")
    verdict.require_same([f.dtype for f in facts], "DT-API-8", "the local dtype")
    verdict.require_same([f.global_shape for f in facts], "DT-API-8", "the global shape")
    for f in facts:
        wanted = tuple(
            len(s) for s in index_sequences(f.global_shape, mesh.shape, placements, f.coordinate)
        )
        # DT-API-8
        if f.local_shape != wanted:
            raise ValueError(
                f"[DT-API-8] rank {mesh.rank_at(f.coordinate)} at {f.coordinate} passed a local "
                f"tensor of shape {f.local_shape}; the layout of {f.global_shape} gives {wanted}"
            )


class SourceFacts(NamedTuple):
    """What each rank of ``distribute_tensor`` tells the others; ``source`` is the source rank's
    ``(shape, stride, dtype)``, ``None`` elsewhere."""

    placements: str
    src_data_rank: int
    source: tuple[tuple[int, ...], tuple[int, ...], torch.dtype] | None


def distribute_tensor(
    tensor: torch.Tensor,
    device_mesh: DeviceMesh,
    placements: Sequence[Placement],
    *,
    src_data_rank: int | None = 0,
) -> DTensor:
    """Slice the source rank's ``tensor`` into every coordinate's local tensor (DT-API-2..5, 14).

    The source sends each coordinate exactly its block; with ``src_data_rank=None`` every rank
    slices its own ``tensor`` and nothing is communicated (DT-API-3). The result is a leaf that
    requires grad where ``tensor`` does (DT-GRAD-1).
    """

    def validate() -> tuple[Placement, ...]:
        _require_tensor_and_mesh(tensor, device_mesh)
        placed = normalize(placements, tensor.ndim, device_mesh.ndim)
        if src_data_rank is not None:
            require_int("src_data_rank", src_data_rank, "DT-API-2")
            # DT-API-2
            if src_data_rank not in device_mesh.mesh.flatten().tolist():
                raise ValueError(f"[DT-API-2] src_data_rank {src_data_rank} is not in the mesh")
        # DT-API-14
        if Partial("product") in placed:
            raise ValueError("[DT-API-14] cannot distribute a tensor as P(product)")
        return placed

    error, placed = verdict.check(validate)
    coordinate = _coordinate(device_mesh)
    if coordinate is None or src_data_rank is None:
        # DT-API-3 and DT-API-13: no communication, so a local verdict.
        if error:
            raise error
        if coordinate is None:
            empty = tensor.new_empty(0).requires_grad_(tensor.requires_grad)
            return DTensor(empty, device_mesh, placed, tuple(tensor.shape), tensor.stride())
        local = _block(tensor.detach(), device_mesh, placed, coordinate).clone(
            memory_format=torch.contiguous_format
        )
        shape, stride = tuple(tensor.shape), tensor.stride()
        return _partitioned(local, device_mesh, placed, shape, stride, tensor.requires_grad)

    is_source = error is None and dist.get_rank() == src_data_rank
    own = None
    if not error:
        own = SourceFacts(show(placed), src_data_rank, _meta(tensor) if is_source else None)
    facts = verdict.exchange(device_mesh.mesh_group, error, own)
    verdict.require_same([(f.placements, f.src_data_rank) for f in facts], "DT-API-15",
                         "placements and src_data_rank")  # fmt: skip
    shape, stride, dtype = next(f.source for f in facts if f.source is not None)
    mine = index_sequences(shape, device_mesh.shape, placed, coordinate)
    blocks = None
    if is_source:
        blocks = {
            device_mesh.rank_at(c): _block(tensor.detach(), device_mesh, placed, c)
            for c in device_mesh.coordinates()
        }
    local = collectives.scatter_blocks(
        device_mesh.mesh_group,
        src_data_rank,
        blocks,
        [len(s) for s in mine],
        dtype,
        verdict.local_device(device_mesh.device_type),
    )
    return _partitioned(local, device_mesh, placed, shape, stride, tensor.requires_grad)


def _block(
    tensor: torch.Tensor, mesh: DeviceMesh, placements: tuple[Placement, ...], coordinate
) -> torch.Tensor:
    """The layout slice of ``tensor`` at ``coordinate`` (DT-LAYOUT-12); ``P`` dims as ``R``."""
    block = tensor
    for dim, sequence in enumerate(
        index_sequences(tensor.shape, mesh.shape, placements, coordinate)
    ):
        block = take(block, dim, sequence)
    return block


def _partitioned(
    local: torch.Tensor,
    mesh: DeviceMesh,
    placements: tuple[Placement, ...],
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    requires_grad: bool = False,
) -> DTensor:
    """DT-API-14: the ``P`` dims get the replicate-to-partial values of DT-REDIST-6; a leaf that
    requires grad as asked (DT-GRAD-1)."""
    for mesh_dim, placement in enumerate(placements):
        if isinstance(placement, Partial):
            local = partition(
                local, placement, mesh.size(mesh_dim), mesh.get_coordinate()[mesh_dim]
            )
    local = local.requires_grad_(requires_grad)
    return DTensor(local, mesh, placements, tuple(shape), tuple(stride))


def _meta(tensor: torch.Tensor) -> tuple[tuple[int, ...], tuple[int, ...], torch.dtype]:
    return tuple(tensor.shape), tensor.stride(), tensor.dtype


def _inferred_shape(
    local_shape: Sequence[int], mesh: DeviceMesh, placements: tuple[Placement, ...]
) -> tuple[int, ...]:
    """DT-API-6: each sharded dim is as long as the local one times its mesh dims' sizes."""
    shape = list(local_shape)
    for mesh_dim, placement in enumerate(placements):
        if isinstance(placement, ShardLike):
            shape[placement.dim] *= mesh.size(mesh_dim)
    return tuple(shape)


def _dense_stride(shape: tuple[int, ...], like: torch.Tensor) -> tuple[int, ...]:
    """The stride of a dense tensor of ``shape`` whose dims are ordered in memory like ``like``'s
    (the contiguous stride when ``like`` is contiguous)."""
    order = sorted(range(len(shape)), key=lambda d: like.stride(d), reverse=True)
    stride = [0] * len(shape)
    step = 1
    for dim in reversed(order):
        stride[dim] = step
        step *= max(shape[dim], 1)
    return tuple(stride)


def _coordinate(mesh: object) -> tuple[int, ...] | None:
    """This rank's coordinate, or ``None`` outside the mesh (or when ``mesh`` is no mesh)."""
    return mesh.get_coordinate() if isinstance(mesh, DeviceMesh) else None


def _require_tensor_and_mesh(tensor: object, mesh: object) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor; got {type(tensor).__name__}")
    if not isinstance(mesh, DeviceMesh):
        raise TypeError(f"expected a DeviceMesh; got {type(mesh).__name__}")


def _require_sizes(name: str, sizes: object, ndim: int) -> None:
    if isinstance(sizes, str) or not isinstance(sizes, Sequence):
        raise TypeError(f"{name} must be a sequence of ints; got {sizes!r}")
    for size in sizes:
        require_int(name, size, "ERR-2")
    if len(sizes) != ndim or any(s < 0 for s in sizes):
        raise ValueError(f"[DT-API-6] {name} must be {ndim} non-negative ints; got {tuple(sizes)}")
