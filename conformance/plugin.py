"""The pytest plugin: options that choose what is tested and how, and the fixtures that give a
test its worlds. Load it with ``-p conformance.plugin`` (``python -m conformance run`` does)."""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import Phase, seed, settings
from hypothesis.errors import Flaky, Unsatisfiable

from conformance import (
    adapters,
    attribution,
    cost_report,
    edge_report,
    judge,
    known_failures,
    options,
    paths,
    profiles,
    rank_devices,
    rules,
    run_info,
    symptoms,
)
from conformance import report as rule_report
from conformance.ops import catalogue
from conformance.symptoms import Symptom
from conformance.tasks import pure as pure_tasks
from conformance.world import attach, harness, stop
from conformance.world.attach import AttachedWorld
from conformance.world.backends import backend_named
from conformance.world.harness import HarnessError
from conformance.world.ledger import LEDGER
from conformance.world.pool import World, WorldPool, make_sandbox
from conformance.world.protocol import Case, CaseResult

profiles.register()

_XFAILS = pytest.StashKey[list[known_failures.XFail]]()
_KNOWN_RULES = pytest.StashKey[dict[str, Symptom]]()
_EXPECTED_TO_FAIL = pytest.StashKey[known_failures.XFail]()
_RUN_INFO = pytest.StashKey[dict[str, Any]]()
_BORROWED = pytest.StashKey[bool]()
_OPS = pytest.StashKey[list[str]]()
# Per test, the entries that name it: (whether the entry is scoped to it, the entry).
_ENTRIES = pytest.StashKey[list[tuple[bool, known_failures.XFail]]]()


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
        help="process-group backend: gloo, nccl or cpu:gloo,cuda:nccl (default gloo)",
    )
    group.addoption(
        "--world-sizes",
        default="1,2,3,4",
        help="comma-separated world sizes to run (default 1,2,3,4; up to 8)",
    )
    group.addoption(
        "--xfails",
        default=None,
        help="file of known failures (test ids, rules, symptoms); default: the adapter's own, "
        "conformance/xfails/<name>.txt, if it has one",
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
        help="how local ranks start (default: fork for CPU worlds, spawn for CUDA)",
    )


def world_sizes(config: pytest.Config) -> list[int]:
    """The world sizes this run covers, validated; under a launcher, the launcher's."""
    if attach.CURRENT is not None:
        return [attach.CURRENT.world_size]
    try:
        return options.world_sizes(config.getoption("--world-sizes"))
    except ValueError as exc:
        raise pytest.UsageError(f"--world-sizes: {exc}") from None


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
        rank_devices.use(backend_named(config.getoption("--backend")))
        given = config.getoption("--xfails")
        if given:
            choice = known_failures.Choice(Path(given), "given with --xfails")
        else:
            choice = known_failures.default_for(impl_name, release)
        config.stash[_XFAILS] = known_failures.parse(choice.path) if choice.path else []
        config.option.xfails = str(choice.path) if choice.path else None
    except (ValueError, OSError) as exc:
        raise pytest.UsageError(str(exc)) from None
    # The options are good (a usage error, exit 4, comes first); can this machine run them?
    cannot = _unwritable_step_summary() or _unavailable_sizes(config)
    if cannot:
        pytest.exit(f"shardspec: environment error: {cannot}", returncode=harness.EXIT_CODE)
    in_use = f"{_relative(choice.path)} ({choice.note})" if choice.path else choice.note
    config.stash[_RUN_INFO] = {"impl_release": release, "known_failures": in_use}
    config.stash[_BORROWED] = choice.borrowed
    config.stash[edge_report.MAX_RANKS] = max(world_sizes(config))
    config.pluginmanager.register(edge_report, "shardspec-edges")
    config.pluginmanager.register(cost_report, "shardspec-costs")
    if not hasattr(config, "workerinput"):  # the xdist controller, or a run without xdist
        config.pluginmanager.register(_RuleResults(config), "shardspec-rule-results")
        edge_results = edge_report.EdgeResults(
            config.getoption("--require-edges"), max(world_sizes(config))
        )
        config.pluginmanager.register(edge_results, "shardspec-edge-results")
        config.pluginmanager.register(cost_report.CostResults(), "shardspec-cost-results")


def _unavailable_sizes(config: pytest.Config) -> str | None:
    """Why the backend cannot run some world size asked for, unless the user asked to skip those
    (``--skip-unavailable``): a GPU gate whose CUDA is broken must not go green on the few rules
    that need no world."""
    if attach.CURRENT is not None or config.getoption("--skip-unavailable"):
        return None
    backend = backend_named(config.getoption("--backend"))
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
        return str(path.resolve().relative_to(Path(__file__).parent.parent))
    except ValueError:
        return str(path)


def header(config: pytest.Config) -> dict[str, str]:
    """The run's header (``conformance.run_info``), read once the Hypothesis profile is loaded."""
    return run_info.collect(
        impl=config.getoption("--impl"),
        backend=config.getoption("--backend"),
        world_sizes=",".join(map(str, world_sizes(config))),
        **config.stash[_RUN_INFO],
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    return ["shardspec " + line for line in run_info.render_lines(header(config))]


def chosen_ops(config: pytest.Config) -> list[str]:
    """The ops ``--ops`` names (spec/dt-ops.md's catalogue), checked: a name the installed
    release's OpInfo database lacks is a usage error, said in one line."""
    if _OPS not in config.stash:
        raw = _ops_option(config)
        if raw == "core":
            config.stash[_OPS] = list(catalogue.CORE_OPS)
        elif raw == "all":
            config.stash[_OPS] = catalogue.all_ops()
        else:
            names = list(dict.fromkeys(n.strip() for n in raw.split(",") if n.strip()))
            unknown = [n for n in names if not catalogue.known(n)]
            if unknown or not names:
                raise pytest.UsageError(
                    f"--ops: {', '.join(unknown) or repr(raw)}: not an op of the OpInfo database "
                    f"of torch {torch.__version__} (core, all, or names such as add,softmax)"
                )
            config.stash[_OPS] = names
    return config.stash[_OPS]


def _ops_option(config: pytest.Config) -> str:
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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that asks for ``world`` runs once per world size of this run, unless it chooses
    its own sizes by taking a ``world_size`` argument; a ``per_op`` test runs once per op of
    ``--ops``."""
    own_arguments = inspect.signature(metafunc.function).parameters
    per_op = metafunc.definition.get_closest_marker("per_op")
    if per_op and "op" in own_arguments:
        ops = chosen_ops(metafunc.config)
        if "core" in per_op.kwargs and _ops_option(metafunc.config) == "core":
            ops = per_op.kwargs["core"]()  # the test's own core list (the gradient test's)
        if "ops" in per_op.kwargs:  # the ops the test can run: those with an in-place variant
            runs = set(per_op.kwargs["ops"]())
            ops = [op for op in ops if op in runs]
        if not ops:  # one skipped item with its reason: an empty parameter set breaks xdist
            why = f"--ops {_ops_option(metafunc.config)}: none of these ops is one this test runs"
            ops = [pytest.param(None, marks=pytest.mark.skip(reason=why), id="no-runnable-op")]
        metafunc.parametrize("op", ops)
    if "world" in metafunc.fixturenames and "world_size" not in own_arguments:
        sizes = world_sizes(metafunc.config)
        metafunc.parametrize("world_size", sizes, ids=[f"ws{n}" for n in sizes], scope="session")


class _AttachedPool:
    """A pool over the launcher's one world: other sizes skip. Its sandbox is the driver's own
    child, as off a launcher."""

    def __init__(self, world: AttachedWorld, case_timeout_s: float) -> None:
        self.world = world
        self.case_timeout_s = case_timeout_s
        self._sandbox: World | None = None

    def sandbox(self) -> World:
        if self._sandbox is None:
            self._sandbox = make_sandbox("fork", self.case_timeout_s)
        return self._sandbox

    def get(self, world_size: int) -> World:
        if world_size != self.world.world_size:
            pytest.skip(f"attached to a launcher's world of {self.world.world_size} ranks")
        return self.world

    def close(self) -> None:
        """The launcher owns the world; ``python -m conformance run`` stops its ranks."""
        if self._sandbox is not None:
            self._sandbox.close()


@pytest.fixture(scope="session")
def world_pool(pytestconfig: pytest.Config) -> Iterator[WorldPool | _AttachedPool]:
    """Every world of this test session; closed (no rank left running) when the session ends."""
    if attach.CURRENT is not None:
        pool = _AttachedPool(attach.CURRENT, pytestconfig.getoption("--case-timeout"))
        yield pool
        pool.close()
        return
    pool = WorldPool(
        pytestconfig.getoption("--backend"),
        start_method=pytestconfig.getoption("--start-method"),
        case_timeout_s=pytestconfig.getoption("--case-timeout"),
        grace_s=pytestconfig.getoption("--grace"),
    )
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def available_world_sizes(pytestconfig: pytest.Config) -> list[int]:
    """The world sizes of this run that can start here (for tests that draw a size)."""
    if attach.CURRENT is not None:
        return [attach.CURRENT.world_size]
    backend = backend_named(pytestconfig.getoption("--backend"))
    sizes = [n for n in world_sizes(pytestconfig) if backend.unavailable_reason(n) is None]
    if not sizes:
        pytest.skip(backend.unavailable_reason(world_sizes(pytestconfig)[0]) or "no world size")
    return sizes


@pytest.fixture
def world(world_pool: WorldPool | _AttachedPool, world_size: int, pytestconfig) -> World:
    """A started world of ``world_size`` ranks, shared by every test that uses that size."""
    reason = backend_named(pytestconfig.getoption("--backend")).unavailable_reason(world_size)
    if reason and attach.CURRENT is None:
        pytest.skip(reason)
    return world_pool.get(world_size)


@pytest.fixture
def pure(world_pool: WorldPool | _AttachedPool, impl_name: str) -> Callable[..., CaseResult]:
    """``pure(task, **args)`` runs ``conformance.tasks.pure:<task>`` with the implementation under
    test in the sandbox, a child process with no process group: a pure call of the
    implementation never runs in the driver, so its crash or hang is a failed case."""
    sandbox = world_pool.sandbox()

    def run(task: str, **args: Any) -> CaseResult:
        return sandbox.run(pure_tasks.case(task, impl_name, **args))

    return run


@pytest.fixture
def pure_each(
    world_pool: WorldPool | _AttachedPool, impl_name: str, pytestconfig: pytest.Config
) -> Callable[[str, list[dict[str, Any]]], list[CaseResult]]:
    """``pure_each(task, calls)`` runs pure task ``task`` once per argument set of ``calls`` in a
    single trip to the sandbox (``conformance.tasks.pure:each``): one result per call, as its
    own case would give it, to judge, report and replay alone; the trip has a case timeout for
    each call, as the calls alone would. Where the trip itself fails (a call hung, crashed or
    ended the sandbox), each call runs alone, so the one that did is found. If none faults
    alone, the fault fired in the batch only (a fault that fires sometimes): every call's result
    is then the batch's, with the batch's replay line, so the first call judged fails, and never
    passes because its rerun did."""
    sandbox = world_pool.sandbox()
    timeout_s = pytestconfig.getoption("--case-timeout")

    def run(task: str, calls: list[dict[str, Any]]) -> list[CaseResult]:
        batch = sandbox.run(
            pure_tasks.case("each", impl_name, name=task, calls=calls),
            timeout_s=timeout_s * max(1, len(calls)),
        )
        cases = [pure_tasks.case(task, impl_name, **args) for args in calls]
        if not batch.ok:
            alone = [sandbox.run(c) for c in cases]
            if batch.faulted and not any(r.faulted for r in alone):
                return [batch] * len(calls)
            return alone
        (outcomes,) = batch.values()
        each_s = batch.elapsed_s / max(1, len(calls))
        return [
            CaseResult(c, (o,), batch.world_size, batch.backend, each_s)
            for c, o in zip(cases, outcomes, strict=True)
        ]

    return run


@pytest.fixture
def run_case(world_pool: WorldPool | _AttachedPool, impl_name: str) -> Callable[..., CaseResult]:
    """``run_case(task, world_size, **args)`` runs the rank task ``task`` (``"dtensor:distribute"``
    for ``conformance.tasks.dtensor:distribute``, or a full ``module:function``) with the
    implementation under test on every rank of a world of ``world_size``; a case always carries
    the adapter's name, so ranks and its replay command load the same one."""

    def run(task: str, world_size: int, **args: Any) -> CaseResult:
        module = task.partition(":")[0]
        name = task if "." in module else f"conformance.tasks.{task}"
        return world_pool.get(world_size).run(Case(name, {**args, "impl": impl_name}))

    return run


@pytest.fixture(scope="session")
def impl(pytestconfig: pytest.Config) -> Any:
    """The implementation under test, as its adapter."""
    return load_impl(pytestconfig.getoption("--impl"))


@pytest.fixture(scope="session")
def impl_name(pytestconfig: pytest.Config) -> str:
    """``--impl`` as given: cases carry it, so ranks and replays load the same adapter."""
    return pytestconfig.getoption("--impl")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _label_with_rules(items)
    _mark_known_failures(config, items)
    if settings.default.derandomize:
        _seed_by_name(items)


def _seed_by_name(items: list[pytest.Item]) -> None:
    """Under a derandomized profile (``ci``, and the project's own tests), each property draws
    from a seed of its name. Hypothesis's own derandomization seeds from a digest of the test's
    source, so a refactor of a test body that changes nothing it draws or judges would still
    draw other examples and move cells of the table; a seed of the name keeps one verdict per
    commit and makes a refactor's verdicts comparable with the ones before it."""
    for item in items:
        test = getattr(item, "obj", None)
        if getattr(test, "is_hypothesis_test", False):
            name = f"{item.module.__name__}.{item.originalname}".encode()
            seed(int.from_bytes(hashlib.sha256(name).digest()[:8], "big"))(test)


def _label_with_rules(items: list[pytest.Item]) -> None:
    """Carry each test's rule ids, world size and suite id on its reports (they travel from
    xdist workers)."""
    for item in items:
        cited = [rule for marker in item.iter_markers("rules") for rule in marker.args]
        if cited:
            callspec = getattr(item, "callspec", None)
            size = callspec.params.get("world_size", "any") if callspec else "any"
            item.user_properties += [("rules", ",".join(cited)), ("world_size", str(size))]
            item.user_properties.append(("suite_id", suite_id(item)))
            if item.get_closest_marker("per_op") and callspec and callspec.params.get("op"):
                item.user_properties.append(("op", callspec.params["op"]))


def suite_id(item: pytest.Item) -> str:
    """The id a known-failures file names ``item`` by: its path from the folder that holds the
    ``conformance`` package (``conformance/suite/test_st_gather.py::test_gather[ws2]``), the same
    in a checkout, an installed wheel and whatever folder pytest took as its rootdir. A test
    outside that folder (a user's own) keeps its node id."""
    try:
        path = item.path.resolve().relative_to(paths.CHECKOUT)
    except ValueError:
        return item.nodeid
    _, sep, name = item.nodeid.partition("::")
    return path.as_posix() + sep + name


def _mark_known_failures(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A ``whole test`` entry makes its tests strict xfails; any other entry tells them which
    rules' failures, with which symptoms, to count and go on past (``judge.fail``)."""
    entries = config.stash[_XFAILS]
    used: set[int] = set()
    for item in items:
        key = suite_id(item)
        for entry in entries:
            if known_failures.matches(entry, key):
                item.stash.setdefault(_ENTRIES, []).append((entry.scoped_to(key), entry))
                if not entry.whole:
                    known = dict(item.stash.get(_KNOWN_RULES, {}))
                    for rule, symptom in entry.symptoms.items():
                        known[rule] = known.get(rule, frozenset()) | symptom
                    item.stash[_KNOWN_RULES] = known
                else:
                    item.add_marker(pytest.mark.xfail(reason=entry.reason, strict=True))
                    item.stash[_EXPECTED_TO_FAIL] = entry
                used.add(entry.line)
    path = config.getoption("--xfails")
    collected_files = {suite_id(item).partition("::")[0] for item in items}
    # A per-op test runs the ops --ops chose: an entry for another op is not stale, unless every
    # op of the catalogue ran.
    other_ops = frozenset()
    if _OPS in config.stash and _ops_option(config) != "all":
        other_ops = frozenset(
            suite_id(i).partition("[")[0] for i in items if i.get_closest_marker("per_op")
        )
    for entry in entries:
        if entry.line not in used and known_failures.stale(entry, collected_files, other_ops):
            where = f"{path}:{entry.line}"
            warnings.warn(
                f"{where}: xfail entry {entry.test_id!r} matches no collected test", stacklevel=1
            )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Tell the judge which rules' failures this test expects; report those it met."""
    judge.KNOWN.start(item.stash.get(_KNOWN_RULES, {}))
    LEDGER.start_test()
    with (
        _at_volume(item),
        _stop_at_the_first_failure(item),
        _known_failures_end_their_example(item),
    ):
        yield
    if item.get_closest_marker("volume"):
        item.user_properties.append(("volume_examples", judge.KNOWN.examples))
    if judge.KNOWN.seen:
        item.user_properties.append(("known", ",".join(sorted(judge.KNOWN.seen))))
        item.user_properties.append(("known_as", judge.KNOWN.shown_text()))
    if item.get_closest_marker("per_op"):
        item.user_properties += _whose_known_failures(item)


def _whose_known_failures(item: pytest.Item) -> list[tuple[str, str]]:
    """The known failures this test met, told apart for the per-op table: ``own_known``, the
    rules met that an entry scoped to this very test lists, and ``findings_own`` /
    ``findings_other``, the records named by the entries scoped to it (those that stand for
    this op, ``conformance.attribution``) and by those naming the whole test (every op). A
    strict xfail met its entry's rules (``whole``: own or other)."""
    entries = item.stash.get(_ENTRIES, [])
    whole = item.stash.get(_EXPECTED_TO_FAIL, None)
    met = set(judge.KNOWN.seen) | set(whole.rules if whole else ())
    own_rules = {r for scoped, e in entries if scoped for r in e.rules}
    op = item.callspec.params["op"]
    release = item.config.stash[_RUN_INFO]["impl_release"]
    own, other = set(), set()
    for scoped, entry in entries:
        if scoped and met & set(entry.rules):
            own.update(attribution.findings_of(entry.findings, met & set(entry.rules), op, release))
        elif not scoped and (met & set(entry.rules)) - own_rules:
            other.update(entry.findings)
    found = [("own_known", ",".join(sorted(met & own_rules)))]
    found += [("findings_own", ",".join(sorted(own))), ("findings_other", ",".join(sorted(other)))]
    if whole is not None:
        found.append(("whole", "own" if whole.scoped_to(suite_id(item)) else "other"))
    return found


def _with_settings(
    item: pytest.Item, change: Callable[[settings], settings]
) -> AbstractContextManager[None]:
    """Run ``item`` under ``change(its settings)`` (``profiles.changed``)."""
    return profiles.changed(getattr(item, "obj", None), change)


def _at_volume(item: pytest.Item) -> AbstractContextManager[None]:
    """A property marked ``volume(factor)`` draws ``factor`` times the examples of the profile:
    a pure property's calls cost microseconds in a sandbox already running, and rare layouts (an
    overlap between boxes that are not neighbours in any order) need thousands of draws; a world
    test whose cases cost milliseconds may double its draws to meet each of its classes, and a
    test run once per op of a catalogue draws a fraction of them. Each example stays one input,
    so a failure shrinks to a minimal one in seconds."""
    marker = item.get_closest_marker("volume")
    if marker is None:
        return nullcontext()
    (factor,) = marker.args
    return _with_settings(
        item,
        lambda current: settings(
            current, max_examples=max(1, round(current.max_examples * factor))
        ),
    )


def _stop_at_the_first_failure(item: pytest.Item) -> AbstractContextManager[None]:
    """A property that is a known failure (a strict xfail) need not be shrunk, nor searched for
    more bugs: both only re-run failing cases, and a known hang costs a grace period each time.
    Nor is its unshrunk example saved: a later run without the entry would replay it as the
    failure to show, unshrunk."""
    if item.stash.get(_EXPECTED_TO_FAIL, None) is None:
        return nullcontext()
    return _with_settings(
        item,
        lambda current: settings(
            current,
            phases=[phase for phase in current.phases if phase is not Phase.shrink],
            report_multiple_bugs=False,
            database=None,
        ),
    )


@contextmanager
def _known_failures_end_their_example(item: pytest.Item) -> Iterator[None]:
    """Each example of a property ends, as one that ran, at a known failure
    (``judge.KnownFailureMet``); the judge counts the examples and those that ended so.

    Hypothesis lets a plugin wrap the body it calls per example (``.hypothesis.inner_test``)."""
    handle = getattr(getattr(item, "obj", None), "hypothesis", None)
    inner = getattr(handle, "inner_test", None)
    if inner is None:
        yield
        return

    @functools.wraps(inner)
    def example(*args: Any, **kwargs: Any) -> None:
        judge.KNOWN.examples += 1
        try:
            inner(*args, **kwargs)
        except judge.KnownFailureMet:
            judge.KNOWN.ended_known += 1

    handle.inner_test = example
    try:
        yield
    finally:
        handle.inner_test = inner


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Put the rules a failed check enforces (``judge.fail``) on the report, for the table. A
    property whose every example met a known failure has nothing left to judge: Hypothesis
    calls it unsatisfiable, and it is reported as an expected failure instead."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call":
        return
    ran = LEDGER.sizes() or ([attach.CURRENT.world_size] if attach.CURRENT else [])
    report.user_properties.append(("sizes_ran", ",".join(map(str, ran))))
    if call.excinfo is None:
        if report.passed and judge.KNOWN.every_example_known():
            _every_example_known(report)
        return
    judges = "impl" in getattr(item, "fixturenames", ())
    no_verdict = _no_verdict(call.excinfo.value, judges)
    if no_verdict:
        # Neither a conformance failure nor the known failure it may look like.
        report.outcome = "failed"
        if hasattr(report, "wasxfail"):
            del report.wasxfail
        report.user_properties.append(("no_verdict", no_verdict))
        return
    entry = item.stash.get(_EXPECTED_TO_FAIL, None)
    if entry is not None and hasattr(report, "wasxfail"):
        _unless_the_known_symptom(report, entry, call.excinfo.value, item.config)
    violated = sorted(set(_violated(call.excinfo.value)))
    if violated:
        report.user_properties.append(("violated", ",".join(violated)))
    if isinstance(call.excinfo.value, Flaky) and report.failed:
        report.longrepr = _flaky_verdict(call.excinfo.value)
    failed_at = sorted(_failure_sizes(call.excinfo.value))
    report.user_properties.append(("failed_at", ",".join(map(str, failed_at))))
    if isinstance(call.excinfo.value, Unsatisfiable) and judge.KNOWN.seen:
        _every_example_known(report)


def _every_example_known(report: pytest.TestReport) -> None:
    report.outcome = "skipped"
    report.wasxfail = "every example met a known failure of " + ", ".join(sorted(judge.KNOWN.seen))


def _unless_the_known_symptom(
    report: pytest.TestReport, entry: known_failures.XFail, exc: BaseException, config
) -> None:
    """A test that is a known failure as a whole still fails unless its failure is a check's
    (``judge.fail``) that its entry lists, rule and symptom: an error of the suite, or another
    bug of the implementation, is never taken for the known one."""
    checks = [leaf for leaf in _leaves(exc) if hasattr(leaf, "violated")]
    seen = [(leaf.violated, getattr(leaf, "symptom", None)) for leaf in checks]
    if checks and all(entry.covers(violated, symptom) for violated, symptom in seen):
        return
    shown = "; ".join(
        f"{', '.join(violated) or 'no rule'} ({symptoms.render(symptom or ())})"
        for violated, symptom in seen
    )
    why = f"it fails {shown}" if checks else f"it is not a failed check ({type(exc).__name__})"
    listed = "; ".join(f"{rule} ({symptoms.render(s)})" for rule, s in entry.symptoms.items())
    del report.wasxfail
    report.outcome = "failed"
    report.longrepr = (
        f"shardspec: a new failure: {config.getoption('--xfails')}:{entry.line} lists "
        f"{entry.test_id} as failing {listed}, but {why}\n\n{report.longrepr}"
    )


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """Every exception a failure is made of: Hypothesis reports each distinct bug it found (and
    a flaky one) as an exception group, and wraps a ``BaseException`` such as pytest's
    ``Failed`` to put it in one."""
    yield exc
    for inner in getattr(exc, "exceptions", ()):
        yield from _leaves(inner.__cause__ or inner)


def _violated(exc: BaseException) -> Iterator[str]:
    """The rules named by a failure (``judge.fail``)."""
    for leaf in _leaves(exc):
        yield from getattr(leaf, "violated", ())


# How a test ends without a failure: skipped (a capability not claimed), a known failure met.
_NOT_FAILURES = (pytest.skip.Exception, pytest.xfail.Exception, pytest.exit.Exception)


def _no_verdict(exc: BaseException, judges: bool) -> str | None:
    """Why a test's end is no verdict on the implementation, if it is none: a harness or
    environment error (``conformance.world.harness``), or, in a test that judges an
    implementation (it takes ``impl``), an exception that no check raised. The implementation
    never runs in the driver (pure calls run in the sandbox), so such an exception is the
    suite's own error, or a result the suite cannot read; either way the rules were not
    judged."""
    leaves = list(_leaves(exc))
    harness = [leaf for leaf in leaves if isinstance(leaf, HarnessError)]
    if harness:
        return "harness or environment error: " + str(harness[0]).splitlines()[0]
    checks = any(hasattr(leaf, "violated") for leaf in leaves)
    if not judges or checks or isinstance(exc, _NOT_FAILURES):
        return None
    if isinstance(exc, Unsatisfiable) and judge.KNOWN.seen:
        return None  # every example met a known failure (see below)
    first_line = (str(exc).splitlines() or [""])[0]
    return f"suite error (no check failed): {type(exc).__name__}: {first_line}"


def _failure_sizes(exc: BaseException) -> set[int]:
    """The world size of each failed case (``judge.fail``)."""
    return {n for leaf in _leaves(exc) if (n := getattr(leaf, "world_size", None)) is not None}


def _flaky_verdict(exc: BaseException) -> str:
    """A property whose failing example passed when Hypothesis replayed it: one clear verdict and
    each distinct failure once (Hypothesis's own report nests it and repeats it)."""
    inner = list(_leaves(exc))[1:] or [exc]
    seen = dict.fromkeys(getattr(e, "msg", None) or f"{type(e).__name__}: {e}" for e in inner)
    return "\n\n".join(
        ["shardspec: failed once, passed on replay (flaky): a fault that fires sometimes "
         "is still a failure of the rule its check names", *seen]
    )  # fmt: skip


def _columns(properties: dict[str, str], verdict: str) -> list[str]:
    """The world sizes a test's verdict belongs to: its own parameter; for a property that draws
    its size, the size of the failing case if it failed, else every size it ran; ``any`` for a
    test that ran no case (a pure call in the driver, or a skip)."""
    if properties["world_size"] != "any":
        return [properties["world_size"]]
    failed_at = [n for n in properties.get("failed_at", "").split(",") if n]
    if failed_at and verdict in ("fail", "xfail"):
        return failed_at
    return [n for n in properties.get("sizes_ran", "").split(",") if n] or ["any"]


def _op_verdict(properties: dict[str, str], verdict: str) -> str:
    """An op's own verdict in a per-op test: a known failure of an entry scoped to the op is
    the op's (``xfail``); one of an entry naming every op (another behaviour, as a mesh whose
    ranks do not ascend) leaves the op's examples that ran past it to speak (``pass``), or none
    (``blocked``) where every example, or the strict xfail, ended at it."""
    own = bool(properties.get("own_known"))
    if verdict == "pass":
        return "xfail" if own else "pass"
    if verdict == "xfail":
        whole = properties.get("whole")
        return "xfail" if (whole == "own" if whole else own) else rule_report.BLOCKED
    return verdict


class _RuleResults:
    """Folds every test report that cites rules into the per-rule table, and prints it."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.table = rule_report.RuleTable(backend=config.getoption("--backend"))
        self.ops = rule_report.RuleTable(backend=config.getoption("--backend"))
        self.op_findings: dict[str, dict[str, set[str]]] = {}  # op -> own/other -> record ids
        self.known = {rule.id for rule in rules.load()}
        self.known_seen: dict[str, set[str]] = {}
        self.known_as: dict[str, dict[str, set[str]]] = {}  # test -> rule -> behaviours met
        self.collected = 0
        self.finished: set[str] = set()
        self.not_judged: list[str] = []
        self.session: pytest.Session | None = None
        self.interrupted = False

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = max(self.collected, len(session.items))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected = max(self.collected, len(ids))

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A run that met a harness or environment error ends as an error, whatever else it
        judged (``conformance.world.harness``); so does a finished run that judged fewer rules
        than ``--min-rules`` (no test collected, every test skipped)."""
        judged, least = len(self.table.judged()), self.config.getoption("--min-rules")
        option = self.config.option
        ran_tests = not (option.collectonly or getattr(option, "showfixtures", False))
        finished = ran_tests and not self.incomplete()
        if judged < least and finished and session.exitstatus in (0, 1, 5):
            self.not_judged.append(
                f"too few rules judged: {judged}, where --min-rules asks for {least}"
            )
        if self.not_judged and session.exitstatus in (0, 1, 5):
            session.exitstatus = harness.EXIT_CODE

    def incomplete(self) -> str | None:
        """Why the table does not cover the whole run (interrupted, tests not run), if so."""
        not_run = self.collected - len(self.finished)
        if not self.interrupted and not_run <= 0:
            return None
        cause = "the run was interrupted" if self.interrupted else "the run stopped early"
        return f"INCOMPLETE: {cause}; {not_run} of {self.collected} tests did not run"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.finished.add(report.nodeid)
        if stop.REQUESTED.is_set():
            self.interrupted = True
            if self.session is not None:
                self.session.shouldstop = "interrupted"
        properties = dict(report.user_properties)
        final = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
        if "no_verdict" in properties and final:
            kind, _, why = properties["no_verdict"].partition(": ")
            self.not_judged.append(f"{kind}: {report.nodeid}: {why}")
        if "rules" not in properties or not final:
            return
        skipped = report.skipped and isinstance(report.longrepr, tuple)
        reason = report.longrepr[2].removeprefix("Skipped: ") if skipped else ""
        verdict = rule_report.verdict_of(report.outcome, hasattr(report, "wasxfail"), reason)
        if report.failed and str(report.longrepr).startswith("[XPASS(strict)]"):
            verdict = "xpass"  # a known failure that no longer fails: fixed, or never drawn
        if "no_verdict" in properties:
            verdict = rule_report.ERROR
        violated = [r for r in properties.get("violated", "").split(",") if r in self.known]
        known = [r for r in properties.get("known", "").split(",") if r in self.known]
        key = properties.get("suite_id", report.nodeid)
        self.known_seen.setdefault(key, set()).update(known)
        shown = self.known_as.setdefault(key, {})
        for part in filter(None, properties.get("known_as", "").split(";")):
            rule, _, behaviours = part.partition("=")
            shown.setdefault(rule, set()).update(behaviours.split("|"))
        if "op" in properties:
            for whose in ("own", "other"):
                met = self.op_findings.setdefault(properties["op"], {}).setdefault(whose, set())
                met.update(filter(None, properties.get(f"findings_{whose}", "").split(",")))
        stopped_by = violated if verdict in ("fail", "xfail") else []
        rest = [r for r in properties["rules"].split(",") if r not in stopped_by + known]
        ended_early = stopped_by or (known and verdict == "xfail")
        for size in _columns(properties, verdict):
            if "op" in properties:
                self.ops.add([properties["op"]], size, _op_verdict(properties, verdict))
            self.table.add(stopped_by, size, verdict)
            self.table.add([r for r in known if r not in stopped_by], size, "xfail")
            self.table.add(rest, size, rule_report.BLOCKED if ended_early else verdict)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        self._report_unmet_known_failures(terminalreporter)
        for line in self.not_judged:
            terminalreporter.write_line(f"shardspec: {line}")
        incomplete = self.incomplete()
        if not self.table.cells and not incomplete:
            return
        order = [rule.id for rule in rules.load()]
        info = header(self.config)
        if incomplete:
            info = {"incomplete": incomplete, **info}
        terminalreporter.section("shardspec: results per rule")
        for line in run_info.render_lines(info):
            terminalreporter.write_line(line)
        terminalreporter.write_line("")
        terminalreporter.write_line(rule_report.render_text(self.table, order))
        markdown = (
            run_info.render_markdown(info) + "\n" + rule_report.render_markdown(self.table, order)
        )
        if self.ops.cells:
            terminalreporter.section("shardspec: results per op (spec/dt-ops.md)")
            terminalreporter.write_line(rule_report.render_text(self.ops, [], noun="op"))
            markdown += "\n### Per op\n\n" + rule_report.render_markdown(self.ops, [], noun="op")
        if incomplete:
            markdown = f"**{incomplete}.**\n\n{markdown}"
        directory = self.config.getoption("--report-dir")
        if directory:
            Path(directory).mkdir(parents=True, exist_ok=True)
            Path(directory, "rules.md").write_text(markdown)
            exit_code = int(self.session.exitstatus) if self.session is not None else None
            Path(directory, "rules.json").write_text(
                rule_report.render_json(
                    self.table,
                    order,
                    run=info,
                    exit_code=exit_code,
                    ops=self.ops,
                    op_findings=self.op_findings,
                )
            )
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a") as out:
                out.write("## shardspec conformance\n\n" + markdown)

    def _report_unmet_known_failures(self, terminalreporter) -> None:
        """Rule entries of the xfails file that no test of this run met, and behaviours listed
        for a met rule that none of its failures showed: the rule may be fixed (or fixed in
        part), or the run did not draw a case that shows it. A ci run is deterministic, so
        these lines say which symptoms a release's run really confirms."""
        path = self.config.getoption("--xfails")
        unmet_entries = 0
        for entry in self.config.stash[_XFAILS]:
            if entry.whole:
                continue  # a strict xfail: a test that no longer fails says so itself (XPASS)
            ran = [n for n in self.known_seen if known_failures.matches(entry, n)]
            met = set().union(*(self.known_seen[n] for n in ran))
            for rule in (r for r in entry.rules if r in met):
                shown = set().union(*(self.known_as.get(n, {}).get(rule, set()) for n in ran))
                never = sorted(str(b) for b in entry.symptoms[rule] if str(b) not in shown)
                if never:
                    terminalreporter.write_line(
                        f"{path}:{entry.line}: known failure of {rule} in {entry.test_id} met, "
                        f"but never as: {', '.join(never)}"
                    )
            unmet = [r for r in entry.rules if r not in met]
            if ran and unmet:
                unmet_entries += 1
                terminalreporter.write_line(
                    f"{path}:{entry.line}: known failure of {' '.join(unmet)} in "
                    f"{entry.test_id} not met in this run"
                )
        if self.config.stash[_BORROWED]:
            counts = self.table.counts()
            terminalreporter.write_line(
                f"{path} is another release's known failures (see the header). Against it this "
                f"release has {counts.get('fail', 0)} failing rules, "
                f"{counts.get('xpass', 0)} unexpected passes and {unmet_entries} rule entries "
                "not met: what this release changed, or what this run did not draw."
            )
