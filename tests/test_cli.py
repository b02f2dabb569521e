"""``python -m conformance``: replay, bench, and run under a launcher (torchrun)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
    done = conformance("-m", "conformance", "replay", "--world-size", "3", case)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "rank 0: returned [0, 3]",
        "rank 1: returned [1, 3]",
        "rank 2: returned [2, 3]",
    ]


def test_replay_of_a_failing_case_exits_non_zero_with_the_report():
    case = json.dumps({"task": "world_tasks:raise_on", "args": {"rank": 1}})
    done = conformance("-m", "conformance", "replay", "--world-size", "2", case)
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
    assert "2 passed, 1 failed" in out or "1 failed, 2 passed" in out, out + done.stderr
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
