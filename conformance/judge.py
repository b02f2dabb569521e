"""Assertions of the suite, with one message shape:

    ``<what>=<actual>, but should be <expected> [<rule>; <case>]``

The helpers hide themselves from tracebacks (``__tracebackhide__``) so a failure points at the
test, and every multi-rank failure carries the replay command of its case.

Every assertion takes the ``rule`` it enforces. A failure carries it (``violated``), so the
per-rule table blames that rule alone, not every rule its test cites; a failure without one
blames them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn

import pytest
import torch
from hypothesis import assume, currently_in_test_context

from conformance import known_failures, symptoms
from conformance.oracle.placements import partial_op
from conformance.oracle.vocabulary import VALID, Verdict
from conformance.report import NOT_CLAIMED
from conformance.symptoms import Symptom
from conformance.vocabulary import parse_placements
from conformance.world import CaseResult, Raised, Returned
from conformance.world.ledger import LEDGER
from conformance.world.protocol import BUILT_FACT, RULE_ID


def requires(impl: Any, *capabilities: str) -> None:
    """Skip as "not claimed" unless the adapter claims every capability."""
    missing = [c for c in capabilities if c not in impl.capabilities]
    if missing:
        pytest.skip(f"{NOT_CLAIMED}: {', '.join(missing)}")


def assume_layout_claimed(
    impl: Any, world_size: int, ranks: Sequence[int], placements: Sequence[str]
) -> None:
    """The capabilities a DTensor layout needs: ``sub_groups`` for a mesh smaller than the world,
    ``strided_shard`` for ``_S``, ``partial:<op>`` for ``P(op)``."""
    if len(ranks) < world_size:
        assume_claimed(impl, "sub_groups")
    if any(p.startswith("_S") for p in placements):
        assume_claimed(impl, "strided_shard")
    if op := partial_op(parse_placements(list(placements))):
        assume_claimed(impl, f"partial:{op}")


def assume_source_claimed(impl: Any, src_data_rank: Any, mesh_ranks: Sequence[int]) -> None:
    """``distribute_tensor`` from another rank than the mesh's first (``"first"``), or from each
    rank's own copy (``None``), needs ``distribute_source``: a release without the argument
    distributes the first rank's data."""
    if src_data_rank not in ("first", mesh_ranks[0]):
        assume_claimed(impl, "distribute_source")


def assume_claimed(impl: Any, *capabilities: str) -> None:
    """Inside a property: discard a drawn example that needs an unclaimed capability.

    ``requires`` would skip the whole test on the first such draw, hiding every other example.
    """
    if any(c not in impl.capabilities for c in capabilities):
        assume(False)


class KnownFailureMet(Exception):
    """Ends an example of a property at a known failure: the plugin counts the example as run
    (so a property's known failures cost at most its ``max_examples``, not ten times as many
    discarded ones) and the property goes on with its next example."""


class KnownFailures:
    """The rules whose failures the running test expects, each with the symptom its entry lists
    (set by the plugin from the xfails file), those it has met so far, and how many of the
    property's examples ran and how many of them ended at a known failure."""

    def __init__(self) -> None:
        self.start({})

    def start(self, expected: Mapping[str, Symptom]) -> None:
        self.expected: Mapping[str, Symptom] = dict(expected)
        self.seen: set[str] = set()
        self.shown: dict[str, set[str]] = {}  # rule -> the listed behaviours met, as written
        self.examples = 0
        self.ended_known = 0

    def every_example_known(self) -> bool:
        """Whether the property ran examples and each ended at a known failure: nothing else
        it checks was judged."""
        return self.examples > 0 and self.ended_known == self.examples

    def covers(self, violated: tuple[str, ...], symptom: Symptom | None) -> bool:
        """Whether a failure of ``violated`` showing ``symptom`` is the known one."""
        return known_failures.covers(self.expected, violated, symptom)

    def met(self, violated: tuple[str, ...], symptom: Symptom) -> None:
        """Record a known failure: its rules, and which of their listed behaviours it showed."""
        self.seen.update(violated)
        for rule in violated:
            shown = {str(a) for a in self.expected[rule] if any(a.allows(b) for b in symptom)}
            if symptoms.SURVEYED in {a.kind for a in self.expected[rule]}:
                # A survey records what the failure showed, as an entry would list it.
                shown = {str(symptoms.Behaviour(b.kind, b.error)) for b in symptom}
            self.shown.setdefault(rule, set()).update(shown)

    def shown_text(self) -> str:
        """``RULE=behaviour|behaviour;...``: what ``met`` recorded, for a test report."""
        return ";".join(f"{r}={'|'.join(sorted(b))}" for r, b in sorted(self.shown.items()))


KNOWN = KnownFailures()


class _CoveringExample:
    """Set while a property's covering example runs (``conformance.pairwise.run``): an example
    like the property's own, outside Hypothesis's context, which a known failure ends too."""

    running = False

    def __enter__(self) -> None:
        type(self).running = True

    def __exit__(self, *exc: object) -> None:
        type(self).running = False


def covering_example() -> _CoveringExample:
    return _CoveringExample()


# The rules of errors.md that a failure breaks by how it shows, whatever rule its check enforces:
# a hang (ERR-7), ranks of one collective that part ways (ERR-6), an invalid input refused with
# another type than its rule's (ERR-1 to ERR-3, by the type expected).
HANG_RULE = "ERR-7"
SPLIT_RULE = "ERR-6"
TYPE_RULES = {"ValueError": "ERR-1", "TypeError": "ERR-2", "NotImplementedError": "ERR-3"}
RETURN_RULES = {"ValueError": "ERR-1", "TypeError": "ERR-2"}


def _with(rules: tuple[str, ...], *more: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*rules, *(r for r in more if r)]))


def _split(outcomes: Iterable[Any]) -> bool:
    """Whether the members of one collective reached different verdicts (ERR-6): some raised
    while others returned, hung or died, or they raised exceptions of different types."""
    return len({(type(o), getattr(o, "type", None)) for o in outcomes}) > 1


def fail(
    message: str, rules: str | Iterable[str] | None, symptom: Symptom | None = None
) -> NoReturn:
    """Fail the test, naming the rules the failed check enforces (``None``: unknown) and what the
    implementation did (``symptom``, see ``conformance.symptoms``; ``None``: unknown). A failure
    whose symptom has a hang breaks ERR-7 as well (``HANG_RULE``).

    A failure of known-failing rules only, with the symptom their entry lists, does not end a
    property: its example ends there and the rules are recorded, so the test goes on judging the
    other rules it cites on its next examples (``KnownFailureMet``). Outside a property, the test
    ends as an expected failure. Any other failure is a failure. Either way the world that ran
    the case is retired (``LEDGER.retire_latest_world``)."""
    __tracebackhide__ = True
    LEDGER.retire_latest_world()
    violated = (rules,) if isinstance(rules, str) else tuple(rules or ())
    if violated and symptom and any(b.kind == "hangs" for b in symptom):
        violated = _with(violated, HANG_RULE)
    if symptom:
        message = f"{message}\n  symptom: {symptoms.render(symptom)}"
    if violated:
        message = f"{message}\n  rules: {', '.join(violated)}"
    if KNOWN.covers(violated, symptom):
        KNOWN.met(violated, symptom or frozenset())
        if currently_in_test_context() or _CoveringExample.running:
            met = KnownFailureMet(message)
            met.violated, met.symptom = violated, symptom
            raise met
        first_line = message.splitlines()[0] if message else ""
        outcome: Exception = pytest.xfail.Exception(
            f"known failure of {', '.join(violated)} ({symptoms.render(symptom or ())}): "
            f"{first_line}"
        )
    else:
        outcome = pytest.fail.Exception(message, pytrace=False)
    outcome.violated = violated
    outcome.symptom = symptom
    outcome.world_size = LEDGER.latest_size
    raise outcome


# What a failed judgement raises: a failure, a known one inside a property, or outside it. Each
# carries the rules it broke (``violated``) and the symptom (``symptom``).
FAILED = (pytest.fail.Exception, pytest.xfail.Exception, KnownFailureMet)


def assert_built(result: CaseResult, *, rule: str) -> None:
    """The tensor the case operates on was built on every rank: where its constructor raised
    (``BUILT_FACT``, attached by ``codec.building``), the case fails on ``rule``, the
    constructor's, whatever the verdict of the operation it never reached."""
    __tracebackhide__ = True
    if any(
        isinstance(o, Raised) and (o.facts or {}).get(BUILT_FACT) is False for o in result.outcomes
    ):
        fail(
            result.report("the tensor the case operates on could not be built"),
            _with((rule,), SPLIT_RULE if _split(result.outcomes) else None),
            symptoms.of_outcomes(result.outcomes),
        )


def assert_facts_of_raises(
    result: CaseResult, facts: Mapping[str, str], context: str, *, rule: str
) -> None:
    """On every rank whose task raised, each fact the task saw around the raise holds
    (``Raised.facts``: e.g. ``out`` not written before raising, ERR-8). ``facts`` maps a fact to
    the words a failure names it by."""
    __tracebackhide__ = True
    for outcome in result.outcomes:
        if isinstance(outcome, Raised) and outcome.facts:
            for fact, words in facts.items():
                seen = outcome.facts.get(fact, True)  # absent: raised before the operation
                assert_equal(f"rank {outcome.rank}: {words}", seen, True, context, rule=rule)


def _fail(
    what: str,
    actual: Any,
    expected: Any,
    context: str,
    rule: str | tuple[str, ...] | None,
    symptom: Symptom = symptoms.WRONG_VALUE,
) -> NoReturn:
    __tracebackhide__ = True
    named = rule if isinstance(rule, str) else ", ".join(rule or ())
    where = f"{named}; {context}" if named else context
    fail(f"{what}={actual!r}, but should be {expected!r} [{where}]", rule, symptom)


def assert_equal(
    what: str, actual: Any, expected: Any, context: str, *, rule: str | None = None
) -> None:
    __tracebackhide__ = True
    if actual != expected:
        _fail(what, actual, expected, context, rule)


def assert_tensor_exact(
    what: str, actual: Any, expected: torch.Tensor, context: str, *, rule: str | None = None
) -> None:
    """Same dtype, same shape and bitwise the same values (NaN equal to NaN) (ERR-10)."""
    __tracebackhide__ = True
    if not isinstance(actual, torch.Tensor):
        _fail(f"type({what})", type(actual).__name__, "Tensor", context, rule)
    if actual.dtype != expected.dtype:
        _fail(f"{what}.dtype", actual.dtype, expected.dtype, context, rule)
    if actual.shape != expected.shape:
        _fail(f"{what}.shape", tuple(actual.shape), tuple(expected.shape), context, rule)
    if not torch.equal(actual, expected) and not _equal_with_nan(actual, expected):
        differ = actual != expected
        if actual.is_floating_point():
            differ &= ~(actual.isnan() & expected.isnan())
        wrong = differ.nonzero()[:5]
        at = tuple(wrong.t())  # the values where they differ, not the first ones
        shown = [t[at].reshape(-1).tolist() for t in (actual, expected)]
        _fail(f"{what} at {wrong.tolist()}", *shown, context, rule)


def rounded_through_float32(actual: Any, expected: torch.Tensor) -> bool:
    """Whether ``actual`` differs from ``expected`` at most as a trip through float32 would
    make it: the mark of inexact transport (ERR-10), which a wrong value is blamed on."""
    return (
        isinstance(actual, torch.Tensor)
        and actual.dtype == expected.dtype
        and actual.shape == expected.shape
        and bool(torch.equal(actual.to(torch.float32), expected.to(torch.float32)))
    )


def _equal_with_nan(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.is_floating_point()
        and bool(torch.equal(a.isnan(), b.isnan()))
        and bool((a == b)[~a.isnan()].all())
    )


def assert_pure_verdict(
    result: CaseResult, verdict: Verdict, context: str, *, rule: str | None = None
) -> Any:
    """Judge a pure call run in the sandbox (the ``pure`` fixture): it must return when
    ``verdict`` is valid, else raise its type. Returns the value it returned.

    A wrong error blames the verdict's rule. A valid input that was refused, or a call that hung
    or crashed, blames ``rule``, or failing that the rule ids a refusal names (the rule it
    misapplied); an invalid input that hung or crashed blames the verdict's rule."""
    __tracebackhide__ = True
    (outcome,) = result.outcomes
    if isinstance(outcome, Returned):
        if not verdict.ok and not verdict.optional:
            expected = f"{verdict.error} ({verdict.rule})"
            _fail("returned", outcome.value, expected, context, _refused_wrong(verdict, outcome),
                  symptoms.RETURNS)  # fmt: skip
        return outcome.value
    symptom = symptoms.without_ranks(symptoms.of_outcomes([outcome]))
    if not isinstance(outcome, Raised):
        fail(result.report(f"{context} gave no answer"), rule if verdict.ok else verdict.rule,
             symptom)  # fmt: skip
    raised = f"{outcome.type}: {outcome.message}"
    if verdict.ok:
        _fail("raised", raised, "a result", context, rule or _named_rule(outcome.message), symptom)
    if not outcome.is_a(verdict.error or ""):
        expected = f"{verdict.error} ({verdict.rule})"
        _fail("raised", raised, expected, context, _refused_wrong(verdict, outcome), symptom)
    return None


def _type_rule(verdict: Verdict, outcome: Any) -> str | None:
    """The ERR rule of the expected type that ``outcome`` breaks: ERR-1 to ERR-3 if it raised
    another type, ERR-1 or ERR-2 if it returned (an implementation may support what ERR-3 lets
    it decline)."""
    if isinstance(outcome, Raised):
        return TYPE_RULES.get(verdict.error or "")
    if isinstance(outcome, Returned):
        return RETURN_RULES.get(verdict.error or "")
    return None


def _refused_wrong(verdict: Verdict, outcome: Any) -> tuple[str, ...]:
    """The rules an invalid input that was not refused with its type breaks: its own, and the
    one that fixes the type expected (``_type_rule``)."""
    return _with((verdict.rule,) if verdict.rule else (), _type_rule(verdict, outcome))


def pure_value(result: CaseResult, context: str, *, rule: str | None = None) -> Any:
    """The value of a pure call that must return (see ``assert_pure_verdict``)."""
    __tracebackhide__ = True
    return assert_pure_verdict(result, VALID, context, rule=rule)


def each(inputs: Iterable[tuple[Any, Any]], check: Callable[[Any, Any], None]) -> None:
    """Judge the calls of one example (``pure_each``: every coordinate of a layout, say):
    ``check(input, results)`` for every input and its results (a ``CaseResult``, or several
    where an input takes several calls).

    Any failure but a known one ends the example at once, naming its one input. A known failure
    of one input does not stop the others being judged; the example ends at a known failure
    (``KnownFailureMet``) only where every input met one, so ``every_example_known`` still
    means that nothing else was judged."""
    __tracebackhide__ = True
    known: KnownFailureMet | None = None
    judged = 0
    for given, result in inputs:
        try:
            check(given, result)
        except KnownFailureMet as met:
            known = known or met
        else:
            judged += 1
    if known is not None and not judged:
        raise known


def assert_collective_verdict(
    result: CaseResult, verdict: Verdict, *, rule: str | None = None
) -> list[Any] | None:
    """Every rank returns when the verdict is valid; otherwise every rank raises its type (ERR-6,
    ERR-7). Returns the values when all returned. A valid case that raised blames ``rule``;
    a wrong error blames the verdict's rule."""
    __tracebackhide__ = True
    if verdict.ok:
        return all_returned(result, rule=rule)
    if verdict.optional and result.ok:
        return result.values()
    wrong = [
        o for o in result.outcomes if not (isinstance(o, Raised) and o.is_a(verdict.error or ""))
    ]
    if wrong:
        fail(
            result.report(
                f"every rank should raise {verdict.error} ({verdict.rule}); "
                f"{len(wrong)} rank(s) did not"
            ),
            _with(
                (verdict.rule,) if verdict.rule else (),
                *(_type_rule(verdict, o) for o in wrong),
                SPLIT_RULE if _split(result.outcomes) else None,
            ),
            symptoms.of_outcomes(result.outcomes),
        )
    return None


def assert_verdicts_by_rank(
    result: CaseResult, verdicts: Mapping[int, Verdict], *, rule: str
) -> list[Any]:
    """Each rank on its own verdict, as a local call is judged (ERR-6): a rank whose verdict is
    valid returns, one whose verdict is not raises its type (or returns, where the verdict is
    optional). A refused valid call blames ``rule``, a wrong or missing error the verdict's
    rule. Returns every rank's value, ``None`` where it raised."""
    __tracebackhide__ = True
    said, blamed = [], set()
    for o in result.outcomes:
        verdict = verdicts[o.rank]
        if verdict.ok and not isinstance(o, Returned):
            said.append(f"rank {o.rank} should return ({rule})")
            blamed.add(rule)
        elif not verdict.ok and not (
            (isinstance(o, Raised) and o.is_a(verdict.error or ""))
            or (verdict.optional and isinstance(o, Returned))
        ):
            said.append(f"rank {o.rank} should raise {verdict.error} ({verdict.rule})")
            blamed.update(r for r in (verdict.rule, _type_rule(verdict, o)) if r)
    if said:
        fail(result.report("; ".join(said)), sorted(blamed) or None,
             symptoms.of_outcomes(result.outcomes))  # fmt: skip
    return [o.value if isinstance(o, Returned) else None for o in result.outcomes]


def all_returned(result: CaseResult, *, rule: str | None = None) -> list[Any]:
    """The values of a case that must succeed, or a failure with every rank's outcome."""
    __tracebackhide__ = True
    if not all(isinstance(o, Returned) for o in result.outcomes):
        named = {r for o in result.outcomes if isinstance(o, Raised) and (r := o.rule)}
        blamed = (rule,) if rule else tuple(sorted(named))
        if blamed and _split(result.outcomes):
            blamed = _with(blamed, SPLIT_RULE)
        fail(result.report("every rank should return"), blamed or None,
             symptoms.of_outcomes(result.outcomes))  # fmt: skip
    return result.values()


def _named_rule(message: str) -> str | None:
    """The rule id an implementation's message names, if exactly one (ERR-5)."""
    named = set(RULE_ID.findall(message))
    return named.pop() if len(named) == 1 else None
