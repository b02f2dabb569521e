"""One verdict on every rank (spec/errors.md), for both families.

A collective call first validates its own input on each rank (``check``). Then, before any data
moves, the ranks exchange one small object (``exchange``): the error a rank found, or the
*facts* the others must agree with. Facts are a ``NamedTuple`` per call, so a reader sees what
travels by name. If any rank failed, every rank raises the first failing rank's exception type.
Otherwise every rank holds every rank's facts and reaches the same conclusion from them
(``require_same``), without another round trip. ``reach_verdict`` is the two steps in one, for
calls where every rank of the group takes part.

The exchange is one all-gather of a fixed-size slot per rank (``gather_bytes``), where
``all_gather_object`` makes two (the lengths, then the objects): the verdict precedes every
collective call, so its latency is paid on every one. A message too long for a slot costs every
rank a second all-gather at the longest length; every rank sees every length, so all agree.

Rules and where they live:

- ERR-1, ERR-2, ERR-3: ``INPUT_ERRORS``, ``check``
- ERR-5: ``exchange``, ``require_same``
- ERR-6: ``exchange``, ``reach_verdict``, ``require_same``
- ERR-7: ``exchange``, ``gather_bytes`` (every member gathers alike, the failing ones too)
- ERR-8: ``reach_verdict`` (callers move data only after it returns)
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
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


# Bytes of one rank's message that the first all-gather carries: a verdict's facts are a few
# hundred bytes (a spec with its placements, a shape); a slot of 4 KiB per rank costs a world
# of 8 ranks a 32 KiB gather, microseconds next to a round trip.
SLOT_BYTES = 4096
_LENGTH_BYTES = 8  # each slot starts with its message's length


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
    messages = gather_bytes(group, pickle.dumps((summary, facts)))
    gathered: list[Any] = [pickle.loads(m) for m in messages]
    failures = [(rank, s) for rank, (s, _) in enumerate(gathered) if s is not None]
    if failures:
        rank, (kind, message) = failures[0]
        if error is not None and _kind(error) == kind:
            raise error
        raise INPUT_ERRORS[kind](
            f"rank {dist.get_global_rank(group, rank)} rejected the call: {message}"
        )
    return [f for _, f in gathered]


def gather_bytes(group: dist.ProcessGroup, message: bytes) -> list[bytes]:
    """Every member's ``message``, in group-rank order: one all-gather of fixed slots when every
    message fits in ``SLOT_BYTES``, a second at the longest length when one does not."""
    length = len(message)
    slot = _as_tensor(length.to_bytes(_LENGTH_BYTES, "little") + message[:SLOT_BYTES])
    slots = _all_gather(group, slot, _LENGTH_BYTES + SLOT_BYTES)
    lengths = [int.from_bytes(bytes(row[:_LENGTH_BYTES].tolist()), "little") for row in slots]
    if max(lengths) <= SLOT_BYTES:
        return [
            bytes(row[_LENGTH_BYTES : _LENGTH_BYTES + n].tolist())
            for row, n in zip(slots, lengths, strict=True)
        ]
    rows = _all_gather(group, _as_tensor(message), max(lengths))
    return [bytes(row[:n].tolist()) for row, n in zip(rows, lengths, strict=True)]


def _as_tensor(data: bytes) -> torch.Tensor:
    if not data:  # frombuffer refuses an empty buffer
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _all_gather(group: dist.ProcessGroup, data: torch.Tensor, width: int) -> torch.Tensor:
    """Every member's ``data``, zero-padded to ``width`` bytes: one row per group rank."""
    device = collective_device(group)
    row = torch.zeros(width, dtype=torch.uint8, device=device)
    row[: data.numel()] = data.to(device)
    rows = torch.empty(dist.get_world_size(group) * width, dtype=torch.uint8, device=device)
    dist.all_gather_into_tensor(rows, row, group=group)
    return rows.view(-1, width).cpu()


def collective_device(group: dist.ProcessGroup) -> torch.device:
    """Where ``group`` takes the verdict's tensors: the CPU where its backend serves CPU tensors
    (Gloo; a ``cpu:gloo,cuda:nccl`` group sends them through Gloo), else this rank's device of
    the type the backend declares (its GPU for NCCL, its XPU for XCCL). Every member reads the
    same backend, so every member gathers on one."""
    name = dist.get_backend(group)
    if ":" in name:
        served = [pair.split(":", 1)[0] for pair in name.split(",")]
    else:
        served = dist.Backend.backend_capability.get(name, ["cpu"])
    return local_device("cpu" if "cpu" in served else served[0])


def local_device(device_type: str) -> torch.device:
    """This rank's device of ``device_type``: its current one for an accelerator."""
    if device_type == "cpu":
        return torch.device("cpu")
    return torch.device(device_type, torch.get_device_module(device_type).current_device())


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
