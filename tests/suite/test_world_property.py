"""Hypothesis drives cases through persistent worlds, and shrinks across ranks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.world import Case, CaseFailed, WorldPool


@given(data=st.data())
def test_every_rank_agrees_on_the_chunk_sizes_of_any_length(
    data, world_pool, available_world_sizes
):
    world_size = data.draw(st.sampled_from([n for n in available_world_sizes if n <= 4]))
    length = data.draw(st.integers(0, 12))
    result = world_pool.get(world_size).run(Case("world_tasks:chunk_sizes", {"length": length}))
    step = -(-length // world_size)
    expected = [
        max(0, min(length, (r + 1) * step) - min(length, r * step)) for r in range(world_size)
    ]
    assert result.values() == [expected] * world_size, result.report("wrong chunk sizes")


def test_a_planted_failure_shrinks_to_the_minimal_case(world_pool: WorldPool):
    """Ranks fail (rank 1 raises) only when world_size >= 3 and length >= 5: Hypothesis must
    report exactly that corner, the smallest world and length that fail."""
    failing: list[tuple[int, int]] = []

    @settings(max_examples=200, database=None, derandomize=True)
    @given(world_size=st.integers(1, 4), length=st.integers(0, 40))
    def prop(world_size: int, length: int) -> None:
        rank = 1 if world_size >= 3 and length >= 5 else world_size
        result = world_pool.get(world_size).run(Case("world_tasks:raise_on", {"rank": rank}))
        if not result.ok:
            failing.append((world_size, length))
            result.values()

    with pytest.raises(CaseFailed) as info:
        prop()
    assert failing[-1] == (3, 5), (failing[-10:], str(info.value)[:2000])
    assert "--world-size 3" in str(info.value)
    assert "rank 1: raised ValueError" in str(info.value)
