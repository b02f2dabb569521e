"""spec/dt-placements.md: constructing, comparing and printing placements (pure), and the
placement list every API that takes one checks (collective)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import judge
from conformance import strategies as ss
from conformance import vocabulary as v
from conformance.oracle import placements as oracle

JUNK = [1.5, 2.0, "0", None, True]


def oracle_placement(kind: str, *args):
    return {"Shard": v.Shard, "_StridedShard": v.StridedShard, "Replicate": v.Replicate,
            "Partial": v.Partial}[kind](*args)  # fmt: skip


constructions = st.one_of(
    st.tuples(st.just("Shard"), st.integers(-3, 3) | st.sampled_from(JUNK)),
    st.tuples(
        st.just("_StridedShard"),
        st.integers(-2, 2) | st.sampled_from(JUNK),
        st.integers(-2, 3) | st.sampled_from(JUNK),
    ),
    st.tuples(st.just("Replicate")),
    st.tuples(st.just("Partial")),
    st.tuples(st.just("Partial"), st.sampled_from([*oracle.REDUCE_OPS, "foo", "SUM", 3, None])),
)

VALID = [("Shard", 0), ("Shard", 1), ("Shard", -1), ("_StridedShard", 0, 1),
         ("_StridedShard", 0, 2), ("_StridedShard", 1, 2), ("Replicate",), ("Partial",),
         ("Partial", "sum"), ("Partial", "avg"), ("Partial", "max"),
         ("Partial", "product")]  # fmt: skip


def _requires_kind(impl, construction) -> None:
    if construction[0] == "_StridedShard":
        judge.assume_claimed(impl, "strided_shard")


@pytest.mark.rules("DT-PLACE-4", "DT-PLACE-5", "DT-PLACE-7")
@given(construction=constructions)
def test_placement_arguments_are_checked_at_construction(impl, pure, construction):
    """Wrong types raise TypeError, unknown ops and split factors below 1 ValueError."""
    judge.requires(impl, "dtensor")
    _requires_kind(impl, construction)
    verdict = oracle.construction_verdict(*construction)
    # A valid Partial refused breaks the op rule, a valid _StridedShard the split factor rule,
    # any other the type rule.
    refused = {"Partial": "DT-PLACE-5", "_StridedShard": "DT-PLACE-7"}.get(construction[0])
    judge.assert_pure_verdict(pure("placement", construction=list(construction)), verdict,
                              f"{construction[0]}{construction[1:]}",
                              rule=refused or "DT-PLACE-4")  # fmt: skip


@pytest.mark.rules("DT-PLACE-8")
@given(a=st.sampled_from(VALID), b=st.sampled_from(VALID))
def test_placements_are_equal_exactly_when_kind_and_parameters_are(impl, pure, a, b):
    judge.requires(impl, "dtensor")
    _requires_kind(impl, a)
    _requires_kind(impl, b)
    expected = oracle_placement(*a) == oracle_placement(*b)
    context = f"{a[0]}{a[1:]} vs {b[0]}{b[1:]}"
    compared = judge.pure_value(pure("placements_compare", a=list(a), b=list(b)), context,
                                rule="DT-PLACE-8")  # fmt: skip
    judge.assert_equal("a == b", compared["eq"], expected, context, rule="DT-PLACE-8")
    judge.assert_equal("a != b", compared["ne"], not expected, context, rule="DT-PLACE-8")
    if expected:
        judge.assert_equal("hash(a) == hash(b)", compared["hash_eq"], True, context,
                           rule="DT-PLACE-8")  # fmt: skip


@pytest.mark.rules("DT-PLACE-8")
def test_equal_placements_collapse_in_a_set(impl, pure):
    judge.requires(impl, "dtensor", "strided_shard")
    made = [["Shard", 0], ["Shard", 0], ["Replicate"], ["Replicate"], ["Partial", "sum"],
            ["Partial"], ["_StridedShard", 0, 2], ["_StridedShard", 0, 2]]  # fmt: skip
    distinct = judge.pure_value(pure("distinct_placements", constructions=made), str(made),
                                rule="DT-PLACE-8")  # fmt: skip
    judge.assert_equal("len(set(...))", distinct, 4, str(made), rule="DT-PLACE-8")


@pytest.mark.rules("DT-PLACE-9")
@pytest.mark.parametrize("construction", VALID, ids=lambda c: f"{c[0]}{c[1:]}")
def test_str_is_the_short_notation_and_reads_back(impl, pure, construction):
    judge.requires(impl, "dtensor")
    _requires_kind(impl, construction)
    expected = oracle_placement(*construction)
    context = f"{construction}"
    text = judge.pure_value(pure("placement", construction=list(construction)), context,
                            rule="DT-PLACE-9")  # fmt: skip
    judge.assert_equal("str(p)", text, str(expected), context, rule="DT-PLACE-9")
    # The text is the oracle's own now, so it reads back: the check pins the oracle's printer.
    judge.assert_equal("parse(str(p))", v.parse_placement(text), expected, context,
                       rule="DT-PLACE-9")  # fmt: skip


# The rule whose API must accept a valid placement list.
ACCEPTS = {"distribute": "DT-API-4", "from_local": "DT-API-7", "redistribute": "DT-REDIST-1"}


@st.composite
def placement_calls(draw, world_sizes: list[int]):
    """A valid call of one API with a placement list, then at most one violation (ERR-11):
    a wrong length, a shard dim out of range, an unknown op, a split factor below 1, or two
    Partial ops; the violation on every rank or on one rank only (a mesh of the world)."""
    world_size = draw(st.sampled_from(world_sizes))
    shape = draw(ss.shapes())
    mesh_shape, ranks = draw(ss.meshes(world_size))
    placements = draw(ss.placements(len(mesh_shape), len(shape)))
    n, bad = len(shape), list(placements)
    faults = ["none", "length", "dim", "op"]
    faults += ["split"] if n else []
    faults += ["mixed"] if len(mesh_shape) > 1 else []
    fault = draw(st.sampled_from(faults))
    i = draw(st.integers(0, len(mesh_shape) - 1))
    if fault == "length":
        bad = [*bad, "R"] if draw(st.booleans()) else bad[:-1]
    elif fault == "dim":
        bad[i] = draw(st.sampled_from([f"S({n})", f"S({-n - 1})", f"S({n + 1})"]))
    elif fault == "op":
        bad[i] = "P(foo)"
    elif fault == "split":
        bad[i] = draw(st.sampled_from(["_S(0, 0)", "_S(0, -1)"]))
    elif fault == "mixed":
        j = (i + 1) % len(mesh_shape)
        bad[i], bad[j] = "P(sum)", "P(max)"
    api = draw(st.sampled_from(["distribute", "from_local", "redistribute"]))
    # One rank only in a collective call (not from_local without run_check, DT-API-7), on a mesh
    # of the whole world (outside ranks do not wait, DT-MESH-9), and not for the faults a
    # placement's constructor raises before any collective starts.
    one_rank = (
        api != "from_local"
        and fault in ("length", "dim", "mixed")
        and len(ranks) == world_size
        and draw(st.booleans())
    )
    odd = draw(st.integers(0, world_size - 1)) if one_rank else None
    args = ss.with_placements_args(
        draw, api, shape, (mesh_shape, ranks), placements if one_rank else bad,
        {"rank": odd, "placements": bad} if one_rank else None,
    )  # fmt: skip
    return world_size, fault, bad, args


@pytest.mark.rules("DT-PLACE-1", "DT-PLACE-2", "DT-PLACE-3", "DT-PLACE-5", "DT-PLACE-6",
                   "DT-PLACE-7", "DT-API-4", "DT-API-7", "DT-REDIST-1")  # fmt: skip
@given(data=st.data())
def test_every_api_checks_its_placement_list_on_every_rank(
    impl, available_world_sizes, run_case, data
):
    """distribute_tensor, from_local and redistribute reach one verdict on every rank; a valid
    result carries one normalised placement per mesh dim."""
    judge.requires(impl, "dtensor")
    world_size, fault, bad, args = data.draw(placement_calls(available_world_sizes))
    if len(args["mesh_ranks"]) < world_size:
        judge.assume_claimed(impl, "sub_groups")
    if fault == "split":
        judge.assume_claimed(impl, "strided_shard")
    if fault == "mixed":
        judge.assume_claimed(impl, "partial:sum", "partial:max")
    parsed = v.parse_placements(bad)
    verdict = oracle.placements_verdict(parsed, len(args["mesh_shape"]), len(args["shape"]))
    result = run_case("dtensor:with_placements", world_size, **args)
    if args["api"] == "redistribute":  # its all-R source comes from from_local
        judge.assert_built(result, rule="DT-API-7")
    values = judge.assert_collective_verdict(result, verdict, rule=ACCEPTS[args["api"]])
    if values is None:
        return
    expected = v.format_placements(oracle.normalize(parsed, len(args["shape"])))
    for rank, got in enumerate(values):
        # one entry per mesh dim (DT-PLACE-1), shard dims normalised (DT-PLACE-2)
        rule = "DT-PLACE-2" if len(got["placements"]) == len(expected) else "DT-PLACE-1"
        judge.assert_equal(f"rank {rank}: placements", got["placements"], expected,
                           result.replay_command(), rule=rule)  # fmt: skip
