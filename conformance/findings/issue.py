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


def body(record: Record) -> str:
    by_id = {rule.id: rule for rule in rules.load()}
    cited = [by_id[r] for r in record.rules if r in by_id]
    program = snippet.script(record.code, record.world_size, title(record))
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
    program = snippet.script(record.reach.code, record.world_size, title(record), "reach.py")
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
