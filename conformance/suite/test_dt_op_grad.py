"""spec/dt-grad.md on operators (DT-GRAD-6 to DT-GRAD-9): a backward pass through every
differentiable op of the core list, its samples' floating arguments leaves that require grad,
judged against ``torch.autograd`` on the single-device program."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge, symptoms
from conformance.ops import catalogue
from conformance.oracle import dt_grad, dt_ops, grad_composite
from conformance.suite import test_dt_ops
from conformance.suite.test_dt_grad import read_gradient
from conformance.suite.test_dt_ops import judge_op_case, op_case, op_cases
from conformance.tasks.ops import BACKWARD, hung_in
from conformance.vocabulary import Mesh, format_placements, parse_placements
from conformance.world import Died, Hung, Raised, Returned, one_world

__all__ = ["op_case"]  # the fixture, which this module's tests ask for by name


@st.composite
def grad_cases(draw, impl: Any, op: str, world_sizes: list[int]) -> tuple[int, dict[str, Any]]:
    """A gradient sample of ``op`` laid out as ``op_cases`` draws it, each floating argument a
    leaf: of ``distribute_tensor`` (not for a partial layout, which it does not make) or of
    ``from_local``; the outputs the backward pass starts from, and the seed of their
    gradients."""
    world_size, case = draw(op_cases(impl, op, world_sizes, "grad"))
    sample = catalogue.samples(op, case["dtype"])[case["sample"]]
    starts = []
    for tensor, texts in zip(sample.tensors(), case["placements"], strict=True):
        partial = any(text.startswith("P(") for text in texts)
        kinds = ["from_local"] + ["distribute"] * (not partial)
        starts.append(draw(st.sampled_from(kinds)) if tensor.is_floating_point() else None)
    seed = draw(st.integers(0, 2**16))
    run = catalogue.runner(op, sample)
    with catalogue.quietly():
        every, _ = dt_grad.op_gradients(run, sample.tensors(), seed)
    # a backward pass from some outputs, the others unused (their gradient None), as training
    # code that keeps one chunk of a split or the values of a topk does; some gradients zeros
    among = every
    if len(every) > 1 and draw(st.booleans()):
        among = sorted(draw(st.sets(st.sampled_from(every), min_size=1, max_size=len(every) - 1)))
    zeros = sorted(draw(st.sets(st.sampled_from(range(len(among))), max_size=len(among) - 1))
                   if draw(st.integers(0, 3)) == 0 else set())  # fmt: skip
    with catalogue.quietly():
        chosen, grads = dt_grad.op_gradients(run, sample.tensors(), seed, among, zeros)
    case |= {"starts": starts, "backward": chosen, "upstream_seed": seed}
    if zeros:
        case["upstream_zeros"] = zeros
    _note(starts, case["placements"], every, chosen, zeros, grads)
    return world_size, case


def _note(starts: list, placements: list, every: list[int], chosen: list[int],
          zeros: list[int], grads: list) -> None:  # fmt: skip
    labels = [f"op grad: a {start} leaf" for start in set(starts) if start]
    if any(s == "from_local" and any(t.startswith("P(") for t in texts)
           for s, texts in zip(starts, placements, strict=True)):  # fmt: skip
        labels.append("op grad: a partial leaf")
    if any(s and g is None for s, g in zip(starts, grads, strict=True)):
        labels.append("op grad: a leaf the program gives no gradient")
    if len(chosen) > 1:
        labels.append("op grad: several outputs")
    if len(chosen) < len(every):
        labels.append("op grad: some outputs unused")
    if zeros:
        labels.append("op grad: a gradient of zeros")
    edges.note(*labels)


def run_and_judge(op_case, world_size: int, args: dict[str, Any]) -> Any:
    """Run a gradient case and judge it; its result. On a mesh whose ranks are not ascending,
    its twin on the ascending mesh of that shape runs first: a wrong gradient that only the
    other rank order shows breaks DT-MESH-8, not the op's gradient rule."""
    ascending = args["mesh_ranks"] == sorted(args["mesh_ranks"])
    if not ascending:
        twin = {**args, "mesh_ranks": sorted(args["mesh_ranks"])}
        run_one(op_case, world_size, twin)
    return run_one(op_case, world_size, args, None if ascending else "DT-MESH-8")


def run_one(op_case, world_size: int, args: dict[str, Any], blame: str | None = None) -> Any:
    """One gradient case, judged; its result. A rank that hung or died in the backward pass
    breaks DT-GRAD-7 (``stuck_in_backward``); one that hung in the forward call is judged as
    the forward call is (spec/dt-ops.md)."""
    result = op_case(world_size, **args)
    why = stuck_in_backward(op_case, world_size, args, result.outcomes)
    if why:
        judge.fail(result.report(why), "DT-GRAD-7", symptoms.of_outcomes(result.outcomes))
    judge_grad_case(result, args, blame)
    return result


def stuck_in_backward(op_case, world_size: int, args: dict[str, Any], outcomes: Any) -> str:
    """Why the backward pass is where a case hung or died, or ``""`` where it is not. Each rank
    that did not return says where it was, as far as it can (``_where``): where one was in the
    forward call, the forward call did not return on every rank, whatever the others did next;
    where every rank that hung or died was in the backward pass, the backward pass hung. Where
    a rank cannot say (it exited or was killed without a stack, or its stack was cut short
    before the task's frames), the same case without its backward pass runs next: where that
    returns on every rank, the backward pass hung or died. The stacks come first because a
    forward call that computes for about the case timeout may return in time when run again,
    and the rerun alone would blame its hang on the backward pass. (A stack says where the time
    ran out, not which part used it: a forward call that used most of the timeout leaves its
    backward pass to cross it.)"""
    stuck = [o for o in outcomes if isinstance(o, Hung | Died)]
    if not stuck:
        return ""
    places = [_where(o) for o in outcomes if not isinstance(o, Returned)]
    if "forward" in places:
        return ""
    if all(place == "backward" for place in places):
        return "every rank that hung or died was in the backward pass (its stack)"
    if op_case(world_size, **{**args, "backward": []}).ok:
        return "the case returns on every rank without its backward pass"
    return ""


def _where(outcome: Any) -> str:
    """Where a rank that did not return was: ``"backward"``, ``"forward"`` or ``""`` (it cannot
    say). A raise says by its fact; a hung rank by its stack; a rank that died of a signal by the
    stacks faulthandler wrote to its log."""
    if isinstance(outcome, Raised):
        return "backward" if (outcome.facts or {}).get(BACKWARD) else "forward"
    return hung_in(outcome.stack if isinstance(outcome, Hung) else outcome.log_tail)


def judge_grad_case(result: Any, args: dict[str, Any], blame: str | None = None) -> None:
    """The forward call by every rule of spec/dt-ops.md, then DT-GRAD-6 to 9 on the backward
    pass: each output requires grad as the single-device one does; each leaf's gradient has its
    layout (DT-GRAD-2, DT-GRAD-4) and, for an op of the linear class, an elementwise one
    (DT-GRAD-8) or a reduction of DT-GRAD-9, its value within the bound. A backward
    pass may refuse as the forward may (DT-OP-7): ``NotImplementedError`` on every rank."""
    backward = [o for o in result.outcomes if isinstance(o, Raised) and
                (o.facts or {}).get(BACKWARD)]  # fmt: skip
    if backward:
        if len(backward) == len(result.outcomes) and all(
            o.is_a("NotImplementedError") for o in backward
        ):
            return
        judge.fail(result.report("the backward pass raised"), "DT-GRAD-7",
                   symptoms.of_outcomes(result.outcomes))  # fmt: skip
    judge_op_case(result, args, blame)
    if not result.ok:  # an allowed refusal of the forward call, which judge_op_case passed
        return
    values = result.values()
    context = result.replay_command()
    sample = catalogue.samples(args["op"], args["dtype"])[args["sample"]]
    sample = sample.with_tensors([t.contiguous() for t in sample.tensors()])
    run = catalogue.runner(args["op"], sample)
    zeros = args.get("upstream_zeros", [])
    with catalogue.quietly():
        chosen, expected = dt_grad.op_gradients(run, sample.tensors(), args["upstream_seed"],
                                                args["backward"], zeros)  # fmt: skip
        outputs = run(sample.tensors())
    with catalogue.quietly():  # every output that requires grad does, used or not
        every = dt_grad.differentiated(run([t.detach().clone().requires_grad_(
            t.is_floating_point()) for t in sample.tensors()]))  # fmt: skip
    wanted = [j in every if isinstance(y, torch.Tensor) else None for j, y in enumerate(outputs)]
    for rank, got in enumerate(values):
        judge.assert_equal(f"rank {rank}: which outputs require grad",
                           [bool(f) if f is not None else None for f in
                            got["output_requires_grad"]], wanted, context,
                           rule="DT-GRAD-6")  # fmt: skip
    bounds = None
    kind = catalogue.gradient_class(args["op"])
    if kind == "composite":
        with catalogue.quietly():
            (h,) = dt_grad.upstream([outputs[0]], args["upstream_seed"], zeros)
        bounds = grad_composite.bounds(args["op"], sample.args, sample.kwargs, outputs[0], h)
    elif kind:
        with catalogue.quietly():
            bounds = dt_grad.op_gradient_bound(
                run, sample.tensors(), chosen, args["upstream_seed"], args["mesh_shape"],
                catalogue.gradient_magnitudes(args["op"], sample), zeros,
            )  # fmt: skip
    mesh = Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))
    device = result.backend.device_for
    tensors = sample.tensors()
    for i, start in enumerate(args["starts"]):
        if start is None:
            continue
        grads = [got["grads"][i] for got in values]
        what = f"argument {i} ({start}, {format_placements(args['placements'][i])})"
        if expected[i] is None:
            for rank, grad in enumerate(grads):
                zero = grad is None or not bool(grad["local"].ne(0).any())
                judge.assert_equal(f"rank {rank}: {what} has no gradient or a zero one",
                                   zero, True, context, rule="DT-GRAD-7")  # fmt: skip
            continue
        rule = blame or "DT-GRAD-7"
        value, layout = read_gradient(grads, list(tensors[i].shape), args["dtype"], start,
                                      args["placements"][i], None, mesh, device, context,
                                      rule, what)  # fmt: skip
        if (
            bounds is not None
            and bounds[i] is not None
            and not dt_ops.within(value, expected[i], bounds[i])
        ):
            own = {"kernel": "DT-GRAD-8", "composite": "DT-GRAD-9"}.get(kind)
            judge.assert_tensor_exact(f"{what}: its gradient ({format_placements(layout)})",
                                      value, expected[i], context,
                                      rule=own if own and blame is None else rule)  # fmt: skip


@pytest.mark.rules(
    "DT-GRAD-6", "DT-GRAD-7", "DT-GRAD-8", "DT-GRAD-9", "DT-GRAD-2", "DT-GRAD-4", "DT-OP-1",
    "DT-OP-2", "DT-OP-3", "DT-OP-4", "DT-OP-5", "DT-OP-6", "DT-OP-7", "DT-OP-8", "DT-OP-10",
    "DT-MESH-8", "DT-REDIST-3", "DT-REDIST-4",
)  # fmt: skip
@pytest.mark.volume(1 / 6)
@pytest.mark.per_op(core=catalogue.grad_core_ops)
@pytest.mark.edges("op grad")
@given(data=st.data())
def test_an_ops_gradient_is_the_single_device_gradient(
    impl, available_world_sizes, op_case, op, data
):
    """One test per differentiable op, as for its values: a sample, its floating arguments
    leaves (``distribute_tensor`` or ``from_local``, partial layouts included), one backward
    pass from the outputs through ``full_tensor``; each leaf's gradient, read by its layout, is
    the single-device gradient within DT-GRAD-7's bound (ops of the linear class), and every
    output requires grad as on one device."""
    judge.requires(impl, "dtensor", "dtensor_ops", "dtensor_grad")
    if op in getattr(impl, "unclaimed_ops", ()):
        judge.requires(impl, f"op:{op}")
    if not catalogue.known(op):
        pytest.skip(f"{op}: not an op of the OpInfo database of torch {torch.__version__}")
    if not any(catalogue.grad_samples(op, d) for d in catalogue.dtypes(op)):
        pytest.skip(f"{op}: no sample a backward pass runs through in torch {torch.__version__}")
    world_size, args = data.draw(grad_cases(impl, op, available_world_sizes))
    run_and_judge(op_case, world_size, args)


def optimizer_update(step: dict[str, Any]) -> dict[str, Any] | None:
    """The in-place update an optimizer makes of a gradient case's first leaf ``p``:
    ``p.add_(g, alpha=...)``, the in-place variant of ``add`` on one of its samples of two
    tensors of ``p``'s shape and dtype, ``p`` laid out as the leaf and ``g`` as its gradient
    (DT-GRAD-2); ``None`` where ``add`` has no such sample."""
    sample = catalogue.samples(step["op"], step["dtype"])[step["sample"]]
    leaves = [i for i, start in enumerate(step["starts"]) if start]
    if not leaves:
        return None
    p = sample.tensors()[leaves[0]]
    for index in catalogue.in_place_samples("add", step["dtype"]):
        tensors = catalogue.samples("add", step["dtype"])[index].tensors()
        if len(tensors) == 2 and all(t.shape == p.shape for t in tensors):
            texts = step["placements"][leaves[0]]
            grad = format_placements(dt_grad.gradient_placements(parse_placements(texts)))
            return {
                "op": "add", "dtype": step["dtype"], "sample": index, "in_place": True,
                "mesh_shape": step["mesh_shape"], "mesh_ranks": step["mesh_ranks"],
                "placements": [texts, grad], "seed": step["seed"],
            }  # fmt: skip
    return None


@pytest.mark.rules(
    "DT-OP-9", "DT-OP-11", "DT-GRAD-6", "DT-GRAD-7", "DT-GRAD-8", "DT-GRAD-9", "DT-GRAD-2",
    "DT-GRAD-4", "DT-OP-1", "DT-OP-2", "DT-OP-3", "DT-OP-4", "DT-OP-5", "DT-OP-6", "DT-OP-7",
    "DT-OP-8", "DT-OP-10", "DT-MESH-8", "DT-REDIST-3", "DT-REDIST-4",
)  # fmt: skip
@pytest.mark.edges("training step")
@given(data=st.data())
def test_a_training_steps_calls_each_give_what_they_give_alone(
    impl, available_world_sizes, op_case, data
):
    """The calls of a training step on one world: an op's forward and backward pass (a
    gradient case), an optimizer's in-place update of its first leaf (``optimizer_update``),
    then the forward and backward pass again. Each call is judged alone, and the repeat gives
    what the first gave, outputs and gradients alike, whatever the update left in any cache
    (DT-OP-9)."""
    judge.requires(impl, "dtensor", "dtensor_ops", "dtensor_grad")
    unclaimed = getattr(impl, "unclaimed_ops", ())
    op = data.draw(st.sampled_from([o for o in catalogue.grad_ops() if o not in unclaimed]))
    world_size, step = data.draw(grad_cases(impl, op, available_world_sizes))
    update = optimizer_update(step)
    if update is not None:
        edges.note("op grad: an optimizer update between two steps")
    seen = []
    with one_world():
        for args in (step, update, step):
            if args is None:
                continue
            if args is update:
                test_dt_ops.run_and_judge(op_case, world_size, args)
                continue
            result = run_and_judge(op_case, world_size, args)
            seen.append(_repeatable(result))
    judge.assert_equal("outputs and gradients of the first step, and of the same step after "
                       "the update", seen[1], seen[0], result.replay_command(),
                       rule="DT-OP-9")  # fmt: skip


def _repeatable(result: Any) -> Any:
    """What a gradient case gave, as comparable data: the refusal's types, or rank 0's outputs
    and gradients, bit for bit."""
    if not result.ok:
        return sorted({o.type for o in result.outcomes if isinstance(o, Raised)})
    got = result.values()[0]
    outputs = [test_dt_ops.bits(o.get("full")) for o in got["outputs"]]
    grads = [None if g is None else test_dt_ops.bits(g.get("local")) for g in got["grads"]]
    return outputs, grads
