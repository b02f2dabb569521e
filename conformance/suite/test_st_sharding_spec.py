"""spec/st-sharding-spec.md: the layout of a ChunkShardingSpec (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import judge
from conformance import strategies as ss
from conformance.oracle.st_sharding_spec import ChunkSpec, build_metadata_verdict, chunk_shards
from conformance.oracle.vocabulary import VALID


@st.composite
def chunk_specs(draw):
    shape = draw(ss.shapes(min_dims=1))
    dim = draw(st.integers(-len(shape) - 1, len(shape)))
    ranks = draw(st.lists(st.integers(0, 7), min_size=1, max_size=8))
    return shape, dim, [f"rank:{r}/cpu" for r in ranks]


@pytest.mark.rules(
    "ST-SPEC-1", "ST-SPEC-2", "ST-SPEC-3", "ST-SPEC-4", "ST-SPEC-5", "ST-SPEC-6", "ST-SPEC-9",
    "ST-SPEC-10",
)  # fmt: skip
@given(spec=chunk_specs())
def test_chunk_metadata_of_any_size_dim_and_placements(impl, spec):
    judge.requires(impl, "sharded_tensor")
    shape, dim, placements = spec
    context = f"ChunkShardingSpec(dim={dim}, {placements}).build_metadata({shape})"
    oracle_spec = ChunkSpec(dim, tuple(placements))
    verdict = build_metadata_verdict(oracle_spec, shape)
    actual = judge.assert_pure_verdict(
        lambda: impl.st_chunk_metadata(shape, dim, placements), verdict, context
    )
    if verdict == VALID:
        expected = [
            {"offsets": list(s.offsets), "sizes": list(s.sizes), "placement": s.placement}
            for s in chunk_shards(shape, oracle_spec)
        ]
        judge.assert_equal("shards", actual, expected, context)
        again = impl.st_chunk_metadata(shape, dim, placements)
        judge.assert_equal("shards of a second call", again, actual, context)
