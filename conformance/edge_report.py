"""The run's report of edge classes (``conformance.edges``): what each test drew, class by class
and pair by pair (``covering``), and with ``--require-edges``, an error of the suite for every
declared class, and every required pair of classes, that no example drew."""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import settings

from conformance import covering, edges, op_cover, pairwise, profiles
from conformance.world import harness

_COVER = pytest.StashKey[list]()
# The largest world of the run (set by the plugin): pairs of classes beyond it are moot.
MAX_RANKS = pytest.StashKey[int]()


def families_of(item: pytest.Item) -> list[str]:
    declared = [family for marker in item.iter_markers("edges") for family in marker.args]
    unknown = sorted(set(declared) - set(edges.FAMILIES))
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: unknown edge families {unknown}")
    return declared


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Once the fixtures are ready, draw the property's covering examples (profiles of
    ``pairwise.POOL``, tests that declare two families or more). Drawing them may end the test
    (a skip: a capability its adapter does not claim), which a new-style wrapper passes on."""
    yield
    families = families_of(item)
    size = pairwise.POOL.get(item.config.getoption("hypothesis_profile", None) or "quick", 0)
    test = getattr(item, "obj", None)
    per_op = item.get_closest_marker("op_cover")
    callspec = getattr(item, "callspec", None)
    if size and per_op and callspec is not None and "op" in callspec.params:
        item.stash[_COVER], _ = op_cover.choose(item, *per_op.args)
    elif size and len(set(families)) > 1 and getattr(test, "is_hypothesis_test", False):
        max_ranks = item.config.stash.get(MAX_RANKS, 1)
        item.stash[_COVER] = pairwise.choose(item, families, max_ranks, size)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Count the classes this test draws, example by example; put them on its report (they
    cross xdist there)."""
    families = families_of(item)
    edges.clear()
    handle = getattr(getattr(item, "obj", None), "hypothesis", None)
    inner = getattr(handle, "inner_test", None)
    if inner is not None:

        @functools.wraps(inner)
        def counted(*args, **kwargs):
            with edges.example():
                inner(*args, **kwargs)

        handle.inner_test = counted
    try:
        yield
    finally:
        if inner is not None:
            handle.inner_test = inner
    if families or edges.DRAWN:
        item.user_properties.append(("edge_families", ",".join(families)))
        if item.get_closest_marker("op_cover"):  # pairs per op, never across ops
            item.user_properties.append(("pairs_per_op", "1"))
        item.user_properties.append(("edges_drawn", json.dumps(dict(edges.DRAWN))))
        seen = sorted({tuple(sorted(labels)) for labels in edges.EXAMPLES})
        item.user_properties.append(("edge_examples", json.dumps(seen)))
        item.user_properties.append(("covering_examples", len(item.stash.get(_COVER, []))))


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Iterator[None]:
    """The covering examples run once the property's own draws passed: examples like the
    others (known failures end them, a new failure fails the test), for the pairs those draws
    may have missed. A failure Hypothesis meets first is shrunk to a minimal case as ever; one
    that only a covering example meets is reported as that example, with its replay line. The
    property draws as many fewer examples as there are covering ones (a third of its profile's
    at least), so a run costs about what it did without them."""
    chosen = pyfuncitem.stash.get(_COVER, [])
    if not chosen:
        yield
        return

    def fewer(current: settings) -> settings:
        rest = max(current.max_examples - len(chosen), current.max_examples // 3)
        return settings(current, max_examples=rest)

    with profiles.changed(pyfuncitem.obj, fewer):
        outcome = yield
    if outcome.exception is None:
        try:
            pairwise.run(pyfuncitem, chosen)
        except BaseException as exc:  # the test's own failure, passed on as it is
            outcome.force_exception(exc)


class EdgeResults:
    """Folds the reports' edge counts per test; reports them and the classes never drawn."""

    def __init__(self, required: bool, max_ranks: int) -> None:
        self.required = required
        self.max_ranks = max_ranks  # the largest world the run has: classes beyond it are moot
        self.families: dict[str, list[str]] = {}
        self.drawn: dict[str, Counter[str]] = {}
        self.pairs: dict[str, set[covering.Pair]] = {}  # pairs some example drew
        self.covering: Counter[str] = Counter()  # covering examples run
        self.op_pairs: dict[str, set[covering.Pair]] = {}  # a per-op test's own pairs, per op
        self.offered: dict[str, int] = {}  # the pairs its op's samples offer class by class
        self.per_op: set[str] = set()  # tests whose pairs are counted per op
        self.volume: Counter[str] = Counter()  # examples of the properties at volume

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        if report.when != "call":
            return
        if "volume_examples" in properties:
            self.volume[report.nodeid.split("[")[0]] += int(properties["volume_examples"])
        if "edges_drawn" not in properties:
            return
        if report.skipped and not hasattr(report, "wasxfail"):
            return  # it drew nothing (a capability not claimed, an op with no sample for it)
        base = report.nodeid.split("[")[0]
        self.families[base] = [f for f in properties["edge_families"].split(",") if f]
        if "pairs_per_op" in properties:
            self.per_op.add(base)
        self.drawn.setdefault(base, Counter()).update(json.loads(properties["edges_drawn"]))
        examples = json.loads(properties.get("edge_examples", "[]"))
        # a per-op test's pairs are its op's own (op_cover), counted per op
        per_op = op_cover.REQUIRED in properties
        key = report.nodeid if per_op else base
        self.pairs.setdefault(key, set()).update(covering.drawn(examples))
        self.covering[key] += int(properties.get("covering_examples", 0))
        if per_op:
            required = json.loads(properties[op_cover.REQUIRED])
            self.op_pairs[key] = {covering.pair(a, b) for a, b in required}
            self.offered[key] = int(properties[op_cover.OFFERED])

    def _wanted(self, test: str) -> set[covering.Pair]:
        if test in self.op_pairs:
            return self.op_pairs[test]
        return covering.required(self.families[test], self.max_ranks)

    def _paired_tests(self) -> list[str]:
        return [t for t in self.families if t not in self.per_op]

    def pair_counts(self, test: str) -> tuple[int, int]:
        """How many required pairs the test drew, of how many."""
        wanted = self._wanted(test)
        return len(wanted & self.pairs.get(test, set())), len(wanted)

    def missing_pairs(self) -> dict[str, list[str]]:
        """Per test (per op, for a per-op test), the required pairs of classes that no example
        drew together."""
        found = {}
        for test in [*self._paired_tests(), *self.op_pairs]:
            left = self._wanted(test) - self.pairs.get(test, set())
            if left:
                found[test] = sorted(" & ".join(sorted(p)) for p in left)
        return found

    def missing(self) -> dict[str, list[str]]:
        """Per test, the declared classes no example drew."""
        found = {
            test: edges.never_drawn(families, self.drawn[test], self.max_ranks)
            for test, families in self.families.items()
        }
        return {test: labels for test, labels in found.items() if labels}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        undrawn = self.missing() or self.missing_pairs()
        if self.required and undrawn and session.exitstatus in (0, 1):
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
        counted = [t for t in sorted([*self._paired_tests(), *self.op_pairs])
                   if self.pair_counts(t)[1]]  # fmt: skip
        if not counted:
            return
        terminalreporter.section("shardspec: pairs of edge classes drawn")
        missing = self.missing_pairs()
        totals = [0, 0]
        for test in counted:
            got, wanted = self.pair_counts(test)
            totals = [totals[0] + got, totals[1] + wanted]
            cover = f", {self.covering[test]} covering examples" if self.covering[test] else ""
            offered = self.offered.get(test)
            beyond = (
                f"; {offered - wanted} more that its samples offer class by class, and no case "
                "of the cover's construction holds together (conformance/ops/cases.py)"
                if offered and offered > wanted
                else ""
            )
            terminalreporter.write_line(f"{test}: {got} of {wanted} pairs{cover}{beyond}")
            for line in missing.get(test, []):
                terminalreporter.write_line(f"    never together: {line}")
        impossible = len(covering.IMPOSSIBLE)
        terminalreporter.write_line(
            f"shardspec: {totals[0]} of {totals[1]} required pairs drawn "
            f"({impossible} pairs declared impossible, conformance/covering.py)"
        )
