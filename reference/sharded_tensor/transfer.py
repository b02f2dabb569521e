"""Moving boxes between two layouts of one tensor: the data path of shard, gather and reshard.

``shard`` is the move from a one-box layout on the source to the spec's layout, ``gather`` the
move from the tensor's layout to a one-box layout on the destination, ``reshard`` the move from
one spec's layout to another's. Each element of the tensor crosses the wire at most once, from
the rank that holds it to the rank that needs it, with no padding, in one all-to-all.

Rules and where they live:

- ERR-10, ST-GATHER-10, ST-RESHARD-11: ``transfer`` (pieces travel as their bytes)
- ST-GATHER-8: ``window``, ``transfer`` (written through views of the target)
- ST-GATHER-9: ``route`` (any boxes; empty pieces are skipped)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from reference.sharded_tensor.metadata import ShardMetadata
from reference.verdict import local_device


@dataclass(frozen=True)
class Piece:
    """The intersection of old shard ``source`` and new shard ``target``: a box to move."""

    source: int
    target: int
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]

    def numel(self) -> int:
        return torch.Size(self.sizes).numel()


def intersect(a: ShardMetadata, b: ShardMetadata) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The box shared by ``a`` and ``b`` (empty when they do not overlap)."""
    starts = [max(p, q) for p, q in zip(a.shard_offsets, b.shard_offsets, strict=True)]
    stops = [
        min(p + s, q + t)
        for p, s, q, t in zip(
            a.shard_offsets, a.shard_sizes, b.shard_offsets, b.shard_sizes, strict=True
        )
    ]
    return tuple(starts), tuple(
        max(0, stop - start) for start, stop in zip(starts, stops, strict=True)
    )


def route(old: list[ShardMetadata], new: list[ShardMetadata], rank: int) -> list[Piece]:
    """Every non-empty piece that global ``rank`` sends, receives or copies, sorted by
    (source, target): both ends of a pair of ranks list their messages in the same order."""
    mine_old = [i for i, s in enumerate(old) if s.placement.rank() == rank]
    mine_new = [j for j, s in enumerate(new) if s.placement.rank() == rank]
    pairs = {(i, j) for i in mine_old for j in range(len(new))}
    pairs |= {(i, j) for i in range(len(old)) for j in mine_new}
    pieces = [Piece(i, j, *intersect(old[i], new[j])) for i, j in sorted(pairs)]
    return [piece for piece in pieces if piece.numel() > 0]


def window(tensor: torch.Tensor, shard: ShardMetadata, piece: Piece) -> torch.Tensor:
    """The view of ``piece`` inside ``tensor``, which holds ``shard``'s box."""
    for d, (start, length) in enumerate(zip(piece.offsets, piece.sizes, strict=True)):
        tensor = tensor.narrow(d, start - shard.shard_offsets[d], length)
    return tensor


Pieces = list[tuple[torch.Tensor, torch.Tensor]]  # (tensor, view of it), in route order


@torch.no_grad()
def transfer(
    group: dist.ProcessGroup,
    old: list[ShardMetadata],
    old_tensors: dict[int, torch.Tensor],
    new: list[ShardMetadata],
    new_tensors: dict[int, torch.Tensor],
) -> None:
    """Fill this rank's ``new_tensors`` (by index into ``new``) from every rank's
    ``old_tensors`` (by index into ``old``). A collective: every rank of ``group`` calls it.

    Every piece travels in one all-to-all over ``group``, as bytes (so any dtype travels
    bitwise): each rank sends every rank, itself included, the pieces it holds of that rank's
    boxes, in ``route``'s order, which both ends share. A collective, not point-to-point
    messages, so that every member can tell that the group is in step afterwards: each ran
    one more operation on it. The pieces a rank sends are packed into one buffer and those it
    receives unpacked from one, except where they already lie one after another in a tensor's
    memory (``in_place``): a row chunk sent from a source, received into a row window of
    ``out``.
    """
    me = dist.get_rank()
    members = dist.get_process_group_ranks(group)
    outgoing: list[Pieces] = [[] for _ in members]  # by group rank of the receiver
    incoming: list[Pieces] = [[] for _ in members]  # by group rank of the sender
    for piece in route(old, new, me):
        sender, receiver = old[piece.source].placement.rank(), new[piece.target].placement.rank()
        if sender == me:
            held = old_tensors[piece.source]
            outgoing[members.index(receiver)].append((held, window(held, old[piece.source], piece)))
        if receiver == me:
            into = new_tensors[piece.target]
            incoming[members.index(sender)].append((into, window(into, new[piece.target], piece)))
    sends = [p for pieces in outgoing for p in pieces]
    receives = [p for pieces in incoming for p in pieces]
    device = _device(old)
    send = in_place(sends, device)
    if send is None:
        send = _buffer(sends, device)
        for segment, (_, view) in _segments(send, sends):
            segment.copy_(view)
    receive = in_place(receives, device)
    unpack = receive is None
    if unpack:
        receive = _buffer(receives, device)
    dist.all_to_all_single(
        receive,
        send,
        output_split_sizes=[sum(_nbytes(v) for _, v in pieces) for pieces in incoming],
        input_split_sizes=[sum(_nbytes(v) for _, v in pieces) for pieces in outgoing],
        group=group,
    )
    if unpack:
        for segment, (_, view) in _segments(receive, receives):
            view.copy_(segment)


def in_place(pieces: Pieces, device: torch.device) -> torch.Tensor | None:
    """The bytes of every ``(tensor, view)`` piece, in order, as one flat view of ``tensor``'s
    memory when the views are contiguous windows of one contiguous tensor on ``device``, each
    starting where the one before it ends; else ``None`` (the pieces must be packed). A
    conjugate or negative view's memory does not hold its values: ``copy_`` packs it."""
    if not pieces or any(t is not pieces[0][0] or not v.is_contiguous() for t, v in pieces):
        return None
    tensor = pieces[0][0]
    if not tensor.is_contiguous() or tensor.device != device:
        return None
    if tensor.is_conj() or tensor.is_neg():
        return None
    start = pieces[0][1].storage_offset() - tensor.storage_offset()
    at = start
    for _, view in pieces:
        if view.storage_offset() - tensor.storage_offset() != at:
            return None
        at += view.numel()
    size = tensor.element_size()
    return _bytes(tensor)[start * size : at * size]


def _bytes(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor's memory as a flat tensor of bytes (no copy)."""
    return tensor.reshape(-1).view(torch.uint8)


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _buffer(pieces: Pieces, device: torch.device) -> torch.Tensor:
    return torch.empty(sum(_nbytes(v) for _, v in pieces), dtype=torch.uint8, device=device)


def _segments(buffer: torch.Tensor, pieces: Pieces) -> list[tuple[torch.Tensor, tuple]]:
    """Each piece beside its stretch of ``buffer``, shaped and typed as its view."""
    parts = buffer.split([_nbytes(v) for _, v in pieces])
    return [
        (part.view(v.dtype).view(v.shape), (t, v))
        for part, (t, v) in zip(parts, pieces, strict=True)
    ]


def _device(layout: list[ShardMetadata]) -> torch.device:
    """Where this rank's buffers live: its device of the type the layout's shards name. Every
    rank reads the same metadata, so every rank's all-to-all runs on one backend, whatever the
    rank itself holds (a rank with no piece included)."""
    return local_device(layout[0].placement.device().type)
