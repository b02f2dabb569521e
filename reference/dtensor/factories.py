"""DTensor factories (spec/dt-api.md, DT-API-16 to 18): a DTensor made from its global shape alone.

Every rank builds its own local tensor from the layout (spec/dt-layout.md); nothing is sent. A
filled factory gives exactly the local tensors ``distribute_tensor`` would give for the filled
global tensor, ``P`` mesh dims included, so its logical value is the fill (DT-API-17); the values
of ``empty`` are left to the implementation. ``rand`` and ``randn`` are random draws
(``reference.dtensor.random``).

Rules and where they live:

- DT-API-13, DT-API-16, DT-API-18: ``_factory``
- DT-API-17: ``full``, ``zeros``, ``ones``, ``_factory``
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from reference.dtensor.dtensor import DTensor, _coordinate, _partitioned
from reference.dtensor.layout import index_sequences
from reference.dtensor.mesh import DeviceMesh
from reference.dtensor.placements import Placement, Replicate, normalize


def _factory(
    make: Callable[..., torch.Tensor],
    size: Sequence[int],
    device_mesh: DeviceMesh,
    placements: Sequence[Placement] | None,
    dtype: torch.dtype | None,
    requires_grad: bool,
) -> DTensor:
    """``make(local_shape, dtype=, device=)`` on every rank: the layout of DT-API-16 (a rank
    outside the mesh holds the empty 1-D tensor of DT-API-13) on the mesh's device, with the
    dtype and ``requires_grad`` of DT-API-18, partitioned along ``P`` mesh dims as
    ``distribute_tensor`` does (DT-API-17, ``dtensor._partitioned``)."""
    size = tuple(size)
    placed = normalize(
        [Replicate()] * device_mesh.ndim if placements is None else placements,
        len(size),
        device_mesh.ndim,
    )
    device = torch.device(device_mesh.device_type)
    stride = torch.empty(size, device="meta").stride()  # the contiguous stride, no memory
    coordinate = _coordinate(device_mesh)
    if coordinate is None:
        local = make((0,), dtype=dtype, device=device)
        made = DTensor(local, device_mesh, placed, size, stride)
    else:
        shape = tuple(len(s) for s in index_sequences(size, device_mesh.shape, placed, coordinate))
        local = make(shape, dtype=dtype, device=device)
        made = _partitioned(local, device_mesh, placed, size, stride)
    made.to_local().requires_grad_(requires_grad)
    return made


def full(
    size: Sequence[int],
    fill_value: bool | int | float,
    *,
    device_mesh: DeviceMesh,
    placements: Sequence[Placement] | None = None,
    dtype: torch.dtype | None = None,
    requires_grad: bool = False,
) -> DTensor:
    """The DTensor whose logical value is ``fill_value`` everywhere (DT-API-17); its dtype is
    the one ``torch.full`` infers from the fill when none is given (DT-API-18)."""

    def make(shape, dtype, device):
        return torch.full(shape, fill_value, dtype=dtype, device=device)

    return _factory(make, size, device_mesh, placements, dtype, requires_grad)


def zeros(size: Sequence[int], *, device_mesh: DeviceMesh, placements=None, dtype=None,
          requires_grad: bool = False) -> DTensor:  # fmt: skip
    """``full(size, 0)``, of the default dtype unless one is given (DT-API-17, 18)."""
    return full(size, 0, device_mesh=device_mesh, placements=placements,
                dtype=dtype or torch.get_default_dtype(), requires_grad=requires_grad)  # fmt: skip


def ones(size: Sequence[int], *, device_mesh: DeviceMesh, placements=None, dtype=None,
         requires_grad: bool = False) -> DTensor:  # fmt: skip
    """``full(size, 1)``, of the default dtype unless one is given (DT-API-17, 18)."""
    return full(size, 1, device_mesh=device_mesh, placements=placements,
                dtype=dtype or torch.get_default_dtype(), requires_grad=requires_grad)  # fmt: skip


def empty(size: Sequence[int], *, device_mesh: DeviceMesh, placements=None, dtype=None,
          requires_grad: bool = False) -> DTensor:  # fmt: skip
    """The layout of DT-API-16 with unspecified values."""
    return _factory(torch.empty, size, device_mesh, placements, dtype, requires_grad)
