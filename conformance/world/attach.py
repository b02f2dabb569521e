"""Attached worlds: the ranks of a launcher (``torchrun``) instead of processes we start.

Every launched process runs ``python -m conformance run``. All of them join the launcher's
process group (``env://``) and serve cases; rank 0 also runs the driver, and serves its own cases
from a thread. Cases and outcomes travel through the launcher's rendezvous store, so this works
across nodes. A world we did not start cannot be restarted: after a hang the run stops, with each
rank's stack (posted by a watchdog on that rank) in the report.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import time
import traceback
from datetime import timedelta

import torch.distributed as dist

from conformance.world import costs, harness, step, stop
from conformance.world.backends import Backend
from conformance.world.costs import COSTS
from conformance.world.ledger import LEDGER
from conformance.world.protocol import Case, CaseResult, Hung, Outcome
from conformance.world.rank import RankContext, encode, execute, init_group

LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_POLL_S = 0.001
_INTERRUPT_CHECK_S = 0.1  # how often a waiting driver looks for an interrupted rank
INTERRUPTED_KEY = "interrupted"

# The world rank 0's driver runs cases on; set by ``python -m conformance run`` under a launcher.
CURRENT: AttachedWorld | None = None


def launched() -> bool:
    """Whether this process was started by a launcher such as ``torchrun``."""
    return all(name in os.environ for name in LAUNCHER_VARIABLES)


def _store(timeout_s: float = 300.0) -> dist.Store:
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        is_master=False,
        timeout=timedelta(seconds=timeout_s),
    )
    return dist.PrefixStore(f"shardspec/{os.environ.get('TORCHELASTIC_RUN_ID', 'run')}/", store)


class WorldLost(RuntimeError):
    """An attached world hung once; it cannot be restarted, so no further case can run."""


class AttachedWorld:
    """The driver's view of the launcher's world (rank 0's process only)."""

    def __init__(
        self, backend: Backend, case_timeout_s: float = 30.0, grace_s: float = 5.0
    ) -> None:
        self.backend = backend
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.case_timeout_s = case_timeout_s
        self.grace_s = grace_s
        self._store = _store()
        self._seq = 0
        self._lost: str | None = None
        self._next_interrupt_check = 0.0

    def run(self, case: Case, timeout_s: float | None = None) -> CaseResult:
        """Run ``case`` on every rank. The launcher's world cannot be replaced: after a hang, or
        a raise that left its groups out of step (``conformance.world.step``), it is lost, and
        every later case is refused rather than run on a world that would corrupt it. A raise
        after point-to-point traffic cannot be told apart and runs on, as before the check."""
        self._stop_if_interrupted()
        if self._lost:
            raise WorldLost(f"the attached world was lost earlier: {self._lost}")
        LEDGER.record(self.world_size)
        started = time.monotonic()
        outcomes = self._exchange(case, timeout_s or self.case_timeout_s)
        result = CaseResult(
            case, outcomes, self.world_size, self.backend, time.monotonic() - started
        )
        COSTS.ran(result.elapsed_s)
        if result.faulted:
            COSTS.replaced[costs.FAULT] += 1
            self._lost = f"case {case.to_json()} hung"
        elif not result.ok:
            began = time.monotonic()
            said = step.state(self._exchange(step.CHECK, step.CHECK_TIMEOUT_S))
            COSTS.checked(time.monotonic() - began, kept=said != step.OUT_OF_STEP)
            if said == step.OUT_OF_STEP:
                self._lost = f"case {case.to_json()} left the world's groups out of step"
        return harness.check(result)

    def _exchange(self, case: Case, timeout: float) -> tuple[Outcome, ...]:
        self._seq += 1
        started = time.monotonic()
        self._store.set(f"case/{self._seq}", pickle.dumps((timeout, case.task, case.args)))
        outcomes: dict[int, Outcome] = {}
        first_failure: float | None = None
        while len(outcomes) < self.world_size:
            limit = started + timeout
            if first_failure is not None:
                limit = min(limit, first_failure + self.grace_s)
            if time.monotonic() > limit:
                break
            if time.monotonic() > self._next_interrupt_check:
                self._stop_if_interrupted()
            for rank in range(self.world_size):
                key = f"result/{self._seq}/{rank}"
                if rank not in outcomes and self._store.check([key]):
                    outcomes[rank] = pickle.loads(self._store.get(key))
                    if first_failure is None and outcomes[rank].__class__.__name__ != "Returned":
                        first_failure = time.monotonic()
            time.sleep(_POLL_S)
        waited = time.monotonic() - started
        for rank in range(self.world_size):
            if rank not in outcomes:
                outcomes[rank] = Hung(rank, waited, self._posted_stack(rank))
        return tuple(outcomes[r] for r in range(self.world_size))

    def _stop_if_interrupted(self) -> None:
        """Stop the run, as Ctrl-C would, once another rank was interrupted
        (``post_interrupts``): rank 0 then writes the reports, marked incomplete."""
        self._next_interrupt_check = time.monotonic() + _INTERRUPT_CHECK_S
        if self._store.check([INTERRUPTED_KEY]):
            stop.request(self._store.get(INTERRUPTED_KEY).decode(errors="replace"))

    def _posted_stack(self, rank: int) -> str:
        key = f"stack/{self._seq}/{rank}"
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if self._store.check([key]):
                return self._store.get(key).decode(errors="replace")
            time.sleep(0.05)
        return "(no stack posted: the rank's process may have died)"

    def close(self) -> None:
        """Tell every rank to stop serving."""
        self._seq += 1
        self._store.set(f"case/{self._seq}", b"")


def serve_attached(backend: Backend) -> RankContext:
    """Join the launcher's group; return this rank's context (rank 0 serves it from a thread)."""
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    reason = backend.unavailable_reason(world_size)
    if reason:  # an environment error, not a verdict (README: exit codes)
        print(f"shardspec: environment error: cannot attach: {reason}", file=sys.stderr)
        raise SystemExit(harness.EXIT_CODE)
    init_group(backend, rank, world_size, None, timeout_s=600.0)
    return RankContext(rank, world_size, backend)


def post_interrupts(ctx: RankContext, exit_code: int) -> None:
    """On SIGTERM or SIGINT this rank (not rank 0, which drives) tells rank 0 through the store
    and exits with ``exit_code`` at once: rank 0 stops the run and writes its reports, marked
    incomplete, instead of waiting out a case timeout for a rank that is gone."""
    store = _store(timeout_s=5.0)

    def interrupted(signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        try:
            store.set(INTERRUPTED_KEY, f"rank {ctx.rank} was interrupted ({name})".encode())
        finally:  # the store gone too (the launcher stopping): exit all the same
            os._exit(exit_code)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, interrupted)


def serve_cases(ctx: RankContext) -> None:
    """Answer cases posted in the store until the driver posts the empty stop message."""
    store = _store()
    ctx.backend.set_rank_device(ctx.rank)
    seq = 0
    while True:
        seq += 1
        key = f"case/{seq}"
        while True:
            try:
                # Short waits: a signal's handler (post_interrupts) runs between them.
                store.wait([key], timedelta(seconds=1))
                break
            except Exception:  # the store's wait timed out: the driver is still busy
                continue
        message = store.get(key)
        if not message:
            return
        timeout, task, args = pickle.loads(message)
        watchdog = threading.Timer(
            timeout, _post_stack, (store, seq, ctx.rank, threading.get_ident())
        )
        watchdog.daemon = True
        watchdog.start()
        outcome = execute(ctx, task, args)
        watchdog.cancel()
        store.set(f"result/{seq}/{ctx.rank}", encode(outcome))


def _post_stack(store: dist.Store, seq: int, rank: int, thread_id: int) -> None:
    frame = sys._current_frames().get(thread_id)
    stack = "".join(traceback.format_stack(frame)) if frame else "(thread gone)"
    store.set(f"stack/{seq}/{rank}", stack.encode())
