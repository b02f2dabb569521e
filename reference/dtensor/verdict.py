"""One verdict on every rank (spec/errors.md, ERR-6 and ERR-8).

Each rank validates its own input locally; then the ranks exchange a small summary before any
data moves, and if any rank failed, every rank raises the same exception type. The summary also
carries *facts* (shapes, placements, ...) so that ranks can check that they agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.distributed as dist

# ERR-1..3: the only types a verdict may carry, by name (exceptions themselves don't pickle well).
ERROR_TYPES: dict[str, type[Exception]] = {
    "ValueError": ValueError,
    "TypeError": TypeError,
    "NotImplementedError": NotImplementedError,
}


def check(validate: Callable[[], Any]) -> tuple[Exception | None, Any]:
    """Run ``validate`` and keep its error instead of raising it (only the spec's error types)."""
    try:
        return None, validate()
    except (ValueError, TypeError, NotImplementedError) as error:
        return error, None


def exchange(group: dist.ProcessGroup, error: Exception | None, facts: Any = None) -> list[Any]:
    """All-gather ``(error, facts)`` over ``group``; raise on every member if any member failed.

    Returns the facts of every member, in group-rank order. The first failing member (by group
    rank) decides the exception type every member raises; a member whose own error has that type
    raises its own error, so its message stays exact.
    """
    summary = None if error is None else (_kind(error), str(error))
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, (summary, facts), group=group)
    failures = [(rank, s) for rank, (s, _) in enumerate(gathered) if s is not None]
    if failures:
        rank, (kind, message) = failures[0]
        if error is not None and _kind(error) == kind:
            raise error
        # ERR-6: the same type on every member, naming who rejected the input and why.
        raise ERROR_TYPES[kind](
            f"rank {dist.get_global_rank(group, rank)} rejected the call: {message}"
        )
    return [facts for _, facts in gathered]


def _kind(error: Exception) -> str:
    return next(name for name, cls in ERROR_TYPES.items() if isinstance(error, cls))


def require_agreement(facts: list[Any], what: str, rule: str) -> None:
    """Raise the same ``ValueError`` on every rank when the ranks passed different ``what``.

    Every rank sees the same ``facts`` list after ``exchange``, so every rank reaches the same
    conclusion without another round trip.
    """
    if any(f != facts[0] for f in facts):
        raise ValueError(f"[{rule}] ranks disagree on {what}: {facts}")
