"""spec/dt-ops.md: every op of the catalogue's core list, on OpInfo's own sample inputs laid out
in drawn placements over drawn meshes, judged against the single-device result."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils import _pytree as pytree

from conformance import edges, judge, symptoms
from conformance.ops import anatomy, cases, catalogue
from conformance.ops.cases import input_placements, op_cases
from conformance.oracle import composite_bounds, dt_ops
from conformance.oracle.layout import local_shape_and_offset
from conformance.oracle.mesh import by_rank
from conformance.oracle.placements import placements_verdict
from conformance.oracle.vocabulary import VALID
from conformance.tasks.ops import OUTPUT_READ
from conformance.vocabulary import Mesh, parse_placements
from conformance.world import Case, Raised, one_world
from conformance.world.harness import HarnessError
from conformance.world.ledger import LEDGER

# The core list (the default of --ops): the ops of a transformer training step and their
# neighbours, named without importing OpInfo (seconds); an op the installed release's OpInfo
# lacks is skipped when its test runs.
CORE = list(catalogue.CORE_OPS)


def _single_device(args: dict[str, Any]) -> tuple[catalogue.Sample, list[Any]]:
    """The sample the case calls (its numbers in place), with contiguous tensors (the DTensor
    inputs' global strides), and the leaves of the op's result on it; in place, its first
    argument after the call."""
    sample = catalogue.case_sample(args)
    sample = sample.with_tensors([t.contiguous() for t in sample.tensors()])
    if args.get("in_place"):
        return sample, [catalogue.call_in_place(args["op"], sample)]
    if args.get("out") is not None:
        return sample, [catalogue.call_out(args["op"], sample)]
    return sample, pytree.tree_leaves(catalogue.call(args["op"], sample))


# What each check of an out-of-place call enforces; every check of the tensor an in-place call
# writes is DT-OP-11's, of an out= call's out tensor DT-OP-13's.
OUT_OF_PLACE = {"value": None, "metadata": "DT-OP-4", "stride": "DT-OP-5", "layout": "DT-OP-6"}
IN_PLACE = dict.fromkeys(OUT_OF_PLACE, "DT-OP-11")
OUT = dict.fromkeys(OUT_OF_PLACE, "DT-OP-13")


def _magnitude(op: str, sample: catalogue.Sample) -> torch.Tensor:
    """DT-OP-3's ``m``: the op on the absolute values of its tensors, float arguments and
    ``alpha``/``beta`` scales, in float64."""

    def absolute(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x.abs().double() if x.is_floating_point() else x
        return abs(x) if isinstance(x, float) else x

    kwargs = {k: abs(v) if k in ("alpha", "beta") else v for k, v in sample.kwargs.items()}
    scaled = catalogue.Sample(sample.args, kwargs)
    (magnitude,) = pytree.tree_leaves(catalogue.call(op, scaled.with_tensors(
        [absolute(t) for t in scaled.tensors()])))  # fmt: skip
    return magnitude


def _partial_magnitude(op: str, sample: catalogue.Sample) -> torch.Tensor:
    """DT-OP-2's ``m`` for an elementwise op whose inputs may be combined part by part:
    ``Σ_k |∂y/∂x_k|·|x_k|`` over its floating tensors, in float64 (each output element reads one
    element of each input, so a forward derivative along ``|x_k|`` alone gives that term: for
    ``sub``, ``|x| + |alpha|·|y|`` where the op on absolute values would subtract)."""
    tensors = [t.double() if t.is_floating_point() else t for t in sample.tensors()]
    floating = [i for i, t in enumerate(tensors) if t.is_floating_point()]
    run = catalogue.runner(op, sample)

    def first_output(*xs: torch.Tensor) -> torch.Tensor:
        args = list(tensors)
        for i, x in zip(floating, xs, strict=True):
            args[i] = x
        return run(args)[0]

    total = torch.zeros((), dtype=torch.float64)  # no floating input: nothing to combine
    for i in floating:
        tangents = [tensors[j].abs() if j == i else torch.zeros_like(tensors[j]) for j in floating]
        with catalogue.quietly():
            _, along = torch.func.jvp(first_output, tuple(tensors[j] for j in floating),
                                      tuple(tangents))  # fmt: skip
        total = total + along.abs()
    return total


def _terms(op: str, sample: catalogue.Sample, expected: torch.Tensor) -> int:
    """DT-OP-3's ``n``: the elements each output element sums (``sum``, ``mean``), or the
    longest last dim of the operands plus one for a bias (the matrix products)."""
    tensors = sample.tensors()
    if op in ("sum", "mean"):
        return tensors[0].numel() // max(1, expected.numel())
    return max(t.shape[-1] for t in tensors if t.dim()) + 1


def _judge_value(op, sample, got, expected, context, blame: str | None, parts: int = 1) -> None:
    """DT-OP-1 to 3 and 10 by the op's class; a wrong value is blamed on ``blame`` where
    given. An op of no class has no value rule (random, uninitialised or unbounded values).
    ``parts``: the most parts a partial input of the call holds, which a linear elementwise op
    may combine itself (DT-OP-2)."""
    kind = catalogue.value_class(op)
    if kind is None:
        return
    if kind == "exact" or not expected.is_floating_point():
        if not dt_ops.exact(got, expected):
            judge.assert_tensor_exact("full_tensor()", got, expected, context,
                                      rule=blame or "DT-OP-1")  # fmt: skip
        return
    free = None
    if kind == "elementwise":
        rule, bound = "DT-OP-2", dt_ops.elementwise_bound(expected)
        if parts > 1:
            bound = bound + dt_ops.sums_bound(expected, _partial_magnitude(op, sample), parts)
    elif kind == "composite":
        rule = "DT-OP-10"
        with catalogue.quietly():
            bound = composite_bounds.bound(op, sample.args, sample.kwargs, expected)
        free = bound.isinf()
    else:
        magnitude = _magnitude(op, sample)
        rule = "DT-OP-3"
        bound = dt_ops.sums_bound(expected, magnitude, _terms(op, sample, expected))
    if not dt_ops.within(got, expected, bound, free):
        judge.assert_tensor_exact("full_tensor()", got, expected, context, rule=blame or rule)


def _returned_or_refused(result) -> list[Any] | None:
    """DT-OP-7: the outcomes of a call, or ``None`` for an allowed refusal (NotImplementedError
    on every rank)."""
    outcomes = result.outcomes
    if all(isinstance(o, Raised) and o.is_a("NotImplementedError") for o in outcomes):
        return None
    return judge.all_returned(result, rule="DT-OP-7")


def _judge_inputs(args, values, context, blame: str | None) -> None:
    """What the implementation takes each input to be, its ``full_tensor()``, is the sample's
    tensor: otherwise the layout the suite built was read wrong (a shard or replicate
    transition, DT-REDIST-3, or a reduction of ``P``, DT-REDIST-4), and the op is not to blame
    for what follows. A Python number is passed as it is."""
    sample = catalogue.samples(args["op"], args["dtype"])[args["sample"]]
    given = catalogue.arguments(sample, args.get("scalars"))
    for i, (tensor, texts) in enumerate(zip(given, args["placements"], strict=True)):
        if not isinstance(tensor, torch.Tensor):
            continue
        rule = "DT-REDIST-4" if any(t.startswith("P(") for t in texts) else "DT-REDIST-3"
        for rank, got in enumerate(values):
            if not dt_ops.exact(got["inputs_full"][i], tensor):
                judge.assert_tensor_exact(f"rank {rank}: input {i} {texts}: full_tensor()",
                                          got["inputs_full"][i], tensor, context,
                                          rule=blame or rule)  # fmt: skip


# Importing OpInfo on a rank takes seconds, more than a case's timeout on a busy machine: every
# world does it first, in a case of its own (a no-op once done).
WARM = "conformance.tasks.ops:warm"
WARM_TIMEOUT_S = 300.0


@pytest.fixture
def op_case(world_pool, run_case):
    """``run_case("ops:apply", ...)`` on a world that has imported OpInfo; the driver imports it
    here, before the test changes its Hypothesis settings (OpInfo registers profiles)."""
    catalogue.load()
    warmed: set[tuple[int, int]] = set()

    def run(world_size: int, **args: Any) -> Any:
        world = world_pool.get(world_size)
        # A local world's ranks, once started, keep what they imported: its start count says
        # whether these are the processes that were warmed (a fault replaces them).
        started = getattr(world, "starts", None)
        if not (getattr(world, "running", False) and (id(world), started) in warmed):
            done = world.run(Case(WARM), timeout_s=WARM_TIMEOUT_S)
            if not done.ok:
                raise HarnessError(done.report("the ranks could not import OpInfo"))
            if started is not None:
                warmed.add((id(world), world.starts))
        return run_case("ops:apply", world_size, **args)

    return run


def run_and_judge(
    op_case, world_size: int, args: dict[str, Any], must_return: tuple[str, str] | None = None
) -> Any:
    """Run an op case and judge it; ``must_return``, ``(rule, why)``: a case that may not
    refuse. On a mesh whose ranks are not ascending, its twin on the ascending mesh of that shape
    runs first: a failure there is the op's own, and a wrong value that only the other rank
    order shows breaks DT-MESH-8 (which the DT-MESH tests judge in full), not the op's value
    rule."""
    ascending = args["mesh_ranks"] == sorted(args["mesh_ranks"])
    if not ascending:
        twin = {**args, "mesh_ranks": sorted(args["mesh_ranks"])}
        judge_op_case(op_case(world_size, **twin), twin)
    result = op_case(world_size, **args)
    if must_return is not None and not result.ok:
        rule, why = must_return
        judge.fail(result.report(why), rule, symptoms.of_outcomes(result.outcomes))
    judge_op_case(result, args, blame=None if ascending else "DT-MESH-8")
    values = _values_every_rank_holds(args)
    if values is not None and _returned_or_refused(result) is None:
        twin = {**args, **values}
        if op_case(world_size, **twin).ok:
            judge.fail(result.report("a Python number or a 0-d plain tensor is a value every rank "
                                     "holds: the call with it as an R DTensor returned "
                                     f"({twin['placements']}), so this one must"), "DT-OP-12",
                       symptoms.of_outcomes(result.outcomes))  # fmt: skip
    return result


def _values_every_rank_holds(args: dict[str, Any]) -> dict[str, Any] | None:
    """Where a case holds Python numbers or 0-d plain tensors (not a mixing case's other mesh),
    the changes that make each a 0-d ``R`` DTensor of the mesh instead; ``None`` where it holds
    none. A number the call reads as a dim or an index (``anatomy.reads_as_a_value``) stays."""
    n = len(args["placements"])
    scalars = list(args.get("scalars") or [None] * n)
    homes = list(args.get("homes") or ["mesh"] * n)
    placements = list(args["placements"])
    changed = False
    tensors = catalogue.samples(args["op"], args["dtype"])[args["sample"]].tensors()
    variant = (
        "in_place" if args.get("in_place") else "out" if args.get("out") is not None else "plain"
    )
    for i in range(n):
        number = scalars[i] in ("int", "float", "bool") and anatomy.reads_as_a_value(
            args["op"], args["dtype"], args["sample"], variant, i, scalars[i]
        )
        plain = homes[i] == "plain" and (scalars[i] == "0-d" or not tensors[i].dim())
        if number or plain:
            scalars[i] = "0-d" if number else scalars[i]
            homes[i] = "mesh"
            placements[i] = ["R"] * len(args["mesh_shape"])
            changed = True
    if not changed:
        return None
    return {"scalars": scalars, "homes": homes, "placements": placements}


def judge_op_case(result, args: dict[str, Any], blame: str | None = None) -> None:
    """Every rule of spec/dt-ops.md on one case's outcomes; a wrong value is blamed on
    ``blame`` where given."""
    judge.assert_built(result, rule="DT-API-7")
    if any(isinstance(o, Raised) and (o.facts or {}).get(OUTPUT_READ) is False
           for o in result.outcomes):  # fmt: skip
        judge.fail(result.report("the op returned outputs that its to_local and full_tensor "
                                 "cannot read"), "DT-OP-6",
                   symptoms.of_outcomes(result.outcomes))  # fmt: skip
    values = _returned_or_refused(result)
    if values is None:
        return
    context = result.replay_command()
    sample, expected = _single_device(args)
    mesh = Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))
    coords = by_rank(mesh)
    device = result.backend.device_for
    placements_seen = {tuple(tuple(o.get("describe", {}).get("placements", ())) for o in
                             v["outputs"]) for v in values}  # fmt: skip
    if len(placements_seen) > 1:
        judge.fail(result.report("every rank should hold the same output placements"),
                   "DT-OP-6", symptoms.WRONG_VALUE)  # fmt: skip
    _judge_inputs(args, values, context, blame)
    in_place = bool(args.get("in_place"))
    writes_out = args.get("out") is not None
    rules = IN_PLACE if in_place else OUT if writes_out else OUT_OF_PLACE
    writes = catalogue.writes_its_inputs(args["op"]) and not in_place
    for rank, got in enumerate(values):
        where = f"rank {rank}"
        if in_place or writes_out:
            judge.assert_equal(f"{where}: the call returned the tensor it wrote",
                               got["returned_self"], True, context,
                               rule=rules["metadata"])  # fmt: skip
        if not writes:
            what = "the other inputs unchanged" if in_place else "inputs unchanged"
            judge.assert_equal(f"{where}: {what}", got["inputs_unchanged"], True, context,
                               rule="DT-OP-8")  # fmt: skip
        judge.assert_equal(f"{where}: number of outputs", len(got["outputs"]), len(expected),
                           context, rule="DT-OP-4")  # fmt: skip
        for i, (out, want) in enumerate(zip(got["outputs"], expected, strict=True)):
            what = f"{where}: output {i}"
            if not isinstance(want, torch.Tensor):
                judge.assert_equal(what, out.get("value"), want, context, rule="DT-OP-4")
                continue
            judge.assert_equal(f"{what} kind", out["kind"], "dtensor", context, rule="DT-OP-4")
            facts = out["describe"]
            judge.assert_equal(f"{what} shape", facts["shape"], list(want.shape), context,
                               rule=rules["metadata"])  # fmt: skip
            judge.assert_equal(f"{what} dtype", facts["dtype"], str(want.dtype)[6:], context,
                               rule=rules["metadata"])  # fmt: skip
            judge.assert_equal(
                f"{what} stride (of the dims longer than 1)",
                dt_ops.significant_stride(facts["shape"], facts["stride"]),
                dt_ops.significant_stride(want.shape, want.stride()), context,
                rule=rules["stride"],
            )  # fmt: skip
            placements = parse_placements(facts["placements"])
            valid = placements_verdict(placements, mesh.ndim, want.dim()) == VALID
            shown = f"{what} placements {facts['placements']} valid for {list(want.shape)}"
            judge.assert_equal(shown, valid, True, context, rule=rules["layout"])
            local_shape, _ = local_shape_and_offset(want.shape, mesh.shape, placements,
                                                    coords[rank])  # fmt: skip
            judge.assert_equal(f"{what} local shape ({facts['placements']})", out["local_shape"],
                               list(local_shape), context, rule=rules["layout"])  # fmt: skip
            judge.assert_equal(f"{what} local device", out["local_device"],
                               device(rank).type, context, rule=rules["layout"])  # fmt: skip
            _judge_value(args["op"], sample, out["full"], want, f"{what}; {context}",
                         blame or rules["value"], _parts(args))  # fmt: skip


def _parts(args: dict[str, Any]) -> int:
    """The most parts a partial input of a case holds: the size of its ``P(sum)`` or ``P(avg)``
    mesh dims together (a ``P(max)`` or ``P(min)`` has no parts a linear op may combine)."""
    homes = args.get("homes") or ["mesh"] * len(args["placements"])
    sizes = [1]
    for texts, home in zip(args["placements"], homes, strict=True):
        shape = args["other_mesh"][0] if home == "other" else args["mesh_shape"]
        if home != "plain" and texts:  # a Python number has no placements
            partial = [k for k, t in zip(shape, texts, strict=True) if t in ("P(sum)", "P(avg)")]
            sizes.append(math.prod(partial))
    return max(sizes)


@pytest.mark.rules(
    "DT-OP-1", "DT-OP-2", "DT-OP-3", "DT-OP-4", "DT-OP-5", "DT-OP-6", "DT-OP-7", "DT-OP-8",
    "DT-OP-10", "DT-MESH-8", "DT-REDIST-3", "DT-REDIST-4",
)  # fmt: skip
@pytest.mark.volume(1 / 6)
@pytest.mark.per_op
@pytest.mark.op_cover("plain")
@pytest.mark.edges("op inputs", *cases.PER_OP_FAMILIES)
@given(data=st.data())
def test_an_op_on_dtensors_gives_the_single_device_result(
    impl, available_world_sizes, op_case, op, data
):
    """One test per op, so that a known failure of one op cannot hide another's, each drawing
    a sixth of the profile's examples: its samples, dtypes, meshes and layouts. The classes of
    its inputs are counted over all the ops (``edges``: a run of every core op draws each)."""
    judge.requires(impl, "dtensor", "dtensor_ops")
    if op in getattr(impl, "unclaimed_ops", ()):
        judge.requires(impl, f"op:{op}")
    if not catalogue.known(op) or not any(catalogue.samples(op, d) for d in catalogue.dtypes(op)):
        pytest.skip(f"{op}: no sample in the OpInfo database of torch {torch.__version__}")
    world_size, args = data.draw(op_cases(impl, op, available_world_sizes))
    run_and_judge(op_case, world_size, args)


@pytest.mark.rules("DT-OP-9", "DT-MESH-8", "DT-REDIST-3", "DT-REDIST-4")
@pytest.mark.edges("op history")
@pytest.mark.volume(5)
@given(data=st.data())
def test_an_ops_result_does_not_depend_on_the_ops_before_it(
    impl, available_world_sizes, op_case, data
):
    """One op called on one sample laid out one way, then again as a cache of propagation
    decisions may confuse with the first (``second_call``): on DTensors of the same metadata
    with other non-tensor arguments (another dim, keepdim), with another number in place of an
    argument, or on another sample laid out another way; then the first call again, on one
    world. Each call is judged alone, and the third must give what the first gave."""
    judge.requires(impl, "dtensor", "dtensor_ops")
    unclaimed = getattr(impl, "unclaimed_ops", ())
    op = data.draw(st.sampled_from([o for o in CORE if o not in unclaimed and catalogue.known(o)]))
    world_size, first = data.draw(op_cases(impl, op, available_world_sizes))
    first, second = data.draw(second_call(impl, first))
    seen, before = [], []
    with one_world():
        for args in (first, second, first):
            result = _judged_after(op_case, world_size, args, before)
            before.append(result.case)
            if any(isinstance(o, Raised) for o in result.outcomes):  # an allowed refusal
                seen.append(sorted({o.type for o in result.outcomes if isinstance(o, Raised)}))
                continue
            seen.append([{k: v for k, v in o.items() if k != "full"} | {"full": bits(o.get("full"))}
                         for o in result.values()[0]["outputs"]])  # fmt: skip
    judge.assert_equal("outputs of the first call, and of the same call after another",
                       seen[2], seen[0], result.replay_command(before[:-1]),
                       rule="DT-OP-9")  # fmt: skip


def _judged_after(op_case: Any, world_size: int, args: dict[str, Any], before: list[Case]) -> Any:
    """A call judged on the world that ran the calls ``before`` it (and, first, the cases of
    earlier examples); its result. Where it fails, the same call runs alone on a fresh world and
    is judged by its own rules: a failure there is the call's own; where it passes, what ran
    before it made the difference (DT-OP-9), and the failure says so, with a replay of the calls
    in order. (An attached world, the launcher's processes, cannot be replaced: the call runs
    again on it.)"""
    try:
        return run_and_judge(op_case, world_size, args)
    except judge.FAILED as caught:
        failure = caught
    fresh = LEDGER.replace_latest_world()
    alone = run_and_judge(op_case, world_size, args)
    told = [line for line in str(failure).splitlines()
            if not line.startswith(("  rules:", "  symptom:"))]  # fmt: skip
    again = "alone on a fresh world" if fresh else "run again on the same (attached) world"
    after = (f"after the {len(before)} call(s) before it on one world it fails: "
             f"{alone.replay_command(before)}" if before else
             "it failed after the cases of earlier examples on the same world")  # fmt: skip
    judge.fail("\n".join(told) + f"\n  {again} the call passes; {after}",
               "DT-OP-9", getattr(failure, "symptom", None))  # fmt: skip


@st.composite
def second_call(draw, impl: Any, first: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first call and the call between it and its repeat, drawn by kind among those the
    sample allows: a sample of the same tensor shapes and dtypes with other non-tensor
    arguments, on the same placements; another Python number in place of the same argument
    (the first call given one where it had none); another sample laid out another way."""
    op, dtype = first["op"], first["dtype"]
    samples = catalogue.samples(op, dtype)
    mine = samples[first["sample"]]
    siblings = [i for i, s in enumerate(samples) if i != first["sample"] and
                _metadata(s) == _metadata(mine) and _arguments(s) != _arguments(mine)]  # fmt: skip
    forms = anatomy.number_forms(op, dtype, first["sample"], "plain")
    numbers = {i: [f for f in f_i if f != "0-d"] for i, f_i in enumerate(forms)}
    numbers = {i: f_i for i, f_i in numbers.items() if len(f_i) > 1}
    kinds = ["another layout"] + ["other arguments"] * bool(siblings)
    kinds += ["another number"] * bool(numbers) * (first.get("homes") is None)
    kind = draw(st.sampled_from(kinds))
    edges.note(f"op history: {kind}")
    if kind == "other arguments":
        # a sibling naming other dims than the first call, where one does
        others = [i for i in siblings if _named(op, dtype, i) != _named(op, dtype, first["sample"])]
        sibling = draw(st.sampled_from(others if others and draw(st.booleans()) else siblings))
        return draw(_a_named_dim_sharded(first, sibling)), {**first, "sample": sibling}
    if kind == "another number":
        i = draw(st.sampled_from(sorted(numbers)))
        one, other = draw(st.permutations(numbers[i]))[:2]
        scalars = list(first.get("scalars") or [None] * len(mine.tensors()))
        placements = list(first["placements"])
        scalars[i], placements[i] = one, []
        first = {**first, "scalars": scalars, "placements": placements}
        scalars = list(scalars)
        scalars[i] = other
        return first, {**first, "scalars": scalars}
    index = draw(st.integers(0, len(samples) - 1))
    other = [draw(input_placements(impl, first["mesh_shape"], t))
             for t in samples[index].tensors()]  # fmt: skip
    rest = {k: v for k, v in first.items() if k not in ("scalars", "homes")}
    return first, {**rest, "sample": index, "placements": other}


@st.composite
def _a_named_dim_sharded(draw, first: dict[str, Any], sibling: int) -> dict[str, Any]:
    """The first call, or, where one call names a dim of a DTensor argument that the other does
    not (``sum(x, 0)`` then ``sum(x, 1)``), the first call with that dim sharded on a mesh dim:
    the output's layout follows the named dim there, so a propagation cache that leaves the
    arguments out of its key gives the second call the first one's layout."""
    op, dtype = first["op"], first["dtype"]
    homes = first.get("homes") or ["mesh"] * len(first["placements"])
    scalars = first.get("scalars") or [None] * len(first["placements"])
    named = sorted(
        (i, d)
        for i, d in _named(op, dtype, first["sample"]) ^ _named(op, dtype, sibling)
        if homes[i] == "mesh" and scalars[i] is None and first["placements"][i]
        and not any(text.startswith("_S") for text in first["placements"][i])
    )  # fmt: skip
    if not named or not draw(st.booleans()):
        return first
    i, d = draw(st.sampled_from(named))
    m = draw(st.integers(0, len(first["mesh_shape"]) - 1))
    placements = [list(texts) for texts in first["placements"]]
    placements[i][m] = f"S({d})"
    edges.note("op history: other arguments on a named dim sharded")
    return {**first, "placements": placements}


def _named(op: str, dtype: str, index: int) -> set[tuple[int, int]]:
    """The dims of its tensor arguments that a sample's call names (``anatomy``)."""
    return set(anatomy.of(op, dtype, index).named_dims)


def _metadata(sample: catalogue.Sample) -> list[tuple[Any, ...]]:
    return [(tuple(t.shape), t.dtype) for t in sample.tensors()]


def _arguments(sample: catalogue.Sample) -> str:
    """A sample's non-tensor arguments, comparable: their ``repr`` in order."""
    leaves, spec = sample.leaves()
    return repr([x for x in leaves if not isinstance(x, torch.Tensor)]) + repr(spec)


def bits(tensor: torch.Tensor | None) -> Any:
    """A tensor's value as comparable data: its bytes, exactly."""
    return None if tensor is None else (str(tensor.dtype), tensor.shape, tensor.numpy().tobytes())


@pytest.mark.rules("DT-OP-11", "DT-OP-7", "DT-OP-8", "DT-MESH-8", "DT-REDIST-3", "DT-REDIST-4")
@pytest.mark.volume(1 / 6)
@pytest.mark.per_op(ops=catalogue.in_place_ops)
@pytest.mark.edges("op inputs")
@given(data=st.data())
def test_an_in_place_op_writes_the_single_device_result_into_its_dtensor(
    impl, available_world_sizes, op_case, op, data
):
    """An in-place variant (``x.add_(y)``, ``x.zero_()``, ``x.t_()``) of a core op on a drawn
    layout of ``x``, ``P`` included: afterwards ``x`` holds what the single-device call leaves in
    its first argument, as a well-formed DTensor, and the call returns ``x``. One test per op,
    as for the ops' values: one draw among all the variants met each op about once a run, and
    missed ``fill_`` of a ``P(sum)``, which fills every part."""
    judge.requires(impl, "dtensor", "dtensor_ops")
    if op in getattr(impl, "unclaimed_ops", ()):
        judge.requires(impl, f"op:{op}")
    world_size, args = data.draw(op_cases(impl, op, available_world_sizes, "in_place"))
    run_and_judge(op_case, world_size, args)


@pytest.mark.rules("DT-OP-13", "DT-OP-7", "DT-OP-8", "DT-MESH-8", "DT-REDIST-3", "DT-REDIST-4")
@pytest.mark.volume(1 / 2)
@given(data=st.data())
def test_an_out_call_writes_the_single_device_result_into_its_out_dtensor(
    impl, available_world_sizes, op_case, data
):
    """A core op called with ``out=`` a DTensor of drawn placements (``torch.add(x, y,
    out=z)``): afterwards ``z`` holds the single-device result, as a well-formed DTensor, the
    call returns ``z``, and the inputs are unchanged."""
    judge.requires(impl, "dtensor", "dtensor_ops")
    unclaimed = getattr(impl, "unclaimed_ops", ())
    op = data.draw(st.sampled_from([o for o in catalogue.out_ops() if o not in unclaimed]))
    world_size, args = data.draw(op_cases(impl, op, available_world_sizes, "out"))
    run_and_judge(op_case, world_size, args)


@pytest.mark.rules(
    "DT-OP-12", "DT-OP-1", "DT-OP-2", "DT-OP-3", "DT-OP-4", "DT-OP-5", "DT-OP-6", "DT-OP-7",
    "DT-OP-8", "DT-OP-10", "DT-MESH-8", "DT-REDIST-3", "DT-REDIST-4",
)  # fmt: skip
@pytest.mark.volume(1 / 2)
@given(data=st.data())
def test_an_op_reads_plain_tensors_and_dtensors_of_another_mesh_as_their_values(
    impl, available_world_sizes, op_case, data
):
    """A core op whose first tensor argument is a DTensor and whose others are, as drawn,
    DTensors of its mesh, plain tensors (the same on every rank) or DTensors of another mesh of
    the same ranks: the call gives the single-device result, or refuses as DT-OP-7 allows. It
    may not refuse for a 0-d plain tensor: where the same call with that tensor as an ``R``
    DTensor returns, so must this one."""
    judge.requires(impl, "dtensor", "dtensor_ops")
    unclaimed = getattr(impl, "unclaimed_ops", ())
    ops = [o for o in CORE if o not in unclaimed and catalogue.known(o)]
    mixable = [o for o in ops if any(catalogue.mixing_samples(o, d) for d in catalogue.dtypes(o))]
    op = data.draw(st.sampled_from(mixable))
    world_size, args = data.draw(op_cases(impl, op, available_world_sizes, "mixing"))
    tensors = catalogue.samples(op, args["dtype"])[args["sample"]].tensors()
    scalars = [i for i, (t, home) in enumerate(zip(tensors, args["homes"], strict=True))
               if home == "plain" and t.dim() == 0]  # fmt: skip
    must_return = None
    if scalars:
        replicated = ["R"] * len(args["mesh_shape"])
        twin = {**args,
                "homes": ["mesh" if i in scalars else h for i, h in enumerate(args["homes"])],
                "placements": [replicated if i in scalars else p
                               for i, p in enumerate(args["placements"])]}  # fmt: skip
        if run_and_judge(op_case, world_size, twin).ok:
            must_return = ("DT-OP-12", f"a 0-d plain tensor argument (argument {scalars}) is a "
                           "value every rank holds: the call with it as an R DTensor returned, "
                           "so this one must")  # fmt: skip
    run_and_judge(op_case, world_size, args, must_return)
