"""The spec's rule ids, read from spec/, and which conformance tests cite each one.

Rules are found by their heading, ``### PREFIX-N: title`` (spec/README.md). Tests cite rules with
``@pytest.mark.rules("ST-VALID-1", ...)``; citations are read by collecting the suite with pytest,
so a marker applied to a class or module counts as well.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from conformance import paths
from conformance.paths import pytest_isolation

SPEC = paths.data_dir("spec")
SUITE = Path(__file__).resolve().parent / "suite"
UNCOVERED = Path(__file__).resolve().parent / "uncovered.txt"

HEADING = re.compile(r"^### ([A-Z]+(?:-[A-Z]+)*-(\d+)): (.+)$")


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    chapter: str
    line: int

    @property
    def prefix(self) -> str:
        return self.id.rsplit("-", 1)[0]

    @property
    def retired(self) -> bool:
        return self.title.startswith("Retired")


def parse_chapter(path: Path) -> list[Rule]:
    rules = []
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if match := HEADING.match(text):
            rules.append(Rule(match.group(1), match.group(3).strip(), path.name, number))
    return rules


def chapters(spec_dir: Path = SPEC) -> list[Path]:
    """The chapters in the order of the index (spec/README.md), then any it does not list."""
    index = spec_dir / "README.md"
    listed = re.findall(r"^\| \[([\w-]+\.md)\]", index.read_text(), re.M) if index.exists() else []
    others = sorted(p.name for p in spec_dir.glob("*.md") if p.name not in listed)
    return [spec_dir / name for name in [*listed, *others] if (spec_dir / name).exists()]


def load(spec_dir: Path = SPEC) -> list[Rule]:
    """Every rule of the spec in chapter order; refuses duplicate ids and mixed prefixes."""
    rules: list[Rule] = []
    seen: dict[str, Rule] = {}
    for chapter in chapters(spec_dir):
        found = parse_chapter(chapter)
        prefixes = {rule.prefix for rule in found}
        if len(prefixes) > 1:
            raise ValueError(f"{chapter.name} mixes rule prefixes {sorted(prefixes)}")
        for rule in found:
            if rule.id in seen:
                first = seen[rule.id]
                raise ValueError(
                    f"rule {rule.id} is defined twice: {first.chapter}:{first.line} "
                    f"and {rule.chapter}:{rule.line}"
                )
            seen[rule.id] = rule
        rules += found
    return rules


class _CitationCollector:
    def __init__(self) -> None:
        self.citations: dict[str, list[str]] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            for marker in item.iter_markers("rules"):
                for rule_id in marker.args:
                    self.citations.setdefault(rule_id, []).append(item.nodeid)


def citations(paths: Iterable[Path] = (SUITE,)) -> dict[str, list[str]]:
    """Rule id -> node ids of the tests that cite it (collection only, nothing runs)."""
    existing = [str(p) for p in paths if p.exists()]
    if not existing:
        return {}
    collector = _CitationCollector()
    isolated = pytest_isolation(["no:cacheprovider"])
    code = pytest.main(
        [*existing, "--collect-only", "-q", "-p", "conformance.plugin", "-p", "no:cacheprovider",
         *isolated],
        plugins=[collector],
    )  # fmt: skip
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise RuntimeError(f"collecting {existing} failed with exit code {code}")
    return collector.citations


def read_uncovered(path: Path = UNCOVERED) -> set[str]:
    """The rule ids known to have no conformance test yet (a list that may only shrink)."""
    if not path.exists():
        return set()
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {line for line in lines if line}


def report(rules: list[Rule], cited: dict[str, list[str]]) -> str:
    """One line per rule (id, where, tests citing it), then what is uncovered or unknown."""
    width = max((len(rule.id) for rule in rules), default=0)
    lines = []
    for rule in rules:
        tests = cited.get(rule.id, [])
        where = f"{rule.chapter}:{rule.line}"
        lines.append(f"{rule.id:<{width}}  {len(tests):>3} test(s)  {where:<26} {rule.title}")
    known = {rule.id for rule in rules}
    uncovered = [r.id for r in rules if not r.retired and r.id not in cited]
    unknown = sorted(set(cited) - known)
    lines.append("")
    lines.append(f"{len(rules)} rules, {len(rules) - len(uncovered)} cited by a test")
    if uncovered:
        lines.append(f"uncovered ({len(uncovered)}): {' '.join(uncovered)}")
    if unknown:
        lines.append(f"cited but not in the spec ({len(unknown)}): {' '.join(unknown)}")
    return "\n".join(lines)
