"""Deliberately broken copies of the reference: the suite must catch each with a minimal case."""

from __future__ import annotations

import collections
import copy
import dataclasses
import itertools
import math
import os
import signal
import time
from unittest import mock

import torch
from torch.utils import _pytree as pytree

import reference.dtensor as dt
import reference.dtensor.autograd as dt_autograd
import reference.dtensor.ops as dt_ops
import reference.dtensor.redistribute as dt_redistribute
from conformance.adapters.reference import ReferenceAdapter
from conformance.oracle.dt_api import contiguous_stride
from conformance.vocabulary import Shard, parse_placement
from reference.sharded_tensor import ChunkShardingSpec, validation
from reference.sharded_tensor import from_local as st_from_local
from reference.sharded_tensor import metadata as st_metadata
from reference.sharded_tensor import reshard as st_reshard
from reference.sharded_tensor.sharded_tensor import ShardedTensor


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
    sharing columns, are taken to overlap (ST-VALID-1). Boxes of another rank count are left to
    the reference's own checks (ST-VALID-5): the bug is the overlap's alone."""

    def st_validate(self, shards, global_shape):
        ndim = len(global_shape)
        boxes = [s for s in shards if all(s["sizes"]) and len(s["sizes"]) == ndim and ndim]
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


class _PatchedTensors(ReferenceAdapter):
    """The reference, with every ShardedTensor it builds passed through ``patch`` (which swaps
    one of the tensor's methods for a broken one)."""

    def patch(self, t):
        raise NotImplementedError

    def st_shard_by_spec(self, tensor, spec, src_rank, group):
        return self.patch(super().st_shard_by_spec(tensor, spec, src_rank, group))

    def st_create(self, fill, spec, *args, **options):
        return self.patch(super().st_create(fill, spec, *args, **options))


class ReshardSpoilsItsSourceOnError(_PatchedTensors):
    """``reshard`` that, failing, leaves the local tensors it held changed (ST-RESHARD-6)."""

    def patch(self, t):
        return _spoiling(t)


def _spoiling(t):
    checked = t.reshard

    def reshard(spec):
        try:
            return checked(spec)
        except Exception:
            for s in t.local_shards():
                if s.tensor.dtype == torch.bool:
                    s.tensor.logical_not_()
                else:
                    s.tensor.add_(1)
            raise

    t.reshard = reshard
    return t


class NegativeOffsetsAccepted(ReferenceAdapter):
    """``ShardMetadata`` that takes a negative offset for its absolute value (ST-META-2)."""

    def st_shard_metadata(self, offsets, sizes, placement):
        if isinstance(offsets, list) and any(isinstance(o, int) and o < 0 for o in offsets):
            offsets = [abs(o) for o in offsets]
        return super().st_shard_metadata(offsets, sizes, placement)


class CreateDropsRequiresGrad(ReferenceAdapter):
    """``zeros``/``ones``/... that drop ``requires_grad``, so the tensor does not follow its
    properties (ST-LIFE-1)."""

    def st_create(self, fill, spec, *args, **options):
        options.pop("requires_grad", None)
        return super().st_create(fill, spec, *args, **options)


class GapsAccepted(ReferenceAdapter):
    """A layout check that never asks whether the shards cover the tensor (ST-VALID-4)."""

    def st_validate(self, shards, global_shape):
        try:
            super().st_validate(shards, global_shape)
        except ValueError as exc:
            if "[ST-VALID-4]" not in str(exc):
                raise


class _OverlapCheck(ReferenceAdapter):
    """The reference's layout check with another overlap search in place of its sweep."""

    def find_overlap(self, shards):
        raise NotImplementedError

    def st_validate(self, shards, global_shape):
        with mock.patch.object(validation, "find_overlap", self.find_overlap):
            super().st_validate(shards, global_shape)


class OverlapsLeftToTheCount(_OverlapCheck):
    """No overlap search: the element count of ST-VALID-4 is trusted to find overlaps, and misses
    one whose hole elsewhere makes the count right (ST-VALID-2)."""

    def find_overlap(self, shards):
        return None


class OverlapOnlyBetweenNeighbours(_OverlapCheck):
    """A sweep that compares each box with the next in offset order only: a box that overlaps one
    further on goes unseen (ST-VALID-2)."""

    def find_overlap(self, shards):
        boxes = sorted(
            (i for i, s in enumerate(shards) if s.volume), key=lambda i: shards[i].shard_offsets
        )
        for a, b in itertools.pairwise(boxes):
            if validation.overlaps(shards[a], shards[b], range(shards[a].ndim)):
                return a, b
        return None


class ReshardInRankOrder(_PatchedTensors):
    """``reshard`` that lays chunks out in rank order, not in the order of the placements
    (PyTorch's own ST-RESHARD-3 deviation). Minimal: a reshard along the same dim to placements
    out of rank order lays the chunks out in the wrong order (ST-RESHARD-2)."""

    def patch(self, t):
        return _in_rank_order(t)


def _in_rank_order(t):
    checked = t.reshard

    def reshard(spec):
        if isinstance(spec, ChunkShardingSpec) and all(
            p.rank() is not None for p in spec.placements
        ):
            spec = ChunkShardingSpec(spec.dim, sorted(spec.placements, key=lambda p: p.rank()))
        return checked(spec)

    t.reshard = reshard
    return t


class GatherChecksOutOnlyOnTheDestination(ReferenceAdapter):
    """``gather`` whose destination refuses a wrong ``out`` alone, before the other ranks learn
    of it: a split verdict (ERR-6), the others left waiting (ERR-7)."""

    def st_shard_by_spec(self, tensor, spec, src_rank, group):
        t = super().st_shard_by_spec(tensor, spec, src_rank, group)
        checked = t.gather

        def gather(dst=0, out=None):
            mine = torch.distributed.get_rank() == dst and isinstance(out, torch.Tensor)
            if mine and tuple(out.shape) != tuple(t.size()):
                raise ValueError(f"[ST-GATHER-5] out has shape {tuple(out.shape)}")
            return checked(dst=dst, out=out)

        t.gather = gather
        return t


class FlattenKeepsEmptyInnerTensors(ReferenceAdapter):
    """Flattening that keeps an outer tensor whose inner tensor holds no shard on this rank
    (ST-FLAT-2 drops it)."""

    def st_flatten(self, state_dict):
        return _restore(super().st_flatten(state_dict), state_dict)


def _restore(flat: dict, original: dict) -> dict:
    """``flat`` with every key of ``original`` it dropped put back, at any depth."""
    for key, value in original.items():
        if key not in flat:
            flat[key] = value
        elif isinstance(value, dict):
            _restore(flat[key], value)
    return flat


class MeshGroupsInRankOrder(ReferenceAdapter):
    """Per-dim groups listed in ascending global rank, not coordinate order (PyTorch's own
    DT-MESH-7 deviation)."""

    def dt_mesh_group(self, mesh, dim):
        members, _ = super().dt_mesh_group(mesh, dim)
        ordered = sorted(members)
        return ordered, ordered.index(torch.distributed.get_rank())


class PartialsEqualWhateverTheOp(ReferenceAdapter):
    """``Partial`` placements that compare equal whatever their reduce op (DT-PLACE-8)."""

    def dt_placement(self, kind, *args):
        made = super().dt_placement(kind, *args)
        return _AnyPartial(*args) if kind == "Partial" else made


class _AnyPartial(dt.Partial):
    def __eq__(self, other: object) -> bool:
        return isinstance(other, dt.Partial)

    def __hash__(self) -> int:
        return hash("Partial")


class FloorChunks(ReferenceAdapter):
    """Chunks of ``L // k`` with the remainder on the last coordinate, not ``ceil(L / k)``
    (DT-LAYOUT-2), for a single ``Shard`` over a 1-D mesh."""

    def dt_local_shape_and_offset(self, global_shape, mesh_shape, placements, coordinate):
        shape, offset = super().dt_local_shape_and_offset(
            global_shape, mesh_shape, placements, coordinate
        )
        placement = parse_placement(placements[0]) if len(placements) == 1 else None
        if isinstance(placement, Shard) and len(mesh_shape) == 1 and global_shape:
            d, k, (c,) = placement.dim % len(global_shape), mesh_shape[0], coordinate
            step = global_shape[d] // k
            offset[d] = c * step
            shape[d] = global_shape[d] - c * step if c == k - 1 else step
        return shape, offset


class DistributeFromTheFirstMember(ReferenceAdapter):
    """``distribute_tensor`` that takes the data of the mesh's first rank, whatever
    ``src_data_rank`` says (DT-API-2)."""

    def dt_distribute(self, tensor, mesh, placements, src_data_rank):
        first = int(mesh.mesh.flatten()[0])
        source = first if src_data_rank is not None else None
        return super().dt_distribute(tensor, mesh, placements, source)


class AverageWithoutDividing(ReferenceAdapter):
    """``P(avg)`` reduced as a sum: the mean of the mesh dim's contributions times its size
    (DT-REDIST-4)."""

    def dt_redistribute(self, d, placements, device_mesh=None):
        moved = super().dt_redistribute(d, placements, device_mesh)
        for dim, (before, after) in enumerate(zip(d.placements, moved.placements, strict=True)):
            averaged = isinstance(before, dt.Partial) and before.reduce_op == "avg"
            if averaged and not isinstance(after, dt.Partial):
                moved.to_local().mul_(d.device_mesh.size(dim))
        return moved


class InteropPlacesByCoordinate(ReferenceAdapter):
    """ShardedTensor metadata of a DTensor that places each box on the rank numbered like its
    flat coordinate, not on the rank at that coordinate (INTEROP-1)."""

    def dt_to_sharded_metadata(self, global_shape, dtype, mesh_shape, mesh_ranks, placements,
                               device_type):  # fmt: skip
        return super().dt_to_sharded_metadata(
            global_shape, dtype, mesh_shape, sorted(mesh_ranks), placements, device_type
        )


class CheckpointKeepsReplicas(ReferenceAdapter):
    """A checkpoint plan in which every coordinate writes its box: replicas' copies are not
    dropped, so a replicated element is saved more than once (INTEROP-8)."""

    def dt_checkpoint_plan(self, dtensor):
        mesh = dtensor.device_mesh
        boxes = []
        for c in mesh.coordinates():
            sizes, offsets = dt.local_shape_and_offset(dtensor.shape, mesh.shape,
                                                       dtensor.placements, c)  # fmt: skip
            placement = f"rank:{mesh.rank_at(c)}/{mesh.device_type}"
            boxes.append({"offsets": list(offsets), "sizes": list(sizes), "placement": placement})
        return {**super().dt_checkpoint_plan(dtensor), "boxes": boxes}


class CloneSharesLaterShards(_PatchedTensors):
    """``clone`` that copies a rank's first local shard only, as if every rank held one: the
    others share storage with the source (ST-LIFE-17)."""

    def patch(self, t):
        def clone():
            shards = [
                st_metadata.Shard(s.tensor.clone() if i == 0 else s.tensor, s.metadata)
                for i, s in enumerate(t.local_shards())
            ]
            return ShardedTensor(copy.deepcopy(t.metadata()), shards, t.process_group, t._spec)

        t.clone = clone
        return t


class ReshardDropsRequiresGrad(_PatchedTensors):
    """``reshard`` whose result forgets ``requires_grad``, in its properties and its local
    tensors (ST-RESHARD-5)."""

    def patch(self, t):
        checked = t.reshard

        def reshard(spec):
            new = checked(spec)
            if new.metadata().tensor_properties.requires_grad:
                new._metadata = copy.deepcopy(new._metadata)
                new._metadata.tensor_properties.requires_grad = False
                for s in new.local_shards():
                    s.tensor = s.tensor.detach()
            return self.patch(new)

        t.reshard = reshard
        return t


class GatherThroughACopyOfOut(_PatchedTensors):
    """``gather`` into ``out.contiguous()``: a strided ``out`` gets a temporary copy written,
    and keeps its old values (ST-GATHER-8)."""

    def patch(self, t):
        checked = t.gather

        def gather(dst=0, out=None):
            if isinstance(out, torch.Tensor) and not out.is_contiguous():
                out = out.contiguous()
            return checked(dst=dst, out=out)

        t.gather = gather
        return t


class FlattenRemovesNestedEntries(ReferenceAdapter):
    """Flattening that deletes each nested tensor's entry from the caller's state dict as it
    rewrites it (ST-FLAT-10)."""

    def st_flatten(self, state_dict):
        flat = super().st_flatten(state_dict)
        _remove_nested(state_dict)
        return flat


def _remove_nested(d: dict) -> None:
    for key in list(d):
        value = d[key]
        if isinstance(value, dict):
            _remove_nested(value)
        elif isinstance(value, ShardedTensor):
            shards = value.local_shards()
            if len(shards) == 1 and isinstance(shards[0].tensor, ShardedTensor):
                del d[key]


class FromLocalChecksIntoTheInput(ReferenceAdapter):
    """``from_local(run_check=True)`` that broadcasts coordinate 0's replica into the tensor
    the caller passed, not into a new one (DT-API-9)."""

    def dt_from_local(self, local, mesh, placements, run_check, shape, stride):
        d = super().dt_from_local(local, mesh, placements, run_check, shape, stride)
        held = d.to_local()
        if run_check and held is not local and held.shape == local.shape:
            local.copy_(held)
            d._local = local
        return d


class FullOfTheDefaultDtype(ReferenceAdapter):
    """``full(size, v)`` without a dtype in the default dtype, not the one ``torch.full``
    infers from ``v`` (DT-API-18)."""

    def dt_factory(self, op, size, mesh, placements, fill_value, dtype, requires_grad):
        if op == "full" and dtype is None:
            dtype = torch.get_default_dtype()
        return super().dt_factory(op, size, mesh, placements, fill_value, dtype, requires_grad)


class RedistributeStrideOfTheLocal(ReferenceAdapter):
    """A redistributed DTensor whose stride is its local tensor's, not the source's global
    stride (DT-REDIST-13)."""

    def dt_redistribute(self, d, placements, device_mesh=None):
        moved = super().dt_redistribute(d, placements, device_mesh)
        moved._stride = tuple(moved.to_local().stride())
        return moved


class _Replanned(ReferenceAdapter):
    """The reference, with every redistribution's plan passed through ``replan``."""

    def replan(self, plan, source, target):
        raise NotImplementedError

    def dt_redistribute(self, d, placements, device_mesh=None):
        planned = dt_redistribute.plan

        def plan(source, target):
            return self.replan(planned(source, target), source, target)

        with mock.patch.object(dt_autograd, "plan", plan):
            return super().dt_redistribute(d, placements, device_mesh)


class PartialRelabelled(_Replanned):
    """``P(op1) -> P(op2)`` that changes the label only: no reduction, no partition
    (DT-REDIST-6)."""

    def replan(self, plan, source, target):
        relabelled = {
            i
            for i, (s, t) in enumerate(zip(source, target, strict=True))
            if isinstance(s, dt.Partial) and isinstance(t, dt.Partial) and s != t
        }
        steps = tuple(
            s
            for s in plan.steps
            if not (
                set(s.mesh_dims) & relabelled and s.kind in ("all_reduce", "partition", "divide")
            )
        )
        return dataclasses.replace(plan, steps=steps)


class NestedShardsGatheredLeftToRight(_Replanned):
    """Nested shards of one tensor dim gathered outer mesh dim first, not inner first
    (DT-LAYOUT-7, DT-REDIST-3)."""

    def replan(self, plan, source, target):
        gathers = sorted(
            (s for s in plan.steps if s.kind == "all_gather"), key=lambda s: s.mesh_dims
        )
        if len(gathers) < 2:
            return plan
        ordered = iter(gathers)
        steps = tuple(next(ordered) if s.kind == "all_gather" else s for s in plan.steps)
        return dataclasses.replace(plan, steps=steps)


class PartitionDividesBool(ReferenceAdapter):
    """A ``P(sum)`` partition whose integer branch knows ``int64`` only: ``bool`` is divided
    like a float and changes dtype (DT-REDIST-6)."""

    def dt_redistribute(self, d, placements, device_mesh=None):
        partition = dt_redistribute.partition

        def divided(x, target, parts, coord):
            if target.reduce_op == "sum" and x.dtype == torch.bool:
                return x / parts
            return partition(x, target, parts, coord)

        with mock.patch.object(dt_redistribute, "partition", divided):
            return super().dt_redistribute(d, placements, device_mesh)


class IntegerSumPartitionFloors(ReferenceAdapter):
    """An integer ``P(sum)`` partition that floor-divides the value over the coordinates, as
    the float branch divides: right only where the mesh dim has one coordinate or the values
    divide evenly (DT-REDIST-6). Each class alone (an integer dtype; a partition) is common in
    the draws; only the two together show the bug."""

    def dt_redistribute(self, d, placements, device_mesh=None):
        partition = dt_redistribute.partition

        def floored(x, target, parts, coord):
            if target.reduce_op == "sum" and x.dtype == torch.int64:
                return torch.div(x, parts, rounding_mode="floor")
            return partition(x, target, parts, coord)

        with mock.patch.object(dt_redistribute, "partition", floored):
            return super().dt_redistribute(d, placements, device_mesh)


class FromLocalStrideReadsTheStorage(ReferenceAdapter):
    """``from_local`` that, given the global stride, reads each local tensor's storage as if it
    were laid out contiguously (the stride argument taken for the local's own): right for a
    contiguous local, scrambled for a transposed view or a strided slice (DT-API-11). Each class
    alone (a stride given; a non-contiguous local) is common; only the two together show it."""

    def dt_from_local(self, local, mesh, placements, run_check, shape, stride):
        if stride is not None and not local.is_contiguous():
            local = torch.as_strided(local, local.shape, contiguous_stride(local.shape))
        return super().dt_from_local(local, mesh, placements, run_check, shape, stride)


class PlacementsCheckedAgainstTheWorld(_PatchedTensors):
    """``reshard`` that checks the new placements against the ranks of the world, not of the
    tensor's group: a real world rank outside a sub-group passes for a member (ST-VALID-12) and
    the request is then refused as unsupported. Right on the whole world, and for ranks past the
    world; only a sub-group together with a world rank outside it shows the bug."""

    def patch(self, t):
        checked = t.reshard
        world = list(range(torch.distributed.get_world_size()))

        def against_the_world(shards, members):
            validation.check_placements(shards, world)

        def reshard(spec):
            with mock.patch.object(st_reshard, "check_placements", against_the_world):
                return checked(spec)

        t.reshard = reshard
        return t


class LoadingForgetsRequiresGrad(_PatchedTensors):
    """``torch.load`` of a sharded tensor that restores the default tensor properties: right
    for a tensor made with the defaults, wrong for one that requires grad (ST-LIFE-18). Every
    case saves and loads; only a non-default property shows the bug."""

    def patch(self, t):
        t.__class__ = _ForgetsRequiresGrad
        return t


class _ForgetsRequiresGrad(ShardedTensor):
    def __setstate__(self, state: tuple) -> None:
        super().__setstate__(state)
        self._metadata = dataclasses.replace(
            self._metadata,
            tensor_properties=dataclasses.replace(
                self._metadata.tensor_properties, requires_grad=False
            ),
        )


class SizeOfHoldersOnly(ReferenceAdapter):
    """``init_from_local_shards`` where a rank that holds no shard takes the global size the
    ranks holding shards pass, whatever size it was given: its own argument goes unchecked
    (ST-VALID-6). A fault on a rank that holds a shard, or on every rank, is still caught; only
    a fault of an argument on a rank holding no shard shows the bug."""

    def st_init_from_local_shards(self, shards, *size, group):
        reached = st_from_local.reach_verdict

        def reach_verdict(process_group, check):
            done, shared = reached(process_group, check)
            held = [f.size for f in shared if f.boxes] or [shared[0].size]
            return done, [f if f.boxes else f._replace(size=held[0]) for f in shared]

        with mock.patch.object(st_from_local, "reach_verdict", reach_verdict):
            return super().st_init_from_local_shards(shards, *size, group=group)


class OwnShardsCheckedAfterAgreeing(ReferenceAdapter):
    """``init_from_local_shards_and_global_metadata`` that checks a rank's own shards against
    the global metadata (ST-VALID-8, 9, 11) only after the ranks agreed, each rank alone: a
    rank whose shards disagree raises while the others return (ERR-6). Right when every rank's
    shards disagree, or none do; only a disagreement on one rank shows the bug."""

    def st_init_from_global_metadata(self, shards, metadata, group):
        with (
            mock.patch.object(st_from_local, "Counter", return_value=0),
            mock.patch.object(st_from_local, "check_local_tensor", return_value=None),
        ):
            t = super().st_init_from_global_metadata(shards, metadata, group)
        me = torch.distributed.get_rank()
        entries = [s for s in metadata.shards_metadata if s.placement.rank() == me]
        if collections.Counter(s.metadata for s in shards) != collections.Counter(entries):
            raise ValueError(f"[ST-VALID-11] rank {me} passed shards its entries do not name")
        for shard in shards:
            validation.check_local_tensor(shard.tensor, shard.metadata, metadata.tensor_properties)
        return t


class ZeroDimBoxHoldsNothing(ReferenceAdapter):
    """A volume count that takes a box of no dims for empty (``prod(sizes) if sizes else 0``):
    the one box of a 0-d tensor then leaves a gap, and its valid layout is refused (ST-VALID-4).
    Every layout of a tensor with dims is judged as before."""

    def st_validate(self, shards, global_shape):
        if any(not s["sizes"] for s in shards):
            volume = sum(math.prod(s["sizes"]) if s["sizes"] else 0 for s in shards)
            if volume != math.prod(global_shape):
                raise ValueError(f"[ST-VALID-4] the shards hold {volume} elements")
        super().st_validate(shards, global_shape)


class GatherLosesASecondBoxOnSubGroups(ReferenceAdapter):
    """``gather`` on a sub-group that leaves unwritten the box of a rank's second shard: right
    on the world, and on sub-groups where no rank holds two boxes (ST-GATHER-2, ST-GATHER-9)."""

    def st_gather(self, t, dst, out):
        super().st_gather(t, dst, out)
        group = t.process_group
        if (
            out is None
            or torch.distributed.get_world_size(group) == torch.distributed.get_world_size()
        ):
            return
        seen = set()
        for shard in t.metadata().shards_metadata:
            if shard.placement.rank() in seen and all(shard.shard_sizes):
                box = out
                for d, (o, n) in enumerate(
                    zip(shard.shard_offsets, shard.shard_sizes, strict=True)
                ):
                    box = box.narrow(d, o, n)
                box.zero_()
                return
            seen.add(shard.placement.rank())


class SumKeepsItsPartsUnreduced(ReferenceAdapter):
    """The reference's sum rule with ``R`` where a summed dim was sharded: every rank takes its
    own part of the sum for the whole of it (DT-OP-3)."""

    def dt_op(self, fn, args, kwargs):
        rule = dt_ops.summed_placements

        def unreduced(placements, ndim, dims, keepdim):
            got = rule(placements, ndim, dims, keepdim)
            return got and tuple(dt.Replicate() if isinstance(p, dt.Partial) else p for p in got)

        with mock.patch.object(dt_ops, "summed_placements", unreduced):
            return super().dt_op(fn, args, kwargs)


class OutReturnsANewDTensor(ReferenceAdapter):
    """``op(..., out=z)`` that computes the result and returns it as a new DTensor, leaving ``z``
    as it was (DT-OP-13)."""

    def dt_op(self, fn, args, kwargs):
        return super().dt_op(fn, args, {k: v for k, v in kwargs.items() if k != "out"})


class ContractionPartsTakenAsReplicas(ReferenceAdapter):
    """``torch.mm`` of two sides sharded along the contraction dim on one mesh dim (``a`` by
    columns, ``b`` by rows, row-wise tensor parallelism): each rank's product of its parts is
    taken for the whole product, ``R`` where the reference's rule says ``P(sum)`` (DT-OP-3)."""

    def dt_op(self, fn, args, kwargs):
        result = super().dt_op(fn, args, kwargs)
        if fn is torch.mm and any(isinstance(p, dt.Partial) for p in result.placements):
            whole = tuple(dt.Replicate() if isinstance(p, dt.Partial) else p
                          for p in result.placements)  # fmt: skip
            return dt.DTensor(result.to_local(), result.device_mesh, whole, result.shape,
                              result.stride())  # fmt: skip
        return result


class NumberAddedToEveryPart(ReferenceAdapter):
    """``x + c`` and ``x - c`` of a partial ``x`` and a Python number computed on each rank's
    part, keeping ``x``'s placements, as if the op were linear in ``x``: the number is added
    once per part (DT-OP-2)."""

    def dt_op(self, fn, args, kwargs):
        x, *rest = args
        if (
            fn in (torch.add, torch.sub)
            and isinstance(x, dt.DTensor)
            and any(isinstance(p, dt.Partial) for p in x.placements)
            and rest
            and all(isinstance(c, (bool, int, float)) for c in rest)
        ):
            local = fn(x.to_local(), *rest, **kwargs)
            return dt.DTensor(local, x.device_mesh, x.placements, x.shape, x.stride())
        return super().dt_op(fn, args, kwargs)


class ScalarTensorsRefused(ReferenceAdapter):
    """Ops that refuse a 0-d plain tensor argument with ``NotImplementedError``, as DT-OP-7 lets
    them refuse a larger one (DT-OP-12)."""

    def dt_op(self, fn, args, kwargs):
        leaves = pytree.tree_leaves((args, kwargs))
        if any(type(x) is torch.Tensor and x.dim() == 0 for x in leaves):
            raise NotImplementedError("a plain tensor argument")
        return super().dt_op(fn, args, kwargs)


CHUNK_OFFSET = ChunkOffsetPastTheEnd()
OUT_RETURNS_NEW = OutReturnsANewDTensor()
SCALAR_TENSORS_REFUSED = ScalarTensorsRefused()
CONTRACTION_PARTS_AS_REPLICAS = ContractionPartsTakenAsReplicas()
NUMBER_ADDED_TO_EVERY_PART = NumberAddedToEveryPart()
SUM_UNREDUCED = SumKeepsItsPartsUnreduced()
GATHER_WRITES_OUT = GatherWritesOutBeforeChecking()
RESHARD_SPOILS_SOURCE = ReshardSpoilsItsSourceOnError()
GATHER_DROPS_LAST = GatherDropsTheLastShard()
INTEGER_SUM_FLOORS = IntegerSumPartitionFloors()
GATHER_LOSES_SECOND_BOX = GatherLosesASecondBoxOnSubGroups()
FROM_LOCAL_STRIDE_READS_STORAGE = FromLocalStrideReadsTheStorage()
PLACEMENTS_CHECKED_AGAINST_THE_WORLD = PlacementsCheckedAgainstTheWorld()
LOADING_FORGETS_REQUIRES_GRAD = LoadingForgetsRequiresGrad()
SIZE_OF_HOLDERS_ONLY = SizeOfHoldersOnly()
OWN_SHARDS_CHECKED_AFTER_AGREEING = OwnShardsCheckedAfterAgreeing()
ZERO_DIM_BOX_HOLDS_NOTHING = ZeroDimBoxHoldsNothing()
TOUCHING_OVERLAP = TouchingBoxesOverlap()
OVERLAP_IN_ONE_DIM = OverlapSeenInOneDim()
LOSES_PRECISION = RedistributeLosesPrecision()
NO_RULE_IDS = MessagesWithoutRuleIds()
NEGATIVE_OFFSETS = NegativeOffsetsAccepted()
CREATE_DROPS_GRAD = CreateDropsRequiresGrad()
GAPS_ACCEPTED = GapsAccepted()
OVERLAPS_LEFT_TO_THE_COUNT = OverlapsLeftToTheCount()
OVERLAP_ONLY_BETWEEN_NEIGHBOURS = OverlapOnlyBetweenNeighbours()
RESHARD_IN_RANK_ORDER = ReshardInRankOrder()
GATHER_CHECKS_ON_DST = GatherChecksOutOnlyOnTheDestination()
FLATTEN_KEEPS_EMPTY = FlattenKeepsEmptyInnerTensors()
MESH_GROUPS_SORTED = MeshGroupsInRankOrder()
PARTIALS_EQUAL = PartialsEqualWhateverTheOp()
FLOOR_CHUNKS = FloorChunks()
DISTRIBUTE_FROM_FIRST = DistributeFromTheFirstMember()
AVG_WITHOUT_DIVIDING = AverageWithoutDividing()
INTEROP_BY_COORDINATE = InteropPlacesByCoordinate()
CHECKPOINT_KEEPS_REPLICAS = CheckpointKeepsReplicas()
CLONE_SHARES_LATER_SHARDS = CloneSharesLaterShards()
RESHARD_DROPS_GRAD = ReshardDropsRequiresGrad()
GATHER_THROUGH_A_COPY = GatherThroughACopyOfOut()
FLATTEN_REMOVES_NESTED = FlattenRemovesNestedEntries()
FROM_LOCAL_CHECKS_INTO_INPUT = FromLocalChecksIntoTheInput()
FULL_OF_DEFAULT_DTYPE = FullOfTheDefaultDtype()
REDISTRIBUTE_STRIDE_OF_LOCAL = RedistributeStrideOfTheLocal()
PARTIAL_RELABELLED = PartialRelabelled()
NESTED_LEFT_TO_RIGHT = NestedShardsGatheredLeftToRight()
PARTITION_DIVIDES_BOOL = PartitionDividesBool()


class ToLocalIgnoresGradPlacements(ReferenceAdapter):
    """``to_local(grad_placements=...)`` that ignores the declaration: gradients each rank
    computed as parts of one (``P(sum)``) are read as copies of it (DT-GRAD-3)."""

    def dt_to_local(self, d, grad_placements=None):
        return super().dt_to_local(d)


TO_LOCAL_IGNORES_GRAD_PLACEMENTS = ToLocalIgnoresGradPlacements()


class ReplicatedGradientSummed(ReferenceAdapter):
    """Operators whose always-correct way reads the gradient every rank computes for an input's
    full tensor as a part of it (``to_local(grad_placements=[P(sum)])``), not as a copy: an
    input the op replicated gets its gradient once per rank (DT-GRAD-7). Forward values are
    right."""

    def dt_op(self, fn, args, kwargs):
        def full(d):
            replicated = d.redistribute(placements=[dt.Replicate()] * d.device_mesh.ndim)
            local = replicated.to_local(grad_placements=[dt.Partial()] * d.device_mesh.ndim)
            out = torch.empty_strided(d.shape, d.stride(), dtype=d.dtype, device=local.device)
            return out.copy_(local)

        with mock.patch.object(dt_ops, "_full_tensor_with_global_strides", full):
            return super().dt_op(fn, args, kwargs)


REPLICATED_GRADIENT_SUMMED = ReplicatedGradientSummed()


def _planted_backward(name: str, backward) -> type[torch.autograd.Function]:
    """An autograd function whose forward is the identity and whose backward is ``backward``."""

    def forward(ctx, y):
        return y.view_as(y)

    return type(name, (torch.autograd.Function,), {
        "forward": staticmethod(forward), "backward": staticmethod(backward),
    })  # fmt: skip


def _raise_in_backward(ctx, grad):
    raise RuntimeError("planted: no backward for this layout")


# The gradient times 1 + 2⁻¹⁰; a backward that raises, as a kernel no one ran backward does.
_CoarseDerivative = _planted_backward("_CoarseDerivative", lambda ctx, grad: grad * (1 + 2**-10))
_BackwardRaises = _planted_backward("_BackwardRaises", _raise_in_backward)


class BackwardChanged(ReferenceAdapter):
    """``op`` whose forward is right and whose backward passes through ``function`` (an
    identity forward, a planted backward)."""

    def __init__(self, op, function: type[torch.autograd.Function]):
        super().__init__()
        self.op = op
        self.function = function

    def dt_op(self, fn, args, kwargs):
        if fn is self.op:
            forward, function = self.op, self.function

            def fn(*a, **k):
                return function.apply(forward(*a, **k))

        return super().dt_op(fn, args, kwargs)


# A derivative off by a part in a thousand (a kernel that rounds through a half-precision
# table, say): layouts right, every gradient of the right sign and nearly the right size
# (DT-GRAD-8 for tanh, DT-GRAD-9 for softmax).
TANH_DERIVATIVE_COARSE = BackwardChanged(torch.tanh, _CoarseDerivative)
SOFTMAX_DERIVATIVE_COARSE = BackwardChanged(torch.softmax, _CoarseDerivative)
# A backward that raises after the forward returned, as PyTorch's did for ops outside the core
# list (issue 38). cumsum is a model layer outside the core ops: before the model layers'
# backward passes were drawn, no gradient test ran through it.
CUMSUM_BACKWARD_RAISES = BackwardChanged(torch.cumsum, _BackwardRaises)


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


class LayoutHangsAtTheLastCoordinate(ReferenceAdapter):
    """The layout of the last coordinate of a 2-rank mesh never comes back."""

    def dt_local_shape_and_offset(self, global_shape, mesh_shape, placements, coordinate):
        if list(mesh_shape) == [2] and list(coordinate) == [1]:
            time.sleep(3600)
        return super().dt_local_shape_and_offset(global_shape, mesh_shape, placements, coordinate)


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


class LayoutFaultsOnceIn3D(ReferenceAdapter):
    """A fault that fires once in a run, inside a batch of pure calls: the first 3-d layout kills
    its process, exits or hangs (``SHARDSPEC_PLANTED_FAULT``: segv, exit, hang); the file named
    by ``SHARDSPEC_PLANTED_FLAG`` records that it fired, so no call alone ever shows it."""

    def dt_local_shape_and_offset(self, global_shape, mesh_shape, placements, coordinate):
        flag = os.environ["SHARDSPEC_PLANTED_FLAG"]
        if len(global_shape) == 3 and not os.path.exists(flag):
            open(flag, "w").close()
            fault = os.environ["SHARDSPEC_PLANTED_FAULT"]
            if fault == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
            elif fault == "exit":
                os._exit(1)
            time.sleep(3600)
        return super().dt_local_shape_and_offset(global_shape, mesh_shape, placements, coordinate)


LAYOUT_FAULTS_ONCE_IN_3D = LayoutFaultsOnceIn3D()
LAYOUT_CRASHES = LayoutCrashesTheProcess()
GATHER_FAILS_ONCE = GatherFailsOnce()
EVERY_LAYOUT_CRASHES = EveryLayoutCrashes()
VALIDATE_HANGS = ValidateHangs()
LAYOUT_HANGS_AT_THE_LAST_COORDINATE = LayoutHangsAtTheLastCoordinate()


class RandomShardsFromTheStart(ReferenceAdapter):
    """Random calls that draw each rank's local tensor from the start of its own generator, as
    PyTorch does on a CPU mesh: shards repeat each other (DT-RAND-4)."""

    def dt_factory(self, op, size, mesh, placements, fill_value, dtype, requires_grad):
        if op not in ("rand", "randn"):
            return super().dt_factory(op, size, mesh, placements, fill_value, dtype, requires_grad)
        made = super().dt_factory("zeros", size, mesh, placements, None, dtype, requires_grad)
        local = made.to_local()
        local.copy_(getattr(torch, op)(local.shape, dtype=local.dtype))
        return made

    def dt_op(self, fn, args, kwargs):
        if fn not in (torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.bernoulli_):
            return super().dt_op(fn, args, kwargs)
        fn(args[0].to_local(), *args[1:], **kwargs)
        return args[0]


class DrawsAfterAnUnevenOneOutOfStep(ReferenceAdapter):
    """After a random call whose ranks hold local tensors of different sizes, the next
    replicated random call starts each rank's draw as far into its generator as its rank, as a
    tracker that advanced each rank by its own shard would: the replicas differ (DT-RAND-2). A
    reseed puts the ranks back in step; a call alone, judged from its own seed, shows nothing."""

    def __init__(self) -> None:
        super().__init__()
        self._after_uneven: int | None = None  # the seed of the uneven draw last made

    def _random(self, make, replicated: bool):
        seed = torch.initial_seed()
        if replicated and self._after_uneven == seed:
            torch.rand(torch.distributed.get_rank())
        result = make()
        sizes = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(sizes, result.to_local().numel())
        self._after_uneven = seed if len(set(sizes)) > 1 else None
        return result

    def dt_factory(self, op, size, mesh, placements, fill_value, dtype, requires_grad):
        make = super().dt_factory
        if op not in ("rand", "randn"):
            return make(op, size, mesh, placements, fill_value, dtype, requires_grad)
        replicated = all(p == "R" for p in placements or ["R"])
        return self._random(
            lambda: make(op, size, mesh, placements, fill_value, dtype, requires_grad), replicated
        )

    def dt_op(self, fn, args, kwargs):
        if fn not in dt_ops.random.RANDOM:
            return super().dt_op(fn, args, kwargs)
        replicated = all(isinstance(p, dt.Replicate) for p in args[0].placements)
        return self._random(lambda: super(type(self), self).dt_op(fn, args, kwargs), replicated)


class RandomPartsNotPartitioned(ReferenceAdapter):
    """``rand`` into ``P`` placements that fills every part with the draw, as PyTorch's tracker
    does on a CUDA mesh: a ``P(sum)`` uniform tensor worth ``k`` times a draw (DT-RAND-3)."""

    def dt_factory(self, op, size, mesh, placements, fill_value, dtype, requires_grad):
        if op != "rand" or not any(p.startswith("P(") for p in placements or ()):
            return super().dt_factory(op, size, mesh, placements, fill_value, dtype, requires_grad)
        whole = ["R" if p.startswith("P(") else p for p in placements]
        made = super().dt_factory(op, size, mesh, whole, fill_value, dtype, requires_grad)
        kept = [self.dt_placement("Partial", p[2:-1]) if p.startswith("P(") else q
                for p, q in zip(placements, made.placements, strict=True)]  # fmt: skip
        return dt.DTensor(made.to_local(), mesh, tuple(kept), tuple(made.shape), made.stride())


class KaimingFanOfAShard(ReferenceAdapter):
    """``kaiming_uniform_`` of a sharded tensor that initialises each local tensor by itself,
    its bound from the shard's fan, as PyTorch does (ST-OP-13)."""

    def st_op(self, fn, args, kwargs):
        x = args[0]
        if fn is not torch.nn.init.kaiming_uniform_ or x.dim() < 2 or not x.dtype.is_floating_point:
            return super().st_op(fn, args, kwargs)
        for s in args[0].local_shards():
            if s.tensor.numel():
                fn(s.tensor, **kwargs)
        return args[0]


class EqualOfOwnShards(ReferenceAdapter):
    """``torch.equal`` of two sharded tensors of one layout that answers from each rank's own
    shards, with no collective: ranks answer differently where only some of their shards
    differ (ST-OP-3)."""

    def st_op(self, fn, args, kwargs):
        a, b = args[:2] if fn is torch.equal else (None, None)
        if a is None or a.metadata().shards_metadata != b.metadata().shards_metadata:
            return super().st_op(fn, args, kwargs)
        return all(
            torch.equal(s.tensor, t.tensor)
            for s, t in zip(a.local_shards(), b.local_shards(), strict=True)
        )


RANDOM_SHARDS_FROM_THE_START = RandomShardsFromTheStart()
DRAWS_AFTER_UNEVEN_OUT_OF_STEP = DrawsAfterAnUnevenOneOutOfStep()
RANDOM_PARTS_NOT_PARTITIONED = RandomPartsNotPartitioned()
KAIMING_FAN_OF_A_SHARD = KaimingFanOfAShard()
EQUAL_OF_OWN_SHARDS = EqualOfOwnShards()


class _UnusedAsOnes(torch.autograd.Function):
    """Several outputs' local tensors, unchanged; backward, an output that got no gradient (one
    the program left unused) is given ones, as if it were a loss."""

    @staticmethod
    def forward(ctx, *locals_):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*locals_)
        return tuple(t.view_as(t) for t in locals_)

    @staticmethod
    def backward(ctx, *grads):
        return tuple(torch.ones_like(t) if g is None else g
                     for g, t in zip(grads, ctx.saved_tensors, strict=True))  # fmt: skip


class UnusedOutputsGetOnes(ReferenceAdapter):
    """Multi-output ops (``split``, ``chunk``, ``unbind``, ...) whose backward takes the gradient
    of an output nobody used to be ones, where it is zeros: a backward pass from some of the
    outputs gives the input a gradient it does not have (DT-GRAD-7). A backward pass from every
    output never meets it."""

    def dt_op(self, fn, args, kwargs):
        result = super().dt_op(fn, args, kwargs)
        outputs = list(result) if isinstance(result, (tuple, list)) else []
        if len(outputs) < 2 or not all(
            isinstance(y, dt.DTensor) and y.requires_grad for y in outputs
        ):
            return result
        locals_ = _UnusedAsOnes.apply(*[y._local for y in outputs])
        return type(result)(
            dt.DTensor(local, y.device_mesh, y.placements, y.shape, y.stride())
            for local, y in zip(locals_, outputs, strict=True)
        )


UNUSED_OUTPUTS_GET_ONES = UnusedOutputsGetOnes()


class LayoutCachedWithoutArguments(ReferenceAdapter):
    """A cache of each op's output metadata (placements, shape, stride) keyed on the op and its
    DTensor inputs' metadata, not on its other arguments (a sharding-propagation cache missing
    ``dim`` or ``keepdim`` in its key): the op called again on DTensors of the same metadata with
    another ``dim`` labels its own local result with the first call's metadata (DT-OP-9)."""

    seen: dict = {}  # noqa: RUF012 (one cache per rank process, as a propagation cache is)

    def dt_op(self, fn, args, kwargs):
        result = super().dt_op(fn, args, kwargs)
        if not isinstance(result, dt.DTensor):
            return result
        inputs = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, dt.DTensor)]
        key = (fn, *((tuple(a.shape), a.dtype, a.placements, a.device_mesh) for a in inputs))
        spec = (result.placements, result.shape, result.stride())
        placements, shape, stride = self.seen.setdefault(key, spec)
        return dt.DTensor(result._local, result.device_mesh, placements, shape, stride)


LAYOUT_CACHED_WITHOUT_ARGUMENTS = LayoutCachedWithoutArguments()


def _spin() -> None:
    """Compute forever: a hang that the case timeout, which counts CPU time, sees."""
    while True:
        pass


class ForwardSpins(ReferenceAdapter):
    """Every op call computes forever: a hang in the forward call (ERR-7)."""

    def dt_op(self, fn, args, kwargs):
        _spin()


class BackwardSpins(ReferenceAdapter):
    """Every op returns; a backward pass through a full tensor computes forever (DT-GRAD-7)."""

    def dt_full_tensor(self, dt, grad_placements=None):
        full = super().dt_full_tensor(dt, grad_placements)
        if full.requires_grad:
            full.register_hook(lambda grad: _spin())
        return full


FORWARD_SPINS = ForwardSpins()
BACKWARD_SPINS = BackwardSpins()


class MaxOverADimRefused(ReferenceAdapter):
    """Refuses ``torch.max(x, dim)`` and ``torch.min(x, dim)`` with ``NotImplementedError`` on
    every rank, as DT-OP-7 allows: a correct implementation, whose Python-number dim must not be
    judged against the elementwise ``torch.max(x, tensor(1))`` (DT-OP-12)."""

    def dt_op(self, fn, args, kwargs):
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        if fn in (torch.max, torch.min) and isinstance(dim, int) and not isinstance(dim, bool):
            raise NotImplementedError("planted: max and min over a dim are not supported")
        return super().dt_op(fn, args, kwargs)


MAX_OVER_A_DIM_REFUSED = MaxOverADimRefused()
