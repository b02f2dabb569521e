"""A survey of a release (``run --survey``) and the known-failures file drafted from it
(``findings draft``): every rule's behaviours recorded, each entry backed by the records that
break its rule in that release, and what no record backs left out and named."""

from __future__ import annotations

import json

from test_known_failures import INNER_ADAPTER, INNER_CONFTEST

from conformance.findings import draft
from conformance.findings.records import Record
from conformance.known_failures import parse

TESTS = """
import pytest
from hypothesis import given, settings, strategies as st
from conformance import judge, symptoms

@pytest.mark.rules("ST-SPEC-1")
def test_fine():
    pass

@pytest.mark.rules("ST-SPEC-2")
def test_refuses():
    judge.fail("refused", "ST-SPEC-2", symptoms.parse("rank 1 raises ValueError"))

@pytest.mark.rules("ST-SPEC-3")
@settings(max_examples=5, database=None)
@given(st.integers(0, 3))
def test_sometimes_wrong(n):
    if n % 2:
        judge.fail("wrong", "ST-SPEC-3", symptoms.WRONG_VALUE)
"""


def test_a_survey_judges_nothing_and_reports_what_each_rule_showed(pytester):
    pytester.makepyfile(inner_adapter=INNER_ADAPTER, conftest=INNER_CONFTEST, test_inner=TESTS)
    result = pytester.runpytest_subprocess(
        "-p", "conformance.plugin", "--impl", "fake", "--survey", "--report-dir", "out"
    )
    result.assert_outcomes(passed=2, xfailed=1)
    result.stdout.fnmatch_lines(["*known failures: every failure of every rule (--survey*"])
    report = json.loads((pytester.path / "out" / "rules.json").read_text())
    assert report["behaviours"] == {
        "test_inner.py::test_refuses": {"ST-SPEC-2": ["raises ValueError"]},
        "test_inner.py::test_sometimes_wrong": {"ST-SPEC-3": ["wrong value"]},
    }
    assert report["whole"] == ["test_inner.py::test_refuses"]  # a property goes on; it ends


def record(id: str, rules: tuple[str, ...], outcome: str, note: str = "") -> Record:
    return Record(id=id, rules=rules, case="a case", world_size=1, code="result = 1\n",
                  spec=("returns 1",), releases={"9.1.0": (outcome,)}, subject=("torch.add",),
                  note=note)  # fmt: skip


OPS = "test_dt_ops.py::test_op"
SURVEY = {
    "behaviours": {
        f"{OPS}[add]": {"DT-OP-2": ["wrong value"], "ERR-1": ["raises ValueError"]},
        f"{OPS}[mul]": {"DT-OP-7": ["raises ValueError"]},
        f"{OPS}[sub]": {"DT-OP-2": ["wrong value"]},
        "test_api.py::test_refusal": {"DT-API-3": ["raises TypeError"]},
    },
    "whole": ["test_api.py::test_refusal"],
    "per_op": {f"{OPS}[add]": "add", f"{OPS}[mul]": "mul", f"{OPS}[sub]": "sub"},
}


def test_a_draft_keeps_comments_that_still_hold_backs_the_rest_and_names_what_it_cannot(
    tmp_path,
):
    older = tmp_path / "9.0.0.txt"
    older.write_text(
        "# DT-API-3: the refusal is a TypeError finding: refused-as-typeerror\n"
        "test_api.py::test_refusal\n    whole test\n    DT-API-3: raises TypeError\n"
    )
    records = [
        record("refused-as-typeerror", ("DT-API-3",), "raises TypeError"),
        record("add-is-wrong", ("DT-OP-2",), "returns 2"),
        record("refused-as-valueerror", ("DT-OP-7",), "raises ValueError", "`mul` alike"),
    ]
    made = draft.draft(SURVEY, "torch", "9.1.0", records, parse(older), older.name)
    body = "\n" + made.text.split("\n\n", 1)[1]  # past the header
    assert body == (
        "\n# DT-API-3: the refusal is a TypeError finding: refused-as-typeerror\n"
        "test_api.py::test_refusal\n    whole test\n    DT-API-3: raises TypeError\n\n"
        "# DT-OP-2: as 9.1.0's survey showed finding: add-is-wrong\n"
        f"{OPS}[add]\n    DT-OP-2: wrong value\n    ERR-1: raises ValueError\n\n"
        "# DT-OP-7: as 9.1.0's survey showed finding: refused-as-valueerror\n"
        f"{OPS}[mul]\n    DT-OP-7: raises ValueError\n"
    )
    # sub's wrong value: the one record of DT-OP-2 is about add, so it backs nothing here.
    assert made.unbacked == [(f"{OPS}[sub]", "DT-OP-2", ["wrong value"])]
    path = tmp_path / "9.1.0.txt"
    path.write_text(made.text)
    assert [e.test_id for e in parse(path)] == ["test_api.py::test_refusal", f"{OPS}[add]",
                                                f"{OPS}[mul]"]  # fmt: skip


def test_a_draft_matches_records_to_ops_in_per_op_tests_only_and_not_for_input_or_mesh_rules():
    # An op test blames its inputs' full_tensor() (DT-REDIST-3/4) and an out-of-order mesh
    # (DT-MESH-8) whatever the op: a record of the layout backs them in every op's test, while
    # the op's own rule (DT-OP-2) still needs a record about that op.
    survey = {
        "behaviours": {
            f"{OPS}[sub]": {"DT-REDIST-3": ["wrong value"], "DT-MESH-8": ["wrong value"],
                            "DT-OP-2": ["wrong value"]},
            "test_redistribute.py::test_partial[sum]": {"DT-REDIST-1": ["wrong value"]},
        },
        "whole": [],
        "per_op": {f"{OPS}[sub]": "sub"},
    }  # fmt: skip
    records = [
        record("gather-is-wrong", ("DT-REDIST-3",), "returns 2"),
        record("mesh-is-wrong", ("DT-MESH-8",), "returns 2"),
        record("add-is-wrong", ("DT-OP-2",), "returns 2"),
        record("redistribute-is-wrong", ("DT-REDIST-1",), "returns 2"),
    ]
    made = draft.draft(survey, "torch", "9.1.0", records)
    # A parametrized test that is not per-op ([sum] is a reduce op here) is not an op's test.
    assert "test_redistribute.py::test_partial[sum]\n    DT-REDIST-1: wrong value" in made.text
    assert f"{OPS}[sub]\n    DT-MESH-8: wrong value\n    DT-REDIST-3: wrong value\n" in made.text
    assert "finding: mesh-is-wrong, gather-is-wrong\n" in made.text
    assert made.unbacked == [(f"{OPS}[sub]", "DT-OP-2", ["wrong value"])]


def test_the_cli_refuses_a_report_that_is_no_surveys(tmp_path, capsys):
    from conformance import cli

    (tmp_path / "rules.json").write_text(json.dumps({"run": {"implementation": "torch 9.1.0"}}))
    assert cli.main(["findings", "draft", str(tmp_path)]) != 0
    assert "is no survey's report: run it with --survey" in capsys.readouterr().err


def test_the_cli_writes_the_draft_and_exits_1_naming_what_it_left_out(tmp_path, capsys):
    from conformance import cli

    report = {**SURVEY, "run": {"implementation": "torch 9.1.0+cpu"}}
    (tmp_path / "rules.json").write_text(json.dumps(report))
    out = tmp_path / "9.1.0.txt"
    # No record holds an outcome of 9.1.0: every rule is left out, and said so.
    assert cli.main(["findings", "draft", str(tmp_path), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"no record breaks DT-OP-2 in 9.1.0 as {OPS}[sub] showed it (wrong value)" in err
    assert out.read_text().startswith("# Known failures of torch 9.1.0 against shardspec")
