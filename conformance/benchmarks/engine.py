"""Figures for the rank-world engine: start-up time and checked cases per second.

Two representative cases: a *metadata* case (every rank all-gathers its shard's box and checks
that the boxes tile the tensor, as ShardedTensor validation does) and a *data* case (every rank
all-gathers its chunk of a 64x64 tensor and the driver checks every value). Each runs on a
persistent world and, as a baseline, the way per-test-spawn suites run it: a fresh spawned world
for every case. Figures, not pass/fail: ratios come from the same run on the same machine.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from conformance.oracle.vocabulary import chunk_bounds
from conformance.world import Case, LocalWorld
from conformance.world.rank import RankContext

ROWS, COLS = 64, 64


def metadata_case(ctx: RankContext, rows: int) -> bool:
    start, stop = chunk_bounds(rows, ctx.world_size, ctx.rank)
    boxes: list[tuple[int, int]] = [(0, 0)] * ctx.world_size
    dist.all_gather_object(boxes, (start, stop - start))
    covered = 0
    for offset, size in sorted(boxes):
        if size and offset < covered:
            return False
        covered = max(covered, offset + size)
    return covered == rows


def data_case(ctx: RankContext, seed: int) -> torch.Tensor:
    full = torch.arange(ROWS * COLS, dtype=torch.float64).reshape(ROWS, COLS) + seed
    start, stop = chunk_bounds(ROWS, ctx.world_size, ctx.rank)
    size = -(-ROWS // ctx.world_size)
    padded = torch.zeros(size, COLS, dtype=full.dtype)
    padded[: stop - start] = full[start:stop]
    pieces = [torch.empty_like(padded) for _ in range(ctx.world_size)]
    dist.all_gather(pieces, padded)
    return torch.cat(
        [
            p[: b - a]
            for p, (a, b) in zip(
                pieces,
                (chunk_bounds(ROWS, ctx.world_size, r) for r in range(ctx.world_size)),
                strict=True,
            )
        ]
    )


def _check(kind: str, result, seed: int) -> None:
    values = result.values()
    if kind == "metadata":
        assert all(values), result.report("boxes did not tile the tensor")
    else:
        expected = torch.arange(ROWS * COLS, dtype=torch.float64).reshape(ROWS, COLS) + seed
        assert all(torch.equal(v, expected) for v in values), result.report("wrong gather")


def _case(kind: str, i: int) -> Case:
    if kind == "metadata":
        return Case("conformance.benchmarks.engine:metadata_case", {"rows": 7 + i % 13})
    return Case("conformance.benchmarks.engine:data_case", {"seed": i})


def start_time(world_size: int, repeats: int = 5) -> float:
    """Median seconds from nothing to a world whose ranks have all joined the group."""
    times = []
    for _ in range(repeats):
        world = LocalWorld(world_size)
        began = time.perf_counter()
        world.start()
        times.append(time.perf_counter() - began)
        world.close()
    return sorted(times)[len(times) // 2]


def persistent_rate(world_size: int, kind: str, cases: int) -> float:
    with LocalWorld(world_size) as world:
        world.start()
        _check(kind, world.run(_case(kind, 0)), 0)
        began = time.perf_counter()
        for i in range(cases):
            _check(kind, world.run(_case(kind, i)), i)
        return cases / (time.perf_counter() - began)


def spawn_per_case_rate(world_size: int, kind: str, cases: int) -> float:
    began = time.perf_counter()
    for i in range(cases):
        with LocalWorld(world_size, start_method="spawn") as world:
            _check(kind, world.run(_case(kind, i)), i)
    return cases / (time.perf_counter() - began)


def report(world_sizes: list[int], cases: int, spawn_cases: int) -> None:
    print(f"torch {torch.__version__}, gloo, fork start, {cases} cases per figure")
    print(f"4-rank world start (median of 5): {start_time(4):.3f} s")
    print(f"{'ws':>3} {'case':>9} {'persistent/s':>13} {'spawn-per-case/s':>17} {'ratio':>7}")
    for world_size in world_sizes:
        for kind in ("metadata", "data"):
            fast = persistent_rate(world_size, kind, cases)
            slow = spawn_per_case_rate(world_size, kind, spawn_cases)
            print(f"{world_size:>3} {kind:>9} {fast:>13.1f} {slow:>17.2f} {fast / slow:>6.0f}x")
