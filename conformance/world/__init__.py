"""Rank worlds: persistent process groups that run cases sent by a driver and report outcomes."""

from conformance.world.local import LocalWorld, WorldStartError, one_world
from conformance.world.pool import World, WorldPool
from conformance.world.protocol import (
    Case,
    CaseFailed,
    CaseResult,
    Died,
    Hung,
    Outcome,
    Raised,
    Returned,
)
from conformance.world.rank import RankContext

__all__ = [
    "Case",
    "CaseFailed",
    "CaseResult",
    "Died",
    "Hung",
    "LocalWorld",
    "Outcome",
    "Raised",
    "RankContext",
    "Returned",
    "World",
    "WorldPool",
    "WorldStartError",
    "one_world",
]
