"""``findings draft``: a release's known-failures file from a survey of it (``run --survey``).

A survey runs every example with every rule known to fail in any way and reports, per test, the
rules that failed and what they showed (``rules.json``: ``behaviours``, ``whole``, ``per_op``).
Each of those becomes an entry line, and each entry's comment names the records that break its
rules in the release (``findings check --record`` first gives the records that release's
outcomes): those the comments file (another release's) named for the same test and rule where
they still break it, else the records that break the rule there with a symptom the survey saw,
about the test's op where it is a per-op test. A rule no record backs is left out of the file
and reported: write its record, record it on every release, and draft again.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from conformance import known_failures, symptoms
from conformance.findings import verdict
from conformance.findings.records import Record
from conformance.known_failures import XFail

HEADER = (
    "Known failures of {impl} {release} against shardspec, drafted by `findings draft` from a "
    "survey of this release ({how}; `run --survey`: every rule of every test known to fail in "
    "any way, so that every example ran and the report lists what each rule showed). Each entry "
    "is a test id with, indented below it, each known-failing rule and the symptoms it showed "
    "(conformance/symptoms.py), and a 'whole test' line where the test ends at its first failure "
    "(a strict xfail). Each group names the records (conformance/findings/records) that break its "
    "rules on {release}, as their outcomes replayed on {release} show; where {comments} listed the "
    "same rules with the same records, the group keeps that file's comment, and its minimal case "
    "is {comments}'s. A failure of another rule, or of a listed rule with a symptom not listed, is "
    "a new failure."
)
# Rules an op test blames on its inputs or its mesh, whatever the op: an input the case cannot
# build (its constructor's rule), an input whose full_tensor() is not its value (the transition's
# rule: conformance/suite/test_dt_ops.py, _judge_inputs), and a mesh whose ranks are out of order.
NOT_THE_OPS = {"DT-API-7", "DT-REDIST-3", "DT-REDIST-4", "DT-MESH-8"}


@dataclass(frozen=True)
class Draft:
    text: str
    unbacked: list[tuple[str, str, list[str]]]  # (test, rule, behaviours) no record breaks


def draft(
    report: dict,
    impl: str,
    release: str,
    records: Sequence[Record],
    comments: Sequence[XFail] = (),
    comments_name: str = "no other file",
) -> Draft:
    """The file ``report`` (a survey's ``rules.json``) makes for ``release``."""
    breaking: dict[str, list[Record]] = {}
    for record in records:
        if release in record.releases:
            for rule in record.breaks(release):
                breaking.setdefault(rule, []).append(record)
    named: dict[tuple[str, str], list[str]] = {}
    reasons: dict[tuple[str, str], str] = {}
    for entry in comments:
        for rule in entry.rules:
            named.setdefault((entry.test_id, rule), []).extend(entry.findings)
            reasons.setdefault((entry.test_id, rule), entry.reason)
    whole_before = {e.test_id for e in comments if e.whole}
    groups: dict[tuple[str, tuple[str, ...]], list[tuple[str, dict[str, list[str]], bool]]] = {}
    unbacked = []
    for test, shown in report.get("behaviours", {}).items():
        kept: dict[str, list[str]] = {}
        backing: list[str] = []
        reason = ""
        for rule, behaviours in sorted(shown.items()):
            if rule in verdict.UMBRELLA:
                kept[rule] = behaviours
                continue
            op = report.get("per_op", {}).get(test, "")
            ids = _backing(test, op, rule, behaviours, breaking.get(rule, []), named, release)
            if not ids:
                unbacked.append((test, rule, behaviours))
                continue
            kept[rule] = behaviours
            backing += ids
            earlier = reasons.get((test, rule)) or reasons.get((test.partition("[")[0], rule), "")
            if _names_only(earlier, ids):
                reason = reason or earlier
        if set(kept) - verdict.UMBRELLA:
            whole = test in report.get("whole", ()) or test in whole_before
            groups.setdefault((reason, tuple(dict.fromkeys(backing))), []).append(
                (test, kept, whole)
            )
    run = report.get("run", {})
    how = ", ".join(
        f"{key} {run[key].split(' ')[0]}"
        for key in ("profile", "world sizes", "hash seed")
        if key in run
    )
    header = HEADER.format(impl=impl, release=release, comments=comments_name, how=how or "a run")
    lines = [f"# {line}" for line in textwrap.wrap(header, 97, break_on_hyphens=False)] + [""]
    for (reason, ids), entries in sorted(groups.items(), key=lambda kv: kv[1][0][0]):
        rules = sorted({r for _, kept, _ in entries for r in kept} - verdict.UMBRELLA)
        said = (
            reason.split(" finding:")[0]
            if reason
            else f"{', '.join(rules)}: as {release}'s survey showed"
        )
        wrapped = textwrap.wrap(f"{said} finding: {', '.join(ids)}", 97, break_on_hyphens=False)
        lines += [f"# {line}" for line in wrapped]
        for test, kept, whole in entries:
            lines.append(test)
            lines += ["    whole test"] if whole else []
            lines += [f"    {rule}: {', '.join(kept[rule])}" for rule in sorted(kept)]
        lines.append("")
    return Draft("\n".join(lines), unbacked)


def _names_only(reason: str, ids: list[str]) -> bool:
    """Whether an earlier comment names only records among ``ids``: its words still hold."""
    named = {i.strip() for m in known_failures.FINDING.findall(reason) for i in m.split(",")}
    return bool(named) and named <= set(ids)


def _backing(
    test: str,
    op: str,
    rule: str,
    behaviours: list[str],
    candidates: list[Record],
    named: dict[tuple[str, str], list[str]],
    release: str,
) -> list[str]:
    """The records that back ``rule`` in ``test``: those the comments file named for it that
    still break it, else those that break it with a symptom the survey saw (about the op of a
    per-op test)."""
    ids = {r.id for r in candidates}
    before = named.get((test, rule), []) + named.get((test.partition("[")[0], rule), [])
    if kept := [i for i in dict.fromkeys(before) if i in ids]:
        return kept
    allowed = symptoms.parse(", ".join(behaviours))
    name = op.split("/")[0].split(".")[-1]  # div/floor_rounding: div; nn.functional.silu: silu
    found = []
    for record in candidates:
        seen = verdict.symptom(record, record.per_rank(record.releases[release]))
        if not symptoms.matches(seen, allowed):
            continue
        if name and rule not in NOT_THE_OPS and not _about(record, name):
            continue
        found.append(record.id)
    return sorted(found)


def _about(record: Record, op: str) -> bool:
    """Whether a record is about ``op``: its subject calls it, or its note names it (`op`)."""
    return op in {s.split(".")[-1] for s in record.subject} or f"`{op}`" in record.note
