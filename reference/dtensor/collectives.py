"""Data movement along one mesh dim, in coordinate order.

Every function takes the mesh and a mesh dim and speaks in coordinates: ``pieces[c]`` belongs to
the rank at position ``c`` of the line. Process groups speak in group ranks, which follow
ascending global rank whatever the mesh order (DT-MESH-7); ``_group_order`` is the one place
that translates. Inputs are never written (ERR-9): every result is a new tensor.

Rules and where they live:

- DT-MESH-7: see ``reference.dtensor.mesh``
- DT-MESH-8: ``_group_order``
- DT-REDIST-5: ``REDUCE_OP``, ``all_reduce``, ``reduce_scatter`` (avg travels as a sum)
- ERR-9: ``all_gather``, ``all_to_all``, ``all_reduce``, ``reduce_scatter``, ``broadcast``,
  ``scatter_blocks``
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from reference.dtensor.layout import Positions, assemble, take
from reference.dtensor.mesh import DeviceMesh

# Which collective op carries each reduce op; avg is a sum divided once afterwards (DT-REDIST-5).
REDUCE_OP = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.SUM,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "product": dist.ReduceOp.PRODUCT,
}


def _group_order(mesh: DeviceMesh, dim: int) -> list[int]:
    """``order[g]`` is the coordinate of group rank ``g`` on this rank's line along ``dim``."""
    members = mesh.members(dim)
    return [members.index(rank) for rank in sorted(members)]


def _rows(tensor: torch.Tensor, dim: int) -> torch.Tensor:
    """``tensor`` with ``dim`` moved first and contiguous: the layout collectives split."""
    return tensor.movedim(dim, 0).contiguous()


def _padded(rows: torch.Tensor, length: int) -> torch.Tensor:
    if rows.shape[0] == length:
        return rows
    buffer = rows.new_zeros((length, *rows.shape[1:]))
    buffer[: rows.shape[0]] = rows
    return buffer


def all_gather(
    mesh: DeviceMesh, dim: int, local: torch.Tensor, tensor_dim: int, positions: Sequence[Positions]
) -> torch.Tensor:
    """Undo one shard step: every coordinate's piece, put back at ``positions[c]``.

    Gloo's all-gather wants equal sizes, so pieces are padded to the longest one.
    """
    sizes = [len(p) for p in positions]
    longest = max(sizes)
    rows = _rows(local, tensor_dim)
    order = _group_order(mesh, dim)
    buffer = rows.new_empty((len(sizes) * longest, *rows.shape[1:]))
    dist.all_gather_into_tensor(buffer, _padded(rows, longest), group=mesh.get_group(dim))
    if tensor_dim == 0 and order == sorted(order) and sizes == [longest] * len(sizes):
        # The buffer already is the gathered tensor; a strided shard still needs reordering.
        return assemble([buffer], 0, [[p for ps in positions for p in ps]])
    by_coordinate = [torch.empty(0)] * len(sizes)
    for group_rank, coord in enumerate(order):
        start = group_rank * longest
        by_coordinate[coord] = buffer[start : start + sizes[coord]]
    return assemble(by_coordinate, 0, positions).movedim(0, tensor_dim)


def all_to_all(
    mesh: DeviceMesh,
    dim: int,
    local: torch.Tensor,
    gather_dim: int,
    gather_sizes: Sequence[int],
    split_dim: int,
    split_positions: Sequence[range],
) -> torch.Tensor:
    """``S(gather_dim) -> S(split_dim)`` in one exchange: each coordinate sends every other
    coordinate the part of its piece that the other keeps, and keeps only what it needs.

    Each side copies at most once: the outgoing parts are packed into one buffer (none is needed
    when they already lie in group order along dim 0), and the received parts are the result
    as they arrive when they are stacked along dim 0 in group order.
    """
    order = _group_order(mesh, dim)
    in_order = order == sorted(order)
    me = mesh.get_local_rank(dim)
    outgoing = [take(local, split_dim, split_positions[c]) for c in order]
    if split_dim == 0 and in_order:
        send = local.contiguous().flatten()
    else:
        send = _packed(outgoing, local.new_empty(local.numel()))
    mine = list(local.shape)
    mine[split_dim] = len(split_positions[me])
    shapes = []
    for coord in order:
        shape = list(mine)
        shape[gather_dim] = gather_sizes[coord]
        shapes.append(shape)
    received = local.new_empty(sum(_numel(s) for s in shapes))
    dist.all_to_all_single(
        received,
        send,
        output_split_sizes=[_numel(s) for s in shapes],
        input_split_sizes=[t.numel() for t in outgoing],
        group=mesh.get_group(dim),
    )
    mine[gather_dim] = sum(gather_sizes)
    if gather_dim == 0 and in_order:
        return received.view(mine)
    pieces = [torch.empty(0)] * len(order)
    for coord, shape, flat in zip(
        order, shapes, received.split([_numel(s) for s in shapes]), strict=True
    ):
        pieces[coord] = flat.view(shape)
    return torch.cat(pieces, gather_dim)


def all_reduce(mesh: DeviceMesh, dim: int, local: torch.Tensor, op: str) -> torch.Tensor:
    """The ``op``-reduction of every coordinate's tensor along ``dim``, on every coordinate."""
    result = local.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(result, op=REDUCE_OP[op], group=mesh.get_group(dim))
    return result


def reduce_scatter(
    mesh: DeviceMesh,
    dim: int,
    local: torch.Tensor,
    op: str,
    tensor_dim: int,
    positions: Sequence[Positions],
) -> torch.Tensor:
    """Reduce along ``dim`` and keep only this coordinate's ``positions``: ``P -> S`` at once."""
    sizes = [len(p) for p in positions]
    longest = max(sizes)
    order = _group_order(mesh, dim)
    me = mesh.get_local_rank(dim)
    even = all(isinstance(p, range) for p in positions) and sizes == [longest] * len(sizes)
    if tensor_dim == 0 and order == sorted(order) and even:
        # Even chunks of dim 0 in group order: the tensor itself is the collective's input.
        stacked = local.contiguous()
    else:
        rows = _rows(local, tensor_dim)
        stacked = torch.cat([_padded(take(rows, 0, positions[c]), longest) for c in order])
    rows_out = local.new_empty((longest, *stacked.shape[1:]))
    dist.reduce_scatter_tensor(rows_out, stacked, op=REDUCE_OP[op], group=mesh.get_group(dim))
    return rows_out[: sizes[me]].movedim(0, tensor_dim)


def broadcast(mesh: DeviceMesh, dim: int, local: torch.Tensor) -> torch.Tensor:
    """Coordinate 0's tensor along ``dim``, on every coordinate (into a new tensor)."""
    result = local.clone(memory_format=torch.contiguous_format)
    dist.broadcast(result, src=mesh.members(dim)[0], group=mesh.get_group(dim))
    return result


def scatter_blocks(
    group: dist.ProcessGroup,
    source: int,
    blocks: dict[int, torch.Tensor] | None,
    shape: Sequence[int],
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """Each member of ``group`` receives its block of ``shape`` (on ``device``) from global rank
    ``source``.

    ``blocks`` (global rank -> block) is given on the source only. The blocks travel in one
    all-to-all in which only the source sends, packed into one buffer: a scatter with a size per
    member (c10d's ``scatter`` wants equal sizes, and point-to-point messages would leave the
    other members unable to tell that the group is in step).
    """
    members = dist.get_process_group_ranks(group)
    received = torch.empty(_numel(shape), dtype=dtype, device=device)  # flat: splits count elements
    receive_sizes = [0] * len(members)
    receive_sizes[members.index(source)] = received.numel()
    if blocks is None:
        send, send_sizes = received.new_empty(0), [0] * len(members)
    else:
        parts = [blocks[rank] for rank in members]
        send_sizes = [part.numel() for part in parts]
        send = _packed(parts, received.new_empty(sum(send_sizes)))
    dist.all_to_all_single(
        received,
        send,
        output_split_sizes=receive_sizes,
        input_split_sizes=send_sizes,
        group=group,
    )
    return received.view(tuple(shape))


def _packed(parts: Sequence[torch.Tensor], buffer: torch.Tensor) -> torch.Tensor:
    """``parts`` copied one after another into the flat ``buffer`` (one copy, whatever their
    strides): what ``all_to_all_single`` sends."""
    for into, part in zip(buffer.split([p.numel() for p in parts]), parts, strict=True):
        into.view(part.shape).copy_(part)
    return buffer


def _numel(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count
