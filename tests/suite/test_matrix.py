"""The release matrix reads runs' reports and traces each finding across releases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance import matrix, rules
from conformance.matrix import Finding, Run, expand_rules, finding_status, history

FINDINGS = Path(matrix.__file__).parent / "FINDINGS.md"


def test_a_finding_names_its_rules_in_short_or_long_form():
    assert expand_rules("DT-MESH-3/4/5, ERR-6 (DT-MESH-8)") == (
        "DT-MESH-3",
        "DT-MESH-4",
        "DT-MESH-5",
        "ERR-6",
        "DT-MESH-8",
    )


def test_every_finding_names_rules_of_the_spec():
    findings = matrix.load_findings(FINDINGS)
    known = {rule.id for rule in rules.load()}
    assert len(findings) > 30
    for finding in findings:
        assert finding.rules, finding
        assert set(finding.rules) <= known, finding


def run(release: str, columns: dict[str, dict[str, str]]) -> Run:
    return Run("torch", release, {}, columns, {})


@pytest.mark.parametrize(
    ("columns", "status"),
    [
        ({"A-1": {"ws1": "xfail"}, "A-2": {"ws1": "pass"}}, "holds"),
        ({"A-1": {"ws1": "blocked"}, "A-2": {"ws1": "pass", "ws3": "fail"}}, "holds"),
        ({"A-1": {"ws1": "pass"}, "A-2": {"ws1": "pass"}}, "not met"),
        ({"A-1": {"ws1": "pass", "ws2": "blocked"}, "A-2": {"ws2": "pass"}}, "not met"),
        ({"A-1": {"ws1": "pass"}, "A-2": {"ws1": "blocked"}}, "not judged"),
        ({"A-1": {"ws1": "pass"}}, "not judged"),
    ],
)
def test_a_finding_holds_where_a_rule_it_names_failed(columns, status):
    assert finding_status(Finding("s", ("A-1", "A-2"), "case"), run("2.13.0", columns)) == status


def test_history_names_the_releases_a_finding_holds_in_and_those_that_did_not_meet_it():
    statuses = [
        ("2.11.0", "not met"),
        ("2.12.1", "holds"),
        ("2.13.0", "not judged"),
        ("2.14.1", "holds"),
    ]
    assert history(statuses) == "holds in 2.12.1, 2.14.1; not met in 2.11.0"
    assert history([("2.11.0", "holds"), ("2.12.1", "holds")]) == "holds in every release"
    assert history([("2.11.0", "not judged")]) == ""


def write_report(folder: Path, implementation: str, torch: str, cells: dict[str, dict]) -> None:
    folder.mkdir(parents=True)
    header = {"implementation": implementation, "torch": torch, "known failures": "k"}
    data = {"run": header, "rules": cells, "summary": {"pass": 1}}
    (folder / "rules.json").write_text(json.dumps(data))


def test_the_page_orders_releases_by_number_and_shows_each_rule(tmp_path):
    write_report(
        tmp_path / "a", "torch", "2.9.0+cu130 (CUDA 13.0)", {"ST-SPEC-2": {"gloo ws1": "xfail"}}
    )
    write_report(
        tmp_path / "b",
        "torch",
        "2.13.0+cpu (CPU build)",
        {"ST-SPEC-2": {"gloo ws1": "pass", "gloo ws2": "pass"}},
    )
    write_report(tmp_path / "c", "reference", "2.13.0+cpu (CPU build)", {})
    runs = matrix.load_runs(tmp_path)
    assert [(r.implementation, r.release) for r in runs] == [
        ("torch", "2.9.0"),
        ("reference", "2.13.0"),
        ("torch", "2.13.0"),
    ]
    findings = [Finding("Data is wrong", ("ST-SPEC-2",), "`build_metadata([1])`")]
    page = matrix.render(runs, findings, "python -m conformance matrix DIR")
    row = "| `build_metadata([1])` | holds | not met | holds in 2.9.0; not met in 2.13.0 |"
    assert f"| ST-SPEC-2 {row}" in page
    assert "| ST-SPEC-2 | xfail | pass |" in page
    assert "| 2.13.0 | 2.13.0+cpu (CPU build) | k | 1 pass | 1 pass |" in page


def test_a_report_without_a_header_is_refused(tmp_path):
    (tmp_path / "rules.json").write_text(json.dumps({"rules": {}, "summary": {}}))
    with pytest.raises(ValueError, match="no run header"):
        matrix.load_runs(tmp_path)


def test_the_published_matrix_covers_every_finding_and_every_release_with_a_file():
    """MATRIX.md is made from runs (README: tox -e torch2.11,...); a finding or a known-failures
    file added since means it must be made again."""
    page = (FINDINGS.parent / "MATRIX.md").read_text()
    for finding in matrix.load_findings(FINDINGS):
        assert f"| {', '.join(finding.rules)} | {finding.case} |" in page, finding
    header = next(line for line in page.splitlines() if line.startswith("| rules | minimal case"))
    for path in (FINDINGS.parent / "xfails" / "torch").glob("*.txt"):
        assert f"| {path.stem} |" in header, path
