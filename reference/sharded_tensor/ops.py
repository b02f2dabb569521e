"""Torch functions on sharded tensors (spec/st-ops.md): each means the op on the value.

Three ideas carry every op here:

- *Read the global metadata, not the local shards*, to decide: every rank holds it, so every
  rank reaches the same answer, also a rank that holds no shard (ST-OP-15). Refusals that the
  single-device op makes are made before anything moves or is written.
- *Bring one tensor into the other's boxes* where two layouts meet (``equal``, ``allclose``,
  ``copy_``): one ``transfer``, each element sent at most once, then local work box by box.
- *One draw*: a random op draws a tensor of the global size on every rank, each rank keeping its
  boxes (as ``reference.dtensor.random`` does): every box is a different stretch of one draw
  (ST-OP-14), and the bound of ``kaiming_uniform_`` is the global tensor's (ST-OP-13). The price
  is each rank drawing the whole tensor; nothing is sent.

``ShardedTensor.__torch_function__`` sends the functions of ``HANDLED`` here; the shard-wise
methods (``clone``, ``detach``, ...) live on the class and call ``shard_wise``.

Rules and where they live:

- ST-OP-1, ST-OP-2, ST-OP-3: ``equal``, ``allclose``, ``_compare``
- ST-OP-4, ST-OP-5, ST-OP-6, ST-OP-7: ``shard_wise``, ``requires_grad_``, ``detach``
- ST-OP-8, ST-OP-9: ``copy_`` (never refused: any layout is brought into the destination's)
- ST-OP-10, ST-OP-11: ``_like``
- ST-OP-12, ST-OP-13, ST-OP-14: ``constant_``, ``uniform_``, ``normal_``, ``kaiming_uniform_``,
  ``_draw_into``
- ST-OP-15: ``_compare``, ``requires_grad_``, ``copy_``, ``_draw_into``
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from reference.sharded_tensor import create
from reference.sharded_tensor.metadata import Shard
from reference.sharded_tensor.transfer import transfer
from reference.verdict import collective_device, local_device

if TYPE_CHECKING:
    from reference.sharded_tensor.sharded_tensor import ShardedTensor


def _same_group(a: ShardedTensor, b: ShardedTensor, op: str) -> None:
    if dist.get_process_group_ranks(a.process_group) != dist.get_process_group_ranks(
        b.process_group
    ):
        raise ValueError(f"[ST-OP-1] {op} needs two sharded tensors on one process group")


def _into_boxes_of(x: ShardedTensor, src: ShardedTensor) -> list[torch.Tensor]:
    """``src``'s values in ``x``'s boxes: one tensor (``src``'s dtype) per local shard of ``x``,
    in the order of ``x.local_shards()``. A collective over the group."""
    me = dist.get_rank()
    shards = x.metadata().shards_metadata
    mine = [j for j, s in enumerate(shards) if s.placement.rank() == me]
    into = {
        j: torch.empty(shards[j].shard_sizes, dtype=src.dtype, device=shards[j].placement.device())
        for j in mine
    }
    transfer(
        x.process_group,
        src.metadata().shards_metadata,
        {i: t.detach() for i, t in src.local_shards_by_index().items()},
        shards,
        into,
    )
    index = {id(t): j for j, t in x.local_shards_by_index().items()}
    return [into[index[id(s.tensor)]] for s in x.local_shards()]


def _compare(a: ShardedTensor, b: ShardedTensor, same: Callable[..., bool], op: str) -> bool:
    """Whether ``same`` holds for every box of ``a`` against ``b``'s values there, agreed by
    every member: an all-reduce of one flag, the minimum over the group."""
    _same_group(a, b, op)
    if a.size() != b.size():
        if op == "allclose":  # ST-OP-15: torch.allclose refuses other sizes
            raise RuntimeError(f"[ST-OP-15] allclose of sizes {a.size()} and {b.size()}")
        return False
    if op == "allclose" and a.dtype != b.dtype:  # ST-OP-15, as torch.allclose refuses
        raise RuntimeError(f"[ST-OP-15] allclose of dtypes {a.dtype} and {b.dtype}")
    theirs = _into_boxes_of(a, b)
    ok = all(same(s.tensor.detach(), t) for s, t in zip(a.local_shards(), theirs, strict=True))
    flag = torch.tensor([int(ok)], device=collective_device(a.process_group))
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=a.process_group)
    return bool(flag.item())


def equal(a: ShardedTensor, b: ShardedTensor) -> bool:
    """``torch.equal`` of the two values, on every member (ST-OP-1, 3)."""
    return _compare(a, b, torch.equal, "equal")


def allclose(
    a: ShardedTensor,
    b: ShardedTensor,
    rtol: float = 1e-05,
    atol: float = 1e-08,
    equal_nan: bool = False,
) -> bool:
    """``torch.allclose`` of the two values, on every member (ST-OP-2, 3)."""

    def close(x: torch.Tensor, y: torch.Tensor) -> bool:
        return torch.allclose(x, y, rtol, atol, equal_nan)

    return _compare(a, b, close, "allclose")


def shard_wise(x: ShardedTensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> ShardedTensor:
    """A new sharded tensor of ``x``'s layout holding ``fn`` of each local tensor (ST-OP-4, 5),
    its metadata's ``requires_grad`` as the local results have it (ST-OP-7)."""
    metadata = copy.deepcopy(x.metadata())
    shards = [Shard(fn(s.tensor), s.metadata) for s in x.local_shards()]
    if shards:
        metadata.tensor_properties.requires_grad = shards[0].tensor.requires_grad
    return type(x)(metadata, shards, x.process_group, x.sharding_spec())


def detach(x: ShardedTensor) -> ShardedTensor:
    """The same values, cut from autograd: ``requires_grad`` is ``False`` in the metadata too,
    also on a rank with no shard to tell it (ST-OP-7)."""
    result = shard_wise(x, torch.Tensor.detach)
    result.metadata().tensor_properties.requires_grad = False
    return result


def requires_grad_(x: ShardedTensor, requires_grad: bool = True) -> ShardedTensor:
    """Set ``requires_grad`` on every local tensor and in the metadata; ``x`` itself (ST-OP-7).
    An integer tensor is refused on every rank, as one device refuses it (ST-OP-15)."""
    if requires_grad and not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"[ST-OP-15] only floating tensors require grad, not {x.dtype}")
    for s in x.local_shards():
        s.tensor.requires_grad_(requires_grad)
    x.metadata().tensor_properties.requires_grad = requires_grad
    return x


def copy_(x: ShardedTensor, src: ShardedTensor, non_blocking: bool = False) -> ShardedTensor:
    """``src``'s value written into ``x``'s boxes, cast to ``x``'s dtype; ``x`` (ST-OP-8). Any
    layout of ``src`` is brought into ``x``'s, so nothing is refused (ST-OP-9)."""
    _same_group(x, src, "copy_")
    if x.size() != src.size():
        raise ValueError(f"[ST-OP-8] copy_ of a {list(src.size())} source into {list(x.size())}")
    if x.metadata().tensor_properties.requires_grad:  # ST-OP-15: a leaf that requires grad
        raise RuntimeError("[ST-OP-15] copy_ into a sharded tensor that requires grad")
    for s, t in zip(x.local_shards(), _into_boxes_of(x, src), strict=True):
        s.tensor.copy_(t, non_blocking)
    return x


def _like(
    make: Callable[..., ShardedTensor], x: ShardedTensor, *fill: Any, dtype=None,
    requires_grad: bool = False, **rest: Any,
) -> ShardedTensor:  # fmt: skip
    """A constructor of ``x``'s layout and group, in ``x``'s dtype unless ``dtype`` is given
    (ST-OP-10, 11). Other options (device, layout, memory format) are not supported."""
    if any(v is not None and v is not torch.preserve_format for v in rest.values()):
        raise NotImplementedError(f"[ST-OP-10] *_like of sharded tensors takes no {sorted(rest)}")
    return make(x.sharding_spec(), x.size(), *fill, dtype=x.dtype if dtype is None else dtype,
                requires_grad=requires_grad, process_group=x.process_group)  # fmt: skip


def empty_like(x: ShardedTensor, **options: Any) -> ShardedTensor:
    return _like(create.empty, x, **options)


def zeros_like(x: ShardedTensor, **options: Any) -> ShardedTensor:
    return _like(create.zeros, x, **options)


def ones_like(x: ShardedTensor, **options: Any) -> ShardedTensor:
    return _like(create.ones, x, **options)


def full_like(x: ShardedTensor, fill_value: Any, **options: Any) -> ShardedTensor:
    return _like(create.full, x, fill_value, **options)


def rand_like(x: ShardedTensor, **options: Any) -> ShardedTensor:
    """One uniform draw of ``x``'s global size in ``x``'s layout (ST-OP-13, 14)."""
    result = _like(create.empty, x, **options)
    return _draw_into(result, torch.Tensor.uniform_)


def randn_like(x: ShardedTensor, **options: Any) -> ShardedTensor:
    """One normal draw of ``x``'s global size in ``x``'s layout (ST-OP-13, 14)."""
    result = _like(create.empty, x, **options)
    return _draw_into(result, torch.Tensor.normal_)


@torch.no_grad()
def _draw_into(x: ShardedTensor, draw: Callable[[torch.Tensor], Any]) -> ShardedTensor:
    """``draw`` on a tensor of ``x``'s global size and dtype, made on every rank from its own
    generator (``torch.manual_seed`` on every rank gives them one state); each local tensor
    takes its box of it. Every rank draws, a rank with no shard too: every rank's generator
    moves alike, and a draw the single-device op refuses is refused on every rank (ST-OP-15)."""
    shards = x.metadata().shards_metadata
    device = local_device(shards[0].placement.device().type) if shards else torch.device("cpu")
    whole = torch.empty(x.size(), dtype=x.dtype, device=device)
    draw(whole)
    for s in x.local_shards():
        s.tensor.copy_(_box(whole, s.metadata.shard_offsets, s.metadata.shard_sizes))
    return x


def _box(whole: torch.Tensor, offsets: list[int], sizes: list[int]) -> torch.Tensor:
    """The view of a box of ``whole``."""
    for d, (o, n) in enumerate(zip(offsets, sizes, strict=True)):
        whole = whole.narrow(d, o, n)
    return whole


@torch.no_grad()
def constant_(tensor: ShardedTensor, val: Any) -> ShardedTensor:
    """Every element ``val`` (ST-OP-12)."""
    for s in tensor.local_shards():
        s.tensor.fill_(val)
    return tensor


def uniform_(
    tensor: ShardedTensor, a: float = 0.0, b: float = 1.0, generator: None = None
) -> ShardedTensor:
    """One draw from ``U(a, b)`` (ST-OP-12 to 14)."""
    return _draw_into(tensor, lambda t: t.uniform_(a, b))


def normal_(
    tensor: ShardedTensor, mean: float = 0.0, std: float = 1.0, generator: None = None
) -> ShardedTensor:
    """One draw from ``N(mean, std^2)`` (ST-OP-12 to 14)."""
    return _draw_into(tensor, lambda t: t.normal_(mean, std))


def kaiming_uniform_(
    tensor: ShardedTensor, a: float = 0, mode: str = "fan_in",
    nonlinearity: str = "leaky_relu", generator: None = None,
) -> ShardedTensor:  # fmt: skip
    """The single-device initialiser on the global size: its fan, its bound, its refusal of a
    tensor of fewer than two dims, on every rank (ST-OP-13, 15)."""

    def draw(whole: torch.Tensor) -> None:
        torch.nn.init.kaiming_uniform_(whole, a=a, mode=mode, nonlinearity=nonlinearity)

    return _draw_into(tensor, draw)


# What ``ShardedTensor.__torch_function__`` runs for each torch function.
HANDLED: dict[Callable[..., Any], Callable[..., Any]] = {
    torch.equal: equal,
    torch.allclose: allclose,
    torch.empty_like: empty_like,
    torch.zeros_like: zeros_like,
    torch.ones_like: ones_like,
    torch.full_like: full_like,
    torch.rand_like: rand_like,
    torch.randn_like: randn_like,
    torch.nn.init.constant_: constant_,
    torch.nn.init.uniform_: uniform_,
    torch.nn.init.normal_: normal_,
    torch.nn.init.kaiming_uniform_: kaiming_uniform_,
}
