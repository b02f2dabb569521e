"""The ShardedTensor class: a layout, this rank's shards, and the group they live on.

A plain object, not a ``torch.Tensor`` subclass: it has the accessors of ST-LIFE-15, the
collectives gather and reshard, and the few torch functions of spec/st-ops.md (``torch.equal``,
the ``*_like`` constructors, the ``nn.init`` functions), which ``__torch_function__`` sends to
``ops.py``; no arithmetic. Build one with the constructors of
``create.py``, ``shard.py`` and ``from_local.py``, which validate; ``__init__`` trusts them.

Rules and where they live:

- ST-LIFE-15: ``ShardedTensor.metadata``, ``ShardedTensor.local_shards``, ``ShardedTensor.size``,
  ``ShardedTensor.dim``, ``ShardedTensor.dtype``
- ST-LIFE-16: ``ShardedTensor.local_tensor``
- ST-LIFE-17: ``ShardedTensor.to``, ``ShardedTensor.cpu``, ``ShardedTensor.clone``
- ST-LIFE-18: ``ShardedTensor.__getstate__``, ``ShardedTensor.__setstate__``,
  ``load_with_process_group``
- ST-RESHARD-6: ``ShardedTensor.reshard`` (a new tensor; this one keeps its shards)
- ST-OP-1: ``ShardedTensor.__torch_function__``
- ST-OP-7: ``ShardedTensor.to``, ``ShardedTensor.requires_grad_``, ``ShardedTensor.detach``
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from reference.sharded_tensor import gather, reshard
from reference.sharded_tensor.metadata import Shard, ShardedTensorMetadata, ShardMetadata
from reference.sharded_tensor.placement import Placement
from reference.sharded_tensor.sharding_spec import ShardingSpec, spec_of

_LOAD_GROUP: list[dist.ProcessGroup] = []


class ShardedTensor:
    def __init__(
        self,
        metadata: ShardedTensorMetadata,
        local_shards: list[Shard],
        process_group: dist.ProcessGroup,
        spec: ShardingSpec | None = None,
    ) -> None:
        self._metadata = metadata
        self._local_shards = local_shards
        self._process_group = process_group
        self._spec = spec

    # ST-LIFE-15: accessors, no communication.
    def metadata(self) -> ShardedTensorMetadata:
        return self._metadata

    def local_shards(self) -> list[Shard]:
        return self._local_shards

    def local_tensor(self) -> torch.Tensor:
        # ST-LIFE-16: exactly one local shard.
        if len(self._local_shards) != 1:
            raise NotImplementedError(
                f"[ST-LIFE-16] local_tensor needs exactly one local shard, "
                f"this rank holds {len(self._local_shards)}"
            )
        return self._local_shards[0].tensor

    def size(self, dim: int | None = None) -> torch.Size | int:
        return self._metadata.size if dim is None else self._metadata.size[dim]

    def dim(self) -> int:
        return len(self._metadata.size)

    @property
    def dtype(self) -> torch.dtype:
        return self._metadata.tensor_properties.dtype

    @property
    def requires_grad(self) -> bool:
        return self._metadata.tensor_properties.requires_grad

    @property
    def process_group(self) -> dist.ProcessGroup:
        return self._process_group

    def sharding_spec(self) -> ShardingSpec:
        """The spec it was built with, or the one its layout follows (a chunk spec if one
        builds exactly this layout, else an enumeration)."""
        return self._spec if self._spec is not None else spec_of(self._metadata)

    def local_shards_by_index(self) -> dict[int, torch.Tensor]:
        """This rank's tensors keyed by their index in ``shards_metadata``, each matched by its
        box: local shards need not come in the order of their entries (a rank may pass them in
        any order with the global metadata), and two entries of one box are two copies of it."""
        me = dist.get_rank()
        free: dict[tuple, list[int]] = {}
        for i, s in enumerate(self._metadata.shards_metadata):
            if s.placement.rank() == me:
                free.setdefault(_box(s), []).append(i)
        return {free[_box(shard.metadata)].pop(0): shard.tensor for shard in self._local_shards}

    # Collectives.
    def gather(self, dst: int = 0, out: torch.Tensor | None = None) -> None:
        """Write the global tensor into ``out`` on group rank ``dst`` (spec/st-gather.md)."""
        gather.gather(self, dst, out)

    def reshard(self, spec: ShardingSpec) -> ShardedTensor:
        """A new sharded tensor with ``spec``'s layout and this one's data (st-reshard.md).

        Note: PyTorch changes ``self`` in place and returns it; this returns a new tensor and
        leaves ``self`` as it was (ST-RESHARD-6 holds by construction).
        """
        metadata, local_shards = reshard.reshard(self, spec)
        return ShardedTensor(metadata, local_shards, self._process_group, spec)

    # ST-LIFE-17: to, cpu, clone, shard by shard; local, no communication.
    def to(self, target: torch.dtype | torch.device | str) -> ShardedTensor:
        """The same layout with every local tensor converted to a dtype or moved to a device."""
        if isinstance(target, torch.dtype):
            if target == self.dtype:
                return self
            metadata = copy.deepcopy(self._metadata)
            metadata.tensor_properties.dtype = target
            # a cast to an integer dtype leaves autograd, as on one device (ST-OP-7)
            metadata.tensor_properties.requires_grad &= (
                target.is_floating_point or target.is_complex
            )
            shards = [Shard(s.tensor.to(target), s.metadata) for s in self._local_shards]
            return ShardedTensor(metadata, shards, self._process_group, self._spec)
        device = torch.device(target)
        if all(s.placement.device() == device for s in self._metadata.shards_metadata):
            return self
        moved = [
            ShardMetadata(
                s.shard_offsets, s.shard_sizes, Placement(f"rank:{s.placement.rank()}/{device}")
            )
            for s in self._metadata.shards_metadata
        ]
        metadata = ShardedTensorMetadata(
            moved, self._metadata.size, self._metadata.tensor_properties
        )
        me = dist.get_rank()
        mine = [m for m in moved if m.placement.rank() == me]
        shards = [
            Shard(s.tensor.to(device), m) for s, m in zip(self._local_shards, mine, strict=True)
        ]
        return ShardedTensor(metadata, shards, self._process_group)

    def cpu(self) -> ShardedTensor:
        return self.to("cpu")

    def clone(self) -> ShardedTensor:
        shards = [Shard(s.tensor.clone(), s.metadata) for s in self._local_shards]
        return ShardedTensor(copy.deepcopy(self._metadata), shards, self._process_group, self._spec)

    # spec/st-ops.md: the shard-wise methods and copy_. ``ops`` imports the constructors, which
    # import this module: it is imported where it is used.
    def detach(self) -> ShardedTensor:
        from reference.sharded_tensor import ops

        return ops.detach(self)

    def contiguous(self) -> ShardedTensor:
        if all(s.tensor.is_contiguous() for s in self._local_shards):
            return self
        from reference.sharded_tensor import ops

        return ops.shard_wise(self, torch.Tensor.contiguous)

    def type_as(self, other: torch.Tensor | ShardedTensor) -> ShardedTensor:
        """``self`` in ``other``'s dtype; ``other``'s dtype is in its metadata, on every rank."""
        return self.to(other.dtype)

    def requires_grad_(self, requires_grad: bool = True) -> ShardedTensor:
        from reference.sharded_tensor import ops

        return ops.requires_grad_(self, requires_grad)

    def copy_(self, src: ShardedTensor, non_blocking: bool = False) -> ShardedTensor:
        from reference.sharded_tensor import ops

        return ops.copy_(self, src, non_blocking)

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        """``torch.equal(a, b)``, ``torch.zeros_like(x)``, ``nn.init.uniform_(x)``, ...: the
        functions of ``ops.HANDLED``; any other is not supported."""
        from reference.sharded_tensor import ops

        if func not in ops.HANDLED:
            raise NotImplementedError(f"[ST-OP-1] {func.__name__} of sharded tensors")
        return ops.HANDLED[func](*args, **(kwargs or {}))

    # ST-LIFE-18: pickling. The group is not picklable: its members are stored and the tensor is
    # loaded onto the group given by ``load_with_process_group`` (the world by default).
    def __getstate__(self) -> tuple:
        members = dist.get_process_group_ranks(self._process_group)
        return self._metadata, self._local_shards, self._spec, members

    def __setstate__(self, state: tuple) -> None:
        self._metadata, self._local_shards, self._spec, members = state
        self._process_group = _LOAD_GROUP[-1] if _LOAD_GROUP else dist.group.WORLD
        if dist.get_process_group_ranks(self._process_group) != members:
            raise ValueError(
                f"[ST-LIFE-18] saved on the group {members}, loaded on "
                f"{dist.get_process_group_ranks(self._process_group)}"
            )

    def __repr__(self) -> str:
        return f"ShardedTensor({self._metadata})"


@contextlib.contextmanager
def load_with_process_group(group: dist.ProcessGroup) -> Iterator[None]:
    """Unpickle sharded tensors onto ``group`` inside this block."""
    _LOAD_GROUP.append(group)
    try:
        yield
    finally:
        _LOAD_GROUP.pop()


def _box(shard: ShardMetadata) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(shard.shard_offsets), tuple(shard.shard_sizes)
