"""The release matrix: one implementation judged on several of its releases, rule by rule.
What each finding does in each release is not read off these runs (a run draws its examples and
may not meet a finding): FINDINGS.md shows it from the findings' replayed records.

Input is the ``rules.json`` of each run (``conformance run --report-dir``): its header names the
implementation and release, its tables the verdicts per rule and per op, its exit code whether
the run was green. The page is made from the runs kept in ``conformance/runs/`` (one file per
implementation and release, in the repository, so a release's run is made once and the page
re-rendered from all of them at any time). ``tox -e torch2.9`` runs one release and keeps it
(``python -m conformance matrix matrix-results/torch2.9 --keep``). Several runs of one
implementation and release (the suite run in parts, say operators apart) count as one: each cell
combines their verdicts as it combines those of the tests behind it (``report.in_a_cell``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from conformance import attribution
from conformance import rules as spec_rules
from conformance.known_failures import release_key
from conformance.report import SEVERITY, in_a_cell, worst

Table = dict[str, dict[str, str]]  # row (a rule, an op) -> world-size column -> verdict

KEPT = Path(__file__).parent / "runs"  # the runs MATRIX.md is made from
COMMAND = "python -m conformance matrix --out conformance/MATRIX.md"  # what makes the page


@dataclass(frozen=True)
class Run:
    implementation: str  # "torch", "reference"
    release: str  # "2.13.0": the release of PyTorch the run used (its build is in the header)
    header: dict[str, str]
    columns: Table  # by rule
    ops: Table = field(default_factory=dict)  # by op
    hash_seeds: frozenset[str] = frozenset()  # each part's (conformance.hash_seed)
    op_findings: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # op -> own/other
    rule_findings: dict[str, list[str]] = field(default_factory=dict)  # rule -> record ids
    exit_codes: frozenset[int] = frozenset()  # each part's; none for a report that lacks it

    @property
    def green(self) -> bool:
        """Every part of the run exited 0: its failures were exactly those its file lists."""
        return bool(self.exit_codes) and self.exit_codes == {0}

    @property
    def outcome(self) -> str:
        if not self.exit_codes:
            return "not recorded"
        return (
            "green"
            if self.green
            else "failed (exit " + ", ".join(map(str, sorted(self.exit_codes))) + ")"
        )

    @property
    def file_name(self) -> str:
        """The name it is kept under: one per implementation and release."""
        return f"{self.implementation}-{self.release}.json"

    def to_json(self) -> str:
        """The kept form: what the page reads, and nothing of the run's other reports."""
        data = {
            "run": self.header,
            "hash seeds": sorted(self.hash_seeds),
            "exit codes": sorted(self.exit_codes),
            "rules": self.columns,
            "ops": self.ops,
            "op_findings": self.op_findings,
            "rule_findings": self.rule_findings,
        }
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @property
    def cells(self) -> dict[str, str]:
        """Each rule's worst verdict over the run's columns."""
        return _worst_by_row(self.columns)

    @property
    def op_cells(self) -> dict[str, str]:
        """Each op's worst verdict over the run's columns."""
        return _worst_by_row(self.ops)

    @property
    def op_texts(self) -> dict[str, str]:
        """Each op's cell: its worst verdict, and the records its own known failures name."""
        return {
            op: self._cell(verdict, self.op_findings.get(op, {}).get("own", []))
            for op, verdict in self.op_cells.items()
        }

    @property
    def rule_texts(self) -> dict[str, str]:
        """Each rule's cell: its worst verdict, and, where that is a known failure, the records
        the known failures it met name (runs before rules.json held them show the verdict)."""
        return {
            rule: self._cell(
                verdict, self.rule_findings.get(rule, []) if verdict == "xfail" else []
            )
            for rule, verdict in self.cells.items()
        }

    def _cell(self, verdict: str, records: list[str]) -> str:
        """The verdict and the records that stand for it on this release: one its record shows
        conforming here is not what the run met (``attribution.deviating``)."""
        return _cell(verdict, attribution.deviating(records, self.release))

    def other_findings(self) -> dict[str, int]:
        """The records of entries naming every op that the ops met, each with how many ops."""
        return dict(Counter(i for f in self.op_findings.values() for i in f.get("other", [])))

    @property
    def summary(self) -> dict[str, int]:
        """How many rules got each verdict."""
        return dict(Counter(self.cells.values()))


def _cell(verdict: str, records: list[str]) -> str:
    """``xfail: `id`, `id```: a verdict and the records that stand for it."""
    return verdict + (": " + ", ".join(f"`{i}`" for i in records) if records else "")


def load_runs(folder: Path) -> list[Run]:
    """Every ``rules.json`` under ``folder``, oldest PyTorch release first; the runs of one
    implementation and release merged into one."""
    merged: dict[tuple[str, str], Run] = {}
    for path in sorted(folder.rglob("rules.json")):
        data = json.loads(path.read_text())
        header = data.get("run") or {}
        if "implementation" not in header or "torch" not in header:
            raise ValueError(f"{path}: no run header; rerun it with this version of shardspec")
        run = Run(
            *_identity(header),
            header=header,
            columns=data["rules"],
            ops=data.get("ops", {}),
            hash_seeds=frozenset([header.get("hash seed", "not recorded").split(" (")[0]]),
            op_findings=data.get("op_findings", {}),
            rule_findings=data.get("rule_findings", {}),
            exit_codes=frozenset([data["exit_code"]] if "exit_code" in data else []),
        )
        key = (run.implementation, run.release)
        if key in merged:
            first = merged[key]
            found = {
                op: {w: sorted({*first.op_findings.get(op, {}).get(w, []),
                                *run.op_findings.get(op, {}).get(w, [])}) for w in ("own", "other")}
                for op in {*first.op_findings, *run.op_findings}
            }  # fmt: skip
            by_rule = {rule: sorted({*first.rule_findings.get(rule, []),
                                     *run.rule_findings.get(rule, [])})
                       for rule in {*first.rule_findings, *run.rule_findings}}  # fmt: skip
            run = Run(run.implementation, run.release, first.header,
                      _merged(first.columns, run.columns), _merged(first.ops, run.ops),
                      first.hash_seeds | run.hash_seeds, found, by_rule,
                      first.exit_codes | run.exit_codes)  # fmt: skip
        merged[key] = run
    return _in_order(merged.values())


def _in_order(runs: Iterable[Run]) -> list[Run]:
    return sorted(runs, key=lambda r: (release_key(r.release), r.implementation))


def load_kept(folder: Path = KEPT) -> list[Run]:
    """The runs kept in ``folder`` (``keep``), oldest release first."""
    runs = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        header = data["run"]
        runs.append(Run(
            *_identity(header),
            header=header,
            columns=data["rules"],
            ops=data["ops"],
            hash_seeds=frozenset(data["hash seeds"]),
            op_findings=data["op_findings"],
            rule_findings=data["rule_findings"],
            exit_codes=frozenset(data["exit codes"]),
        ))  # fmt: skip
    return _in_order(runs)


def keep(runs: list[Run], folder: Path = KEPT) -> list[Path]:
    """Keep each run in ``folder``, in place of the one kept for its implementation and
    release: a release's page column is its latest run."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for run in runs:
        path = folder / run.file_name
        path.write_text(run.to_json())
        paths.append(path)
    return paths


def replacing(kept: list[Run], new: list[Run]) -> list[Run]:
    """The page's runs: the new ones, and the kept ones of the releases they do not cover."""
    covered = {(r.implementation, r.release) for r in new}
    return _in_order([*new, *(r for r in kept if (r.implementation, r.release) not in covered)])


def _identity(header: dict[str, str]) -> tuple[str, str]:
    """A run's implementation and PyTorch release, from its header (``torch 2.13.0+cpu``)."""
    return header["implementation"].split()[0], header["torch"].split()[0].split("+")[0]


def _merged(a: Table, b: Table) -> Table:
    """Two runs' tables as one: each (row, column) cell combined as the tests behind one cell
    are (``report.in_a_cell``)."""
    rows = {}
    for row in a.keys() | b.keys():
        columns = a.get(row, {}).keys() | b.get(row, {}).keys()
        rows[row] = {c: in_a_cell([a.get(row, {}).get(c, ""), b.get(row, {}).get(c, "")])
                     for c in columns}  # fmt: skip
    return rows


def _worst_by_row(table: dict[str, dict[str, str]]) -> dict[str, str]:
    return {row: worst(by_column.values()) for row, by_column in table.items()}


def render(runs: list[Run], command: str) -> str:
    torch_runs = [r for r in runs if r.implementation == "torch"]
    reference_runs = [r for r in runs if r.implementation == "reference"]
    releases = [r.release for r in torch_runs]
    lines = [
        "# PyTorch releases against shardspec",
        "",
        f"Generated by `{command}` from the runs kept in",
        "`conformance/runs/`, one per release (`--profile ci`, Gloo, world sizes 1-4; `tox -e",
        "torch2.N` runs a release and keeps its run). Each release runs with its own",
        "known-failures file (`conformance/xfails/torch/<release>.txt`); a run is green when its",
        "failures are exactly those its file lists; `suite` is the digest of the suite's code",
        "and known-failures files that made it (runs kept before it was recorded say `not",
        "recorded`). Do not edit by hand.",
        "",
        "## Runs",
        "",
        "| release | build | suite | known failures | hash seed | run | PyTorch's rules "
        "| the reference's rules |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in torch_runs:
        reference = next((r for r in reference_runs if r.release == run.release), None)
        lines.append(
            f"| {run.release} | {run.header['torch']} | {run.header.get('suite', 'not recorded')} "
            f"| {run.header['known failures']} "
            f"| {', '.join(sorted(run.hash_seeds))} | {run.outcome} | {_counts(run.summary)} "
            f"| {_counts(reference.summary) if reference else 'not run'} |"
        )
    lines += [
        "",
        "What each finding of [FINDINGS.md](FINDINGS.md) does in each release is read off its",
        "record, replayed on that release (`python -m conformance findings check`), not off these",
        "runs: a run draws its examples, and may not meet a finding that still holds.",
    ]
    order = {rule.id: n for n, rule in enumerate(spec_rules.load())}
    rules = sorted({r for run in torch_runs for r in run.cells}, key=lambda r: order.get(r, 1e9))
    lines += _table(
        "## Rules across releases",
        "Each cell is the rule's worst verdict over the world sizes of that release's run and,\n"
        "where that is a known failure, the records of the known failures it met (of those\n"
        "an entry names, the ones that break the rule on that release: a new failure beside\n"
        "a known one shows as fail).",
        "rule",
        rules,
        releases,
        [run.rule_texts for run in torch_runs],
    )
    ops = sorted({op for run in torch_runs for op in run.op_cells})
    if ops:
        lines += _table(
            OPS_HEADING,
            "Each cell is the op's worst verdict over the world sizes of that release's run\n"
            "([dt-ops](../spec/dt-ops.md)), and the records of the known failures it met: of\n"
            "those an entry's group names, the ones that break a rule the op's entry met on\n"
            "that release, and of those the ones whose subject is the op where any is\n"
            "(`conformance/attribution.py`); an op the release's OpInfo lacks has none. A\n"
            "known failure listed for every op of a test (below) is another behaviour than\n"
            "the op's: an op whose other examples conform passes, one none of whose examples\n"
            "got past it is blocked.",
            "op",
            ops,
            releases,
            [run.op_texts for run in torch_runs],
        )
        lines += [
            "",
            "Known failures listed for every op of a test, and how many ops met them:",
            "",
        ]
        lines += [
            f"- {run.release}: "
            + (", ".join(f"`{i}` ({n})" for i, n in sorted(run.other_findings().items())) or "none")
            for run in torch_runs
        ]
    return "\n".join(lines) + "\n"


OPS_HEADING = "## Operators across releases"


def _table(
    heading: str,
    caption: str,
    noun: str,
    rows: list[str],
    releases: list[str],
    cells: list[dict[str, str]],
) -> list[str]:
    """A section of the page: one row per rule or op, one column per release (``cells``, in
    the order of ``releases``)."""
    lines = ["", heading, "", caption, "", f"| {noun} | " + " | ".join(releases) + " |"]
    lines.append("|" + " --- |" * (len(releases) + 1))
    lines += [f"| {row} | " + " | ".join(c.get(row, "") for c in cells) + " |" for row in rows]
    return lines


def rule_verdicts(page: str) -> dict[str, dict[str, str]]:
    """Each release's verdict on each rule, read back from a rendered page's rule table."""
    table = page.split("## Rules across releases", 1)[-1].split(OPS_HEADING, 1)[0]
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith("| ---")
    ]
    if not rows:
        return {}
    releases = rows[0][1:]
    return {
        release: {
            row[0]: row[1 + i].split(":")[0] for row in rows[1:] if len(row) == len(releases) + 1
        }
        for i, release in enumerate(releases)
    }


def _counts(summary: dict[str, int]) -> str:
    return ", ".join(f"{summary[v]} {v}" for v in SEVERITY if summary.get(v))
