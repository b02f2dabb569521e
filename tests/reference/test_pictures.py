"""The spec's pictures are the reference's drawings: the checked-in SVGs are current, every
picture the spec links exists and every picture is linked, and the format is pinned."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import torch
from expecttest import TestCase

from reference import pictures, svg
from reference.dtensor import draw
from reference.dtensor.placements import parse
from reference.sharded_tensor import draw as draw_boxes
from reference.sharded_tensor.metadata import ShardedTensorMetadata, ShardMetadata

SPEC = Path(__file__).resolve().parents[2] / "spec"
LINK = re.compile(r"!\[[^\]]*\]\(pictures/([^)]+)\)")
# The chapters that must show at least one picture beside the rules it illustrates.
ILLUSTRATED = ["tour.md", "dt-layout.md", "st-validation.md", "dt-redistribute.md"]


def test_the_checked_in_pictures_are_current():
    assert pictures.stale() == [], "redraw them with: python -m reference.pictures"


def test_check_names_missing_changed_and_unknown_files_and_write_repairs_them(tmp_path, capsys):
    pictures.write(tmp_path)
    assert pictures.main(["--check", "--folder", str(tmp_path)]) == 0
    (tmp_path / "layout-s0-s1.svg").write_text("<svg/>")
    (tmp_path / "boxes-s0-s1.svg").unlink()
    (tmp_path / "hand-made.svg").write_text("<svg/>")
    assert pictures.main(["--check", "--folder", str(tmp_path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "boxes-s0-s1.svg: missing",
        "layout-s0-s1.svg: out of date",
        "hand-made.svg: not in the catalogue",
        f"redraw them with: python -m reference.pictures --folder {tmp_path}",
    ]
    pictures.write(tmp_path)
    assert pictures.stale(tmp_path) == []
    assert not (tmp_path / "hand-made.svg").exists()


def test_every_linked_picture_exists_and_every_picture_is_linked():
    links = {
        chapter.name: LINK.findall(chapter.read_text()) for chapter in sorted(SPEC.glob("*.md"))
    }
    linked = {name for found in links.values() for name in found}
    on_disk = {path.name for path in (SPEC / "pictures").glob("*.svg")}
    assert linked - on_disk == set(), "linked but not drawn"
    assert on_disk - linked == set(), "drawn but shown nowhere"
    assert [c for c in ILLUSTRATED if not links.get(c)] == [], "chapters without a picture"


def test_every_picture_is_well_formed_svg():
    for name in pictures.PICTURES:
        root = ET.fromstring(pictures.render(name))
        assert root.tag == "{http://www.w3.org/2000/svg}svg", name


def test_text_and_svg_draw_the_same_blocks(capsys):
    shape, mesh, placements = (5, 3), (2, 2), parse("R, S(0)")
    text = draw.draw(shape, mesh, placements)
    image = svg.document(draw.picture(shape, mesh, placements))
    for block in draw.blocks(shape, mesh, placements):
        assert block.legend() in text
        assert f">{block.legend()}</text>" in image
    draw.main(["--shape", "5,3", "--mesh", "2,2", "--placements", "R,S(0)", "--svg"])
    assert capsys.readouterr().out == image


class TestGolden(TestCase):
    def test_a_small_layout_as_svg(self):
        self.assertExpectedInline(
            svg.document(draw.picture((2,), (2,), parse("S(0)"))),
            """\
<svg xmlns="http://www.w3.org/2000/svg" width="260" height="122" viewBox="0 0 260 122" font-family="monospace" font-size="12" xml:space="preserve">
<rect width="260" height="122" fill="#ffffff"/>
<g transform="translate(10,10)">
<g transform="translate(0,0)">
<text x="0" y="13" text-anchor="start">global (2,), mesh (2,), [S(0)]</text>
</g>
<g transform="translate(0,28)">
<rect x="0" y="0" width="28" height="28" fill="#8dd3c7" stroke="#999999"/>
<text x="14" y="18" text-anchor="middle">A</text>
<rect x="28" y="0" width="28" height="28" fill="#ffffb3" stroke="#999999"/>
<text x="42" y="18" text-anchor="middle">B</text>
</g>
<g transform="translate(0,66)">
<rect x="0" y="3" width="12" height="12" fill="#8dd3c7" stroke="#333333"/>
<text x="18" y="13" text-anchor="start">A: [0:1] at (0,) rank 0</text>
<rect x="0" y="21" width="12" height="12" fill="#ffffb3" stroke="#333333"/>
<text x="18" y="31" text-anchor="start">B: [1:2] at (1,) rank 1</text>
</g>
</g>
</svg>
""",
        )

    def test_boxes_label_overlaps_and_gaps(self):
        metadata = ShardedTensorMetadata(
            [ShardMetadata([0], [2], "rank:0/cpu"), ShardMetadata([1], [1], "rank:1/cpu")],
            torch.Size([4]),
        )
        self.assertExpectedInline(str(draw_boxes.cover(metadata)), """[[(0,), (0, 1), (), ()]]""")
