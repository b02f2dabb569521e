"""DeviceMesh, distribute_tensor, from_local, to_local and full_tensor on real Gloo worlds."""

from __future__ import annotations

import pytest
import torch
from dt_tasks import block, global_tensor

from conformance.world import Case, CaseResult, Raised


def coordinate_of(mesh_shape, ranks, rank):
    where = (torch.tensor(ranks).reshape(mesh_shape) == rank).nonzero().tolist()
    return tuple(where[0]) if where else None


def assert_raised_everywhere(result: CaseResult, error: str, context=None) -> None:
    """ERR-6: every rank raised, and every exception is a ``error``."""
    bad = [o for o in result.outcomes if not (isinstance(o, Raised) and o.is_a(error))]
    assert not bad, result.report(f"expected {error} on every rank [{context}]")


@pytest.mark.rules("DT-MESH-1", "DT-MESH-5", "DT-MESH-6", "DT-MESH-7", "DT-MESH-9")
def test_mesh_coordinates_groups_and_names_follow_the_mesh_order(world_pool):
    world = world_pool.get(4)
    facts = world.run(
        Case("dt_tasks:mesh_facts", {"shape": [2, 2], "ranks": [3, 1, 0, 2], "names": ["dp", "tp"]})
    ).values()
    assert [f["coordinate"] for f in facts] == [(1, 0), (0, 1), (1, 1), (0, 0)]
    assert [f["groups"] for f in facts] == [
        [[3, 0], [0, 2]],
        [[1, 2], [3, 1]],
        [[1, 2], [0, 2]],
        [[3, 0], [3, 1]],
    ]
    assert [f["local_ranks"] for f in facts] == [[1, 0], [0, 1], [1, 1], [0, 0]]
    assert facts[0]["sub"] == {"dp": [3, 0], "tp": [0, 2]}
    assert {(f["ndim"], f["size"], tuple(f["sizes"]), f["names"]) for f in facts} == {
        (2, 4, (2, 2), ("dp", "tp"))
    }
    small = world.run(Case("dt_tasks:mesh_facts", {"shape": [2], "ranks": [0, 1]})).values()
    assert [f["coordinate"] for f in small] == [(0,), (1,), None, None]


@pytest.mark.rules("DT-MESH-2", "DT-MESH-3", "DT-MESH-4", "DT-MESH-5", "DT-MESH-10", "ERR-6")
def test_invalid_meshes_are_rejected_on_every_rank(world_pool):
    world = world_pool.get(4)
    for mesh, names, error in [
        ([0, 0, 1, 2], None, "ValueError"),
        ([0, 1, 2, 5], None, "ValueError"),
        ([0, 1, -1], None, "ValueError"),
        ([0, 1, 2, 3, 4], None, "ValueError"),
        ([], None, "ValueError"),
        ([[0, 1], [2, 3]], ["a", "a"], "ValueError"),
        ([[0, 1], [2, 3]], ["a"], "ValueError"),
        ([0.0, 1.0], None, "TypeError"),
        ({"0": [0, 1], "1": [0, 1], "2": [1, 0], "3": [0, 1]}, None, "ValueError"),
    ]:
        args = {"mesh": mesh, "names": names}
        if isinstance(mesh, dict):
            args = {"mesh": 0, "names": None, "per_rank": mesh}
        result = world.run(Case("dt_tasks:make_mesh", args))
        assert_raised_everywhere(result, error, mesh)


@pytest.mark.rules(
    "DT-API-1",
    "DT-API-2",
    "DT-API-3",
    "DT-API-4",
    "DT-API-5",
    "DT-API-11",
    "DT-API-12",
    "DT-API-13",
    "DT-API-14",
    "DT-MESH-8",
    "DT-MESH-9",
)
def test_distribute_tensor_slices_the_source_for_every_coordinate(world_pool):
    for world_size, mesh_shape, ranks, src in [
        (4, [2, 2], [3, 1, 0, 2], 1),
        (4, [2, 2], [0, 1, 2, 3], None),
        (3, [3], [2, 0, 1], 2),
        (4, [2], [3, 1], 1),
    ]:
        world = world_pool.get(world_size)
        for placements in (
            ["S(0), S(1)", "R, S(0)", "_S(0, 2), S(0)", "P(sum), S(1)"]
            if len(mesh_shape) == 2
            else ["S(0)", "_S(0, 2)", "R", "P(avg)"]
        ):
            for shape in ([5, 3], [1, 2]):
                values = world.run(
                    Case(
                        "dt_tasks:distribute",
                        {
                            "mesh_shape": mesh_shape,
                            "ranks": ranks,
                            "shape": shape,
                            "placements": placements,
                            "src_data_rank": src,
                        },
                    )
                ).values()
                for rank, got in enumerate(values):
                    source = global_tensor(shape) + (0 if src is None else 100 * src)
                    coord = coordinate_of(mesh_shape, ranks, rank)
                    assert got["input_kept"]
                    assert (got["shape"], got["stride"]) == (shape, [shape[1], 1])
                    if coord is None:
                        assert (got["local"].shape, got["full"].shape) == ((0,), (0,))
                        continue
                    assert torch.equal(got["full"], source), (placements, rank)
                    if "P" not in placements:
                        assert torch.equal(
                            got["local"], block(source, mesh_shape, placements, coord)
                        )


@pytest.mark.rules("DT-API-6", "DT-API-7", "DT-API-8", "DT-API-9", "DT-API-10", "DT-API-13")
def test_from_local_wraps_checks_and_equalises_replicas(world_pool):
    world = world_pool.get(4)
    mesh = {"mesh_shape": [4], "ranks": [0, 1, 2, 3]}
    uneven = {"0": [0.0, 1.0], "1": [2.0, 3.0], "2": [4.0], "3": []}
    for run_check in (False, True):
        values = world.run(
            Case(
                "dt_tasks:from_local",
                {
                    **mesh,
                    "locals_by_rank": uneven,
                    "placements": "S(0)",
                    "run_check": run_check,
                    "shape": [5],
                    "stride": [1],
                },
            )
        ).values()
        assert all(v["full"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] for v in values)
    drift = {str(r): [float(r), 1.0 + r, 2.0 + r] for r in range(4)}
    values = world.run(
        Case(
            "dt_tasks:from_local",
            {**mesh, "locals_by_rank": drift, "placements": "R", "run_check": True},
        )
    ).values()
    assert all(v["local"].tolist() == [0.0, 1.0, 2.0] and v["input_kept"] for v in values)
    even = {str(r): [[float(r)] * 3] * 2 for r in range(4)}
    values = world.run(
        Case(
            "dt_tasks:from_local",
            {**mesh, "locals_by_rank": even, "placements": "S(-2)", "run_check": False},
        )
    ).values()
    assert (values[0]["shape"], values[0]["stride"]) == ([8, 3], [3, 1])
    assert values[0]["placements"] == "[S(0)]"
    # DT-API-10: a mesh of two in a world of four; the others neither check nor wait.
    values = world.run(
        Case(
            "dt_tasks:from_local",
            {
                "mesh_shape": [2],
                "ranks": [0, 1],
                "locals_by_rank": {str(r): [0.0, 1.0, 2.0, 3.0] for r in range(4)},
                "placements": "S(0)",
                "run_check": True,
            },
        )
    ).values()
    assert [v["shape"] for v in values] == [[8]] * 4
    assert [v["local"].shape for v in values] == [(4,), (4,), (0,), (0,)]


@pytest.mark.rules(
    "DT-API-2",
    "DT-API-6",
    "DT-API-8",
    "DT-API-14",
    "DT-API-15",
    "DT-PLACE-1",
    "DT-PLACE-3",
    "DT-PLACE-6",
    "DT-REDIST-9",
    "ERR-6",
)
def test_api_errors_are_raised_on_every_rank(world_pool):
    world = world_pool.get(4)
    one_d = {"mesh_shape": [4], "ranks": [0, 1, 2, 3], "shape": [4, 2]}
    for api, kw, error in [
        ("distribute", {"placements": "S(0), R"}, "ValueError"),
        ("distribute", {"placements": "S(2)"}, "ValueError"),
        ("distribute", {"placements": "P(product)"}, "ValueError"),
        ("distribute", {"placements": "S(0)", "src_data_rank": 7}, "ValueError"),
        ("distribute", {"placements": "S(0)", "src_data_rank": 1.0}, "TypeError"),
        (
            "distribute",
            {"placements": {"0": "S(0)", "1": "S(0)", "2": "S(9)", "3": "S(0)"}},
            "ValueError",
        ),
        (
            "distribute",
            {"placements": "S(0)", "src_data_rank": {"0": 0, "1": 1, "2": 0, "3": 0}},
            "ValueError",
        ),
        ("from_local", {"placements": "S(0)", "local_shape": [2], "from_shape": [8]}, "ValueError"),
        ("from_local", {"placements": "S(0), R", "local_shape": [2]}, "ValueError"),
        (
            "from_local",
            {
                "placements": "S(0)",
                "run_check": True,
                "from_shape": [5],
                "stride": [1],
                "local_shape": [2],
            },
            "ValueError",
        ),
        (
            "from_local",
            {
                "placements": "S(0)",
                "run_check": True,
                "local_shape": {"0": [2], "1": [3], "2": [2], "3": [2]},
            },
            "ValueError",
        ),
        (
            "from_local",
            {
                "placements": "S(0)",
                "run_check": True,
                "local_shape": [2],
                "dtype": {"0": "float64", "1": "int64", "2": "float64", "3": "float64"},
            },
            "ValueError",
        ),
        (
            "from_local",
            {
                "placements": {"0": "S(0)", "1": "S(0)", "2": "R", "3": "S(0)"},
                "run_check": True,
                "local_shape": [2],
            },
            "ValueError",
        ),
        ("full", {"placements": "P(avg)", "dtype": "int64"}, "ValueError"),
    ]:
        result = world.run(Case("dt_tasks:call", {"api": api, **one_d, **kw}))
        assert_raised_everywhere(result, error, (api, kw))
    two_d = {"mesh_shape": [2, 2], "ranks": [0, 1, 2, 3], "shape": [4, 2]}
    result = world.run(
        Case("dt_tasks:call", {"api": "distribute", **two_d, "placements": "P(sum), P(max)"})
    )
    assert_raised_everywhere(result, "ValueError", "mixed partial ops")


@pytest.mark.rules("DT-API-16", "DT-API-17")
@pytest.mark.parametrize(
    ("op", "placements", "dtype", "locals_"),
    [
        ("ones", "P(sum)", "float32", [[0.5, 0.5], [0.5, 0.5], []]),
        ("ones", "P(sum)", "int64", [[1, 1], [0, 0], []]),
        ("ones", "P(max)", "float32", [[1.0, 1.0], [1.0, 1.0], []]),
        ("zeros", "S(0)", "float64", [[0.0], [0.0], []]),
    ],
)
def test_a_filled_factory_is_worth_its_fill_whatever_the_placements(
    world_pool, op, placements, dtype, locals_
):
    """World 3, mesh [0, 1]: the locals partition the fill along ``P`` (DT-API-17), so the value
    is the fill, not twice it; rank 2, outside the mesh, holds the empty 1-D tensor (DT-API-16)."""
    facts = (
        world_pool.get(3)
        .run(
            Case(
                "dt_tasks:factory",
                {"op": op, "size": [2], "placements": placements, "dtype": dtype},
            )
        )
        .values()
    )
    assert [f["local"].tolist() for f in facts] == locals_
    assert {f["local"].dtype for f in facts} == {getattr(torch, dtype)}
    assert [f["full"].tolist() for f in facts[:2]] == [[float(op == "ones")] * 2] * 2


@pytest.mark.rules("INTEROP-5", "INTEROP-8", "INTEROP-9")
def test_a_checkpoint_plan_writes_canonical_boxes_and_receives_nothing(world_pool):
    """World 4, mesh [[3, 2], [1, 0]], [R, S(0)] of (4,): every rank plans the same two boxes,
    from the canonical coordinates (ranks 3 and 2), without a byte received; a ``P`` layout is
    refused on every rank."""
    world = world_pool.get(4)
    args = {"shape": [4], "mesh_shape": [2, 2], "ranks": [3, 2, 1, 0]}
    plans = world.run(Case("dt_tasks:checkpoint_plan", {**args, "placements": "R, S(0)"}))
    for plan in plans.values():
        assert plan["boxes"] == [([0], [2], "rank:3/cpu"), ([2], [2], "rank:2/cpu")]
        assert plan["size_and_dtype"] == [[4], torch.float32]
        assert plan["received"] == 0
    refused = world.run(Case("dt_tasks:checkpoint_plan", {**args, "placements": "P(sum), R"}))
    assert_raised_everywhere(refused, "ValueError", "INTEROP-5")
