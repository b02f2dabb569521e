"""One verdict on every rank (spec/errors.md), for both families.

A collective call first validates its own input on each rank (``check``). Then, before any data
moves, the ranks exchange one small object (``exchange``): the error a rank found, or the
*facts* the others must agree with. Facts are a ``NamedTuple`` per call, so a reader sees what
travels by name. If any rank failed, every rank raises the first failing rank's exception type.
Otherwise every rank holds every rank's facts and reaches the same conclusion from them
(``require_same``), without another round trip. ``reach_verdict`` is the two steps in one, for
calls where every rank of the group takes part.

Rules and where they live:

- ERR-1, ERR-2, ERR-3: ``INPUT_ERRORS``, ``check``
- ERR-5: ``exchange``, ``require_same``
- ERR-6: ``exchange``, ``reach_verdict``, ``require_same``
- ERR-7: ``exchange`` (every member gathers once, the failing ones too)
- ERR-8: ``reach_verdict`` (callers move data only after it returns)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch.distributed as dist

T = TypeVar("T")
F = TypeVar("F")

# ERR-1, ERR-2, ERR-3: the only answers to bad or unsupported input. They travel by name:
# exceptions themselves do not always pickle.
INPUT_ERRORS: dict[str, type[Exception]] = {
    "ValueError": ValueError,
    "TypeError": TypeError,
    "NotImplementedError": NotImplementedError,
}


def group_of(process_group: dist.ProcessGroup | None) -> dist.ProcessGroup:
    """The group a call runs on: the world when none is given."""
    return dist.group.WORLD if process_group is None else process_group


def check(validate: Callable[[], T]) -> tuple[Exception | None, T | None]:
    """Run ``validate`` here and keep its input error (ERR-1..3) instead of raising it."""
    try:
        return None, validate()
    except tuple(INPUT_ERRORS.values()) as error:
        return error, None


def exchange(group: dist.ProcessGroup, error: Exception | None, facts: F | None) -> list[F]:
    """All-gather ``(error, facts)`` over ``group``; raise on every member if any member failed.

    Returns every member's facts, in group-rank order. The first failing member (by group rank)
    decides the exception type every member raises (ERR-6); a member whose own error has that
    type raises its own error, so its message stays exact, and the others name the member that
    rejected the call and why (ERR-5: its message names the rule).
    """
    summary = None if error is None else (_kind(error), str(error))
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, (summary, facts), group=group)
    failures = [(rank, s) for rank, (s, _) in enumerate(gathered) if s is not None]
    if failures:
        rank, (kind, message) = failures[0]
        if error is not None and _kind(error) == kind:
            raise error
        raise INPUT_ERRORS[kind](
            f"rank {dist.get_global_rank(group, rank)} rejected the call: {message}"
        )
    return [f for _, f in gathered]


def reach_verdict(
    group: dist.ProcessGroup, validate: Callable[[], tuple[T, F]]
) -> tuple[T, list[F]]:
    """``check`` then ``exchange`` on every member of ``group``: ``validate`` returns a result kept
    on this rank and the facts shared with the group. Returns the result and every member's
    facts."""
    error, checked = check(validate)
    result, facts = checked if checked is not None else (None, None)
    return result, exchange(group, error, facts)  # type: ignore[return-value]


def require_same(values: Sequence[object], rule: str, what: str) -> None:
    """Raise ``ValueError`` unless every rank gave the same value. Every rank holds ``values``,
    so every rank reaches the same answer."""
    for rank, value in enumerate(values):
        if value != values[0]:
            raise ValueError(
                f"[{rule}] ranks disagree on {what}: group rank 0 has {values[0]!r}, "
                f"group rank {rank} has {value!r}"
            )


def _kind(error: Exception) -> str:
    return next(name for name, cls in INPUT_ERRORS.items() if isinstance(error, cls))
