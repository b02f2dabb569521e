"""spec/st-validation.md: which shard layouts describe a tensor (pure checks)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import judge
from conformance import strategies as ss
from conformance.oracle.st_metadata import ShardMeta, TensorMeta
from conformance.oracle.st_validation import layout_verdict


@st.composite
def grid_layouts(draw):
    """A valid grid of boxes over a 1-d to 3-d shape, then at most one violation (ERR-11):
    an overlap, a gap, a box out of bounds, a box of the wrong ndim, or no box at all."""
    shape = draw(ss.shapes(min_dims=1, max_dims=3, max_side=6))
    cuts = [sorted(set(draw(st.lists(st.integers(0, n), max_size=3))) | {0, n}) for n in shape]
    boxes = [([], [])]
    for d_cuts in cuts:
        spans = list(itertools.pairwise(d_cuts)) or [(0, 0)]
        boxes = [([*o, a], [*s, b - a]) for o, s in boxes for a, b in spans]
    shards = [{"offsets": o, "sizes": s, "placement": f"rank:{i % 4}/cpu"} for i, (o, s) in
              enumerate(boxes)]  # fmt: skip
    fault = draw(st.sampled_from(["none", "overlap", "gap", "out", "ndim", "empty"]))
    i = draw(st.integers(0, len(shards) - 1))
    d = draw(st.integers(0, len(shape) - 1))
    if fault == "overlap":
        shards.append(dict(shards[i]))
    elif fault == "gap":
        shards.pop(i)
    elif fault == "out":
        shards[i] = {**shards[i], "offsets": [*shards[i]["offsets"]]}
        shards[i]["offsets"][d] += 1
    elif fault == "ndim":
        shards[i] = {**shards[i], "offsets": [*shards[i]["offsets"], 0],
                     "sizes": [*shards[i]["sizes"], 1]}  # fmt: skip
    elif fault == "empty":
        shards = []
    return shape, shards


@pytest.mark.rules(
    "ST-VALID-1", "ST-VALID-2", "ST-VALID-3", "ST-VALID-4", "ST-VALID-5", "ST-VALID-14",
    "ERR-1", "ERR-4",
)  # fmt: skip
@given(layout=grid_layouts())
def test_a_layout_is_accepted_exactly_when_it_tiles_the_tensor(impl, layout):
    judge.requires(impl, "sharded_tensor")
    shape, shards = layout
    verdict = layout_verdict(
        TensorMeta(tuple(ShardMeta.from_json(s) for s in shards), tuple(shape))
    )
    judge.assert_pure_verdict(lambda: impl.st_validate(shards, shape), verdict,
                              f"validate({shards}, size={shape})")  # fmt: skip


@pytest.mark.rules("ST-VALID-1")
@pytest.mark.parametrize(
    ("size", "empty_boxes"),
    [([4], [([1], [0])]), ([4], [([1], [0]), ([1], [0])]), ([4, 4], [([1, 1], [2, 0])])],
    ids=["empty-inside", "two-identical-empty", "empty-2d"],
)
def test_an_empty_box_overlaps_nothing(impl, size, empty_boxes):
    judge.requires(impl, "sharded_tensor")
    full = {"offsets": [0] * len(size), "sizes": size, "placement": "rank:0/cpu"}
    empties = [{"offsets": o, "sizes": s, "placement": "rank:1/cpu"} for o, s in empty_boxes]
    impl.st_validate([full, *empties], size)
