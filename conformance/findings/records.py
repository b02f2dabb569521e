"""The finding records (``records/<id>.json``): what each says, and what it expects of a release.

A record holds a minimal PyTorch program (``snippet``), the world size it runs on, the outcome the
spec requires on each rank (``spec``) and the outcome each release gives (``releases``). An
outcome is ``returns <repr of result>``, ``raises <exception type>``, ``hangs`` or ``dies``; a
list of one outcome stands for every rank. Whether a release conforms, and how it deviates, is
derived from these outcomes, never written by hand. A release whose outcome breaks only some of
the record's rules names them (``breaks``): 2.11.0 refusing where 2.13.0 writes a wrong value
breaks the refusal rule, not the value's; an empty list is an outcome the spec allows too (the
``NotImplementedError`` refusal of DT-OP-7). Its ``subject`` (the public calls it is about) and
``layouts`` (the layout classes its case needs) are the keys by which two records of one rule and
symptom are told apart (``verdict.collide``); ``distinct_from`` answers, in one line, only where
the keys collide too. A release that lacks an API the program needs (``needs``: distribute_tensor's
``src_data_rank`` before 2.7) has the outcome ``cannot run``: neither conforming nor deviating.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from conformance.known_failures import release_key
from conformance.world.protocol import RULE_ID

RECORDS = Path(__file__).resolve().parent / "records"
SCHEMA = Path(__file__).resolve().parent / "record.schema.json"
PRIVATE = re.compile(r"\b_StridedShard\(")  # a program that builds a private placement by hand
OUTCOME = re.compile(r"returns .*|raises [A-Za-z_][\w.]*|hangs|dies|cannot run", re.DOTALL)
CANNOT_RUN = "cannot run"


@dataclass(frozen=True)
class Reach:
    """How a user gets to a record's private layout through public calls: ``code`` builds it
    ``via`` FSDP or a view and makes the record's calls, with the record's outcome on each of
    ``releases``."""

    via: str
    code: str
    releases: tuple[str, ...]


@dataclass(frozen=True)
class Record:
    id: str
    rules: tuple[str, ...]
    case: str
    world_size: int
    code: str
    spec: tuple[str, ...]
    releases: dict[str, tuple[str, ...]]
    note: str = ""
    upstream: tuple[dict[str, str], ...] = ()
    distinct_from: dict[str, str] = field(default_factory=dict)
    breaks_in: dict[str, tuple[str, ...]] = field(default_factory=dict)
    severity: str = ""
    subject: tuple[str, ...] = ()
    needs: str = ""  # an API some releases lack (their outcome: "cannot run")
    layouts: tuple[str, ...] = ()
    reach: Reach | None = None

    def per_rank(self, outcomes: tuple[str, ...]) -> tuple[str, ...]:
        """``outcomes`` with one entry per rank (a single entry stands for every rank)."""
        return outcomes * self.world_size if len(outcomes) == 1 else outcomes

    def recorded_for(self, release: str) -> str:
        """The recorded release whose outcomes stand for ``release``: itself, else the nearest
        older one, else the oldest (as a known-failures file is chosen)."""
        if release in self.releases:
            return release
        wanted = release_key(release)
        ordered = sorted(self.releases, key=release_key)
        same = [r for r in ordered if release_key(r) == wanted]
        older = [r for r in ordered if release_key(r) < wanted]
        return (same or older or ordered[:1])[-1]

    def breaks(self, release: str) -> tuple[str, ...]:
        """The rules ``release``'s outcome breaks: none where it is the spec's or the program
        cannot run there, else the ones the record names for it, else all of ``rules``."""
        if not self.runs_on(release):
            return ()
        if self.per_rank(self.releases[release]) == self.per_rank(self.spec):
            return ()
        return self.breaks_in.get(release, self.rules)

    def runs_on(self, release: str) -> bool:
        """Whether the release has what the program needs: a ``cannot run`` release is not
        called conforming."""
        return self.releases[release] != (CANNOT_RUN,)

    def deviates(self, release: str) -> bool:
        return bool(self.breaks(release))


def load_all(root: Path = RECORDS) -> list[Record]:
    """Every record, each checked against the schema and for sense; ``ValueError`` naming the
    file and what is wrong with it otherwise."""
    schema = json.loads(SCHEMA.read_text())
    records = [_load(path, schema) for path in sorted(root.glob("*.json"))]
    ids = {r.id for r in records}
    for record in records:
        unknown = sorted(set(record.distinct_from) - ids)
        if unknown:
            raise ValueError(f"{root / record.id}.json: distinct_from names no record: {unknown}")
    return records


def _load(path: Path, schema: dict[str, Any]) -> Record:
    try:
        data = json.loads(path.read_text())
        jsonschema.validate(data, schema)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None
    except jsonschema.ValidationError as exc:
        raise ValueError(f"{path}: does not match {SCHEMA.name}: {exc.message}") from None
    record = Record(
        id=data["id"],
        rules=tuple(data["rules"]),
        case=data["case"],
        world_size=data["world_size"],
        code="\n".join(data["code"]) + "\n",
        spec=tuple(data["spec"]),
        releases={release: tuple(o) for release, o in data["releases"].items()},
        note=data.get("note", ""),
        upstream=tuple(data.get("upstream", ())),
        distinct_from=data.get("distinct_from", {}),
        breaks_in={release: tuple(r) for release, r in data.get("breaks", {}).items()},
        severity=data.get("severity", ""),
        subject=tuple(data["subject"]),
        layouts=tuple(data["layouts"]),
        reach=_reach(data.get("reach")),
        needs=data.get("needs", ""),
    )
    problems = []
    if path.stem != record.id:
        problems.append(f"its id {record.id!r} is not its file name")
    problems += [f"{rule!r} is no rule id" for rule in record.rules if not RULE_ID.fullmatch(rule)]
    for where, outcomes in [("spec", record.spec), *record.releases.items()]:
        if len(outcomes) not in (1, record.world_size):
            problems.append(f"{where}: {len(outcomes)} outcomes for {record.world_size} rank(s)")
        problems += [f"{where}: {o!r} is no outcome" for o in outcomes if not OUTCOME.fullmatch(o)]
    if not record.needs:
        problems += [f"{r}: cannot run, but the record says no API it needs ('needs')"
                     for r, o in record.releases.items() if o == (CANNOT_RUN,)]  # fmt: skip
    for release, broken in record.breaks_in.items():
        if release not in record.releases:
            problems.append(f"breaks: {release} is no release it records")
        elif record.per_rank(record.releases[release]) == record.per_rank(record.spec):
            problems.append(f"breaks: {release} gives the spec's outcome, which breaks nothing")
        problems += [f"breaks: {release}: {r!r} is not one of its rules" for r in broken
                     if r not in record.rules]  # fmt: skip
    if record.reach is not None:
        problems += [f"reach: {r} is no release it records" for r in record.reach.releases
                     if r not in record.releases]  # fmt: skip
        if PRIVATE.search(record.reach.code):
            problems.append("reach: its program builds a private placement by hand")
        if not any(record.deviates(r) for r in record.reach.releases if r in record.releases):
            problems.append("reach: it deviates on none of the releases its reach lists")
    for release in record.releases:
        try:
            release_key(release)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return record


def _reach(data: dict[str, Any] | None) -> Reach | None:
    if data is None:
        return None
    return Reach(data["via"], "\n".join(data["code"]) + "\n", tuple(data["releases"]))
