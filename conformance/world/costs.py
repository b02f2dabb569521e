"""Where a driver's time on its worlds goes: world starts, cases, the step checks after raises
(``conformance.world.step``), and why worlds were replaced.

On NCCL a world start (spawned processes, CUDA, a communicator per group) costs seconds, so a run
whose worlds are replaced after refused inputs spends its time starting worlds, not judging. The
counts are the CPU-visible measure of that cost: a run prints them (``conformance.cost_report``),
and a GPU run's figures say where its time went.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

# Why a world was replaced.
FAULT = "a rank hung or died"
OUT_OF_STEP = "its groups were out of step after a raise or a failed case"
CROWDED = "a rank gathered too many threads (conformance.world.local.MAX_NEW_RANK_THREADS)"


@dataclasses.dataclass
class Costs:
    starts: int = 0
    start_s: float = 0.0
    cases: int = 0
    case_s: float = 0.0
    checks: int = 0
    check_s: float = 0.0
    kept: int = 0  # checks after which the world ran on
    replaced: Counter[str] = dataclasses.field(default_factory=Counter)

    def started(self, seconds: float) -> None:
        self.starts += 1
        self.start_s += seconds

    def ran(self, seconds: float) -> None:
        self.cases += 1
        self.case_s += seconds

    def checked(self, seconds: float, kept: bool) -> None:
        self.checks += 1
        self.check_s += seconds
        self.kept += kept
        if not kept:
            self.replaced[OUT_OF_STEP] += 1

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "replaced": dict(self.replaced)}

    def since(self, before: dict[str, Any]) -> dict[str, Any]:
        """What was spent since the snapshot ``before`` (a ``to_json``), as its own ``to_json``."""
        now = self.to_json()
        spent = {k: now[k] - before[k] for k in now if k != "replaced"}
        replaced = Counter(now["replaced"])
        replaced.subtract(before["replaced"])
        return {**spent, "replaced": {k: n for k, n in replaced.items() if n}}

    def add(self, spent: dict[str, Any]) -> None:
        for key, value in spent.items():
            if key == "replaced":
                self.replaced.update(value)
            else:
                setattr(self, key, getattr(self, key) + value)

    def lines(self) -> list[str]:
        """The figures, one line each, for a run's summary."""
        per_case = self.case_s / self.cases * 1000 if self.cases else 0.0
        per_start = self.start_s / self.starts if self.starts else 0.0
        lines = [
            f"cases run:      {self.cases} in {self.case_s:.1f} s ({per_case:.1f} ms each)",
            f"world starts:   {self.starts} in {self.start_s:.1f} s ({per_start:.2f} s each)",
            f"step checks:    {self.checks} in {self.check_s:.1f} s, after raises and failed "
            f"cases; {self.kept} kept their world",
        ]
        lines += [f"worlds replaced: {n}, {why}" for why, n in sorted(self.replaced.items())]
        return lines


COSTS = Costs()
