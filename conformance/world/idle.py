"""Which rank processes are asleep: blocked with nothing to do, so that no answer will come.

A rank stuck in a collective that its peers left (they answered, raised or took another path)
sleeps in the kernel: its threads wake now and then (a Gloo group's do), but it uses next to no
CPU and is seldom runnable. Waiting out the whole case
timeout for it proves nothing more, so the driver ends a case once every rank that has not
answered has slept for the grace period (``LocalWorld``). A rank that computes, or waits for a
peer that still computes, is not asleep: that peer runs. Linux tells this through
``/proc/<pid>/task/*/stat``; elsewhere no process is ever judged asleep, and a hang costs the
case timeout as before.

The same samples give each rank's CPU time, which the case timeout is counted in where Linux
tells it: a rank that computes for the timeout's length is hung however loaded the machine, and
one that waits for a core on a busy machine is not, so a verdict does not depend on the load.
"""

from __future__ import annotations

import os
import time
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path

# Running or runnable (R) and uninterruptible I/O wait (D) are work under way, not sleep.
_BUSY_STATES = {"R", "D"}
# A blocked Gloo rank's threads wake now and then: with the 89 threads of 28 groups (a rank near
# local.MAX_NEW_RANK_THREADS) up to 8% of one core in a second between them, yet no one thread
# more than 1% of it nor R in more than 3 of 10 samples (measured). Work is done by a thread:
# one that computes uses far more than 5% of a core, one that waits for a core on a loaded
# machine is runnable (R) in nearly every sample.
_IDLE_THREAD_CPU_SHARE = 0.05
_IDLE_THREAD_BUSY_SAMPLES = 0.5
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Sample:
    """One look at a process: the CPU ticks each thread has used, and the threads running."""

    threads: dict[str, int]
    busy: frozenset[str]

    @property
    def ticks(self) -> int:
        return sum(self.threads.values())


def cpu_sample(pid: int) -> Sample | None:
    """Each of pid's threads' CPU ticks and which are running, or ``None`` where ``/proc``
    cannot say (another OS, or the process is gone)."""
    tasks = Path(f"/proc/{pid}/task")
    threads: dict[str, int] = {}
    busy = set()
    try:
        listed = list(tasks.iterdir())
    except OSError:
        return None
    for thread in listed:
        try:
            stat = (thread / "stat").read_text()
        except OSError:
            continue  # a thread that ended between the listing and the read
        # After the command name in parentheses: state, then 10 fields, then utime and stime.
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] in _BUSY_STATES:
            busy.add(thread.name)
        threads[thread.name] = int(fields[11]) + int(fields[12])
    return Sample(threads, frozenset(busy))


def thread_count(pid: int) -> int | None:
    """How many threads ``pid`` holds, or ``None`` where ``/proc`` cannot say."""
    try:
        return sum(1 for _ in Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None


class SleepWatch:
    """Samples processes over time and says which have slept through the last ``window_s``."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._samples: dict[int, deque[tuple[float, Sample]]] = {}
        self._first_ticks: dict[int, int | None] = {}

    def sample(self, pid: int) -> None:
        now = time.monotonic()
        taken = cpu_sample(pid)
        history = self._samples.setdefault(pid, deque())
        first = self._first_ticks.setdefault(pid, None if taken is None else taken.ticks)
        if taken is None or first is None:
            self._first_ticks[pid] = None  # a gap in what /proc says: no CPU time to tell
            history.clear()
            return
        history.append((now, taken))
        while len(history) > 1 and history[1][0] <= now - self.window_s:
            history.popleft()

    def cpu_s(self, pid: int) -> float | None:
        """The CPU time ``pid`` used since its first sample, or ``None`` where ``/proc`` cannot
        say."""
        history, first = self._samples.get(pid), self._first_ticks.get(pid)
        if not history or first is None:
            return None
        return (history[-1][1].ticks - first) / _TICKS_PER_S

    def asleep(self, pid: int) -> bool:
        """Whether no thread of ``pid`` used more than 5% of one core in the last ``window_s``
        nor ran in more than half its samples: threads that wake now and then are no work, and
        with many groups some thread of a blocked rank is often awake."""
        history = self._samples.get(pid)
        if not history or history[-1][0] - history[0][0] < self.window_s:
            return False
        first, last = history[0][1], history[-1][1]
        allowed = _IDLE_THREAD_CPU_SHARE * self.window_s * _TICKS_PER_S
        if any(t - first.threads.get(tid, 0) > allowed for tid, t in last.threads.items()):
            return False
        running = Counter(tid for _, taken in history for tid in taken.busy)
        return max(running.values(), default=0) <= _IDLE_THREAD_BUSY_SAMPLES * len(history)
