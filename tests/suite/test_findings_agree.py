"""The known failures of each release, the finding records and the spec's "PyTorch 2.13" notes
tell one story: every rule a known-failures file lists is broken by a record in that release,
each entry's comment names those records (``finding:``), and a spec note says "Deviates" exactly
where a record deviates on 2.13.0."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance import known_failures, rules
from conformance.findings import records, triage
from conformance.findings.verdict import UMBRELLA

ROOT = Path(__file__).resolve().parents[2]
XFAILS = sorted((ROOT / "conformance" / "xfails" / "torch").glob("*.txt"))
SILENT = "silent wrong value"
COUNTS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
COUNT = re.compile(rf"\b({'|'.join(COUNTS)})\b(?!-)")  # "one-element" counts nothing


def broken_in(release: str) -> dict[str, set[str]]:
    """Each rule to the ids of the records that deviate on it in ``release``."""
    found: dict[str, set[str]] = {}
    for record in records.load_all():
        for rule in record.breaks(record.recorded_for(release)):
            found.setdefault(rule, set()).add(record.id)
    return found


def silent_in(release: str) -> dict[str, set[str]]:
    """Each rule to the ids of the records that break it in ``release`` with wrong data and no
    error on any rank (a malformed output too, as its outcomes show it): the deviations a
    reader of the spec must not miss."""
    found: dict[str, set[str]] = {}
    for record in records.load_all():
        recorded = record.recorded_for(release)
        if record.deviates(recorded) and triage.shown_severity(record, recorded) == SILENT:
            for rule in record.breaks(recorded):
                found.setdefault(rule, set()).add(record.id)
    return found


@pytest.mark.parametrize("path", XFAILS, ids=lambda p: p.stem)
def test_every_known_failing_rule_is_broken_by_a_record_its_comment_names(path):
    broken = broken_in(path.stem)
    known = {r.id for r in records.load_all()}
    wrong = []
    for entry in known_failures.parse(path):
        named = set(entry.findings)
        wrong += [f"{entry.test_id}: no record {i!r}" for i in sorted(named - known)]
        for rule in sorted(set(entry.rules) - UMBRELLA):
            if not broken.get(rule, set()) & named:
                wrong.append(
                    f"{entry.test_id}: {rule}: its comment names no record that breaks it in "
                    f"{path.stem} (records that do: {sorted(broken.get(rule, ())) or 'none'})"
                )
    assert wrong == []


def pytorch_notes() -> dict[str, str]:
    """Each rule's "**PyTorch 2.13.**" paragraph in the spec."""
    notes = {}
    for rule in rules.load():
        text = (ROOT / "spec" / rule.chapter).read_text()
        section = text.split(f"### {rule.id}:", 1)[1].split("\n### ", 1)[0]
        note = re.search(r"\*\*PyTorch 2\.13\.\*\*(.*?)(?:\n\n|$)", section, re.DOTALL)
        notes[rule.id] = note.group(1).strip() if note else ""
    return notes


def test_a_spec_note_deviates_exactly_where_a_record_deviates_on_2_13():
    """A note that says "Deviates" has its case as data (a record that deviates on 2.13.0), and
    a rule a record breaks on 2.13.0 has a note that says so."""
    notes, broken = pytorch_notes(), broken_in("2.13.0")
    spec_rules = {r.id for r in rules.load()}
    unbacked = [
        r for r, n in notes.items()
        if re.search(r"\bDeviates\b", n) and r not in broken and r not in UMBRELLA
    ]  # fmt: skip
    unsaid = [
        r for r in sorted(set(broken) & spec_rules - UMBRELLA)
        if not re.search(r"deviat", notes[r], re.IGNORECASE)
    ]  # fmt: skip
    assert (sorted(unbacked), unsaid) == ([], [])


def test_every_record_id_the_spec_cites_is_a_record():
    """The spec names PyTorch's behaviours by record id in backticks (three or more hyphenated
    words, as ids are); a renamed or never-written record leaves a reader nothing to replay."""
    known = {r.id for r in records.load_all()}
    cited = {
        (path.name, m)
        for path in sorted((ROOT / "spec").glob("*.md"))
        for m in re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+){2,})`", path.read_text())
    }
    assert sorted((name, i) for name, i in cited if i not in known) == []


def test_a_spec_note_cites_every_record_that_silently_deviates_on_2_13():
    """A silent wrong value is what a reader of a rule must learn from its note: each record of
    one, on 2.13.0, is cited there by id (and so replayable from the spec)."""
    notes = pytorch_notes()
    uncited = [
        (rule, i) for rule, ids in sorted(silent_in("2.13.0").items()) if rule in notes
        for i in sorted(ids) if f"`{i}`" not in notes[rule]
    ]  # fmt: skip
    assert uncited == []


def test_a_spec_note_that_counts_silent_deviations_counts_the_records():
    """A count in a sentence of a note about silent deviations ("four gradients are silently
    wrong") is the number of that rule's records of silent wrong data on 2.13.0."""
    notes, silent = pytorch_notes(), silent_in("2.13.0")
    wrong = []
    for rule, note in notes.items():
        prose = re.sub(r"`[^`]*`", "`...`", note)
        for sentence in re.split(r"(?<=[.:;])\s", prose):
            if "silent" not in sentence.lower():
                continue
            for word in COUNT.findall(sentence.lower()):
                counted = COUNTS.index(word) + 1
                if counted != len(silent.get(rule, ())):
                    wrong.append(f"{rule}: {word!r} where its records hold "
                                 f"{sorted(silent.get(rule, ()))}")  # fmt: skip
    assert wrong == []
