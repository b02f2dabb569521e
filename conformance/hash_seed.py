"""The one hash seed every command of the suite runs under.

PyTorch's sharding propagation picks among equally cheap strategies in an order that follows
string hashing (it iterates sets of placements), so one program can give different outcomes in
processes with different ``PYTHONHASHSEED`` (a record, index-select-of-a-partial-with-a-partial-
max-index-raises, raises on 2.11.0 under seed 0 and returns under 1). A verdict that moved with
the seed would make a merge gate flaky and a known-failures file incomplete by chance, so
``python -m conformance`` restarts itself under ``SEED``: the driver, the pytest-xdist workers
and every rank (forked ranks inherit the interpreter's hash secret, spawned ones the variable).
"""

from __future__ import annotations

import io
import os
import sys

SEED = "0"


def pin() -> None:
    """Restart this ``python -m conformance`` command under ``SEED`` unless it runs under it:
    only a new interpreter reads the variable."""
    if os.environ.get("PYTHONHASHSEED") != SEED:
        os.environ["PYTHONHASHSEED"] = SEED
        if not isinstance(getattr(sys.stdout, "buffer", None), io.BufferedWriter):
            os.environ["PYTHONUNBUFFERED"] = "1"  # -u (a launcher's ranks): keep it unbuffered
        os.execv(sys.executable, [sys.executable, "-m", "conformance", *sys.argv[1:]])


def describe() -> str:
    """The run header's line: the seed this process hashes with, as far as its environment says."""
    value = os.environ.get("PYTHONHASHSEED")
    if value == SEED:
        return f"{SEED} (pinned: PyTorch's choice among equal strategies follows it)"
    if value is None or value == "random":
        return "random (not pinned: run through python -m conformance to pin it)"
    return f"{value} (not the pinned {SEED}: run through python -m conformance to pin it)"
