"""Figures, not pass/fail: reference redistribute beside PyTorch's DTensor and beside the one
raw collective that moves the same bytes into a new tensor (the floor: no implementation of the
transition can do better on this world; ``floors`` says why "into a new tensor"), on one world
of any backend (4-rank Gloo by default; ``--backend nccl`` puts one rank on each GPU), a square
float32 tensor of 64 MiB; and the bytes each transition moves against its lower bound.

Bytes are counted from outside the reference, at the ``torch.distributed`` calls its data path
makes (``counting_receives``): what this rank receives, the padding that evens out Gloo's sizes
included. An all-reduce counts what a bandwidth-optimal one receives, ``2 (k - 1) / k`` of the
tensor (a reduce-scatter, then an all-gather: the ring algorithm of Gloo and NCCL).

    python -m conformance.benchmarks.dtensor [--ranks 4] [--backend gloo] [--start fork]
        [--mib 64] [--repeats 5]

Lower bounds (bytes a rank must receive): S->R and S(0)->S(1) the part of its target block it
does not hold yet; P->S the other ranks' partials of its target block, ``(k - 1) / k`` of the
tensor; P->R that, then the other ranks' reduced blocks, ``2 (k - 1) / k`` of the tensor.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import types
import unittest.mock
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist
from torch.distributed import tensor as tdt
from torch.distributed.device_mesh import DeviceMesh as TorchMesh

from conformance.benchmarks.floor import packed
from conformance.benchmarks.world import (
    add_world_options,
    bench_world,
    heading,
    settle,
    square_side,
)
from conformance.world import Case
from conformance.world.rank import RankContext
from reference.dtensor import DeviceMesh, DTensor, collectives
from reference.dtensor.layout import local_shape_and_offset
from reference.dtensor.placements import parse

TRANSITIONS = [("S(0)", "R"), ("S(0)", "S(1)"), ("P(sum)", "R"), ("P(sum)", "S(0)")]
TORCH_PLACEMENT = {
    "S(0)": tdt.Shard(0),
    "S(1)": tdt.Shard(1),
    "R": tdt.Replicate(),
    "P(sum)": tdt.Partial(),
}


@contextlib.contextmanager
def counting_receives() -> Iterator[list[int]]:
    """Count the bytes this rank receives through the ``torch.distributed`` calls of the
    reference's data path, ``reference/dtensor/collectives.py``: its module sees a ``dist`` that
    counts, everything else (the verdict exchanged before data moves) the real one."""
    received = [0]
    size = dist.get_world_size

    def nbytes(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()

    got = {
        "all_gather_into_tensor": lambda out, inp, group=None: nbytes(out) - nbytes(inp),
        "all_to_all_single": lambda out, inp, output_split_sizes, input_split_sizes, group=None: (
            (out.numel() - output_split_sizes[dist.get_rank(group)]) * out.element_size()
        ),
        "all_reduce": lambda t, op=None, group=None: (
            2 * (size(group) - 1) * nbytes(t) // size(group)
        ),
        "reduce_scatter_tensor": lambda out, inp, op=None, group=None: (
            (size(group) - 1) * nbytes(out)
        ),
        "broadcast": lambda t, src, group=None: 0 if dist.get_rank() == src else nbytes(t),
    }

    def counted(name: str) -> Callable:
        def call(*args, **kwargs):
            received[0] += got[name](*args, **kwargs)
            return getattr(dist, name)(*args, **kwargs)

        return call

    counting = types.SimpleNamespace(**{**vars(dist), **{name: counted(name) for name in got}})
    with unittest.mock.patch.object(collectives, "dist", counting):
        yield received


def _numel(shape) -> int:
    return shape[0] * shape[1]


def lower_bound(src: str, tgt: str, k: int, c: int, shape: tuple[int, int]) -> int:
    target, offset = local_shape_and_offset(shape, (k,), parse(tgt), (c,))
    if src.startswith("P"):
        scattered = (k - 1) * _numel(shape) * 4 // k
        return scattered * (2 if tgt == "R" else 1)
    held, held_offset = local_shape_and_offset(shape, (k,), parse(src), (c,))
    overlap = 1
    for d in range(2):
        lo = max(offset[d], held_offset[d])
        hi = min(offset[d] + target[d], held_offset[d] + held[d])
        overlap *= max(0, hi - lo)
    return (_numel(target) - overlap) * 4


def floors(
    src: str, tgt: str, k: int, shape: tuple[int, int], device: torch.device
) -> dict[str, Callable[[], None]]:
    """The one raw collective that moves what the transition must move: all-gather for S->R,
    all-to-all for S(0)->S(1), all-reduce for P->R, reduce-scatter for P->S.

    ``floor`` runs it out of place, as the transition must (its result is a new tensor that
    shares no memory with the source, DT-REDIST-12), from the layout the transition sends (the
    column chunks of S(0) -> S(1), ``packed``): into a new output, and for the all-reduce,
    which c10d runs in place only, into a copy of the input (PyTorch's out-of-place
    ``all_reduce`` of ``torch.distributed._functional_collectives`` is that copy and the
    collective). ``in place`` reuses one output across runs and sends the row blocks as they lie:
    the bare transport, which no operation that returns a new tensor can reach, as a new
    tensor's memory is written for the first time.
    """
    full = torch.randn(shape, device=device)
    block = torch.empty(shape[0] // k, shape[1], device=device)
    if src.startswith("P"):
        if tgt == "R":
            return {
                "floor": lambda: dist.all_reduce(full.clone()),
                "in place": lambda: dist.all_reduce(full),
            }
        return {
            "floor": lambda: dist.reduce_scatter_tensor(torch.empty_like(block), full),
            "in place": lambda: dist.reduce_scatter_tensor(block, full),
        }
    if tgt == "R":
        return {
            "floor": lambda: dist.all_gather_into_tensor(torch.empty_like(full), block),
            "in place": lambda: dist.all_gather_into_tensor(full, block),
        }
    other = torch.empty_like(block)
    return {
        "floor": lambda: dist.all_to_all_single(torch.empty_like(block), packed(block, k)),
        "in place": lambda: dist.all_to_all_single(other, block),
    }


def time_case(ctx: RankContext, src: str, tgt: str, side: int, repeats: int) -> dict:
    k, full = ctx.world_size, (side, side)
    kind = ctx.device.type
    mesh = ctx.cached(("ref", kind), lambda: DeviceMesh(kind, list(range(k))))
    tmesh = ctx.cached(("torch", kind), lambda: TorchMesh(kind, list(range(k))))
    shape, _ = local_shape_and_offset(full, (k,), parse(src), (ctx.rank,))
    seeded = torch.Generator().manual_seed(ctx.rank)
    local = torch.randn(shape, generator=seeded).to(ctx.device)
    ours = DTensor.from_local(local, mesh, parse(src), shape=full, stride=(side, 1))
    theirs = tdt.DTensor.from_local(
        local, tmesh, [TORCH_PLACEMENT[src]], shape=torch.Size(full), stride=(side, 1)
    )
    times: dict[str, list[float]] = {"reference": [], "torch": [], "floor": [], "in place": []}
    raw = floors(src, tgt, k, full, ctx.device)
    moved = 0
    for repeat in range(repeats):
        # Rotate the order so no side always runs on a warmer machine.
        runs = [
            ("reference", lambda: ours.redistribute(mesh, parse(tgt)).to_local()),
            ("torch", lambda: theirs.redistribute(tmesh, [TORCH_PLACEMENT[tgt]]).to_local()),
            ("floor", raw["floor"]),
            ("in place", raw["in place"]),
        ]
        turn = repeat % len(runs)
        for name, run in runs[turn:] + runs[:turn]:
            settle(ctx)
            began = time.perf_counter()
            if name == "reference":
                with counting_receives() as received:
                    run()
                moved = received[0]
            else:
                run()
            settle(ctx)
            times[name].append(time.perf_counter() - began)
    return {
        "reference_s": statistics.median(times["reference"]),
        "torch_s": statistics.median(times["torch"]),
        "floor_s": statistics.median(times["floor"]),
        "in_place_s": statistics.median(times["in place"]),
        "received": moved,
        "bound": lower_bound(src, tgt, k, ctx.rank, full),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_world_options(parser)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    side = square_side(args.mib, args.ranks)
    with bench_world(args) as world:
        print(heading(world, side, args.repeats))
        print(
            f"{'transition':<16}{'ref ms':>9}{'torch ms':>10}{'ref/torch':>10}{'floor ms':>10}"
            f"{'ref/floor':>10}{'in place ms':>12}{'ref/in place':>13}{'received MiB':>14}"
            f"{'bound MiB':>11}"
        )
        for src, tgt in TRANSITIONS:
            case = Case(
                "conformance.benchmarks.dtensor:time_case",
                {"src": src, "tgt": tgt, "side": side, "repeats": args.repeats},
            )
            ranks = world.run(case, timeout_s=600).values()
            ref_s = max(r["reference_s"] for r in ranks)
            torch_s = max(r["torch_s"] for r in ranks)
            floor_s = max(r["floor_s"] for r in ranks)
            in_place_s = max(r["in_place_s"] for r in ranks)
            moved = sum(r["received"] for r in ranks) / 2**20
            bound = sum(r["bound"] for r in ranks) / 2**20
            print(
                f"{src + ' -> ' + tgt:<16}{ref_s * 1e3:>9.1f}{torch_s * 1e3:>10.1f}"
                f"{ref_s / torch_s:>10.2f}{floor_s * 1e3:>10.1f}{ref_s / floor_s:>10.2f}"
                f"{in_place_s * 1e3:>12.1f}{ref_s / in_place_s:>13.2f}{moved:>14.1f}{bound:>11.1f}"
            )


if __name__ == "__main__":
    main()
