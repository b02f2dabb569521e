"""A driver's set of live worlds, one per (backend, world size), closed together at the end.

Worlds are expensive to keep idle only in memory, so at most ``max_live`` stay started; the one
used longest ago is closed first. Every world the pool made is closed at interpreter exit, so a
run never leaves a rank behind.
"""

from __future__ import annotations

import atexit
from collections import OrderedDict
from typing import Protocol

from conformance.world.backends import Backend
from conformance.world.protocol import Case, CaseResult


class World(Protocol):
    """What the suite needs of a world, local or attached (or of a sandbox)."""

    world_size: int

    def run(self, case: Case, timeout_s: float | None = None) -> CaseResult: ...

    def close(self) -> None: ...


class WorldPool:
    def __init__(
        self,
        backend: str | Backend = "gloo",
        *,
        start_method: str | None = None,
        case_timeout_s: float = 30.0,
        grace_s: float = 5.0,
        max_live: int = 4,
    ) -> None:
        self.backend = backend
        self.start_method = start_method
        self.case_timeout_s = case_timeout_s
        self.grace_s = grace_s
        self.max_live = max_live
        self._worlds: OrderedDict[int, World] = OrderedDict()
        self._sandbox: World | None = None
        atexit.register(self.close)

    def get(self, world_size: int) -> World:
        """The world of ``world_size`` ranks, made on first use."""
        from conformance.world.local import LocalWorld

        if world_size in self._worlds:
            self._worlds.move_to_end(world_size)
            return self._worlds[world_size]
        while len(self._worlds) >= self.max_live:
            _, oldest = self._worlds.popitem(last=False)
            oldest.close()
        world = LocalWorld(
            world_size,
            self.backend,
            start_method=self.start_method,
            case_timeout_s=self.case_timeout_s,
            grace_s=self.grace_s,
        )
        self._worlds[world_size] = world
        return world

    def sandbox(self) -> World:
        """One rank without a process group, made on first use, for pure calls."""
        if self._sandbox is None:
            self._sandbox = make_sandbox(self.start_method, self.case_timeout_s)
        return self._sandbox

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
        while self._worlds:
            _, world = self._worlds.popitem()
            world.close()


def make_sandbox(start_method: str | None, case_timeout_s: float) -> World:
    """A one-rank local world that joins no process group (``LocalWorld(process_group=False)``).

    Its rank is a CPU process whatever the run's backend: a pure call needs no device."""
    from conformance.world.local import LocalWorld

    return LocalWorld(
        1, "gloo", start_method=start_method, case_timeout_s=case_timeout_s, process_group=False
    )
