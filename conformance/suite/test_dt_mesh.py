"""spec/dt-mesh.md: what every rank sees of a mesh, and which meshes every rank rejects."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import judge
from conformance import strategies as ss
from conformance.oracle import mesh as oracle
from conformance.vocabulary import Mesh

TASK = "conformance.tasks.dtensor:mesh_facts"


@st.composite
def valid_meshes(draw, world_sizes: list[int]):
    world_size = draw(st.sampled_from(world_sizes))
    shape, ranks = draw(ss.meshes(world_size))
    names = None
    if draw(st.booleans()):
        names = draw(st.permutations(["dp", "tp", "pp"]))[: len(shape)]
    return world_size, {"shape": shape, "ranks": ranks, "names": names}


@pytest.mark.rules("DT-MESH-1", "DT-MESH-5", "DT-MESH-6", "DT-MESH-7", "DT-MESH-9", "DT-MESH-10")
@given(data=st.data())
def test_every_rank_sees_the_mesh_its_coordinate_and_its_groups_in_coordinate_order(
    impl, available_world_sizes, run_case, data
):
    judge.requires(impl, "dtensor")
    world_size, args = data.draw(valid_meshes(available_world_sizes))
    if len(args["ranks"]) < world_size:
        judge.assume_claimed(impl, "sub_groups")
    result = run_case("dtensor:mesh_facts", world_size, **args)
    values = judge.all_returned(result, rule="DT-MESH-10")
    context = result.replay_command()
    mesh = Mesh(tuple(args["shape"]), tuple(args["ranks"]))
    for rank, got in enumerate(values):
        where = f"rank {rank}"
        judge.assert_equal(f"{where}: mesh.tolist()", got["mesh"], mesh.nested(), context,
                           rule="DT-MESH-1")  # fmt: skip
        judge.assert_equal(f"{where}: ndim", got["ndim"], mesh.ndim, context, rule="DT-MESH-1")
        judge.assert_equal(f"{where}: size()", got["size"], math.prod(mesh.shape), context,
                           rule="DT-MESH-1")  # fmt: skip
        judge.assert_equal(f"{where}: size(i)", got["sizes"], list(mesh.shape), context,
                           rule="DT-MESH-1")  # fmt: skip
        judge.assert_equal(f"{where}: mesh_dim_names", got["names"], args["names"], context,
                           rule="DT-MESH-5")  # fmt: skip
        coordinate = oracle.coordinate(mesh, rank)
        judge.assert_equal(f"{where}: get_coordinate()", got["coordinate"],
                           None if coordinate is None else list(coordinate), context,
                           rule="DT-MESH-6")  # fmt: skip
        if coordinate is None:
            continue
        groups = [[list(oracle.dim_group(mesh, coordinate, i)), coordinate[i]]
                  for i in range(mesh.ndim)]  # fmt: skip
        judge.assert_equal(f"{where}: (group ranks, local rank) per dim", got["groups"], groups,
                           context, rule="DT-MESH-7")  # fmt: skip
        named = {n: groups[i][0] for i, n in enumerate(args["names"] or ())}
        judge.assert_equal(f"{where}: mesh[name].mesh", got["named"], named, context,
                           rule="DT-MESH-7")  # fmt: skip


@st.composite
def invalid_meshes(draw, world_sizes: list[int]):
    """A valid mesh with exactly one violation (ERR-11), on every rank or on one rank only."""
    world_size = draw(st.sampled_from(world_sizes))
    shape, ranks = draw(ss.meshes(world_size))
    names = None
    faults = ["high", "negative", "too_many", "empty", "zero_d", "name_count"]
    faults += ["duplicate"] if len(ranks) > 1 else []
    faults += ["name_twice"] if len(shape) > 1 else []
    fault = draw(st.sampled_from(faults))
    i = draw(st.integers(0, len(ranks) - 1))
    if fault == "high":
        ranks[i] = world_size + draw(st.integers(0, 2))
    elif fault == "negative":
        ranks[i] = -1
    elif fault == "too_many":
        shape, ranks = [world_size + 1], list(range(world_size + 1))
    elif fault == "empty":
        shape = draw(st.sampled_from([[0], [0, 2], [2, 0]]))
        ranks = []
    elif fault == "zero_d":
        shape, ranks = [], [ranks[i]]
    elif fault == "duplicate":
        ranks[i] = ranks[i - 1]
    elif fault == "name_count":
        names = ["a", "b", "c", "d"][: len(shape) + draw(st.sampled_from([-1, 1]))]
    elif fault == "name_twice":
        names = ["a"] * len(shape)
    args = {"shape": shape, "ranks": ranks, "names": names, "cached": False, "fault": None}
    if not fault.startswith("name") and draw(st.booleans()):
        good_shape, good_ranks = [world_size], list(range(world_size))
        args.update(shape=good_shape, ranks=good_ranks)
        args["fault"] = {"rank": draw(st.integers(0, world_size - 1)), "shape": shape,
                         "ranks": ranks}  # fmt: skip
    return world_size, Mesh(tuple(shape), tuple(ranks)), args


@pytest.mark.rules("DT-MESH-2", "DT-MESH-3", "DT-MESH-4", "DT-MESH-5", "DT-MESH-10")
@given(data=st.data())
def test_an_invalid_mesh_is_rejected_on_every_rank(impl, available_world_sizes, run_case, data):
    """Duplicate, out-of-range, empty and 0-d meshes and bad names: ValueError everywhere, also
    when only one rank passes the bad mesh."""
    judge.requires(impl, "dtensor")
    world_size, bad, args = data.draw(invalid_meshes(available_world_sizes))
    verdict = oracle.mesh_verdict(bad, world_size, args["names"])
    result = run_case("dtensor:mesh_facts", world_size, **args)
    judge.assert_collective_verdict(result, verdict)
