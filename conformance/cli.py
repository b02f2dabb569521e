"""``python -m conformance``: run the suite, replay cases, or measure the engine."""

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
from typing import TYPE_CHECKING, NoReturn

from conformance import hash_seed, options, paths

if TYPE_CHECKING:
    from conformance.world import Case
    from conformance.world.backends import Backend

SUITE = Path(__file__).parent / "suite"


class _Parser(argparse.ArgumentParser):
    """argparse's own errors say one line and exit 4, as every other usage error here (its
    default, a usage block and exit 2, is the code of an interrupted run)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(options.EXIT_USAGE)


sizes = options.argparse_type(options.world_sizes)
one_size = options.argparse_type(options.world_size)
positive_seconds = options.argparse_type(options.seconds)
seconds_or_zero = options.argparse_type(options.seconds_or_zero)
count = options.argparse_type(options.count)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        hash_seed.pin()
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    extra = argv[split + 1 :]
    if extra and args.command != "run":
        parser.error(f"only 'run' passes arguments after -- on to pytest: {' '.join(extra)}")
    try:
        return args.handler(args, extra)
    except options.UsageError as exc:
        print(f"python -m conformance {args.command}: error: {exc}", file=sys.stderr)
        return options.EXIT_USAGE


def build_parser() -> argparse.ArgumentParser:
    """Every command and option; the docs tests parse each command the pages show with it."""
    parser = _Parser(prog="python -m conformance", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the conformance suite (after --, pytest options)")
    run.add_argument("paths", nargs="*", help=f"test files or folders (default: {SUITE})")
    run.add_argument("--impl", default="reference", help="adapter name or module:attr")
    run.add_argument(
        "--backend",
        default="gloo",
        help="any backend torch.distributed knows (gloo, nccl, xccl, one the --impl module "
        "registers) or a device:backend map such as cpu:gloo,cuda:nccl",
    )
    run.add_argument(
        "--device",
        help="the ranks' device type, one device per rank (cpu, cuda, xpu, hpu, ...; default: "
        "the backend's own)",
    )
    run.add_argument(
        "--world-sizes",
        default="1,2,3,4",
        type=options.argparse_type(options.world_sizes_or_auto),
        help="comma-separated, 1..8; or auto, a validated set the backend can run here",
    )
    run.add_argument("--profile", default="quick", choices=["quick", "ci", "thorough"])
    run.add_argument(
        "--xfails",
        action="append",
        default=[],
        help="a file of known failures, layered on the shipped ones (repeatable)",
    )
    run.add_argument(
        "--no-shipped-xfails",
        action="store_true",
        help="judge without the shipped known failures: only those given with --xfails",
    )
    run.add_argument(
        "--survey",
        action="store_true",
        help="judge nothing: run every example and report each test's rules and what they "
        "showed (rules.json 'behaviours'), the material of a new release's known failures",
    )
    run.add_argument("--case-timeout", type=positive_seconds, default=30.0)
    run.add_argument(
        "--grace",
        type=seconds_or_zero,
        default=5.0,
        help="seconds ranks asleep, with none of their peers running, may sleep before the case "
        "is a hang (default 5)",
    )
    run.add_argument("--report-dir", help="write the per-rule results as rules.md and rules.json")
    run.add_argument("-n", "--workers", default=None, help="pytest-xdist workers (local worlds)")
    run.add_argument(
        "--skip-unavailable",
        action="store_true",
        help="skip world sizes the backend cannot run here, instead of an error (exit 3)",
    )
    run.add_argument(
        "--min-rules",
        type=options.argparse_type(options.at_least_zero),
        default=1,
        help="fail (exit 3) a run that judged fewer rules than this (default 1; 0: no check)",
    )
    run.set_defaults(handler=_run)

    replay = commands.add_parser(
        "replay", help="run a case (or several, in order) on a fresh world, print outcomes"
    )
    replay.add_argument(
        "cases", nargs="+", metavar="case", help="the case as JSON, as printed by a failing test"
    )
    replay.add_argument("--backend", default="gloo")
    replay.add_argument(
        "--impl",
        help="the implementation the case's task calls (the suite's tasks: default reference)",
    )
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

    matrix = commands.add_parser(
        "matrix", help="render the release matrix from the kept runs and any new runs' reports"
    )
    matrix.add_argument(
        "results", nargs="*", help="folders of new runs' reports (rules.json), e.g. by tox"
    )
    matrix.add_argument(
        "--keep",
        action="store_true",
        help="keep the new runs, each in place of its release's kept run (--runs)",
    )
    matrix.add_argument(
        "--runs", default=None, help="the folder of kept runs (default: conformance/runs)"
    )
    matrix.add_argument("--out", help="write the page there (default: print it)")
    matrix.set_defaults(handler=_matrix)

    skeleton = commands.add_parser(
        "skeleton",
        help="print an adapter to fill in: every method the capabilities need, not implemented",
    )
    skeleton.add_argument(
        "capabilities", nargs="+", metavar="capability", help="e.g. dtensor partial:sum"
    )
    skeleton.add_argument("--name", default="mine", help="the adapter's name (default mine)")
    skeleton.add_argument("--class-name", default="MyAdapter", help="(default MyAdapter)")
    skeleton.add_argument("--out", help="write the module there (default: print it)")
    skeleton.set_defaults(handler=_skeleton)

    fixtures = commands.add_parser("fixtures", help="golden vectors: generate, check, verify")
    fixtures.add_argument("action", choices=["generate", "check", "verify", "save-regression"])
    fixtures.add_argument("case", nargs="?", help="save-regression: the case JSON of a replay")
    fixtures.add_argument("--impl", default="reference", help="verify: adapter or module:attr")
    fixtures.add_argument("--files", help="verify: comma-separated file stems (default: all)")
    fixtures.add_argument("--fixtures-dir", help="verify: a copy of the vectors (default: shipped)")
    fixtures.add_argument("--world-size", type=one_size, help="save-regression (default: inferred)")
    fixtures.add_argument("--name", help="save-regression: file name without .json")
    fixtures.set_defaults(handler=_fixtures)

    findings = commands.add_parser(
        "findings",
        help="PyTorch's deviations as programs: check, replay, report, render the pages",
    ).add_subparsers(dest="action", required=True)
    check = findings.add_parser("check", help="replay every record on the installed PyTorch")
    check.add_argument("ids", nargs="*", help="record ids (default: every record)")
    check.add_argument("--record", action="store_true", help="write the outcomes seen instead")
    show = findings.add_parser("replay", help="run one record; print each rank's outcome")
    show.add_argument("ids", nargs=1, metavar="id")
    show.add_argument("--show", action="store_true", help="print the program too")
    show.add_argument(
        "--script", action="store_true", help="print it as a file torchrun runs; run nothing"
    )
    for command in (check, show):
        command.add_argument("--timeout", type=positive_seconds, default=10.0)
    render = findings.add_parser("render", help="FINDINGS.md from the records")
    changes = findings.add_parser("changes", help="RELEASES.md: what changed between releases")
    report = findings.add_parser("report", help="one finding as an issue body to paste upstream")
    report.add_argument("ids", nargs=1, metavar="id")
    drafting = findings.add_parser(
        "draft", help="a release's known-failures file from a survey of it (run --survey)"
    )
    drafting.add_argument("report_dir", help="the survey's --report-dir (its rules.json)")
    drafting.add_argument(
        "--comments-from",
        help="a known-failures file whose comments to keep where they still hold (default: the "
        "release's own, else the nearest older one the adapter ships)",
    )
    for command in (render, changes, drafting):
        command.add_argument("--out", help="write the page there (default: print it)")
    for command in (check, show, render, changes, report, drafting):
        command.set_defaults(handler=_findings)
    return parser


NEXT_COMMANDS = """\
next: python -m conformance run --impl torch    # your PyTorch, judged by the same rules
      python -m conformance run --profile ci    # the merge gate: the same draws every run
      python -m conformance rules               # every rule and the tests that cite it
      (adapters: conformance/adapters/README.md; GPUs: conformance/GATING.md; exit codes: README)"""


def _pytest_args(args: argparse.Namespace, extra: list[str]) -> list[str]:
    argv = [*(args.paths or [str(SUITE)]), "-p", "conformance.plugin"]
    argv += paths.pytest_isolation(extra)  # test ids and configuration as in a checkout
    chosen = args.world_sizes  # parsed by options.world_sizes_or_auto
    chosen = chosen if chosen == options.AUTO else ",".join(map(str, chosen))
    argv += ["--impl", args.impl, "--backend", args.backend, "--world-sizes", chosen]
    argv += ["--hypothesis-profile", args.profile, "--case-timeout", str(args.case_timeout)]
    argv += ["--grace", str(args.grace)]
    if args.device:
        argv += ["--device", args.device]
    for given in args.xfails:
        argv += ["--xfails", given]
    if args.no_shipped_xfails:
        argv.append("--no-shipped-xfails")
    if args.survey:
        argv.append("--survey")
    if args.report_dir:
        argv += ["--report-dir", args.report_dir]
    if args.skip_unavailable:
        argv.append("--skip-unavailable")
    argv += ["--min-rules", str(args.min_rules)]
    return argv + extra


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    import pytest

    from conformance.world import attach

    argv = _pytest_args(args, extra)
    if not attach.launched():
        if args.workers:
            argv += ["-n", args.workers]
        with _interruptible_run_folder():
            code = int(pytest.main(argv))
        if code == 0 and (args.impl, args.profile) == ("reference", "quick"):
            print(NEXT_COMMANDS)  # the default run, a newcomer's first: where to go from here
        return code

    # Under a launcher every process is a rank; rank 0 also drives (see conformance.world.attach).
    backend = _backend(args)
    ctx = attach.serve_attached(backend)
    if ctx.rank != 0:
        # A signal here (a cancelled job) tells rank 0, which reports the run incomplete.
        attach.post_interrupts(ctx, INTERRUPTED)
        attach.serve_cases(ctx)
        return 0
    server = threading.Thread(target=attach.serve_cases, args=(ctx,), daemon=True)
    server.start()
    attach.CURRENT = attach.AttachedWorld(backend, case_timeout_s=args.case_timeout)
    try:
        with _interruptible():
            return int(pytest.main([*argv, "-p", "no:xdist"]))
    finally:
        attach.CURRENT.close()
        server.join(timeout=10)


def _backend(args: argparse.Namespace) -> Backend:
    """The launched run's backend, resolved as the plugin resolves a local run's."""
    from conformance import adapters
    from conformance.world.backends import backend_named

    try:
        return backend_named(args.backend, args.device, adapters.user_modules(args.impl))
    except ValueError as exc:
        raise options.UsageError(str(exc)) from None


INTERRUPTED = 2  # pytest's own code for a run stopped by Ctrl-C (README: exit codes)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def _interruptible() -> Iterator[None]:
    """SIGTERM (a cancelled CI job, a launcher stopping its ranks) stops the run as Ctrl-C does:
    worlds close, the reports say the run is incomplete, and the exit code is 2. Only the first
    signal interrupts (``conformance.world.stop``)."""
    from conformance.world import stop

    def interrupt(signum: int, frame: object) -> None:
        if signum == signal.SIGINT and stop.REQUESTED.is_set():
            # A second Ctrl-C: the person wants out now, reports or not. (A launcher's repeated
            # SIGTERM is ignored: it would cut the reports short.)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt("Ctrl-C again: stopping without the reports")
        # Also a flag: an interrupt that lands inside a library that swallows it (a property's
        # shrinking) must still stop the run after the current test.
        stop.request(f"signal {signum}")

    previous = {signum: signal.signal(signum, interrupt) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def _interruptible_run_folder() -> Iterator[None]:
    """Every temporary file of the run (rank worlds' stores and logs, in xdist workers too) goes
    under one folder that is removed when the run ends, interrupted or not (``_interruptible``),
    so nothing is left behind."""
    folder = tempfile.mkdtemp(prefix="shardspec-run-")
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = folder
    try:
        with _interruptible():
            yield
    finally:
        if saved[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[0]
        tempfile.tempdir = saved[1]
        shutil.rmtree(folder, ignore_errors=True)


def _replay(args: argparse.Namespace, extra: list[str]) -> int:
    """Run cases, in order, on one fresh world (a case that fails only after others, DT-OP-9,
    prints them all). A case is data: it names one of the suite's tasks (or of a module that
    ``--task-module`` allows) and never the implementation, which comes from ``--impl``."""
    from conformance import adapters
    from conformance.world import Case, LocalWorld
    from conformance.world.protocol import SUITE_TASKS

    cases = [_replayed(text, args) for text in args.cases]
    impl = args.impl or ("reference" if all(_suite_task(c) for c in cases) else None)
    if impl is not None:  # the suite's tasks take it; another module's, where --impl gives it
        try:
            adapters.load(impl)
        except ValueError as exc:
            raise options.UsageError(f"--impl {exc}") from None
        cases = [Case(c.task, {**c.args, "impl": impl}) for c in cases]
    # A pure call (conformance.tasks.pure) runs as in a suite run: in a rank with no group.
    pure = [c.task.startswith(f"{SUITE_TASKS}.pure:") for c in cases]
    if any(pure) != all(pure):
        raise options.UsageError(f"pure calls ({SUITE_TASKS}.pure) replay apart from others")
    world = LocalWorld(
        1 if pure[0] else args.world_size,
        args.backend,
        case_timeout_s=args.timeout,
        process_group=not pure[0],
    )
    with world:
        for n, case in enumerate(cases, 1):
            result = world.run(case)
            if len(cases) > 1:
                print(f"case {n} of {len(cases)}: {case.task}")
            if not result.ok:
                print(result.report("the case did not return on every rank"), file=sys.stderr)
                return 1
            for outcome in result.outcomes:
                print(outcome.describe())
    return 0


def _suite_task(case: Case) -> bool:
    from conformance.world.protocol import SUITE_TASKS

    return case.task.startswith(SUITE_TASKS + ".")


def _replayed(text: str, args: argparse.Namespace) -> Case:
    """A case of the command line, checked: JSON of a task the replay may run, naming no
    implementation."""
    from conformance.world import Case
    from conformance.world.protocol import SUITE_TASKS

    try:
        case = Case.from_json(text)
    except (ValueError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        raise options.UsageError(
            f"the case must be JSON like the replay line prints: {exc}"
        ) from None
    module, _, function = case.task.partition(":")
    if not function.isidentifier():
        raise options.UsageError(f"task {case.task!r} does not name a function of its module")
    if not _suite_task(case) and module not in args.task_module:
        raise options.UsageError(
            f"task {case.task!r} is not one of the suite's ({SUITE_TASKS}.*); a case is data, "
            "so other code runs only where --task-module names its module"
        )
    if "impl" in case.args:
        raise options.UsageError(
            f"the case names an implementation (impl={case.args['impl']!r}); a case is data: "
            "give the implementation with --impl"
        )
    return case


def _rules(args: argparse.Namespace, extra: list[str]) -> int:
    from conformance import rules

    tests = [Path(p) for p in args.paths] or [SUITE]
    missing = [str(p) for p in tests if not p.exists()]
    if missing:
        raise options.UsageError(f"no such test file or folder: {', '.join(missing)}")
    print(rules.report(rules.load(), rules.citations(tests)))
    return 0


def _bench(args: argparse.Namespace, extra: list[str]) -> int:
    from conformance.benchmarks import engine as bench

    bench.report(args.world_sizes, cases=args.cases, spawn_cases=args.spawn_cases)
    return 0


def _matrix(args: argparse.Namespace, extra: list[str]) -> int:
    from conformance import matrix

    folder = Path(args.runs) if args.runs else matrix.KEPT
    new = []
    for results in args.results:
        runs = matrix.load_runs(Path(results))
        if not runs:
            raise options.UsageError(f"no rules.json under {results}")
        new += runs
    if args.keep:
        if not new:
            raise options.UsageError("--keep: name the folders of the runs to keep")
        for path in matrix.keep(new, folder):
            print(f"kept {path}", file=sys.stderr)
    runs = matrix.replacing(matrix.load_kept(folder), new)
    if not runs:
        raise options.UsageError(f"no runs kept in {folder} and none named")
    page = matrix.render(runs, matrix.COMMAND)
    if args.out:
        Path(args.out).write_text(page)
    else:
        print(page, end="")
    return 0


def _findings(args: argparse.Namespace, extra: list[str]) -> int:
    from conformance.findings import changes, check, issue, records, render

    if args.action in ("render", "changes"):
        page = (render if args.action == "render" else changes).page(records.load_all())
        if args.out:
            Path(args.out).write_text(page)
        else:
            print(page, end="")
        return 0
    if args.action == "draft":
        return _draft(args)
    if args.action in ("replay", "report"):
        chosen = [r for r in records.load_all() if r.id == args.ids[0]]
        if not chosen:
            raise options.UsageError(f"no such finding: {args.ids[0]}")
        if args.action == "report":
            print(issue.body(chosen[0]), end="")
            return 0
        if args.script:
            print(issue.script(chosen[0]), end="")
            return 0
        return check.replay_one(chosen[0], args.timeout, args.show)
    try:
        return check.check(args.ids, record=args.record, timeout_s=args.timeout)
    except ValueError as exc:
        raise options.UsageError(str(exc)) from None


def _draft(args: argparse.Namespace) -> int:
    """Print (or write) the drafted file; exit 1, naming them, where rules no record backs were
    left out."""
    import json

    from conformance import known_failures
    from conformance.findings import draft, records

    path = Path(args.report_dir, "rules.json")
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise options.UsageError(f"{path}: {exc}") from None
    if "behaviours" not in report:
        raise options.UsageError(f"{path} is no survey's report: run it with --survey")
    impl, _, build = report["run"]["implementation"].partition(" ")
    release = ".".join(map(str, known_failures.release_key(build)))
    comments = Path(args.comments_from) if args.comments_from else None
    if comments is None:
        comments = known_failures.default_for(impl, release).path
    entries = known_failures.parse(comments) if comments else []
    made = draft.draft(report, impl, release, records.load_all(), entries,
                       comments.name if comments else "no other file")  # fmt: skip
    if args.out:
        Path(args.out).write_text(made.text)
    else:
        print(made.text, end="")
    for test, rule, behaviours in made.unbacked:
        print(f"no record breaks {rule} in {release} as {test} showed it "
              f"({', '.join(behaviours)}): left out", file=sys.stderr)  # fmt: skip
    return 1 if made.unbacked else 0


def _skeleton(args: argparse.Namespace, extra: list[str]) -> int:
    from conformance.adapters import skeleton

    try:
        text = skeleton.render(args.capabilities, args.name, args.class_name)
    except ValueError as exc:
        raise options.UsageError(str(exc)) from None
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    return 0


def _fixtures(args: argparse.Namespace, extra: list[str]) -> int:
    from conformance.golden.cli import main as fixtures_main

    return fixtures_main(args)
