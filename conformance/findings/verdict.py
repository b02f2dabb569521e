"""What a record's outcomes mean: whether a release conforms, the symptom of a deviation (in the
words of known-failure entries, ``conformance.symptoms``), a description for FINDINGS.md, and
which records tell of the same behaviour twice."""

from __future__ import annotations

from collections.abc import Sequence

from conformance import symptoms
from conformance.findings.records import CANNOT_RUN, Record
from conformance.symptoms import Behaviour, Symptom

# The rules of errors.md a deviation breaks by how it shows (a wrong exception type, ranks that
# part ways, a hang: conformance/judge.py), listed beside the rule it breaks: two records that
# share only these tell of different behaviours.
UMBRELLA = frozenset({"ERR-1", "ERR-2", "ERR-3", "ERR-6", "ERR-7"})


def symptom(record: Record, outcomes: tuple[str, ...]) -> Symptom:
    """Each rank's departure from the spec: ``wrong value`` where both return but differ,
    ``returns`` where the spec wants an exception, else what the rank did. Empty: conforms."""
    behaviours = set()
    spec = record.per_rank(record.spec)
    for rank, (got, want) in enumerate(zip(record.per_rank(outcomes), spec, strict=True)):
        if got == want:
            continue
        if got.startswith("returns"):
            kind = "wrong value" if want.startswith("returns") else "returns"
            behaviours.add(Behaviour(kind, rank=rank))
        elif got.startswith("raises"):
            behaviours.add(Behaviour("raises", got.split(" ", 1)[1], rank))
        else:
            behaviours.add(Behaviour(got, rank=rank))
    return frozenset(behaviours)


def describe(record: Record, outcomes: tuple[str, ...]) -> str:
    """The outcomes as a reader wants them: ``conforms``, or ranks grouped by what they did,
    values shown where they are wrong."""
    if set(outcomes) == {CANNOT_RUN}:
        return f"cannot run (it needs {record.needs})"
    per_rank = record.per_rank(outcomes)
    if per_rank == record.per_rank(record.spec):
        return "conforms"
    groups: dict[str, list[int]] = {}
    for rank, outcome in enumerate(per_rank):
        groups.setdefault(outcome, []).append(rank)
    if len(groups) == 1:
        return _words(per_rank[0], plural=record.world_size > 1)
    parts = []
    for outcome, ranks in groups.items():
        who = f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
        parts.append(f"{who}: {_words(outcome, plural=len(ranks) > 1)}")
    return "; ".join(parts)


def _words(outcome: str, plural: bool) -> str:
    if outcome.startswith("returns "):
        return f"return{'' if plural else 's'} `{outcome[len('returns ') :]}`"
    if outcome.startswith("raises "):
        return f"raise{'' if plural else 's'} `{outcome[len('raises ') :]}`"
    return {"hangs": "hang" if plural else "hangs", "dies": "die" if plural else "dies"}[outcome]


def kinds(record: Record, release: str) -> frozenset[str]:
    """A deviation's behaviours without ranks: two records of one rule whose cases show the same
    kinds (say, one rank raising ``ValueError`` while the others hang) tell of one behaviour."""
    return frozenset(map(str, symptoms.without_ranks(symptom(record, record.releases[release]))))


def collide(a: Record, b: Record) -> list[str]:
    """The releases in which two records look like one behaviour: each breaks a rule the other
    breaks (other than the ``UMBRELLA`` rules) with the same symptom, about a call both name
    (``subject``) on a layout class both need (``layouts``). A record without those keys collides
    with any other on its rules and symptom alone."""
    for mine, theirs in ((a.subject, b.subject), (a.layouts, b.layouts)):
        if mine and theirs and not set(mine) & set(theirs):
            return []
    releases = sorted(set(a.releases) & set(b.releases))
    return [r for r in releases if _shared(a, b, r) and kinds(a, r) == kinds(b, r)]


def duplicates(records: Sequence[Record]) -> list[str]:
    """Pairs of records that collide (``collide``), unless one declares, with a reason, that it
    is ``distinct_from`` the other."""
    found = []
    for i, a in enumerate(records):
        for b in records[i + 1 :]:
            if b.id in a.distinct_from or a.id in b.distinct_from:
                continue
            same = collide(a, b)
            if same:
                rules = set().union(*(_shared(a, b, r) for r in same))
                found.append(
                    f"{a.id} and {b.id}: {', '.join(sorted(rules))} "
                    "with the same symptom "
                    f"({symptoms.render(symptoms.parse(', '.join(sorted(kinds(a, same[0])))))}) "
                    f"in {', '.join(same)}: one behaviour, one record (or say why in "
                    "distinct_from)"
                )
    return found


def _shared(a: Record, b: Record, release: str) -> set[str]:
    """The rules, other than the ``UMBRELLA`` ones, that both records break in ``release``."""
    return (set(a.breaks(release)) & set(b.breaks(release))) - UMBRELLA
