"""fixtures/: the files match the oracle and their schemas, `check` finds a hand-edited case,
`verify` passes the reference and reports a wrong implementation, regressions round-trip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from conformance.adapters.reference import ADAPTER as REFERENCE
from conformance.cli import main
from conformance.golden import ROOT, check, generate, regressions, verify

SCHEMAS = ROOT / "schema"


class WrongLayout:
    """The reference with an off-by-one global offset: what `verify` must catch."""

    name = "wrong"
    capabilities = REFERENCE.capabilities

    def dt_local_shape_and_offset(self, global_shape, mesh_shape, placements, coordinate):
        shape, offset = REFERENCE.dt_local_shape_and_offset(
            global_shape, mesh_shape, placements, coordinate
        )
        return shape, [o + 1 if n > 1 else o for o, n in zip(offset, global_shape, strict=True)]


WRONG = WrongLayout()


def test_committed_fixtures_are_what_the_oracle_generates(capsys):
    assert main(["fixtures", "check"]) == 0
    assert check.differences() == []


def test_generation_is_deterministic():
    assert generate.build_all() == generate.build_all()


@pytest.mark.parametrize("name", sorted(generate.FILES))
def test_every_file_matches_its_schema_and_names_rules(name):
    data = json.loads((ROOT / f"{name}.json").read_text())
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    assert all(case["rules"] for case in data["cases"])


def test_regressions_match_their_schema():
    schema = json.loads((SCHEMAS / "regression.schema.json").read_text())
    saved = regressions.load_all()
    assert saved, "keep at least one real regression"
    for _, data in saved:
        jsonschema.validate(data, schema)


def test_fixtures_stay_small():
    assert sum(p.stat().st_size for p in ROOT.rglob("*.json")) < 1_000_000


def test_check_names_the_file_and_case_of_a_hand_edited_fixture(tmp_path, monkeypatch, capsys):
    copy = tmp_path / "fixtures"
    shutil.copytree(ROOT, copy)
    path = copy / "layouts.json"
    data = json.loads(path.read_text())
    data["cases"][0]["expected"][0]["global_offset"] = [99]
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    case_id = data["cases"][0]["id"]
    assert check.differences(copy) == [f"layouts.json: case {case_id!r} differs"]
    monkeypatch.setattr(check, "ROOT", copy)
    assert main(["fixtures", "check"]) == 1
    assert f"layouts.json: case {case_id!r} differs" in capsys.readouterr().err


def test_verify_passes_the_reference():
    results = verify.verify("reference")
    assert [r for r in results if r.status == "fail"] == []
    assert {r.file for r in results if r.status == "pass"} >= {
        f"{n}.json" for n in (*verify.PURE, *verify.DATA)
    }


def test_verify_reports_a_wrong_implementation(capsys):
    results = verify.verify("test_fixtures:WRONG", ["layouts"])
    failed = [r for r in results if r.status == "fail"]
    assert failed
    assert all(r.file == "layouts.json" and "global_offset" in r.detail for r in failed)
    assert "DT-LAYOUT-1" in verify.report(results)
    assert main(["fixtures", "verify", "--impl", "test_fixtures:WRONG", "--files", "layouts"]) == 1
    out = capsys.readouterr().out
    assert "FAIL layouts.json [" in out
    assert "DT-LAYOUT-2" in out


def test_save_regression_writes_a_replayable_file(tmp_path):
    case = {"task": "conformance.tasks.sharded_tensor:shard_then_gather",
            "args": {"impl": "torch", "dim": 0, "dst": 1, "dtype": "int64", "group": [0, 1],
                     "order": [1, 0], "seed": 3, "shape": [3], "src": 0}}  # fmt: skip
    path = regressions.save(json.dumps(case), root=tmp_path)
    saved = json.loads(Path(path).read_text())
    assert saved["world_size"] == 2
    assert "impl" not in saved["case"]["args"]
    assert regressions.save(json.dumps(case), root=tmp_path) == path


def _copy_with(tmp_path: Path, name: str, edit) -> Path:
    copy = tmp_path / "vectors"
    shutil.copytree(ROOT, copy)
    path = copy / f"{name}.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return copy


def test_a_fixture_that_names_an_implementation_is_an_error_not_a_pass(tmp_path, capsys):
    """Data never names code: a copy whose case says args.impl=reference, verified against a
    wrong implementation, must not pass on the reference's behalf."""

    def name_the_reference(data):
        data["cases"][0]["args"]["impl"] = "reference"

    copy = _copy_with(tmp_path, "gather", name_the_reference)
    argv = ["fixtures", "verify", "--impl", "test_fixtures:WRONG", "--files", "gather"]
    code = main([*argv, "--fixtures-dir", str(copy)])
    out = capsys.readouterr().out
    assert code == 3, out
    assert "ERROR gather.json: gather.json does not match its schema at cases/0/args" in out
    assert out.splitlines()[-1] == "0 passed, 0 failed, 0 skipped, 1 files in error", out


def test_a_corrupt_fixture_file_is_an_error(tmp_path, capsys):
    copy = tmp_path / "vectors"
    shutil.copytree(ROOT, copy)
    (copy / "layouts.json").write_text('{"cases": [')
    code = main(["fixtures", "verify", "--files", "layouts", "--fixtures-dir", str(copy)])
    out = capsys.readouterr().out
    assert code == 3, out
    assert "ERROR layouts.json: cannot read layouts.json" in out


def test_verify_checks_a_copy_of_the_vectors_given_by_folder(tmp_path, capsys):
    copy = _copy_with(tmp_path, "layouts", lambda data: None)
    assert main(["fixtures", "verify", "--files", "layouts", "--fixtures-dir", str(copy)]) == 0
    assert str(copy) in capsys.readouterr().out


def test_a_regression_that_names_an_implementation_or_an_unknown_task_is_refused(tmp_path):
    (name, data), *_ = regressions.load_all()
    for edit, message in (
        (lambda d: d["case"]["args"].update(impl="reference"), "does not match its schema"),
        (lambda d: d["case"].update(task="os:system"), "no regression judge"),
    ):
        broken = json.loads(json.dumps(data))
        edit(broken)
        (tmp_path / f"{name}.json").write_text(json.dumps(broken))
        ((read, error),) = regressions.load_all(tmp_path)
        assert read == name
        assert isinstance(error, ValueError)
        assert message in str(error)
