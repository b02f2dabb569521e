"""A property's covering examples (``covering``): drawn dry at set-up, chosen, and run after
the property's own draws have passed.

The pool is the property's own strategy, run by Hypothesis with the test body cut short at its
first case (the world fixtures raise ``_Dry``): by then the test has noted its classes and no
process has been asked for anything. Each candidate keeps what was drawn for it (the values
``data.draw`` returned, or the ``@given`` arguments), so that running it later is calling the
test body with the same values, and its failures print the same replay lines as any example's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.errors import UnsatisfiedAssumption

from conformance import covering, edges, judge, profiles

# The most examples drawn for the pool, per Hypothesis profile (it stops early once it holds
# every required pair); a profile not here draws no covering examples (quick stays quick).
POOL = {"ci": 4000, "thorough": 10000}
WORLD_FIXTURES = ("run_case", "pure", "pure_each", "world")


class _Dry(Exception):
    """The test body asked for its first case: the candidate is drawn."""


class _Enough(Exception):
    """The pool draws every required pair: Hypothesis stops at this "failure" (no shrinking in
    the generate phase alone)."""


def _reach_a_case(*args: Any, **kwargs: Any) -> Any:
    raise _Dry


class _RecordingData:
    """``st.data()``'s object, keeping a copy of each value it draws, with the classes its
    strategy noted while drawing it (a strategy may note what it chose)."""

    def __init__(self, real: Any) -> None:
        self.real, self.values = real, []

    def draw(self, strategy: Any, label: Any = None) -> Any:
        before = edges.noted()
        value = self.real.draw(strategy, label)
        self.values.append((copy.deepcopy(value), sorted(edges.noted() - before)))
        return value


class _ReplayData:
    """Draws the recorded values again, in order, whatever strategy is asked, noting the
    classes their strategies noted."""

    def __init__(self, values: list[tuple[Any, list[str]]]) -> None:
        self.values = list(values)

    def draw(self, strategy: Any, label: Any = None) -> Any:
        if not self.values:
            raise RuntimeError("a covering example drew more values than were recorded for it")
        value, labels = self.values.pop(0)
        edges.note(*labels)
        return copy.deepcopy(value)


@dataclass(frozen=True)
class Candidate:
    labels: frozenset[str]
    given: dict[str, tuple[str, Any]]  # name -> ("data", values drawn) or ("value", argument)

    def arguments(self) -> dict[str, Any]:
        return {
            name: _ReplayData(v) if kind == "data" else copy.deepcopy(v)
            for name, (kind, v) in self.given.items()
        }


def draw_pool(item: pytest.Item, size: int, wanted: set[covering.Pair]) -> list[Candidate]:
    """Candidates of ``item``'s property, each with the classes it noted: up to ``size``, fewer
    once they draw every pair of ``wanted``."""
    test = item.obj
    handle = test.hypothesis
    inner, fixtures, pool = handle.inner_test, set(item.fixturenames), []
    left = set(wanted)

    def dry(*args: Any, **kwargs: Any) -> None:
        given = {k: v for k, v in kwargs.items() if k not in fixtures}
        call = {**kwargs, **{k: _reach_a_case for k in WORLD_FIXTURES if k in kwargs}}
        recorders = {k: _RecordingData(v) for k, v in given.items() if hasattr(v, "draw")}
        call.update(recorders)
        kept = {k: ("value", copy.deepcopy(v)) for k, v in given.items() if k not in recorders}
        with edges.example() as noted:
            try:
                inner(*args, **call)
            except UnsatisfiedAssumption:
                return  # a discarded example: the property discards it too
            except (Exception, pytest.fail.Exception, pytest.xfail.Exception):
                pass  # _Dry, or a check before the first case: the example will say
            labels = frozenset(noted)
        kept.update({k: ("data", r.values) for k, r in recorders.items()})
        pool.append(Candidate(labels, kept))
        left.difference_update(covering.drawn([labels]))
        if not left:
            raise _Enough

    handle.inner_test = dry
    try:
        dry_run = {"max_examples": size, "phases": (Phase.generate,), "database": None}
        with profiles.changed(test, lambda current: settings(current, **dry_run)):
            test(**{name: item.funcargs[name] for name in item._fixtureinfo.argnames})
    except _Enough:
        pass
    finally:
        handle.inner_test = inner
        edges.clear()
    return pool


def choose(item: pytest.Item, families: list[str], max_ranks: int, size: int) -> list[Candidate]:
    """The candidates that cover every required pair the pool reaches."""
    wanted = covering.required(families, max_ranks)
    pool = draw_pool(item, size, wanted)
    sizes = [len(repr(c.given)) for c in pool]
    picked = covering.cover([c.labels for c in pool], wanted, sizes)
    return [pool[i] for i in picked]


def run(item: pytest.Item, chosen: list[Candidate]) -> None:
    """Run each covering example through the property's per-example body, as the property runs
    its own: a known failure ends the example (counted, as the plugin counts the property's) and
    the next one runs, so a known failure of one rule never hides another's."""
    handle = item.obj.hypothesis
    fixtures = {name: item.funcargs[name] for name in item._fixtureinfo.argnames}
    for candidate in chosen:
        judge.KNOWN.examples += 1
        with judge.covering_example():
            try:
                handle.inner_test(**fixtures, **candidate.arguments())
            except judge.KnownFailureMet:
                judge.KNOWN.ended_known += 1
