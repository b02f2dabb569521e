"""The release matrix reads runs' reports: each release's verdict on each rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance import matrix

MATRIX = Path(matrix.__file__).parent / "MATRIX.md"


def write_report(
    folder: Path,
    implementation: str,
    torch: str,
    cells: dict[str, dict],
    ops=None,
    seed=None,
    op_findings=None,
    rule_findings=None,
    exit_code=None,
    suite=None,
) -> None:
    folder.mkdir(parents=True)
    header = {"implementation": implementation, "torch": torch, "known failures": "k"}
    if suite:
        header["suite"] = suite
    if seed:
        header["hash seed"] = seed
    data = {"run": header, "rules": cells, "summary": {"pass": 1}, "ops": ops or {}}
    data["op_findings"] = op_findings or {}
    if rule_findings is not None:
        data["rule_findings"] = rule_findings
    if exit_code is not None:
        data["exit_code"] = exit_code
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
        suite="shardspec 0.1.0 (digest 1a2b3c4d5e6f)",
    )
    write_report(
        tmp_path / "c", "reference", "2.13.0+cpu (CPU build)", {"ST-SPEC-2": {"gloo ws1": "pass"}}
    )
    runs = matrix.load_runs(tmp_path)
    assert [(r.implementation, r.release) for r in runs] == [
        ("torch", "2.9.0"),
        ("reference", "2.13.0"),
        ("torch", "2.13.0"),
    ]
    page = matrix.render(runs, "python -m conformance matrix DIR")
    assert "| ST-SPEC-2 | xfail | pass |" in page
    assert (
        "| 2.13.0 | 2.13.0+cpu (CPU build) | shardspec 0.1.0 (digest 1a2b3c4d5e6f) | k "
        "| not recorded | not recorded | 1 pass | 1 pass |" in page
    )
    assert "| 2.9.0 | 2.9.0+cu130 (CUDA 13.0) | not recorded | k |" in page  # a run before it


def test_runs_of_one_release_in_parts_count_as_one_with_the_worst_verdict_per_cell(tmp_path):
    """The suite run in parts (operators apart): one column per release, each cell the worst of
    the parts' verdicts, and the per-op table below the rules' table, which rule_verdicts alone
    reads back."""
    cpu = "2.13.0+cpu (CPU build)"
    write_report(tmp_path / "a", "torch", cpu, {"ERR-6": {"gloo ws2": "pass"}}, seed="0 (pinned)")
    write_report(
        tmp_path / "b",
        "torch",
        cpu,
        {"ERR-6": {"gloo ws2": "xfail"}, "DT-OP-7": {"gloo ws1": "pass"}},
        ops={"add": {"gloo ws1": "pass", "gloo ws2": "xfail"}, "mm": {"gloo ws1": "pass"}},
        seed="random (not pinned)",
    )
    (run,) = matrix.load_runs(tmp_path)
    assert run.cells == {"ERR-6": "xfail", "DT-OP-7": "pass"}
    assert run.hash_seeds == {"0", "random"}
    assert run.summary == {"xfail": 1, "pass": 1}
    page = matrix.render([run], "python -m conformance matrix DIR")
    assert "| add | xfail |\n| mm | pass |" in page
    assert matrix.rule_verdicts(page) == {"2.13.0": {"ERR-6": "xfail", "DT-OP-7": "pass"}}


def test_an_ops_cell_names_its_own_findings_and_the_page_those_of_every_op(tmp_path):
    """A known failure of an op's own (an entry scoped to it) names its records in the op's
    cell; those of entries naming every op are listed once below the table, with how many ops
    met each, across the parts of a run."""
    cpu = "2.13.0+cpu (CPU build)"
    found = {"mm": {"own": ["mm-value"], "other": ["mesh-order"]}, "add": {"other": ["mesh-order"]}}
    ops = {"add": {"gloo ws2": "pass"}, "mm": {"gloo ws2": "xfail"}}
    write_report(tmp_path / "a", "torch", cpu, {}, ops=ops, op_findings=found)
    write_report(tmp_path / "b", "torch", cpu, {}, ops={"sum": {"gloo ws1": "pass"}},
                 op_findings={"mm": {"own": ["mm-shape"]}})  # fmt: skip
    (run,) = matrix.load_runs(tmp_path)
    page = matrix.render([run], "python -m conformance matrix DIR")
    assert "| add | pass |\n| mm | xfail: `mm-shape`, `mm-value` |\n| sum | pass |" in page
    assert "- 2.13.0: `mesh-order` (2)" in page


def test_a_rules_known_failure_names_its_records_and_a_new_failure_shows_over_it(tmp_path):
    """A rule's cell names the records of the known failures it met, merged across the parts of
    a run; a new failure of the same rule shows as fail, with no records; the page's verdicts
    read back without them."""
    cpu = "2.14.1+cu130 (CUDA 13.0)"
    cells = {"DT-OP-4": {"gloo ws1": "xfail"}, "DT-OP-7": {"gloo ws2": "xfail"}}
    write_report(tmp_path / "a", "torch", cpu, cells, rule_findings={"DT-OP-4": ["item-value"]})
    cells = {"DT-OP-4": {"gloo ws2": "xfail"}, "DT-OP-7": {"gloo ws1": "fail"}}
    found = {"DT-OP-4": ["quantile-shape"], "DT-OP-7": ["view-refused"]}
    write_report(tmp_path / "b", "torch", cpu, cells, rule_findings=found)
    (run,) = matrix.load_runs(tmp_path)
    page = matrix.render([run], "python -m conformance matrix DIR")
    assert "| DT-OP-4 | xfail: `item-value`, `quantile-shape` |" in page
    assert "| DT-OP-7 | fail |" in page
    assert matrix.rule_verdicts(page) == {"2.14.1": {"DT-OP-4": "xfail", "DT-OP-7": "fail"}}


def test_a_report_without_a_header_is_refused(tmp_path):
    (tmp_path / "rules.json").write_text(json.dumps({"rules": {}, "summary": {}}))
    with pytest.raises(ValueError, match="no run header"):
        matrix.load_runs(tmp_path)


def test_a_kept_run_reads_back_as_made_and_says_whether_it_was_green(tmp_path):
    """A run is kept as the page reads it, its parts merged (hash seeds, exit codes); a run of
    which one part failed is not green, and the page says so."""
    cpu = "2.13.0+cpu (CPU build)"
    write_report(tmp_path / "a", "torch", cpu, {"ERR-6": {"gloo ws2": "pass"}}, seed="0 (x)",
                 exit_code=0, rule_findings={"ERR-6": []})  # fmt: skip
    write_report(tmp_path / "b", "torch", cpu, {"ERR-6": {"gloo ws1": "fail"}}, seed="0 (x)",
                 ops={"mm": {"gloo ws1": "pass"}}, exit_code=1)  # fmt: skip
    (run,) = matrix.load_runs(tmp_path)
    (path,) = matrix.keep([run], tmp_path / "kept")
    assert path.name == "torch-2.13.0.json"
    assert matrix.load_kept(tmp_path / "kept") == [run]
    assert (run.green, run.outcome) == (False, "failed (exit 0, 1)")
    page = matrix.render([run], "python -m conformance matrix")
    assert "| 0 | failed (exit 0, 1) | 1 fail |" in page


def test_a_new_run_replaces_the_kept_run_of_its_release_and_no_other(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    write_report(old / "a", "torch", "2.9.1+cu128", {"ERR-6": {"gloo ws2": "fail"}}, exit_code=1)
    write_report(old / "b", "torch", "2.10.0+cu128", {"ERR-6": {"gloo ws2": "pass"}}, exit_code=0)
    write_report(old / "c", "reference", "2.9.1+cu128", {"ERR-6": {"gloo ws2": "pass"}})
    matrix.keep(matrix.load_runs(old), tmp_path / "kept")
    write_report(new / "a", "torch", "2.9.1+cu128", {"ERR-6": {"gloo ws2": "xfail"}}, exit_code=0)
    matrix.keep(matrix.load_runs(new), tmp_path / "kept")
    runs = matrix.load_kept(tmp_path / "kept")
    assert [(r.implementation, r.release, r.cells["ERR-6"], r.outcome) for r in runs] == [
        ("reference", "2.9.1", "pass", "not recorded"),
        ("torch", "2.9.1", "xfail", "green"),
        ("torch", "2.10.0", "pass", "green"),
    ]


def test_the_published_matrix_is_made_from_the_kept_runs():
    """MATRIX.md is the page of conformance/runs/ as they are, and of the records as they are
    (a cell names only the records that deviate on its release): a kept run, or a record's
    outcome, changed since means it must be made again
    (``python -m conformance matrix --out conformance/MATRIX.md``)."""
    assert MATRIX.read_text() == matrix.render(matrix.load_kept(), matrix.COMMAND)


def test_every_release_with_a_known_failures_file_has_a_green_run_against_it():
    """The page's promise (issue 40): each release with a file of its own has a kept ci run,
    made with that file (not a borrowed one), whose failures were exactly those it lists."""
    runs = {r.release: r for r in matrix.load_kept() if r.implementation == "torch"}
    for path in sorted((MATRIX.parent / "xfails" / "torch").glob("*.txt")):
        run = runs.get(path.stem)
        assert run is not None, (
            f"{path.name}: no kept run (tox -e torch{path.stem.rsplit('.', 1)[0]})"
        )
        assert run.header["known failures"].startswith(f"conformance/xfails/torch/{path.name} "), (
            run.header["known failures"]
        )
        assert run.green, f"{path.stem}: {run.outcome}"
        assert run.header["profile"].startswith("ci "), run.header["profile"]
