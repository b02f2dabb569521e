"""spec/dt-mesh.md: what every rank sees of a mesh, and which meshes every rank rejects."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge
from conformance import strategies as ss
from conformance.oracle import dt_api, dt_redistribute
from conformance.oracle import mesh as oracle
from conformance.oracle.tensors import make_global
from conformance.oracle.vocabulary import value_error
from conformance.vocabulary import Mesh, parse_placements

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


NAMES = ["dp", "tp", "pp"]


@st.composite
def flattenings(draw, world_sizes: list[int]):
    """A named mesh, an ascending selection of its dims (``None``: every dim) and the name of
    their flattening (``None`` or ``""``: the default; a selected dim's own name)."""
    world_size = draw(st.sampled_from(world_sizes))
    shape, ranks = draw(ss.meshes(world_size))
    names = draw(st.permutations(NAMES))[: len(shape)]
    dims = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    chosen = [names[d] for d in dims]
    flatten = None if len(dims) == len(shape) and draw(st.booleans()) else chosen
    name = draw(st.sampled_from([None, "", "flat", *([chosen[0]] if len(dims) == 1 else [])]))
    edges.mesh(shape, ranks, world_size)
    edges.flattening(len(shape), dims, name, names)
    return world_size, dims, {"shape": shape, "ranks": ranks, "names": names,
                              "flatten": flatten, "name": name}  # fmt: skip


@pytest.mark.rules("DT-MESH-11", "DT-MESH-12", "DT-MESH-13", "DT-MESH-14")
@pytest.mark.edges("mesh", "flattening")
@given(data=st.data())
def test_a_flattened_mesh_lists_each_ranks_group_in_row_major_order(
    impl, available_world_sizes, run_case, data
):
    """``mesh[names]._flatten(name)``: the flat mesh, its group, and ``mesh[name]`` after,
    from every rank; flattening again returns the same mesh."""
    judge.requires(impl, "dtensor", "mesh_flatten")
    world_size, dims, args = data.draw(flattenings(available_world_sizes))
    if len(args["ranks"]) < world_size:
        judge.assume_claimed(impl, "sub_groups")
    result = run_case("dtensor:flatten_facts", world_size, **args)
    values = judge.all_returned(result, rule="DT-MESH-11")
    context = result.replay_command()
    mesh = Mesh(tuple(args["shape"]), tuple(args["ranks"]))
    _, _, flat_name = oracle.flatten_verdict(args["names"], args["flatten"], args["name"], {})
    for rank, got in enumerate(values):
        where = f"rank {rank}"
        again = got.pop("again")
        judge.assert_equal(f"{where}: flattened again", again,
                           {k: v for k, v in got.items() if k not in ("group", "named")},
                           context, rule="DT-MESH-13")  # fmt: skip
        coordinate = oracle.coordinate(mesh, rank)
        if coordinate is None:
            judge.assert_equal(f"{where}: get_coordinate()", got["coordinate"], None, context,
                               rule="DT-MESH-11")  # fmt: skip
            continue
        group = oracle.flat_group(mesh, coordinate, dims)
        position = group.index(rank)
        judge.assert_equal(f"{where}: flat mesh (tolist, names, coordinate)",
                           [got["mesh"], got["names"], got["coordinate"]],
                           [list(group), [flat_name], [position]], context,
                           rule="DT-MESH-11")  # fmt: skip
        judge.assert_equal(f"{where}: (group ranks, local rank)", got["group"],
                           [list(group), position], context, rule="DT-MESH-12")  # fmt: skip
        judge.assert_equal(f"{where}: mesh[{flat_name!r}].mesh", got["named"], list(group),
                           context, rule="DT-MESH-13")  # fmt: skip


@st.composite
def invalid_flattenings(draw, world_sizes: list[int]):
    """A valid flattening (``flattenings``) with exactly one fault, on every rank or, for a fault
    of the arguments, on one rank only."""
    world_size, dims, args = draw(flattenings(world_sizes))
    names, ndim = args["names"], len(args["shape"])
    faults = ["no names", "unknown name", "a name twice", "nothing chosen"]
    faults += ["another name"] if world_size > 1 else []  # on one rank: another flattening
    faults += ["out of order", "a dim's name", "taken by other dims"] if ndim > 1 else []
    fault = draw(st.sampled_from(faults))
    chosen, name, before = [names[d] for d in dims], args["name"], []
    if fault == "no names":
        args["names"] = None
    elif fault == "unknown name":
        chosen = draw(st.permutations([*chosen, "zz"]))
    elif fault == "a name twice":
        chosen = sorted([*chosen, draw(st.sampled_from(chosen))], key=names.index)
    elif fault == "nothing chosen":
        chosen = []
    elif fault == "out of order":
        chosen = list(reversed(names[: draw(st.integers(2, ndim))]))
    elif fault == "a dim's name":
        chosen = names[:2]
        name = draw(st.sampled_from(names))
    elif fault == "another name":
        name = "other"
    else:
        other = [n for n in names if n not in chosen] or chosen[1:] or names[1:]
        before = [{"flatten": other, "name": "flat"}]
        name = "flat"
    args.update(before=before, fault=None)
    if fault in ("no names", "taken by other dims") or (
        fault != "another name" and draw(st.booleans())
    ):
        args.update(flatten=chosen, name=name)
        edges.note(f"flattening fault: {fault}", "fault: on every rank")
    else:
        args["fault"] = {"rank": draw(st.integers(0, world_size - 1)), "flatten": chosen,
                         "name": name}  # fmt: skip
        edges.note(f"flattening fault: {fault}", "fault: on one rank")
    return world_size, args


@pytest.mark.rules("DT-MESH-14", "ERR-1", "ERR-6", "ERR-7")
@pytest.mark.edges("flattening fault")
@given(data=st.data())
def test_an_invalid_flattening_is_rejected_on_every_rank(
    impl, available_world_sizes, run_case, data
):
    """No dim names, an unknown, repeated or missing name, names out of mesh order, a flat
    name a dim or another flattening holds, or ranks that ask for different flattenings:
    ValueError on every rank of the world, also when only one rank asks for it."""
    judge.requires(impl, "dtensor", "mesh_flatten")
    world_size, args = data.draw(invalid_flattenings(available_world_sizes))
    if len(args["ranks"]) < world_size:
        judge.assume_claimed(impl, "sub_groups")
    result = run_case("dtensor:flatten_facts", world_size, **args)
    judge.assert_collective_verdict(result, value_error("DT-MESH-14"))


@st.composite
def flat_transitions(draw, world_sizes: list[int]):
    """A named mesh, an ascending selection of its dims flattened under the default name (one
    dim: that dim's own mesh), and a transition between ``R`` and ``S(d)`` (any dim, uneven and
    empty chunks included) on the flat mesh."""
    world_size = draw(st.sampled_from(world_sizes))
    shape = draw(ss.shapes(min_dims=1))
    mesh_shape, ranks = draw(ss.meshes(world_size))
    names = NAMES[: len(mesh_shape)]
    dims = sorted(draw(st.sets(st.integers(0, len(mesh_shape) - 1), min_size=1)))
    one_dim = st.sampled_from(["R", *(f"S({d})" for d in range(-len(shape), len(shape)))])
    source, target = draw(one_dim), draw(one_dim)
    dtype = draw(st.sampled_from(ss.DTYPES))
    edges.mesh(mesh_shape, ranks, world_size)
    edges.flattening(len(mesh_shape), dims, None, names)
    edges.tensor(shape, dtype, len(ranks))
    edges.permutation(sorted(ranks), ranks)
    return (
        world_size,
        dims,
        {
            "shape": shape,
            "dtype": draw(st.sampled_from(ss.DTYPES)),
            "seed": draw(st.integers(0, 2**16)),
            "mesh_shape": mesh_shape,
            "mesh_ranks": ranks,
            "names": names,
            "flatten": [names[d] for d in dims],
            "source": source,
            "target": target,
        },
    )


@pytest.mark.rules("DT-MESH-12")
@pytest.mark.edges("mesh", "flattening", "permutation")
@given(data=st.data())
def test_a_dtensor_on_a_flattened_mesh_holds_the_data_of_its_flat_coordinate(
    impl, available_world_sizes, run_case, data
):
    """A flat mesh is a mesh: distribute, redistribute and ``full_tensor`` on it place and
    read each chunk at the rank's flat coordinate (DT-MESH-8 on the flat mesh), in each group
    of the flattening independently."""
    judge.requires(impl, "dtensor", "mesh_flatten")
    world_size, dims, args = data.draw(flat_transitions(available_world_sizes))
    if len(args["mesh_ranks"]) < world_size:
        judge.assume_claimed(impl, "sub_groups")
    result = run_case("dtensor:flat_redistribute", world_size, **args)
    values = judge.all_returned(result, rule="DT-MESH-12")
    context = result.replay_command()
    mesh = Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))
    value = make_global(args["shape"], args["dtype"], args["seed"])
    source, target = parse_placements([args["source"]]), parse_placements([args["target"]])
    for rank, got in enumerate(values):
        coordinate = oracle.coordinate(mesh, rank)
        if coordinate is None:
            continue  # outside the mesh: DT-MESH-9, judged by the redistribution tests
        flat = Mesh(
            (math.prod(mesh.shape[d] for d in dims),), oracle.flat_group(mesh, coordinate, dims)
        )
        sources = {r: value for r in range(world_size)}
        distributed = dt_api.distribute_tensor(sources, flat, source, world_size, None)
        moved = dt_redistribute.redistribute(
            distributed, args["shape"], flat, source, target, world_size
        )
        full = dt_api.full_tensor(moved, args["shape"], flat, target, world_size)
        where = f"rank {rank} (flat coordinate {flat.ranks.index(rank)})"
        for what, expected in (("distributed", distributed), ("redistributed", moved),
                               ("full", full)):  # fmt: skip
            judge.assert_tensor_exact(f"{where}: {what}", got[what], expected[rank], context,
                                      rule="DT-MESH-12")  # fmt: skip
