"""spec/interop.md: a DTensor's layout as ShardedTensor boxes (pure: in the sandbox, which has no
process group)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import judge
from conformance import strategies as ss
from conformance.oracle import interop as oracle
from conformance.oracle.st_metadata import ShardMeta, TensorMeta
from conformance.oracle.st_sharding_spec import ChunkSpec, chunk_shards
from conformance.oracle.st_validation import layout_verdict
from conformance.oracle.vocabulary import VALID
from conformance.vocabulary import Mesh, parse_placements


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
