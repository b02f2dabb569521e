"""Deliberately broken copies of the reference: the suite must catch each with a minimal case."""

from __future__ import annotations

import os
import signal
import time

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


class OverlapSeenInOneDim(ReferenceAdapter):
    """An overlap check that compares only the last dim: boxes disjoint along another dim, but
    sharing columns, are taken to overlap (ST-VALID-1)."""

    def st_validate(self, shards, global_shape):
        boxes = [s for s in shards if all(s["sizes"])]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                (oa, sa, ob, sb) = (
                    a["offsets"][-1],
                    a["sizes"][-1],
                    b["offsets"][-1],
                    b["sizes"][-1],
                )
                if max(oa, ob) < min(oa + sa, ob + sb):
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


class GatherWritesOutBeforeChecking(ReferenceAdapter):
    """``gather`` that clears ``out`` before it checks its arguments (ERR-8)."""

    def st_shard_by_spec(self, tensor, spec, src_rank, group):
        t = super().st_shard_by_spec(tensor, spec, src_rank, group)
        checked = t.gather

        def gather(dst=0, out=None):
            if isinstance(out, torch.Tensor):
                out.zero_()
            return checked(dst=dst, out=out)

        t.gather = gather
        return t


class ReshardSpoilsItsSourceOnError(ReferenceAdapter):
    """``reshard`` that, failing, leaves the local tensors it held changed (ST-RESHARD-6)."""

    def st_shard_by_spec(self, tensor, spec, src_rank, group):
        return _spoiling(super().st_shard_by_spec(tensor, spec, src_rank, group))

    def st_create(self, fill, spec, *args, **options):
        return _spoiling(super().st_create(fill, spec, *args, **options))


def _spoiling(t):
    checked = t.reshard

    def reshard(spec):
        try:
            return checked(spec)
        except Exception:
            for s in t.local_shards():
                s.tensor.add_(1)
            raise

    t.reshard = reshard
    return t


CHUNK_OFFSET = ChunkOffsetPastTheEnd()
GATHER_WRITES_OUT = GatherWritesOutBeforeChecking()
RESHARD_SPOILS_SOURCE = ReshardSpoilsItsSourceOnError()
GATHER_DROPS_LAST = GatherDropsTheLastShard()
TOUCHING_OVERLAP = TouchingBoxesOverlap()
OVERLAP_IN_ONE_DIM = OverlapSeenInOneDim()
LOSES_PRECISION = RedistributeLosesPrecision()
NO_RULE_IDS = MessagesWithoutRuleIds()


class LayoutCrashesTheProcess(ReferenceAdapter):
    """A pure call that kills its process (a segfault in native code, say)."""

    def dt_local_shape_and_offset(self, global_shape, mesh_shape, placements, coordinate):
        if list(global_shape) == [2] and list(coordinate) == [3]:
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().dt_local_shape_and_offset(global_shape, mesh_shape, placements, coordinate)


class ValidateHangs(ReferenceAdapter):
    """A pure call that never returns (a lock never released, an endless loop)."""

    def st_validate(self, shards, global_shape):
        if list(global_shape) == [4] and len(shards) == 3:
            time.sleep(3600)
        return super().st_validate(shards, global_shape)


class EveryLayoutCrashes(ReferenceAdapter):
    def dt_local_shape_and_offset(self, global_shape, mesh_shape, placements, coordinate):
        os.kill(os.getpid(), signal.SIGSEGV)


class GatherFailsOnce(ReferenceAdapter):
    """A fault that fires once in a whole run (a race, a flaky link): the first gather on rank 0
    raises; the file named by ``SHARDSPEC_PLANTED_FLAG`` records that it fired."""

    def st_gather(self, st, dst, out):
        flag = os.environ["SHARDSPEC_PLANTED_FLAG"]
        if torch.distributed.get_rank() == 0 and not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError("planted: fires once")
        return super().st_gather(st, dst, out)


LAYOUT_CRASHES = LayoutCrashesTheProcess()
GATHER_FAILS_ONCE = GatherFailsOnce()
EVERY_LAYOUT_CRASHES = EveryLayoutCrashes()
VALIDATE_HANGS = ValidateHangs()
