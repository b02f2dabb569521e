"""How each property draws: from a seed of its name under a derandomized profile, as many examples
as its ``volume`` asks, unshrunk where it is a known failure as a whole, and each example ending
at a known failure counted as one that ran."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import pytest
from hypothesis import Phase, seed, settings

from conformance import judge, profiles
from conformance.plugin.known import EXPECTED_TO_FAIL


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if settings.default.derandomize:
        _seed_by_name(items)


def _seed_by_name(items: list[pytest.Item]) -> None:
    """Under a derandomized profile (``ci``, and the project's own tests), each property draws
    from a seed of its name. Hypothesis's own derandomization seeds from a digest of the test's
    source, so a refactor of a test body that changes nothing it draws or judges would still
    draw other examples and move cells of the table; a seed of the name keeps one verdict per
    commit and makes a refactor's verdicts comparable with the ones before it."""
    for item in items:
        test = getattr(item, "obj", None)
        if getattr(test, "is_hypothesis_test", False):
            name = f"{item.module.__name__}.{item.originalname}".encode()
            seed(int.from_bytes(hashlib.sha256(name).digest()[:8], "big"))(test)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Run the test under its own settings; a ``volume`` test reports how many examples ran."""
    with (
        _at_volume(item),
        _stop_at_the_first_failure(item),
        _known_failures_end_their_example(item),
    ):
        yield
    if item.get_closest_marker("volume"):
        item.user_properties.append(("volume_examples", judge.KNOWN.examples))


def _with_settings(
    item: pytest.Item, change: Callable[[settings], settings]
) -> AbstractContextManager[None]:
    """Run ``item`` under ``change(its settings)`` (``profiles.changed``)."""
    return profiles.changed(getattr(item, "obj", None), change)


def _at_volume(item: pytest.Item) -> AbstractContextManager[None]:
    """A property marked ``volume(factor)`` draws ``factor`` times the examples of the profile:
    a pure property's calls cost microseconds in a sandbox already running, and rare layouts (an
    overlap between boxes that are not neighbours in any order) need thousands of draws; a world
    test whose cases cost milliseconds may double its draws to meet each of its classes, and a
    test run once per op of a catalogue draws a fraction of them. Each example stays one input,
    so a failure shrinks to a minimal one in seconds."""
    marker = item.get_closest_marker("volume")
    if marker is None:
        return nullcontext()
    (factor,) = marker.args
    return _with_settings(
        item,
        lambda current: settings(
            current, max_examples=max(1, round(current.max_examples * factor))
        ),
    )


def _stop_at_the_first_failure(item: pytest.Item) -> AbstractContextManager[None]:
    """A property that is a known failure (a strict xfail) need not be shrunk, nor searched for
    more bugs: both only re-run failing cases, and a known hang costs a grace period each time.
    Nor is its unshrunk example saved: a later run without the entry would replay it as the
    failure to show, unshrunk."""
    if item.stash.get(EXPECTED_TO_FAIL, None) is None:
        return nullcontext()
    return _with_settings(
        item,
        lambda current: settings(
            current,
            phases=[phase for phase in current.phases if phase is not Phase.shrink],
            report_multiple_bugs=False,
            database=None,
        ),
    )


@contextmanager
def _known_failures_end_their_example(item: pytest.Item) -> Iterator[None]:
    """Each example of a property ends, as one that ran, at a known failure
    (``judge.KnownFailureMet``); the judge counts the examples and those that ended so.

    Hypothesis lets a plugin wrap the body it calls per example (``.hypothesis.inner_test``)."""
    handle = getattr(getattr(item, "obj", None), "hypothesis", None)
    inner = getattr(handle, "inner_test", None)
    if inner is None:
        yield
        return

    @functools.wraps(inner)
    def example(*args: Any, **kwargs: Any) -> None:
        judge.KNOWN.examples += 1
        try:
            inner(*args, **kwargs)
        except judge.KnownFailureMet:
            judge.KNOWN.ended_known += 1

    handle.inner_test = example
    try:
        yield
    finally:
        handle.inner_test = inner
