"""Deliberately broken copies of the reference: the suite must catch each with a minimal case."""

from __future__ import annotations

import torch

from conformance.adapters.reference import ReferenceAdapter


class ChunkOffsetPastTheEnd(ReferenceAdapter):
    """Empty chunks placed at ``c * ceil(L/k)`` (PyTorch's ST-SPEC-2 bug) instead of at ``L``."""

    def st_chunk_metadata(self, global_shape, dim, placements):
        shards = super().st_chunk_metadata(global_shape, dim, placements)
        d = dim % len(global_shape)
        step = -(-global_shape[d] // len(placements))
        for c, s in enumerate(shards):
            s["offsets"][d] = c * step
        return shards


class GatherDropsTheLastShard(ReferenceAdapter):
    """``gather`` that leaves the last shard's box of ``out`` unwritten."""

    def st_gather(self, t, dst, out):
        super().st_gather(t, dst, out)
        if out is not None:
            last = t.metadata().shards_metadata[-1]
            box = out
            for d, (o, n) in enumerate(zip(last.shard_offsets, last.shard_sizes, strict=True)):
                box = box.narrow(d, o, n)
            box.zero_()


class TouchingBoxesOverlap(ReferenceAdapter):
    """An overlap check with ``<=`` where ``<`` belongs: boxes that touch are rejected."""

    def st_validate(self, shards, global_shape):
        boxes = [s for s in shards if all(s["sizes"])]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                if all(
                    oa <= ob + sb and ob <= oa + sa
                    for oa, sa, ob, sb in zip(
                        a["offsets"], a["sizes"], b["offsets"], b["sizes"], strict=True
                    )
                ):
                    raise ValueError(f"[ST-VALID-2] {a} and {b} overlap")
        super().st_validate(shards, global_shape)


class RedistributeLosesPrecision(ReferenceAdapter):
    """Redistribution through float32, as PyTorch's gather does."""

    def dt_redistribute(self, d, placements, device_mesh=None):
        moved = super().dt_redistribute(d, placements, device_mesh)
        local = moved.to_local()
        if local.dtype in (torch.float64, torch.int64):
            local.copy_(local.to(torch.float32).to(local.dtype))
        return moved


class MessagesWithoutRuleIds(ReferenceAdapter):
    """Claims that its messages name the rule, then raises with the id stripped."""

    def st_validate(self, shards, global_shape):
        try:
            super().st_validate(shards, global_shape)
        except ValueError as exc:
            raise ValueError(str(exc).split("] ", 1)[-1]) from None


CHUNK_OFFSET = ChunkOffsetPastTheEnd()
GATHER_DROPS_LAST = GatherDropsTheLastShard()
TOUCHING_OVERLAP = TouchingBoxesOverlap()
LOSES_PRECISION = RedistributeLosesPrecision()
NO_RULE_IDS = MessagesWithoutRuleIds()
