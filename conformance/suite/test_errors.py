"""spec/errors.md: ERR-5, for implementations that claim their messages name the rule; ERR-6 for
local calls, which raise on the ranks whose own input is bad and return on the others."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from conformance import judge, rules
from conformance import strategies as ss
from conformance.oracle import dt_api
from conformance.oracle.st_metadata import ShardMeta, TensorMeta
from conformance.oracle.st_validation import layout_verdict
from conformance.suite.test_st_validation import layouts
from conformance.vocabulary import Mesh, parse_placements
from conformance.world import Raised
from conformance.world.protocol import RULE_ID

SPEC_IDS = {rule.id for rule in rules.load()}


@pytest.mark.rules("ERR-5")
@given(layout=layouts())
def test_a_rejected_layout_names_a_rule_of_the_spec(impl, pure, layout):
    judge.requires(impl, "sharded_tensor", "rule_ids_in_messages")
    shape, shards = layout
    meta = TensorMeta(tuple(ShardMeta.from_json(s) for s in shards), tuple(shape))
    assume(not layout_verdict(meta).ok)
    context = f"validate({shards}, size={shape})"
    result = pure("validate", shards=shards, shape=shape)
    (outcome,) = result.outcomes
    if not isinstance(outcome, Raised):  # accepted, hung or died: the ST-VALID rule broken
        judge.assert_pure_verdict(result, layout_verdict(meta), context)
    named = set(RULE_ID.findall(outcome.message))
    judge.assert_equal(
        "rule ids the spec defines, named in the message",
        bool(named & SPEC_IDS),
        True,
        f"{context} raised {outcome.type}: {outcome.message}",
        rule="ERR-5",
    )


@st.composite
def local_calls(draw, world_sizes: list[int]):
    """A DTensor call that is local on one rank, ``odd``: ``distribute_tensor`` with
    ``src_data_rank=None`` or ``from_local`` without ``run_check`` on any mesh, or any call on
    a rank outside a smaller mesh (``distribute_tensor`` from the mesh's first rank,
    ``from_local`` with ``run_check``, ``redistribute``). Every rank passes valid placements but
    ``odd``, whose list breaks one rule (ERR-11) or is another valid list."""
    world_size = draw(st.sampled_from(world_sizes))
    shape = draw(ss.shapes())
    outside = draw(st.booleans())
    if outside:
        ranks = draw(st.permutations(range(world_size)))[: draw(st.integers(1, world_size - 1))]
        mesh_shape = [len(ranks)]
        odd = draw(st.sampled_from([r for r in range(world_size) if r not in ranks]))
        api = draw(st.sampled_from(["distribute", "from_local", "redistribute"]))
    else:
        mesh_shape, ranks = draw(ss.meshes(world_size))
        odd = draw(st.integers(0, world_size - 1))
        api = draw(st.sampled_from(["distribute", "from_local"]))
    placements = draw(ss.placements(len(mesh_shape), len(shape)))
    n, bad = len(shape), list(placements)
    faults = ["other", "length", "dim"] + (["product"] if api != "from_local" else [])
    faults += ["mixed"] if len(mesh_shape) > 1 else []
    fault = draw(st.sampled_from(faults))
    i = draw(st.integers(0, len(mesh_shape) - 1))
    if fault == "other":
        bad = draw(ss.placements(len(mesh_shape), len(shape)))
    elif fault == "length":
        bad = [*bad, "R"] if draw(st.booleans()) else bad[:-1]
    elif fault == "dim":
        bad[i] = draw(st.sampled_from([f"S({n})", f"S({-n - 1})"]))
    elif fault == "product":
        bad[i] = "P(product)"
    elif fault == "mixed":
        bad[i], bad[(i + 1) % len(mesh_shape)] = "P(sum)", "P(max)"
    return world_size, ss.with_placements_args(
        draw, api, shape, (mesh_shape, ranks), placements, {"rank": odd, "placements": bad},
        src_data_rank="first" if outside else None, run_check=outside,
    )  # fmt: skip


@pytest.mark.rules("ERR-6", "DT-API-3", "DT-API-7", "DT-API-13", "DT-API-14", "DT-PLACE-1",
                   "DT-PLACE-3", "DT-PLACE-6", "DT-REDIST-7", "DT-REDIST-14")  # fmt: skip
@given(data=st.data())
def test_a_local_call_raises_only_on_the_ranks_whose_own_input_is_bad(
    impl, available_world_sizes, run_case, data
):
    """ERR-6 for local calls: the rank that passed a bad placement list raises the error its
    rule gives, every other rank returns, whatever that rank passed; a call outside the mesh
    does not wait for the mesh, and the mesh's own collective succeeds."""
    judge.requires(impl, "dtensor")
    sizes = [n for n in available_world_sizes if n > 1]
    if not sizes:
        pytest.skip("needs a world of 2 ranks or more")
    world_size, args = data.draw(local_calls(sizes))
    fault = args["fault"]
    if args["api"] == "distribute":
        judge.assume_source_claimed(impl, args["src_data_rank"], args["mesh_ranks"])
    if len(args["mesh_ranks"]) < world_size:
        judge.assume_claimed(impl, "sub_groups")
    for placements in (args["placements"], fault["placements"]):
        ops = {p[2:-1] for p in placements if p.startswith("P(")}
        judge.assume_claimed(impl, *(f"partial:{op}" for op in ops))
    mesh = Mesh(tuple(args["mesh_shape"]), tuple(args["mesh_ranks"]))
    source = args["mesh_ranks"][0] if args["src_data_rank"] == "first" else None
    verdicts = dt_api.verdicts_by_rank(
        args["api"], args["shape"], args["dtype"], mesh,
        {r: parse_placements(fault["placements"] if r == fault["rank"] else args["placements"])
         for r in range(world_size)}, world_size,
        src_data_ranks=dict.fromkeys(range(world_size), source), run_check=args["run_check"],
    )  # fmt: skip
    result = run_case("dtensor:with_placements", world_size, **args)
    # A valid call that did not return waited for, or failed with, the odd rank's call.
    judge.assert_verdicts_by_rank(result, verdicts, rule="ERR-6")
