"""Benchmark of reference/sharded_tensor beside PyTorch's ShardedTensor: figures, not tests.

    python -m reference.bench_sharded_tensor [--ranks 4] [--mib 64] [--repeats 5]

Prints, for one Gloo world on this machine:
- the bytes shard, gather and reshard put on the wire, against the lower bound (each element
  that changes rank crosses once) and the padding (wire bytes above the bound);
- the time of gather and of a reshard that changes dim, as the ratio reference / PyTorch
  (median of the repeats, same world, same tensor);
- the time of overlap + coverage validation of a 256 x 256 grid of shards (65,536 shards),
  as the ratio reference / PyTorch's validate_non_overlapping_shards_metadata + check_tensor.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable

import torch
import torch.distributed as dist

import reference.sharded_tensor as ref
from reference.sharded_tensor.transfer import route


def timed(fn: Callable[[], object], repeats: int, setup: Callable[[], object] = lambda: None):
    """Median wall time of ``fn`` over ``repeats`` runs, every rank starting together."""
    times = []
    for _ in range(repeats):
        arg = setup()
        dist.barrier()
        start = time.perf_counter()
        fn() if arg is None else fn(arg)
        dist.barrier()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def wire_bytes(old: list, new: list, itemsize: int) -> int:
    """Bytes the reference sends: every planned piece whose two ends are different ranks."""
    ranks = {s.placement.rank() for s in old + new}
    pieces = {p for rank in ranks for p in route(old, new, rank)}
    return itemsize * sum(
        p.numel()
        for p in pieces
        if old[p.source].placement.rank() != new[p.target].placement.rank()
    )


def owners(shards: list, size: torch.Size) -> torch.Tensor:
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


def rank_main(rank: int, world: int, store: str, mib: int, repeats: int, queue) -> None:
    warnings.filterwarnings("ignore")
    from torch.distributed._shard.api import _shard_tensor
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec as TorchChunk

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    side = math.isqrt(mib * 2**20 // 4)
    x = torch.arange(side * side, dtype=torch.float32).reshape(side, side)
    placements = [f"rank:{r}/cpu" for r in range(world)]
    rows, cols = ref.ChunkShardingSpec(0, placements), ref.ChunkShardingSpec(1, placements)
    torch_rows, torch_cols = TorchChunk(0, placements), TorchChunk(1, placements)
    out = torch.empty_like(x) if rank == 0 else None

    t = ref.shard(x, rows)
    ours = {
        "gather": timed(lambda: t.gather(0, out), repeats),
        "reshard": timed(lambda: t.reshard(cols), repeats),
        "shard": timed(lambda: ref.shard(x, rows), repeats),
    }
    pt = _shard_tensor(x, torch_rows)
    theirs = {
        "gather": timed(lambda: pt.gather(0, out), repeats),
        # PyTorch reshards in place: a fresh tensor for every run, made outside the timing.
        "reshard": timed(
            lambda s: s.reshard(torch_cols), repeats, lambda: _shard_tensor(x, torch_rows)
        ),
        "shard": timed(lambda: _shard_tensor(x, torch_rows), repeats),
    }
    if rank == 0:
        queue.put((side, ours, theirs))
    dist.destroy_process_group()


def collective_figures(world: int, mib: int, repeats: int) -> tuple[int, dict, dict]:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with tempfile.TemporaryDirectory() as folder:
        store = os.path.join(folder, "store")
        procs = [
            context.Process(target=rank_main, args=(r, world, store, mib, repeats, queue))
            for r in range(world)
        ]
        for p in procs:
            p.start()
        result = queue.get(timeout=600)
        for p in procs:
            p.join()
    return result


def validation_figures(side: int = 256) -> tuple[float, float]:
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
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    side, ours, theirs = collective_figures(args.ranks, args.mib, args.repeats)
    size = torch.Size([side, side])
    placements = [f"rank:{r}/cpu" for r in range(args.ranks)]
    props = ref.TensorProperties(dtype=torch.float32)
    rows = ref.ChunkShardingSpec(0, placements).build_metadata(size, props).shards_metadata
    cols = ref.ChunkShardingSpec(1, placements).build_metadata(size, props).shards_metadata
    whole = [ref.ShardMetadata([0, 0], list(size), "rank:0/cpu")]
    moves = {"shard": (whole, rows), "gather": (rows, whole), "reshard": (rows, cols)}

    mib = 4 * side * side / 2**20
    print(f"{args.ranks}-rank Gloo world, float32 {side}x{side} ({mib:.0f} MiB), ", end="")
    print(f"median of {args.repeats}")
    header = ("op", "wire MiB", "bound MiB", "padding", "ref s", "torch s", "ratio")
    print("{:<8} {:>9} {:>10} {:>8} {:>8} {:>8} {:>6}".format(*header))
    for op, (old, new) in moves.items():
        sent, bound = wire_bytes(old, new, 4), lower_bound(old, new, size, 4)
        print(
            f"{op:<8} {sent / 2**20:>9.1f} {bound / 2**20:>10.1f} {sent - bound:>8d} "
            f"{ours[op]:>8.3f} {theirs[op]:>8.3f} {ours[op] / theirs[op]:>6.2f}"
        )
    ours_s, theirs_s = validation_figures()
    print(
        f"validation of a 256x256 grid (65,536 shards): reference {ours_s:.3f} s, "
        f"PyTorch {theirs_s:.3f} s, ratio {ours_s / theirs_s:.2f}"
    )


if __name__ == "__main__":
    main()
