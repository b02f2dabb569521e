"""Whether a world can run its next case after one that did not end with every rank returning.

An implementation that refuses bad input raises, on every rank, before any data moves (ERR-8):
its process groups are where they were, and the world can go on. One that raised on some ranks
after an operation the others skipped has left a group out of step: the group's next operation
would pair the wrong calls, and corrupt or hang the next case. Replacing the world after every
raise is safe but costs a world start per refused input: tens of milliseconds on a forked Gloo
world, seconds on a spawned NCCL one, where refusals are a third of the cases.

Every backend numbers each group's operations, so a rank that ran a collective its peers skipped
added a different number to that group's count. Each rank notes its counts when a case starts
(``case_started``, from ``conformance.world.rank.execute``) and the point-to-point operations the
case posts (``watch``). After a case some rank left by raising, the driver sends ``CHECK``: one
``all_gather_object`` over the world of what every rank saw in that case. The world is kept only
if no rank made a point-to-point call, every group's count grew by the same number on all of its
members, and every rank has created as many groups (``new_group`` numbers them in creation
order, so a rank that built one alone would pair its next group with the wrong one).
Point-to-point calls are ruled out rather than matched: a sender and its receiver count
different operations, and a message in flight shows in no count. If the world's own group is
out of step, the check's gather hangs or fails, and the world is replaced as before. The
launcher's world cannot be replaced: it is lost when shown out of step, and runs on when the
check cannot tell (point-to-point traffic), as it did before the check existed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

from conformance.world.protocol import Case, Outcome, Returned

if TYPE_CHECKING:
    from conformance.world.rank import RankContext

# The check a driver sends every rank of a world after a case some rank left by raising.
CHECK = Case(f"{__name__}:in_step", {})
CHECK_TIMEOUT_S = 10.0

# What the check can say. A local world is kept only when it is in step; the launcher's world,
# which cannot be replaced, is lost only when it is shown out of step, and runs on otherwise.
IN_STEP = "in step"
OUT_OF_STEP = "out of step"
CANNOT_TELL = "cannot tell"  # point-to-point traffic in the case, or no counters in this torch

_POINT_TO_POINT = ("send", "recv", "recv_anysource")  # of ProcessGroup, where every p2p ends
_running: dict[str, Any] = {"calls": 0, "counts": {}}  # the case running on this rank
_ended: dict[str, Any] = {"calls": 0, "grown": {}}  # the case before it


def watch() -> None:
    """Count every point-to-point operation from now on (once per rank process), at the
    ``ProcessGroup`` methods that ``send``, ``isend``, ``batch_isend_irecv`` and the receives all
    end in. The functions of ``torch.distributed`` stay as they are: ``P2POp`` checks its
    operation is ``isend`` or ``irecv`` by identity, and an implementation may hold the
    originals."""
    for name in _POINT_TO_POINT:
        original = getattr(dist.ProcessGroup, name)
        if getattr(original, "__wrapped__", None) is None:
            setattr(dist.ProcessGroup, name, _counted(original))


def _counted(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def counted(*args: Any, **kwargs: Any) -> Any:
        _running["calls"] += 1
        return original(*args, **kwargs)

    return counted


def operation_counts() -> dict[str, int]:
    """This rank's count of operations on each group it belongs to, each backend of a group
    counted apart (a ``cpu:gloo,cuda:nccl`` group has two)."""
    if not dist.is_initialized():
        return {}
    counts = {}
    for group in distributed_c10d._world.pg_map:
        for device in group._device_types:
            backend = group._get_backend(torch.device(device))
            counts[f"{group.group_name}/{device}"] = backend._get_sequence_number_for_group()
    return counts


def case_started() -> None:
    """A case begins on this rank: what the case before it did becomes what ``in_step`` sees.
    Counts this torch cannot give (a private API gone) leave ``None``: the check cannot tell,
    and a local world is replaced after every raise, as before the check existed."""
    try:
        counts = operation_counts()
    except Exception:  # any failure here means "cannot tell", never a verdict
        counts = None
    before = _running["counts"]
    grown = None
    if counts is not None and before is not None:
        grown = {g: n - before.get(g, 0) for g, n in counts.items()}
    _ended.update(calls=_running["calls"], grown=grown)
    _running.update(calls=0, counts=counts)


def in_step(ctx: RankContext) -> str:
    """``IN_STEP`` if, in the case before this check, no rank made a point-to-point call, every
    group's count grew alike on all of its members, and every rank created as many groups;
    ``CANNOT_TELL`` after point-to-point traffic or without counters; else ``OUT_OF_STEP``
    (collective over the world)."""
    everyone: list[Any] = [None] * ctx.world_size
    made = getattr(distributed_c10d._world, "group_count", None)
    dist.all_gather_object(everyone, (_ended["calls"], _ended["grown"], made))
    built = {made for _, _, made in everyone}
    if len(built) > 1:
        return OUT_OF_STEP
    if None in built or any(calls or grown is None for calls, grown, _ in everyone):
        return CANNOT_TELL
    seen: dict[str, set[int]] = {}
    for _, grown, _ in everyone:
        for group, n in grown.items():
            seen.setdefault(group, set()).add(n)
    return IN_STEP if all(len(values) == 1 for values in seen.values()) else OUT_OF_STEP


def state(outcomes: tuple[Outcome, ...]) -> str:
    """The world's state from the check's outcomes: a check that did not come back from every
    rank shows the world out of step (its own group did not meet)."""
    said = {o.value if isinstance(o, Returned) else OUT_OF_STEP for o in outcomes}
    return said.pop() if len(said) == 1 else OUT_OF_STEP
