"""``python -m conformance``: replay, bench, and run under a launcher (torchrun)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


def conformance(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_replay_prints_every_ranks_outcome():
    case = json.dumps({"task": "world_tasks:whoami", "args": {}})
    done = conformance(
        "-m", "conformance", "replay", "--task-module", "world_tasks", "--world-size", "3", case
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "rank 0: returned [0, 3]",
        "rank 1: returned [1, 3]",
        "rank 2: returned [2, 3]",
    ]


@pytest.mark.parametrize("bench", ["sharded_tensor", "dtensor"])
def test_a_reference_bench_runs_on_the_world_its_options_name(bench):
    """The benches take their world from the command line, as on a GPU runner (``--backend
    nccl``, spawned): here a spawned Gloo world of 3 ranks, which must divide the tensor."""
    done = conformance(
        "-m", f"conformance.benchmarks.{bench}", "--ranks", "3", "--start", "spawn",
        "--mib", "1", "--repeats", "1", timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("3-rank gloo world (spawn start), float32 510x510 ")


def test_replay_of_a_failing_case_exits_non_zero_with_the_report():
    case = json.dumps({"task": "world_tasks:raise_on", "args": {"rank": 1}})
    done = conformance(
        "-m", "conformance", "replay", "--task-module", "world_tasks", "--world-size", "2", case
    )
    assert done.returncode == 1
    assert "rank 1: raised ValueError: planted failure on rank 1" in done.stderr


def test_bench_prints_start_time_and_rates_with_the_spawn_ratio():
    done = conformance(
        "-m", "conformance", "bench", "--world-sizes", "2", "--cases", "5", "--spawn-cases", "1"
    )
    assert done.returncode == 0, done.stderr
    assert "4-rank world start" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("  2 ")]
    assert [row[1] for row in rows] == ["metadata", "data"]
    assert all(float(row[2]) > 0 and row[4].endswith("x") for row in rows)


def test_run_under_torchrun_uses_the_launchers_ranks_and_reports_a_hang():
    done = conformance(
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "conformance",
        "run",
        str(TESTS / "attached" / "attached_suite.py"),
        "--case-timeout",
        "3",
        "--",
        "-p",
        "no:cacheprovider",
        timeout=240,
    )
    out = done.stdout
    assert "3 passed, 1 failed" in out or "1 failed, 3 passed" in out, out + done.stderr
    assert "rank 1: no answer after" in out
    assert "in hang" in out
    assert done.returncode != 0


def test_run_writes_the_per_rule_reports_and_passes_options_after_the_dashes(tmp_path):
    done = conformance(
        "-m",
        "conformance",
        "run",
        "--world-sizes",
        "1,2",
        "--report-dir",
        str(tmp_path),
        "--",
        "-k",
        "layout",
        "-p",
        "no:cacheprovider",
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "shardspec: results per rule" in done.stdout
    summary = json.loads((tmp_path / "rules.json").read_text())["summary"]
    assert set(summary) == {"pass"}, summary
    assert "DT-LAYOUT-2" in (tmp_path / "rules.md").read_text()


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "--world-size", "2", "{not json"],
        ["replay", "--world-size", "2", "[1, 2]"],
        ["replay", "--world-size", "2", '{"task": "os:system", "args": {"command": "true"}}'],
        ["replay", "--world-size", "0", '{"task": "world_tasks:whoami"}'],
        ["replay", "--world-size", "2", "--timeout", "0", '{"task": "world_tasks:whoami"}'],
        ["replay", "--world-size", "2", "--timeout", "-1", '{"task": "world_tasks:whoami"}'],
        ["bench", "--world-sizes", "abc"],
        ["bench", "--cases", "0"],
        ["run", "--case-timeout", "0"],
        ["run", "--case-timeout", "nan"],
        ["run", "--world-sizes", "0,9"],
        ["run", "--impl", "nosuch"],
        ["run", "--", "--grace", "-1"],
        ["fixtures", "save-regression", "--world-size", "x", "{}"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_bad_input_is_one_clear_error_and_a_non_zero_exit(argv):
    done = conformance("-m", "conformance", *argv, timeout=60)
    assert done.returncode not in (0, 1), (done.returncode, done.stdout, done.stderr)
    out = done.stdout + done.stderr
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if "error" in line.lower() or ": " in line[:9]]
    assert 1 <= len(errors) <= 2, out  # pytest's ERROR: line may repeat its cause once
    assert "passed" not in out, out
    assert "failed" not in out, out


def test_sigterm_ends_a_run_with_its_reports_marked_incomplete_and_nothing_left(tmp_path):
    reports = tmp_path / "reports-of-the-sigterm-test"
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(TESTS)}
    run = subprocess.Popen(
        [sys.executable, "-m", "conformance", "run", "--world-sizes", "2", "--report-dir",
         str(reports), "--", "-p", "no:cacheprovider"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("shardspec-run-*/shardspec-w2-*")):
        assert run.poll() is None, "the run ended before a world started"
        assert time.monotonic() < deadline, "no world started"
        time.sleep(0.2)
    time.sleep(2)  # a test or two into the run
    run.terminate()
    out, _ = run.communicate(timeout=120)
    assert run.returncode == 2, out[-3000:]  # pytest's "interrupted"
    markdown = (reports / "rules.md").read_text()
    assert markdown.startswith("**INCOMPLETE: the run was interrupted; "), markdown[:300]
    data = json.loads((reports / "rules.json").read_text())
    assert data["run"]["incomplete"].startswith("INCOMPLETE: the run was interrupted")
    assert not list(tmp_path.glob("shardspec-*")), "a temporary folder was left behind"
    left = subprocess.run(["pgrep", "-f", str(reports)], capture_output=True, text=True)
    assert left.stdout.strip() == "", "a process of the run was left behind"
