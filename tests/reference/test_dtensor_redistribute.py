"""Redistribution on real Gloo worlds: every transition kind on 1-d and 2-d meshes, ascending
and permuted, with uneven and empty shards, checked against the slicing oracle."""

from __future__ import annotations

import pytest
import torch
from dt_tasks import block, global_tensor, logical
from test_dtensor_api import assert_raised_everywhere, coordinate_of

from conformance.world import Case

PAIRS_1D = [
    ("S(0)", "R"),
    ("R", "S(1)"),
    ("S(0)", "S(1)"),
    ("S(1)", "S(0)"),
    ("S(0)", "S(-1)"),
    ("_S(0, 2)", "R"),
    ("S(0)", "_S(0, 2)"),
    ("P(sum)", "R"),
    ("P(sum)", "S(0)"),
    ("P(max)", "S(1)"),
    ("P(min)", "R"),
    ("P(avg)", "S(0)"),
    ("P(product)", "R"),
    ("R", "P(sum)"),
    ("S(0)", "P(sum)"),
    ("P(sum)", "P(max)"),
    ("P(sum)", "P(sum)"),
]
PAIRS_2D = [
    ("S(0), S(0)", "S(1), R"),
    ("S(0), S(0)", "R, S(0)"),
    ("S(0), S(0)", "_S(0, 2), S(0)"),
    ("_S(0, 2), S(0)", "S(0), S(0)"),
    ("S(0), S(1)", "S(1), S(0)"),
    ("R, S(0)", "S(0), S(1)"),
    ("P(sum), S(0)", "S(0), R"),
    ("P(avg), P(avg)", "R, S(0)"),
    ("P(sum), P(sum)", "S(1), S(0)"),
    ("S(1), R", "P(sum), S(0)"),
    ("P(max), R", "R, P(max)"),
]


def check_pairs(world, mesh_shape, ranks, shape, pairs, dtype="float64"):
    result = world.run(
        Case(
            "dt_tasks:redistribute_pairs",
            {
                "mesh_shape": mesh_shape,
                "ranks": ranks,
                "shape": shape,
                "pairs": pairs,
                "dtype": dtype,
            },
        )
    )
    values = result.values()
    full = global_tensor(shape, dtype)
    for rank, outcome in enumerate(values):
        coord = coordinate_of(mesh_shape, ranks, rank)
        for (src, tgt), got in zip(pairs, outcome, strict=True):
            where = f"{src} -> {tgt} on mesh {ranks}, shape {shape}, rank {rank}"
            value = logical(full, mesh_shape, src)
            assert got["source_kept"], where  # DT-REDIST-12
            assert got["shape"] == list(shape), where  # DT-REDIST-13
            assert got["dtype"] == str(full.dtype), where
            if coord is None:  # DT-REDIST-14
                assert got["local"].shape == (0,), where
                continue
            if "P" in tgt:
                torch.testing.assert_close(got["result_full"], value, msg=where)
            else:
                assert torch.equal(got["local"], block(value, mesh_shape, tgt, coord)), where
                assert torch.equal(got["result_full"], value), where


@pytest.mark.rules(
    "DT-REDIST-1",
    "DT-REDIST-2",
    "DT-REDIST-3",
    "DT-REDIST-4",
    "DT-REDIST-6",
    "DT-REDIST-12",
    "DT-REDIST-13",
    "DT-MESH-8",
)
def test_every_1d_transition_on_ascending_and_reversed_meshes(world):
    world_size = world.world_size
    ranks = list(range(world_size))
    for mesh_ranks in (ranks, ranks[::-1]):
        for shape in ([5, 3], [2, 1]):
            check_pairs(world, [world_size], mesh_ranks, shape, PAIRS_1D)


@pytest.mark.rules("DT-REDIST-1", "DT-REDIST-3", "DT-REDIST-4", "DT-LAYOUT-7", "DT-MESH-8")
def test_every_2d_transition_on_ascending_and_permuted_meshes(world_pool):
    world = world_pool.get(4)
    for ranks in ([0, 1, 2, 3], [3, 1, 0, 2]):
        for shape in ([5, 3], [3, 2], [8, 4]):
            check_pairs(world, [2, 2], ranks, shape, PAIRS_2D)


@pytest.mark.rules("DT-REDIST-5", "DT-REDIST-6", "DT-REDIST-14", "DT-MESH-9")
def test_integers_and_meshes_smaller_than_the_world(world_pool):
    world = world_pool.get(3)
    int_pairs = [("R", "P(sum)"), ("P(sum)", "R"), ("P(max)", "S(0)"), ("S(0)", "P(sum)")]
    check_pairs(world, [3], [2, 0, 1], [4, 2], int_pairs, dtype="int64")
    check_pairs(world_pool.get(4), [2], [3, 1], [5, 3], PAIRS_1D[:8])


@pytest.mark.rules(
    "DT-REDIST-7",
    "DT-REDIST-9",
    "DT-REDIST-10",
    "DT-REDIST-11",
    "DT-PLACE-1",
    "DT-PLACE-3",
    "DT-API-15",
    "ERR-6",
)
def test_redistribute_errors_are_raised_on_every_rank(world_pool):
    world = world_pool.get(3)
    base = {"mesh_shape": [3], "ranks": [0, 1, 2], "shape": [4, 2]}
    for kw, error in [
        ({"placements": "R", "target": "P(product)"}, "ValueError"),
        ({"placements": "P(avg)", "target": "R", "dtype": "int64"}, "ValueError"),
        ({"placements": "S(0)", "target": None}, "ValueError"),
        ({"placements": "S(0)", "target": "R, R"}, "ValueError"),
        ({"placements": "S(0)", "target": "S(2)"}, "ValueError"),
        ({"placements": "S(0)", "target": "R", "other_mesh": [2, 1, 0]}, "NotImplementedError"),
        ({"placements": "S(0)", "target": {"0": "R", "1": "S(1)", "2": "R"}}, "ValueError"),
        ({"placements": "S(0)", "target": {"0": "R", "1": "S(5)", "2": "R"}}, "ValueError"),
    ]:
        result = world.run(Case("dt_tasks:call", {"api": "redistribute", **base, **kw}))
        assert_raised_everywhere(result, error, kw)


def test_transitions_receive_the_lower_bound_and_only_the_padding_gloo_needs(world_pool):
    """S->R and S(0)->S(1) receive exactly what a rank lacks; P->S receives only its block; an
    uneven all-gather adds only the padding to the longest piece (Gloo wants equal sizes)."""
    world = world_pool.get(4)
    run = lambda src, tgt, shape: world.run(  # noqa: E731
        Case(
            "dt_tasks:traffic",
            {"mesh_shape": [4], "ranks": [3, 1, 0, 2], "shape": shape, "src": src, "tgt": tgt},
        )
    ).values()
    assert run("S(0)", "R", [8, 2]) == [48] * 4  # 6 rows of 2 floats
    # Sizes 2, 2, 1, 0 at coordinates 0..3, which are ranks 3, 1, 0, 2: each rank lacks 16, 12,
    # 20, 12 bytes and receives 3 pieces padded to 2 rows, 24 bytes.
    assert run("S(0)", "R", [5, 1]) == [24] * 4
    assert run("S(0)", "S(1)", [8, 4]) == [24] * 4  # 3 peers x 2x1 floats
    assert run("P(sum)", "S(0)", [8, 1]) == [24] * 4  # 3 peers x my 2 floats
