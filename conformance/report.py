"""Per-rule results: which rules passed, failed or were not claimed, at which world size.

Test reports carry the rules a test cites and its world size (as pytest user properties, so
results from xdist workers arrive with them); this module folds them into one verdict per
(rule, world size) and renders the table for the terminal, Markdown (a CI job summary) and JSON.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

# A row's verdict is the worst of its cells, in this order. "blocked": no test checked the rule to
# the end there, each stopped on another rule's failure.
SEVERITY = [
    "error", "fail", "not implemented", "xpass", "xfail", "blocked", "pass", "not claimed", "skip"
]  # fmt: skip
# A cell shows the worst verdict among the tests behind it, except that a test that checked the
# rule to the end outranks one that was stopped before it ("blocked"): one op's test stopped by a
# known failure of that op does not hide a rule that every other op's test judged.
IN_A_CELL = [
    "error", "fail", "not implemented", "xpass", "xfail", "pass", "blocked", "not claimed", "skip"
]  # fmt: skip
NOT_CLAIMED = "not claimed"
# A test that reached an adapter method not written yet (conformance.world.unimplemented): it
# judged nothing, and fails the run.
NOT_IMPLEMENTED = "not implemented"
BLOCKED = "blocked"
ERROR = "error"  # the harness or the environment failed: no verdict (conformance.world.harness)


@dataclass
class RuleTable:
    """Verdicts per rule and world size (``"2"``, or ``"any"`` for a test that ran no case)."""

    cells: dict[str, dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    sizes: set[str] = field(default_factory=set)
    backend: str | None = None  # one run, one backend: it heads every world-size column

    def add(self, rules: list[str], size: str, verdict: str) -> None:
        self.sizes.add(size)
        for rule in rules:
            self.cells[rule][size] = in_a_cell([self.cells[rule].get(size, ""), verdict])

    def columns(self) -> list[str]:
        return sorted(self.sizes, key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s))

    def headers(self) -> list[str]:
        """``gloo ws2`` for a world size (``ws2`` without a backend), ``any`` as it is."""
        prefix = f"{self.backend} " if self.backend else ""
        return [f"{prefix}ws{c}" if c.isdigit() else c for c in self.columns()]

    def rows(self, order: list[str]) -> list[tuple[str, list[str]]]:
        """Rules in spec order (then any others), each with its cell per column."""
        known = [r for r in order if r in self.cells] + sorted(set(self.cells) - set(order))
        return [(rule, [self.cells[rule].get(c, "") for c in self.columns()]) for rule in known]

    def judged(self) -> list[str]:
        """The rules that got a verdict in some cell: passed, failed, or failed as known."""
        verdicts = {"pass", "fail", "xfail", "xpass"}
        return [rule for rule, by_size in self.cells.items() if verdicts & set(by_size.values())]

    def counts(self) -> dict[str, int]:
        totals: dict[str, int] = defaultdict(int)
        for by_size in self.cells.values():
            totals[worst(by_size.values())] += 1
        return dict(totals)


def worst(verdicts: Iterable[str]) -> str:
    """The most severe of ``verdicts`` (``SEVERITY``); empty cells do not count."""
    present = [v for v in verdicts if v]
    return min(present, key=SEVERITY.index) if present else ""


def in_a_cell(verdicts: Iterable[str]) -> str:
    """The verdict of one cell from those of the tests (or runs) behind it (``IN_A_CELL``)."""
    present = [v for v in verdicts if v]
    return min(present, key=IN_A_CELL.index) if present else ""


def verdict_of(outcome: str, wasxfail: bool, skip_reason: str) -> str:
    """Map a pytest outcome to a table verdict."""
    if wasxfail:
        return "xfail" if outcome == "skipped" else "xpass"
    if outcome == "skipped":
        return NOT_CLAIMED if skip_reason.startswith(NOT_CLAIMED) else "skip"
    return {"passed": "pass", "failed": "fail"}[outcome]


def render_text(table: RuleTable, order: list[str], noun: str = "rule") -> str:
    """The table as text; ``noun`` names its rows (``rule``, or ``op`` for the per-op table)."""
    headers = [noun, *table.headers()]
    rows = [[rule, *cells] for rule, cells in table.rows(order)]
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.append(_summary(table, noun))
    return "\n".join(line.rstrip() for line in lines)


def render_markdown(table: RuleTable, order: list[str], noun: str = "rule") -> str:
    headers = [noun, *table.headers()]
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    lines += ["| " + " | ".join([rule, *cells]) + " |" for rule, cells in table.rows(order)]
    return "\n".join([*lines, "", _summary(table, noun), ""])


def render_json(
    table: RuleTable,
    order: list[str],
    run: dict[str, str] | None = None,
    exit_code: int | None = None,
    ops: RuleTable | None = None,
    op_findings: dict[str, dict[str, set[str]]] | None = None,
    rule_findings: dict[str, set[str]] | None = None,
    behaviours: dict[str, dict[str, set[str]]] | None = None,
    whole: set[str] | None = None,
    per_op: dict[str, str] | None = None,
) -> str:
    """``{"run": header, "rules": {rule: {column: verdict}}, "rule_findings": {rule: [record
    id]}, "summary": counts, "exit_code": the run's, "ops": {op: {column: verdict}},
    "op_findings": {op: {"own": [record id], "other": [...]}}}``: the records the known
    failures each rule met name; the exit code too, since a launcher (torchrun) replaces it with
    its own; ``ops`` where the run judged operators, with the records their known failures name,
    the op's own and those of entries naming every op; ``behaviours``, of a survey (``run
    --survey``), each test's known-failing rules and what they showed: ``{test: {rule:
    [behaviour]}}``, ``whole``, the tests among them that end at their first failure, and
    ``per_op``, the op of each per-op test among them (``{test: op}``)."""

    def cells(t: RuleTable, row_order: list[str]) -> dict[str, dict[str, str]]:
        return {key: dict(zip(t.headers(), c, strict=True)) for key, c in t.rows(row_order)}

    data = {
        "run": run or {},
        "rules": cells(table, order),
        "rule_findings": {rule: sorted(ids) for rule, ids in sorted((rule_findings or {}).items())},
        "summary": table.counts(),
        "exit_code": exit_code,
    }
    if behaviours:
        data["behaviours"] = {
            test: {rule: sorted(shown) for rule, shown in sorted(by_rule.items())}
            for test, by_rule in sorted(behaviours.items())
            if by_rule
        }
        data["whole"] = sorted(whole or ())
        shown = data["behaviours"]
        data["per_op"] = {t: op for t, op in sorted((per_op or {}).items()) if t in shown}
    if ops is not None and ops.cells:
        data["ops"] = cells(ops, [])
        data["op_findings"] = {
            op: {whose: sorted(ids) for whose, ids in found.items() if ids}
            for op, found in sorted((op_findings or {}).items())
            if any(found.values())
        }
    return json.dumps(data, indent=2, sort_keys=True)


def _summary(table: RuleTable, noun: str = "rule") -> str:
    counts = table.counts()
    return f"{noun}s: " + ", ".join(f"{counts[v]} {v}" for v in SEVERITY if counts.get(v))
