"""A user's adapter module that registers a process-group backend from Python on import: Gloo
under the new name ``shardgloo``, as a vendor's package registers its own. The suite knows
nothing of it but what ``--backend shardgloo --impl registered_backend:ADAPTER`` says."""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from conformance.adapters.reference import ADAPTER  # noqa: F401  (the adapter under test)
from conformance.world import RankContext

NAME = "shardgloo"


def _gloo(
    store: dist.Store, rank: int, world_size: int, timeout: timedelta
) -> dist.ProcessGroupGloo:
    return dist.ProcessGroupGloo(store, rank, world_size, timeout)


if NAME not in dist.Backend.backend_list:
    dist.Backend.register_backend(NAME, _gloo, devices=["cpu"])


def world_backend(ctx: RankContext) -> list[object]:
    """The default group's backend, and a sum of ``rank + 1`` over it: the registered backend
    is the one that carries the data."""
    value = torch.tensor([ctx.rank + 1.0])
    dist.all_reduce(value)
    return [dist.get_backend(), value.item()]
