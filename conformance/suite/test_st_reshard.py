"""spec/st-reshard.md: chunk-to-chunk resharding, what is unsupported and what is invalid."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import edges, judge
from conformance import strategies as ss
from conformance.oracle.st_collectives import reshard, reshard_verdict, reshard_verdict_by_rank
from conformance.oracle.st_metadata import Properties, ShardMeta, TensorMeta
from conformance.oracle.st_sharding_spec import (
    ChunkSpec,
    EnumerableSpec,
    build_metadata,
    chunk_shards,
)
from conformance.oracle.tensors import make_global
from conformance.rank_devices import placement
from conformance.vocabulary import Shard

FAULTS = ["none", "none", "identity", "enum_source", "enum_target", "repeat", "missing",
          "dim_range", "non_member", "non_member", "not_spec"]  # fmt: skip
HELD = {"held_unchanged": "local tensors held before the call unchanged"}  # ST-RESHARD-6


def _oracle_spec(data):
    if isinstance(data, dict) and "boxes" in data:
        boxes = (ShardMeta(tuple(o), tuple(s), placement(r)) for o, s, r in data["boxes"])
        return EnumerableSpec(tuple(boxes))
    if isinstance(data, dict):
        return ChunkSpec(data["dim"], tuple(placement(r) for r in data["ranks"]))
    return data


def _note_edges(args: dict, world_size: int) -> None:
    """The edge classes of a reshard case: its tensor, its group, the new spec's ranks outside
    the group, the chunks of each chunk spec and, between two chunk specs over the same members,
    the permutation from the old order to the new."""
    edges.tensor(args["shape"], args["dtype"], len(args["group"]))
    edges.group(args["group"], world_size)
    old, new = args["spec"], args["new_spec"]
    if isinstance(new, dict) and "ranks" in new:
        edges.outside_ranks(new["ranks"], args["group"], world_size)
    n = len(args["shape"])
    for spec in (old, new):
        dim = spec.get("dim") if isinstance(spec, dict) and "ranks" in spec else None
        if type(dim) is int and -n <= dim < n:
            edges.chunks(args["shape"], [len(spec["ranks"])], [Shard(dim % n)])
    chunks = isinstance(new, dict) and "ranks" in old and "ranks" in new
    if chunks and sorted(old["ranks"]) == sorted(new["ranks"]) == args["group"]:
        edges.permutation(old["ranks"], new["ranks"])


def _built_by(spec: dict) -> str:
    """The rule of the constructor that builds a case's source: ``zeros`` of an enumerable spec
    (ST-LIFE-1), ``shard`` of a chunk spec (ST-LIFE-7)."""
    return "ST-LIFE-1" if "boxes" in spec else "ST-LIFE-7"


def _chunk_reshard(draw, world_sizes: list[int], min_members: int):
    """A world, a group of ``min_members`` or more of its ranks, a shape, and two chunk specs
    over the group (any dim, any order of the members): the tensor's and the new one."""
    world_size = draw(st.sampled_from(world_sizes))
    order = draw(st.permutations(range(world_size)))
    # the whole world half the time: a group of one rank has a single order
    members = world_size if draw(st.booleans()) else draw(st.integers(min_members, world_size))
    group = sorted(order[:members])
    shape = draw(ss.shapes(min_dims=1, max_dims=3, max_side=6))
    n = len(shape)
    spec = {"dim": draw(st.integers(-n, n - 1)), "ranks": draw(st.permutations(group))}
    new = {"dim": draw(st.integers(-n, n - 1)), "ranks": draw(_reordered(spec["ranks"]))}
    return world_size, group, shape, spec, new


@st.composite
def _reordered(draw, ranks: list[int]) -> list[int]:
    """``ranks`` in a new order of every class (conformance.edges.permutation): as they are, two
    swapped, rotated by one (a cycle of all of them), or any permutation."""
    kind = draw(st.sampled_from(["any", "identity", "swap", "cycle"]))
    if kind == "identity" or len(ranks) < 2:
        return list(ranks)
    if kind == "swap":
        i, j = draw(st.lists(st.integers(0, len(ranks) - 1), min_size=2, max_size=2, unique=True))
        swapped = list(ranks)
        swapped[i], swapped[j] = swapped[j], swapped[i]
        return swapped
    if kind == "cycle":
        return [*ranks[1:], ranks[0]]
    return draw(st.permutations(ranks))


@st.composite
def reshard_cases(draw, world_sizes: list[int]):
    """A chunk layout over a group and a new spec: a permutation along any dim (every size), or
    one thing that is unsupported or invalid (ERR-11)."""
    world_size, group, shape, spec, new = _chunk_reshard(draw, world_sizes, min_members=1)
    n = len(shape)
    # properties other than the defaults, which the result must keep (ST-RESHARD-5)
    dtype = draw(st.sampled_from(ss.DTYPES))
    requires_grad = dtype.startswith("float") and draw(st.integers(0, 2)) > 0
    fault = draw(st.sampled_from(FAULTS))
    if fault == "identity":
        new = spec
    elif fault == "enum_source":
        boxes = chunk_shards(shape, _oracle_spec(spec))
        spec = {"boxes": [[list(b.offsets), list(b.sizes), b.rank] for b in boxes]}
    elif fault == "enum_target":
        boxes = chunk_shards(shape, _oracle_spec(new))
        new = {"boxes": [[list(b.offsets), list(b.sizes), b.rank] for b in boxes]}
    elif fault == "repeat":
        target = draw(st.sampled_from(["spec", "new"]))
        chosen = spec if target == "spec" else new
        chosen["ranks"] = [*chosen["ranks"], draw(st.sampled_from(group))]
    elif fault == "missing" and len(group) > 1:
        new["ranks"] = new["ranks"][1:]
    elif fault == "dim_range":
        new["dim"] = draw(st.sampled_from([n, n + 3, -n - 1]))
    elif fault == "non_member":
        # a rank past the world, or (on a sub-group) a real rank of the world the group leaves
        # out, each as often as the other (edges "outside rank")
        in_world = [r for r in range(world_size) if r not in group]
        outside = draw(st.sampled_from([[world_size], *([in_world] if in_world else [])]))
        new["ranks"] = [*new["ranks"][:-1], draw(st.sampled_from(outside))]
    elif fault == "not_spec":
        new = draw(st.sampled_from(["rank:0/cpu", 0]))
    return world_size, {
        "shape": shape,
        "dtype": dtype,
        "seed": draw(st.integers(0, 2**16)),
        "spec": spec,
        "new_spec": new,
        "group": group,
        "requires_grad": requires_grad,
    }


@pytest.mark.rules(
    "ST-RESHARD-1", "ST-RESHARD-2", "ST-RESHARD-3", "ST-RESHARD-4", "ST-RESHARD-5",
    "ST-RESHARD-6", "ST-RESHARD-7", "ST-RESHARD-8", "ST-RESHARD-9", "ST-RESHARD-10",
    "ST-RESHARD-11", "ST-RESHARD-12", "ST-LIFE-1", "ST-LIFE-7", "ERR-3", "ERR-6", "ERR-9",
    "ERR-10", "ERR-11",
)  # fmt: skip
@pytest.mark.edges("sharded tensor", "permutation", "group", "chunks", "outside rank")
@given(data=st.data())
def test_reshard_equals_sharding_the_gathered_tensor(impl, available_world_sizes, run_case, data):
    judge.requires(impl, "sharded_tensor")
    world_size, args = data.draw(reshard_cases(available_world_sizes))
    group = args["group"]
    _note_edges(args, world_size)
    if len(group) < world_size:
        judge.assume_claimed(impl, "sub_groups")
    result = run_case("sharded_tensor:reshard_checked", world_size, **args)
    spec, new_spec = _oracle_spec(args["spec"]), _oracle_spec(args["new_spec"])
    verdict = reshard_verdict(spec, new_spec, args["shape"], group)
    # Ranks outside the group return None; the verdict is the members'.
    members = dataclasses.replace(result, outcomes=tuple(result.outcomes[r] for r in group))
    judge.assert_built(members, rule=_built_by(args["spec"]))
    rule = _case_rule(verdict, spec, new_spec, len(args["shape"]), len(group) < world_size)
    judge.assert_collective_verdict(members, verdict, rule=rule)
    context = result.replay_command()
    judge.assert_facts_of_raises(members, HELD, context, rule="ST-RESHARD-6")
    if not (verdict.ok or members.ok):
        return
    values = dict(zip(group, members.values(), strict=True))
    props = Properties(dtype=args["dtype"], requires_grad=args["requires_grad"])
    meta = build_metadata(spec, args["shape"], props)
    source = make_global(args["shape"], args["dtype"], args["seed"])
    if isinstance(spec, EnumerableSpec):
        source = source.zero_()
    new_meta, expected = reshard(source, meta, new_spec, group)
    for rank in group:
        value = values[rank]
        judge.assert_equal(f"rank {rank}: {HELD['held_unchanged']}", value["held_unchanged"],
                           True, context, rule="ST-RESHARD-6")  # fmt: skip
        got = TensorMeta.from_json(value)
        kept = (got.size, got.properties) == (new_meta.size, new_meta.properties)
        judge.assert_equal(f"rank {rank}: metadata", got, new_meta, context,
                           rule=rule if kept else "ST-RESHARD-5")  # fmt: skip
        judge.assert_equal(f"rank {rank}: number of local shards", len(value["local"]),
                           len(expected[rank]), context, rule=rule)  # fmt: skip
        for (tensor, _), want in zip(value["local"], expected[rank], strict=True):
            exact = "ST-RESHARD-11" if judge.rounded_through_float32(tensor, want) else rule
            judge.assert_tensor_exact(f"rank {rank}: local shard", tensor, want, context,
                                      rule=exact)  # fmt: skip
        judge.assert_equal(
            f"rank {rank}: local shards (contiguous, device)",
            [[t.is_contiguous(), d] for (t, _), d in zip(value["local"], value["local_devices"],
                                                         strict=True)],
            [[True, _device_of(box["placement"])] for _, box in value["local"]],
            context, rule="ST-RESHARD-12",
        )  # fmt: skip


def _device_of(placement: str) -> str:
    """The device type a placement names: ``"rank:1/cuda:1"`` -> ``"cuda"``."""
    return placement.split("/", 1)[1].split(":")[0]


def _case_rule(verdict, spec, new_spec, ndim: int, sub_group: bool) -> str:
    """The rule that says this reshard gives the gathered tensor's layout and data: to the same
    spec (ST-RESHARD-4), on a sub-group (10), along the same dim (2) or to another dim (3);
    ST-RESHARD-1 itself for an unsupported case an implementation supports (ST-RESHARD-7, 8)."""
    if not verdict.ok:
        return "ST-RESHARD-1"
    if spec == new_spec:
        return "ST-RESHARD-4"
    if sub_group:
        return "ST-RESHARD-10"
    return "ST-RESHARD-2" if spec.dim % ndim == new_spec.dim % ndim else "ST-RESHARD-3"


@st.composite
def differing_reshards(draw, world_sizes: list[int]):
    """A chunk layout over a group of two or more ranks; every member reshards to one valid
    chunk spec but one, ``odd``, which passes another valid chunk spec: another dim (the same
    dim written with the other sign is another spec too), another order of the members, or the
    tensor's current spec (ST-RESHARD-9)."""
    world_size, group, shape, spec, new = _chunk_reshard(draw, world_sizes, min_members=2)
    n = len(shape)
    kind = draw(st.sampled_from(["dim", "order", "current"]))
    if kind == "current" and _oracle_spec(new) != _oracle_spec(spec):
        other = spec
    elif kind == "order":
        k = draw(st.integers(1, len(group) - 1))
        other = {**new, "ranks": [*new["ranks"][k:], *new["ranks"][:k]]}
    else:  # another dim, or the same dim spelled with the other sign: not == (ST-RESHARD-9)
        other = {**new, "dim": draw(st.sampled_from([d for d in range(-n, n) if d != new["dim"]]))}
    odd = draw(st.sampled_from(group))
    return world_size, {
        "shape": shape,
        "dtype": draw(st.sampled_from(ss.DTYPES)),
        "seed": draw(st.integers(0, 2**16)),
        "spec": spec,
        "new_spec": new,
        "group": group,
        "new_spec_by_rank": {str(odd): other},
    }


@pytest.mark.rules("ST-RESHARD-9", "ST-RESHARD-6", "ST-LIFE-1", "ST-LIFE-7", "ERR-6")
@given(data=st.data())
def test_a_new_spec_that_differs_between_ranks_fails_on_every_rank(
    impl, available_world_sizes, run_case, data
):
    """Specs that differ between members are ST-RESHARD-9's case even where each alone is valid
    or is the current spec: every member raises ValueError, its local tensors unchanged."""
    judge.requires(impl, "sharded_tensor")
    sizes = [n for n in available_world_sizes if n > 1]
    if not sizes:
        pytest.skip("needs a world of 2 ranks or more")
    world_size, args = data.draw(differing_reshards(sizes))
    group = args["group"]
    if len(group) < world_size:
        judge.assume_claimed(impl, "sub_groups")
    result = run_case("sharded_tensor:reshard_checked", world_size, **args)
    new_specs = {r: _oracle_spec(args["new_spec_by_rank"].get(str(r), args["new_spec"]))
                 for r in group}  # fmt: skip
    verdict = reshard_verdict_by_rank(_oracle_spec(args["spec"]), new_specs, args["shape"], group)
    members = dataclasses.replace(result, outcomes=tuple(result.outcomes[r] for r in group))
    judge.assert_built(members, rule=_built_by(args["spec"]))
    judge.assert_collective_verdict(members, verdict)
    judge.assert_facts_of_raises(members, HELD, result.replay_command(), rule="ST-RESHARD-6")
