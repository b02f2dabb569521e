"""Saved regressions (fixtures/regressions/*.json): once-failing Hypothesis cases, replayed on
every run and judged by the oracle (see conformance.golden.regressions)."""

from __future__ import annotations

import pytest

from conformance import judge
from conformance.golden import regressions
from conformance.world.harness import HarnessError

SAVED = regressions.load_all()


@pytest.mark.parametrize(
    "regression",
    [
        pytest.param(
            r, id=name, marks=[] if isinstance(r, ValueError) else pytest.mark.rules(*r["rules"])
        )
        for name, r in SAVED
    ],
)
def test_saved_regression_still_passes(impl, available_world_sizes, run_case, regression):
    if isinstance(regression, ValueError):
        # A file the suite cannot read is an error of the suite's data (exit 3), not a verdict,
        # and it stops no other regression.
        raise HarnessError(str(regression))
    task, args = regression["case"]["task"], regression["case"]["args"]
    judge.requires(impl, "dtensor" if "dtensor" in task else "sharded_tensor")
    world_size = regression["world_size"]
    if world_size not in available_world_sizes:
        pytest.skip(f"needs a world of {world_size} rank(s)")
    group = args.get("group") or args.get("mesh_ranks")
    if group is not None and len(group) < world_size:
        judge.requires(impl, "sub_groups")
    result = run_case(task, world_size, **args)
    regressions.judge_result(regression, result)
