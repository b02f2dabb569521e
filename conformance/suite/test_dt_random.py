"""spec/dt-random.md: random factories and random ops on DTensors, made as a training script
makes them, judged on what every correct draw has: its layout, one draw behind its replicas,
values in the distribution's support, no repeated stream, the same draw from the same seed, and
generators that stay in step; under parity, the single-device draw itself.

Every rule is judged on every example that returned, and a failure names each rule the example
broke: a known failure of one rule does not hide another rule's on the same draws."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge, strategies, symptoms
from conformance.oracle import dt_ops, dt_random
from conformance.oracle.dt_api import contiguous_stride
from conformance.oracle.layout import local_shape_and_offset, local_tensor
from conformance.oracle.mesh import by_rank
from conformance.oracle.placements import normalize, placements_verdict
from conformance.oracle.values import logical_value
from conformance.oracle.vocabulary import VALID
from conformance.vocabulary import (
    Mesh,
    Partial,
    Replicate,
    format_placements,
    parse_placements,
)
from conformance.world import Raised
from conformance.world.backends import Backend

# Each call's parameters, as its function takes them after the tensor: the defaults, and values
# that move and scale the distribution; a certain outcome for the masks (p = 0, 1).
PARAMS = {
    "rand": [[]],
    "randn": [[]],
    "rand_like": [[]],
    "randn_like": [[]],
    "uniform_": [[], [-2.0, 3.0], [0.5, 4.0]],
    "normal_": [[], [2.0, 0.5], [-1.0, 3.0]],
    "bernoulli_": [[0.5], [0.2], [0.9], [0.0], [1.0]],
    "dropout": [[0.5], [0.1], [0.8], [0.0]],
}
# Integer tensors take a Bernoulli draw; the other calls draw floating values only.
DTYPES = ["float32", "float64", "bfloat16"]


@st.composite
def draws(draw, impl: Any, world_sizes: list[int]) -> tuple[int, dict[str, Any]]:
    """A random call: a factory (where claimed) of drawn placements, or an op on a DTensor of
    drawn placements (``P`` included); a shape with 0-d, empty and uneven cases; a mesh of the
    whole world, its ranks in any order."""
    world_size = draw(st.sampled_from([*world_sizes, *(n for n in world_sizes if n > 1)]))
    mesh_shape, mesh_ranks = draw(strategies.world_meshes(world_size))
    factories = "dtensor_factories" in impl.capabilities
    calls = [c for c in dt_random.CALLS if c not in dt_random.FACTORIES or factories]
    call = draw(st.sampled_from(calls))
    shape = draw(
        st.one_of(
            strategies.shapes(min_dims=1, max_dims=3, max_side=6),
            st.lists(st.integers(40, 100), min_size=1, max_size=1),  # masks long enough to compare
            st.just([]),
        )
    )
    dtype = draw(st.sampled_from(DTYPES + ["int64"] * (call == "bernoulli_")))
    placements = draw(strategies.dtensor_placements(impl, mesh_shape, len(shape)))
    if dtype == "int64":  # an integer mean is no value (DT-REDIST-9)
        placements = ["P(sum)" if p == "P(avg)" else p for p in placements]
    args = {
        "call": call,
        "params": draw(st.sampled_from(PARAMS[call])),
        "shape": shape,
        "dtype": dtype,
        "mesh_shape": mesh_shape,
        "mesh_ranks": mesh_ranks,
        "placements": placements,
        "seed": draw(st.integers(0, 2**31 - 1)),
        "input_seed": draw(st.integers(0, 2**16)),
    }
    edges.mesh(mesh_shape, mesh_ranks, world_size)
    edges.op_input(shape, dtype, args["placements"], mesh_shape)
    edges.note(f"random: {call}")
    if dt_random.element_chance(call, args["params"], dtype) >= 1:
        edges.note("random: a certain outcome")
    _note_comparable(args)
    return world_size, args


def _note_comparable(args: dict[str, Any]) -> None:
    """The classes of what DT-RAND-4 can compare in a draw laid out as its input or factory
    is (an out-of-place call's output placements are the implementation's, so this is what the
    draw makes possible, noted before any case runs)."""
    call, params, dtype, shape = args["call"], args["params"], args["dtype"], args["shape"]
    layout = normalize(parse_placements(args["placements"]), len(shape))
    whole = [Replicate() if isinstance(p, Partial) else p for p in layout]
    parts = {
        tuple(local_shape_and_offset(shape, args["mesh_shape"], whole, c)[0])
        for c in by_rank(Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))).values()
    }
    if any(dt_random.parts_comparable(call, params, dtype, math.prod(p)) for p in parts):
        edges.note("random: parts compared")
    if dt_random.values_comparable(call, params, dtype, math.prod(shape)):
        edges.note("random: values compared")


def _refusable(args: dict[str, Any]) -> bool:
    """Whether DT-OP-7 may refuse the call: an op on a ``P`` input (DT-RAND-1)."""
    return args["call"] not in dt_random.FACTORIES and any(
        isinstance(p, Partial) for p in parse_placements(args["placements"])
    )


def judge_draw(result: Any, args: dict[str, Any], parity: bool = False) -> None:
    """Every rule of spec/dt-random.md on one random call's outcomes (DT-RAND-7 alone where
    ``parity``: the rules every draw keeps are the other test's); a failure names each rule the
    call broke."""
    judge.assert_built(result, rule="DT-API-7")
    factory = args["call"] in dt_random.FACTORIES
    layout_rule = "DT-API-16" if factory else "DT-RAND-1"
    if any(isinstance(o, Raised) for o in result.outcomes):
        every = all(isinstance(o, Raised) and "NotImplementedError" in o.types
                    for o in result.outcomes)  # fmt: skip
        if _refusable(args) and every:
            return
        rule = "DT-OP-7" if _refusable(args) else layout_rule
        judge.fail(result.report(f"{args['call']} raised"), rule,
                   symptoms.of_outcomes(result.outcomes))  # fmt: skip
    values = judge.all_returned(result, rule=layout_rule)
    judge_values(values, args, result.backend, result.replay_command(), parity)


def judge_values(
    values: list[Any], args: dict[str, Any], backend: Backend, context: str, parity: bool = False
) -> None:
    """Every rule of spec/dt-random.md on what each rank reported of one random call that
    returned on every rank (``draws.draw``'s report, or one step of ``draws.sequence``)."""
    factory = args["call"] in dt_random.FACTORIES
    layout_rule = "DT-API-16" if factory else "DT-RAND-1"
    layout = _layout(values, args, backend, context, layout_rule)
    broken: dict[str, list[str]] = {}
    mesh = Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))
    coords = by_rank(mesh)
    locals_ = {coords[rank]: got["local"] for rank, got in enumerate(values)}
    value = logical_value(locals_, args["shape"], args["mesh_shape"], layout)
    x = None if factory else dt_random.input_value(args["shape"], args["dtype"], args["input_seed"])
    if parity:
        _parity(value, values, x, layout, args, backend, broken)
        _fail(broken, args, context)
        return
    _replicas(locals_, layout, args["call"] == "dropout", broken)
    _support(value, x, layout, args, broken)
    _distinct(value, layout, args, broken)
    for rank, got in enumerate(values):
        if not dt_ops.exact(got["again"], got["local"]):
            broken.setdefault("DT-RAND-5", []).append(
                f"rank {rank}: the same seed drew {_show(got['again'])}, not {_show(got['local'])}"
            )
        if not torch.equal(got["after"], values[0]["after"]):
            broken.setdefault("DT-RAND-6", []).append(
                f"rank {rank}: a plain torch.rand(8) after the call drew "
                f"{_show(got['after'])}, rank 0 {_show(values[0]['after'])}"
            )
    if args["call"] in ("dropout", "rand_like", "randn_like"):
        _input_unchanged(values, coords, x, args, broken)
    _fail(broken, args, context)


def _fail(broken: dict[str, list[str]], args: dict[str, Any], context: str) -> None:
    """Fail once, naming every rule the call broke and the first few ways it broke each."""
    if broken:
        lines = [f"{rule}: {line}" for rule, found in broken.items() for line in found[:3]]
        judge.fail(f"{args['call']}: {'; '.join(lines)} [{context}]", tuple(broken),
                   symptoms.WRONG_VALUE)  # fmt: skip


def _layout(values: list[Any], args: dict[str, Any], backend: Backend, context: str, rule: str):
    """DT-RAND-1 (DT-API-16 for a factory): the result's metadata on every rank, its placements
    (a factory's those asked for, an in-place call's its input's), each local shape and device;
    the layout the result is read by."""
    ndim = len(args["shape"])
    asked = normalize(parse_placements(args["placements"]), ndim)
    first = values[0]["describe"]
    want = [list(args["shape"]), args["dtype"], list(contiguous_stride(args["shape"]))]
    for rank, got in enumerate(values):
        seen = got["describe"]
        judge.assert_equal(f"rank {rank}: shape, dtype and stride",
                           [seen["shape"], seen["dtype"], seen["stride"]], want, context,
                           rule=rule)  # fmt: skip
        judge.assert_equal(f"rank {rank}: placements, as rank 0's", seen["placements"],
                           first["placements"], context, rule=rule)  # fmt: skip
    layout = parse_placements(first["placements"])
    valid = placements_verdict(layout, len(args["mesh_shape"]), ndim) == VALID
    judge.assert_equal(f"the placements {first['placements']} valid", valid, True, context,
                       rule=rule)  # fmt: skip
    layout = normalize(layout, ndim)
    if args["call"] in dt_random.FACTORIES or args["call"] in dt_random.IN_PLACE:
        judge.assert_equal("placements", format_placements(layout), format_placements(asked),
                           context, rule=rule)  # fmt: skip
    if args["call"] in dt_random.IN_PLACE:
        for rank, got in enumerate(values):
            judge.assert_equal(f"rank {rank}: the call returned its DTensor",
                               got["returned_self"], True, context, rule=rule)  # fmt: skip
    coords = by_rank(Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"])))
    device = backend.device_for
    for rank, got in enumerate(values):
        want, _ = local_shape_and_offset(args["shape"], args["mesh_shape"], layout, coords[rank])
        judge.assert_equal(f"rank {rank}: local shape", list(got["local"].shape), list(want),
                           context, rule=rule)  # fmt: skip
        judge.assert_equal(f"rank {rank}: local device", got["device"], device(rank).type,
                           context, rule=rule)  # fmt: skip
    return layout


def _replicas(locals_: dict, layout: tuple, dropout: bool, broken: dict[str, list[str]]) -> None:
    """DT-RAND-2: each coordinate holds what the coordinate with ``0`` on every ``R`` and ``P``
    mesh dim holds, but zeros off coordinate 0 of an integer ``P(sum)`` dim; for ``dropout``,
    whose parts along a ``P`` dim are its input's, scaled, only ``R`` dims are compared."""
    copies = Replicate if dropout else Replicate | Partial
    for coord, local in locals_.items():
        home = _home(coord, layout, copies)
        want = locals_[home]
        if not want.is_floating_point() and any(
            p == Partial("sum") and c for c, p in zip(coord, layout, strict=True)
        ):
            want = torch.zeros_like(want)
        if not dt_ops.exact(local, want):
            broken.setdefault("DT-RAND-2", []).append(
                f"coordinate {coord} holds {_show(local)}, its replica {home} {_show(want)}"
            )


def _home(coord: tuple, layout: tuple, copies: Any) -> tuple:
    """The coordinate whose local tensor ``coord``'s copies: ``0`` on the mesh dims whose
    placement is one of ``copies``."""
    return tuple(0 if isinstance(p, copies) else c for c, p in zip(coord, layout, strict=True))


def _summed(layout: tuple, x: torch.Tensor | None, args: dict[str, Any]) -> list[int]:
    """The sizes of the mesh dims over which parts were re-summed: the result's ``P(sum)``
    dims and, for an op, its input's."""
    layouts = [layout]
    if x is not None:
        layouts.append(normalize(parse_placements(args["placements"]), len(args["shape"])))
    pairs = (zip(args["mesh_shape"], placed, strict=True) for placed in layouts)
    return [k for pair in pairs for k, p in pair if p == Partial("sum")]


def _support(value, x, layout, args, broken) -> None:
    """DT-RAND-3: the value's elements in the call's support."""
    sums = _summed(layout, x, args)
    outside = dt_random.outside_support(args["call"], args["params"], value, x, sums)
    if bool(outside.any()):
        where = outside.nonzero()[:3].tolist()
        broken.setdefault("DT-RAND-3", []).append(
            f"the value at {where} is {value[outside][:3].tolist()}, outside "
            f"{dt_random.distribution(args['call'], args['params'])}'s support"
        )


def _distinct(value, layout, args, broken) -> None:
    """DT-RAND-4: no two parts of the draw equal (where a correct draw cannot make them so but
    by a chance below 2^-40), and no value of a float64 continuous draw twice."""
    call, params, dtype = args["call"], args["params"], args["dtype"]
    whole = [Replicate() if isinstance(p, Partial) else p for p in layout]
    home = {}
    for coord in by_rank(Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))).values():
        key = _home(coord, layout, Replicate | Partial)
        home[key] = local_tensor(value, args["mesh_shape"], whole, key)
    seen: dict[tuple, tuple] = {}
    for key, part in home.items():
        if not dt_random.parts_comparable(call, params, dtype, part.numel()):
            continue
        pattern = part != 0 if call == "dropout" else part
        fingerprint = (tuple(part.shape), tuple(pattern.flatten().tolist()))
        if fingerprint in seen:
            broken.setdefault("DT-RAND-4", []).append(
                f"the parts at {seen[fingerprint]} and {key} are equal: {_show(part)}"
            )
        seen.setdefault(fingerprint, key)
    comparable = dt_random.values_comparable(call, params, dtype, value.numel())
    if comparable and value.unique().numel() != value.numel():
        broken.setdefault("DT-RAND-4", []).append(f"the value repeats elements: {_show(value)}")


def _input_unchanged(values, coords, x, args, broken) -> None:
    """DT-OP-8: an out-of-place call left its input's local tensors as they were."""
    placements = parse_placements(args["placements"])
    for rank, got in enumerate(values):
        want = dt_ops.input_local(x, args["mesh_shape"], placements, coords[rank],
                                  args["input_seed"])  # fmt: skip
        if not dt_ops.exact(got["input_local"], want):
            broken.setdefault("DT-OP-8", []).append(
                f"rank {rank}: the input's local tensor became {_show(got['input_local'])}"
            )


def _parity(value, values, x, layout, args, backend, broken) -> None:
    """DT-RAND-7: the single-device call's value (within DT-REDIST-8 where ``P(sum)`` holds it)
    and the plain draw that follows."""
    device = backend.device_for(0)
    expected, after = dt_random.single_device(args["call"], args["params"], args["shape"],
                                              args["dtype"], args["seed"], x,
                                              torch.device(device.type))  # fmt: skip
    bound = dt_random.parity_bound(expected, _summed(layout, x, args),
                                   scaled=args["call"] == "dropout")  # fmt: skip
    if not dt_ops.within(value, expected, bound):
        broken.setdefault("DT-RAND-7", []).append(
            f"the value is {_show(value)}, the single-device draw {_show(expected)}"
        )
    for rank, got in enumerate(values):
        if not torch.equal(got["after"], after):
            broken.setdefault("DT-RAND-7", []).append(
                f"rank {rank}: the plain draw after is {_show(got['after'])}, after the "
                f"single-device call {_show(after)}"
            )


def _show(t: torch.Tensor) -> str:
    return str(t.flatten()[:6].tolist())


@pytest.mark.rules(
    "DT-RAND-1", "DT-RAND-2", "DT-RAND-3", "DT-RAND-4", "DT-RAND-5", "DT-RAND-6", "DT-API-7",
    "DT-API-16", "DT-OP-7", "DT-OP-8",
)  # fmt: skip
@pytest.mark.edges("random call", "random layout")
@given(data=st.data())
def test_a_random_call_is_one_draw_laid_out_by_its_placements(
    impl, available_world_sizes, run_case, data
):
    """A random factory or op after ``torch.manual_seed`` on every rank: a DTensor of its
    layout, replicas alike, values in the support, parts not repeated, the same draw again from
    the same seed, every rank's generator in step after it."""
    judge.requires(impl, "dtensor", "dtensor_random")
    world_size, args = data.draw(draws(impl, available_world_sizes))
    judge_draw(run_case("draws:draw", world_size, **args), args)


@pytest.mark.rules("DT-RAND-7", "DT-API-7", "DT-API-16", "DT-RAND-1", "DT-OP-7")
@pytest.mark.edges("random call", "random layout")
@given(data=st.data())
def test_a_random_call_under_parity_is_the_single_device_draw(
    impl, available_world_sizes, run_case, data
):
    """With parity claimed: the value is the single-device call's after the same seed, and the
    generator is left where that call leaves it."""
    judge.requires(impl, "dtensor", "dtensor_random", "dtensor_random_parity")
    world_size, args = data.draw(draws(impl, available_world_sizes))
    judge_draw(run_case("draws:draw", world_size, **args), args, parity=True)


@st.composite
def sequences(draw, impl: Any, world_sizes: list[int]) -> tuple[int, dict[str, Any]]:
    """Random calls one after another on one world, as a training step makes them: first a
    draw sharded unevenly (its ranks' local tensors differ in size), then replicated, sharded
    and partial draws in a drawn order, a reseed before some of them and a dropout between
    some. Each step is a call ``draws`` could draw alone."""
    world_size = draw(st.sampled_from([n for n in world_sizes if n > 1] or world_sizes))
    mesh_shape, mesh_ranks = draw(strategies.world_meshes(world_size))
    wide = [m for m, k in enumerate(mesh_shape) if k > 1]
    factories = "dtensor_factories" in impl.capabilities
    calls = [c for c in dt_random.CALLS if c not in dt_random.FACTORIES or factories]

    def step(kind: str) -> dict[str, Any]:
        call = draw(st.sampled_from(calls if kind != "dropout" else ["dropout"]))
        dtype = draw(st.sampled_from(DTYPES + ["int64"] * (call == "bernoulli_")))
        placements = ["R"] * len(mesh_shape)
        shape = [draw(st.integers(1, 6)), draw(st.integers(1, 6))]
        if kind in ("uneven", "S") and wide:
            m = draw(st.sampled_from(wide))
            if kind == "uneven":  # a length the mesh dim does not divide
                k = mesh_shape[m]
                shape[0] = k * draw(st.integers(0, 3)) + draw(st.integers(1, k - 1))
            placements[m] = "S(0)" if kind == "uneven" else f"S({draw(st.integers(-2, 1))})"
        elif kind == "P" and wide:
            kinds = ["sum", "max", "min"] + ["avg"] * (
                dtype != "int64" and all(k in strategies.POWERS_OF_TWO for k in mesh_shape)
            )
            kinds = [k for k in kinds if f"partial:{k}" in impl.capabilities]
            if kinds:
                placements[draw(st.sampled_from(wide))] = f"P({draw(st.sampled_from(kinds))})"
        return {
            "call": call,
            "params": draw(st.sampled_from(PARAMS[call])),
            "shape": shape,
            "dtype": dtype,
            "placements": placements,
            "input_seed": draw(st.integers(0, 2**16)),
        }

    kinds = ["uneven", *draw(st.permutations(["R", "S", "P"]))]
    steps = []
    for kind in kinds:
        if steps and draw(st.integers(0, 2)) == 0:
            steps.append(step("dropout"))
        made = step(kind)
        if steps and draw(st.integers(0, 2)) == 0:
            made["reseed"] = draw(st.integers(0, 2**31 - 1))
        steps.append(made)
    args = {"mesh_shape": mesh_shape, "mesh_ranks": mesh_ranks,
            "seed": draw(st.integers(0, 2**31 - 1)), "steps": steps}  # fmt: skip
    _note_sequence(args)
    return world_size, args


def _note_sequence(args: dict[str, Any]) -> None:
    """The classes of a sequence: which layouts follow an uneven draw, reseeds and dropouts
    between draws."""
    mesh_shape = args["mesh_shape"]
    coords = by_rank(Mesh(tuple(mesh_shape), tuple(args["mesh_ranks"]))).values()
    labels, uneven = set(), False
    for i, step in enumerate(args["steps"]):
        layout = normalize(parse_placements(step["placements"]), len(step["shape"]))
        chunks = {tuple(local_shape_and_offset(step["shape"], mesh_shape, layout, c)[0])
                  for c in coords}  # fmt: skip
        wide = [p for p, k in zip(layout, mesh_shape, strict=True) if k > 1]
        if uneven:
            if all(p == Replicate() for p in wide):
                labels.add("random sequence: a replicated draw after an uneven one")
            elif any(isinstance(p, Partial) for p in wide):
                labels.add("random sequence: a partial draw after an uneven one")
            else:
                labels.add("random sequence: a sharded draw after an uneven one")
        uneven = uneven or len(chunks) > 1
        if i and step.get("reseed") is not None:
            labels.add("random sequence: a reseed between draws")
        if i and step["call"] == "dropout":
            labels.add("random sequence: dropout between draws")
    edges.note(*sorted(labels))


@pytest.mark.rules(
    "DT-RAND-1", "DT-RAND-2", "DT-RAND-3", "DT-RAND-4", "DT-RAND-5", "DT-RAND-6", "DT-API-7",
    "DT-API-16", "DT-OP-7", "DT-OP-8",
)  # fmt: skip
@pytest.mark.edges("random sequence")
@given(data=st.data())
def test_random_calls_in_sequence_each_hold_one_draw_of_their_layout(
    impl, available_world_sizes, run_case, data
):
    """A sequence of random calls on one world (an uneven draw first, then replicated, sharded
    and partial ones, reseeds and dropouts between): each call is judged as a call alone is,
    its generators in step after it (DT-RAND-6), and the whole sequence again from the same
    seed gives every call's draw again (DT-RAND-5). A generator that an uneven draw moved
    differently on different ranks shows in the draws after it."""
    judge.requires(impl, "dtensor", "dtensor_random")
    world_size, args = data.draw(sequences(impl, available_world_sizes))
    result = run_case("draws:sequence", world_size, **args)
    judge.assert_built(result, rule="DT-API-7")
    values = judge.all_returned(result, rule="DT-RAND-1")
    context = result.replay_command()
    for i, step in enumerate(args["steps"]):
        got = [v[i] for v in values]
        step_args = {**step, "mesh_shape": args["mesh_shape"], "mesh_ranks": args["mesh_ranks"]}
        where = f"step {i} of the sequence ({step['call']}); {context}"
        raised = [g.get("raised") for g in got]
        if any(raised):
            refused = all(t == "NotImplementedError" for t in raised)
            if refused and _refusable(step_args):
                continue  # DT-OP-7 allows it; the next steps run on as after any refusal
            factory = step["call"] in dt_random.FACTORIES
            rule = "DT-OP-7" if _refusable(step_args) else "DT-API-16" if factory else "DT-RAND-1"
            shown = frozenset(symptoms.Behaviour("raises", t, r) if t
                              else symptoms.Behaviour("returns", rank=r)
                              for r, t in enumerate(raised))  # fmt: skip
            judge.fail(f"step {i} ({step['call']}) raised: {raised} [{where}]", rule, shown)
        judge_values(got, step_args, result.backend, where)
