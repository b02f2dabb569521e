"""What does not depend on the case is paid once per world: after one case of each kind has run,
repeating those kinds on other data makes no process group (on NCCL each one is a communicator
set up across the GPUs) and starts no world. These are the CPU-visible proxies of the GPU tier's
costs, pinned on Gloo where every CI run sees them."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.world import Case
from conformance.world.costs import COSTS

ROOT = Path(__file__).resolve().parents[2]

# One case of each kind that builds groups: meshes of 2 dims in permuted order (a group per mesh
# dim and coordinate), a mesh smaller than the world, ShardedTensor sub-groups, factories.
KINDS = [
    ("conformance.tasks.dtensor:distribute_redistribute",
     {"shape": [5, 3], "dtype": "float32", "mesh_shape": [2, 2], "mesh_ranks": [3, 1, 0, 2],
      "source": ["S(0)", "R"], "target": ["R", "S(1)"]}),
    ("conformance.tasks.dtensor:distribute_redistribute",
     {"shape": [4], "dtype": "int64", "mesh_shape": [3], "mesh_ranks": [2, 0, 1],
      "source": ["S(0)"], "target": ["R"]}),
    ("conformance.tasks.sharded_tensor:shard_then_gather",
     {"shape": [5, 2], "dtype": "float64", "dim": 0, "order": [2, 1], "group": [1, 2],
      "src": 0, "dst": 1}),
    ("conformance.tasks.dtensor:factory",
     {"op": "full", "size": [3, 2], "mesh_shape": [2, 2], "mesh_ranks": [3, 1, 0, 2],
      "placements": ["P(sum)", "S(0)"], "fill_value": 1.5, "dtype": None,
      "requires_grad": False}),
]  # fmt: skip


@pytest.fixture(autouse=True)
def _tasks_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "suite"))


def _on(task: str, args: dict, n: int) -> Case:
    """The case of this kind on the ``n``-th data: another seed, or another fill."""
    data = {"fill_value": args["fill_value"] + n} if "fill_value" in args else {"seed": n}
    return Case(task, {**args, **data, "impl": "reference"})


def test_repeated_kinds_of_case_make_no_process_group_and_restart_no_world(world_pool):
    world = world_pool.get(4)
    for task, args in KINDS:  # warm-up: the groups each kind needs
        assert world.run(_on(task, args, 0)).ok
    groups = world.run(Case("world_tasks:process_groups")).values()
    starts = world.starts
    for n in range(1, 4):
        for task, args in KINDS:
            result = world.run(_on(task, args, n))
            assert result.ok, result.report("a clean case failed")
    assert world.run(Case("world_tasks:process_groups")).values() == groups
    assert world.starts == starts


# Refusals of bad input, made on every rank after the validation that ERR-6 and ERR-8 ask for: a
# placement naming a dim the tensor lacks, through distribute and from_local on a permuted 2-D
# mesh whose groups earlier cases used; a redistribute into P(product) of a distributed tensor;
# and a refusal after data moved in the same case (a gather whose ranks disagree on dst after a
# shard), which keeps the world only if the data path left every group in step.
REFUSALS = [
    ("conformance.tasks.dtensor:with_placements",
     {"api": api, "shape": [4, 2], "dtype": "float32", "mesh_shape": [2, 2],
      "mesh_ranks": [3, 1, 0, 2], "placements": ["S(0)", "S(5)"]})
    for api in ("distribute", "from_local")
] + [
    ("conformance.tasks.dtensor:distribute_redistribute",
     {"shape": [5, 3], "dtype": "float32", "mesh_shape": [2, 2], "mesh_ranks": [3, 1, 0, 2],
      "source": ["S(0)", "R"], "target": ["S(0)", "P(product)"]}),
    ("conformance.tasks.sharded_tensor:gather_checked",
     {"shape": [5, 2], "dtype": "float64", "dim": 0, "order": [2, 1, 3, 0],
      "dst_by_rank": [0, 1, 0, 0],
      "out_by_rank": [{"shape": [5, 2], "dtype": "float64"}] * 2 + [None, None]}),
]  # fmt: skip


def test_refused_cases_restart_no_world(world_pool):
    """A refusal on every rank leaves every group in step (conformance.world.step), so the world
    that refused runs the next case: no world start per refused input."""
    world = world_pool.get(4)
    for task, args in REFUSALS:  # warm-up: the mesh and its groups
        assert not world.run(_on(task, args, 0)).ok
    starts, before = world.starts, COSTS.to_json()
    for n in range(1, 4):
        for task, args in REFUSALS:
            result = world.run(_on(task, args, n))
            assert all(o.is_a("ValueError") for o in result.outcomes), result.report("refused")
        assert world.run(_on(*KINDS[0], n)).ok
    assert world.starts == starts
    spent = COSTS.since(before)
    checks = 3 * len(REFUSALS)
    assert (spent["checks"], spent["kept"], spent["starts"]) == (checks, checks, 0), spent
