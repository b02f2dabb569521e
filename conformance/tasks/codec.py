"""Case data to objects: the one place where rank and pure tasks turn a case's JSON into the
inputs they hand an implementation, and its objects back into data the driver judges.

Objects are made through the adapter (``conformance.adapters.contract``), never by naming an
implementation's classes. Inputs that depend on the spec's layout (each coordinate's slice of
the seeded global tensor) come from the oracle's input generators, so a task computes its inputs
exactly as the driver's verdict assumes them, and judges nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from conformance.adapters.contract import Adapter
from conformance.oracle import dt_random, st_ops
from conformance.oracle.dt_api import contiguous_stride
from conformance.oracle.dt_ops import input_local
from conformance.oracle.layout import source_local
from conformance.oracle.mesh import coordinate
from conformance.oracle.st_collectives import box
from conformance.oracle.st_metadata import ShardMeta
from conformance.oracle.tensors import laid_out, make_global, torch_dtype
from conformance.vocabulary import Mesh, parse_placements
from conformance.world.backends import Backend
from conformance.world.protocol import BUILT_FACT, FACTS_ATTRIBUTE

__all__ = ["contiguous_stride", "laid_out", "make_global", "torch_dtype"]


@contextmanager
def facts_on_raise(facts: Callable[[], dict[str, Any]]) -> Iterator[None]:
    """Let the implementation's exception through with what the task saw around it (``facts()``,
    e.g. whether an ``out`` buffer was written) attached, so that the driver judges a raise
    together with its side effects (``Raised.facts``) and the task judges nothing."""
    try:
        yield
    except Exception as exc:
        setattr(exc, FACTS_ATTRIBUTE, facts())
        raise


@contextmanager
def building() -> Iterator[None]:
    """Build the tensor a case operates on: an exception here is its constructor's failure
    (``BUILT_FACT`` false), which the driver blames on the constructor's rule, not on the
    operation the case is about (``judge.assert_built``)."""
    with facts_on_raise(lambda: {BUILT_FACT: False}):
        yield


# -- ShardedTensor ---------------------------------------------------------------------------------


def placements_of(ranks: list[int], backend: Backend) -> list[str]:
    """``"rank:<r>/<r's device>"`` per global rank: chunk placements as ShardMetadata spells
    them, each on the device its rank keeps its tensors on (not this rank's)."""
    return [backend.placement(r) for r in ranks]


def make_spec(adapter: Adapter, data: Any, backend: Backend) -> Any:
    """A sharding spec from JSON: ``{"dim", "ranks"}`` (chunk), ``{"boxes": [[offsets, sizes,
    rank], ...]}`` (enumerable; a string instead of a rank is the placement as given), anything
    else as given (not a spec)."""
    if isinstance(data, dict) and "boxes" in data:
        return adapter.st_enumerable_spec(
            [
                adapter.st_shard_metadata(o, s, r if isinstance(r, str) else backend.placement(r))
                for o, s, r in data["boxes"]
            ]
        )
    if isinstance(data, dict):
        return adapter.st_chunk_spec(data["dim"], placements_of(data["ranks"], backend))
    return data


def shard_metadata(adapter: Adapter, box: dict[str, Any]) -> Any:
    """A ``ShardBox`` (possibly a malformed one, as a case gives it) as the implementation's
    ``ShardMetadata``."""
    return adapter.st_shard_metadata(box["offsets"], box["sizes"], box["placement"])


def box_slices(box: dict[str, Any]) -> tuple[slice, ...]:
    """The index of a box ``{"offsets", "sizes"}`` into the global tensor."""
    return tuple(slice(o, o + n) for o, n in zip(box["offsets"], box["sizes"], strict=True))


def placement_arg(value: Any) -> Any:
    """A placement argument: ``{"torch.device": "cpu"}`` stands for a ``torch.device``, which
    JSON cannot carry; anything else is passed as given."""
    if isinstance(value, dict) and set(value) == {"torch.device"}:
        return torch.device(value["torch.device"])
    return value


def properties(adapter: Adapter, props: dict[str, Any]) -> Any:
    """``TensorProperties`` of ``{"dtype", "layout", "requires_grad", "memory_format",
    "pin_memory"}``, each torch name as text."""
    return adapter.st_tensor_properties(
        dtype=getattr(torch, props["dtype"]),
        layout=getattr(torch, props["layout"]),
        requires_grad=props["requires_grad"],
        memory_format=getattr(torch, props["memory_format"]),
        pin_memory=props["pin_memory"],
    )


def describe(adapter: Adapter, t: Any) -> dict[str, Any]:
    """A sharded tensor as data: its global metadata (``st_describe``: shards, size,
    properties), its local shards, each ``(tensor on cpu, ShardBox)``, and the device type each
    local tensor lived on."""
    local = adapter.st_local_shards(t)
    return {
        **adapter.st_describe(t),
        "local": [(x.detach().cpu(), box) for x, box in local],
        "local_devices": [x.device.type for x, _ in local],
    }


def filled(desc: dict[str, Any], fill: Any, device: torch.device) -> torch.Tensor:
    """A tensor of ``desc["shape"]`` and ``desc["dtype"]`` filled with ``fill``; ``transposed``
    makes it a non-contiguous view of that shape, ``requires_grad`` a leaf that requires grad."""
    shape, dtype = list(desc["shape"]), torch_dtype(desc["dtype"])
    if desc.get("transposed"):
        dims = list(range(len(shape)))[::-1]
        x = torch.full(shape[::-1], fill, dtype=dtype, device=device).permute(dims)
    else:
        x = torch.full(shape, fill, dtype=dtype, device=device)
    return x.requires_grad_(True) if desc.get("requires_grad") else x


def from_boxes(
    adapter: Adapter,
    rank: int,
    backend: Backend,
    value: torch.Tensor,
    boxes: list[dict[str, Any]],
    group: Any,
    requires_grad: bool = False,
) -> Any:
    """A sharded tensor of ``value`` (on this rank's device) laid out as ``boxes`` (``{"offsets",
    "sizes", "rank"}``, global ranks) on ``group``, built from each rank's own boxes and the
    global metadata, not by ``shard``; its local tensors leaves with ``requires_grad``."""
    metas = [
        adapter.st_shard_metadata(b["offsets"], b["sizes"], backend.placement(b["rank"]))
        for b in boxes
    ]
    mine = [
        adapter.st_local_shard(value[box_slices(b)].clone().requires_grad_(requires_grad), m)
        for b, m in zip(boxes, metas, strict=True)
        if b["rank"] == rank
    ]
    properties = adapter.st_tensor_properties(dtype=value.dtype, requires_grad=requires_grad)
    metadata = adapter.st_sharded_tensor_metadata(metas, torch.Size(value.shape), properties)
    return adapter.st_init_from_global_metadata(mine, metadata, group)


def box_of(tensor: torch.Tensor, offsets: list[int], sizes: list[int]) -> torch.Tensor:
    """The view of ``tensor`` in the box ``(offsets, sizes)``: the oracle's ``box``."""
    return box(tensor, ShardMeta(offsets, sizes, None))


def out_tensor(desc: Any, device: torch.device) -> Any:
    """``gather``'s ``out``: ``None``, a tensor described by ``{"shape", "dtype", "transposed"}``
    filled with -1, or any other JSON value as given."""
    return filled(desc, -1, device) if isinstance(desc, dict) else desc


def seeded(shape: list[int], dtype: str, seed: int, transposed: bool = False) -> torch.Tensor:
    """The seeded global tensor; ``transposed``: the same values in a non-contiguous view."""
    if transposed:
        return make_global(shape[::-1], dtype, seed).t()
    return make_global(shape, dtype, seed)


# -- DTensor ---------------------------------------------------------------------------------------


def local_input(
    rank: int,
    shape: list[int],
    dtype: str,
    seed: int,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    placements: list[str],
) -> torch.Tensor:
    """What ``rank`` hands ``from_local``: its coordinate's slice of the seeded global tensor
    under ``placements`` (DT-LAYOUT), or the whole tensor on a rank outside the mesh."""
    coord = coordinate(Mesh(tuple(mesh_shape), tuple(mesh_ranks)), rank)
    if coord is None:
        return make_global(shape, dtype, seed)
    return source_local(shape, dtype, seed, mesh_shape, placements, coord)


def op_input(
    rank: int,
    value: torch.Tensor,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    placements: list[str],
    seed: int,
) -> torch.Tensor:
    """What ``rank`` hands ``from_local`` for an op's input of ``value`` (spec/dt-ops.md,
    "Inputs the suite draws"): its coordinate's layout slice of its part of the value."""
    coord = coordinate(Mesh(tuple(mesh_shape), tuple(mesh_ranks)), rank)
    return input_local(value, mesh_shape, parse_placements(placements), coord, seed)


def random_input(shape: list[int], dtype: str, seed: int) -> torch.Tensor:
    """The value of a random op's DTensor input (spec/dt-random.md): the oracle's, so that the
    driver judges ``dropout``'s output against what the ranks were given."""
    return dt_random.input_value(shape, dtype, seed)


# -- ShardedTensor ops ---------------------------------------------------------------------------


def st_op_inputs(
    shape: list[int], dtype: str, seed: int, other: dict[str, Any] | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The values of an op's ``x`` and second tensor (spec/st-ops.md): the oracle's, so that the
    driver judges against what the ranks were given."""
    return st_ops.inputs(shape, dtype, seed, other)
