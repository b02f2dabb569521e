"""Run a finding's program on a fresh Gloo world and read each rank's outcome as record text."""

from __future__ import annotations

from conformance.findings import snippet
from conformance.findings.records import CANNOT_RUN, Record
from conformance.world import Case, Died, Hung, LocalWorld, Outcome, Raised, Returned
from conformance.world.harness import HarnessError

TASK = "conformance.findings.snippet:run"
WARM = "conformance.findings.snippet:warm"


def outcome_text(outcome: Outcome) -> str:
    """A rank's outcome in the words of a record."""
    if isinstance(outcome, Returned):
        return f"returns {outcome.value}"
    if isinstance(outcome, Raised):
        return f"raises {outcome.type}"
    if isinstance(outcome, Hung):
        return "hangs"
    assert isinstance(outcome, Died)
    return "dies"


def run(record: Record, timeout_s: float = 10.0) -> tuple[str, ...]:
    """Each rank's outcome. A fresh world per record: no group or cache one program made can
    change what the next one does."""
    snippet.preload()
    with LocalWorld(record.world_size, "gloo", case_timeout_s=timeout_s, grace_s=3.0) as world:
        warmed = world.run(Case(WARM), timeout_s=120.0)
        if not warmed.ok:
            raise HarnessError(warmed.report("the world could not import what programs use"))
        result = world.run(Case(TASK, {"code": record.code}))
    return tuple(outcome_text(o) for o in result.outcomes)


# How a program meets an API its release lacks: a module or name it cannot import, an attribute
# or a keyword argument the release has not got.
MISSING_API = {"raises ImportError", "raises ModuleNotFoundError", "raises AttributeError",
               "raises TypeError"}  # fmt: skip


def read(record: Record, outcomes: tuple[str, ...]) -> tuple[str, ...]:
    """``outcomes`` as the record keeps them: ``cannot run`` where the record names an API it
    needs and every rank failed as a missing API fails; any other outcome as it is, so that a
    record that needs nothing is never excused."""
    if record.needs and set(outcomes) <= MISSING_API:
        return (CANNOT_RUN,) * len(outcomes)
    return outcomes


def compact(outcomes: tuple[str, ...]) -> tuple[str, ...]:
    """One outcome where every rank had the same, as records write it."""
    return outcomes[:1] if len(set(outcomes)) == 1 else outcomes
