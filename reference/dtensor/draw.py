"""A picture of a layout: which coordinate holds which block of the global tensor.

    python -m reference.dtensor.draw --shape 5,3 --mesh 2,2 --placements "S(0),S(1)" [--svg]

Each distinct block gets a letter; the grid shows the letter at every element of a 1-d or 2-d
global tensor, and the legend lists each letter's coordinates (ranks), boxes or index lists.
Coordinates that hold the same block (replicas, or ``P`` partial values) share a letter. The
text and the SVG (spec/pictures/, ``python -m reference.pictures``) are two renderings of one
computation, ``blocks``, so they cannot disagree.
"""

from __future__ import annotations

import argparse
import itertools
import string
from collections.abc import Sequence
from dataclasses import dataclass

from reference import svg
from reference.dtensor.layout import index_sequences, is_interval
from reference.dtensor.placements import Partial, Placement, normalize, parse, show
from reference.dtensor.redistribute import plan

LETTERS = string.ascii_uppercase + string.ascii_lowercase


@dataclass(frozen=True)
class Block:
    """One distinct part of the global tensor and every coordinate that holds it."""

    number: int
    indices: tuple[tuple[int, ...], ...]
    holders: tuple[tuple[tuple[int, ...], int], ...]  # (coordinate, rank)

    @property
    def letter(self) -> str:
        return LETTERS[self.number % len(LETTERS)]

    def legend(self) -> str:
        where = ", ".join(f"{coord} rank {rank}" for coord, rank in self.holders)
        return f"{self.letter}: {_describe(self.indices)} at {where}"


def blocks(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    ranks: Sequence[int] | None = None,
) -> list[Block]:
    """The blocks in order of their first holder (row-major coordinates), from the layout."""
    coords = list(itertools.product(*(range(k) for k in mesh_shape)))
    ranks = list(range(len(coords))) if ranks is None else list(ranks)
    holders: dict[tuple, list] = {}
    for coord, rank in zip(coords, ranks, strict=True):
        sequences = index_sequences(global_shape, mesh_shape, placements, coord)
        holders.setdefault(tuple(tuple(s) for s in sequences), []).append((coord, rank))
    return [Block(n, indices, tuple(h)) for n, (indices, h) in enumerate(holders.items())]


def grid(global_shape: Sequence[int], found: Sequence[Block]) -> list[list[Block | None]]:
    """The block at every element of a 1-d (one row) or 2-d tensor; no rows otherwise."""
    if len(global_shape) not in (1, 2) or 0 in global_shape:
        return []
    rows, cols = (1, global_shape[0]) if len(global_shape) == 1 else global_shape
    cells: list[list[Block | None]] = [[None] * cols for _ in range(rows)]
    for block in found:
        row_ids, col_ids = ((0,), block.indices[0]) if len(global_shape) == 1 else block.indices
        for i in row_ids:
            for j in col_ids:
                cells[i][j] = block
    return cells


def _header(
    global_shape: Sequence[int], mesh_shape: Sequence[int], placements: Sequence[Placement]
) -> list[str]:
    lines = [f"global {tuple(global_shape)}, mesh {tuple(mesh_shape)}, {show(placements)}"]
    if any(isinstance(p, Partial) for p in placements):
        lines.append("P: every holder of a block holds a partial value of it")
    return lines


def draw(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    ranks: Sequence[int] | None = None,
) -> str:
    """The drawing as text; ``ranks`` lists the mesh's ranks row-major (default 0, 1, ...)."""
    placements = normalize(placements, len(global_shape), len(mesh_shape))
    found = blocks(global_shape, mesh_shape, placements, ranks)
    rows = [
        "  " + " ".join("." if b is None else b.letter for b in row)
        for row in grid(global_shape, found)
    ]
    legend = [block.legend() for block in found]
    return "\n".join(_header(global_shape, mesh_shape, placements) + rows + legend)


def picture(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    ranks: Sequence[int] | None = None,
) -> svg.Picture:
    """The same drawing as ``draw``, in colour: one fill per block."""
    placements = normalize(placements, len(global_shape), len(mesh_shape))
    found = blocks(global_shape, mesh_shape, placements, ranks)
    cells = [[_cell(block) for block in row] for row in grid(global_shape, found)]
    parts = [svg.lines(_header(global_shape, mesh_shape, placements))]
    if cells:
        parts.append(svg.grid(cells))
    parts.append(svg.legend([(svg.colour(b.number), b.legend()) for b in found]))
    return svg.stack(parts)


def _cell(block: Block | None) -> svg.Cell:
    if block is None:
        return svg.Cell(".", svg.EMPTY)
    return svg.Cell(block.letter, svg.colour(block.number))


def redistribute_picture(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    source: Sequence[Placement],
    target: Sequence[Placement],
    ranks: Sequence[int] | None = None,
) -> svg.Picture:
    """The layouts before and after a redistribution, side by side, over the plan's steps."""
    source = normalize(source, len(global_shape), len(mesh_shape))
    target = normalize(target, len(global_shape), len(mesh_shape))
    layouts = svg.beside(
        [picture(global_shape, mesh_shape, placements, ranks) for placements in (source, target)]
    )
    return svg.stack([layouts, svg.lines(str(plan(source, target)).splitlines())])


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
    parser.add_argument("--svg", action="store_true", help="print an SVG instead of text")
    args = parser.parse_args(argv)
    shape, mesh, placements = _ints(args.shape), _ints(args.mesh), parse(args.placements)
    ranks = _ints(args.ranks) if args.ranks else None
    if args.svg:
        print(svg.document(picture(shape, mesh, placements, ranks)), end="")
    else:
        print(draw(shape, mesh, placements, ranks))


if __name__ == "__main__":
    main()
