"""``python -m conformance``: replay, bench, and run under a launcher (torchrun)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conformance import options

TESTS = Path(__file__).parent


def conformance(
    *args: str, timeout: float = 120, cwd: Path | None = None, env: dict | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        cwd=cwd,
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


def test_replay_of_several_cases_runs_them_in_order_on_one_world():
    """A case that fails only after others (DT-OP-9) replays with them: one world, in order."""
    case = json.dumps({"task": "world_tasks:calls_so_far", "args": {}})
    done = conformance(
        "-m", "conformance", "replay", "--task-module", "world_tasks", "--world-size", "2",
        case, case,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "case 1 of 2: world_tasks:calls_so_far",
        "rank 0: returned 1",
        "rank 1: returned 1",
        "case 2 of 2: world_tasks:calls_so_far",
        "rank 0: returned 2",
        "rank 1: returned 2",
    ]


@pytest.mark.parametrize("seed", [None, "random", "1"])
def test_every_rank_hashes_under_the_pinned_seed_whatever_the_callers(seed):
    """PyTorch's choice among equally cheap strategies follows string hashing: a command of the
    suite restarts itself under one hash seed, which its forked ranks inherit."""
    from conformance import hash_seed

    environment = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    if seed is not None:
        environment["PYTHONHASHSEED"] = seed
    pinned = subprocess.run(
        [sys.executable, "-c", "print(hash('shardspec'))"],
        capture_output=True,
        text=True,
        env={**environment, "PYTHONHASHSEED": hash_seed.SEED},
        check=True,
    ).stdout.strip()
    case = json.dumps({"task": "world_tasks:string_hash", "args": {"text": "shardspec"}})
    environment["PYTHONPATH"] = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "replay", "--task-module", "world_tasks",
         "--world-size", "2", case],
        capture_output=True, text=True, timeout=120, env=environment,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"rank {r}: returned {pinned}" for r in (0, 1)]


@pytest.mark.parametrize("seed", [None, "1"])
def test_a_command_restarts_itself_with_its_arguments_once(monkeypatch, seed):
    """The restart keeps the command line and happens once: under the pinned seed, ``pin`` is
    a no-op (a launcher's rank, the restarted command itself)."""
    from conformance import hash_seed

    if seed is None:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    else:
        monkeypatch.setenv("PYTHONHASHSEED", seed)
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")  # the restart may set it (a -u caller's)
    monkeypatch.setattr(sys, "argv", ["conformance", "findings", "check", "some-id"])
    restarted = []
    monkeypatch.setattr(hash_seed.os, "execv", lambda path, argv: restarted.append(argv))
    hash_seed.pin()
    assert restarted == [[sys.executable, "-m", "conformance", "findings", "check", "some-id"]]
    assert os.environ["PYTHONHASHSEED"] == hash_seed.SEED
    restarted.clear()
    hash_seed.pin()
    assert restarted == []


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


def _child_with_rank(parent: int, rank: int) -> int:
    """The pid of the launcher's worker process of rank ``rank``."""
    for child in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((child / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (child / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and f"RANK={rank}".encode() in environ:
            return int(child.name)
    raise AssertionError(f"no worker of rank {rank} under {parent}")


@pytest.mark.parametrize("stopped", ["the launcher", "rank 1 alone"])
def test_an_interrupted_launcher_run_writes_incomplete_reports_from_rank_0(tmp_path, stopped):
    """A cancelled job's SIGTERM reaches the launcher (which passes it to every rank) or one
    rank: rank 0 still writes its reports, marked incomplete, with exit code 2 in rules.json
    (the launcher's own exit code replaces the ranks')."""
    started, reports = tmp_path / "started", tmp_path / "reports"
    env = {**os.environ, "PYTHONPATH": str(TESTS), "SHARDSPEC_STARTED": str(started)}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "conformance", "run", str(TESTS / "attached" / "long_suite.py"),
         "--report-dir", str(reports), "--", "-p", "no:cacheprovider"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not started.exists():
        assert launcher.poll() is None, launcher.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.2)
    if stopped == "the launcher":
        launcher.terminate()
    else:
        os.kill(_child_with_rank(launcher.pid, 1), signal.SIGTERM)
    out, _ = launcher.communicate(timeout=120)
    data = json.loads((reports / "rules.json").read_text())
    assert data["exit_code"] == 2, out[-3000:]
    assert data["run"]["incomplete"].startswith("INCOMPLETE: the run was interrupted"), data
    assert (reports / "rules.md").read_text().startswith("**INCOMPLETE: the run was interrupted")


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
        "trailing_coordinates",
        "-p",
        "no:cacheprovider",
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "shardspec: results per rule" in done.stdout
    summary = json.loads((tmp_path / "rules.json").read_text())["summary"]
    assert set(summary) == {"pass"}, summary
    assert "DT-LAYOUT-2" in (tmp_path / "rules.md").read_text()


EVIL_CASE = '{"task": "conformance.tasks.dtensor:distribute", "args": {"impl": "evilmod:ADAPTER"}}'


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "--world-size", "2", "{not json"],
        ["replay", "--world-size", "2", "[1, 2]"],
        ["replay", "--world-size", "2", '{"task": "os:system", "args": {"command": "true"}}'],
        ["replay", "--world-size", "0", '{"task": "world_tasks:whoami"}'],
        ["replay", "--world-size", "2", "--timeout", "0", '{"task": "world_tasks:whoami"}'],
        ["replay", "--world-size", "2", "--timeout", "-1", '{"task": "world_tasks:whoami"}'],
        ["replay", "--world-size", "1", EVIL_CASE],
        ["replay", "--world-size", "1", '{"task": "conformance.tasks.pure:pickle.loads"}'],
        [
            "replay",
            "--world-size",
            "1",
            "--impl",
            "nosuch",
            '{"task": "conformance.tasks.pure:placement"}',
        ],
        ["bench", "--world-sizes", "abc"],
        ["bench", "--cases", "0"],
        ["run", "--case-timeout", "0"],
        ["run", "--case-timeout", "nan"],
        ["run", "--world-sizes", "0,9"],
        ["run", "--bogus"],
        ["run", "--impl", "nosuch"],
        ["run", "--impl", "conformance.adapters.reference:ReferenceAdapter"],
        ["run", "--impl", "os:path"],
        ["run", "--impl", "os.path:join"],
        ["run", "--report-dir", "/proc/version"],
        ["run", "--grace", "-1"],
        ["run", "--", "--grace", "-1"],
        ["run", "--", "--ops", "add,no.such.op"],
        ["rules", "/nonexistent"],
        ["matrix", "/nonexistent"],
        ["fixtures", "save-regression", "--world-size", "x", "{}"],
        ["fixtures", "save-regression", "{bad"],
        ["fixtures", "save-regression", "[1]"],
        ["fixtures", "verify", "--impl", "nosuch"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_bad_input_is_one_line_and_exit_code_4_before_anything_runs(argv, tmp_path):
    done = conformance("-m", "conformance", *argv, timeout=60, cwd=tmp_path)
    assert done.returncode == 4, (done.returncode, done.stdout, done.stderr)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines


def test_a_case_cannot_import_code_through_its_implementation(tmp_path):
    """A replay string is data: ``args.impl`` naming a module in the working folder is refused
    before anything is imported; the implementation comes from ``--impl``."""
    (tmp_path / "evilmod.py").write_text(
        "import pathlib\npathlib.Path('evil-ran').touch()\nADAPTER = None\n"
    )
    done = conformance("-m", "conformance", "replay", "--world-size", "1", EVIL_CASE, cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    assert "give the implementation with --impl" in done.stderr
    assert not (tmp_path / "evil-ran").exists()


def test_the_readme_documents_exit_codes_0_to_4():
    readme = (TESTS.parents[1] / "README.md").read_text()
    documented = readme.split("**Exit codes.**")[1].split("\n\n")[0]
    assert re.findall(r"`(\d)`:", documented) == ["0", "1", "2", "3", "4"]


@pytest.mark.parametrize(
    ("code", "argv", "env"),
    [
        (0, ["run", "--world-sizes", "1", "--", "-k", "needs_an_int"], {}),
        (1, ["run", "--impl", "torch", "--no-shipped-xfails", "--world-sizes", "1",
             "conformance/suite/test_st_sharding_spec.py", "--", "-k", "needs_an_int"], {}),
        (3, ["run", "--backend", "nccl", "--world-sizes", "1"], {}),
        (3, ["run", "--world-sizes", "1", "--", "-k", "no_test_has_this_name"], {}),
        (3, ["run", "--world-sizes", "1"], {"GITHUB_STEP_SUMMARY": "/proc/no/such/file"}),
        (4, ["run", "--world-sizes", "9"], {}),
    ],
    ids=["judged as listed", "an unlisted failure", "a backend that cannot run the sizes",
         "no rule judged", "an unwritable step summary", "bad options"],
)  # fmt: skip
def test_each_exit_code_the_readme_documents(code, argv, env, tmp_path):
    """Exit code 2, an interrupted run, has tests of its own (SIGTERM, above and below)."""
    if code == 3 and "nccl" in argv and torch.cuda.is_available():
        pytest.skip("this machine can run NCCL")
    done = conformance("-m", "conformance", *argv, cwd=TESTS.parents[1], env=env, timeout=300)
    assert done.returncode == code, done.stdout[-3000:] + done.stderr[-3000:]


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


def test_ops_named_on_the_command_line_are_the_ones_judged(tmp_path):
    """``--ops`` parametrizes the per-op test; batch_norm, whose driver-side calls once left
    the forked ranks hung in their first parallel region, runs to a verdict."""
    done = conformance("-m", "conformance", "run", "--world-sizes", "1,2", "--", "--ops",
                       "nn.functional.batch_norm,softmax", "-k", "test_an_op_on",
                       timeout=300, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout
    assert "nn.functional.batch_norm  pass" in done.stdout


@pytest.mark.parametrize(
    ("gpus", "chosen"), [(1, [1]), (2, [2]), (3, [2]), (4, [1, 2, 3, 4]), (8, [1, 2, 3, 4])]
)
def test_auto_world_sizes_are_the_largest_validated_set_the_devices_allow(gpus, chosen):
    """A gate on a runner of any size meets only the ci draws the known failures were made from
    (1 to 4 together, 2 alone, 1 alone), never a set nobody has run."""
    assert options.validated_sizes(lambda n: n <= gpus) == chosen
    assert tuple(chosen) in options.VALIDATED


def test_auto_world_sizes_on_gloo_are_1_to_4(tmp_path):
    done = conformance(
        "-m", "conformance", "run", "--world-sizes", "auto", "--", "-k", "needs_an_int",
        "-p", "no:cacheprovider", cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^shardspec world sizes: +1,2,3,4$", done.stdout, re.MULTILINE)
