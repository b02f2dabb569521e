"""The run's report of edge classes (``conformance.edges``): what each test drew, and with
``--require-edges``, an error of the suite for every declared class that no example drew."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest

from conformance import edges
from conformance.world import harness


def families_of(item: pytest.Item) -> list[str]:
    declared = [family for marker in item.iter_markers("edges") for family in marker.args]
    unknown = sorted(set(declared) - set(edges.FAMILIES))
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: unknown edge families {unknown}")
    return declared


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Count the classes this test draws; put them on its report (they cross xdist there)."""
    families = families_of(item)
    edges.DRAWN.clear()
    yield
    if families or edges.DRAWN:
        item.user_properties.append(("edge_families", ",".join(families)))
        item.user_properties.append(("edges_drawn", json.dumps(dict(edges.DRAWN))))


class EdgeResults:
    """Folds the reports' edge counts per test; reports them and the classes never drawn."""

    def __init__(self, required: bool, max_ranks: int) -> None:
        self.required = required
        self.max_ranks = max_ranks  # the largest world the run has: classes beyond it are moot
        self.families: dict[str, list[str]] = {}
        self.drawn: dict[str, Counter[str]] = {}
        self.volume: Counter[str] = Counter()  # examples of the properties at volume

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        if report.when != "call":
            return
        if "volume_examples" in properties:
            self.volume[report.nodeid.split("[")[0]] += int(properties["volume_examples"])
        if "edges_drawn" not in properties:
            return
        base = report.nodeid.split("[")[0]
        self.families[base] = [f for f in properties["edge_families"].split(",") if f]
        self.drawn.setdefault(base, Counter()).update(json.loads(properties["edges_drawn"]))

    def missing(self) -> dict[str, list[str]]:
        """Per test, the declared classes no example drew."""
        found = {
            test: edges.never_drawn(families, self.drawn[test], self.max_ranks)
            for test, families in self.families.items()
        }
        return {test: labels for test, labels in found.items() if labels}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.required and self.missing() and session.exitstatus in (0, 1):
            session.exitstatus = harness.EXIT_CODE

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.volume:
            terminalreporter.section("shardspec: properties at volume (examples run)")
            for test, n in sorted(self.volume.items()):
                terminalreporter.write_line(f"{test}: {n}")
            total = sum(self.volume.values())
            terminalreporter.write_line(f"shardspec: {total} examples of properties at volume")
        if not self.drawn:
            return
        terminalreporter.section("shardspec: edge classes drawn")
        for test in sorted(self.drawn):
            counts = ", ".join(f"{label} {n}" for label, n in sorted(self.drawn[test].items()))
            terminalreporter.write_line(f"{test}: {counts}")
        for test, labels in sorted(self.missing().items()):
            terminalreporter.write_line(f"shardspec: {test} never drew: {'; '.join(labels)}")
