"""ShardedTensor validation (spec/st-validation.md): layout checks and rank checks as verdicts.

Models ST-VALID-1 to ST-VALID-14. Overlap is the spec's pairwise formula, written out (a
different algorithm from a sweep on purpose). The check order of every verdict is fixed and
documented; ERR-11 lets implementations report any broken rule, and the suite only judges inputs
that break one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conformance.oracle.st_metadata import Properties, ShardMeta, TensorMeta
from conformance.oracle.vocabulary import VALID, Verdict, unsupported, value_error


def overlap(a: ShardMeta, b: ShardMeta) -> bool:
    """Two boxes of one ndim share an element: ``max(o, o') < min(o + s, o' + s')`` in every
    dim (ST-VALID-1). An empty box overlaps nothing; touching boxes do not overlap."""
    return all(
        max(oa, ob) < min(oa + sa, ob + sb)
        for oa, sa, ob, sb in zip(a.offsets, a.sizes, b.offsets, b.sizes, strict=True)
    )


def layout_verdict(meta: TensorMeta, group: Sequence[int] | None = None) -> Verdict:
    """The layout checks of a sharded tensor's ``ShardedTensorMetadata`` (ST-VALID-1 to 5, 12 to
    14), pure.

    Check order: the tiling (see ``tiling_verdict``), then ST-VALID-13 (every placement has a
    rank; a worker name is an optional NotImplementedError), ST-VALID-12 (placement ranks are
    members of ``group``, the group's global ranks; skipped when ``group`` is None)."""
    if not (v := tiling_verdict(meta)).ok:
        return v
    # ST-VALID-13
    devices = [s.device for s in meta.shards]
    if any(d is None or (d.rank is None and d.worker is None) for d in devices):
        return value_error("ST-VALID-13")
    if any(d.rank is None for d in devices):
        return unsupported("ST-VALID-13")
    # ST-VALID-12
    if group is not None and any(d.rank not in group for d in devices):
        return value_error("ST-VALID-12")
    return VALID


def tiling_verdict(meta: TensorMeta) -> Verdict:
    """Whether the shards tile the global size, placements aside: what
    ``EnumerableShardingSpec.build_metadata`` checks (ST-SPEC-12).

    Check order: ST-VALID-14 (at least one shard), ST-VALID-5 (ndim), ST-VALID-3 (bounds),
    ST-VALID-2 (overlap), ST-VALID-4 (volume)."""
    shards, size = meta.shards, meta.size
    # ST-VALID-14
    if not shards:
        return value_error("ST-VALID-14")
    # ST-VALID-5
    if any(s.ndim != len(size) for s in shards):
        return value_error("ST-VALID-5")
    # ST-VALID-3
    if any(
        o + n > limit for s in shards for o, n, limit in zip(s.offsets, s.sizes, size, strict=True)
    ):
        return value_error("ST-VALID-3")
    # ST-VALID-2
    if any(overlap(a, b) for a, b in itertools.combinations(shards, 2)):
        return value_error("ST-VALID-2")
    # ST-VALID-4
    if sum(s.volume for s in shards) != math.prod(size):
        return value_error("ST-VALID-4")
    return VALID


@dataclass(frozen=True)
class TensorInfo:
    """What validation sees of a local tensor."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    device: str = "cpu"
    layout: str = "strided"
    requires_grad: bool = False
    contiguous: bool = True
    pinned: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorInfo:
        return cls(**data)

    def properties(self) -> tuple[str, str, bool, bool]:
        """The properties a tensor contributes (ST-VALID-6, 8): dtype, layout,
        requires_grad, pinned."""
        return (self.dtype, self.layout, self.requires_grad, self.pinned)


@dataclass(frozen=True)
class LocalShard:
    """A ``Shard``: metadata and (what validation sees of) its tensor."""

    meta: ShardMeta
    tensor: TensorInfo

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LocalShard:
        return cls(ShardMeta.from_json(data["metadata"]), TensorInfo.from_json(data["tensor"]))


def _own_shards_verdict(rank: int, shards: Sequence[LocalShard]) -> Verdict:
    """ST-VALID-9 (contiguous), ST-VALID-10 (the placement names this rank), ST-VALID-8 (size
    and device as the metadata says)."""
    for s in shards:
        # ST-VALID-9
        if not s.tensor.contiguous:
            return value_error("ST-VALID-9")
        # ST-VALID-10
        if s.meta.rank != rank:
            return value_error("ST-VALID-10")
        # ST-VALID-8
        if s.tensor.shape != s.meta.sizes or s.tensor.device != s.meta.device.device:
            return value_error("ST-VALID-8")
    return VALID


def init_from_local_shards_metadata(
    inputs: Mapping[int, Sequence[LocalShard]], size: Sequence[int], group: Sequence[int]
) -> TensorMeta:
    """The metadata ``init_from_local_shards`` builds (ST-LIFE-12): every rank's shards in group
    order, the given size, properties from the local tensors."""
    shards = [s for rank in group for s in inputs.get(rank, ())]
    dtype, layout, requires_grad, pinned = (
        shards[0].tensor.properties() if shards else ("float32", "strided", False, False)
    )
    props = Properties(dtype, layout, requires_grad, "contiguous_format", pinned)
    return TensorMeta(tuple(s.meta for s in shards), tuple(size), props)


def init_from_local_shards_verdict(
    inputs: Mapping[int, Sequence[LocalShard]],
    sizes: Mapping[int, Sequence[int]],
    group: Sequence[int],
) -> Verdict:
    """Whether ``init_from_local_shards`` succeeds; ``inputs`` and ``sizes`` are keyed by the
    global ranks of ``group``.

    Check order: each rank's own shards in group order (ST-VALID-9, 10, 8), then agreement
    (ST-VALID-6: one size, one set of properties over all local tensors), then the layout
    checks on the concatenated metadata (see ``layout_verdict``)."""
    for rank in group:
        if not (v := _own_shards_verdict(rank, inputs.get(rank, ()))).ok:
            return v
    # ST-VALID-6
    tensors = [s.tensor for rank in group for s in inputs.get(rank, ())]
    if len({tuple(sizes[r]) for r in group}) > 1 or len({t.properties() for t in tensors}) > 1:
        return value_error("ST-VALID-6")
    meta = init_from_local_shards_metadata(inputs, sizes[group[0]], group)
    return layout_verdict(meta, group)


def init_with_global_metadata_verdict(
    inputs: Mapping[int, Sequence[LocalShard]],
    metadata: Mapping[int, TensorMeta],
    group: Sequence[int],
) -> Verdict:
    """Whether ``init_from_local_shards_and_global_metadata`` succeeds (ST-LIFE-14); both
    mappings are keyed by the global ranks of ``group``.

    Check order: ST-VALID-7 (one metadata), the layout checks (see ``layout_verdict``), then per
    rank in group order ST-VALID-9, 10, ST-VALID-11 (exactly this rank's entries, in order),
    ST-VALID-8 (size, device and the properties dtype, layout, requires_grad, pin_memory)."""
    # ST-VALID-7
    if len({metadata[r] for r in group}) > 1:
        return value_error("ST-VALID-7")
    meta = metadata[group[0]]
    if not (v := layout_verdict(meta, group)).ok:
        return v
    p = meta.properties
    wanted = (p.dtype, p.layout, p.requires_grad, p.pin_memory)
    for rank in group:
        shards = inputs.get(rank, ())
        if not (v := _own_shards_verdict(rank, shards)).ok:
            return v
        # ST-VALID-11
        if [s.meta for s in shards] != [m for m in meta.shards if m.rank == rank]:
            return value_error("ST-VALID-11")
        # ST-VALID-8
        if any(s.tensor.properties() != wanted for s in shards):
            return value_error("ST-VALID-8")
    return VALID
