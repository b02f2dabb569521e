"""Flattening of 2-D nested sharded tensors (spec/st-flatten.md), one state-dict entry at a time.

Models ST-FLAT-2 to ST-FLAT-8 from metadata alone: the outer tensor ``O``, and ``I`` when the
outer local shard's tensor is itself a sharded tensor. ST-FLAT-1, 9 and 10 (structure kept, no
communication, input unchanged) are about the call, not the values, and need no model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from conformance.oracle.st_metadata import Properties, ShardMeta, TensorMeta
from conformance.oracle.vocabulary import VALID, Verdict, value_error

Box = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class Flat:
    """What a rewritten entry ``F`` must be on one rank."""

    size: tuple[int, ...]
    properties: Properties
    local: ShardMeta
    boxes: tuple[Box, ...]  # sorted: the multiset of ST-FLAT-7, every empty box included


def flatten_verdict(outer: TensorMeta, inner: TensorMeta | None, rank: int) -> Verdict:
    """A nested entry whose inner tensor has other than one local shard raises (ST-FLAT-4)."""
    local = [s for s in outer.shards if s.rank == rank]
    if len(local) != 1 or inner is None:
        return VALID
    # ST-FLAT-4
    inner_local = [s for s in inner.shards if s.rank == rank]
    return VALID if len(inner_local) == 1 else value_error("ST-FLAT-4")


def flatten_entry(
    outer: TensorMeta, inner: TensorMeta | None, rank: int, device: str = "cpu"
) -> Literal["dropped", "same"] | Flat:
    """One entry after flattening on ``rank`` (global), for a valid case: ``"dropped"`` without
    a local shard (ST-FLAT-2), ``"same"`` object unless nested with one local shard (ST-FLAT-3),
    else the flat tensor (ST-FLAT-5 to 7)."""
    local = [s for s in outer.shards if s.rank == rank]
    if not local:
        return "dropped"
    if len(local) > 1 or inner is None:
        return "same"
    o = local[0]
    i = next(s for s in inner.shards if s.rank == rank)
    shift = o.offsets

    def moved(s: ShardMeta) -> Box:
        return tuple(a + b for a, b in zip(shift, s.offsets, strict=True)), s.sizes

    mine = ShardMeta(moved(i)[0], i.sizes, f"rank:{rank}/{device}")
    outer_boxes = Counter((s.offsets, s.sizes) for s in outer.shards)
    outer_boxes[(o.offsets, o.sizes)] -= 1
    inner_boxes = Counter(moved(s) for s in inner.shards)
    inner_boxes[moved(i)] -= 1
    every = sorted((outer_boxes + inner_boxes + Counter([(mine.offsets, mine.sizes)])).elements())
    return Flat(outer.size, outer.properties, mine, tuple(every))


def boxes_match(flat: Flat, shards: Sequence[ShardMeta]) -> bool:
    """Whether flattened metadata ``shards`` has the boxes of ST-FLAT-7, in any order: the
    multiset ``flat.boxes``, less any empty boxes but the local one (ST-FLAT-8 checks that)."""
    got = Counter((s.offsets, s.sizes) for s in shards)
    want = Counter(flat.boxes)
    left_out = want - got
    return not got - want and all(0 in sizes for _, sizes in left_out)


def names_match(flat: Flat, shards: Sequence[ShardMeta], rank: int) -> bool:
    """Whether exactly one entry, the local one, names ``rank`` (ST-FLAT-8)."""
    return [s for s in shards if s.rank == rank] == [flat.local]


def matches(flat: Flat, shards: Sequence[ShardMeta], rank: int) -> bool:
    """Whether flattened metadata ``shards`` satisfies ST-FLAT-7 and ST-FLAT-8."""
    return boxes_match(flat, shards) and names_match(flat, shards, rank)
