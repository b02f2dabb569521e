"""Gather (spec/st-gather.md): the global tensor into ``out`` on one rank of the group.

Each rank checks its own ``dst`` and ``out`` and the ranks agree on ``dst`` before anything is
written, so a bad call leaves ``out`` untouched on every rank; then every shard moves once, into
its box of ``out``, through ``transfer.py``.

Rules and where they live:

- ST-GATHER-1, ST-GATHER-4: ``gather``
- ST-GATHER-2: ``check_gather_args``, ``gather`` (dst read as a group rank)
- ST-GATHER-3, ST-GATHER-5, ST-GATHER-6, ST-GATHER-7: ``check_gather_args``
- ST-GATHER-8: ``check_gather_args``, ``gather`` (out written only after every rank checked)
- ST-GATHER-9, ST-GATHER-10, ERR-10: see ``reference.sharded_tensor.transfer``
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from reference.sharded_tensor.metadata import ShardMetadata
from reference.sharded_tensor.transfer import transfer
from reference.verdict import reach_verdict, require_same

if TYPE_CHECKING:
    from reference.sharded_tensor.sharded_tensor import ShardedTensor


def check_gather_args(t: ShardedTensor, dst: int, out: torch.Tensor | None) -> None:
    """This rank's part of the validation: dst, and out where it is required or forbidden."""
    group = t.process_group
    # ST-GATHER-3: dst is an int in [0, P).
    if type(dst) is not int:
        raise TypeError(f"[ST-GATHER-3] dst must be an int, got {dst!r}")
    if not 0 <= dst < group.size():
        raise ValueError(f"[ST-GATHER-3] dst {dst} is not a rank of a group of {group.size()}")
    if dist.get_rank(group) != dst:
        # ST-GATHER-7: out is None away from dst.
        if out is not None:
            raise ValueError(f"[ST-GATHER-7] out must be None on a rank other than dst {dst}")
        return
    # ST-GATHER-5: out is a tensor of the global shape on dst.
    if out is None:
        raise ValueError(f"[ST-GATHER-5] out is required on dst {dst}")
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"[ST-GATHER-5] out must be a tensor, got {type(out).__name__}")
    if out.shape != t.size():
        raise ValueError(
            f"[ST-GATHER-5] out has shape {tuple(out.shape)}, expected {tuple(t.size())}"
        )
    # ST-GATHER-6: the tensor's dtype, no silent cast.
    if out.dtype != t.dtype:
        raise ValueError(f"[ST-GATHER-6] out has dtype {out.dtype}, expected {t.dtype}")
    # ST-GATHER-8: any strided tensor.
    if out.layout != torch.strided:
        raise ValueError(f"[ST-GATHER-8] out must be strided, got {out.layout}")


def gather(t: ShardedTensor, dst: int, out: torch.Tensor | None) -> None:
    group = t.process_group
    _, dsts = reach_verdict(group, lambda: (check_gather_args(t, dst, out), dst))
    # ST-GATHER-4: one destination.
    require_same(dsts, "ST-GATHER-4", "dst")
    # ST-GATHER-1: the whole tensor is one box on dst; every shard's box is moved into it.
    size = t.size()
    kind = t.metadata().shards_metadata[0].placement.device().type  # the shards' device type
    whole = ShardMetadata(
        [0] * len(size), list(size), f"rank:{dist.get_global_rank(group, dst)}/{kind}"
    )
    targets = {0: out} if out is not None else {}
    # Note: PyTorch stages data in a padded buffer of the default dtype (ERR-10); this moves each
    # shard once, in its own dtype.
    transfer(group, t.metadata().shards_metadata, t.local_shards_by_index(), [whole], targets)
