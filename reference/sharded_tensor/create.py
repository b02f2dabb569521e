"""Construction from a spec (ST-LIFE-1 to 6): build the layout, allocate the local shards.

Every rank builds the layout from the spec alone; the ranks then check they were asked the same
before any rank allocates, so a mismatch is one error on every rank, not two different tensors.

Rules and where they live:

- ST-LIFE-1, ST-LIFE-5: ``_create``
- ST-LIFE-2: ``empty``, ``zeros``, ``ones``, ``rand``, ``randn``, ``full``, ``_create``
- ST-LIFE-3: ``parse_size``
- ST-LIFE-4: ``check_properties``, ``_create``
- ST-LIFE-6: ``_create``, ``Arguments``
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
import torch.distributed as dist

from reference.sharded_tensor.metadata import Shard, TensorProperties
from reference.sharded_tensor.sharded_tensor import ShardedTensor
from reference.sharded_tensor.sharding_spec import ShardingSpec
from reference.sharded_tensor.validation import check_layout, check_placements
from reference.verdict import group_of, reach_verdict, require_same

# How each constructor fills a local tensor of a given shape, dtype and device.
Fill = Callable[[list[int], torch.dtype, torch.device], torch.Tensor]


class Arguments(NamedTuple):
    """What each rank was asked to build; every rank must have been asked the same (ST-LIFE-6)."""

    spec: ShardingSpec
    size: torch.Size
    properties: TensorProperties


def parse_size(size: Sequence) -> torch.Size:
    """``*size`` as separate ints or one sequence of ints (ST-LIFE-3)."""
    if len(size) == 1 and isinstance(size[0], Sequence):
        size = size[0]
    # ST-LIFE-3: ints (not bools), non-negative.
    if not all(type(s) is int for s in size):
        raise TypeError(f"[ST-LIFE-3] size must be ints, got {list(size)!r}")
    if any(s < 0 for s in size):
        raise ValueError(f"[ST-LIFE-3] size must be non-negative, got {list(size)!r}")
    return torch.Size(size)


def check_properties(properties: TensorProperties) -> None:
    """ST-LIFE-4: strided and contiguous are the only tensor layout and memory format."""
    if properties.layout != torch.strided:
        raise NotImplementedError(f"[ST-LIFE-4] layout {properties.layout} is not supported")
    if properties.memory_format != torch.contiguous_format:
        raise NotImplementedError(
            f"[ST-LIFE-4] memory_format {properties.memory_format} is not supported"
        )


def _create(
    fill: Fill,
    spec: ShardingSpec,
    size: Sequence,
    dtype: torch.dtype | None,
    layout: torch.layout,
    requires_grad: bool,
    pin_memory: bool,
    memory_format: torch.memory_format,
    process_group: dist.ProcessGroup | None,
) -> ShardedTensor:
    group = group_of(process_group)

    def check():
        # ST-LIFE-5: a ShardingSpec.
        if not isinstance(spec, ShardingSpec):
            raise TypeError(f"[ST-LIFE-5] expected a ShardingSpec, got {type(spec).__name__}")
        shape = parse_size(size)
        # ST-LIFE-4: dtype=None is the default dtype now.
        props = TensorProperties(
            dtype=torch.get_default_dtype() if dtype is None else dtype,
            layout=layout,
            requires_grad=requires_grad,
            memory_format=memory_format,
            pin_memory=pin_memory,
        )
        check_properties(props)
        metadata = spec.build_metadata(shape, props)
        check_layout(metadata)
        check_placements(metadata.shards_metadata, dist.get_process_group_ranks(group))
        return metadata, Arguments(spec, shape, props)

    metadata, arguments = reach_verdict(group, check)
    # ST-LIFE-6: every rank builds the same layout.
    require_same(arguments, "ST-LIFE-6", "the construction arguments (spec, size, properties)")
    me, props = dist.get_rank(), metadata.tensor_properties
    local = []
    for shard in metadata.shards_metadata:
        if shard.placement.rank() == me:
            tensor = fill(shard.shard_sizes, props.dtype, shard.placement.device())
            tensor = tensor.pin_memory() if props.pin_memory else tensor
            local.append(Shard(tensor.requires_grad_(requires_grad), shard))
    return ShardedTensor(metadata, local, group, spec)


def _constructor(fill: Fill, name: str) -> Callable[..., ShardedTensor]:
    def construct(
        spec: ShardingSpec,
        *size: int | Sequence[int],
        dtype: torch.dtype | None = None,
        layout: torch.layout = torch.strided,
        requires_grad: bool = False,
        pin_memory: bool = False,
        memory_format: torch.memory_format = torch.contiguous_format,
        process_group: dist.ProcessGroup | None = None,
    ) -> ShardedTensor:
        return _create(
            fill, spec, size, dtype, layout, requires_grad, pin_memory, memory_format, process_group
        )

    construct.__name__ = construct.__qualname__ = name
    construct.__doc__ = f"A sharded tensor laid out by ``spec``, each shard made by torch.{name}."
    return construct


# ST-LIFE-2: each constructor is the torch function of its name, applied shard by shard.
empty = _constructor(lambda s, dtype, device: torch.empty(s, dtype=dtype, device=device), "empty")
zeros = _constructor(lambda s, dtype, device: torch.zeros(s, dtype=dtype, device=device), "zeros")
ones = _constructor(lambda s, dtype, device: torch.ones(s, dtype=dtype, device=device), "ones")
rand = _constructor(lambda s, dtype, device: torch.rand(s, dtype=dtype, device=device), "rand")
randn = _constructor(lambda s, dtype, device: torch.randn(s, dtype=dtype, device=device), "randn")


def full(
    spec: ShardingSpec,
    size: Sequence[int],
    fill_value: float | int | bool,
    *,
    dtype: torch.dtype | None = None,
    layout: torch.layout = torch.strided,
    requires_grad: bool = False,
    pin_memory: bool = False,
    memory_format: torch.memory_format = torch.contiguous_format,
    process_group: dist.ProcessGroup | None = None,
) -> ShardedTensor:
    """A sharded tensor laid out by ``spec`` with every element ``fill_value``."""

    def fill(s: list[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.full(s, fill_value, dtype=dtype, device=device)

    return _create(
        fill, spec, (size,), dtype, layout, requires_grad, pin_memory, memory_format, process_group
    )
