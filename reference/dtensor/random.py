"""Random draws on DTensors (spec/dt-random.md): one draw, the single-device one.

A random DTensor means one tensor ``t`` of the global shape, laid out by the result's
placements. The reference takes that literally: every rank makes the single-device call on a
tensor of the global shape, from its own default generator, which ``torch.manual_seed(s)`` on
every rank has put in the same state, and keeps its part of ``t`` as ``distribute_tensor(t,
mesh, placements, src_data_rank=None)`` slices it, with no communication. Every rule follows
from that one step: replicas slice the same ``t`` (DT-RAND-2), ``t`` is a single-device draw
(DT-RAND-3, 4), the seed fixes it (DT-RAND-5), and every rank's generator moved exactly as one
device's would (DT-RAND-6, 7: parity, by construction).

The price is compute, not traffic: each rank draws all of ``t``, not only its shard. PyTorch's
tracker draws only the shard, at an offset into a counter-based stream that CUDA's Philox
generator can jump to; CPU's Mersenne Twister cannot jump, and the offsets give up parity
(upstream #168058).

Rules and where they live:

- DT-RAND-1: ``call`` (in-place ops write their DTensor; the others keep its placements)
- DT-RAND-2, DT-RAND-4, DT-RAND-5, DT-RAND-6, DT-RAND-7: ``_kept`` (one draw, each rank's part)
- DT-RAND-3: ``_kept``, ``_dropout`` (the mask scales every part of a sum alike)
- DT-API-16, DT-API-18: ``rand``, ``randn`` (the layout and dtype of distribute_tensor)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from reference import verdict
from reference.dtensor.dtensor import DTensor, distribute_tensor
from reference.dtensor.mesh import DeviceMesh
from reference.dtensor.placements import Partial, Placement, Replicate

# The random calls on DTensors that ``call`` runs: in place, then out of place.
IN_PLACE = frozenset([torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.bernoulli_])
RANDOM = IN_PLACE | {torch.rand_like, torch.randn_like, F.dropout}


def rand(size: Sequence[int], *, device_mesh: DeviceMesh, placements=None, dtype=None,
         requires_grad: bool = False) -> DTensor:  # fmt: skip
    """``torch.rand(size)`` as one draw laid out by ``placements`` (default: ``R``)."""
    return _factory(torch.rand, size, device_mesh, placements, dtype, requires_grad)


def randn(size: Sequence[int], *, device_mesh: DeviceMesh, placements=None, dtype=None,
          requires_grad: bool = False) -> DTensor:  # fmt: skip
    """``torch.randn(size)`` as one draw laid out by ``placements`` (default: ``R``)."""
    return _factory(torch.randn, size, device_mesh, placements, dtype, requires_grad)


def call(fn: Callable[..., Any], x: DTensor, *args: Any, **kwargs: Any) -> DTensor:
    """``fn(x, *args, **kwargs)`` for ``fn`` in ``RANDOM``: the call made on a tensor of ``x``'s
    global shape, stride and dtype, each rank keeping its part. An in-place call writes ``x``
    and returns it; ``rand_like`` and ``randn_like`` lay their draw out as ``x`` is laid out."""
    if fn is F.dropout:
        return _dropout(x, *args, **kwargs)
    like = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=_device(x.device_mesh))
    drawn = fn(like, *args, **kwargs)
    result = _kept(drawn, x.device_mesh, x.placements)
    if fn in IN_PLACE:
        x.assign(result)
        return x
    return result


def _dropout(x: DTensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> DTensor:
    """``F.dropout``: the single-device mask (``dropout`` of ones: each element ``0`` or
    ``1 / (1 - p)``) times each rank's local tensor. The mask is the same on every part of a
    partial value, and scaling commutes with a sum or a mean of parts
    (``sum(m * x_i) == m * sum(x_i)``): ``P(sum)`` and ``P(avg)`` are kept. Not with a maximum
    of parts (``0 * -inf`` is NaN, where ``max`` of them is ``0``) or a product: those are reduced
    first."""
    given, linear = x, [Replicate() if _reduced_first(q) else q for q in x.placements]
    if linear != list(x.placements):
        x = x.redistribute(placements=linear)
    ones = torch.ones(x.shape, dtype=x.dtype, device=_device(x.device_mesh))
    mask = F.dropout(ones, p, training)
    whole = [Replicate() if isinstance(q, Partial) else q for q in x.placements]
    local = x.to_local() * _kept(mask, x.device_mesh, whole).to_local()
    result = DTensor(local, x.device_mesh, x.placements, tuple(x.shape), x.stride())
    if inplace:
        given.assign(result)
        return given
    return result


def _reduced_first(placement: Placement) -> bool:
    return isinstance(placement, Partial) and placement.reduce_op not in ("sum", "avg")


def _factory(
    make: Callable[..., torch.Tensor],
    size: Sequence[int],
    device_mesh: DeviceMesh,
    placements: Sequence[Placement] | None,
    dtype: torch.dtype | None,
    requires_grad: bool,
) -> DTensor:
    """``make``'s draw of the whole tensor, each rank keeping its part: a leaf that requires
    grad as asked (DT-API-18)."""
    drawn = make(tuple(size), dtype=dtype, device=_device(device_mesh))
    kept = _kept(drawn, device_mesh, placements or [Replicate()] * device_mesh.ndim)
    kept.to_local().requires_grad_(requires_grad)
    return kept


def _kept(drawn: torch.Tensor, mesh: DeviceMesh, placements: Sequence[Placement]) -> DTensor:
    """This rank's part of the draw every rank made alike: ``distribute_tensor`` with each rank
    its own source, so nothing is sent, ``P`` dims partitioned as ``distribute_tensor`` does."""
    return distribute_tensor(drawn, mesh, placements, src_data_rank=None)


def _device(mesh: DeviceMesh) -> torch.device:
    """Where the draw is made: the mesh's device, whose generator the seed set."""
    return verdict.local_device(mesh.device_type)
