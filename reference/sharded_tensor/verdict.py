"""Collective verdicts (ERR-6, ERR-7): every rank of a group raises, or none does.

Each rank validates its own input, then the ranks exchange one small object: the error it found,
or the values the others must agree with. No data moves before this exchange (ERR-8).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch.distributed as dist

T = TypeVar("T")

# ERR-1, ERR-2, ERR-3: the only answers to bad or unsupported input.
INPUT_ERRORS = (ValueError, TypeError, NotImplementedError)


def group_of(process_group: dist.ProcessGroup | None) -> dist.ProcessGroup:
    """The group a sharded tensor lives on: the world when none is given."""
    return dist.group.WORLD if process_group is None else process_group


def reach_verdict(
    group: dist.ProcessGroup, check: Callable[[], tuple[T, Any]]
) -> tuple[T, list[Any]]:
    """Run ``check`` here and share its outcome with every rank of ``group``.

    ``check`` returns (a result kept on this rank, a small value shared with the group). If any
    rank's check raised, every rank raises the error of the lowest such group rank, with its type,
    so all ranks agree on the verdict without a second exchange. Otherwise the result comes back
    with every rank's shared value, in group-rank order.
    """
    result = None
    try:
        result, shared = check()
        outcome = (None, shared)
    except INPUT_ERRORS as error:
        outcome = (error, None)
    outcomes: list[Any] = [None] * group.size()
    dist.all_gather_object(outcomes, outcome, group=group)
    for rank, (error, _) in enumerate(outcomes):
        if error is not None:
            raise type(error)(f"{error} (found on group rank {rank})")
    return result, [value for _, value in outcomes]  # type: ignore[return-value]


def require_same(values: Sequence[object], rule: str, what: str) -> None:
    """Raise ValueError unless every rank gave the same value. Every rank holds ``values``, so
    every rank reaches the same answer."""
    for rank, value in enumerate(values):
        if value != values[0]:
            raise ValueError(
                f"[{rule}] ranks disagree on {what}: group rank 0 has {values[0]!r}, "
                f"group rank {rank} has {value!r}"
            )
