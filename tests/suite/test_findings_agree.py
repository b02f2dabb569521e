"""The known failures of PyTorch 2.13.0, FINDINGS.md and the spec's "PyTorch 2.13" notes tell
one story: every rule the known-failures file lists is a finding and a deviation in its spec
note, and every finding is a listed known failure (or one of another release)."""

from __future__ import annotations

import re
from pathlib import Path

from conformance import rules
from conformance.world.protocol import RULE_ID

ROOT = Path(__file__).resolve().parents[2]
XFAILS = ROOT / "conformance" / "xfails" / "torch" / "2.13.0.txt"
FINDINGS = ROOT / "conformance" / "FINDINGS.md"
# The rules of errors.md a failure breaks by how it shows (judge.py): listed beside the rule a
# finding breaks, never findings of their own.
UMBRELLA = {"ERR-1", "ERR-2", "ERR-3", "ERR-6", "ERR-7"}
OTHER_RELEASE = "**2.11.0 only**"


def known_failing() -> set[str]:
    lines = re.findall(r"^    (\S+):", XFAILS.read_text(), re.MULTILINE)
    return {rule for rule in lines if RULE_ID.fullmatch(rule)}


def _ids(cell: str) -> set[str]:
    """Rule ids of a table cell, with shorthand expanded: ``DT-MESH-3/4/5``."""
    found = set()
    for prefix, numbers in re.findall(r"\b([A-Z]+(?:-[A-Z]+)*)-(\d+(?:/\d+)*)", cell):
        found.update(f"{prefix}-{n}" for n in numbers.split("/"))
    return found


def findings() -> tuple[set[str], set[str]]:
    """The rules of FINDINGS.md's finding tables (those before its upstream threads; the ones
    the ci draws do not meet come after): of 2.13.0, and of another release only."""
    tables = FINDINGS.read_text().split("## Upstream threads")[0]
    current, other = set(), set()
    for line in tables.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("rule", "---"):
            continue
        (other if OTHER_RELEASE in cells[2] else current).update(_ids(cells[0]))
    return current, other


def pytorch_notes() -> dict[str, str]:
    """Each rule's "**PyTorch 2.13.**" paragraph in the spec."""
    notes = {}
    for rule in rules.load():
        text = (ROOT / "spec" / rule.chapter).read_text()
        section = text.split(f"### {rule.id}:", 1)[1].split("\n### ", 1)[0]
        note = re.search(r"\*\*PyTorch 2\.13\.\*\*(.*?)(?:\n\n|$)", section, re.DOTALL)
        notes[rule.id] = note.group(1) if note else ""
    return notes


def test_every_known_failing_rule_is_a_finding():
    current, _ = findings()
    assert sorted(known_failing() - UMBRELLA - current) == []


def test_every_finding_is_a_known_failure():
    current, _ = findings()
    assert sorted(current - known_failing()) == []


def test_every_known_failing_rule_deviates_in_its_spec_note():
    notes = pytorch_notes()
    conforming = [r for r in sorted(known_failing()) if not re.search(r"deviat", notes[r], re.I)]
    assert conforming == []
