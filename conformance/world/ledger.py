"""Which world sizes ran cases in this process during the current test.

A property draws its world size per example, so its verdict belongs to the sizes it ran and, when
it fails, to the size of the failing case: the per-rule table shows a rule that holds on 2 ranks
and breaks on 3 in those two columns. Local and attached worlds record every case here; the
plugin clears it when a test starts and reads it when the test ends (``conformance.plugin``).
"""

from __future__ import annotations

_sizes: set[int] = set()
_latest: int | None = None


def start_test() -> None:
    global _latest
    _sizes.clear()
    _latest = None


def record(world_size: int) -> None:
    global _latest
    _sizes.add(world_size)
    _latest = world_size


def sizes() -> list[int]:
    """The world sizes that ran a case since the test started."""
    return sorted(_sizes)


def latest() -> int | None:
    """The size of the world that ran the latest case of this test (the one being judged)."""
    return _latest
