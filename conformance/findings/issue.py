"""A finding as an upstream issue: ``findings report ID`` prints a body ready to paste into
PyTorch's tracker, with a program that runs as it stands (``torchrun``), what the spec requires
of each rank and what each release does, all read off the record."""

from __future__ import annotations

from conformance import rules
from conformance.findings import render, snippet, triage
from conformance.findings.records import Record


def title(record: Record) -> str:
    """``[DTensor] item of a partial returns the local part``: the API the rules name, then the
    record's id in words."""
    api = "ShardedTensor" if all(r.startswith("ST-") for r in record.rules) else "DTensor"
    return f"[{api}] {record.id.replace('-', ' ')}"


def script(record: Record, reach: bool = False) -> str:
    """The record's program (or its reach program) as a file torchrun runs, headed by what the
    spec requires of each rank and what each release does."""
    outcomes = ["The spec: " + _ranks(record.spec, record)]
    outcomes += [
        f"PyTorch {release}: " + _ranks(seen, record) for release, seen in record.releases.items()
    ]
    code, name = (
        (record.reach.code, "reach.py") if reach and record.reach else (record.code, "repro.py")
    )
    return snippet.script(code, record.world_size, title(record), name, outcomes)


def _ranks(outcomes: tuple[str, ...], record: Record) -> str:
    """One outcome where every rank has it, else each rank's."""
    each = record.per_rank(outcomes)
    if len(set(each)) == 1:
        return f"every rank {each[0]}"
    return "; ".join(f"rank {n} {o}" for n, o in enumerate(each))


def body(record: Record) -> str:
    by_id = {rule.id: rule for rule in rules.load()}
    cited = [by_id[r] for r in record.rules if r in by_id]
    program = script(record)
    expected = [f"rank {n}: {o}" for n, o in enumerate(record.per_rank(record.spec))]
    newest = triage.newest_deviating(record)
    seen = [f"rank {n}: {o}" for n, o in enumerate(record.per_rank(record.releases[newest]))]
    lines = [
        f"# {title(record)}",
        "",
        render.cell(record.note) if record.note else render.cell(record.case),
        "",
        "## Reproduction",
        "",
        f"{render.cell(record.case)}. Run as `torchrun --nproc-per-node {record.world_size} "
        "repro.py` (CPU, Gloo):",
        "",
        "```python",
        program.rstrip(),
        "```",
        "",
        f"## Output on {newest}",
        "",
        "```",
        *seen,
        "```",
        "",
        "## Expected",
        "",
        "```",
        *expected,
        "```",
        "",
        "as the rules it breaks require:",
        "",
        *(f"- {r.id}: {r.title} (shardspec, `spec/{r.chapter}`)" for r in cited),
        "",
        *_reach(record),
        "## Releases",
        "",
        render.releases_text(record).replace("; ", "\n\n"),
        "",
        f"Severity: {triage.severity(record)}; reach: {triage.reach(record)}. Found by "
        f"shardspec's conformance suite: `python -m conformance findings replay {record.id}`.",
    ]
    return "\n".join(lines) + "\n"


def _reach(record: Record) -> list[str]:
    """The program that gets to the case's private layout through public calls, where the record
    has one: a maintainer's first question of a private placement is whether users meet it."""
    if record.reach is None:
        return []
    program = script(record, reach=True)
    return [
        f"## How a user gets there: {record.reach.via}",
        "",
        "The program above builds its layout by hand; this one gets to the same layout through "
        f"public calls and gives the same output on {', '.join(record.reach.releases)}:",
        "",
        "```python",
        program.rstrip(),
        "```",
        "",
    ]
