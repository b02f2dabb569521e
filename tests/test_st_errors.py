"""Every validation rule of the ShardedTensor collectives, with the bad input on one rank: every
rank raises the same type (ERR-6), promptly (ERR-7), before writing anything (ERR-8, ERR-9)."""

from __future__ import annotations

import pytest

from conformance.world import Case, CaseResult, Raised

# case (in st_tasks.VIOLATIONS) -> (error type, rule id named first in the message, bad rank).
# The bad rank is 0 (gather's dst), "last" (a rank that is not dst or src), or "all".
VIOLATIONS = {
    "gather_dst_out_of_range": ("ValueError", "ST-GATHER-3", "last"),
    "gather_dst_not_int": ("TypeError", "ST-GATHER-3", "last"),
    "gather_dst_differs": ("ValueError", "ST-GATHER-4", "last"),
    "gather_out_wrong_shape": ("ValueError", "ST-GATHER-5", 0),
    "gather_out_missing": ("ValueError", "ST-GATHER-5", 0),
    "gather_out_not_tensor": ("TypeError", "ST-GATHER-5", 0),
    "gather_out_wrong_dtype": ("ValueError", "ST-GATHER-6", 0),
    "gather_out_off_dst": ("ValueError", "ST-GATHER-7", "last"),
    "create_size_differs": ("ValueError", "ST-LIFE-6", "last"),
    "create_negative_size": ("ValueError", "ST-LIFE-3", "last"),
    "create_size_not_int": ("TypeError", "ST-LIFE-3", "last"),
    "create_spec_not_spec": ("TypeError", "ST-LIFE-5", "last"),
    "create_channels_last": ("NotImplementedError", "ST-LIFE-4", "last"),
    "create_sparse": ("NotImplementedError", "ST-LIFE-4", "last"),
    "create_dim_out_of_range": ("ValueError", "ST-SPEC-6", "last"),
    "create_placement_without_rank": ("ValueError", "ST-VALID-13", "all"),
    "create_placement_on_worker": ("NotImplementedError", "ST-VALID-13", "all"),
    "create_placement_not_member": ("ValueError", "ST-VALID-12", "all"),
    "shard_src_differs": ("ValueError", "ST-LIFE-9", "last"),
    "shard_src_out_of_range": ("ValueError", "ST-LIFE-8", "last"),
    "shard_shape_differs": ("ValueError", "ST-LIFE-10", "last"),
    "shard_dtype_differs": ("ValueError", "ST-LIFE-10", "last"),
    "shard_enumerable": ("NotImplementedError", "ST-SPEC-13", "last"),
    "local_overlap": ("ValueError", "ST-VALID-2", "last"),
    "local_out_of_bounds": ("ValueError", "ST-VALID-3", "last"),
    "local_gap": ("ValueError", "ST-VALID-4", "last"),
    "local_ndim": ("ValueError", "ST-VALID-5", "last"),
    "local_global_size_differs": ("ValueError", "ST-VALID-6", "last"),
    "local_requires_grad_differs": ("ValueError", "ST-VALID-6", "last"),
    "local_shards_of_one_rank_differ": ("ValueError", "ST-VALID-6", "last"),
    "local_tensor_wrong_size": ("ValueError", "ST-VALID-8", "last"),
    "local_not_contiguous": ("ValueError", "ST-VALID-9", "last"),
    "local_placed_elsewhere": ("ValueError", "ST-VALID-10", "last"),
    "local_no_shard_anywhere": ("ValueError", "ST-VALID-14", "all"),
    "global_metadata_differs": ("ValueError", "ST-VALID-7", "last"),
    "global_tensor_wrong_dtype": ("ValueError", "ST-VALID-8", "last"),
    "global_shard_missing": ("ValueError", "ST-VALID-11", "last"),
    "reshard_enumerable": ("NotImplementedError", "ST-RESHARD-7", "last"),
    "reshard_not_a_permutation": ("NotImplementedError", "ST-RESHARD-8", "last"),
    "reshard_dim_out_of_range": ("ValueError", "ST-SPEC-6", "last"),
    "reshard_placement_not_member": ("ValueError", "ST-VALID-12", "last"),
    "reshard_not_a_spec": ("TypeError", "ST-RESHARD-9", "last"),
    "reshard_spec_differs": ("ValueError", "ST-RESHARD-9", "last"),
}


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
    error, rule, bad = VIOLATIONS[case]
    world = world_pool.get(3)
    bad_rank = {"last": 2, "all": -1}.get(bad, bad)
    result = world.run(Case("st_tasks:violation", {"case": case, "bad": bad_rank}))
    assert_every_rank_raised(result, error, rule)


@pytest.mark.rules("ERR-6")
@pytest.mark.parametrize("case", ["shard_shape_differs", "local_overlap", "global_shard_missing"])
def test_the_verdict_does_not_depend_on_which_rank_is_wrong(world_pool, case):
    error, rule, _ = VIOLATIONS[case]
    for bad_rank in (0, 1):
        result = world_pool.get(2).run(Case("st_tasks:violation", {"case": case, "bad": bad_rank}))
        assert_every_rank_raised(result, error, rule)
