"""The suite as users run it: installed from a wheel (not editable) and started from a folder of
their own repository, whose pytest configuration must not change a verdict. Every verdict must
equal the checkout's (``installed.py`` builds the environment once per run)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from installed import CHECKOUT, Installed, install

# Tests of a known-failing chapter that cost no Hypothesis draws: PyTorch 2.13 fails ST-SPEC-7/8
# in them, so they judge the known-failures file, and each finishes in a second.
SPEC_FILE = Path("conformance", "suite", "test_st_sharding_spec.py")
SPEC_TESTS = ["-k", "needs_an_int or name_no_rank"]
HOSTILE_CONFIG = """\
[tool.pytest.ini_options]
addopts = "--no-such-option"
filterwarnings = ["error"]
"""


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # one per run
    return install(shared / "installed-shardspec")


@pytest.fixture(scope="module")
def installed_torch_run(
    installed: Installed, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """An installed ``--impl torch --profile ci`` run from a folder like a user's repository,
    with a pytest configuration the suite must not read: its output and its reports."""
    repository = tmp_path_factory.mktemp("users-repository")
    (repository / "pyproject.toml").write_text(HOSTILE_CONFIG)
    reports = repository / "results" / "torch"
    suite_file = installed.package.parent / SPEC_FILE
    done = installed.run(
        "-m", "conformance", "run", "--impl", "torch", "--profile", "ci", str(suite_file),
        "--report-dir", str(reports), "--", *SPEC_TESTS, cwd=repository,
    )  # fmt: skip
    return done, reports


def test_an_installed_run_from_a_users_repository_gives_the_checkouts_verdict(
    installed_torch_run, tmp_path
):
    """Known failures match by test id wherever the suite is installed; the table is the
    checkout's, cell for cell."""
    done, reports = installed_torch_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed, 2 deselected, 5 xfailed" in done.stdout.splitlines()[-1]
    assert "Warning" not in done.stdout, done.stdout[-3000:]
    checkout = subprocess.run(
        [sys.executable, "-m", "conformance", "run", "--impl", "torch", "--profile", "ci",
         str(SPEC_FILE), "--report-dir", str(tmp_path), "--", *SPEC_TESTS],
        cwd=CHECKOUT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert checkout.returncode == 0, checkout.stdout[-3000:]
    installed_report = json.loads((reports / "rules.json").read_text())
    checkout_report = json.loads((tmp_path / "rules.json").read_text())
    installed_table = installed_report["rules"]
    assert installed_table == checkout_report["rules"]
    assert installed_report["run"]["suite"] == checkout_report["run"]["suite"]  # the same suite
    assert "xfail" in {cell for cells in installed_table.values() for cell in cells.values()}


def test_every_file_a_command_reads_ships_with_the_wheel(installed, installed_torch_run):
    """The spec (rules), the golden vectors (fixtures), the finding records and MATRIX.md
    (findings) come with it."""
    rules = installed.run("-m", "conformance", "rules")
    assert rules.returncode == 0, rules.stderr
    assert "DT-LAYOUT-2" in rules.stdout
    fixtures = installed.run("-m", "conformance", "fixtures", "check")
    assert fixtures.returncode == 0, fixtures.stderr
    _, reports = installed_torch_run
    matrix = installed.run("-m", "conformance", "matrix", str(reports.parent))
    assert matrix.returncode == 0, matrix.stderr
    assert "ST-SPEC-7" in matrix.stdout
    replay = installed.run("-m", "conformance", "findings", "replay", "gather-through-float32")
    assert replay.returncode == 0, replay.stderr
    assert "rank 0: returns [904623.3125]" in replay.stdout
    page = installed.run("-m", "conformance", "findings", "render")
    assert page.returncode == 0, page.stderr
    assert "`gather-through-float32`" in page.stdout
    changes = installed.run("-m", "conformance", "findings", "changes")
    assert changes.returncode == 0, changes.stderr
    assert changes.stdout == (CHECKOUT / "conformance" / "RELEASES.md").read_text()


def test_a_first_run_ends_with_the_next_commands(installed):
    done = installed.run("-m", "conformance", "run", "--world-sizes", "1", "--", *SPEC_TESTS)
    assert done.returncode == 0, done.stdout[-3000:]
    assert done.stdout.splitlines()[-4].startswith("next: python -m conformance run --impl torch")
    assert "Warning" not in done.stdout, done.stdout[-3000:]


def test_an_unreadable_regression_file_is_an_error_and_the_others_still_run(installed):
    """A bad file among the shipped regressions is the suite's data error (exit 3), not a stop
    of the run: the good regression is still judged."""
    folder = installed.python.parents[1] / "share" / "shardspec" / "fixtures" / "regressions"
    good = len(list(folder.glob("*.json")))
    bad = folder / "zz-not-json.json"
    with installed.locked(fcntl.LOCK_EX):
        bad.write_text("{not json")
        try:
            done = subprocess.run(
                [str(installed.python), "-m", "conformance", "run",
                 str(installed.package / "suite" / "test_regressions.py")],
                cwd=installed.empty, capture_output=True, text=True, timeout=300,
                env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            )  # fmt: skip
        finally:
            bad.unlink()
    assert done.returncode == 3, done.stdout[-3000:]
    assert "zz-not-json.json: not JSON" in done.stdout
    assert f"1 failed, {good} passed" in done.stdout.splitlines()[-1], done.stdout[-1000:]
