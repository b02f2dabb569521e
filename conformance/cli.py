"""``python -m conformance``: run the suite, replay one case, or measure the engine."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conformance import options

SUITE = Path(__file__).parent / "suite"
SUITE_TASK_MODULES = ("conformance.tasks.sharded_tensor", "conformance.tasks.dtensor")


sizes = options.argparse_type(options.world_sizes)
one_size = options.argparse_type(options.world_size)
positive_seconds = options.argparse_type(options.seconds)
count = options.argparse_type(options.count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the conformance suite (after --, pytest options)")
    run.add_argument("paths", nargs="*", help=f"test files or folders (default: {SUITE})")
    run.add_argument("--impl", default="reference", help="adapter name or module:attr")
    run.add_argument("--backend", default="gloo", help="gloo, nccl or cpu:gloo,cuda:nccl")
    run.add_argument("--world-sizes", default="1,2,3,4", type=sizes, help="comma-separated, 1..8")
    run.add_argument("--profile", default="quick", choices=["quick", "ci", "thorough"])
    run.add_argument("--xfails", help="file of known failures: test ids, rules and symptoms")
    run.add_argument("--case-timeout", type=positive_seconds, default=30.0)
    run.add_argument("--report-dir", help="write the per-rule results as rules.md and rules.json")
    run.add_argument("-n", "--workers", default=None, help="pytest-xdist workers (local worlds)")
    run.set_defaults(handler=_run)

    replay = commands.add_parser("replay", help="run one case on a fresh world, print outcomes")
    replay.add_argument("case", help="the case as JSON, as printed by a failing test")
    replay.add_argument("--backend", default="gloo")
    replay.add_argument("--world-size", type=one_size, required=True)
    replay.add_argument("--timeout", type=positive_seconds, default=30.0)
    replay.add_argument(
        "--task-module",
        action="append",
        default=[],
        help="also allow tasks of this module (the suite's own, conformance.tasks.*, always are)",
    )
    replay.set_defaults(handler=_replay)

    bench = commands.add_parser("bench", help="measure world start-up and case throughput")
    bench.add_argument("--world-sizes", default="2,4,8", type=sizes)
    bench.add_argument("--cases", type=count, default=200, help="cases per measurement")
    bench.add_argument("--spawn-cases", type=count, default=3, help="cases for the spawn baseline")
    bench.set_defaults(handler=_bench)

    rules = commands.add_parser("rules", help="list every spec rule with the tests that cite it")
    rules.add_argument("paths", nargs="*", help=f"test files or folders (default: {SUITE})")
    rules.set_defaults(handler=_rules)

    matrix = commands.add_parser("matrix", help="render the release matrix from runs' reports")
    matrix.add_argument("results", help="a folder of runs' reports (rules.json), e.g. by tox")
    matrix.add_argument("--out", help="write the page there (default: print it)")
    matrix.set_defaults(handler=_matrix)

    fixtures = commands.add_parser("fixtures", help="golden vectors: generate, check, verify")
    fixtures.add_argument("action", choices=["generate", "check", "verify", "save-regression"])
    fixtures.add_argument("case", nargs="?", help="save-regression: the case JSON of a replay")
    fixtures.add_argument("--impl", default="reference", help="verify: adapter or module:attr")
    fixtures.add_argument("--files", help="verify: comma-separated file stems (default: all)")
    fixtures.add_argument("--fixtures-dir", help="verify: a copy of the vectors (default: shipped)")
    fixtures.add_argument("--world-size", type=one_size, help="save-regression (default: inferred)")
    fixtures.add_argument("--name", help="save-regression: file name without .json")
    fixtures.set_defaults(handler=_fixtures)

    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    extra = argv[split + 1 :]
    if extra and args.command != "run":
        parser.error(f"only 'run' passes arguments after -- on to pytest: {' '.join(extra)}")
    return args.handler(args, extra)


def _pytest_args(args: argparse.Namespace, extra: list[str]) -> list[str]:
    argv = [*(args.paths or [str(SUITE)]), "-p", "conformance.plugin"]
    sizes = ",".join(map(str, args.world_sizes))  # parsed by options.world_sizes
    argv += ["--impl", args.impl, "--backend", args.backend, "--world-sizes", sizes]
    argv += ["--hypothesis-profile", args.profile, "--case-timeout", str(args.case_timeout)]
    if args.xfails:
        argv += ["--xfails", args.xfails]
    if args.report_dir:
        argv += ["--report-dir", args.report_dir]
    return argv + extra


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    import pytest

    from conformance.world import attach

    argv = _pytest_args(args, extra)
    if not attach.launched():
        if args.workers:
            argv += ["-n", args.workers]
        with _interruptible_run_folder():
            return int(pytest.main(argv))

    # Under a launcher every process is a rank; rank 0 also drives (see conformance.world.attach).
    ctx = attach.serve_attached(args.backend)
    if ctx.rank != 0:
        attach.serve_cases(ctx)
        return 0
    server = threading.Thread(target=attach.serve_cases, args=(ctx,), daemon=True)
    server.start()
    attach.CURRENT = attach.AttachedWorld(args.backend, case_timeout_s=args.case_timeout)
    try:
        return int(pytest.main([*argv, "-p", "no:xdist"]))
    finally:
        attach.CURRENT.close()
        server.join(timeout=10)


@contextmanager
def _interruptible_run_folder() -> Iterator[None]:
    """Every temporary file of the run (rank worlds' stores and logs, in xdist workers too) goes
    under one folder that is removed when the run ends; SIGTERM stops the run as Ctrl-C does, so
    worlds close, reports say the run is incomplete, and nothing is left behind."""
    from conformance import plugin

    def interrupt(signum: int, frame: object) -> None:
        # Also a flag: an interrupt that lands inside a library that swallows it (a property's
        # shrinking) must still stop the run after the current test.
        plugin.STOP_REQUESTED.set()
        raise KeyboardInterrupt(f"signal {signum}")

    folder = tempfile.mkdtemp(prefix="shardspec-run-")
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = folder
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if saved[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[0]
        tempfile.tempdir = saved[1]
        shutil.rmtree(folder, ignore_errors=True)


def _replay(args: argparse.Namespace, extra: list[str]) -> int:
    from conformance.world import Case, LocalWorld

    try:
        case = Case.from_json(args.case)
    except ValueError as exc:  # json.JSONDecodeError is one
        print(f"replay: the case must be JSON like the replay line prints: {exc}", file=sys.stderr)
        return 2
    module = case.task.partition(":")[0]
    if module not in (*SUITE_TASK_MODULES, *args.task_module):
        print(
            f"replay: task {case.task!r} is not one of the suite's ({', '.join(SUITE_TASK_MODULES)}"
            "); a case is data, so other code runs only where --task-module names its module",
            file=sys.stderr,
        )
        return 2
    with LocalWorld(args.world_size, args.backend, case_timeout_s=args.timeout) as world:
        result = world.run(case)
    if result.ok:
        for outcome in result.outcomes:
            print(outcome.describe())
        return 0
    print(result.report("the case did not return on every rank"), file=sys.stderr)
    return 1


def _rules(args: argparse.Namespace, extra: list[str]) -> int:
    from conformance import rules

    print(rules.report(rules.load(), rules.citations([Path(p) for p in args.paths] or [SUITE])))
    return 0


def _bench(args: argparse.Namespace, extra: list[str]) -> int:
    from conformance.benchmarks import engine as bench

    bench.report(args.world_sizes, cases=args.cases, spawn_cases=args.spawn_cases)
    return 0


def _matrix(args: argparse.Namespace, extra: list[str]) -> int:
    from conformance import matrix

    runs = matrix.load_runs(Path(args.results))
    if not runs:
        print(f"no rules.json under {args.results}", file=sys.stderr)
        return 2
    findings = matrix.load_findings(Path(__file__).parent / "FINDINGS.md")
    page = matrix.render(runs, findings, f"python -m conformance matrix {args.results}")
    if args.out:
        Path(args.out).write_text(page)
    else:
        print(page, end="")
    return 0


def _fixtures(args: argparse.Namespace, extra: list[str]) -> int:
    from conformance.golden.cli import main as fixtures_main

    return fixtures_main(args)
