"""Placements: where a shard lives, written ``rank:<r>/<device>`` (spec/st-metadata.md).

A placement string is parsed once, by the strict grammar of ST-META-5, when the ``ShardMetadata``
that holds it is built; the parsed form compares, hashes and pickles by value, with no process
group.

Rules and where they live:

- ST-META-5: ``Placement.__init__``, ``_device``, ``_worker``
- ST-META-6: ``Placement.rank``, ``Placement.device``, ``Placement.__str__``,
  ``Placement.__eq__``, ``Placement.__hash__``
- ST-META-7: ``Placement.__init__``, ``as_placement``
- ST-META-12: ``Placement.__reduce__``
- ST-META-13: ``Placement``
"""

from __future__ import annotations

import re

import torch

_DIGITS = re.compile(r"[0-9]+")  # ASCII only: str.isdigit would accept "١" (ST-META-5)


def _device(text: str, placement: str) -> torch.device:
    try:
        return torch.device(text)
    except (RuntimeError, ValueError):
        # Note: PyTorch lets torch.device's RuntimeError escape; a bad device is a bad value.
        raise ValueError(f"[ST-META-5] placement {placement!r}: {text!r} is not a device") from None


class Placement:
    """A parsed placement: a global rank (or an RPC worker name) and a device.

    Plays the part of PyTorch's ``_remote_device``, with the strict grammar of ST-META-5.
    """

    __slots__ = ("_device", "_rank", "_worker")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"[ST-META-7] a placement is a str, got {type(text).__name__}")
        # ST-META-5: at most one '/', no empty part.
        parts = text.split("/")
        if len(parts) > 2 or not all(parts):
            raise ValueError(f"[ST-META-5] placement {text!r} is not '<who>/<device>' or '<who>'")
        who = parts[0]
        self._rank: int | None = None
        self._worker: str | None = None
        if who.startswith("rank:"):
            digits = who.removeprefix("rank:")
            if not _DIGITS.fullmatch(digits):
                raise ValueError(f"[ST-META-5] placement {text!r}: rank {digits!r} is not digits")
            self._rank = int(digits)
            self._device = _device(parts[1] if len(parts) == 2 else "cpu", text)
        elif len(parts) == 2:
            self._worker = _worker(who, text)
            self._device = _device(parts[1], text)
        else:
            # One part, not 'rank:': a device ("cpu", "cuda:1") if torch accepts it, else a worker.
            try:
                self._device = torch.device(who)
            except (RuntimeError, ValueError):
                self._worker = _worker(who, text)
                self._device = torch.device("cpu")

    def rank(self) -> int | None:
        return self._rank

    def device(self) -> torch.device:
        return self._device

    def worker_name(self) -> str | None:
        return self._worker

    # ST-META-6: canonical form, equality by rank, device and worker.
    def __str__(self) -> str:
        if self._rank is not None:
            return f"rank:{self._rank}/{self._device}"
        if self._worker is not None:
            return f"{self._worker}/{self._device}"
        return str(self._device)

    def __repr__(self) -> str:
        return str(self)

    def _key(self) -> tuple[int | None, str | None, torch.device]:
        return self._rank, self._worker, self._device

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Placement) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return Placement, (str(self),)


def _worker(name: str, text: str) -> str:
    # ST-META-5: a worker name is non-empty and has neither '/' nor ':'.
    if ":" in name:
        raise ValueError(
            f"[ST-META-5] placement {text!r}: {name!r} is neither 'rank:<r>' nor a worker"
        )
    return name


def as_placement(value: str | Placement) -> Placement:
    """The parsed form of a placement given as a string or already parsed (ST-META-7)."""
    return value if isinstance(value, Placement) else Placement(value)
