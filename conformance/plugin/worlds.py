"""The worlds a test runs its cases in: the session's pool of rank worlds, one per world size
(or the launcher's one world), and the sandbox where an implementation's pure calls run; the
fixtures that hand them to tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conformance.plugin.configure import load_impl, run_backend, world_sizes
from conformance.tasks import pure as pure_tasks
from conformance.world import attach, harness
from conformance.world.attach import AttachedWorld
from conformance.world.pool import World, WorldPool, make_sandbox
from conformance.world.protocol import Case, CaseResult


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
        run_backend(pytestconfig),
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
    backend = run_backend(pytestconfig)
    sizes = [n for n in world_sizes(pytestconfig) if backend.unavailable_reason(n) is None]
    if not sizes:
        pytest.skip(backend.unavailable_reason(world_sizes(pytestconfig)[0]) or "no world size")
    return sizes


@pytest.fixture
def world(world_pool: WorldPool | _AttachedPool, world_size: int, pytestconfig) -> World:
    """A started world of ``world_size`` ranks, shared by every test that uses that size."""
    reason = run_backend(pytestconfig).unavailable_reason(world_size)
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
        return [  # each checked as its own case's result would be (an unwritten method)
            harness.check(CaseResult(c, (o,), batch.world_size, batch.backend, each_s))
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
