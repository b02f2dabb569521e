"""Redistribution: a plan of per-mesh-dim steps, then its execution (spec/dt-redistribute.md).

The plan depends only on the source and target placements, so every rank makes the same plan
and a reader can print it (``python -m reference.dtensor.plan "S(0),S(0)" "S(1),R"``).
Its order follows the layout's nesting (DT-LAYOUT-7):

1. reduce the ``P`` dims that do not stay ``P`` (all-reduce), unless they end in a shard;
2. gather, right to left, every mesh dim whose shard must change, and every later mesh dim that
   shards the same tensor dim (its chunks were cut from the ones being changed);
3. shard, left to right, the target's changed mesh dims (a local slice, or a reduce-scatter for
   a ``P`` source); a gather and a slice of the same mesh dim that meet become one all-to-all;
4. divide once after ``avg`` reductions; partition into the target's new ``P`` dims.

The argument checks of ``DTensor.redistribute`` and the result's metadata are ``dtensor.py``'s.

Rules and where they live:

- DT-REDIST-1, DT-REDIST-3, DT-REDIST-4, DT-REDIST-5: ``plan``, ``execute``
- DT-REDIST-2: ``plan`` (equal placements plan no step)
- DT-REDIST-6, DT-REDIST-8: ``partition``
- DT-REDIST-12: ``execute``, ``_owned``
- DT-REDIST-7, DT-REDIST-9, DT-REDIST-10, DT-REDIST-11, DT-REDIST-13, DT-REDIST-14: see
  ``reference.dtensor.dtensor``
- DT-LAYOUT-7: see ``reference.dtensor.layout``
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from reference.dtensor import collectives
from reference.dtensor.layout import sequences_before, shard_positions, take
from reference.dtensor.mesh import DeviceMesh
from reference.dtensor.placements import (
    Partial,
    Placement,
    Replicate,
    Shard,
    ShardLike,
    show,
)

# What each kind of step does along its mesh dim (the spec's informative table, per step).
STEPS = {
    "all_reduce": "P(op) -> R: all-reduce with op",
    "all_gather": "S/_S -> R: all-gather, then put the pieces at their positions",
    "all_to_all": "S(i) -> S(j): all-to-all",
    "reduce_scatter": "P(op) -> S/_S: reduce-scatter with op",
    "slice": "R -> S/_S: local slice, no communication",
    "divide": "avg: divide once by the number of coordinates reduced over",
    "partition": "-> P(op): divide, zero-fill or keep, no communication (DT-REDIST-6)",
}


@dataclass(frozen=True)
class Step:
    kind: str
    mesh_dims: tuple[int, ...]
    before: Placement
    after: Placement

    def __str__(self) -> str:
        dims = ", ".join(map(str, self.mesh_dims))
        if self.kind == "divide":
            return f"{self.kind:<14} mesh dim {dims}: the sums by the number of coordinates"
        return f"{self.kind:<14} mesh dim {dims}: {self.before} -> {self.after}"


@dataclass(frozen=True)
class Plan:
    source: tuple[Placement, ...]
    target: tuple[Placement, ...]
    steps: tuple[Step, ...]

    def __str__(self) -> str:
        lines = [f"{show(self.source)} -> {show(self.target)}"]
        lines += [f"  {n}. {step}" for n, step in enumerate(self.steps, 1)] or ["  (no-op)"]
        return "\n".join(lines)


def _effect(placement: Placement, tensor_dim: int) -> ShardLike | None:
    """What a mesh dim does to ``tensor_dim``: its shard placement, or nothing."""
    if isinstance(placement, ShardLike) and placement.dim == tensor_dim:
        return placement
    return None


def plan(source: Sequence[Placement], target: Sequence[Placement]) -> Plan:
    """The steps from ``source`` to ``target`` (both normalised, same length)."""
    source, target = tuple(source), tuple(target)
    mesh_dims = range(len(source))
    reduced = [i for i in mesh_dims if isinstance(source[i], Partial) and source[i] != target[i]]
    steps = [
        Step("all_reduce", (i,), source[i], Replicate())
        for i in reduced
        if not isinstance(target[i], ShardLike)
    ]

    gathered: set[int] = set()
    sliced: set[int] = set()
    for tensor_dim in {p.dim for p in source + target if isinstance(p, ShardLike)}:
        changed = [
            i for i in mesh_dims if _effect(source[i], tensor_dim) != _effect(target[i], tensor_dim)
        ]
        if changed:
            gathered |= {i for i in mesh_dims[changed[0] :] if _effect(source[i], tensor_dim)}
            sliced |= {i for i in mesh_dims[changed[0] :] if _effect(target[i], tensor_dim)}

    # The last gather and the first slice on one mesh dim, plain shard to plain shard: all-to-all.
    fused = min(gathered, default=None)
    if not (
        fused is not None
        and fused == min(sliced, default=None)
        and type(source[fused]) is Shard
        and type(target[fused]) is Shard
    ):
        fused = None
    for i in sorted(gathered, reverse=True):
        kind = "all_to_all" if i == fused else "all_gather"
        steps.append(Step(kind, (i,), source[i], target[i] if i == fused else Replicate()))
    for i in sorted(sliced - {fused}):
        if isinstance(source[i], Partial):
            steps.append(Step("reduce_scatter", (i,), source[i], target[i]))
        else:
            steps.append(Step("slice", (i,), Replicate(), target[i]))

    averaged = tuple(i for i in reduced if source[i] == Partial("avg"))
    if averaged:
        steps.append(Step("divide", averaged, Partial("avg"), Replicate()))
    steps += [
        Step("partition", (i,), Replicate(), target[i])
        for i in mesh_dims
        if isinstance(target[i], Partial) and source[i] != target[i]
    ]
    return Plan(source, target, tuple(steps))


def execute(
    the_plan: Plan, mesh: DeviceMesh, global_shape: tuple[int, ...], local: torch.Tensor
) -> torch.Tensor:
    """Run ``the_plan`` on this rank's local tensor; return the new local tensor (never a view
    of ``local``: the source stays untouched, DT-REDIST-12)."""
    coordinate = mesh.get_coordinate()
    now = list(the_plan.source)
    x = local

    def positions(mesh_dim: int, placement: ShardLike) -> list:
        """Every coordinate's positions along ``mesh_dim`` within the current sequence."""
        before = sequences_before(global_shape, mesh.shape, now, coordinate, mesh_dim)
        length = len(before[placement.dim])
        return [
            shard_positions(placement, length, mesh.size(mesh_dim), c)
            for c in range(mesh.size(mesh_dim))
        ]

    for step in the_plan.steps:
        i = step.mesh_dims[0]
        if step.kind == "all_reduce":
            x = collectives.all_reduce(mesh, i, x, step.before.reduce_op)
        elif step.kind == "all_gather":
            x = collectives.all_gather(mesh, i, x, step.before.dim, positions(i, step.before))
        elif step.kind == "all_to_all":
            x = collectives.all_to_all(
                mesh,
                i,
                x,
                step.before.dim,
                [len(p) for p in positions(i, step.before)],
                step.after.dim,
                positions(i, step.after),
            )
        elif step.kind == "reduce_scatter":
            x = collectives.reduce_scatter(
                mesh, i, x, step.before.reduce_op, step.after.dim, positions(i, step.after)
            )
        elif step.kind == "slice":
            x = take(x, step.after.dim, positions(i, step.after)[coordinate[i]])
        elif step.kind == "divide":
            x = x / _product(mesh.size(d) for d in step.mesh_dims)
        else:
            x = partition(x, step.after, mesh.size(i), coordinate[i])
        if step.kind != "divide":
            now[i] = step.after
    return _owned(x, local)


def partition(x: torch.Tensor, target: Partial, parts: int, coord: int) -> torch.Tensor:
    """Split a value into partials whose ``target.reduce_op``-reduction gives it back
    (DT-REDIST-6): a float sum is divided by ``parts``; an integer sum stays at coordinate 0 and
    is zero elsewhere; ``avg``, ``min`` and ``max`` keep the value."""
    if target.reduce_op != "sum":
        return x
    if x.is_floating_point() or x.is_complex():
        return x / parts
    return x if coord == 0 else torch.zeros_like(x)


def _owned(x: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``x``, contiguous and sharing no memory with ``source``."""
    x = x.contiguous()
    if x.untyped_storage().data_ptr() == source.untyped_storage().data_ptr() and x.numel():
        x = x.clone()
    return x


def _product(sizes) -> int:
    result = 1
    for size in sizes:
        result *= size
    return result
