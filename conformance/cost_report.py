"""The run's report of what its worlds cost (``conformance.world.costs``): each test's spending
travels on its report (across xdist), and the run prints the sum."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from conformance.world.costs import COSTS, Costs


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    before = COSTS.to_json()
    yield
    item.user_properties.append(("world_costs", json.dumps(COSTS.since(before))))


class CostResults:
    """Sums the tests' spending; prints it at the end of the run."""

    def __init__(self) -> None:
        self.total = Costs()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        if report.when == "call" and "world_costs" in properties:
            self.total.add(json.loads(properties["world_costs"]))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.total.cases:
            return
        terminalreporter.section("shardspec: what the worlds cost")
        for line in self.total.lines():
            terminalreporter.write_line(line)
