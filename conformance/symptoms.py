"""What an implementation did when a check failed, in the words a known-failure entry uses.

A symptom is a set of behaviours, one per rank where ranks took part, written as a comma
separated list::

    rank 1 raises ValueError, rank 0 hangs      every rank of one failed case
    raises ValueError, hangs                    the same, on whichever ranks
    returns                                     returned where it should have raised
    wrong value                                 returned, but not what the spec says

A behaviour is ``raises <exception type>`` (the most derived type, by name), ``returns``,
``hangs`` (no answer within the case timeout), ``dies`` (the process ended) or ``wrong value``,
optionally led by ``rank <n>``. A known-failure entry lists the behaviours its failure may show;
a failure matches it when every behaviour it showed is listed (a listed behaviour without a rank
stands for that behaviour on any rank). A failure with another behaviour is a new failure, so an
entry written for one bug never hides another of the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from conformance.world.protocol import Died, Hung, Outcome, Raised, Returned

_TERM = re.compile(
    r"(?:rank (?P<rank>\d+) )?(?P<kind>raises (?P<type>[A-Za-z_][\w.]*)|returns|hangs|dies"
    r"|wrong value)"
)


@dataclass(frozen=True)
class Behaviour:
    """One rank's part in a failure (``rank`` is ``None`` for a call with no ranks, or for any
    rank in an entry); ``error`` is the exception type of ``raises``."""

    kind: str
    error: str = ""
    rank: int | None = None

    def __str__(self) -> str:
        who = f"rank {self.rank} " if self.rank is not None else ""
        return f"{who}{self.kind} {self.error}" if self.error else f"{who}{self.kind}"

    def allows(self, seen: Behaviour) -> bool:
        """Whether this listed behaviour covers ``seen``."""
        return self.kind == SURVEYED or (
            self.kind == seen.kind
            and self.error == seen.error
            and (self.rank is None or self.rank == seen.rank)
        )


Symptom = frozenset[Behaviour]

# What a survey run (``run --survey``) knows every rule to show: any behaviour on any rank. No
# file can say it (``parse`` refuses it): an entry names the behaviours it was written for.
SURVEYED = "anything"
ANYTHING: Symptom = frozenset({Behaviour(SURVEYED)})

WRONG_VALUE: Symptom = frozenset({Behaviour("wrong value")})
RETURNS: Symptom = frozenset({Behaviour("returns")})


def of_outcomes(outcomes: Iterable[Outcome]) -> Symptom:
    """Every rank's behaviour in one case."""
    return frozenset(_behaviour(o) for o in outcomes)


def without_ranks(symptom: Symptom) -> Symptom:
    """The behaviours of a call that has no ranks (a pure call in the sandbox)."""
    return frozenset(Behaviour(b.kind, b.error) for b in symptom)


def _behaviour(outcome: Outcome) -> Behaviour:
    if isinstance(outcome, Raised):
        return Behaviour("raises", outcome.type, outcome.rank)
    if isinstance(outcome, Hung):
        return Behaviour("hangs", rank=outcome.rank)
    if isinstance(outcome, Died):
        return Behaviour("dies", rank=outcome.rank)
    assert isinstance(outcome, Returned)
    return Behaviour("returns", rank=outcome.rank)


def parse(text: str) -> Symptom:
    """``"rank 1 raises ValueError, hangs"`` -> its behaviours; a ``ValueError`` naming the term
    that is not one."""
    terms = [term.strip() for term in text.split(",")]
    behaviours = set()
    for term in terms:
        match = _TERM.fullmatch(term)
        if match is None:
            raise ValueError(
                f"{term!r} is not a behaviour: write [rank N] raises <Type>, returns, hangs, "
                "dies or wrong value"
            )
        rank = int(match["rank"]) if match["rank"] is not None else None
        kind = "raises" if match["type"] else match["kind"]
        behaviours.add(Behaviour(kind, match["type"] or "", rank))
    return frozenset(behaviours)


def render(symptom: Iterable[Behaviour]) -> str:
    """The text ``parse`` reads back, ranks in order."""
    ordered = sorted(symptom, key=lambda b: (-1 if b.rank is None else b.rank, b.kind, b.error))
    return ", ".join(map(str, ordered))


def matches(seen: Iterable[Behaviour] | None, allowed: Iterable[Behaviour]) -> bool:
    """Whether every behaviour ``seen`` is one an entry lists. A failure that showed no
    behaviour (``None`` or empty: the suite's own error, say) matches no entry."""
    seen, allowed = tuple(seen or ()), tuple(allowed)
    return bool(seen) and all(any(a.allows(b) for a in allowed) for b in seen)
