"""Local worlds: N rank processes on this machine, started once and reused for many cases.

The driver talks to each rank over a pipe and watches each process's sentinel, so it always knows
whether a rank answered, raised, hung or died. A world that saw a hang or a death is torn down
(its ranks killed, their stacks kept for the report) and the next case starts a fresh one.
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing as mp
import os
import pickle
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import torch.distributed as dist

from conformance.world import costs, harness, step
from conformance.world.backends import Backend, backend_named, default_start_method
from conformance.world.costs import COSTS
from conformance.world.harness import HarnessError
from conformance.world.idle import SleepWatch, thread_count
from conformance.world.ledger import LEDGER
from conformance.world.protocol import Case, CaseResult, Died, Hung, Outcome, Returned
from conformance.world.rank import (
    RankContext,
    die_with_parent,
    drop_driver_tracers,
    init_group,
    isolate_from_driver_terminal,
    serve,
    share_the_cores,
)

# A case ends early once every rank yet to answer has slept (idle.SleepWatch) this long: the grace
# period, but never less than this floor, which a correct rank waiting on a busy peer outlasts.
_MIN_SLEEP_S = 0.5
_SAMPLE_EVERY_S = 0.1
# A case whose ranks neither sleep nor compute (starved of cores, or stopped) ends after this
# many case timeouts of wall time.
WALL_FACTOR = 10
# A world whose ranks hold this many threads more than when it started is replaced before its
# next case. Each process group holds threads (a Gloo group: an event loop and two workers; an
# NCCL one: its watchdogs) that wake now and then even when idle; an implementation makes groups
# for every mesh a case builds (PyTorch's DeviceMesh does), and over a run a persistent world
# gathers hundreds, whose wake-ups took most of a 2-core machine's time (load 90, three quarters
# of it in the kernel). A forked world starts in tens of milliseconds, so recycling one every few
# dozen cases costs far less than its idle groups.
MAX_NEW_RANK_THREADS = 90
_one_world = 0  # > 0 while cases must run on the world the first of them ran on (one_world)


@contextlib.contextmanager
def one_world() -> Iterator[None]:
    """The cases run inside this block on the same processes, never on a world replaced for its
    threads in between: a test that compares a case with one run after it on the same world (an
    op's result after other ops, DT-OP-9) needs them. A fault still replaces the world, as
    ever."""
    global _one_world
    _one_world += 1
    try:
        yield
    finally:
        _one_world -= 1


class WorldStartError(HarnessError, RuntimeError):
    """The ranks could not form a process group; the message carries each rank's log."""


def read(conn: Connection) -> bytes | None:
    """The next message on ``conn``, or ``None`` where the other end has closed it: at the end of
    its messages (EOF), or with a message it never read, which resets the connection
    (``ConnectionResetError``): a rank killed while the driver's step check waited for it."""
    try:
        return conn.recv_bytes()
    except (EOFError, ConnectionResetError):
        return None


class _PipeChannel:
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def receive(self) -> bytes | None:
        return read(self._conn) or None

    def send(self, payload: bytes) -> None:
        self._conn.send_bytes(payload)


def _rank_main(
    rank: int,
    world_size: int,
    backend: Backend,
    store_path: str,
    conn: Connection,
    inherited: list[Connection],
    log_path: str,
    pg_timeout_s: float | None,
) -> None:
    """Entry point of a local rank process; ``pg_timeout_s=None``: a sandbox, with no group."""
    for other in inherited:
        other.close()
    _redirect_output(log_path)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    die_with_parent()
    drop_driver_tracers()
    isolate_from_driver_terminal()
    share_the_cores(world_size)
    os.environ["GLOO_SOCKET_IFNAME"] = _loopback_interface()
    try:
        if pg_timeout_s is not None:
            store = dist.FileStore(store_path, world_size)
            init_group(backend, rank, world_size, store, pg_timeout_s)
    except Exception:
        conn.send_bytes(pickle.dumps(("init-error", traceback.format_exc())))
        return
    conn.send_bytes(pickle.dumps(("ready", os.getpid())))
    serve(RankContext(rank, world_size, backend), _PipeChannel(conn))


def _redirect_output(log_path: str) -> None:
    """Send the rank's stdout and stderr (and fatal-error dumps) to its own log file.

    Under pytest-xdist the inherited stdout is the worker's channel to the controller; a rank
    must never write there.
    """
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def _loopback_interface() -> str:
    names = [name for _, name in socket.if_nameindex()]
    return next((n for n in ("lo", "lo0") if n in names), names[0])


def _without_fork_ancestry(stack: str) -> str:
    """Drop the driver's frames below ``_rank_main`` that a forked rank's stack still shows."""
    kept, skipping = [], False
    for line in stack.splitlines():
        if not line.startswith("  "):
            skipping = False
        if not skipping:
            kept.append(line)
        skipping = skipping or line.endswith(" in _rank_main")
    return "\n".join(kept)


class LocalWorld:
    """``world_size`` ranks on ``backend``, started on first use and restarted after a fault.

    ``case_timeout_s`` bounds a case: in CPU time, once a rank yet to answer has computed that
    long in it (``conformance.world.idle``: a verdict does not depend on how loaded the machine
    is), and in wall time where the OS cannot tell, or after ``WALL_FACTOR`` times it.
    A case also ends, as a hang of the ranks yet to answer, once every one of them has slept for
    ``grace_s`` (next to no CPU, a thread awake now and then: ``conformance.world.idle``):
    nothing in the world can wake them, so a known hang costs the grace period, not the case
    timeout. That is how ranks stuck in a collective a failed rank left end; a rank that still
    computes after another raised is waited for like any other (a slow refusal is no hang:
    PyTorch computes some propagations for seconds on one rank while the others refused at
    once). Where the OS cannot tell, the others get ``grace_s`` more to answer once a rank has
    raised or died.

    ``process_group=False`` makes a sandbox: ranks that join no group, where the calls of an
    implementation that need none (metadata, placements, layouts) run apart from the driver, so
    that a crash or a hang there is an outcome like any other, not the end of the run.
    """

    def __init__(
        self,
        world_size: int,
        backend: str | Backend = "gloo",
        *,
        start_method: str | None = None,
        case_timeout_s: float = 30.0,
        grace_s: float = 5.0,
        start_timeout_s: float = 60.0,
        process_group: bool = True,
    ) -> None:
        self.backend = backend if isinstance(backend, Backend) else backend_named(backend)
        self.process_group = process_group
        reason = self.backend.unavailable_reason(world_size)
        if reason:
            raise ValueError(reason)
        self.world_size = world_size
        self.start_method = start_method or default_start_method(self.backend)
        self.case_timeout_s = case_timeout_s
        self.grace_s = grace_s
        self.start_timeout_s = start_timeout_s
        self.starts = 0
        self._procs: list[Any] = []
        self._conns: list[Connection] = []
        self._logs: list[Path] = []
        self._dir: Path | None = None
        self._threads_at_start: list[int | None] = []
        self._seq = 0

    # -- life cycle ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return bool(self._procs)

    def start(self) -> None:
        """Start the ranks and wait until every one has joined the process group."""
        if self.running:
            return
        self.starts += 1
        began = time.monotonic()
        self._dir = Path(tempfile.mkdtemp(prefix=f"shardspec-w{self.world_size}-"))
        context = mp.get_context(self.start_method)
        # the groups time out after any case would: a hang is reported as one, with its stack
        pg_timeout_s = self.case_timeout_s * WALL_FACTOR + 30.0 if self.process_group else None
        for rank in range(self.world_size):
            parent_end, child_end = context.Pipe()
            log = self._dir / f"rank{rank}.log"
            log.touch()
            inherited = list(self._conns) if self.start_method == "fork" else []
            proc = context.Process(
                target=_rank_main,
                args=(
                    rank,
                    self.world_size,
                    self.backend,
                    str(self._dir / "store"),
                    child_end,
                    inherited,
                    str(log),
                    pg_timeout_s,
                ),
                name=f"shardspec-rank{rank}",
                daemon=True,
            )
            proc.start()
            child_end.close()
            self._procs.append(proc)
            self._conns.append(parent_end)
            self._logs.append(log)
        self._await_ready()
        self._threads_at_start = [thread_count(pid) for pid in self.pids()]
        if self.process_group:
            COSTS.started(time.monotonic() - began)

    def _await_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        for rank, (proc, conn) in enumerate(zip(self._procs, self._conns, strict=True)):
            ready = wait([conn, proc.sentinel], max(0.0, deadline - time.monotonic()))
            status, detail = "no answer", ""
            message = read(conn) if conn in ready else None
            if message is not None:
                status, detail = pickle.loads(message)
            elif conn in ready:
                status = "died"
            if status != "ready":
                logs = "\n".join(
                    f"--- rank {r} ---\n{self._tail(r, 0)}" for r in range(len(self._logs))
                )
                self.close()
                raise WorldStartError(
                    f"rank {rank} of a {self.world_size}-rank {self.backend.name} world did not "
                    f"start ({status}) within {self.start_timeout_s:.0f} s\n{detail}\n{logs}"
                )

    def close(self) -> None:
        """Stop every rank (politely, then by force) and remove the world's files."""
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.send_bytes(b"")
        deadline = time.monotonic() + 1.0
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self._conns:
            conn.close()
        self._procs, self._conns, self._logs = [], [], []
        self._threads_at_start = []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def pids(self) -> list[int]:
        return [proc.pid for proc in self._procs]

    def __enter__(self) -> LocalWorld:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- running cases ------------------------------------------------------------------------

    def run(self, case: Case, timeout_s: float | None = None) -> CaseResult:
        """Run ``case`` on every rank and collect one outcome per rank.

        Never raises for what the ranks did: raises, hangs and deaths come back as outcomes.
        After a hang or a death the world is replaced: a rank that left a case early can leave
        messages in flight or collectives out of step, which would corrupt the next case. After
        a raise it is replaced only if its groups are out of step (``conformance.world.step``):
        refusing bad input is a third of the cases, and a world start costs tens of milliseconds
        forked, seconds spawned on NCCL. A sandbox that raised is kept: it has no process group
        to put out of step, and a pure check refuses half its inputs. Before the case, a world
        whose ranks have gathered ``MAX_NEW_RANK_THREADS`` threads is replaced, except inside
        ``one_world``.
        """
        if self.process_group and not _one_world and self._crowded():
            COSTS.replaced[costs.CROWDED] += 1
            self._kill()
        self.start()
        # A sandbox runs a pure call: no world size to report, no process group that a failed
        # case could leave out of step (its faults replace it below).
        LEDGER.ran_on(self if self.process_group else None)
        if self.process_group:
            LEDGER.record(self.world_size)
        started = time.monotonic()
        try:
            outcomes = self._exchange(case, timeout_s or self.case_timeout_s)
        except Exception as exc:
            # A reply the driver cannot read leaves the other ranks' replies unread: the world is
            # replaced, or the next case would read them as its own.
            self._kill()
            raise HarnessError(
                f"the driver could not read a rank's reply to {case.task}: {exc!r}"
            ) from exc
        result = CaseResult(
            case, outcomes, self.world_size, self.backend, time.monotonic() - started
        )
        if self.process_group:
            COSTS.ran(result.elapsed_s)
            if result.faulted:
                COSTS.replaced[costs.FAULT] += 1
        if result.faulted or (self.process_group and not result.ok and not self._in_step()):
            self._kill()
        return harness.check(result)

    def _crowded(self) -> bool:
        """Whether a rank holds ``MAX_NEW_RANK_THREADS`` more threads than when it started."""
        for pid, started in zip(self.pids(), self._threads_at_start, strict=True):
            now = thread_count(pid)
            if now is not None and started is not None and now - started > MAX_NEW_RANK_THREADS:
                return True
        return False

    def retire(self) -> None:
        """Stop the ranks: the next case starts fresh ones."""
        if self.running:
            self._kill()

    def retire_unless_in_step(self) -> None:
        """After a case the judge failed: keep the world only if its groups are in step."""
        if self.running and not self._in_step():
            self._kill()

    def _in_step(self) -> bool:
        """Whether every group's operations still pair up on all its members; a check that does
        not come back in time says no."""
        began = time.monotonic()
        timeout = min(self.case_timeout_s, step.CHECK_TIMEOUT_S)
        kept = step.state(self._exchange(step.CHECK, timeout)) == step.IN_STEP
        COSTS.checked(time.monotonic() - began, kept)
        return kept

    def _exchange(self, case: Case, timeout_s: float) -> tuple[Outcome, ...]:
        self._seq += 1
        message = pickle.dumps((self._seq, case.task, case.args))
        marks = [log.stat().st_size for log in self._logs]
        for conn in self._conns:
            with contextlib.suppress(OSError):  # a dead rank: its sentinel says so below
                conn.send_bytes(message)
        return self._collect(timeout_s, marks)

    def _collect(self, timeout_s: float, marks: list[int]) -> tuple[Outcome, ...]:
        started = time.monotonic()
        outcomes: dict[int, Outcome] = {}
        first_failure: float | None = None
        asleep = False
        sleep = SleepWatch(max(self.grace_s, _MIN_SLEEP_S))
        last_answer = started

        def take(ready: list[Any], watched: dict[Any, int]) -> None:
            nonlocal first_failure, last_answer
            for each in ready:
                rank = watched[each]
                if rank in outcomes:
                    continue
                outcome = self._receive(rank, marks[rank])
                if outcome is None:
                    continue
                outcomes[rank] = outcome
                last_answer = time.monotonic()
                if not isinstance(outcome, Returned) and first_failure is None:
                    first_failure = time.monotonic()

        # Most cases end within a sampling period: their answers are taken before any look at
        # /proc, which costs the driver more than the case where ranks share the cores with it.
        while len(outcomes) < self.world_size:
            left = started + _SAMPLE_EVERY_S - time.monotonic()
            if left <= 0:
                break
            watched = self._watched(outcomes)
            take(wait(list(watched), left), watched)
        while len(outcomes) < self.world_size:
            now = time.monotonic()
            limit = started + timeout_s * WALL_FACTOR
            waiting = [rank for rank in range(self.world_size) if rank not in outcomes]
            for rank in waiting:
                sleep.sample(self._procs[rank].pid)
            used = [sleep.cpu_s(self._procs[rank].pid) for rank in waiting]
            if None in used:  # /proc cannot tell a rank that sleeps from one that computes
                limit = min(limit, started + timeout_s)
                if first_failure is not None:
                    limit = min(limit, first_failure + self.grace_s)
            remaining = limit - now
            computed_enough = any(u is not None and u >= timeout_s for u in used)
            # A rank that just answered may have woken the others (they waited for it in a
            # collective): they count as asleep only after a whole window without an answer.
            quiet = now - last_answer >= sleep.window_s
            asleep = quiet and all(sleep.asleep(self._procs[rank].pid) for rank in waiting)
            if remaining <= 0 or computed_enough or asleep:
                break
            watched = self._watched(outcomes)
            take(wait(list(watched), min(remaining, _SAMPLE_EVERY_S)), watched)
        waited = time.monotonic() - started
        hung = [rank for rank in range(self.world_size) if rank not in outcomes]
        for rank, stack in zip(hung, self._dump_stacks(hung), strict=True):
            outcomes[rank] = Hung(rank, waited, stack, asleep)
        return tuple(outcomes[rank] for rank in range(self.world_size))

    def _watched(self, outcomes: dict[int, Outcome]) -> dict[Any, int]:
        """The pipe and the sentinel of each rank yet to answer, to the rank."""
        watched: dict[Any, int] = {}
        for rank in range(self.world_size):
            if rank not in outcomes:
                watched[self._conns[rank]] = rank
                watched[self._procs[rank].sentinel] = rank
        return watched

    def _receive(self, rank: int, mark: int) -> Outcome | None:
        conn, proc = self._conns[rank], self._procs[rank]
        if conn.poll():
            message = read(conn)
            if message is not None:
                return pickle.loads(message)
        elif proc.is_alive():
            return None
        proc.join(1.0)
        return Died(rank, proc.exitcode, _without_fork_ancestry(self._tail(rank, mark)))

    def _dump_stacks(self, ranks: list[int]) -> list[str]:
        """Ask each hung rank for its Python stacks (faulthandler on SIGUSR1) and read them."""
        if not ranks:
            return []
        marks = {rank: self._logs[rank].stat().st_size for rank in ranks}
        for rank in ranks:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._procs[rank].pid, signal.SIGUSR1)
        deadline = time.monotonic() + 2.0
        pending = set(ranks)
        while pending and time.monotonic() < deadline:
            time.sleep(0.05)
            pending = {r for r in pending if self._logs[r].stat().st_size == marks[r]}
        time.sleep(0.1)  # let a dump that has begun finish
        return [_without_fork_ancestry(self._tail(rank, marks[rank])) for rank in ranks]

    def _tail(self, rank: int, mark: int, limit: int = 20_000) -> str:
        try:
            with open(self._logs[rank], "rb") as log:
                log.seek(max(mark, log.seek(0, os.SEEK_END) - limit))
                return log.read().decode(errors="replace")
        except (OSError, IndexError):
            return ""

    def _kill(self) -> None:
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
        self.close()
