"""The implementation never runs in the driver: a pure call (metadata, placements, layouts) runs in
the sandbox, a child process with no process group, so a crash or a hang there is a failed case
of the rule under test, with the report every case gets, and the run goes on to its table."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.golden import verify
from conformance.tasks import pure as pure_tasks
from conformance.world import Case, Died, Hung, Raised, Returned
from conformance.world.pool import make_sandbox

ROOT = Path(__file__).resolve().parents[2]


def run_suite(tmp_path: Path, impl: str, test: str, **env: str) -> tuple[str, dict]:
    """Run one suite test against a planted adapter, which must fail it (exit 1): its output and
    its per-rule cells (``rules.json``)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", test, "-p", "conformance.plugin",
         "-p", "no:cacheprovider", "--impl", impl, "--case-timeout", "3",
         "--report-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests" / "suite"), **env},
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, json.loads((tmp_path / "rules.json").read_text())["rules"]


def pure_column(rules: dict) -> dict[str, str]:
    """The cells of the column of tests that ran no case (pure calls): ``any``."""
    return {rule: cells["any"] for rule, cells in rules.items() if cells.get("any")}


def test_a_pure_call_that_crashes_its_process_is_a_failed_case_of_its_rule(tmp_path):
    out, rules = run_suite(
        tmp_path,
        "mutants:LAYOUT_CRASHES",
        "conformance/suite/test_dt_layout.py::test_trailing_coordinates_are_empty_at_the_end_of_the_dim",
    )
    assert "1 failed, 3 passed" in out.splitlines()[-1], out[-500:]
    assert "L=2, c=3 gave no answer [conformance.tasks.pure:local_shape_and_offset" in out
    assert "rank 0: process died with exit code -11" in out
    assert "symptom: dies" in out
    assert "replay: python -m conformance replay --backend gloo --world-size 1" in out
    # The crash blames the rule of the call (DT-LAYOUT-3 for a chunk's size); the others of
    # that test are not judged past it, and their cells show the tests that did judge them.
    assert pure_column(rules) == {
        "DT-LAYOUT-2": "pass", "DT-LAYOUT-3": "fail", "DT-LAYOUT-4": "pass"
    }  # fmt: skip


def test_a_pure_call_that_hangs_is_a_failed_case_of_its_rule(tmp_path):
    out, rules = run_suite(
        tmp_path,
        "mutants:VALIDATE_HANGS",
        "conformance/suite/test_st_validation.py::test_an_empty_box_overlaps_nothing",
    )
    assert "1 failed, 2 passed" in out.splitlines()[-1], out[-500:]
    assert re.search(r"rank 0: no answer after [\d.]+ s \(asleep, hung\)", out)
    assert "in st_validate" in out  # the hung call's stack
    assert "symptom: hangs" in out
    assert pure_column(rules) == {"ST-VALID-1": "fail", "ERR-7": "fail"}


def test_fixtures_verify_runs_pure_calls_in_the_sandbox_too():
    results = verify.verify("mutants:EVERY_LAYOUT_CRASHES", ["layouts"])
    assert results
    assert {r.status for r in results} == {"fail"}
    assert all("process died with exit code -11" in r.detail for r in results)


def test_the_sandbox_joins_no_process_group_and_survives_its_faults():
    sandbox = make_sandbox("fork", case_timeout_s=2.0)
    try:
        (first,) = sandbox.run(Case("world_tasks:has_process_group")).outcomes
        assert first == Returned(0, False)
        (died,) = sandbox.run(Case("world_tasks:segfault", {"rank": 0})).outcomes
        assert isinstance(died, Died)
        (hung,) = sandbox.run(Case("world_tasks:hang", {"rank": 0})).outcomes
        assert isinstance(hung, Hung)
        (again,) = sandbox.run(Case("world_tasks:has_process_group")).outcomes
        assert again == Returned(0, False)
    finally:
        sandbox.close()


def test_the_sandbox_that_raised_is_kept_and_one_that_faulted_is_replaced():
    """A pure check refuses half its inputs: a raise leaves the sandbox as it was (no process
    group to put out of step) and costs no new process; a hang or a crash does."""
    sandbox = make_sandbox("fork", case_timeout_s=2.0)
    try:
        sandbox.run(Case("world_tasks:whoami"))
        before = sandbox.pids()
        (raised,) = sandbox.run(Case("world_tasks:raise_everywhere")).outcomes
        assert isinstance(raised, Raised)
        sandbox.run(Case("world_tasks:whoami"))
        assert sandbox.pids() == before
        sandbox.run(Case("world_tasks:segfault", {"rank": 0}))
        sandbox.run(Case("world_tasks:whoami"))
        assert sandbox.pids() != before
    finally:
        sandbox.close()


def test_a_call_of_a_batch_has_the_outcome_of_its_own_case():
    """``conformance.tasks.pure:each`` returns, per call, what the call's own case gives: the
    value, or the exception's types and message (one trip for every coordinate of a layout)."""
    calls = [
        {"shards": [{"offsets": [0], "sizes": [2], "placement": "rank:0/cpu"}], "shape": [2]},
        {"shards": [], "shape": [2]},
    ]
    sandbox = make_sandbox("fork", case_timeout_s=5.0)
    try:
        batch = sandbox.run(pure_tasks.case("each", "reference", name="validate", calls=calls))
        (outcomes,) = batch.values()
        alone = [sandbox.run(pure_tasks.case("validate", "reference", **c)).outcomes[0]
                 for c in calls]  # fmt: skip
    finally:
        sandbox.close()
    assert outcomes[0] == alone[0] == Returned(0, None)
    assert isinstance(outcomes[1], Raised)
    assert (outcomes[1].types, outcomes[1].message) == (alone[1].types, alone[1].message)
    assert "ST-VALID-14" in outcomes[1].message


def test_a_batch_that_hangs_is_run_call_by_call_to_find_the_call_that_hung(tmp_path):
    out, rules = run_suite(
        tmp_path,
        "mutants:LAYOUT_HANGS_AT_THE_LAST_COORDINATE",
        "conformance/suite/test_dt_layout.py::test_local_shape_and_offset_of_every_coordinate",
    )
    assert re.search(r"rank 0: no answer after [\d.]+ s \(asleep, hung\)", out)
    assert "gave no answer [conformance.tasks.pure:local_shape_and_offset on 1 rank" in out
    assert "conformance.tasks.pure:each" not in out.split(" FAILURES ")[1]
    assert pure_column(rules)["ERR-7"] == "fail"


@pytest.mark.parametrize("fault", ["segv", "exit", "hang"])
def test_a_fault_that_fires_once_in_a_batch_of_pure_calls_fails_with_a_working_replay(
    tmp_path, fault
):
    """The batch crashed, exited or hung once, and no call alone does again: the batch's fault is
    the verdict (a flaky failure), never thrown away for the reruns that passed, and its replay
    line runs as printed."""
    flag = tmp_path / "fired"
    out, _ = run_suite(
        tmp_path,
        "mutants:LAYOUT_FAULTS_ONCE_IN_3D",
        "conformance/suite/test_dt_layout.py::test_local_shape_and_offset_of_every_coordinate",
        SHARDSPEC_PLANTED_FLAG=str(flag),
        SHARDSPEC_PLANTED_FAULT=fault,
    )
    assert flag.exists()
    failures = out.split(" FAILURES ")[1]
    assert "failed once, passed on replay (flaky)" in failures, failures[-3000:]
    shown = {"segv": "died with exit code -11", "exit": "died with exit code 1", "hang": "hung"}
    assert shown[fault] in failures, failures[-3000:]
    (replay,) = {line.strip().removeprefix("replay: ") for line in failures.splitlines()
                 if "replay: " in line and "conformance.tasks.pure:each" in line}  # fmt: skip
    assert " --impl mutants:LAYOUT_FAULTS_ONCE_IN_3D " in replay
    if fault != "segv":
        return  # the replay line is the same for every fault: run it once
    done = subprocess.run(
        replay.replace("python", sys.executable, 1), shell=True, cwd=ROOT,
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests" / "suite"),
             "SHARDSPEC_PLANTED_FLAG": str(flag), "SHARDSPEC_PLANTED_FAULT": fault},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("rank 0: returned [")


@pytest.fixture(autouse=True)
def _tasks_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "suite"))


def test_a_rank_fault_that_fires_once_in_a_suite_run_is_one_flaky_failure_of_one_rule(tmp_path):
    """A real rank fault in a whole suite test (not a planted driver-side failure): Hypothesis
    replays the failing example, it passes, and the report says so once, blaming the rule the
    failed check names; the test's other rules are blocked, not failed."""
    flag = tmp_path / "fired"
    out, rules = run_suite(
        tmp_path,
        "mutants:GATHER_FAILS_ONCE",
        "conformance/suite/test_st_gather.py::test_shard_then_gather_returns_the_source_exactly",
        SHARDSPEC_PLANTED_FLAG=str(flag),
    )
    assert flag.exists()
    failures = out.split(" FAILURES ")[1].split(" short test summary info ")[0]
    assert failures.count("failed once, passed on replay (flaky)") == 1, failures
    assert failures.count("raised RuntimeError: planted: fires once") == 1, failures
    verdicts = {rule: set(cells.values()) - {""} for rule, cells in rules.items()}
    failed = [rule for rule, seen in verdicts.items() if "fail" in seen]
    assert len(failed) == 1, verdicts
    assert all(seen <= {"blocked"} for rule, seen in verdicts.items() if rule not in failed)
