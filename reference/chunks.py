"""The one split rule both families share (spec/vocabulary.md, ``chunk_bounds``).

Kept apart from either family because ``ShardedTensor``'s ``ChunkShardingSpec`` and ``DTensor``'s
``Shard`` must agree: a tensor chunked by one is chunked by the other.

Rules and where they live:

- ST-SPEC-2, ST-SPEC-3, ST-SPEC-4, DT-LAYOUT-2, DT-LAYOUT-3: ``chunk_bounds``
"""

from __future__ import annotations


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def chunk_bounds(length: int, parts: int, index: int) -> tuple[int, int]:
    """Half-open ``[start, stop)`` of chunk ``index`` when ``length`` is split into ``parts``.

    This is ``torch.chunk``'s rule: every chunk but the trailing ones has ``ceil(length/parts)``
    elements, so trailing chunks may be empty even when ``length >= parts`` (5 over 4 gives
    2, 2, 1, 0), and an empty chunk starts at ``length``, never beyond it (ST-SPEC-2).
    """
    size = ceil_div(length, parts)
    return min(length, index * size), min(length, (index + 1) * size)
