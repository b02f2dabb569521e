"""Every validation rule of the ShardedTensor collectives, with the bad input on one rank: every
rank raises the same type (ERR-6), promptly (ERR-7), before writing anything (ERR-8, ERR-9)."""

from __future__ import annotations

import pytest
from st_tasks import VIOLATIONS

from conformance.world import Case, CaseResult, Raised
from reference.verdict import SLOT_BYTES


def assert_every_rank_raised(result: CaseResult, error: str, rule: str) -> None:
    """Every rank raised ``error`` naming ``rule`` first (ERR-5, ERR-6); no rank hung (ERR-7)."""
    wrong = [
        o
        for o in result.outcomes
        if not (isinstance(o, Raised) and o.is_a(error) and o.rule == rule)
    ]
    assert not wrong, result.report(f"every rank should raise {error} [{rule}]")


@pytest.mark.rules("ERR-1", "ERR-2", "ERR-3", "ERR-5", "ERR-6", "ERR-7", "ERR-8", "ERR-9")
@pytest.mark.parametrize("case", VIOLATIONS)
def test_a_bad_input_on_one_rank_raises_the_same_error_on_every_rank(world_pool, case):
    error, rule, bad, _ = VIOLATIONS[case]
    world = world_pool.get(3)
    bad_rank = {"last": 2, "all": -1}.get(bad, bad)
    result = world.run(Case("st_tasks:violation", {"case": case, "bad": bad_rank}))
    assert_every_rank_raised(result, error, rule)


@pytest.mark.rules("ERR-6")
@pytest.mark.parametrize("case", ["shard_shape_differs", "local_overlap", "global_shard_missing"])
def test_the_verdict_does_not_depend_on_which_rank_is_wrong(world_pool, case):
    error, rule, _, _ = VIOLATIONS[case]
    for bad_rank in (0, 1):
        result = world_pool.get(2).run(Case("st_tasks:violation", {"case": case, "bad": bad_rank}))
        assert_every_rank_raised(result, error, rule)


@pytest.mark.rules("ERR-7")
@pytest.mark.parametrize(
    ("lengths", "gathers"),
    [
        ([40, SLOT_BYTES, 0], 1),  # every message fits a slot: one round trip
        ([40, SLOT_BYTES + 1, 0], 2),  # one does not: every rank gathers again
        ([3 * SLOT_BYTES, 5, 2 * SLOT_BYTES], 2),
    ],
)
def test_the_verdict_exchange_is_one_all_gather_unless_a_message_outgrows_its_slot(
    world_pool, lengths, gathers
):
    """Every rank gets every message byte for byte, and all ranks gather as often."""
    result = world_pool.get(3).run(Case("st_tasks:gathered_bytes", {"lengths": lengths}))
    expected = [bytes((r * 7 + i) % 256 for i in range(n)) for r, n in enumerate(lengths)]
    assert result.values() == [(expected, gathers)] * 3, result.report("gather_bytes")
