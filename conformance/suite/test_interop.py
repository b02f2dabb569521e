"""spec/interop.md: a DTensor's layout as ShardedTensor boxes, by the pure conversion (in the
sandbox, which has no process group) and by the checkpoint plan of a live DTensor (on a world)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge
from conformance import strategies as ss
from conformance.oracle import interop as oracle
from conformance.oracle.st_metadata import ShardMeta, TensorMeta, parse_remote_device
from conformance.oracle.st_sharding_spec import ChunkSpec, chunk_shards
from conformance.oracle.st_validation import layout_verdict
from conformance.oracle.vocabulary import VALID
from conformance.vocabulary import Mesh, Replicate, StridedShard, parse_placements


@st.composite
def layouts(draw):
    shape = draw(ss.shapes())
    mesh_shape, ranks = draw(ss.meshes(world_size=8))
    placements = draw(ss.placements(len(mesh_shape), len(shape), partial=True, strided=True))
    return shape, mesh_shape, ranks, placements


def _non_empty(boxes: list[dict]) -> list[dict]:
    return [b for b in boxes if all(b["sizes"])]


def convert(pure, shape, mesh_shape, ranks, placements):
    return pure("to_sharded_metadata", shape=shape, mesh_shape=mesh_shape, ranks=ranks,
                placements=placements)  # fmt: skip


@pytest.mark.rules("INTEROP-1", "INTEROP-2", "INTEROP-3", "INTEROP-5", "INTEROP-6", "INTEROP-7")
@given(layout=layouts())
def test_one_box_per_canonical_coordinate_or_value_error(impl, pure, layout):
    """Runs in the sandbox, where no process group exists (INTEROP-7)."""
    judge.requires(impl, "dtensor", "interop")
    shape, mesh_shape, ranks, placements = layout
    if any(p.startswith("_S") for p in placements):
        judge.assume_claimed(impl, "strided_shard")
    parsed = parse_placements(placements)
    context = f"to_sharded_metadata({shape}, mesh={mesh_shape} {ranks}, {placements})"
    verdict = oracle.to_sharded_metadata_verdict(shape, mesh_shape, parsed)
    boxes = judge.assert_pure_verdict(convert(pure, shape, mesh_shape, ranks, placements),
                                      verdict, context, rule="INTEROP-1")  # fmt: skip
    if not verdict.ok:
        return
    expected = oracle.to_sharded_metadata(shape, "float32", Mesh(mesh_shape, ranks), parsed)
    want = [s.to_json() for s in expected.shards]
    # Only the empty boxes wrong: each must be kept, at the end of its dim.
    rule = "INTEROP-3" if _non_empty(boxes) == _non_empty(want) else "INTEROP-1"
    judge.assert_equal("boxes", boxes, want, context, rule=rule)
    meta = TensorMeta(tuple(ShardMeta.from_json(b) for b in boxes), tuple(shape))
    judge.assert_equal("ShardedTensor validation", layout_verdict(meta), VALID, context,
                       rule="INTEROP-2")  # fmt: skip


@pytest.mark.rules("INTEROP-4")
@given(shape=ss.shapes(min_dims=1), k=st.integers(1, 8), data=st.data())
def test_a_1d_mesh_gives_the_non_empty_boxes_of_chunk_sharding_spec(impl, pure, shape, k, data):
    judge.requires(impl, "dtensor", "interop")
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    ranks = data.draw(st.permutations(range(k)))
    context = f"shape={shape}, mesh={ranks}, [S({d})]"
    made = convert(pure, shape, [k], list(ranks), [f"S({d})"])
    boxes = judge.pure_value(made, context, rule="INTEROP-4")
    spec = ChunkSpec(d, tuple(f"rank:{r}/cpu" for r in ranks))
    chunks = [s.to_json() for s in chunk_shards(shape, spec) if s.volume]
    judge.assert_equal("non-empty boxes", _non_empty(boxes), chunks, context, rule="INTEROP-4")


@st.composite
def live_layouts(draw, world_sizes: list[int]):
    """Any layout (``P``, strided shards, meshes in any order and smaller than the world) of a
    seeded tensor of any dtype; half the time a small one of at least one dim, fewer elements
    than ranks likely."""
    world_size = draw(st.sampled_from(world_sizes))
    small = draw(st.booleans())  # with a dim or more: a strided shard of it is then possible
    shape = draw(ss.shapes(min_dims=int(small), max_side=3 if small else 7))
    mesh_shape, ranks = draw(ss.meshes(world_size))
    return world_size, {
        "shape": shape,
        "dtype": draw(st.sampled_from(ss.DTYPES)),
        "seed": draw(st.integers(0, 2**16)),
        "mesh_shape": mesh_shape,
        "mesh_ranks": ranks,
        "placements": draw(ss.placements(len(mesh_shape), len(shape), partial=True, strided=True)),
    }


def _checkpoint_classes(mesh: Mesh, placements, verdict, boxes: list[dict]) -> list[str]:
    labels = []
    if verdict.rule == "INTEROP-5":
        labels.append("checkpoint: a partial layout")
    if verdict.rule == "INTEROP-6":
        labels.append("checkpoint: indices that are not an interval")
    if verdict.ok and any(isinstance(p, StridedShard) for p in placements):
        labels.append("checkpoint: strided shards, every index sequence an interval")
    if verdict.ok and any(isinstance(p, Replicate) and k > 1
                          for p, k in zip(placements, mesh.shape, strict=True)):  # fmt: skip
        labels.append("checkpoint: a replicated box")
    if verdict.ok and not all(all(b["sizes"]) for b in boxes):
        labels.append("checkpoint: an empty box")
    return labels


def _box(b: dict) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(b["offsets"]), tuple(b["sizes"])


@pytest.mark.rules("INTEROP-8", "INTEROP-9", "INTEROP-2", "INTEROP-5", "INTEROP-6")
@pytest.mark.edges("checkpoint", "mesh", "tensor")
@given(data=st.data())
def test_a_checkpoint_writes_each_box_once_from_a_rank_that_holds_it(
    impl, available_world_sizes, run_case, data
):
    """Every rank of the world holds the DTensor and plans its checkpoint: ``P`` layouts and
    indices that are not intervals are refused on every rank; otherwise the non-empty boxes
    written are the layout's, each once, from a rank whose coordinate holds it, and all the boxes
    are valid metadata of the recorded size and dtype."""
    judge.requires(impl, "dtensor", "interop_checkpoint")
    world_size, args = data.draw(live_layouts(available_world_sizes))
    shape, mesh_shape, ranks = args["shape"], args["mesh_shape"], args["mesh_ranks"]
    mesh, placements = Mesh(tuple(mesh_shape), tuple(ranks)), parse_placements(args["placements"])
    judge.assume_layout_claimed(impl, world_size, ranks, args["placements"])
    verdict = oracle.to_sharded_metadata_verdict(shape, mesh_shape, placements)
    expected = oracle.to_sharded_metadata(shape, args["dtype"], mesh, placements)
    layout = [s.to_json() for s in expected.shards] if verdict.ok else []
    edges.tensor(shape, args["dtype"], len(ranks))
    edges.mesh(mesh_shape, ranks, world_size)
    edges.note(*_checkpoint_classes(mesh, placements, verdict, layout))
    result = run_case("dtensor:checkpoint_plan", world_size, **args)
    values = judge.assert_collective_verdict(result, verdict, rule="INTEROP-8")
    if values is None:
        return
    context = result.replay_command()
    held = oracle.holders(shape, mesh, placements)
    want = sorted(_box(b) for b in layout if all(b["sizes"]))
    for rank, plan in enumerate(values):
        where = f"rank {rank}"
        written = [b for b in plan["boxes"] if all(b["sizes"])]
        judge.assert_equal(f"{where}: the non-empty boxes written, sorted",
                           sorted(_box(b) for b in written), want, context,
                           rule="INTEROP-8")  # fmt: skip
        strangers = [b for b in written
                     if parse_remote_device(b["placement"]).rank not in held[_box(b)]]  # fmt: skip
        judge.assert_equal(f"{where}: boxes written by a rank that does not hold them",
                           strangers, [], context, rule="INTEROP-8")  # fmt: skip
        meta = TensorMeta(tuple(ShardMeta.from_json(b) for b in plan["boxes"]), tuple(shape))
        judge.assert_equal(f"{where}: ShardedTensor validation", layout_verdict(meta), VALID,
                           context, rule="INTEROP-2")  # fmt: skip
        judge.assert_equal(f"{where}: (size, dtype)", [plan["size"], plan["dtype"]],
                           [shape, args["dtype"]], context, rule="INTEROP-9")  # fmt: skip
