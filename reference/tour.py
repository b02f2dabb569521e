"""The numbers of spec/tour.md, computed by the reference: one 5x3 tensor on a 2x2 mesh.

    python -m reference.tour {locals,boxes,overlap,traffic,sum,grad}

The tour shows each section's output verbatim and a test reruns it, so the tour cannot drift
from the code it teaches. Everything here is pure: no process group is needed.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

import torch

from reference.dtensor.autograd import gradient_placements
from reference.dtensor.draw import blocks
from reference.dtensor.interop import to_sharded_metadata
from reference.dtensor.layout import index_sequences, local_shape_and_offset, take
from reference.dtensor.ops import summed_placements
from reference.dtensor.placements import Placement, parse, show
from reference.dtensor.redistribute import Plan, plan
from reference.sharded_tensor.metadata import ShardedTensorMetadata, ShardMetadata
from reference.sharded_tensor.validation import check_layout

SHAPE = (5, 3)
MESH = ((0, 1), (2, 3))  # the rank at every coordinate, row-major
MESH_SHAPE = (len(MESH), len(MESH[0]))
RANKS = [rank for row in MESH for rank in row]
SOURCE = parse("S(0), S(1)")
TARGET = parse("R, S(1)")
DTYPE = torch.float32


def global_tensor() -> torch.Tensor:
    """The tour's tensor: distinct values, so every misplaced element would show."""
    return torch.arange(math.prod(SHAPE), dtype=DTYPE).reshape(SHAPE)


def boxes() -> ShardedTensorMetadata:
    """The DTensor layout as the ShardedTensor metadata checkpointing saves (INTEROP-1)."""
    return to_sharded_metadata(SHAPE, DTYPE, torch.tensor(MESH), SOURCE, "cpu")


def shifted() -> ShardedTensorMetadata:
    """``boxes`` with a classic mistake: rank 2's box starts one row too early."""
    good = boxes()
    shards = list(good.shards_metadata)
    wrong = shards[2]
    offsets = [wrong.shard_offsets[0] - 1, *wrong.shard_offsets[1:]]
    shards[2] = ShardMetadata(offsets, wrong.shard_sizes, wrong.placement)
    return ShardedTensorMetadata(shards, good.size, good.tensor_properties)


def _table(metadata: ShardedTensorMetadata) -> list[str]:
    rows = [("box", "offsets", "sizes", "placement")] + [
        (str(n), str(s.shard_offsets), str(s.shard_sizes), str(s.placement))
        for n, s in enumerate(metadata.shards_metadata)
    ]
    return [f"{a:<4} {b:<8} {c:<8} {d}" for a, b, c, d in rows]


def locals_text() -> str:
    """Every coordinate's local tensor: the global tensor at its index sequences."""
    lines = [f"{DTYPE}, global {SHAPE}; letters as in the drawing"]
    for block in blocks(SHAPE, MESH_SHAPE, SOURCE, RANKS):
        local = global_tensor()
        for dim, sequence in enumerate(block.indices):
            local = take(local, dim, list(sequence))
        lines.append(f"{block.legend()}, local shape {tuple(local.shape)}:")
        lines += ["  " + " ".join(f"{v:3g}" for v in row) for row in local.tolist()]
    return "\n".join(lines)


def boxes_text() -> str:
    return "\n".join(_table(boxes()))


def overlap_text() -> str:
    """The shifted boxes, their volumes, and what the layout check says of them."""
    bad = shifted()
    volumes = [s.volume for s in bad.shards_metadata]
    lines = _table(bad)
    lines.append(
        f"volumes {' + '.join(map(str, volumes))} = {sum(volumes)}, tensor {math.prod(bad.size)}"
    )
    try:
        check_layout(bad)
    except ValueError as error:
        lines.append(f"check_layout: ValueError: {error}")
    else:
        lines.append("check_layout: passed")
    return "\n".join(lines)


def lacking(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    source: Sequence[Placement],
    target: Sequence[Placement],
    coordinate: tuple[int, ...],
) -> int:
    """Elements ``coordinate`` holds after the redistribution but not before: what must reach
    it however the data moves (for placements without ``P``)."""
    before = index_sequences(global_shape, mesh_shape, source, coordinate)
    after = index_sequences(global_shape, mesh_shape, target, coordinate)
    kept = math.prod(len(set(a) & set(b)) for a, b in zip(after, before, strict=True))
    return math.prod(len(a) for a in after) - kept


def all_gather_receives(
    global_shape: Sequence[int], mesh_shape: Sequence[int], the_plan: Plan, coordinate: tuple
) -> int:
    """Elements the plan's all-gathers deliver to ``coordinate`` as ``collectives.all_gather``
    sends them: every other piece on its line, padded to the longest (Gloo wants equal sizes).
    Other steps move data in ways this count does not model, so a plan with one is refused."""
    now = list(the_plan.source)
    received = 0
    for step in the_plan.steps:
        if step.kind != "all_gather":
            raise ValueError(f"only all-gathers are counted, not {step.kind}")
        i, dim = step.mesh_dims[0], step.before.dim
        line = [(*coordinate[:i], c, *coordinate[i + 1 :]) for c in range(mesh_shape[i])]
        shapes = [local_shape_and_offset(global_shape, mesh_shape, now, c)[0] for c in line]
        piece = list(shapes[coordinate[i]])
        piece[dim] = max(shape[dim] for shape in shapes)
        received += (mesh_shape[i] - 1) * math.prod(piece)
        now[i] = step.after
    return received


def traffic_text() -> str:
    """Per rank: what it lacks for the target layout, and what the all-gather delivers."""
    size = global_tensor().element_size()
    the_plan = plan(SOURCE, TARGET)
    lines = [
        f"{DTYPE}, {size} bytes an element; amounts in elements = bytes",
        f"{'rank':<5} {'coordinate':<11} {'before':<7} {'after':<7} "
        f"{'lacks':<14} all-gather delivers",
    ]
    lacks_total = received_total = 0
    for row, ranks in enumerate(MESH):
        for col, rank in enumerate(ranks):
            coord = (row, col)
            before = local_shape_and_offset(SHAPE, MESH_SHAPE, SOURCE, coord)[0]
            after = local_shape_and_offset(SHAPE, MESH_SHAPE, TARGET, coord)[0]
            lacks = lacking(SHAPE, MESH_SHAPE, SOURCE, TARGET, coord)
            received = all_gather_receives(SHAPE, MESH_SHAPE, the_plan, coord)
            lacks_total, received_total = lacks_total + lacks, received_total + received
            lines.append(
                f"{rank:<5} {coord!s:<11} {before!s:<7} {after!s:<7} "
                f"{_amount(lacks, size):<14} {_amount(received, size)}"
            )
    lines.append(
        f"{'total':<5} {'':<11} {'':<7} {'':<7} "
        f"{_amount(lacks_total, size):<14} {_amount(received_total, size)}"
    )
    return "\n".join(lines)


def sum_text() -> str:
    """``torch.sum(d, dim=0)`` by the reference's sum rule: every coordinate sums the rows it
    holds, and the placements say what those local sums are."""
    placements = summed_placements(SOURCE, len(SHAPE), [0], keepdim=False)
    lines = [f"torch.sum(d, dim=0) of {show(SOURCE)}: local sums, placements {show(placements)}"]
    for block in blocks(SHAPE, MESH_SHAPE, SOURCE, RANKS):
        local = global_tensor()
        for dim, sequence in enumerate(block.indices):
            local = take(local, dim, list(sequence))
        sums = " ".join(f"{v:g}" for v in local.sum(0).tolist())
        lines.append(f"{block.legend()}: [{sums}]")
    lines.append(f"full_tensor: {global_tensor().sum(0).tolist()}")
    return "\n".join(lines)


def weights() -> torch.Tensor:
    """The tour's loss weights ``W = G + 1``: the gradient of ``(d.full_tensor() * W).sum()``."""
    return global_tensor() + 1


def grad_text() -> str:
    """The gradient of ``(d.full_tensor() * W).sum()`` for the leaf ``d``: ``W``, laid out by
    ``d``'s gradient placements (DT-GRAD-2), one block per coordinate."""
    placements = gradient_placements(SOURCE)
    lines = [f"(d.full_tensor() * W).sum().backward(), W = G + 1: d.grad is {show(placements)}"]
    for block in blocks(SHAPE, MESH_SHAPE, placements, RANKS):
        local = weights()
        for dim, sequence in enumerate(block.indices):
            local = take(local, dim, list(sequence))
        rows = " ".join("[" + " ".join(f"{v:g}" for v in row) + "]" for row in local.tolist())
        lines.append(f"{block.legend()}: [{rows}]")
    return "\n".join(lines)


def _amount(elements: int, size: int) -> str:
    return f"{elements} = {elements * size} B"


SECTIONS = {
    "locals": locals_text,
    "boxes": boxes_text,
    "overlap": overlap_text,
    "traffic": traffic_text,
    "sum": sum_text,
    "grad": grad_text,
}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Print one section of spec/tour.md's numbers.")
    parser.add_argument("section", choices=sorted(SECTIONS))
    print(SECTIONS[parser.parse_args(argv).section]())


if __name__ == "__main__":
    main()
