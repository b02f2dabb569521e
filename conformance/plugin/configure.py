"""The run's options, and the checks that refuse a run before its first test: a usage error (exit
4) for options that cannot mean anything, an environment error (exit 3) for a machine that cannot
run them. What they settle (the known failures, the ops, the run's header) goes on the config's
stash for the later steps."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from conformance import adapters, known_failures, options, paths, rank_devices, run_info
from conformance.ops import catalogue
from conformance.world import attach, harness
from conformance.world.backends import Backend, backend_named

XFAILS = pytest.StashKey[list[known_failures.XFail]]()
RUN_INFO = pytest.StashKey[dict[str, Any]]()
BORROWED = pytest.StashKey[list[Path]]()  # files of another release than the one judged
OPS = pytest.StashKey[list[str]]()
BACKEND = pytest.StashKey[Backend]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("shardspec", "shardspec conformance")
    group.addoption(
        "--impl",
        default="reference",
        help="implementation under test: a registered adapter name or 'module:attr'",
    )
    group.addoption(
        "--backend",
        default="gloo",
        help="process-group backend: any torch.distributed knows (gloo, nccl, xccl, one a "
        "package or the --impl module registers) or a device:backend map such as "
        "cpu:gloo,cuda:nccl (default gloo)",
    )
    group.addoption(
        "--device",
        default=None,
        help="the device type of the ranks' tensors, one device per rank (cpu, cuda, xpu, hpu, "
        "...; default: the backend's own, cpu for gloo, cuda for nccl)",
    )
    group.addoption(
        "--world-sizes",
        default="1,2,3,4",
        help="comma-separated world sizes to run (default 1,2,3,4; up to 8), or auto: the "
        "largest set whose ci draws were run against the known failures that the backend can "
        "run here (1,2,3,4, else 2, else 1)",
    )
    group.addoption(
        "--xfails",
        action="append",
        default=[],
        help="a file of known failures (test ids, rules, symptoms), layered on those shipped for "
        "the release judged (conformance/xfails/<adapter>/<release>.txt, or the adapter's own "
        "known_failures folders); repeatable",
    )
    group.addoption(
        "--no-shipped-xfails",
        action="store_true",
        help="judge without the shipped known failures: only the files given with --xfails",
    )
    group.addoption(
        "--survey",
        action="store_true",
        help="judge nothing: every rule of every test is known to fail in any way, so every "
        "example runs; the report lists each test's rules and the behaviours they showed "
        "(rules.json 'behaviours'), the material of a known-failures file",
    )
    group.addoption(
        "--case-timeout",
        type=float,
        default=30.0,
        help="seconds of CPU time a rank may spend on a case (wall time where the OS cannot "
        "say, and at most 10 times it; default 30)",
    )
    group.addoption(
        "--grace",
        type=float,
        default=5.0,
        help="seconds that ranks asleep with none of their peers running may sleep before the "
        "case is a hang (default 5; where the OS cannot say who sleeps, the seconds the other "
        "ranks get once one rank has raised or died)",
    )
    group.addoption(
        "--require-edges",
        action="store_true",
        help="make it an error (exit 3) when a test never draws an edge class it declares",
    )
    group.addoption(
        "--report-dir",
        default=None,
        help="write the per-rule results there as rules.md and rules.json",
    )
    group.addoption(
        "--skip-unavailable",
        action="store_true",
        help="skip the world sizes the backend cannot run here (too few GPUs, no NCCL) instead "
        "of stopping with an environment error (exit 3)",
    )
    group.addoption(
        "--min-rules",
        type=int,
        default=0,
        help="the fewest rules the run must judge (pass, fail or known failure); fewer is an "
        "error (exit 3), so that a gate cannot go green by skipping (python -m conformance "
        "run: 1 unless told)",
    )
    group.addoption(
        "--ops",
        default=None,
        help="the ops the per-op tests judge: core (the default), all (every op of the installed "
        "OpInfo database with a sample; the thorough profile's default) or comma-separated "
        "op names",
    )
    group.addoption(
        "--start-method",
        default=None,
        choices=["fork", "forkserver", "spawn"],
        help="how local ranks start (default: fork for CPU worlds, spawn on an accelerator)",
    )


def world_sizes(config: pytest.Config) -> list[int]:
    """The world sizes this run covers, validated; under a launcher, the launcher's; for
    ``auto``, the first validated set the backend can run here (``options.VALIDATED``)."""
    if attach.CURRENT is not None:
        return [attach.CURRENT.world_size]
    raw = config.getoption("--world-sizes")
    try:
        if raw.strip() == options.AUTO:
            backend = run_backend(config)
            return options.validated_sizes(lambda n: backend.unavailable_reason(n) is None)
        return options.world_sizes(raw)
    except ValueError as exc:
        raise pytest.UsageError(f"--world-sizes: {exc}") from None


def run_backend(config: pytest.Config) -> Backend:
    """The run's backend on its device (``--backend``, ``--device``), resolved once. A user's
    adapter module (``--impl module:attr``) is imported on every rank before its group starts,
    so the module may register the backend it names."""
    if BACKEND not in config.stash:
        impl = config.getoption("--impl")
        try:
            config.stash[BACKEND] = backend_named(
                config.getoption("--backend"),
                config.getoption("--device"),
                adapters.user_modules(impl),
            )
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        except ImportError as exc:
            raise pytest.UsageError(f"--impl {impl!r} cannot be loaded: {exc}") from None
    return config.stash[BACKEND]


def load_impl(spec: str) -> Any:
    """Resolve ``--impl`` (see ``conformance.adapters.load``) or stop with a usage error."""
    try:
        return adapters.load(spec)
    except ValueError as exc:
        raise pytest.UsageError(f"--impl {exc}") from None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rules(*ids): the spec rule ids a test checks")
    config.addinivalue_line(
        "markers", "edges(*families): the edge classes (conformance.edges) a test must draw"
    )
    config.addinivalue_line(
        "markers",
        "per_op(ops=None, core=None): a test run once per op of --ops (of those ops() gives, if "
        "given; core() for --ops core, if given): its op parameter fills the per-op table",
    )
    config.addinivalue_line(
        "markers",
        "volume(factor): a property that draws factor times the profile's examples (at least 1)",
    )
    config.addinivalue_line(
        "markers",
        "op_cover(variant): a per-op test whose covering examples hold every pair of its op's "
        "classes (conformance.op_cover)",
    )
    # The driver forks the ranks of every local world. Once a process's OpenMP pool has started
    # threads, a forked child's first parallel region hangs (libgomp is not fork-safe), and a
    # 1-rank world keeps the driver's thread count. The driver's own computing (oracles, an op's
    # single-device result) is small: it runs on one thread, so no pool starts.
    torch.set_num_threads(1)
    missing = harness.missing_driver_dependency()
    if missing:
        pytest.exit(f"shardspec: environment error: {missing}", returncode=harness.EXIT_CODE)
    world_sizes(config)
    _check_report_dir(config.getoption("--report-dir"))
    for option, allow_zero in (("--case-timeout", False), ("--grace", True)):
        try:
            options.seconds(config.getoption(option), allow_zero=allow_zero)
        except ValueError as exc:
            raise pytest.UsageError(f"{option}: {exc}") from None
    impl_name = config.getoption("--impl")
    impl = load_impl(impl_name)
    release = getattr(impl, "release", None)
    if config.getoption("--ops") not in (None, "core", "all"):
        chosen_ops(config)
    _check_unclaimed_ops(impl)
    try:
        rank_devices.use(run_backend(config))
        shipped = not config.getoption("--no-shipped-xfails")
        files = known_failures.layers(impl_name, impl, config.getoption("--xfails"), shipped)
        config.stash[XFAILS] = [e for c in files if c.path for e in known_failures.parse(c.path)]
    except (ValueError, OSError) as exc:
        raise pytest.UsageError(str(exc)) from None
    # The options are good (a usage error, exit 4, comes first); can this machine run them?
    cannot = _unwritable_step_summary() or _unavailable_sizes(config)
    if cannot:
        pytest.exit(f"shardspec: environment error: {cannot}", returncode=harness.EXIT_CODE)
    in_use = [f"{_relative(c.path)} ({c.note})" if c.path else c.note for c in files]
    if config.getoption("--survey"):
        config.stash[XFAILS] = []
        in_use = ["every failure of every rule (--survey: a survey, not a verdict)"]
    config.stash[RUN_INFO] = {
        "impl_release": release,
        "known_failures": "; ".join(in_use) or "none (--no-shipped-xfails)",
    }
    config.stash[BORROWED] = [c.path for c in files if c.borrowed and c.path]


def _unavailable_sizes(config: pytest.Config) -> str | None:
    """Why the backend cannot run some world size asked for, unless the user asked to skip those
    (``--skip-unavailable``): a GPU gate whose CUDA is broken must not go green on the few rules
    that need no world."""
    if attach.CURRENT is not None or config.getoption("--skip-unavailable"):
        return None
    backend = run_backend(config)
    reasons = {n: backend.unavailable_reason(n) for n in world_sizes(config)}
    missing = [n for n, reason in reasons.items() if reason]
    if not missing:
        return None
    return (
        f"--backend {backend.name} cannot run world size {','.join(map(str, missing))} here: "
        f"{reasons[missing[0]]}; ask for the sizes it can run (--world-sizes), or pass "
        "--skip-unavailable to skip them"
    )


def _check_report_dir(directory: str | None) -> None:
    """Make ``--report-dir`` now, so that a path that cannot hold the reports is a usage error
    before the first test, not a traceback after the last."""
    if directory is None:
        return
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
        probe = Path(directory, ".shardspec-write-check")
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise pytest.UsageError(
            f"--report-dir {directory}: cannot write the reports there ({exc.strerror or exc})"
        ) from None


def _unwritable_step_summary() -> str | None:
    """Why ``$GITHUB_STEP_SUMMARY``, where the table is appended, cannot be written, if so."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary:
        return None
    try:
        with open(summary, "a"):
            return None
    except OSError as exc:
        return f"GITHUB_STEP_SUMMARY={summary} cannot be written ({exc.strerror or exc})"


def _relative(path: Path) -> str:
    """A shipped file as ``conformance/xfails/...``; another as given."""
    try:
        return str(path.resolve().relative_to(paths.CHECKOUT))
    except ValueError:
        return str(path)


def header(config: pytest.Config) -> dict[str, str]:
    """The run's header (``conformance.run_info``), read once the Hypothesis profile is loaded."""
    return run_info.collect(
        impl=config.getoption("--impl"),
        backend=config.getoption("--backend"),
        world_sizes=",".join(map(str, world_sizes(config))),
        **config.stash[RUN_INFO],
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    return ["shardspec " + line for line in run_info.render_lines(header(config))]


def chosen_ops(config: pytest.Config) -> list[str]:
    """The ops ``--ops`` names (spec/dt-ops.md's catalogue), checked: a name the installed
    release's OpInfo database lacks is a usage error, said in one line."""
    if OPS not in config.stash:
        raw = ops_option(config)
        if raw == "core":
            config.stash[OPS] = list(catalogue.CORE_OPS)
        elif raw == "all":
            config.stash[OPS] = catalogue.all_ops()
        else:
            names = list(dict.fromkeys(n.strip() for n in raw.split(",") if n.strip()))
            unknown = [n for n in names if not catalogue.known(n)]
            if unknown or not names:
                raise pytest.UsageError(
                    f"--ops: {', '.join(unknown) or repr(raw)}: not an op of the OpInfo database "
                    f"of torch {torch.__version__} (core, all, or names such as add,softmax)"
                )
            config.stash[OPS] = names
    return config.stash[OPS]


def ops_option(config: pytest.Config) -> str:
    """``--ops`` as given, else the profile's default: ``all`` for thorough, ``core`` for the
    others."""
    profile = config.getoption("hypothesis_profile", None) or "quick"
    return config.getoption("--ops") or ("all" if profile == "thorough" else "core")


def _check_unclaimed_ops(impl: Any) -> None:
    """An adapter's ``unclaimed_ops``, where it lists them, names ops of the catalogue."""
    unclaimed = getattr(impl, "unclaimed_ops", None)
    if isinstance(unclaimed, (set, frozenset)) and unclaimed:
        unknown = sorted(op for op in unclaimed if not catalogue.known(op))
        if unknown:
            raise pytest.UsageError(
                f"--impl: unclaimed_ops names {', '.join(unknown)}, not ops of the OpInfo "
                f"database of torch {torch.__version__}"
            )
