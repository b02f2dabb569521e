"""What the floors of both benches share: the one copy a layout-transposing move cannot avoid."""

from __future__ import annotations

import torch


def packed(block: torch.Tensor, k: int) -> torch.Tensor:
    """``block``'s ``k`` column chunks one after another: what S(0) -> S(1), or a reshard from row
    chunks to column chunks, sends must lie so, as c10d sends contiguous buffers, so the floor
    pays for this one copy too."""
    rows, cols = block.shape
    return block.view(rows, k, cols // k).transpose(0, 1).contiguous()
