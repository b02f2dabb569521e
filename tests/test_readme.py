"""The README starts with the two commands a newcomer runs; CI and .ci/fresh-readme read them
from there (.ci/readme-command), so what CI runs is what the README says."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_command(which: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / ".ci" / "readme-command"), which], capture_output=True, text=True
    )


def test_the_readme_starts_with_the_main_job_and_the_tests_each_installing_torch_first():
    main, test = readme_command("main"), readme_command("test")
    assert main.returncode == test.returncode == 0
    assert main.stdout.startswith("pip install torch==2.13.0 && ")
    assert main.stdout.rstrip().endswith("python -m conformance run")
    assert test.stdout.startswith("pip install torch==2.13.0 && ")
    assert test.stdout.rstrip().endswith("python -m pytest -n 2")


def test_ci_runs_the_readme_test_command_in_its_own_fresh_environment():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv --clear .ci/venv" in ci
    assert 'eval "$(.ci/readme-command test)"' in ci


def test_an_unknown_readme_command_is_a_usage_error():
    done = readme_command("deploy")
    assert done.returncode == 2
    assert "usage" in done.stderr
