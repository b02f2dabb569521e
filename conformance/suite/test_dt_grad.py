"""spec/dt-grad.md: gradients through ``distribute_tensor``, ``from_local``, ``redistribute``,
``to_local`` and ``full_tensor``, chained as a training step chains them, judged against the
gradient ``torch.autograd`` gives on the full tensors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge, strategies, symptoms
from conformance.oracle import dt_grad, dt_ops
from conformance.oracle.layout import local_shape_and_offset, local_tensor
from conformance.oracle.mesh import by_rank
from conformance.oracle.placements import normalize, placements_verdict
from conformance.oracle.tensors import make_global
from conformance.oracle.values import logical_value
from conformance.oracle.vocabulary import VALID
from conformance.tasks.grad import FORWARD
from conformance.vocabulary import Mesh, Partial, format_placements, parse_placements
from conformance.world import Raised
from conformance.world.protocol import BUILT_FACT


@st.composite
def targets(draw, impl: Any, mesh_shape: list[int], ndim: int) -> list[str]:
    """A redistribution's target without ``P``: ``R``, ``S(d)``, strided shards where
    claimed (moving into ``P`` is DT-REDIST-6's)."""
    kinds = ["R"] + ["S", "S"] * bool(ndim)
    if ndim and "strided_shard" in impl.capabilities:
        kinds.append("_S")
    return [strategies.concrete(draw, draw(st.sampled_from(kinds)), ndim) for _ in mesh_shape]


@st.composite
def declared(draw, cut: list[str]) -> list[str]:
    """``grad_placements`` that cut as ``cut`` does: its shards kept, and on each other mesh
    dim ``R`` or ``P(sum)`` (a gradient each rank holds whole, or a part of)."""
    return [p if p.startswith(("S(", "_S(")) else draw(st.sampled_from(["R", "P(sum)"]))
            for p in cut]  # fmt: skip


@st.composite
def chains(draw, impl: Any, world_sizes: list[int]) -> tuple[int, dict[str, Any]]:
    """A chain of API calls: a leaf (``distribute_tensor``, or ``from_local`` of a local tensor
    that requires grad, its gradient's layout declared or not), zero to two redistributions,
    then ``to_local`` or ``full_tensor`` (the incoming gradient's layout declared or not), one
    or two backward passes; now and then nothing requires grad."""
    world_size = draw(st.sampled_from([*world_sizes, *(n for n in world_sizes if n > 1)]))
    mesh_shape, mesh_ranks = draw(strategies.world_meshes(world_size))
    shape = draw(strategies.shapes(max_dims=3, max_side=6))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    ndim = len(shape)
    start = draw(st.sampled_from(["distribute", "from_local"]))
    placements = draw(strategies.dtensor_placements(impl, mesh_shape, ndim))
    steps = draw(st.lists(targets(impl, mesh_shape, ndim), max_size=2))
    last = steps[-1] if steps else placements
    end = draw(st.sampled_from(["to_local", "full_tensor"]))
    own = format_placements(dt_grad.gradient_placements(parse_placements(last)))
    arriving = own if end == "to_local" else ["R"] * len(mesh_shape)
    end_grad = draw(st.none() | declared(arriving))
    args = {
        "shape": shape,
        "dtype": dtype,
        "seed": draw(st.integers(0, 2**16)),
        "mesh_shape": mesh_shape,
        "mesh_ranks": mesh_ranks,
        "start": start,
        "placements": placements,
        "steps": steps,
        "end": end,
        "upstream": arriving if end_grad is None else end_grad,
        "upstream_seed": draw(st.integers(0, 2**16)),
        "requires_grad": draw(st.sampled_from([True] * 5 + [False])),
        "backwards": draw(st.sampled_from([1, 2])),
        "end_grad": end_grad,
    }
    if start == "from_local":
        leaf_own = format_placements(dt_grad.gradient_placements(parse_placements(placements)))
        args["leaf_grad"] = draw(st.none() | declared(leaf_own))
    _note(args, world_size)
    return world_size, args


def _note(args: dict[str, Any], world_size: int) -> None:
    edges.mesh(args["mesh_shape"], args["mesh_ranks"], world_size)
    edges.op_input(args["shape"], args["dtype"], args["placements"], args["mesh_shape"])
    labels = [f"grad: {args['start']}", f"grad: {args['end']}"]
    labels.append("grad: redistributed" if args["steps"] else "grad: no redistribution")
    if any(args.get(k) is not None for k in ("end_grad", "leaf_grad")):
        labels.append("grad: grad_placements given")
    if any("P(sum)" in (args.get(k) or ()) for k in ("upstream", "leaf_grad")):
        labels.append("grad: a gradient in parts")
    if args["backwards"] == 2 and args["requires_grad"]:
        labels.append("grad: two backward passes")
    if not args["requires_grad"]:
        labels.append("grad: nothing requires grad")
    edges.note(*labels)


def blamed(args: dict[str, Any]) -> str:
    """The rule a failed chain breaks, by its outermost call (``simpler`` has gone without it,
    and that chain passed): a redistribution's backward (DT-GRAD-5), else ``from_local``'s
    (DT-GRAD-4), else ``to_local``'s or ``full_tensor``'s (DT-GRAD-3)."""
    if args["steps"]:
        return "DT-GRAD-5"
    return "DT-GRAD-4" if args["start"] == "from_local" else "DT-GRAD-3"


def simpler(args: dict[str, Any]) -> dict[str, Any] | None:
    """The chain without its outermost call: a leaf distributed straight into the last
    redistribution's layout, with the same end; else without ``from_local``'s declared layout;
    else from ``distribute_tensor``; ``None`` for ``distribute_tensor`` then ``to_local`` or
    ``full_tensor``."""
    twin = {**args, "start": "distribute"}
    twin.pop("leaf_grad", None)
    if args["steps"]:
        return twin | {"steps": [], "placements": args["steps"][-1]}
    if args.get("leaf_grad") is not None:
        return {**args, "leaf_grad": None}
    return twin if args["start"] == "from_local" else None


# The rule of a forward call that raised: the chain's values are DT-REDIST's and DT-API's, and a
# refusal of one is not a gradient's fault.
FORWARD_RULES = {"redistribute": "DT-REDIST-3", "to_local": "DT-API-11", "full_tensor": "DT-API-12"}


def run_and_judge(run_case: Any, world_size: int, args: dict[str, Any], twin: bool = False) -> None:
    """Run a chain and judge it. A failed chain runs ``simpler`` next: where that fails too,
    its failure is the one reported (the outer call is not to blame for it), unless its leaf
    could not be built (a simpler chain that cannot be made says nothing of the outer one, and
    its known failure would hide the outer one's). On a mesh whose ranks are not ascending, its
    twin on the ascending mesh of that shape runs first: a wrong gradient that only the other
    rank order shows breaks DT-MESH-8 (which the DT-MESH tests judge in full), not a rule of this
    chapter."""
    if args["mesh_ranks"] != sorted(args["mesh_ranks"]):
        run_and_judge(run_case, world_size, {**args, "mesh_ranks": sorted(args["mesh_ranks"])})
        judge_chain(run_case("grad:chain", world_size, **args), args, blame="DT-MESH-8")
        return
    result = run_case("grad:chain", world_size, **args)
    if twin and not _built(result):
        return
    try:
        judge_chain(result, args)
    except judge.FAILED:
        shorter = simpler(args)
        if shorter is not None and not _forward_failed(result, args):
            run_and_judge(run_case, world_size, shorter, twin=True)
        raise


def _built(result: Any) -> bool:
    """Whether every rank built the chain's leaf (``codec.building``)."""
    return not any(isinstance(o, Raised) and (o.facts or {}).get(BUILT_FACT) is False
                   for o in result.outcomes)  # fmt: skip


def _forward_failed(result: Any, args: dict[str, Any]) -> bool:
    """Whether a forward call raised, or gave a wrong plain tensor: not a gradient's failure,
    so no simpler chain is tried for it."""
    if _forward_call(result):
        return True
    return result.ok and _forward_mismatch(result.values(), args) is not None


def _forward_call(result: Any) -> str | None:
    """The forward call that raised on some rank (``tasks.grad.FORWARD``), if one did."""
    for outcome in result.outcomes:
        if isinstance(outcome, Raised) and (outcome.facts or {}).get(FORWARD):
            return outcome.facts[FORWARD]
    return None


def judge_chain(result: Any, args: dict[str, Any], blame: str | None = None) -> None:
    """Every rule of spec/dt-grad.md on one chain's outcomes; a wrong gradient is blamed on
    ``blame`` where given."""
    rule = blame or blamed(args)
    built = "DT-API-4" if args["start"] == "distribute" else "DT-API-7"
    judge.assert_built(result, rule="DT-GRAD-4" if args.get("leaf_grad") else built)
    call = _forward_call(result)
    if call:
        judge.fail(result.report(f"the forward call {call} raised"), FORWARD_RULES[call],
                   symptoms.of_outcomes(result.outcomes))  # fmt: skip
    values = judge.all_returned(result, rule=rule)
    context = result.replay_command()
    mesh = Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))
    calls = 2 + len(args["steps"])
    for rank, got in enumerate(values):
        judge.assert_equal(f"rank {rank}: requires_grad of the leaf, each redistribution and "
                           f"the {args['end']} result", got["requires_grad"],
                           [args["requires_grad"]] * calls, context, rule="DT-GRAD-1")  # fmt: skip
        if args["start"] == "distribute":
            judge.assert_equal(f"rank {rank}: distribute_tensor's result is a leaf",
                               got["is_leaf"], True, context, rule="DT-GRAD-1")  # fmt: skip
        if not args["requires_grad"]:
            judge.assert_equal(f"rank {rank}: the leaf's gradient without a backward pass",
                               got["grad"], None, context, rule="DT-GRAD-1")  # fmt: skip
    wrong = _forward_mismatch(values, args)
    if wrong is not None:
        # the forward calls are wrong (DT-REDIST-3 after redistributions, else DT-API-11 or
        # DT-API-12), and the gradient that follows is not judged
        rule = "DT-API-11" if args["end"] == "to_local" else "DT-API-12"
        rank, got, want = wrong
        judge.assert_tensor_exact(f"rank {rank}: what {args['end']} returned", got, want,
                                  context, rule=blame or ("DT-REDIST-3" if args["steps"]
                                                          else rule))  # fmt: skip
    if not args["requires_grad"]:
        return
    expected = dt_grad.gradient(args["shape"], args["dtype"], args["seed"],
                                args["upstream_seed"], args["backwards"])  # fmt: skip
    device = result.backend.device_for
    grads = [got["grad"] for got in values]
    value, layout = read_gradient(grads, args["shape"], args["dtype"], args["start"],
                                  args["placements"], args.get("leaf_grad"), mesh, device,
                                  context, rule)  # fmt: skip
    bound = dt_grad.tolerance(expected, layout, mesh.shape, args["backwards"])
    if not dt_ops.within(value, expected, bound):
        judge.assert_tensor_exact(f"the leaf's gradient ({format_placements(layout)})", value,
                                  expected, context, rule=rule)  # fmt: skip


def read_gradient(
    grads: list[Any],
    shape: list[int],
    dtype: str,
    start: str,
    placements: list[str],
    declared: list[str] | None,
    mesh: Mesh,
    device: Any,
    context: str,
    rule: str,
    what: str = "the leaf",
) -> tuple[Any, tuple]:
    """A leaf's gradient as every rank reported it (``tasks.grad.gradient_of``), checked for
    its layout, and read as a value: ``(value, layout)``. The layout is a DTensor gradient's own
    placements, the same on every rank and valid for its shape (DT-GRAD-2), or, for a
    ``from_local`` leaf, the declared ``grad_placements`` (default: the gradient placements of
    ``placements``, DT-GRAD-4); every rank's local tensor has its local shape, the dtype and the
    mesh's device. A rank without a gradient breaks ``rule``."""
    coords = by_rank(mesh)
    for rank, grad in enumerate(grads):
        judge.assert_equal(f"rank {rank}: {what} has a gradient after backward",
                           grad is not None, True, context, rule=rule)  # fmt: skip
    owner = "DT-GRAD-2" if start == "distribute" else "DT-GRAD-4"
    for rank, grad in enumerate(grads):
        judge.assert_equal(f"rank {rank}: {what}'s gradient is a DTensor, not a plain tensor",
                           not grad.get("plain"), True, context, rule="DT-GRAD-2")  # fmt: skip
    if start == "from_local":
        layout = parse_placements(declared) if declared is not None else \
            dt_grad.gradient_placements(parse_placements(placements))  # fmt: skip
    else:
        layout = _own_layout([grad["describe"] for grad in grads], shape, dtype, mesh, context)
    locals_ = {}
    for rank, grad in enumerate(grads):
        where = f"rank {rank}: {what}'s gradient"
        local_shape, _ = local_shape_and_offset(shape, mesh.shape, layout, coords[rank])
        judge.assert_equal(f"{where}: local shape ({format_placements(layout)})",
                           list(grad["local"].shape), list(local_shape), context,
                           rule=owner)  # fmt: skip
        judge.assert_equal(f"{where}: dtype", str(grad["local"].dtype).removeprefix("torch."),
                           dtype, context, rule=owner)  # fmt: skip
        if grad.get("device") is not None:
            judge.assert_equal(f"{where}: local device", grad["device"], device(rank).type,
                               context, rule="DT-GRAD-2")  # fmt: skip
        locals_[coords[rank]] = grad["local"].cpu()
    return logical_value(locals_, shape, mesh.shape, layout), layout


def _own_layout(facts: list[dict], shape: list[int], dtype: str, mesh: Mesh, context: str):
    """A DTensor gradient's placements: the same on every rank, valid for its shape, of its
    leaf's shape and dtype (DT-GRAD-2)."""
    for rank, describe in enumerate(facts):
        judge.assert_equal(f"rank {rank}: the gradient's shape and dtype",
                           [describe["shape"], describe["dtype"]], [list(shape), dtype],
                           context, rule="DT-GRAD-2")  # fmt: skip
        judge.assert_equal(f"rank {rank}: the gradient's placements, as rank 0's",
                           describe["placements"], facts[0]["placements"], context,
                           rule="DT-GRAD-2")  # fmt: skip
    layout = parse_placements(facts[0]["placements"])
    valid = placements_verdict(layout, len(mesh.shape), len(shape)) == VALID
    judge.assert_equal(f"the gradient's placements {facts[0]['placements']} valid",
                       valid, True, context, rule="DT-GRAD-2")  # fmt: skip
    return layout


def _forward_mismatch(values: list[Any], args: dict[str, Any]) -> tuple | None:
    """The first rank whose plain tensor from ``to_local`` or ``full_tensor`` is not the value's,
    laid out by the last layout, as ``(rank, got, want)``; ``None`` where every rank's is, or
    where the last layout holds ``P`` (whose parts the implementation chose)."""
    last = parse_placements(args["steps"][-1] if args["steps"] else args["placements"])
    if any(isinstance(p, Partial) for p in last):
        return None
    value = make_global(args["shape"], args["dtype"], args["seed"])
    coords = by_rank(Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"])))
    for rank, got in enumerate(values):
        want = value
        if args["end"] == "to_local":
            layout = normalize(last, len(args["shape"]))
            want = local_tensor(value, args["mesh_shape"], layout, coords[rank])
        if not dt_ops.exact(got["out"], want):
            return rank, got["out"], want
    return None


@pytest.mark.rules(
    "DT-GRAD-1", "DT-GRAD-2", "DT-GRAD-3", "DT-GRAD-4", "DT-GRAD-5", "DT-MESH-8", "DT-API-4",
    "DT-API-7", "DT-API-11", "DT-API-12", "DT-REDIST-3",
)  # fmt: skip
@pytest.mark.edges("grad chain")
@given(data=st.data())
def test_a_leafs_gradient_through_the_api_is_the_single_device_gradient(
    impl, available_world_sizes, run_case, data
):
    """``distribute_tensor`` or ``from_local``, redistributions, then ``to_local`` or
    ``full_tensor`` and a backward pass: every result requires grad as the leaf does, and the
    leaf's gradient, read by its layout, is what autograd gives on the full tensors."""
    judge.requires(impl, "dtensor", "dtensor_grad")
    world_size, args = data.draw(chains(impl, available_world_sizes))
    run_and_judge(run_case, world_size, args)
