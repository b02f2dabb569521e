"""A finding as a bug tracker triages it: how bad it is (severity), how a user meets it (reach)
and where PyTorch's tracker stands on it (upstream status).

Each is read off the record wherever its data can say it: the severity off the outcomes of the
newest release that deviates, the reach off the program, the status off the threads the record
cites as the same behaviour. A record states a severity only where its outcomes cannot show it
(an output that returns but is malformed looks like any other value), and the loader refuses a
stated severity the outcomes contradict.
"""

from __future__ import annotations

import re

from conformance.findings import verdict
from conformance.findings.records import PRIVATE, Record
from conformance.known_failures import release_key

# Worst first: the order FINDINGS.md lists findings in.
SEVERITIES = {
    "silent wrong value": "a value the spec does not give, with no error on any rank",
    "ranks part ways or hang": "one rank fails or hangs while others go on, or every rank hangs",
    "malformed output": "an output whose metadata disagrees with its data, or that cannot be read",
    "internal error on valid input": "an exception where the spec gives a result",
    "invalid input accepted": "a result where the spec requires a refusal",
    "refusal of the wrong type": "a refusal, of another exception type than the spec's",
}
# What a record may state over what its outcomes show: a malformed output returns (a wrong
# value), or raises once it is read (an internal error of the reading call).
STATED = {"malformed output": {"silent wrong value", "internal error on valid input"}}

REACHES = {
    "public API": "public calls and placements make the case",
    "FSDP with tensor parallelism": "fully_shard over a tensor-parallel module makes its layout",
    "a view of a sharded tensor": "a view of a tensor sharded on a public placement makes it",
    "private placement": "the case builds a private placement (_StridedShard) by hand, and no "
    "public path to its layout is known",
}

RAISES = re.compile(r"raises [A-Za-z_][\w.]*")


def newest_deviating(record: Record) -> str:
    deviating = [r for r in sorted(record.releases, key=release_key) if record.deviates(r)]
    if not deviating:
        raise ValueError(f"{record.id}: conforms in every release it records: not a finding")
    return deviating[-1]


def shown_severity(record: Record, release: str | None = None) -> str:
    """The severity ``release``'s outcomes show (by default the newest release that deviates).
    A program that tries several calls returns each one's outcome, ``'raises X'`` among them:
    more of those than the spec has is an error on valid input, fewer an invalid input
    accepted, as many a wrong type."""
    release = release or newest_deviating(record)
    outcomes = record.per_rank(record.releases[release])
    kinds = {b.kind for b in verdict.symptom(record, outcomes)}
    split = len({_kind(o) for o in outcomes}) > 1 and len({_kind(o) for o in record.spec}) == 1
    if kinds & {"hangs", "dies"} or split:
        return "ranks part ways or hang"
    got = sum(len(RAISES.findall(o)) for o in outcomes)
    wanted = sum(len(RAISES.findall(o)) for o in record.per_rank(record.spec))
    if kinds == {"wrong value"} and got == wanted == 0:
        return "silent wrong value"
    if got > wanted:
        return "internal error on valid input"
    if got < wanted:
        return "invalid input accepted"
    return "refusal of the wrong type"


def _kind(outcome: str) -> str:
    """``returns`` for any value, the outcome itself otherwise (``raises ValueError``)."""
    return "returns" if outcome.startswith("returns") else outcome


def severity(record: Record, release: str | None = None) -> str:
    """The record's severity in ``release`` (by default the newest that deviates): the one it
    states where the outcomes allow it, else the one they show."""
    shown = shown_severity(record, release)
    return record.severity if shown in STATED.get(record.severity, ()) else shown


def check_stated(record: Record) -> str | None:
    """Why the severity a record states cannot stand (its outcomes show another kind), or
    ``None``."""
    shown = shown_severity(record)
    if record.severity and shown not in STATED[record.severity]:
        return f"{record.id}: states {record.severity!r} where its outcomes show {shown!r}"
    return None


def reach(record: Record) -> str:
    """How a user meets the case: through public calls, through a public path to its private
    layout (its ``reach`` program, replayed by ``findings check``), or only by building it."""
    if not PRIVATE.search(record.code):
        return "public API"
    return record.reach.via if record.reach else "private placement"


def upstream_status(record: Record) -> str:
    """``not reported``, or the status of the thread the record cites as the same behaviour
    (``same: <status>...``): open, fixed, closed, closed as intended."""
    for thread in record.upstream:
        relation = thread["relation"]
        if relation.startswith("same: "):
            status = relation.removeprefix("same: ")
            for known in ("closed as intended", "open", "fixed", "closed"):
                if status.startswith(known):
                    return f"reported, {known}"
    return "not reported"
