"""Errors of the harness or the environment are errors: never pass, fail or xfail of a rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

INNER = """
import pytest
from conformance import judge
from conformance.world import Case

@pytest.mark.rules("ST-SPEC-1")
def test_a_rank_misses_a_module(world):
    result = world.run(Case("inner_tasks:needs_a_missing_module"))
    judge.all_returned(result, rule="ST-SPEC-1")

@pytest.mark.rules("ST-SPEC-2")
def test_a_rank_misses_numpy(world):
    result = world.run(Case("inner_tasks:object_collective_without_numpy"))
    judge.all_returned(result, rule="ST-SPEC-2")

@pytest.mark.rules("ST-SPEC-3")
def test_conforms(world):
    pass
"""

INNER_TASKS = """
def needs_a_missing_module(ctx):
    import shardspec_no_such_module  # noqa: F401

def object_collective_without_numpy(ctx):
    raise RuntimeError("Numpy is not available")
"""


@pytest.mark.parametrize(
    "xfails",
    [
        "",
        "test_inner.py::test_a_rank_misses_a_module  # known\n"
        "    whole test\n    ST-SPEC-1: raises ModuleNotFoundError\n"
        "test_inner.py::test_a_rank_misses_numpy  # known\n"
        "    whole test\n    ST-SPEC-2: raises RuntimeError\n",
        "test_inner.py::test_a_rank_misses_a_module  # known\n"
        "    ST-SPEC-1: raises ModuleNotFoundError\n"
        "test_inner.py::test_a_rank_misses_numpy  # known\n"
        "    ST-SPEC-2: raises RuntimeError\n",
    ],
    ids=["no-entry", "whole-test-entry", "rule-entry"],
)
def test_an_environment_error_on_a_rank_is_an_error_even_where_a_failure_is_known(pytester, xfails):
    pytester.makepyfile(test_inner=INNER, inner_tasks=INNER_TASKS)
    pytester.path.joinpath("xfails.txt").write_text(xfails or "# none\n")
    result = pytester.runpytest_subprocess(
        "-p", "conformance.plugin", "--world-sizes", "2", "--xfails", "xfails.txt",
        "--report-dir", "out",
    )  # fmt: skip
    assert result.ret == 3, result.stdout.str()[-3000:]
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "shardspec: harness or environment error: test_inner.py::test_a_rank_misses_a_module*",
            "shardspec: harness or environment error: test_inner.py::test_a_rank_misses_numpy*",
        ]
    )
    rules = json.loads((pytester.path / "out" / "rules.json").read_text())["rules"]
    assert rules["ST-SPEC-1"]["gloo ws2"] == "error"
    assert rules["ST-SPEC-2"]["gloo ws2"] == "error"
    assert rules["ST-SPEC-3"]["gloo ws2"] == "pass"


@pytest.mark.parametrize("module", ["numpy", "jsonschema"])
def test_a_driver_without_a_dependency_stops_before_any_test_with_one_line(tmp_path, module):
    """A planted broken environment: a module that cannot be found comes first on the path."""
    (tmp_path / module).mkdir()
    (tmp_path / module / "__init__.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{module}'\", name='{module}')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(TESTS)])}
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "run", "--", "-p", "no:cacheprovider"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 3, out[-3000:]
    assert f"shardspec: environment error: {module} is not installed" in out
    assert "Traceback" not in out
    assert "passed" not in out
