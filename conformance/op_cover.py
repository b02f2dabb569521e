"""A per-op test's covering examples (``ops.cases.cover``) as candidates of ``pairwise``: built,
not drawn, and run after the property's own draws as every covering example is.

A test marked ``@pytest.mark.op_cover(variant)`` gets, in the ``ci`` and ``thorough`` profiles,
examples that hold every pair of its op's classes that the op's samples can give together; its
report carries those pairs (``REQUIRED``), which ``--require-edges`` then asks of the examples
that ran, op by op.
"""

from __future__ import annotations

import json

import pytest

from conformance import covering, edges
from conformance.ops import cases, catalogue
from conformance.pairwise import Candidate

REQUIRED = "required_pairs"
OFFERED = "offered_pairs"


def choose(item: pytest.Item, variant: str) -> tuple[list[Candidate], set[covering.Pair]]:
    """The covering examples of the item's op, and the pairs they hold; none for an op the
    installed release cannot run (the test skips it)."""
    op = item.callspec.params["op"]
    impl = item.funcargs["impl"]
    world_sizes = tuple(item.funcargs["available_world_sizes"])
    runs = catalogue.known(op) and any(cases.indices(op, d, variant) for d in catalogue.dtypes(op))
    if not runs or op in getattr(impl, "unclaimed_ops", ()):
        return [], set()
    built = cases.cover(op, variant, world_sizes, frozenset(impl.capabilities))
    chosen = []
    try:
        for world_size, case, _ in built.examples:
            with edges.example() as noted:
                cases.note(op, case)
                labels = frozenset(noted)
            given = {"data": ("data", [((world_size, case), sorted(labels))])}
            chosen.append(Candidate(labels, given))
    finally:
        edges.clear()
    item.user_properties.append((REQUIRED, json.dumps(sorted(map(sorted, built.held)))))
    item.user_properties.append((OFFERED, len(built.offered)))
    return chosen, set(built.held)
