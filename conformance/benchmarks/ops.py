"""Figures, not pass/fail: op cases per second (spec/dt-ops.md) on a persistent Gloo world of
each size, for the reference and for PyTorch, on the same cases in the same run.

An op case is what the suite's op tests send a world: OpInfo's sample rebuilt on every rank,
its tensors made DTensors (here each sharded on its first dim, ``R`` if 0-d), the op, and every
output's ``full_tensor``. The world's first case imports OpInfo on each rank; it is not timed.

    python -m conformance.benchmarks.ops [--ranks 4] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

from conformance.ops import catalogue
from conformance.world import Case, LocalWorld

OPS = ("add", "exp", "sum", "mm", "transpose", "cat", "index_select", "nn.functional.linear")
TASK = "conformance.tasks.ops:apply"


def case(op: str, impl: str, world_size: int) -> Case:
    """Sample 0 of ``op`` in float32 on the 1-D mesh of the world."""
    tensors = catalogue.samples(op, "float32")[0].tensors()
    return Case(
        TASK,
        {
            "impl": impl,
            "op": op,
            "dtype": "float32",
            "sample": 0,
            "mesh_shape": [world_size],
            "mesh_ranks": list(range(world_size)),
            "placements": [["S(0)" if t.dim() else "R"] for t in tensors],
            "seed": 0,
        },
    )


def rate(world: LocalWorld, impl: str, repeats: int) -> float:
    """Op cases per second, every op of ``OPS`` ``repeats`` times."""
    cases = [case(op, impl, world.world_size) for op in OPS]
    world.run(cases[0])  # each rank imports OpInfo once
    start = time.perf_counter()
    for _ in range(repeats):
        for one in cases:
            result = world.run(one)
            assert result.ok, result.report(f"{impl}: the case failed")
    return repeats * len(cases) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4, help="the largest world (default 4)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"op cases per second, {len(OPS)} ops ({', '.join(OPS)}), each sample 0, float32")
    print(f"{'ranks':<6} {'reference':>10} {'torch':>10} {'torch / reference':>18}")
    for n in range(1, args.ranks + 1):
        with LocalWorld(n) as world:
            ours, theirs = (
                rate(world, "reference", args.repeats),
                rate(world, "torch", args.repeats),
            )
        print(f"{n:<6} {ours:>10.1f} {theirs:>10.1f} {theirs / ours:>18.2f}")


if __name__ == "__main__":
    main()
