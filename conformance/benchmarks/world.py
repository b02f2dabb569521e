"""The world a bench runs on: any backend, forked or spawned, as the command line says, so the
same figures can be taken on Gloo here and on NCCL on a GPU runner (one rank per GPU)."""

from __future__ import annotations

import argparse
import math

import torch
import torch.distributed as dist

from conformance.world import LocalWorld
from conformance.world.backends import backend_named
from conformance.world.rank import RankContext


def add_world_options(parser: argparse.ArgumentParser) -> None:
    """The options that choose the world, alike in every bench."""
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--backend", default="gloo", help="any backend torch.distributed knows")
    parser.add_argument("--device", help="the ranks' device type (default: the backend's own)")
    parser.add_argument(
        "--start",
        choices=["fork", "spawn"],
        help="how ranks start (default: fork on the CPU, spawn on an accelerator)",
    )


def bench_world(args: argparse.Namespace) -> LocalWorld:
    """A world of ``args.ranks`` ranks on ``args.backend``, with room for slow repeats."""
    backend = backend_named(args.backend, args.device)
    return LocalWorld(args.ranks, backend, start_method=args.start, case_timeout_s=600, grace_s=5)


def heading(world: LocalWorld, side: int, repeats: int) -> str:
    """The first line of a bench's figures: the world, the tensor and how many repeats."""
    mib = 4 * side * side / 2**20
    return (
        f"{world.world_size}-rank {world.backend.name} world ({world.start_method} start), "
        f"float32 {side}x{side} ({mib:.0f} MiB), median of {repeats}"
    )


def square_side(mib: int, ranks: int) -> int:
    """The side of a square float32 tensor of about ``mib`` MiB that ``ranks`` chunks divide
    evenly along both dims, as the floors' row blocks and packed column chunks need."""
    side = math.isqrt(mib * 2**20 // 4)
    return max(ranks, side - side % ranks)


def placement(ctx: RankContext, rank: int) -> str:
    """A ShardedTensor placement naming ``rank`` on the device that rank computes on."""
    return f"rank:{rank}/{ctx.backend.device_for(rank)}"


def settle(ctx: RankContext) -> None:
    """Return once every rank has finished all it started: on a GPU, a collective returns when
    its kernel is queued, so the timer stops only after the device's queue has drained."""
    if ctx.device.type != "cpu":
        torch.get_device_module(ctx.device).synchronize(ctx.device)
    dist.barrier()
