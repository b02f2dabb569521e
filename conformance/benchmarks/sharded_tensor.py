"""Figures, not pass/fail: reference ShardedTensor beside PyTorch's on one world of any backend
(4-rank Gloo by default; ``--backend nccl`` puts one rank on each GPU).

    python -m conformance.benchmarks.sharded_tensor [--ranks 4] [--backend gloo] [--start fork]
        [--mib 64] [--repeats 5]

Prints
- for shard (from rank 0 into row chunks), gather (row chunks to rank 0) and reshard (row chunks
  to column chunks): the bytes the reference sent to other ranks, counted at its all-to-all
  while it ran, against the lower bound (every element whose owner changes, sent once); the
  excess is the padding;
- the time of each as the ratio reference / PyTorch, and as the ratio reference / floor, the one
  raw collective that moves the same bytes on the same world (scatter for shard, gather for
  gather, all-to-all of the packed column chunks for reshard; into a new tensor where the
  operation returns one: no implementation can do better): median of the repeats, same world,
  same tensor, the four run in turn so none always meets the warmer machine;
- beside it, the ratio to the same moves made by one all-to-all (``a2a``), the collective the
  reference's data path is built on (``transfer``). c10d's scatter and gather need blocks of one
  size, so they carry only even chunks, not every layout; on Gloo they are faster than its
  all-to-all for one sender or receiver (at 2 ranks, 28 ms against 43 ms for shard's 32 MiB),
  and what the reference adds to its all-to-all is the verdict's one small all-gather;
- the time of overlap + coverage validation of a 256 x 256 grid of shards (65,536 shards) as the
  ratio reference / PyTorch's ``validate_non_overlapping_shards_metadata`` + ``check_tensor``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import time
import types
import unittest.mock
import warnings
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist

import reference.sharded_tensor as ref
from conformance.benchmarks.floor import packed
from conformance.benchmarks.world import (
    add_world_options,
    bench_world,
    heading,
    placement,
    settle,
    square_side,
)
from conformance.world import Case
from conformance.world.rank import RankContext
from reference.sharded_tensor import transfer


@contextlib.contextmanager
def counting_sends() -> Iterator[list[int]]:
    """Count the bytes this rank sends to other ranks through the one collective of the
    reference's data path, ``transfer``'s all-to-all (what a rank sends itself stays here); its
    module sees a ``dist`` that counts, everything else (the verdict exchanged before data
    moves) the real one."""
    sent = [0]

    def counted(output, input, output_split_sizes, input_split_sizes, group=None):
        sent[0] += sum(input_split_sizes) - input_split_sizes[dist.get_rank(group)]
        return dist.all_to_all_single(
            output, input, output_split_sizes, input_split_sizes, group=group
        )

    counting = types.SimpleNamespace(**{**vars(dist), "all_to_all_single": counted})
    with unittest.mock.patch.object(transfer, "dist", counting):
        yield sent


def owners(shards: list[ref.ShardMetadata], size: torch.Size) -> torch.Tensor:
    """The rank that holds each element: the dense form of a layout."""
    owner = torch.full(size, -1, dtype=torch.int8)
    for s in shards:
        view = owner
        for d, (o, n) in enumerate(zip(s.shard_offsets, s.shard_sizes, strict=True)):
            view = view.narrow(d, o, n)
        view.fill_(s.placement.rank())
    return owner


def lower_bound(old: list, new: list, size: torch.Size, itemsize: int) -> int:
    """Elements whose owner changes, in bytes: no algorithm can move fewer."""
    return itemsize * int((owners(old, size) != owners(new, size)).sum())


def floors(ctx: RankContext, side: int) -> dict[str, Callable[[], object]]:
    """Each operation's floor: the raw collective that moves one row block per rank, into new
    tensors where the operation returns new tensors (shard, reshard) and into the one given
    where it writes the caller's (gather's ``out``)."""
    k, first = ctx.world_size, ctx.rank == 0
    block = torch.randn(side // k, side, device=ctx.device)
    blocks = [torch.empty_like(block) for _ in range(k)] if first else None
    return {
        "shard": lambda: dist.scatter(torch.empty_like(block), blocks, src=0),
        "gather": lambda: dist.gather(block, blocks, dst=0),
        "reshard": lambda: dist.all_to_all_single(torch.empty_like(block), packed(block, k)),
    }


def all_to_all_floors(ctx: RankContext, side: int) -> dict[str, Callable[[], object]]:
    """Shard's and gather's moves made by one ``all_to_all_single``, the collective that carries
    every layout (``transfer``; reshard's floor already is one): c10d's scatter and gather need
    blocks of one size, so they carry only even chunks, and on Gloo they beat its all-to-all for
    the same bytes."""
    k, first = ctx.world_size, ctx.rank == 0
    n = side // k * side  # elements of one row block
    block = torch.randn(n, device=ctx.device)
    whole = torch.randn(k * n, device=ctx.device) if first else block.new_empty(0)
    to_first, from_first = [n] + [0] * (k - 1), [n] * k if first else [0] * k
    return {
        "shard": lambda: dist.all_to_all_single(
            torch.empty_like(block), whole, to_first, from_first
        ),
        "gather": lambda: dist.all_to_all_single(whole, block, from_first, to_first),
    }


def time_case(ctx: RankContext, side: int, repeats: int) -> dict[str, dict]:
    """Run shard, gather and reshard ``repeats`` times each with the reference, with PyTorch
    and as their floor; this rank's times and bytes sent."""
    warnings.filterwarnings("ignore")  # PyTorch's ShardedTensor is deprecated
    from torch.distributed._shard.api import _shard_tensor
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec as TorchChunk

    x = torch.arange(side * side, dtype=torch.float32, device=ctx.device).reshape(side, side)
    placements = [placement(ctx, r) for r in range(ctx.world_size)]
    rows, cols = ref.ChunkShardingSpec(0, placements), ref.ChunkShardingSpec(1, placements)
    torch_rows, torch_cols = TorchChunk(0, placements), TorchChunk(1, placements)
    out = torch.empty_like(x) if ctx.rank == 0 else None
    ours, theirs = ref.shard(x, rows), _shard_tensor(x, torch_rows)
    # Each op: (reference, PyTorch, setup of PyTorch's argument). PyTorch reshards in place, so
    # every run gets a fresh tensor, made outside the timing.
    ops: dict[str, tuple[Callable, Callable, Callable]] = {
        "shard": (lambda: ref.shard(x, rows), lambda _: _shard_tensor(x, torch_rows), lambda: None),
        "gather": (lambda: ours.gather(0, out), lambda _: theirs.gather(0, out), lambda: None),
        "reshard": (
            lambda: ours.reshard(cols),
            lambda fresh: fresh.reshard(torch_cols),
            lambda: _shard_tensor(x, torch_rows),
        ),
    }
    figures = {}
    floor = floors(ctx, side)
    all_to_all = {"reshard": floor["reshard"], **all_to_all_floors(ctx, side)}
    for name, (run_ours, run_theirs, setup) in ops.items():
        times: dict[str, list[float]] = {"reference": [], "torch": [], "floor": [], "a2a": []}
        for repeat in range(repeats):
            arg = setup()
            runs = [
                ("reference", run_ours),
                ("torch", functools.partial(run_theirs, arg)),
                ("floor", floor[name]),
                ("a2a", all_to_all[name]),
            ]
            for who, run in runs[repeat % 4 :] + runs[: repeat % 4]:
                with counting_sends() as sent:
                    settle(ctx)
                    began = time.perf_counter()
                    run()
                    settle(ctx)
                times[who].append(time.perf_counter() - began)
                if who == "reference":
                    figures[name] = {"sent": sent[0]}
        figures[name] |= {who: statistics.median(t) for who, t in times.items()}
    return figures


def validation_figures(side: int = 256) -> tuple[float, float]:
    """Seconds to check a ``side`` x ``side`` grid of shards: the reference, then PyTorch."""
    from torch.distributed._shard.metadata import ShardMetadata as TorchSM
    from torch.distributed._shard.sharding_spec._internals import (
        check_tensor,
        validate_non_overlapping_shards_metadata,
    )

    grid = [(i * 2, j * 3) for i in range(side) for j in range(side)]
    size = torch.Size([2 * side, 3 * side])
    ours = ref.ShardedTensorMetadata(
        [ref.ShardMetadata([i, j], [2, 3], "rank:0/cpu") for i, j in grid], size
    )
    theirs = [TorchSM([i, j], [2, 3], "rank:0/cpu") for i, j in grid]

    start = time.perf_counter()
    ref.check_layout(ours)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    validate_non_overlapping_shards_metadata(theirs)
    check_tensor(theirs, size)
    return ours_s, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_world_options(parser)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    side = square_side(args.mib, args.ranks)
    size = torch.Size([side, side])
    with bench_world(args) as world:
        case = Case(
            "conformance.benchmarks.sharded_tensor:time_case",
            {"side": side, "repeats": args.repeats},
        )
        ranks = list(world.run(case, timeout_s=600).values())
        first_line = heading(world, side, args.repeats)

    placements = [f"rank:{r}/cpu" for r in range(args.ranks)]
    props = ref.TensorProperties(dtype=torch.float32)
    rows = ref.ChunkShardingSpec(0, placements).build_metadata(size, props).shards_metadata
    cols = ref.ChunkShardingSpec(1, placements).build_metadata(size, props).shards_metadata
    whole = [ref.ShardMetadata([0, 0], list(size), "rank:0/cpu")]
    moves = {"shard": (whole, rows), "gather": (rows, whole), "reshard": (rows, cols)}

    print(first_line)
    header = ("op", "sent MiB", "bound MiB", "padding", "ref s", "torch s", "ref/torch",
              "floor s", "ref/floor", "a2a s", "ref/a2a")  # fmt: skip
    print("{:<8} {:>9} {:>10} {:>8} {:>8} {:>8} {:>9} {:>8} {:>9} {:>8} {:>8}".format(*header))
    for op, (old, new) in moves.items():
        sent = sum(r[op]["sent"] for r in ranks)
        bound = lower_bound(old, new, size, 4)
        ours = max(r[op]["reference"] for r in ranks)
        theirs = max(r[op]["torch"] for r in ranks)
        floor = max(r[op]["floor"] for r in ranks)
        a2a = max(r[op]["a2a"] for r in ranks)
        print(
            f"{op:<8} {sent / 2**20:>9.1f} {bound / 2**20:>10.1f} {sent - bound:>8d} "
            f"{ours:>8.3f} {theirs:>8.3f} {ours / theirs:>9.2f} {floor:>8.3f} {ours / floor:>9.2f}"
            f" {a2a:>8.3f} {ours / a2a:>8.2f}"
        )
    ours_s, theirs_s = validation_figures()
    print(
        f"validation of a 256x256 grid (65,536 shards): reference {ours_s:.3f} s, "
        f"PyTorch {theirs_s:.3f} s, ratio {ours_s / theirs_s:.2f}"
    )


if __name__ == "__main__":
    main()
