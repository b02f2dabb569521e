"""The checks of spec/st-validation.md that one rank makes alone.

They are pure functions of the metadata, a rank's local tensors and the group's members, so every
rank that runs them on the same input reaches the same answer, and ``reference/verdict.py`` makes
every rank raise when one fails. The checks that compare ranks (ST-VALID-6, 7) or that judge the
shards a rank passes to a constructor of ``from_local.py`` (10, 11) live there, beside the
arguments they judge.

Rules and where they live:

- ST-VALID-1: ``overlaps``, ``find_overlap``
- ST-VALID-2, ST-VALID-3, ST-VALID-4, ST-VALID-5, ST-VALID-14: ``check_layout``
- ST-VALID-8, ST-VALID-9: ``check_local_tensor``
- ST-VALID-12, ST-VALID-13: ``check_placements``
- ST-VALID-6, ST-VALID-7, ST-VALID-10, ST-VALID-11: see ``reference.sharded_tensor.from_local``
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence

import torch

from reference.sharded_tensor.metadata import (
    ShardedTensorMetadata,
    ShardMetadata,
    TensorProperties,
)


def overlaps(a: ShardMetadata, b: ShardMetadata, dims: Sequence[int]) -> bool:
    """ST-VALID-1: boxes overlap iff ``max(o, o') < min(o + s, o' + s')`` along every dim.

    An empty box overlaps nothing, since some dim has ``o + s == o`` and the test fails there.
    """
    return all(
        max(a.shard_offsets[d], b.shard_offsets[d])
        < min(a.shard_offsets[d] + a.shard_sizes[d], b.shard_offsets[d] + b.shard_sizes[d])
        for d in dims
    )


def find_overlap(shards: Sequence[ShardMetadata]) -> tuple[int, int] | None:
    """The indices of two overlapping shards, or None: a sweep in O(n log n) for layouts split
    along one or two dims (every chunk and grid layout).

    Boxes are visited in order of their start along the first dim that varies; ``crossing`` holds
    the boxes the sweep line is inside of, sorted by their start along the second varying dim.
    Crossing boxes share the sweep line, so if they do not overlap they are disjoint along the
    remaining dims; with one remaining dim they are disjoint intervals, and only the nearest
    one starting before the new box ends can overlap it. With three or more varying dims every
    crossing box that starts before the new one ends is a candidate.
    """
    # ST-VALID-1: an empty box overlaps nothing, so it takes no part.
    boxes = [i for i, s in enumerate(shards) if s.volume > 0]
    if len(boxes) < 2:
        return None
    ndim = shards[boxes[0]].ndim

    def span(i: int, d: int) -> tuple[int, int]:
        return shards[i].shard_offsets[d], shards[i].shard_offsets[d] + shards[i].shard_sizes[d]

    # Dims along which every box has the same span are shared by all: they cannot separate boxes.
    varying = [d for d in range(ndim) if len({span(i, d) for i in boxes}) > 1]
    if not varying:
        return boxes[0], boxes[1]  # identical non-empty boxes
    sweep, rest = varying[0], varying[1:]
    key = (lambda i: span(i, rest[0])) if rest else (lambda i: (0, 1))
    crossing: list[tuple[int, int, int]] = []  # (start, stop) along rest[0], then the index
    leaving: list[tuple[int, tuple[int, int, int]]] = []  # heap of (stop along sweep, entry)
    for i in sorted(boxes, key=lambda i: span(i, sweep)):
        start, _ = span(i, sweep)
        while leaving and leaving[0][0] <= start:
            _, entry = heapq.heappop(leaving)
            del crossing[bisect.bisect_left(crossing, entry)]
        lo, hi = key(i)
        for j in range(bisect.bisect_left(crossing, (hi,)) - 1, -1, -1):
            other = crossing[j][2]
            if overlaps(shards[i], shards[other], rest):
                return other, i
            if len(rest) == 1:
                break
        entry = (lo, hi, i)
        bisect.insort(crossing, entry)
        heapq.heappush(leaving, (span(i, sweep)[1], entry))
    return None


def check_layout(metadata: ShardedTensorMetadata) -> None:
    """Raise ValueError unless the shards tile the global size (ST-VALID-2 to 5, 14)."""
    shards, size = metadata.shards_metadata, metadata.size
    # ST-VALID-14: at least one shard.
    if not shards:
        raise ValueError(f"[ST-VALID-14] a layout needs at least one shard (size {list(size)})")
    for index, shard in enumerate(shards):
        # ST-VALID-5: one offset and one size per dim of the tensor.
        if shard.ndim != len(size):
            raise ValueError(
                f"[ST-VALID-5] shard {index} has {shard.ndim} dims, the tensor {len(size)}: {shard}"
            )
        # ST-VALID-3: in bounds, empty shards included.
        for d, (offset, length) in enumerate(
            zip(shard.shard_offsets, shard.shard_sizes, strict=True)
        ):
            if offset + length > size[d]:
                raise ValueError(
                    f"[ST-VALID-3] shard {index} ends at {offset + length} along dim {d}, "
                    f"beyond size {size[d]}: {shard}"
                )
    # ST-VALID-2: no two shards overlap.
    pair = find_overlap(shards)
    if pair is not None:
        a, b = pair
        raise ValueError(f"[ST-VALID-2] shards {a} and {b} overlap: {shards[a]} and {shards[b]}")
    # ST-VALID-4: the volumes add up to the tensor's, so (with 2 and 3) the shards tile it.
    volume = sum(shard.volume for shard in shards)
    if volume != math.prod(size):
        raise ValueError(
            f"[ST-VALID-4] the shards hold {volume} elements, the tensor {math.prod(size)}"
        )


def check_placements(shards: Sequence[ShardMetadata], members: Sequence[int]) -> None:
    """Every placement names a rank of the group (ST-VALID-12, 13)."""
    member_set = set(members)
    for index, shard in enumerate(shards):
        placement = shard.placement
        # ST-VALID-13: a worker name is valid but needs RPC, which this reference leaves out.
        if placement is not None and placement.worker_name() is not None:
            raise NotImplementedError(
                f"[ST-VALID-13] shard {index} is placed on RPC worker {placement.worker_name()!r}"
            )
        # ST-VALID-13: every shard has a rank.
        if placement is None or placement.rank() is None:
            raise ValueError(f"[ST-VALID-13] shard {index} has no rank: {shard}")
        # ST-VALID-12: placement ranks are global ranks of group members.
        if placement.rank() not in member_set:
            raise ValueError(
                f"[ST-VALID-12] shard {index} is placed on global rank {placement.rank()}, "
                f"not a member of the group {list(members)}"
            )


def check_local_tensor(
    tensor: torch.Tensor, shard: ShardMetadata, props: TensorProperties | None
) -> None:
    """A local tensor matches its shard's box and device, and the tensor properties where they
    are given (ST-VALID-8, 9). Without given properties (``init_from_local_shards``), local
    tensors are compared with one another instead (ST-VALID-6)."""
    # ST-VALID-8: size and device as the shard says; dtype, layout, requires_grad and pinning
    # as the given properties say.
    expected = {
        "size": (list(tensor.shape), shard.shard_sizes),
        "device": (tensor.device, shard.placement.device()),
    }
    if props is not None:
        expected |= {
            "dtype": (tensor.dtype, props.dtype),
            "layout": (tensor.layout, props.layout),
            "requires_grad": (tensor.requires_grad, props.requires_grad),
            "pin_memory": (tensor.is_pinned(), props.pin_memory),
        }
    for name, (got, want) in expected.items():
        if got != want:
            raise ValueError(
                f"[ST-VALID-8] local tensor has {name} {got}, expected {want}: {shard}"
            )
    # ST-VALID-9: contiguous, the only memory format kept.
    if not tensor.is_contiguous():
        raise ValueError(f"[ST-VALID-9] local tensor for {shard} is not contiguous")
