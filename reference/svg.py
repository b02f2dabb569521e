"""Hand-written SVG for the spec's pictures: a grid of labelled, coloured cells and a legend.

Pictures are checked in (spec/pictures/) and compared byte for byte with a fresh drawing, so
everything here is deterministic: integer coordinates, a fixed palette, no timestamps, no
dependency beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

CELL = 28  # side of one element of the global tensor, in px
CHAR = 8  # a generous width of one 12px monospace character, to size the canvas
LINE = 18  # height of one line of text
MARGIN = 10

# ColorBrewer Set3 without its red, which marks trouble (``ALARM``).
PALETTE = (
    "#8dd3c7",
    "#ffffb3",
    "#bebada",
    "#80b1d3",
    "#fdb462",
    "#b3de69",
    "#fccde5",
    "#d9d9d9",
    "#bc80bd",
    "#ccebc5",
    "#ffed6f",
)
ALARM = "#fb8072"
EMPTY = "#ffffff"


def colour(index: int) -> str:
    """The fill of the ``index``-th block or shard (the palette repeats past its end)."""
    return PALETTE[index % len(PALETTE)]


@dataclass(frozen=True)
class Cell:
    label: str
    fill: str


@dataclass(frozen=True)
class Outline:
    """A rectangle drawn over the grid: ``rows`` x ``cols`` cells from ``(row, col)``."""

    row: int
    col: int
    rows: int
    cols: int


@dataclass(frozen=True)
class Picture:
    """SVG elements placed from (0, 0), and the size they need; pictures compose by offset."""

    width: int
    height: int
    body: tuple[str, ...]


def _text(x: int, y: int, content: str, anchor: str = "start") -> str:
    return f'<text x="{x}" y="{y}" text-anchor="{anchor}">{escape(content, quote=False)}</text>'


def _rect(x: int, y: int, width: int, height: int, fill: str, stroke: str = "#333333") -> str:
    return (
        f'<rect x="{x}" y="{y}" width="{width}" height="{height}" fill="{fill}" stroke="{stroke}"/>'
    )


def lines(texts: Sequence[str]) -> Picture:
    """Plain lines of text, one under the other."""
    body = tuple(_text(0, LINE * (n + 1) - 5, t) for n, t in enumerate(texts))
    return Picture(max((CHAR * len(t) for t in texts), default=0), LINE * len(texts), body)


def grid(cells: Sequence[Sequence[Cell]], outlines: Sequence[Outline] = ()) -> Picture:
    """One square per element, filled and labelled; outlines drawn over them, unfilled."""
    body = []
    for i, row in enumerate(cells):
        for j, cell in enumerate(row):
            x, y = CELL * j, CELL * i
            body.append(_rect(x, y, CELL, CELL, cell.fill, "#999999"))
            body.append(_text(x + CELL // 2, y + CELL // 2 + 4, cell.label, "middle"))
    for o in outlines:
        body.append(
            f'<rect x="{CELL * o.col}" y="{CELL * o.row}" width="{CELL * o.cols}" '
            f'height="{CELL * o.rows}" fill="none" stroke="#000000" stroke-width="2"/>'
        )
    width = CELL * max((len(row) for row in cells), default=0)
    return Picture(width, CELL * len(cells), tuple(body))


def legend(entries: Sequence[tuple[str, str]]) -> Picture:
    """One line per ``(fill, text)``: a swatch of the fill, then the text."""
    body = []
    for n, (fill, text) in enumerate(entries):
        y = LINE * n
        body.append(_rect(0, y + 3, 12, 12, fill))
        body.append(_text(18, y + 13, text))
    width = max((18 + CHAR * len(text) for _, text in entries), default=0)
    return Picture(width, LINE * len(entries), tuple(body))


def _moved(picture: Picture, x: int, y: int) -> str:
    return "\n".join([f'<g transform="translate({x},{y})">', *picture.body, "</g>"])


def stack(pictures: Sequence[Picture], gap: int = MARGIN) -> Picture:
    """Pictures one under the other, left-aligned."""
    body, y = [], 0
    for picture in pictures:
        body.append(_moved(picture, 0, y))
        y += picture.height + gap
    return Picture(max(p.width for p in pictures), y - gap, tuple(body))


def beside(pictures: Sequence[Picture], gap: int = 3 * MARGIN) -> Picture:
    """Pictures side by side, top-aligned."""
    body, x = [], 0
    for picture in pictures:
        body.append(_moved(picture, x, 0))
        x += picture.width + gap
    return Picture(x - gap, max(p.height for p in pictures), tuple(body))


def document(picture: Picture) -> str:
    """The SVG file: the picture on a white background (readable in dark themes too), with
    spaces kept, so text aligned in columns stays aligned."""
    width, height = picture.width + 2 * MARGIN, picture.height + 2 * MARGIN
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12" '
        f'xml:space="preserve">\n'
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>\n'
        f"{_moved(picture, MARGIN, MARGIN)}\n</svg>\n"
    )
