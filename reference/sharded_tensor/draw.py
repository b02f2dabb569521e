"""A picture of ShardedTensor metadata: its boxes on the global tensor, valid or not.

Every element is labelled with the shards whose box covers it, so the picture shows what the
layout checks (spec/st-validation.md) reject: an element under two boxes is an overlap
(ST-VALID-2), an element under none a gap (ST-VALID-4). It draws what the metadata says and
judges nothing; ``validation.check_layout`` does that.
"""

from __future__ import annotations

from reference import svg
from reference.sharded_tensor.metadata import ShardedTensorMetadata, ShardMetadata


def cover(metadata: ShardedTensorMetadata) -> list[list[tuple[int, ...]]]:
    """The indices of the shards covering every element of a 1-d (one row) or 2-d tensor."""
    size = list(metadata.size)
    if len(size) not in (1, 2):
        return []
    rows, cols = (1, size[0]) if len(size) == 1 else size
    cells: list[list[tuple[int, ...]]] = [[()] * cols for _ in range(rows)]
    for index, shard in enumerate(metadata.shards_metadata):
        box = _outline(shard, len(size))
        for i in range(box.row, min(rows, box.row + box.rows)):
            for j in range(box.col, min(cols, box.col + box.cols)):
                cells[i][j] += (index,)
    return cells


def _outline(shard: ShardMetadata, ndim: int) -> svg.Outline:
    """The box in grid cells; a 1-d box is one row high."""
    if ndim == 1:
        return svg.Outline(0, shard.shard_offsets[0], 1, shard.shard_sizes[0])
    return svg.Outline(*shard.shard_offsets, *shard.shard_sizes)


def _cell(holders: tuple[int, ...]) -> svg.Cell:
    if not holders:
        return svg.Cell(".", svg.EMPTY)
    fill = svg.colour(holders[0]) if len(holders) == 1 else svg.ALARM
    return svg.Cell(",".join(map(str, holders)), fill)


def picture(metadata: ShardedTensorMetadata) -> svg.Picture:
    """The boxes of ``metadata`` outlined over its elements (1-d and 2-d tensors), and a legend
    of their placements, with overlaps and gaps named where there are any."""
    shards, ndim = metadata.shards_metadata, len(metadata.size)
    cells = cover(metadata)
    covered = [holders for row in cells for holders in row]
    entries = [
        (svg.colour(n), f"{n}: offsets {s.shard_offsets}, sizes {s.shard_sizes}, {s.placement}")
        for n, s in enumerate(shards)
    ]
    if any(len(holders) > 1 for holders in covered):
        entries.append((svg.ALARM, "in two boxes or more: an overlap"))
    if any(not holders for holders in covered):
        entries.append((svg.EMPTY, "in no box: a gap"))
    parts = [svg.lines([f"size {tuple(metadata.size)}, {len(shards)} shards"])]
    if covered:
        grid = [[_cell(holders) for holders in row] for row in cells]
        parts.append(svg.grid(grid, [_outline(s, ndim) for s in shards if s.volume]))
    parts.append(svg.legend(entries))
    return svg.stack(parts)
