"""The run header's suite digest: equal for the same suite wherever it lies, different for any
change that can change a verdict, blind to what cannot."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conformance import run_info


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    root = tmp_path / "a" / "conformance"
    (root / "suite").mkdir(parents=True)
    (root / "xfails" / "torch").mkdir(parents=True)
    (root / "findings" / "records").mkdir(parents=True)
    (root / "suite" / "test_x.py").write_text("def test_x():\n    pass\n")
    (root / "pytest-run.ini").write_text("[pytest]\n")
    (root / "xfails" / "torch" / "2.13.0.txt").write_text("conformance/suite/test_x.py::test_x\n")
    (root / "findings" / "records" / "r.json").write_text("{}")
    (root / "MATRIX.md").write_text("# page\n")
    return root


def test_the_same_files_anywhere_have_one_digest(suite, tmp_path):
    copy = tmp_path / "b" / "conformance"
    shutil.copytree(suite, copy)
    assert run_info.digest([suite]) == run_info.digest([copy])


@pytest.mark.parametrize(
    "changed", ["suite/test_x.py", "pytest-run.ini", "xfails/torch/2.13.0.txt", "suite/new.py"]
)
def test_a_byte_of_code_or_of_a_known_failures_file_changes_the_digest(suite, changed):
    before = run_info.digest([suite])
    with (suite / changed).open("a") as f:
        f.write(" ")
    assert run_info.digest([suite]) != before


@pytest.mark.parametrize(
    "changed", ["findings/records/r.json", "MATRIX.md", "suite/__pycache__/test_x.cpython-311.pyc"]
)
def test_records_pages_and_bytecode_leave_the_digest_alone(suite, changed):
    before = run_info.digest([suite])
    (suite / changed).parent.mkdir(parents=True, exist_ok=True)
    with (suite / changed).open("a") as f:
        f.write(" ")
    assert run_info.digest([suite]) == before


def test_a_file_moved_to_another_folder_changes_the_digest(suite):
    before = run_info.digest([suite])
    (suite / "suite" / "test_x.py").rename(suite / "test_x.py")
    assert run_info.digest([suite]) != before


def test_the_header_names_the_suite_after_the_implementation():
    info = run_info.collect(
        impl="reference", impl_release=None, backend="gloo", world_sizes="1",
        known_failures="none",
    )  # fmt: skip
    assert list(info)[:2] == ["implementation", "suite"]
    assert info["suite"] == run_info.suite_build()
    assert info["suite"].startswith("shardspec ")
    assert " (digest " in info["suite"]
