"""Every picture of the spec, by name, drawn by the reference's own drawing code.

    python -m reference.pictures           # redraw spec/pictures/*.svg
    python -m reference.pictures --check   # exit 1, naming the files that are not current

The pictures are generated, never edited by hand: a picture that a chapter shows is the
reference's reading of that chapter, and ``--check`` (run by tests/reference/test_pictures.py)
keeps the files from drifting when the reference changes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from reference import svg, tour
from reference.dtensor import draw
from reference.dtensor.placements import parse
from reference.sharded_tensor import draw as draw_boxes
from reference.sharded_tensor.metadata import ShardedTensorMetadata, ShardMetadata

FOLDER = Path(__file__).resolve().parent.parent / "spec" / "pictures"


def _rows_overlap() -> ShardedTensorMetadata:
    """ST-VALID-2's example: two ranks' (2, 3) boxes at rows 0 and 1 of a (4, 3) tensor."""
    shards = [ShardMetadata([r, 0], [2, 3], f"rank:{r}/cpu") for r in range(2)]
    return ShardedTensorMetadata(shards, torch.Size([4, 3]))


PICTURES: dict[str, Callable[[], svg.Picture]] = {
    # The tour's tensor (spec/tour.md); its layout is DT-LAYOUT-6's example too.
    "layout-s0-s1": lambda: draw.picture(tour.SHAPE, tour.MESH_SHAPE, tour.SOURCE, tour.RANKS),
    "boxes-s0-s1": lambda: draw_boxes.picture(tour.boxes()),
    "boxes-shifted": lambda: draw_boxes.picture(tour.shifted()),
    "redistribute-s0-s1-to-r-s1": lambda: draw.redistribute_picture(
        tour.SHAPE, tour.MESH_SHAPE, tour.SOURCE, tour.TARGET, tour.RANKS
    ),
    # The chapters' examples.
    "layout-r-s0": lambda: draw.picture((5, 3), (2, 2), parse("R, S(0)")),
    "boxes-rows-overlap": lambda: draw_boxes.picture(_rows_overlap()),
    "redistribute-s0-s0-to-s1-s0": lambda: draw.redistribute_picture(
        (5, 3), (2, 2), parse("S(0), S(0)"), parse("S(1), S(0)")
    ),
}


def render(name: str) -> str:
    """The SVG file of one picture, as text."""
    return svg.document(PICTURES[name]())


def stale(folder: Path = FOLDER) -> list[str]:
    """``file: why`` for every file in ``folder`` that ``write`` would change or remove."""
    found = []
    for name in sorted(PICTURES):
        path = folder / f"{name}.svg"
        if not path.exists():
            found.append(f"{path.name}: missing")
        elif path.read_text() != render(name):
            found.append(f"{path.name}: out of date")
    found += [f"{p.name}: not in the catalogue" for p in _orphans(folder)]
    return found


def _orphans(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.svg") if p.stem not in PICTURES)


def write(folder: Path = FOLDER) -> None:
    """Redraw every picture into ``folder`` and remove the SVGs no picture draws."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in PICTURES:
        (folder / f"{name}.svg").write_text(render(name))
    for orphan in _orphans(folder):
        orphan.unlink()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Redraw the spec's pictures.")
    parser.add_argument("--check", action="store_true", help="only report what is not current")
    parser.add_argument("--folder", type=Path, default=FOLDER, help=f"default {FOLDER}")
    args = parser.parse_args(argv)
    if not args.check:
        write(args.folder)
        return 0
    found = stale(args.folder)
    for line in found:
        print(line)
    if found:
        where = "" if args.folder == FOLDER else f" --folder {args.folder}"
        print(f"redraw them with: python -m reference.pictures{where}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
