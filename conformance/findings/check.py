"""``findings check``: replay every record on the installed PyTorch and compare.

A record passes when each rank's outcome is the one recorded for the installed release (or for
the release that stands for it, ``Record.recorded_for``), and so does its reach program (a
public path to its private layout) where it lists that release. ``--record`` writes what was seen
instead, for a maintainer to review as a diff: that is how a new release gets its outcomes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch

from conformance.findings import replay, verdict
from conformance.findings.records import RECORDS, Record, load_all
from conformance.known_failures import release_key


def installed_release() -> str:
    """``"2.13.0"`` for torch ``2.13.0+cpu``: records are kept per release, not per build."""
    return ".".join(map(str, release_key(torch.__version__)))


def check(
    ids: Sequence[str] = (),
    *,
    record: bool = False,
    timeout_s: float = 10.0,
    root: Path = RECORDS,
    out=print,
) -> int:
    """Replay the records named (every one by default); 0 when each matches, else 1."""
    records = load_all(root)
    unknown = sorted(set(ids) - {r.id for r in records})
    if unknown:
        raise ValueError(f"no such finding: {', '.join(unknown)}")
    chosen = [r for r in records if r.id in ids] if ids else records
    release = installed_release()
    out(f"findings check: {len(chosen)} record(s) on torch {torch.__version__}")
    failed: set[str] = set()
    for each in chosen:
        seen = replay.read(each, replay.run(each, timeout_s))
        stands_for = each.recorded_for(release)
        if record:
            _write(root / f"{each.id}.json", release, replay.compact(seen))
            out(f"recorded {each.id} ({release}): {verdict.describe(each, seen)}")
            continue
        expected = each.per_rank(each.releases[stands_for])
        borrowed = "" if stands_for == release else f", as recorded for {stands_for}"
        if not _bears_out(each, f"{release}{borrowed}", expected, seen, out):
            failed.add(each.id)
        if each.reach is not None and release in each.reach.releases:
            reached = replay.run(replace(each, code=each.reach.code), timeout_s)
            if not _bears_out(each, f"{release}, reached {each.reach.via}", expected, reached, out):
                failed.add(each.id)
    twice = verdict.duplicates(records)
    for line in twice:
        out(f"DUPLICATE {line}")
    out(
        f"findings check: {len(chosen) - len(failed)} of {len(chosen)} as recorded"
        + (f", {len(twice)} duplicate pair(s)" if twice else "")
    )
    return 1 if failed or twice else 0


def _bears_out(
    each: Record, where: str, expected: tuple[str, ...], seen: tuple[str, ...], out
) -> bool:
    """Print one replay's verdict; whether it saw what the record holds."""
    if seen == expected:
        out(f"ok        {each.id} ({where}): {verdict.describe(each, seen)}")
        return True
    out(f"MISMATCH  {each.id} ({where}):")
    out(f"    recorded: {verdict.describe(each, expected)}")
    out(f"    seen:     {verdict.describe(each, seen)}")
    out(f"    replay:   python -m conformance findings replay {each.id}")
    return False


def _write(path: Path, release: str, outcomes: tuple[str, ...]) -> None:
    """Set one release's outcomes in a record file, releases kept in release order."""
    data = json.loads(path.read_text())
    releases = {**data["releases"], release: list(outcomes)}
    data["releases"] = {r: releases[r] for r in sorted(releases, key=release_key)}
    path.write_text(dumps(data))


def dumps(data: dict) -> str:
    """A record as its files are written: one line per program line and per release."""
    parts = []
    for key, value in data.items():
        if key == "code":
            text = _block([json.dumps(line, ensure_ascii=False) for line in value], "[]")
        elif key == "releases":
            items = [
                f"{json.dumps(r)}: {json.dumps(o, ensure_ascii=False)}" for r, o in value.items()
            ]
            text = _block(items, "{}")
        elif key == "reach":
            lines = [json.dumps(line, ensure_ascii=False) for line in value["code"]]
            code = _block(lines, "[]", depth=2)
            items = [f'"via": {json.dumps(value["via"])}', f'"code": {code}']
            items.append(f'"releases": {json.dumps(value["releases"])}')
            text = _block(items, "{}")
        elif key in ("upstream", "distinct_from"):
            text = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
        else:
            text = json.dumps(value, ensure_ascii=False)
        parts.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _block(items: list[str], brackets: str, depth: int = 1) -> str:
    """``items`` one a line, inside ``brackets`` at ``depth`` levels of the record's nesting."""
    inner, outer = "  " * (depth + 1), "  " * depth
    return brackets[0] + "\n" + ",\n".join(inner + i for i in items) + "\n" + outer + brackets[1]


def replay_one(finding: Record, timeout_s: float, show: bool, out=print) -> int:
    """Print the program (with ``show``), then each rank's outcome and what the spec wants."""
    from conformance.findings.snippet import PRELUDE

    if show:
        out(f"# world of {finding.world_size} rank(s); `rank` is this process's rank\n")
        out(PRELUDE + finding.code)
    seen = replay.run(finding, timeout_s)
    for rank, (got, want) in enumerate(zip(seen, finding.per_rank(finding.spec), strict=True)):
        mark = "" if got == want else f"    (the spec: {want})"
        out(f"rank {rank}: {got}{mark}")
    return 0
