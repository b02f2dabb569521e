"""The value objects of a layout: ShardMetadata, TensorProperties, ShardedTensorMetadata, Shard.

Pure: building, comparing, hashing and pickling them needs no process group (ST-META-13), so
every rank can check a layout alone and ranks can compare layouts by value.

Rules and where they live:

- ST-META-1, ST-META-7: ``ShardMetadata.__init__``
- ST-META-2, ST-META-3: ``_ints``
- ST-META-4: ``ShardMetadata.__eq__``, ``ShardMetadata.__hash__``
- ST-META-8: ``TensorProperties``
- ST-META-9: ``MEM_FORMAT_ENCODING``, ``TensorProperties.__getstate__``,
  ``TensorProperties.__setstate__``
- ST-META-10: ``TensorProperties.__post_init__``
- ST-META-11: ``ShardedTensorMetadata``
- ST-META-12: ``ShardMetadata.__getstate__``, ``ShardMetadata.__setstate__``,
  ``TensorProperties.__getstate__``, ``TensorProperties.__setstate__``
- ST-META-13: ``ShardMetadata``, ``TensorProperties``, ``ShardedTensorMetadata``
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

import torch

from reference.sharded_tensor.placement import Placement, as_placement


def _ints(values: Sequence[int], what: str) -> list[int]:
    # ST-META-3: ints only (bool is an int subclass but never a size).
    if not all(type(v) is int for v in values):
        raise TypeError(f"[ST-META-3] {what} must be ints, got {list(values)!r}")
    # ST-META-2: no negative entry.
    if any(v < 0 for v in values):
        raise ValueError(f"[ST-META-2] {what} must be non-negative, got {list(values)!r}")
    return list(values)


class ShardMetadata:
    """One shard: the box ``shard_offsets`` + ``shard_sizes`` of the global tensor, and its
    placement."""

    __slots__ = ("placement", "shard_offsets", "shard_sizes")

    def __init__(
        self,
        shard_offsets: Sequence[int],
        shard_sizes: Sequence[int],
        placement: str | Placement | None = None,
    ) -> None:
        # ST-META-1: one offset and one size per dimension.
        if len(shard_offsets) != len(shard_sizes):
            raise ValueError(
                f"[ST-META-1] {len(shard_offsets)} offsets but {len(shard_sizes)} sizes: "
                f"{list(shard_offsets)!r}, {list(shard_sizes)!r}"
            )
        # Note: PyTorch keeps the sequences as given, so (0,) != [0] (ST-META-4); we store lists.
        self.shard_offsets = _ints(shard_offsets, "shard_offsets")
        self.shard_sizes = _ints(shard_sizes, "shard_sizes")
        # ST-META-7: a str, a parsed placement or None; not an int, not a torch.device.
        self.placement = None if placement is None else as_placement(placement)

    @property
    def ndim(self) -> int:
        return len(self.shard_sizes)

    @property
    def volume(self) -> int:
        return math.prod(self.shard_sizes)

    # ST-META-4: equal by value; equal objects hash equal.
    def _key(self) -> tuple[tuple[int, ...], tuple[int, ...], Placement | None]:
        return tuple(self.shard_offsets), tuple(self.shard_sizes), self.placement

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShardMetadata) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"ShardMetadata(shard_offsets={self.shard_offsets}, shard_sizes={self.shard_sizes}, "
            f"placement={self.placement})"
        )

    def __getstate__(self) -> tuple[list[int], list[int], Placement | None]:
        return self.shard_offsets, self.shard_sizes, self.placement

    def __setstate__(self, state: tuple[list[int], list[int], Placement | None]) -> None:
        self.shard_offsets, self.shard_sizes, self.placement = state


class MEM_FORMAT_ENCODING(Enum):
    """How a memory format is written in a pickle (ST-META-9): the values are fixed."""

    TORCH_CONTIGUOUS_FORMAT = 0
    TORCH_CHANNELS_LAST = 1
    TORCH_PRESERVE_FORMAT = 2


# ST-META-9: the table of encodable memory formats.
_ENCODING = {
    torch.contiguous_format: MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT,
    torch.channels_last: MEM_FORMAT_ENCODING.TORCH_CHANNELS_LAST,
    torch.preserve_format: MEM_FORMAT_ENCODING.TORCH_PRESERVE_FORMAT,
}
_DECODING = {encoding: memory_format for memory_format, encoding in _ENCODING.items()}


@dataclass
class TensorProperties:
    """What every shard shares: the arguments ``torch.empty`` would take."""

    # ST-META-8: the default dtype is read when the object is made, not when the module loads.
    # Note: PyTorch reads it once, at import time.
    dtype: torch.dtype = field(default_factory=torch.get_default_dtype)
    layout: torch.layout = torch.strided
    requires_grad: bool = False
    memory_format: torch.memory_format = torch.contiguous_format
    pin_memory: bool = False

    def __post_init__(self) -> None:
        for name, kind in _FIELD_TYPES.items():
            if not isinstance(getattr(self, name), kind):
                raise TypeError(f"TensorProperties.{name} must be {kind.__name__}")
        # ST-META-10: a memory format the serialised form cannot hold is refused at once.
        # Note: PyTorch accepts it and fails with RuntimeError when pickling.
        if self.memory_format not in _ENCODING:
            raise ValueError(f"[ST-META-10] memory_format {self.memory_format} cannot be encoded")

    # ST-META-9: the pickled form is (dtype, layout, requires_grad, encoding, pin_memory).
    def __getstate__(self) -> tuple:
        encoding = _ENCODING[self.memory_format]
        return self.dtype, self.layout, self.requires_grad, encoding, self.pin_memory

    def __setstate__(self, state: tuple) -> None:
        self.dtype, self.layout, self.requires_grad, encoding, self.pin_memory = state
        self.memory_format = _DECODING[encoding]

    @staticmethod
    def of(tensor: torch.Tensor) -> TensorProperties:
        """The properties of ``tensor`` as a shard: contiguous is the only format kept."""
        return TensorProperties(
            dtype=tensor.dtype,
            layout=tensor.layout,
            requires_grad=tensor.requires_grad,
            pin_memory=tensor.is_pinned(),
        )


_FIELD_TYPES = {
    "dtype": torch.dtype,
    "layout": torch.layout,
    "requires_grad": bool,
    "memory_format": torch.memory_format,
    "pin_memory": bool,
}


@dataclass
class ShardedTensorMetadata:
    """The whole layout (ST-META-11): shards in their meaningful order, global size, properties."""

    shards_metadata: list[ShardMetadata] = field(default_factory=list)
    size: torch.Size = field(default_factory=torch.Size)
    tensor_properties: TensorProperties = field(default_factory=TensorProperties)

    def __post_init__(self) -> None:
        self.size = torch.Size(_ints(self.size, "size"))


@dataclass
class Shard:
    """A local shard: its tensor and the metadata that places it in the global tensor."""

    tensor: torch.Tensor
    metadata: ShardMetadata
