"""Stopping a run early: one flag, set once, whatever asked for the stop (SIGTERM or SIGINT on
the driver, or another rank of a launcher's world that was interrupted).

The first request raises ``KeyboardInterrupt`` in the driver, which pytest takes as Ctrl-C: the
run ends, its reports say it is incomplete, and it exits with code 2. A later request (a
launcher sends SIGTERM to every rank once one has exited) only keeps the flag set: a second
``KeyboardInterrupt`` would land inside pytest's own handling of the first, and the reports
would never be written.
"""

from __future__ import annotations

import threading

REQUESTED = threading.Event()


def request(why: str) -> None:
    """Stop the run now (the first time), or let the stop under way finish."""
    if REQUESTED.is_set():
        return
    REQUESTED.set()
    raise KeyboardInterrupt(why)
