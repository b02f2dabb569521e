"""Pairwise coverage of edge classes: which pairs a test must draw, and the covering examples."""

from __future__ import annotations

import pytest

from conformance import covering, edges
from conformance.covering import pair


def test_the_pairs_a_test_must_draw_cross_its_families_within_the_worlds_it_has():
    wanted = covering.required(["group", "permutation"], max_ranks=4)
    assert len(wanted) == 2 * 3
    assert pair("group: a sub-group", "permutation: a longer cycle") in wanted
    # a longer cycle needs three ranks; inside a sub-group, four
    assert covering.required(["group", "permutation"], max_ranks=2) == {
        pair(g, p)
        for g in edges.FAMILIES["group"]
        for p in ("permutation: identity", "permutation: a swap")
    }
    assert pair("group: a sub-group", "permutation: a longer cycle") not in covering.required(
        ["group", "permutation"], max_ranks=3
    )


def test_classes_of_one_family_and_impossible_pairs_are_not_required():
    wanted = covering.required(["tensor", "sharded tensor", "chunks"], max_ranks=4)
    assert not any(a in edges.FAMILIES["tensor"] and b in edges.FAMILIES["tensor"]
                   for a, b in map(tuple, wanted))  # fmt: skip
    assert pair("tensor: 0-d", "chunks: uneven") not in wanted
    assert pair("tensor: int64", "chunks: uneven") in wanted


@pytest.mark.parametrize("impossible", sorted(map(sorted, covering.IMPOSSIBLE)))
def test_every_declared_impossible_pair_names_two_edge_classes(impossible):
    known = {label for family in edges.FAMILIES.values() for label in family}
    assert set(impossible) <= known


def test_the_cover_draws_every_pair_the_pool_reaches_with_few_candidates():
    pool = [
        frozenset({"a1", "b1"}),
        frozenset({"a1", "b2", "c1"}),
        frozenset({"a2", "b1", "c1"}),
        frozenset({"a2", "b2", "c2"}),
        frozenset({"a1", "b1", "c2"}),
    ]
    wanted = {pair(a, b) for a in ("a1", "a2") for b in ("b1", "b2")} | {pair("a1", "c3")}
    chosen = covering.cover(pool, wanted)
    assert covering.drawn(pool[i] for i in chosen) >= wanted - {pair("a1", "c3")}
    assert len(chosen) == len(set(chosen)) <= 4
    assert covering.cover(pool, wanted) == chosen  # one pool, one cover
    assert covering.cover([], wanted) == []
