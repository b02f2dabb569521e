"""spec/dt-api.md: distribute_tensor from any source rank or none, Partial distribution, and
from_local with and without run_check, on meshes whose ranks are listed in any order."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge
from conformance import strategies as ss
from conformance.oracle import dt_api, tolerance
from conformance.oracle.layout import local_shape_and_offset, source_local
from conformance.oracle.mesh import by_rank
from conformance.oracle.placements import normalize, partial_op
from conformance.oracle.tensors import MEMORY, laid_out, make_global
from conformance.oracle.vocabulary import VALID
from conformance.vocabulary import Mesh, parse_placements

OPS = ["sum", "avg", "min", "max", "product"]


@st.composite
def distributions(draw, world_sizes: list[int]):
    """Any layout (strided shards, ``P`` of one op), a source rank in the mesh, outside it, or
    ``None``."""
    world_size = draw(st.sampled_from(world_sizes))
    shape = draw(ss.shapes())
    mesh_shape, ranks = draw(ss.meshes(world_size))
    placements = draw(ss.placements(len(mesh_shape), len(shape), partial=True, strided=True))
    op = draw(st.sampled_from(OPS))
    placements = [f"P({op})" if p == "P(sum)" else p for p in placements]
    outside = [r for r in range(world_size + 1) if r not in ranks]
    src = draw(st.sampled_from([*ranks, None, *outside[:1]]))
    # full_tensor of an integer P(avg) raises (DT-REDIST-9, tested with redistribute).
    dtypes = ["float32", "float64"] if "P(avg)" in placements else ss.DTYPES
    return world_size, {
        "shape": shape,
        "dtype": draw(st.sampled_from(dtypes)),
        "seed": draw(st.integers(0, 2**16)),
        "mesh_shape": mesh_shape,
        "mesh_ranks": ranks,
        "placements": placements,
        "src_data_rank": src,
        "memory": draw(st.sampled_from(MEMORY)),
    }


def _blame(mesh: Mesh, rank: int, outside: str, inside: str) -> str:
    """The rule a wrong result on ``rank`` breaks: ``outside`` on a rank outside the mesh,
    DT-MESH-8 on a mesh whose ranks are not in ascending order, else ``inside``."""
    if rank not in mesh.ranks:
        return outside
    return "DT-MESH-8" if list(mesh.ranks) != sorted(mesh.ranks) else inside


def _distribute_rule(placements: list[str], src_data_rank: int | None) -> str:
    """The rule whose part of ``distribute_tensor`` a wrong local of a valid call breaks."""
    if any(p.startswith("P(") for p in placements):
        return "DT-API-14"
    return "DT-API-3" if src_data_rank is None else "DT-API-2"


@pytest.mark.rules("DT-API-1", "DT-API-2", "DT-API-3", "DT-API-4", "DT-API-5", "DT-API-12",
                   "DT-API-13", "DT-API-14", "DT-MESH-8", "DT-MESH-9", "DT-PLACE-11",
                   "DT-REDIST-7", "DT-REDIST-8")  # fmt: skip
@pytest.mark.edges("memory")
@given(data=st.data())
def test_distribute_slices_the_source_ranks_tensor_or_each_ranks_own(
    impl, available_world_sizes, run_case, data
):
    """Every rank passes a different tensor; the locals are the layout slices of the source's
    (of each rank's own with ``src_data_rank=None``), partitioned along ``P`` mesh dims, and
    ``full_tensor`` reduces them back within the partition's rounding."""
    judge.requires(impl, "dtensor")
    world_size, args = data.draw(distributions(available_world_sizes))
    judge.assume_layout_claimed(impl, world_size, args["mesh_ranks"], args["placements"])
    judge.assume_source_claimed(impl, args["src_data_rank"], args["mesh_ranks"])
    given_ = laid_out(make_global(args["shape"], args["dtype"], args["seed"]), args["memory"])
    edges.memory(given_, args["memory"])
    result = run_case("dtensor:distribute", world_size, **args)
    mesh = Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))
    placements = parse_placements(args["placements"])
    verdict = dt_api.distribute_verdict(args["shape"], mesh, placements, args["src_data_rank"])
    sliced = _distribute_rule(args["placements"], args["src_data_rank"])
    # every valid layout returns, from any source rank of the mesh or none
    strided = any(p.startswith("_S") for p in args["placements"])
    values = judge.assert_collective_verdict(
        result, verdict, rule="DT-API-4" if strided else sliced
    )
    if values is None:
        return
    context = result.replay_command()
    sources = {r: make_global(args["shape"], args["dtype"], args["seed"] + r)
               for r in range(world_size)}  # fmt: skip
    locals_ = dt_api.distribute_tensor(sources, mesh, placements, world_size,
                                       args["src_data_rank"])  # fmt: skip
    full = dt_api.full_tensor(locals_, args["shape"], mesh, placements, world_size)
    partial_sizes = [k for k, p in zip(mesh.shape, placements, strict=True)
                     if p.__class__.__name__ == "Partial" and k > 1]  # fmt: skip
    n, m = math.prod(partial_sizes), len(partial_sizes)
    src = args["src_data_rank"]
    partitioned = [sources[r] for r in mesh.ranks] if src is None else [sources[src]] * n
    op = partial_op(placements)
    reduced = {None: "DT-API-12", "sum": "DT-REDIST-8"}.get(op, "DT-PLACE-11")
    for rank, got in enumerate(values):
        where = f"rank {rank}"
        judge.assert_tensor_exact(f"{where}: to_local()", got["local"], locals_[rank], context,
                                  rule=_blame(mesh, rank, "DT-API-13", sliced))  # fmt: skip
        judge.assert_equal(f"{where}: input unchanged", got["input_unchanged"], True, context,
                           rule="DT-API-5")  # fmt: skip
        judge.assert_equal(f"{where}: (shape, stride) of the input", [got["describe"]["shape"],
                           got["describe"]["stride"]], [args["shape"], list(given_.stride())],
                           context, rule="DT-API-1")  # fmt: skip
        # A rank outside the mesh holds an empty tensor: nothing there rounds.
        bound = torch.zeros(full[rank].shape, dtype=torch.float64)
        if op == "sum" and rank in mesh.ranks:
            bound = tolerance.partition_tolerance(partitioned, n, m)
        if op == "avg" and full[rank].is_floating_point():
            bound = tolerance.tolerance("avg", [full[rank]] * n)
        if args["src_data_rank"] is None and "R" in args["placements"]:
            continue  # replicas of different tensors: not a DTensor (DT-PLACE-10)
        if not tolerance.within(got["full"], full[rank], bound):
            judge.assert_tensor_exact(f"{where}: full_tensor()", got["full"], full[rank], context,
                                      rule=_blame(mesh, rank, "DT-API-13", reduced))  # fmt: skip


@st.composite
def from_locals(draw, world_sizes: list[int]):
    """Each coordinate passes its layout slice, with or without the global shape and stride
    (or only the shape), with or without ``run_check``, and at most one fault: a local one row
    longer, of another dtype, or values that differ between replicas."""
    world_size = draw(st.sampled_from(world_sizes))
    shape = draw(ss.shapes())
    mesh_shape, ranks = draw(ss.meshes(world_size))
    placements = draw(ss.placements(len(mesh_shape), len(shape), strided=True))
    dtype = draw(st.sampled_from(ss.DTYPES))
    given_ = draw(st.sampled_from(["both", "neither", "shape"]))
    faults = (
        ["none", "dtype"] + (["size"] if shape else []) + (["drift"] if dtype != "bool" else [])
    )
    kind = draw(st.sampled_from(faults))
    fault = None
    run_check = draw(st.booleans())
    if kind != "none":
        rank = None if kind == "drift" else draw(st.sampled_from(ranks))
        fault = {"rank": rank, "kind": kind}
    if kind == "drift":
        # drifting replicas are judged with run_check only (DT-API-9), and only an R dim has them
        run_check = run_check or draw(st.integers(0, 3)) > 0
        if "R" not in placements:
            placements[draw(st.integers(0, len(placements) - 1))] = "R"
    return world_size, {
        "shape": shape,
        "dtype": dtype,
        "seed": draw(st.integers(0, 2**16)),
        "mesh_shape": mesh_shape,
        "mesh_ranks": ranks,
        "placements": placements,
        "run_check": run_check,
        "give_shape": given_ != "neither",
        "give_stride": given_ == "both",
        "fault": fault,
        "memory": draw(st.sampled_from(MEMORY)),
    }


def _local_shapes_and_dtypes(args, coords):
    shapes, dtypes = {}, {}
    for rank, c in coords.items():
        local = source_local(args["shape"], args["dtype"], args["seed"], args["mesh_shape"],
                             args["placements"], c)  # fmt: skip
        fault = args["fault"]
        if fault and fault["rank"] == rank and fault["kind"] == "size":
            local = local.new_zeros([local.shape[0] + 1, *local.shape[1:]])
        dtypes[rank] = args["dtype"]
        if fault and fault["rank"] == rank and fault["kind"] == "dtype":
            dtypes[rank] = "float32" if args["dtype"] == "float64" else "float64"
        shapes[rank] = tuple(local.shape)
    return shapes, dtypes


@pytest.mark.rules("DT-API-1", "DT-API-6", "DT-API-7", "DT-API-8", "DT-API-9", "DT-API-10",
                   "DT-API-11", "DT-API-13", "DT-MESH-8", "DT-PLACE-2", "ERR-9")  # fmt: skip
@pytest.mark.edges("memory", "from_local args")
@given(data=st.data())
def test_from_local_wraps_a_valid_layout_and_run_check_rejects_the_rest(
    impl, run_case, available_world_sizes, data
):
    judge.requires(impl, "dtensor")
    world_size, args = data.draw(from_locals(available_world_sizes))
    judge.assume_layout_claimed(impl, world_size, args["mesh_ranks"], args["placements"])
    mesh = Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))
    placements = parse_placements(args["placements"])
    coords = by_rank(mesh)
    laid = [laid_out(source_local(args["shape"], args["dtype"], args["seed"], args["mesh_shape"],
                                  args["placements"], c), args["memory"])
            for c in coords.values()]  # fmt: skip
    if scattered := [t for t in laid if not t.is_contiguous()]:
        edges.memory(scattered[0], args["memory"])
    given_ = "shape and stride" if args["give_stride"] else "shape" if args["give_shape"] else None
    edges.note(f"from_local: {given_ or 'neither'} given")
    shapes, dtypes = _local_shapes_and_dtypes(args, coords)
    stride = dt_api.contiguous_stride(args["shape"]) if args["give_stride"] else None
    shape = args["shape"] if args["give_shape"] else None
    verdict = dt_api.from_local_verdict(shapes, dtypes, mesh, placements, shape=shape,
                                        stride=stride, run_check=args["run_check"])  # fmt: skip
    # Without run_check, local tensors that do not form the layout give an unspecified result.
    checked = dt_api.from_local_verdict(shapes, dtypes, mesh, placements, shape=shape,
                                        stride=stride, run_check=True)  # fmt: skip
    fault = args["fault"]
    drift = fault is not None and fault["kind"] == "drift"
    specified = checked.ok and (not fault or (drift and args["run_check"]))
    case_args = {**args, "full": specified}
    result = run_case("dtensor:from_local", world_size, **case_args)
    if not verdict.ok:  # a collective over the in-mesh ranks only (DT-API-8, DT-API-10)
        inside = tuple(o for o in result.outcomes if o.rank in coords)
        judge.assert_collective_verdict(dataclasses.replace(result, outcomes=inside), verdict)
        return
    # A valid call returns on every rank; run_check on a sub-mesh waits for no outside rank.
    sub_mesh = args["run_check"] and len(args["mesh_ranks"]) < world_size
    values = judge.all_returned(result, rule="DT-API-10" if sub_mesh else "DT-API-7")
    if not specified:
        return
    context = result.replay_command()
    locals_ = {r: source_local(args["shape"], args["dtype"], args["seed"], args["mesh_shape"],
                               args["placements"], c) for r, c in coords.items()}  # fmt: skip
    if fault:  # drift: every rank added rank + 1
        locals_ = {r: t + (r + 1) for r, t in locals_.items()}
    global_shape, expected = dt_api.from_local(
        locals_, mesh, placements, world_size, shape=shape, run_check=args["run_check"]
    )
    full = dt_api.full_tensor(expected, global_shape, mesh, placements, world_size)
    normalized = [str(p) for p in normalize(placements, len(args["shape"]))]
    # With run_check, replicas take coordinate 0's local and the inputs stay as they were.
    replicated = args["run_check"] and drift and "R" in args["placements"]
    local_rule = "DT-API-9" if replicated else "DT-API-11"
    kept = "DT-API-9" if args["run_check"] else "ERR-9"
    for rank, got in enumerate(values):
        where = f"rank {rank}"
        judge.assert_tensor_exact(f"{where}: to_local()", got["local"], expected[rank], context,
                                  rule=_blame(mesh, rank, "DT-API-13", local_rule))  # fmt: skip
        judge.assert_tensor_exact(f"{where}: full_tensor()", got["full"], full[rank], context,
                                  rule=_blame(mesh, rank, "DT-API-13", "DT-API-7"))  # fmt: skip
        judge.assert_equal(f"{where}: input unchanged", got["input_unchanged"], True, context,
                           rule=kept)  # fmt: skip
        describe = got["describe"]
        if rank not in coords and shape is None:
            continue  # outside the mesh, the inferred shape is that of the rank's own input
        judge.assert_equal(f"{where}: shape", describe["shape"], list(global_shape), context,
                           rule="DT-API-6" if shape is None else "DT-API-1")  # fmt: skip
        # Unspecified (DT-API-1): the stride of a non-contiguous local's, or an inferred empty,
        # global tensor.
        inferred_empty = stride is None and 0 in global_shape
        if stride is not None or (args["memory"] == "contiguous" and not inferred_empty):
            judge.assert_equal(f"{where}: stride", describe["stride"],
                               list(dt_api.contiguous_stride(global_shape)), context,
                               rule="DT-API-1")  # fmt: skip
        judge.assert_equal(f"{where}: placements", describe["placements"], normalized, context,
                           rule="DT-PLACE-2")  # fmt: skip
    if stride is None and 0 in global_shape:  # free, but one value: metadata is not per rank
        strides = sorted({tuple(values[r]["describe"]["stride"]) for r in coords})
        judge.assert_equal("the inferred empty tensor's strides, across ranks", len(strides), 1,
                           context, rule="DT-API-1")  # fmt: skip


def _respelled(placements: list[str], ndim: int) -> list[str]:
    """The same list with every shard dim written with the other sign (``S(1)`` of a 2-d tensor
    as ``S(-1)``)."""
    spelled = []
    for p in placements:
        if p.startswith("S("):
            d = int(p[2:-1])
            p = f"S({d - ndim if d >= 0 else d + ndim})"
        spelled.append(p)
    return spelled


@st.composite
def disagreements(draw, world_sizes: list[int]):
    """A collective call (``distribute_tensor`` from a mesh rank, ``from_local`` with
    ``run_check``, ``redistribute`` of an all-``R`` DTensor) on a mesh of two or more ranks;
    one in-mesh rank passes other placements, another ``src_data_rank`` (``distribute``), or the
    same placements spelled with the other sign of their shard dims (valid, DT-PLACE-2). Ranks
    outside the mesh pass what the others pass."""
    world_size = draw(st.sampled_from(world_sizes))
    shape = draw(ss.shapes(min_dims=1))
    mesh_shape, ranks = draw(ss.meshes(world_size))
    if len(ranks) < 2:
        ranks = draw(st.permutations(range(world_size)))[: draw(st.integers(2, world_size))]
        mesh_shape = [len(ranks)]
    api = draw(st.sampled_from(["distribute", "from_local", "redistribute"]))
    # redistribute into P is DT-REDIST-6's case, not this test's.
    placements = draw(ss.placements(len(mesh_shape), len(shape), partial=api != "redistribute"))
    kinds = ["placements", "spelling"] + (["src"] if api == "distribute" else [])
    kind = draw(st.sampled_from(kinds))
    odd = draw(st.sampled_from(ranks))
    fault = {"rank": odd, "placements": _respelled(placements, len(shape))}
    if kind == "placements":
        i = draw(st.integers(0, len(mesh_shape) - 1))
        current = str(normalize(parse_placements(placements[i : i + 1]), len(shape))[0])
        choices = ["R", *(f"S({d})" for d in range(len(shape)))]
        choices += ["P(sum)"] if api != "redistribute" else []
        other = draw(st.sampled_from([c for c in choices if c != current]))
        fault = {"rank": odd, "placements": [*placements[:i], other, *placements[i + 1 :]]}
    elif kind == "src":
        fault = {"rank": odd, "placements": placements,
                 "src_data_rank": draw(st.sampled_from(ranks[1:]))}  # fmt: skip
    return world_size, ss.with_placements_args(
        draw, api, shape, (mesh_shape, ranks), placements, fault,
        src_data_rank=ranks[0], run_check=True,
    )  # fmt: skip


# The rule of the collective call that must accept one placement list on every rank.
ACCEPTS = {"distribute": "DT-API-2", "from_local": "DT-API-8", "redistribute": "DT-REDIST-1"}


@pytest.mark.rules("DT-API-15", "DT-API-2", "DT-API-7", "DT-API-8", "DT-API-13", "DT-REDIST-1",
                   "DT-PLACE-2", "ERR-6")  # fmt: skip
@given(data=st.data())
def test_a_collective_call_needs_one_placement_list_and_source_on_every_rank(
    impl, available_world_sizes, run_case, data
):
    """Placements that differ between in-mesh ranks after normalisation, or a ``src_data_rank``
    that differs, make every in-mesh rank raise ValueError; ranks outside the mesh make a local
    call with valid arguments and return."""
    judge.requires(impl, "dtensor")
    sizes = [n for n in available_world_sizes if n > 1]
    if not sizes:
        pytest.skip("needs a world of 2 ranks or more")
    world_size, args = data.draw(disagreements(sizes))
    fault = args["fault"]
    judge.assume_source_claimed(impl, fault.get("src_data_rank", "first"), args["mesh_ranks"])
    judge.assume_layout_claimed(impl, world_size, args["mesh_ranks"], args["placements"])
    judge.assume_layout_claimed(impl, world_size, args["mesh_ranks"], fault["placements"])
    mesh = Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))
    by_rank_args = {r: fault if r == fault["rank"] else args for r in range(world_size)}
    verdicts = dt_api.verdicts_by_rank(
        args["api"], args["shape"], args["dtype"], mesh,
        {r: parse_placements(a["placements"]) for r, a in by_rank_args.items()}, world_size,
        src_data_ranks={r: a.get("src_data_rank", args["src_data_rank"])
                        for r, a in by_rank_args.items()},
        run_check=True,
    )  # fmt: skip
    result = run_case("dtensor:with_placements", world_size, **args)
    if args["api"] == "redistribute":  # its all-R source comes from from_local
        judge.assert_built(result, rule="DT-API-7")
    inside = dataclasses.replace(
        result, outcomes=tuple(o for o in result.outcomes if o.rank in mesh.ranks)
    )
    outside = dataclasses.replace(
        result, outcomes=tuple(o for o in result.outcomes if o.rank not in mesh.ranks)
    )
    verdict = verdicts[mesh.ranks[0]]
    # a valid case is one list, spelled two ways (DT-PLACE-2), or written the same
    spelled = fault["placements"] != args["placements"]
    rule = "DT-API-15" if spelled else ACCEPTS[args["api"]]
    judge.assert_collective_verdict(inside, verdict, rule=rule)
    judge.assert_verdicts_by_rank(outside, verdicts, rule="DT-API-13")
    if not verdict.ok:
        return
    expected = [str(p) for p in normalize(parse_placements(args["placements"]),
                                          len(args["shape"]))]  # fmt: skip
    for o in inside.outcomes:
        judge.assert_equal(f"rank {o.rank}: placements", o.value["placements"], expected,
                           result.replay_command(), rule="DT-PLACE-2")  # fmt: skip


FACTORIES = ["zeros", "ones", "full", "empty", "rand", "randn"]
FILLED = {"zeros": 0, "ones": 1}


@st.composite
def factory_calls(draw, world_sizes: list[int]):
    """A factory of any layout (``P`` of sum, avg, max or min; the default placements too),
    with or without a dtype, ``full`` with an int, float or bool fill, ``requires_grad`` where
    the dtype allows it."""
    world_size = draw(st.sampled_from(world_sizes))
    op = draw(st.sampled_from(FACTORIES))
    size = draw(ss.shapes())
    mesh_shape, ranks = draw(ss.meshes(world_size))
    placements = None
    if draw(st.integers(0, 3)):
        partial = draw(st.sampled_from(OPS[:4]))
        placements = [f"P({partial})" if p == "P(sum)" else p for p in
                      draw(ss.placements(len(mesh_shape), len(size), partial=True))]  # fmt: skip
    floating = ["float32", "float64"]
    dtype = draw(st.sampled_from([None, *(floating if op.startswith("rand") else ss.DTYPES)]))
    fill = draw(st.sampled_from([0, 1, -3, 2.5, True])) if op == "full" else None
    if fill is not None and draw(st.booleans()):
        dtype = None  # half of the full calls: the fill's own dtype decides (DT-API-18)
    made = factory_dtype(op, fill, dtype)
    if "P(avg)" in (placements or []) and not made.is_floating_point:
        placements = [p.replace("P(avg)", "P(sum)") for p in placements]
    requires_grad = made.is_floating_point and draw(st.booleans())
    return world_size, {
        "op": op,
        "size": size,
        "mesh_shape": mesh_shape,
        "mesh_ranks": ranks,
        "placements": placements,
        "fill_value": fill,
        "dtype": dtype,
        "requires_grad": requires_grad,
    }


def factory_dtype(op: str, fill, dtype: str | None) -> torch.dtype:
    """The dtype of a factory's result (DT-API-18): the one given, else torch's own factory's
    (the default dtype; for ``full``, the dtype its fill infers)."""
    if dtype is not None:
        return getattr(torch, dtype)
    if op == "full":
        return torch.full((), fill).dtype
    return torch.get_default_dtype()


@pytest.mark.rules("DT-API-16", "DT-API-17", "DT-API-18")
@given(data=st.data())
def test_factories_build_the_layout_dtype_and_fill_of_any_placements(
    impl, available_world_sizes, run_case, data
):
    """Every rank's local tensor has the layout's shape (the empty 1-D tensor outside the mesh),
    the dtype, device and ``requires_grad`` asked for; a filled factory's locals are those of
    distributing the filled tensor, so its logical value is the fill, ``P`` dims included."""
    judge.requires(impl, "dtensor", "dtensor_factories")
    world_size, args = data.draw(factory_calls(available_world_sizes))
    placed = args["placements"] or ["R"] * len(args["mesh_shape"])
    judge.assume_layout_claimed(impl, world_size, args["mesh_ranks"], placed)
    result = run_case("dtensor:factory", world_size, **args)
    values = judge.assert_collective_verdict(result, VALID, rule="DT-API-16")
    context = result.replay_command()
    mesh = Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))
    placements = parse_placements(placed)
    size, op = args["size"], args["op"]
    dtype = factory_dtype(op, args["fill_value"], args["dtype"])
    coords = by_rank(mesh)
    filled = None
    if op in FILLED or op == "full":
        fill = FILLED.get(op, args["fill_value"])
        value = torch.full(size, fill, dtype=dtype)
        filled = dt_api.distribute_tensor({r: value for r in range(world_size)}, mesh,
                                          placements, world_size)  # fmt: skip
    for rank, got in enumerate(values):
        where = f"rank {rank}"
        judge.assert_equal(f"{where}: (shape, stride)",
                           [got["describe"][k] for k in ("shape", "stride")],
                           [size, list(dt_api.contiguous_stride(size))],
                           context, rule="DT-API-16")  # fmt: skip
        judge.assert_equal(f"{where}: dtype", got["describe"]["dtype"],
                           str(dtype).removeprefix("torch."), context,
                           rule="DT-API-18")  # fmt: skip
        local_shape = [0]
        if rank in coords:
            local_shape = list(local_shape_and_offset(size, mesh.shape, placements,
                                                      coords[rank])[0])  # fmt: skip
        judge.assert_equal(f"{where}: to_local().shape", list(got["local"].shape), local_shape,
                           context, rule="DT-API-16")  # fmt: skip
        judge.assert_equal(
            f"{where}: (dtype, device, contiguous, requires_grad) of the local tensor",
            [
                got["local"].dtype,
                got["local_device"],
                got["local_contiguous"],
                got["requires_grad"],
            ],
            [
                dtype,
                result.backend.device_for(rank).type,
                True,
                args["requires_grad"],
            ],
            context,
            rule="DT-API-18",
        )
        if filled is not None:
            judge.assert_tensor_exact(f"{where}: to_local()", got["local"], filled[rank],
                                      context, rule="DT-API-17")  # fmt: skip
