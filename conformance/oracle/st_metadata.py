"""ShardedTensor metadata (spec/st-metadata.md): placements, shard boxes, tensor properties.

Models ST-META-1 to ST-META-11 as plain data: ``ShardMeta`` is a ``ShardMetadata`` with tuples
(list or tuple never matters, ST-META-4) and a canonical placement string (ST-META-6);
``TensorMeta`` is a ``ShardedTensorMetadata``. ``shard_metadata_verdict`` judges raw,
possibly ill-typed, JSON values.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from conformance.oracle.vocabulary import VALID, Verdict, is_int, type_error, value_error

# -- placement strings (ST-META-5, 6) --------------------------------------------------------------

_RANK = re.compile(r"rank:([0-9]+)", re.ASCII)


@dataclass(frozen=True)
class RemoteDevice:
    """A parsed placement: a global rank or a worker name (or neither), and a device."""

    rank: int | None
    device: str
    worker: str | None = None

    def __str__(self) -> str:
        if self.rank is not None:
            return f"rank:{self.rank}/{self.device}"
        return f"{self.worker}/{self.device}" if self.worker is not None else self.device


def _device(text: str) -> str | None:
    """``str(torch.device(text))``, or ``None`` when torch.device rejects it."""
    try:
        return str(torch.device(text))
    except (RuntimeError, ValueError, TypeError):
        return None


def parse_remote_device(text: str) -> RemoteDevice:
    """Parse a placement string by the grammar of ST-META-5; ``str()`` of the result is the
    canonical form of ST-META-6. A lone word that ``torch.device`` accepts is a device, any
    other lone word without ``:`` is a worker name (on the default device, ``cpu``)."""
    parts = text.split("/")
    if len(parts) > 2 or not all(parts):
        raise ValueError(f"ST-META-5: bad placement {text!r}")
    head, device = (parts[0], parts[1]) if len(parts) == 2 else (parts[0], None)
    if device is not None and (device := _device(device)) is None:
        raise ValueError(f"ST-META-5: bad device in placement {text!r}")
    if head.startswith("rank:"):
        if not (m := _RANK.fullmatch(head)):
            raise ValueError(f"ST-META-5: bad rank in placement {text!r}")
        return RemoteDevice(int(m[1]), device or "cpu")
    if device is None and (only := _device(head)) is not None:
        return RemoteDevice(None, only)
    if ":" in head:
        raise ValueError(f"ST-META-5: bad placement {text!r}")
    return RemoteDevice(None, device or "cpu", worker=head)


def canonical_placement(text: str | None) -> str | None:
    return None if text is None else str(parse_remote_device(text))


# -- ShardMetadata (ST-META-1 to 4, 7) -------------------------------------------------------------


def shard_metadata_verdict(offsets: Any, sizes: Any, placement: Any) -> Verdict:
    """Whether ``ShardMetadata(offsets, sizes, placement)`` may be constructed.

    Check order: types first (ST-META-3 entries are ints, ST-META-7 placement is a string or
    None), then values (ST-META-1 one length, ST-META-2 non-negative, ST-META-5 grammar)."""
    # ST-META-3
    if not all(is_int(x) for x in [*offsets, *sizes]):
        return type_error("ST-META-3")
    # ST-META-7
    if placement is not None and not isinstance(placement, str):
        return type_error("ST-META-7")
    # ST-META-1
    if len(offsets) != len(sizes):
        return value_error("ST-META-1")
    # ST-META-2
    if any(x < 0 for x in [*offsets, *sizes]):
        return value_error("ST-META-2")
    # ST-META-5
    if placement is not None:
        try:
            parse_remote_device(placement)
        except ValueError:
            return value_error("ST-META-5")
    return VALID


@dataclass(frozen=True)
class ShardMeta:
    """One shard: the box ``(offsets, sizes)`` and its placement, in canonical form."""

    offsets: tuple[int, ...]
    sizes: tuple[int, ...]
    placement: str | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", tuple(self.offsets))
        object.__setattr__(self, "sizes", tuple(self.sizes))
        object.__setattr__(self, "placement", canonical_placement(self.placement))

    @property
    def ndim(self) -> int:
        return len(self.offsets)

    @property
    def volume(self) -> int:
        return math.prod(self.sizes)

    @property
    def device(self) -> RemoteDevice | None:
        return None if self.placement is None else parse_remote_device(self.placement)

    @property
    def rank(self) -> int | None:
        return None if self.placement is None else self.device.rank

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ShardMeta:
        return cls(tuple(data["offsets"]), tuple(data["sizes"]), data["placement"])

    def to_json(self) -> dict[str, Any]:
        return {
            "offsets": list(self.offsets),
            "sizes": list(self.sizes),
            "placement": self.placement,
        }

    def __str__(self) -> str:
        return f"({list(self.offsets)}, {list(self.sizes)}) @ {self.placement}"


# -- TensorProperties (ST-META-8 to 10) ------------------------------------------------------------

MEM_FORMAT_ENCODING = {"contiguous_format": 0, "channels_last": 1, "preserve_format": 2}


@dataclass(frozen=True)
class Properties:
    """``TensorProperties`` with the defaults of ST-META-8 (float32 being the default dtype)."""

    dtype: str = "float32"
    layout: str = "strided"
    requires_grad: bool = False
    memory_format: str = "contiguous_format"
    pin_memory: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Properties:
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        return {
            "dtype": self.dtype,
            "layout": self.layout,
            "requires_grad": self.requires_grad,
            "memory_format": self.memory_format,
            "pin_memory": self.pin_memory,
        }


def properties_verdict(props: Properties) -> Verdict:
    """A memory format outside the encoding table is a ValueError (ST-META-10)."""
    return VALID if props.memory_format in MEM_FORMAT_ENCODING else value_error("ST-META-10")


def serialized(props: Properties) -> tuple[str, str, bool, int, bool]:
    """The pickled 5-tuple ``(dtype, layout, requires_grad, encoding, pin_memory)``
    (ST-META-9), with the encoding's integer value."""
    encoding = MEM_FORMAT_ENCODING[props.memory_format]
    return (props.dtype, props.layout, props.requires_grad, encoding, props.pin_memory)


# -- ShardedTensorMetadata (ST-META-11) ------------------------------------------------------------


@dataclass(frozen=True)
class TensorMeta:
    """A ``ShardedTensorMetadata``: shards in their meaningful order, global size, properties."""

    shards: tuple[ShardMeta, ...] = ()
    size: tuple[int, ...] = ()
    properties: Properties = field(default_factory=Properties)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shards", tuple(self.shards))
        object.__setattr__(self, "size", tuple(self.size))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorMeta:
        return cls(
            tuple(ShardMeta.from_json(s) for s in data["shards"]),
            tuple(data["size"]),
            Properties.from_json(data.get("properties", {})),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "shards": [s.to_json() for s in self.shards],
            "size": list(self.size),
            "properties": self.properties.to_json(),
        }
