"""Known failures (``conformance.known_failures``) put on the tests they name: a ``whole test``
entry makes a strict xfail, any other entry tells the judge which rules' failures, with which
symptoms, to count and go on past; after the test, which of them it met, and for a per-op test
whose they were (the op's own, or a behaviour every op meets)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from conformance import attribution, judge, known_failures, rules
from conformance.plugin.collect import suite_id
from conformance.plugin.configure import OPS, RUN_INFO, XFAILS, ops_option
from conformance.symptoms import ANYTHING, Symptom

EXPECTED_TO_FAIL = pytest.StashKey[known_failures.XFail]()  # a whole test's entry
_KNOWN_RULES = pytest.StashKey[dict[str, Symptom]]()
# Per test, the entries that name it: (whether the entry is scoped to it, the entry).
_ENTRIES = pytest.StashKey[list[tuple[bool, known_failures.XFail]]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A ``whole test`` entry makes its tests strict xfails; any other entry tells them which
    rules' failures, with which symptoms, to count and go on past (``judge.fail``)."""
    entries = config.stash[XFAILS]
    used: set[str] = set()
    if config.getoption("--survey"):
        surveyed = dict.fromkeys((rule.id for rule in rules.load()), ANYTHING)
        for item in items:
            item.stash[_KNOWN_RULES] = surveyed
    for item in items:
        key = suite_id(item)
        for entry in entries:
            if known_failures.matches(entry, key):
                item.stash.setdefault(_ENTRIES, []).append((entry.scoped_to(key), entry))
                if not entry.whole:
                    known = dict(item.stash.get(_KNOWN_RULES, {}))
                    for rule, symptom in entry.symptoms.items():
                        known[rule] = known.get(rule, frozenset()) | symptom
                    item.stash[_KNOWN_RULES] = known
                else:
                    item.add_marker(pytest.mark.xfail(reason=entry.reason, strict=True))
                    item.stash[EXPECTED_TO_FAIL] = entry
                used.add(entry.where)
    collected_files = {suite_id(item).partition("::")[0] for item in items}
    # A per-op test runs the ops --ops chose: an entry for another op is not stale, unless every
    # op of the catalogue ran.
    other_ops = frozenset()
    if OPS in config.stash and ops_option(config) != "all":
        other_ops = frozenset(
            suite_id(i).partition("[")[0] for i in items if i.get_closest_marker("per_op")
        )
    for entry in entries:
        if entry.where not in used and known_failures.stale(entry, collected_files, other_ops):
            warnings.warn(
                f"{entry.where}: xfail entry {entry.test_id!r} matches no collected test",
                stacklevel=1,
            )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Tell the judge which rules' failures this test expects; report those it met."""
    judge.KNOWN.start(item.stash.get(_KNOWN_RULES, {}))
    yield
    if judge.KNOWN.seen:
        item.user_properties.append(("known", ",".join(sorted(judge.KNOWN.seen))))
        item.user_properties.append(("known_as", judge.KNOWN.shown_text()))
        if item.config.getoption("--survey") and not _is_property(item):
            item.user_properties.append(("whole", "1"))  # it ends at its first failure
    item.user_properties.append(("rule_findings", _findings_by_rule(item)))
    if item.get_closest_marker("per_op"):
        item.user_properties += _whose_known_failures(item)


def _rules_met(item: pytest.Item) -> set[str]:
    """The rules whose known failures this test met: those the judge counted, and a strict
    xfail's entry's."""
    whole = item.stash.get(EXPECTED_TO_FAIL, None)
    return set(judge.KNOWN.seen) | set(whole.rules if whole else ())


def _is_property(item: pytest.Item) -> bool:
    """A Hypothesis property goes on past a known failure to its next example; any other test
    ends there, so its entry is a whole test's."""
    return bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False))


def _findings_by_rule(item: pytest.Item) -> str:
    """For each rule this test met as a known failure, the records its entries name for that
    rule (``conformance.attribution``, with the test's op where it has one), for the rule's
    cell: ``RULE=id|id;RULE=id``."""
    entries, met = item.stash.get(_ENTRIES, []), _rules_met(item)
    callspec = getattr(item, "callspec", None)
    op = (callspec.params.get("op") if callspec else None) or ""
    release = item.config.stash[RUN_INFO]["impl_release"]
    parts = []
    for rule in sorted(met):
        ids = {
            i
            for _, entry in entries
            if rule in entry.rules
            for i in attribution.findings_of(entry.findings, [rule], op, release)
        }
        if ids:
            parts.append(f"{rule}={'|'.join(sorted(ids))}")
    return ";".join(parts)


def _whose_known_failures(item: pytest.Item) -> list[tuple[str, str]]:
    """The known failures this test met, told apart for the per-op table: ``own_known``, the
    rules met that an entry scoped to this very test lists, and ``findings_own`` /
    ``findings_other``, the records named by the entries scoped to it (those that stand for
    this op, ``conformance.attribution``) and by those naming the whole test (every op). A
    strict xfail met its entry's rules (``whole``: own or other)."""
    entries, met = item.stash.get(_ENTRIES, []), _rules_met(item)
    whole = item.stash.get(EXPECTED_TO_FAIL, None)
    own_rules = {r for scoped, e in entries if scoped for r in e.rules}
    op = item.callspec.params["op"]
    release = item.config.stash[RUN_INFO]["impl_release"]
    own, other = set(), set()
    for scoped, entry in entries:
        if scoped and met & set(entry.rules):
            own.update(attribution.findings_of(entry.findings, met & set(entry.rules), op, release))
        elif not scoped and (met & set(entry.rules)) - own_rules:
            other.update(entry.findings)
    found = [("own_known", ",".join(sorted(met & own_rules)))]
    found += [("findings_own", ",".join(sorted(own))), ("findings_other", ",".join(sorted(other)))]
    if whole is not None:
        found.append(("whole", "own" if whole.scoped_to(suite_id(item)) else "other"))
    return found
