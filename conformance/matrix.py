"""The release matrix: one implementation judged on several of its releases, rule by rule, and
each finding of ``FINDINGS.md`` traced across them (where it holds, where it appeared, where it
was fixed).

Input is the ``rules.json`` of each run (``conformance run --report-dir``): its header names the
implementation and release, its table the verdicts. ``tox -e torch2.11,torch2.12,...`` writes
them under ``matrix-results/``; ``python -m conformance matrix matrix-results`` renders the page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from conformance import rules as spec_rules
from conformance.known_failures import release_key
from conformance.report import SEVERITY

# "DT-MESH-3/4/5" names three rules, "ST-VALID-1" one.
_RULES = re.compile(r"\b([A-Z]+(?:-[A-Z]+)*)-(\d+(?:/\d+)*)\b")


@dataclass(frozen=True)
class Run:
    implementation: str  # "torch", "reference"
    release: str  # "2.13.0": the release of PyTorch the run used (its build is in the header)
    header: dict[str, str]
    columns: dict[str, dict[str, str]]  # rule -> world-size column -> verdict
    summary: dict[str, int]

    @property
    def cells(self) -> dict[str, str]:
        """Each rule's worst verdict over the run's columns."""
        return {rule: worst(by_column.values()) for rule, by_column in self.columns.items()}


@dataclass(frozen=True)
class Finding:
    section: str
    rules: tuple[str, ...]
    case: str


def load_runs(folder: Path) -> list[Run]:
    """Every ``rules.json`` under ``folder``, oldest PyTorch release first."""
    runs = []
    for path in sorted(folder.rglob("rules.json")):
        data = json.loads(path.read_text())
        header = data.get("run") or {}
        if "implementation" not in header or "torch" not in header:
            raise ValueError(f"{path}: no run header; rerun it with this version of shardspec")
        runs.append(
            Run(
                implementation=header["implementation"].split()[0],
                release=header["torch"].split()[0].split("+")[0],
                header=header,
                columns=data["rules"],
                summary=data["summary"],
            )
        )
    return sorted(runs, key=lambda r: (release_key(r.release), r.implementation))


def worst(verdicts: Iterable[str]) -> str:
    present = [v for v in verdicts if v]
    return min(present, key=SEVERITY.index) if present else ""


def expand_rules(text: str) -> tuple[str, ...]:
    """``"DT-MESH-3/4/5, ERR-6"`` -> ``("DT-MESH-3", "DT-MESH-4", "DT-MESH-5", "ERR-6")``."""
    return tuple(
        f"{prefix}-{number}"
        for prefix, numbers in _RULES.findall(text)
        for number in numbers.split("/")
    )


def load_findings(path: Path) -> list[Finding]:
    """The rows of the findings tables (first column: rules; second: the minimal case)."""
    findings, section = [], ""
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or set(cells[0]) <= {"-", " "}:
            continue
        rules = expand_rules(cells[0])
        if rules and section not in ("Upstream threads",):
            findings.append(Finding(section, rules, cells[1]))
    return findings


def finding_status(finding: Finding, run: Run) -> str:
    """``holds`` where the run failed or xfailed a rule the finding names (at any world size);
    ``not met`` where each of them passed at some world size and failed at none: the run drew
    no failing case, which a fix explains, and so does an example not drawn; ``not judged``
    where a rule was blocked by another failure of its test, or not run."""
    by_rule = [set(run.columns.get(rule, {}).values()) for rule in finding.rules]
    if any(verdicts & {"fail", "xfail"} for verdicts in by_rule):
        return "holds"
    if all("pass" in verdicts for verdicts in by_rule):
        return "not met"
    return "not judged"


def history(statuses: list[tuple[str, str]]) -> str:
    """The releases a finding holds in, and those whose run did not meet it."""
    holds = [release for release, status in statuses if status == "holds"]
    unmet = [release for release, status in statuses if status == "not met"]
    if holds and len(holds) == len(statuses):
        return "holds in every release"
    parts = [f"holds in {', '.join(holds)}"] if holds else []
    return "; ".join(parts + ([f"not met in {', '.join(unmet)}"] if unmet else []))


def render(runs: list[Run], findings: list[Finding], command: str) -> str:
    torch_runs = [r for r in runs if r.implementation == "torch"]
    reference_runs = [r for r in runs if r.implementation == "reference"]
    releases = [r.release for r in torch_runs]
    lines = [
        "# PyTorch releases against shardspec",
        "",
        f"Generated by `{command}` from the `rules.json` of each run (`--profile ci`, Gloo,",
        "world sizes 1-4). Each release runs with its own known-failures file",
        "(`conformance/xfails/torch/<release>.txt`); a run is green when its failures are exactly",
        "those its file lists. Do not edit by hand.",
        "",
        "## Runs",
        "",
        "| release | build | known failures | PyTorch's rules | the reference's rules |",
        "| --- | --- | --- | --- | --- |",
    ]
    for run in torch_runs:
        reference = next((r for r in reference_runs if r.release == run.release), None)
        lines.append(
            f"| {run.release} | {run.header['torch']} | {run.header['known failures']} "
            f"| {_counts(run.summary)} | {_counts(reference.summary) if reference else 'not run'} |"
        )
    lines += [
        "",
        "## Findings across releases",
        "",
        "A finding of [FINDINGS.md](FINDINGS.md) *holds* in a release whose run failed or",
        "xfailed a rule it names, is *not met* where all of them passed, and *not judged* where",
        "they were blocked by another failure of the same test. *Not met* is no proof of a fix:",
        "a run draws its examples, and one failure discarded earlier changes the rest. Where",
        "FINDINGS.md says a finding was replayed on each release, the replay decides.",
        "",
        "| rules | minimal case | " + " | ".join(releases) + " | history |",
        "| --- | --- |" + " --- |" * len(releases) + " --- |",
    ]
    for finding in findings:
        statuses = [(r.release, finding_status(finding, r)) for r in torch_runs]
        lines.append(
            f"| {', '.join(finding.rules)} | {finding.case} | "
            + " | ".join(s for _, s in statuses)
            + f" | {history(statuses)} |"
        )
    order = {rule.id: n for n, rule in enumerate(spec_rules.load())}
    rules = sorted({r for run in torch_runs for r in run.cells}, key=lambda r: order.get(r, 1e9))
    lines += [
        "",
        "## Rules across releases",
        "",
        "Each cell is the rule's worst verdict over the world sizes of that release's run.",
        "",
        "| rule | " + " | ".join(releases) + " |",
        "|" + " --- |" * (len(releases) + 1),
    ]
    for rule in rules:
        lines.append(f"| {rule} | " + " | ".join(r.cells.get(rule, "") for r in torch_runs) + " |")
    return "\n".join(lines) + "\n"


def _counts(summary: dict[str, int]) -> str:
    return ", ".join(f"{summary[v]} {v}" for v in SEVERITY if summary.get(v))
