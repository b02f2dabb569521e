"""What ran in this process during the current test: the world sizes, and the world that ran the
latest case.

A property draws its world size per example, so its verdict belongs to the sizes it ran and, when
it fails, to the size of the failing case: the per-rule table shows a rule that holds on 2 ranks
and breaks on 3 in those two columns. Local and attached worlds record every case in ``LEDGER``;
the plugin starts it afresh when a test starts and reads it when the test ends
(``conformance.plugin.verdicts``), and the judge retires the latest world when it fails a case
(``conformance.judge.fail``) unless it is still in step. One test runs at a time in a process,
so one ledger serves it.
"""

from __future__ import annotations

import weakref
from typing import Protocol


class Retirable(Protocol):
    def retire_unless_in_step(self) -> None: ...

    def retire(self) -> None: ...


class Ledger:
    def __init__(self) -> None:
        self._sizes: set[int] = set()
        self.latest_size: int | None = None  # the size of the world of the case being judged
        self._latest_world: weakref.ref[Retirable] | None = None

    def start_test(self) -> None:
        self._sizes.clear()
        self.latest_size = None

    def record(self, world_size: int) -> None:
        """A world of ``world_size`` ranks ran a case."""
        self._sizes.add(world_size)
        self.latest_size = world_size

    def ran_on(self, world: Retirable | None) -> None:
        """``world`` ran this process's latest case; ``None``: a world with nothing to retire
        ran it (a sandbox, whose pure calls join no collective)."""
        self._latest_world = weakref.ref(world) if world is not None else None

    def sizes(self) -> list[int]:
        """The world sizes that ran a case since the test started."""
        return sorted(self._sizes)

    def retire_latest_world(self) -> None:
        """Replace the world that ran this process's latest case unless it is still in step.

        The judge calls this when it fails a case. An implementation can break a rule while
        every rank returns and still leave the world out of step: ranks that built different
        meshes have called ``new_group`` different numbers of times, so the next group they
        build never meets; a message sent and never received waits for the next case. The
        world's step check (``conformance.world.step``) sees both; a world it finds in step runs
        on, so a known failure of ``--impl torch`` costs no world start (seconds on NCCL)."""
        world = self._latest_world() if self._latest_world is not None else None
        if world is not None:
            world.retire_unless_in_step()

    def replace_latest_world(self) -> bool:
        """Replace the world that ran this process's latest case, so that the next case runs on
        fresh processes: a case judged again without what ran before it (DT-OP-9). Whether it
        did: an attached world (the launcher's processes) records none, and runs on."""
        world = self._latest_world() if self._latest_world is not None else None
        if world is not None:
            world.retire()
        return world is not None


LEDGER = Ledger()
