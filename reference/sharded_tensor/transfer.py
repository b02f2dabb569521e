"""Moving boxes between two layouts of one tensor: the data path of shard, gather and reshard.

``shard`` is the move from a one-box layout on the source to the spec's layout, ``gather`` the
move from the tensor's layout to a one-box layout on the destination, ``reshard`` the move from
one spec's layout to another's. Each element of the tensor crosses the wire at most once, from
the rank that holds it to the rank that needs it, with no padding.

Rules and where they live:

- ERR-10, ST-GATHER-10, ST-RESHARD-11: ``transfer`` (each piece travels in its own dtype)
- ST-GATHER-8: ``window``, ``transfer`` (written through views of the target)
- ST-GATHER-9: ``route`` (any boxes; empty pieces are skipped)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from reference.sharded_tensor.metadata import ShardMetadata


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

    Pieces are sent as they are (``contiguous()`` copies only a strided piece) and received
    straight into their destination when that view is contiguous, else into a buffer that is
    copied after the messages complete.
    """
    me = dist.get_rank()
    ops, pending = [], []
    for piece in route(old, new, me):
        sender, receiver = old[piece.source].placement.rank(), new[piece.target].placement.rank()
        tag = piece.source * len(new) + piece.target
        if sender == me:
            data = window(old_tensors[piece.source], old[piece.source], piece)
        if receiver == me:
            into = window(new_tensors[piece.target], new[piece.target], piece)
        if sender == receiver:
            into.copy_(data)
        elif sender == me:
            ops.append(dist.P2POp(dist.isend, data.contiguous(), receiver, group, tag))
        else:
            contiguous = into.is_contiguous()
            buffer = (
                into
                if contiguous
                else torch.empty_like(into, memory_format=torch.contiguous_format)
            )
            ops.append(dist.P2POp(dist.irecv, buffer, sender, group, tag))
            if not contiguous:
                pending.append((into, buffer))
    if ops:
        for work in dist.batch_isend_irecv(ops):
            work.wait()
    for into, buffer in pending:
        into.copy_(buffer)
