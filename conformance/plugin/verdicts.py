"""What a test's end means: a failed check names the rules it enforces (``judge.fail``); a strict
xfail holds only where its failure is the one its entry lists; a harness or environment error,
or an exception no check raised, is no verdict on the implementation; a property whose every
example met a known failure is one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis.errors import Flaky, Unsatisfiable

from conformance import judge, known_failures, symptoms
from conformance.plugin.known import EXPECTED_TO_FAIL
from conformance.world import attach
from conformance.world.harness import HarnessError
from conformance.world.ledger import LEDGER
from conformance.world.unimplemented import AdapterIncomplete


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call() -> Iterator[None]:
    """The ledger of world sizes starts afresh with each test (``conformance.world.ledger``)."""
    LEDGER.start_test()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Put the rules a failed check enforces (``judge.fail``) on the report, for the table. A
    property whose every example met a known failure has nothing left to judge: Hypothesis
    calls it unsatisfiable, and it is reported as an expected failure instead."""
    incomplete = _adapter_incomplete(call)  # before pytest turns it into a plain skip
    outcome = yield
    report = outcome.get_result()
    if report.when != "call":
        return
    ran = LEDGER.sizes() or ([attach.CURRENT.world_size] if attach.CURRENT else [])
    report.user_properties.append(("sizes_ran", ",".join(map(str, ran))))
    if incomplete is not None:
        _not_implemented(report, incomplete)
        return
    if call.excinfo is None:
        if report.passed and judge.KNOWN.every_example_known():
            _every_example_known(report)
        return
    judges = "impl" in getattr(item, "fixturenames", ())
    no_verdict = _no_verdict(call.excinfo.value, judges)
    if no_verdict:
        # Neither a conformance failure nor the known failure it may look like.
        report.outcome = "failed"
        if hasattr(report, "wasxfail"):
            del report.wasxfail
        report.user_properties.append(("no_verdict", no_verdict))
        return
    entry = item.stash.get(EXPECTED_TO_FAIL, None)
    if entry is not None and hasattr(report, "wasxfail"):
        _unless_the_known_symptom(report, entry, call.excinfo.value)
    violated = sorted(set(_violated(call.excinfo.value)))
    if violated:
        report.user_properties.append(("violated", ",".join(violated)))
    if isinstance(call.excinfo.value, Flaky) and report.failed:
        report.longrepr = _flaky_verdict(call.excinfo.value)
    failed_at = sorted(_failure_sizes(call.excinfo.value))
    report.user_properties.append(("failed_at", ",".join(map(str, failed_at))))
    if isinstance(call.excinfo.value, Unsatisfiable) and judge.KNOWN.seen:
        _every_example_known(report)


def _adapter_incomplete(call: pytest.CallInfo) -> AdapterIncomplete | None:
    if call.excinfo is None:
        return None
    found = [leaf for leaf in _leaves(call.excinfo.value) if isinstance(leaf, AdapterIncomplete)]
    return found[0] if found else None


def _not_implemented(report: pytest.TestReport, incomplete: AdapterIncomplete) -> None:
    """A test that reached a method the adapter has not written judged nothing: it fails the
    run (the adapter claims a capability it does not implement yet), and its rules show *not
    implemented*, never a pass, a conformance failure, or a known failure met."""
    report.outcome = "failed"
    if hasattr(report, "wasxfail"):
        del report.wasxfail
    report.longrepr = f"shardspec: {incomplete}"
    report.user_properties.append(("not_implemented", ",".join(incomplete.methods)))


def _every_example_known(report: pytest.TestReport) -> None:
    report.outcome = "skipped"
    report.wasxfail = "every example met a known failure of " + ", ".join(sorted(judge.KNOWN.seen))


def _unless_the_known_symptom(
    report: pytest.TestReport, entry: known_failures.XFail, exc: BaseException
) -> None:
    """A test that is a known failure as a whole still fails unless its failure is a check's
    (``judge.fail``) that its entry lists, rule and symptom: an error of the suite, or another
    bug of the implementation, is never taken for the known one."""
    checks = [leaf for leaf in _leaves(exc) if hasattr(leaf, "violated")]
    seen = [(leaf.violated, getattr(leaf, "symptom", None)) for leaf in checks]
    if checks and all(entry.covers(violated, symptom) for violated, symptom in seen):
        return
    shown = "; ".join(
        f"{', '.join(violated) or 'no rule'} ({symptoms.render(symptom or ())})"
        for violated, symptom in seen
    )
    why = f"it fails {shown}" if checks else f"it is not a failed check ({type(exc).__name__})"
    listed = "; ".join(f"{rule} ({symptoms.render(s)})" for rule, s in entry.symptoms.items())
    del report.wasxfail
    report.outcome = "failed"
    report.longrepr = (
        f"shardspec: a new failure: {entry.where} lists "
        f"{entry.test_id} as failing {listed}, but {why}\n\n{report.longrepr}"
    )


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """Every exception a failure is made of: Hypothesis reports each distinct bug it found (and
    a flaky one) as an exception group, and wraps a ``BaseException`` such as pytest's
    ``Failed`` to put it in one."""
    yield exc
    for inner in getattr(exc, "exceptions", ()):
        yield from _leaves(inner.__cause__ or inner)


def _violated(exc: BaseException) -> Iterator[str]:
    """The rules named by a failure (``judge.fail``)."""
    for leaf in _leaves(exc):
        yield from getattr(leaf, "violated", ())


# How a test ends without a failure: skipped (a capability not claimed), a known failure met.
_NOT_FAILURES = (pytest.skip.Exception, pytest.xfail.Exception, pytest.exit.Exception)


def _no_verdict(exc: BaseException, judges: bool) -> str | None:
    """Why a test's end is no verdict on the implementation, if it is none: a harness or
    environment error (``conformance.world.harness``), or, in a test that judges an
    implementation (it takes ``impl``), an exception that no check raised. The implementation
    never runs in the driver (pure calls run in the sandbox), so such an exception is the
    suite's own error, or a result the suite cannot read; either way the rules were not
    judged."""
    leaves = list(_leaves(exc))
    harness = [leaf for leaf in leaves if isinstance(leaf, HarnessError)]
    if harness:
        return "harness or environment error: " + str(harness[0]).splitlines()[0]
    checks = any(hasattr(leaf, "violated") for leaf in leaves)
    if not judges or checks or isinstance(exc, _NOT_FAILURES):
        return None
    if isinstance(exc, Unsatisfiable) and judge.KNOWN.seen:
        return None  # every example met a known failure (see below)
    first_line = (str(exc).splitlines() or [""])[0]
    return f"suite error (no check failed): {type(exc).__name__}: {first_line}"


def _failure_sizes(exc: BaseException) -> set[int]:
    """The world size of each failed case (``judge.fail``)."""
    return {n for leaf in _leaves(exc) if (n := getattr(leaf, "world_size", None)) is not None}


def _flaky_verdict(exc: BaseException) -> str:
    """A property whose failing example passed when Hypothesis replayed it: one clear verdict and
    each distinct failure once (Hypothesis's own report nests it and repeats it)."""
    inner = list(_leaves(exc))[1:] or [exc]
    seen = dict.fromkeys(getattr(e, "msg", None) or f"{type(e).__name__}: {e}" for e in inner)
    return "\n\n".join(
        ["shardspec: failed once, passed on replay (flaky): a fault that fires sometimes "
         "is still a failure of the rule its check names", *seen]
    )  # fmt: skip
