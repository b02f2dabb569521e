"""A picture of a layout: which coordinate holds which block of the global tensor.

    python -m reference.dtensor.draw --shape 5,3 --mesh 2,2 --placements "S(0),S(1)"

Each distinct block gets a letter; the grid shows the letter at every element of a 1-d or 2-d
global tensor, and the legend lists each letter's coordinates (ranks), boxes or index lists.
Coordinates that hold the same block (replicas, or ``P`` partial values) share a letter.
"""

from __future__ import annotations

import argparse
import itertools
import string
from collections.abc import Sequence

from reference.dtensor.layout import index_sequences, is_interval
from reference.dtensor.placements import Partial, Placement, normalize, parse, show


def draw(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    ranks: Sequence[int] | None = None,
) -> str:
    """The drawing as text; ``ranks`` lists the mesh's ranks row-major (default 0, 1, ...)."""
    placements = normalize(placements, len(global_shape), len(mesh_shape))
    coords = list(itertools.product(*(range(k) for k in mesh_shape)))
    ranks = list(range(len(coords))) if ranks is None else list(ranks)
    blocks: dict[tuple, list[tuple]] = {}
    for coord in coords:
        sequences = index_sequences(global_shape, mesh_shape, placements, coord)
        blocks.setdefault(tuple(tuple(s) for s in sequences), []).append(coord)
    letters = dict(zip(blocks, string.ascii_uppercase + string.ascii_lowercase, strict=False))

    lines = [f"global {tuple(global_shape)}, mesh {tuple(mesh_shape)}, {show(placements)}"]
    if any(isinstance(p, Partial) for p in placements):
        lines.append("P: every holder of a block holds a partial value of it")
    lines += _grid(global_shape, blocks, letters)
    for block, holders in blocks.items():
        where = ", ".join(f"{c} rank {ranks[coords.index(c)]}" for c in holders)
        lines.append(f"{letters[block]}: {_describe(block)} at {where}")
    return "\n".join(lines)


def _grid(global_shape: Sequence[int], blocks: dict, letters: dict) -> list[str]:
    if len(global_shape) not in (1, 2) or 0 in global_shape:
        return []
    rows, cols = (1, global_shape[0]) if len(global_shape) == 1 else global_shape
    grid = [["."] * cols for _ in range(rows)]
    for block in blocks:
        row_ids, col_ids = ((0,), block[0]) if len(global_shape) == 1 else block
        for i in row_ids:
            for j in col_ids:
                grid[i][j] = letters[block]
    return ["  " + " ".join(row) for row in grid]


def _describe(block: tuple[tuple[int, ...], ...]) -> str:
    """``[0:3, 0:2]`` for a box, the index list where a dim is not an interval."""
    if any(len(s) == 0 for s in block):
        return "empty " + "(" + ", ".join(str(len(s)) for s in block) + ")"
    parts = [f"{s[0]}:{s[-1] + 1}" if is_interval(s) else str(list(s)) for s in block]
    return "[" + ", ".join(parts) + "]"


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Draw which coordinate holds which block.")
    parser.add_argument("--shape", required=True, help="global shape, e.g. 5,3")
    parser.add_argument("--mesh", required=True, help="mesh shape, e.g. 2,2")
    parser.add_argument("--placements", required=True, help='e.g. "S(0),S(1)"')
    parser.add_argument("--ranks", help="the mesh's ranks row-major, e.g. 3,1,0,2")
    args = parser.parse_args(argv)
    ranks = _ints(args.ranks) if args.ranks else None
    print(draw(_ints(args.shape), _ints(args.mesh), parse(args.placements), ranks))


if __name__ == "__main__":
    main()
