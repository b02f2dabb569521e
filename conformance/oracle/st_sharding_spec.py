"""Sharding specs (spec/st-sharding-spec.md): the layout a spec builds from a global size.

Models ST-SPEC-1 to ST-SPEC-12. A chunk spec is ``{"dim": 0, "placements": [...]}``, an
enumerable spec ``{"shards": [...]}``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from conformance.oracle.st_metadata import (
    Properties,
    ShardMeta,
    TensorMeta,
    parse_remote_device,
    shard_metadata_verdict,
)
from conformance.oracle.st_validation import overlap, tiling_verdict
from conformance.oracle.vocabulary import (
    VALID,
    Verdict,
    chunk_bounds,
    is_int,
    normdim,
    type_error,
    value_error,
)


@dataclass(frozen=True)
class ChunkSpec:
    dim: int
    placements: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "placements", tuple(self.placements))

    def to_json(self) -> dict[str, Any]:
        return {"dim": self.dim, "placements": list(self.placements)}


@dataclass(frozen=True)
class EnumerableSpec:
    shards: tuple[ShardMeta, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shards", tuple(self.shards))

    def to_json(self) -> dict[str, Any]:
        return {"shards": [s.to_json() for s in self.shards]}


Spec = ChunkSpec | EnumerableSpec


def spec_from_json(data: dict[str, Any]) -> Spec:
    if "shards" in data:
        return EnumerableSpec(tuple(ShardMeta.from_json(s) for s in data["shards"]))
    return ChunkSpec(data["dim"], tuple(data["placements"]))


def chunk_spec_verdict(dim: Any, placements: Sequence[Any]) -> Verdict:
    """Whether ``ChunkShardingSpec(dim, placements)`` may be constructed from raw values.

    Check order: ST-SPEC-7 (``dim`` an int, not a bool), ST-SPEC-8 (placements non-empty),
    ST-META-5 (each placement string parses)."""
    # ST-SPEC-7
    if not is_int(dim):
        return type_error("ST-SPEC-7")
    # ST-SPEC-8
    if not placements:
        return value_error("ST-SPEC-8")
    for p in placements:
        if not (v := shard_metadata_verdict([], [], p)).ok:
            return v
    return VALID


def enumerable_spec_verdict(shards: Sequence[ShardMeta]) -> Verdict:
    """Whether ``EnumerableShardingSpec(shards)`` may be constructed: non-empty, one ndim, no
    overlap (ST-SPEC-11, with ST-VALID-1's overlap)."""
    # ST-SPEC-11
    if not shards or len({s.ndim for s in shards}) > 1:
        return value_error("ST-SPEC-11")
    if any(overlap(a, b) for a, b in itertools.combinations(shards, 2)):
        return value_error("ST-SPEC-11")
    return VALID


def build_metadata_verdict(spec: Spec, size: Sequence[int]) -> Verdict:
    """Whether ``spec.build_metadata(size, props)`` succeeds for a constructed spec.

    Chunk: ST-SPEC-6 (``dim`` in ``[-n, n)``). Enumerable: the shards must tile ``size``
    (ST-SPEC-12), reported by the ST-VALID rule that fails (5, 3, 4, in that order; 14 and 2
    cannot fail after ST-SPEC-11). Neither checks placements: ST-VALID-12 and 13 belong to the
    operations that build a sharded tensor."""
    if isinstance(spec, ChunkSpec):
        # ST-SPEC-6
        return VALID if -len(size) <= spec.dim < len(size) else value_error("ST-SPEC-6")
    # ST-SPEC-12
    return tiling_verdict(TensorMeta(spec.shards, tuple(size)))


def chunk_shards(size: Sequence[int], spec: ChunkSpec) -> tuple[ShardMeta, ...]:
    """Chunk ``c`` of ``chunk_bounds(S[d], k, c)`` along ``d``, whole elsewhere, placed at
    ``placements[c]`` (ST-SPEC-1, 3, 4, 5); an empty chunk starts at ``S[d]`` (ST-SPEC-2)."""
    d, k = normdim(spec.dim, len(size)), len(spec.placements)
    shards = []
    for c, placement in enumerate(spec.placements):
        lo, hi = chunk_bounds(size[d], k, c)
        offsets = tuple(lo if i == d else 0 for i in range(len(size)))
        sizes = tuple(hi - lo if i == d else n for i, n in enumerate(size))
        shards.append(ShardMeta(offsets, sizes, placement))
    return tuple(shards)


def build_metadata(spec: Spec, size: Sequence[int], props: Properties | None = None) -> TensorMeta:
    """``spec.build_metadata(size, props)`` for a valid case (ST-SPEC-1, 10, 12): the chunk
    layout, or the enumerable shards in their given order."""
    shards = chunk_shards(size, spec) if isinstance(spec, ChunkSpec) else spec.shards
    return TensorMeta(shards, tuple(size), props or Properties())


def placement_ranks(spec: Spec) -> list[int | None]:
    """The rank of every placement of a spec, in order."""
    if isinstance(spec, ChunkSpec):
        return [parse_remote_device(p).rank for p in spec.placements]
    return [s.rank for s in spec.shards]
