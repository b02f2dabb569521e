"""Op cases: what the per-op tests draw (``op_cases``, a Hypothesis strategy) and the covering
examples that give every pair of an op's classes (``cover``), both from the same construction
(spec/dt-ops.md, "Inputs the suite draws").

A case is a sample of the op (a dtype and an index into ``catalogue.samples``) on a mesh of a
world, with placements for each tensor argument (``[]`` for one that is no DTensor of the
mesh), and optionally number forms in place of some arguments (``scalars``, ``anatomy``). Its
classes (``labels``) are what the per-op tests count: each of the first three arguments' layout
class (``layouts.CLASSES``), how their layouts meet (``layouts.CORRELATIONS``), the numbers it
holds, and the mesh's classes. ``cover`` builds, for one op, examples that hold every pair of
classes of two families that the op's samples can give together, greedily, each example built
to hold one pair still missing and as many more as it can.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import strategies as st
from torch.utils import _pytree as pytree

from conformance import covering, edges, strategies
from conformance.ops import anatomy, catalogue, layouts

# The per-op families (conformance/edges.py): the classes of the first three tensor arguments,
# their correlation, the numbers a call holds, the mesh.
ARGS = 3
# Every per-op family, which the per-op test declares: its classes are counted over all the ops.
PER_OP_FAMILIES = ("op arg 0", "op arg 1", "op arg 2", "op layouts", "op numbers")
# Where a tensor argument of a mixing case lives (DT-OP-12).
HOMES = ("mesh", "plain", "other")


def indices(op: str, dtype: str, variant: str) -> tuple[int, ...]:
    """The op's samples of ``dtype`` the ``variant`` runs on (``catalogue``)."""
    if variant == "in_place":
        return catalogue.in_place_samples(op, dtype)
    if variant == "out":
        return catalogue.out_samples(op, dtype)
    if variant == "mixing":
        return catalogue.mixing_samples(op, dtype)
    if variant == "grad":
        return catalogue.grad_samples(op, dtype)
    return tuple(range(len(catalogue.samples(op, dtype))))


def families(op: str, variant: str) -> list[str]:
    """The per-op families an op's cases can draw: one per tensor argument of its samples (up
    to three), their correlations, numbers where an argument takes one, the mesh."""
    samples = [(d, i) for d in catalogue.dtypes(op) for i in indices(op, d, variant)]
    most = max((len(_facts(op, d, i).tensors) for d, i in samples), default=0)
    chosen = [f"op arg {k}" for k in range(min(ARGS, most))]
    chosen.append("op layouts")
    if any(any(anatomy.number_forms(op, d, i, variant)) for d, i in samples):
        chosen.append("op numbers")
    return [*chosen, "mesh"]


def paired(families: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs of families whose classes an op's cover holds together (spec/dt-ops.md,
    "Inputs the suite draws"): each argument's class with every other argument's, with the
    correlations and with the mesh; the numbers with the first argument, the tensor they
    meet."""
    args = [f for f in families if f.startswith("op arg ")]
    pairs = [(a, b) for a, b in itertools.combinations(args, 2)]
    pairs += [(a, other) for a in args for other in ("op layouts", "mesh")]
    if "op numbers" in families and args:
        pairs.append(("op numbers", args[0]))
    return pairs


def labels(op: str, case: dict[str, Any]) -> set[str]:
    """The classes of the per-op families a case holds (``edges.FAMILIES``)."""
    facts = _facts(op, case["dtype"], case["sample"])
    n = len(facts.shapes)
    homes = case.get("homes") or ["mesh"] * n
    scalars = case.get("scalars") or [None] * n
    found = set()
    on_mesh: list[Sequence[str] | None] = []
    for k, (shape, texts, home, form) in enumerate(
        zip(facts.shapes, case["placements"], homes, scalars, strict=True)
    ):
        number = form in ("int", "float", "bool")
        shape = () if form == "0-d" else shape
        if k and (number or not shape) and home != "other":
            kind = form if number else "plain" if home == "plain" else "0-d"
            found.add(f"op numbers: {layouts.NUMBERS[kind]}")
        mesh = home == "mesh" and not number
        on_mesh.append(texts if mesh and form is None else None)
        if k < ARGS and mesh:
            found |= {f"op arg {k}: {c}" for c in layouts.classes(shape, texts, case["mesh_shape"])}
    body = anatomy.of(op, case["dtype"], case["sample"])
    found |= {f"op layouts: {c}" for c in layouts.correlations(body, on_mesh, case["mesh_shape"])}
    return found | _mesh_labels(case["mesh_shape"], case["mesh_ranks"])


def _mesh_labels(mesh_shape: Sequence[int], mesh_ranks: Sequence[int]) -> set[str]:
    """The classes of a mesh of every rank of the world (``edges.mesh_classes``)."""
    return set(edges.mesh_classes(mesh_shape, mesh_ranks, len(mesh_ranks)))


def note(op: str, case: dict[str, Any]) -> None:
    """Note a case's classes: the per-op families' (``labels``) and, counted over every op,
    the ``op inputs`` family's (``edges.op_input``)."""
    edges.note(*sorted(labels(op, case)))
    tensors = iter(catalogue.case_sample(case).tensors())
    homes = case.get("homes") or ["mesh"] * len(case["placements"])
    scalars = case.get("scalars") or [None] * len(case["placements"])
    for texts, home, form in zip(case["placements"], homes, scalars, strict=True):
        if form in ("int", "float", "bool"):
            continue
        t = next(tensors)
        if home == "mesh":
            edges.op_input(t.shape, str(t.dtype).removeprefix("torch."), texts, case["mesh_shape"])


# -- what a case may hold --------------------------------------------------------------------


@dataclass(frozen=True)
class Situation:
    """A sample on a mesh: everything about a case but its placements and numbers."""

    dtype: str
    index: int
    world_size: int
    mesh_shape: tuple[int, ...]
    mesh_ranks: tuple[int, ...]


def _meshes(world_size: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every mesh of 1 to 3 dims of the world's ranks, ascending, and each of more than one
    rank reversed."""
    found = []
    for ndim in (1, 2, 3):
        for shape in itertools.product(range(1, world_size + 1), repeat=ndim):
            if math.prod(shape) == world_size:
                ranks = tuple(range(world_size))
                found.append((shape, ranks))
                if world_size > 1:
                    found.append((shape, ranks[::-1]))
    return found


@functools.cache
def situations(op: str, variant: str, world_sizes: tuple[int, ...]) -> tuple[Situation, ...]:
    return tuple(
        Situation(dtype, index, n, shape, ranks)
        for n in world_sizes
        for shape, ranks in _meshes(n)
        for dtype in catalogue.dtypes(op)
        for index in indices(op, dtype, variant)
    )


@dataclass(frozen=True)
class _Facts:
    """What a draw reads of a sample's tensors, read once."""

    tensors: tuple[torch.Tensor, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    headroom: tuple[float, ...]  # how many copies of its largest finite value stay finite


@functools.cache
def _facts(op: str, dtype: str, index: int) -> _Facts:
    tensors = tuple(catalogue.samples(op, dtype)[index].tensors())
    return _Facts(
        tensors,
        tuple(tuple(t.shape) for t in tensors),
        tuple(str(t.dtype).removeprefix("torch.") for t in tensors),
        tuple(_headroom(t) for t in tensors),
    )


def _headroom(t: torch.Tensor) -> float:
    """``P(avg)``'s parts hold ``k·v``: how large ``k`` may be before one overflows."""
    if not t.is_floating_point():
        return 0.0
    largest = float(torch.where(t.isfinite(), t.double().abs(), 0).max()) if t.numel() else 0.0
    return math.inf if largest == 0 else torch.finfo(t.dtype).max / largest


def _kinds(dtype: str, headroom: float, mesh_shape: Sequence[int],
           capabilities: frozenset[str]) -> list[str]:  # fmt: skip
    """The ``P`` kinds an argument may take here that the implementation claims."""
    kinds = layouts.partial_kinds(dtype, mesh_shape, math.prod(mesh_shape) <= headroom)
    return [k for k in kinds if f"partial:{k}" in capabilities]


# -- building a case -------------------------------------------------------------------------


@dataclass
class Plan:
    """What a case is built to hold: a situation, the number form of some arguments, a
    correlation and a class per argument (``None``: any)."""

    situation: Situation
    scalars: list[str | None]
    homes: list[str]
    correlation: str | None
    targets: list[str | None]


def build(
    op: str, plan: Plan, capabilities: frozenset[str], choose: Callable[[list[Any]], Any],
    fill: Callable[[int, int], str] | None = None,
) -> dict[str, Any] | None:  # fmt: skip
    """The case ``plan`` describes, or ``None`` where the sample cannot hold it. ``choose``
    picks among the ways to make a class or a correlation (the first, for the cover; a draw,
    for the strategy); ``fill(i, m)`` gives argument ``i`` a placement on a mesh dim nothing
    else chose (``R`` by default)."""
    s = plan.situation
    facts = _facts(op, s.dtype, s.index)
    body = anatomy.of(op, s.dtype, s.index)
    ndims = len(s.mesh_shape)
    shapes = [() if form == "0-d" else shape
              for shape, form in zip(facts.shapes, plan.scalars, strict=True)]  # fmt: skip
    fixed: list[dict[int, str] | None] = [
        None if form in ("int", "float", "bool") or home != "mesh" else {}
        for form, home in zip(plan.scalars, plan.homes, strict=True)
    ]
    strided = "strided_shard" in capabilities
    if plan.correlation not in (None, "drawn apart"):
        ways = list(_correlated(body, plan, fixed, shapes, facts, capabilities, strided))
        if not ways:
            return None
        for i, assignment in choose(ways).items():
            fixed[i] = {**(fixed[i] or {}), **assignment}
    for i, wanted in enumerate(plan.targets):
        if wanted is None or fixed[i] is None:
            continue
        free = [m for m in range(ndims) if m not in fixed[i]]
        kinds = _kinds(facts.dtypes[i], facts.headroom[i], s.mesh_shape, capabilities)
        held = {text[2:-1] for text in fixed[i].values() if text.startswith("P(")}
        kinds = [k for k in kinds if not held or k in held]  # parts of one reduction
        ways = list(layouts.realizations(shapes[i], s.mesh_shape, wanted, kinds, strided, free,
                                         fixed[i]))  # fmt: skip
        if not ways:
            return None
        fixed[i] = {**fixed[i], **choose(ways)}
    placements = []
    for i, assignment in enumerate(fixed):
        if assignment is None:
            placements.append([])
            continue
        chosen = {text for text in assignment.values() if text.startswith("P(")}
        texts = []
        for m in range(ndims):
            text = assignment.get(m) or (fill(i, m) if fill else "R")
            if text.startswith("P(") and chosen and text not in chosen:
                text = "R"  # a partial input holds parts of one reduction
            texts.append(text)
        placements.append(texts)
    return {
        "op": op,
        "dtype": s.dtype,
        "sample": s.index,
        "mesh_shape": list(s.mesh_shape),
        "mesh_ranks": list(s.mesh_ranks),
        "placements": placements,
        **({"scalars": list(plan.scalars)} if any(plan.scalars) else {}),
        **({"homes": list(plan.homes)} if any(h != "mesh" for h in plan.homes) else {}),
    }


def _correlated(
    body: anatomy.Anatomy, plan: Plan, fixed: list[dict[int, str] | None], shapes: list[tuple],
    facts: _Facts, capabilities: frozenset[str], strided: bool,
) -> Iterator[dict[int, dict[int, str]]]:  # fmt: skip
    """The ways to give the plan's correlation: ``{argument: {mesh dim: text}}``."""
    mesh_shape = plan.situation.mesh_shape
    # the last mesh dims first: FSDP's strided shard of an argument goes before its shard
    wide = [m for m, k in reversed(list(enumerate(mesh_shape))) if k > 1]

    def sharded(i: int) -> bool:  # an argument a correlation may lay out: a DTensor with dims
        return fixed[i] is not None and plan.scalars[i] is None and bool(shapes[i])

    if plan.correlation == "equal dims sharded alike":
        for (i, a), (j, b) in body.equal_dims:
            if sharded(i) and sharded(j):
                for m in wide:
                    yield {i: {m: f"S({a})"}, j: {m: f"S({b})"}}
    elif plan.correlation == "a dim the call names sharded":
        for i, d in body.named_dims:
            if sharded(i):
                for m in wide:
                    yield {i: {m: f"S({d})"}}
    elif plan.correlation == "a partial into an input the op is linear in":
        for linear in body.linear:
            if all(fixed[i] is not None and plan.scalars[i] is None for i in linear):
                kinds = set.intersection(*(
                    set(_kinds(facts.dtypes[i], facts.headroom[i], mesh_shape, capabilities))
                    for i in linear))  # fmt: skip
                for kind in sorted(kinds):
                    for m in wide:
                        yield {i: {m: f"P({kind})"} for i in linear}
    elif plan.correlation == "an empty shard of every input":
        held = [i for i in range(len(shapes)) if sharded(i) and math.prod(shapes[i])]
        empty = "S with an empty shard"
        everywhere = range(len(mesh_shape))
        ways = [list(layouts.realizations(shapes[i], mesh_shape, empty, [], strided, everywhere))
                for i in held]  # fmt: skip
        if held and all(ways):
            for choice in itertools.product(*ways):
                yield dict(zip(held, choice, strict=True))


# -- the strategy ----------------------------------------------------------------------------


@st.composite
def op_cases(
    draw, impl: Any, op: str, world_sizes: list[int], variant: str = "plain"
) -> tuple[int, dict[str, Any]]:
    """A case of ``op`` for the ``variant`` (``plain``, ``in_place``, ``out``, ``mixing``,
    ``grad``): a dtype and sample it runs on, a mesh of a drawn world (ranks in any order), in
    plain, in-place and out= calls half the time a number in place of an argument that takes
    one (``anatomy.number_forms``), a correlation (``drawn apart`` as often as each other) and a
    class per argument drawn first, and every mesh dim they leave drawn apart
    (``input_placements``). Its classes are noted (``note``)."""
    capabilities = frozenset(impl.capabilities)
    dtype = draw(st.sampled_from([d for d in catalogue.dtypes(op) if indices(op, d, variant)]))
    index = draw(st.sampled_from(indices(op, dtype, variant)))
    # a world of 1 rank shards nothing: drawn half as often as each other size
    world_size = draw(st.sampled_from([*world_sizes, *(n for n in world_sizes if n > 1)]))
    mesh_shape, mesh_ranks = draw(strategies.world_meshes(world_size))
    situation = Situation(dtype, index, world_size, tuple(mesh_shape), tuple(mesh_ranks))
    facts = _facts(op, dtype, index)
    n = len(facts.tensors)
    scalars: list[str | None] = [None] * n
    homes = ["mesh"] * n
    if variant in ("plain", "in_place", "out"):
        forms = anatomy.number_forms(op, dtype, index, variant)
        takes = [i for i, f in enumerate(forms) if f]
        if takes and draw(st.booleans()):
            i = draw(st.sampled_from(takes))
            scalars[i] = draw(st.sampled_from(forms[i]))
        for i in range(1, n):
            zero_d = scalars[i] == "0-d" or (not facts.shapes[i] and scalars[i] is None)
            if zero_d and variant == "plain" and draw(st.integers(0, 3)) == 0:
                homes[i] = "plain"
    correlation = draw(st.sampled_from(layouts.CORRELATIONS))
    targets = [draw(st.sampled_from([None, *layouts.CLASSES])) for _ in range(n)]
    apart = [
        draw(input_placements(impl, mesh_shape, catalogue.as_scalar(t, "0-d") if form else t))
        for t, form in zip(facts.tensors, scalars, strict=True)
    ]

    def choose(ways: list[Any]) -> Any:
        return draw(st.sampled_from(ways))

    case = build(op, Plan(situation, scalars, homes, correlation, targets), capabilities,
                 choose, lambda i, m: apart[i][m])  # fmt: skip
    if case is None:  # the sample cannot hold the plan: its layouts drawn apart
        plan = Plan(situation, scalars, homes, None, [None] * n)
        case = build(op, plan, capabilities, choose, lambda i, m: apart[i][m])
    case = _variant(draw, impl, op, variant, {**case, "seed": draw(st.integers(0, 2**16))},
                    world_size)  # fmt: skip
    note(op, case)
    return world_size, case


def _variant(draw, impl: Any, op: str, variant: str, case: dict[str, Any],
             world_size: int) -> dict[str, Any]:  # fmt: skip
    """What the variant adds to a case: the in-place flag, the ``out=`` DTensor's placements,
    a mixing case's homes."""
    mesh_shape, mesh_ranks = case["mesh_shape"], case["mesh_ranks"]
    if variant == "in_place":
        return {**case, "in_place": True}
    if variant == "out":
        (result,) = pytree.tree_leaves(catalogue.call(op, catalogue.case_sample(case)))
        return {**case, "out": draw(input_placements(impl, mesh_shape, result))}
    if variant != "mixing":
        return case
    tensors = catalogue.samples(op, case["dtype"])[case["sample"]].tensors()
    homes = ["mesh", *(draw(st.sampled_from(HOMES)) for _ in tensors[1:])]
    if homes.count("mesh") == len(homes):
        homes[draw(st.integers(1, len(homes) - 1))] = draw(st.sampled_from(HOMES[1:]))
    other = draw(strategies.world_meshes(world_size))
    if other == (mesh_shape, mesh_ranks):  # another mesh: the ranks reversed, or reshaped
        reshaped = ([1, 1] if len(mesh_shape) == 1 else [1], mesh_ranks)
        other = (mesh_shape, mesh_ranks[::-1]) if world_size > 1 else reshaped
    placements = list(case["placements"])
    for i, home in enumerate(homes):
        if home == "plain":
            placements[i] = []
        elif home == "other":
            placements[i] = draw(input_placements(impl, other[0], tensors[i]))
    return {**case, "placements": placements, "homes": homes,
            "other_mesh": [list(other[0]), list(other[1])]}  # fmt: skip


@st.composite
def input_placements(draw, impl: Any, mesh_shape: list[int], tensor: torch.Tensor) -> list[str]:
    """One placement per mesh dim for an input, drawn apart from any other input, its kind drawn
    first (shards twice as often as the others): ``S(d)`` (negative ``d`` too), ``R``, strided
    shards where claimed, as FSDP stacks them on tensor parallelism (``_S(d, k)`` with ``S(d)``
    on a later mesh dim of size ``k``; a plain ``S(d)`` where no later dim is free), and one
    ``P(op)`` of those ``layouts.partial_kinds`` allows and the implementation claims."""
    ndim = tensor.dim()
    dtype = str(tensor.dtype).removeprefix("torch.")
    ops = _kinds(dtype, _headroom(tensor), mesh_shape, frozenset(impl.capabilities))
    kinds = ["S", "R", "S"] if ndim else ["R"]
    if ndim and "strided_shard" in impl.capabilities:
        kinds.append("_S")
    if ops:
        kinds.append(f"P({draw(st.sampled_from(ops))})")
    placements = [draw(st.sampled_from(kinds)) for _ in mesh_shape]
    for m, kind in enumerate(placements):
        if kind == "S":
            placements[m] = f"S({draw(st.integers(-ndim, ndim - 1))})"
        elif kind == "_S":
            d = draw(st.integers(0, ndim - 1))
            later = [x for x in range(m + 1, len(mesh_shape)) if placements[x] in ("S", "R")]
            if later:  # FSDP's strided shard of a dim a later mesh dim shards
                tp = draw(st.sampled_from(later))
                placements[m], placements[tp] = f"_S({d}, {mesh_shape[tp]})", f"S({d})"
            else:
                placements[m] = f"S({d})"
    return placements


# -- the cover -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cover:
    """One op's covering examples, ``(world size, case, classes)``; the pairs they hold
    (``held``) of the pairs of ``paired`` families its situations offer class by class
    (``offered``): the rest no construction gives (an ``R`` first argument never meets a partial
    fed to it, say)."""

    examples: tuple[tuple[int, dict[str, Any], frozenset[str]], ...]
    held: frozenset[covering.Pair]
    offered: frozenset[covering.Pair]


# Situations a missing pair is tried in before it is taken for one no construction gives.
TRIES = 40


def cover(op: str, variant: str, world_sizes: Sequence[int], capabilities: frozenset[str]) -> Cover:
    """Examples that hold every pair of classes of ``paired`` families that some situation of
    the op gives: for each pair still missing, in a fixed order, a case of a situation that
    offers it (``_offers``) with a class of every other family chosen to hold as many missing
    pairs as it can (``_build_for``)."""
    chosen = families(op, variant)
    wanted_families = paired(chosen)
    offered = [(s, offer) for s in _distinct(op, variant, tuple(world_sizes))
               if (offer := _offers(op, variant, s, capabilities, chosen))]  # fmt: skip
    pairs = [_pairs(offer, wanted_families) for _, offer in offered]
    wanted = set().union(*pairs) if pairs else set()
    held: set[covering.Pair] = set()
    examples = []
    for p in sorted(wanted, key=sorted):
        if p in held:
            continue
        places = [(s, offer) for (s, offer), there in zip(offered, pairs, strict=True)
                  if p in there]  # fmt: skip
        for s, offer in _by_mesh(places)[:TRIES]:
            built = _build_for(op, variant, s, offer, p, wanted - held, capabilities)
            if built is not None:
                case, got = built
                examples.append((s.world_size, case, got))
                held |= covering.drawn([got]) & wanted
                break
    return Cover(tuple(examples), frozenset(held), frozenset(wanted))


def _by_mesh(places: list[tuple[Situation, Any]]) -> list[tuple[Situation, Any]]:
    """``places`` with the first of each mesh before the second of any: a pair one mesh cannot
    hold (a shard and a partial of one argument need two mesh dims of more than one coordinate)
    is tried on every mesh early."""
    groups: dict[tuple, list[tuple[Situation, Any]]] = {}
    for place in places:
        groups.setdefault((place[0].mesh_shape, place[0].mesh_ranks), []).append(place)
    return [place for row in itertools.zip_longest(*groups.values()) for place in row if place]


def _distinct(op: str, variant: str, world_sizes: tuple[int, ...]) -> list[Situation]:
    """The op's situations, one of each kind: samples alike in what a draw reads of them
    (dtype, shapes, anatomy, number forms) give the same cases, so the first stands for all."""
    seen, kept = set(), []
    for s in situations(op, variant, world_sizes):
        kind = (s.dtype, s.world_size, s.mesh_shape, s.mesh_ranks,
                _facts(op, s.dtype, s.index).shapes, anatomy.of(op, s.dtype, s.index),
                anatomy.number_forms(op, s.dtype, s.index, variant))  # fmt: skip
        if kind not in seen:
            seen.add(kind)
            kept.append(s)
    return kept


def _offers(
    op: str, variant: str, s: Situation, capabilities: frozenset[str], chosen: list[str]
) -> dict[str, set[str]]:
    """Per family, the classes a case of this situation can hold, each on its own."""
    facts = _facts(op, s.dtype, s.index)
    body = anatomy.of(op, s.dtype, s.index)
    strided = "strided_shard" in capabilities
    everywhere = range(len(s.mesh_shape))
    offer: dict[str, set[str]] = {family: set() for family in chosen}
    for k, shape in enumerate(facts.shapes[:ARGS]):
        kinds = _kinds(facts.dtypes[k], facts.headroom[k], s.mesh_shape, capabilities)
        offer[f"op arg {k}"] = {
            f"op arg {k}: {c}"
            for c in layouts.CLASSES
            if next(layouts.realizations(shape, s.mesh_shape, c, kinds, strided, everywhere),
                    None) is not None
        }  # fmt: skip
    if "op numbers" in offer:
        forms = anatomy.number_forms(op, s.dtype, s.index, variant)
        for j in range(1, len(facts.shapes)):
            kinds = set(forms[j]) | ({"0-d"} if not facts.shapes[j] else set())
            if "0-d" in kinds and variant == "plain":
                kinds.add("plain")
            offer["op numbers"] |= {f"op numbers: {layouts.NUMBERS[k]}" for k in kinds}
    n = len(facts.shapes)
    fixed: list[dict[int, str] | None] = [{} for _ in range(n)]
    for c in layouts.CORRELATIONS:
        plan = Plan(s, [None] * n, ["mesh"] * n, c, [None] * n)
        ways = _correlated(body, plan, fixed, list(facts.shapes), facts, capabilities, strided)
        if c == "drawn apart" or next(ways, None) is not None:
            offer["op layouts"].add(f"op layouts: {c}")
    offer["mesh"] = _mesh_labels(s.mesh_shape, s.mesh_ranks)
    return offer


def _pairs(offer: dict[str, set[str]], families: list[tuple[str, str]]) -> set[covering.Pair]:
    return {
        covering.pair(a, b)
        for first, second in families
        for a in offer.get(first, ())
        for b in offer.get(second, ())
    }


def _build_for(
    op: str, variant: str, s: Situation, offer: dict[str, set[str]], p: covering.Pair,
    missing: set[covering.Pair], capabilities: frozenset[str],
) -> tuple[dict[str, Any], frozenset[str]] | None:  # fmt: skip
    """A case of situation ``s`` that holds the pair ``p`` and, family by family, the class
    that holds the most ``missing`` pairs with those chosen before it, where a case can hold
    them all (of the three best, the first that can; a family none of whose classes adds a
    pair is left to ``R``, no number)."""
    best = _built(op, variant, s, set(p) | offer["mesh"], capabilities)
    if best is None:
        return None
    picked = set(p) | offer["mesh"]
    for family, classes in offer.items():
        if family == "mesh" or picked & classes:
            continue
        gain = {c: len({covering.pair(c, x) for x in picked} & missing) for c in sorted(classes)}
        for c in sorted((c for c in gain if gain[c]), key=lambda c: -gain[c])[:3]:
            built = _built(op, variant, s, picked | {c}, capabilities)
            if built is not None:
                picked.add(c)
                best = built
                break
    return best


def _built(
    op: str, variant: str, s: Situation, wanted: set[str], capabilities: frozenset[str]
) -> tuple[dict[str, Any], frozenset[str]] | None:
    """A case of situation ``s`` whose classes include ``wanted``, from the first ways of
    making them, then the second and the third."""
    plan = _plan(op, variant, s, wanted)
    for attempt in range(3) if plan else ():
        case = build(op, plan, capabilities, lambda ways, a=attempt: ways[min(a, len(ways) - 1)])
        if case is None:
            return None
        case["seed"] = 0
        got = frozenset(labels(op, case))
        if wanted <= got:
            return case, got
    return None


def _plan(op: str, variant: str, s: Situation, wanted: set[str]) -> Plan | None:
    """The plan of a case that holds the classes ``wanted``, or ``None`` where no argument can
    take the number they name."""
    facts = _facts(op, s.dtype, s.index)
    n = len(facts.shapes)
    scalars: list[str | None] = [None] * n
    homes = ["mesh"] * n
    targets: list[str | None] = [None] * n
    correlation = None
    number = None
    for label in wanted:
        family, _, value = label.partition(": ")
        if family.startswith("op arg "):
            targets[int(family.removeprefix("op arg "))] = value
        elif family == "op layouts":
            correlation = value
        elif family == "op numbers":
            number = next(k for k, text in layouts.NUMBERS.items() if text == value)
    if number is not None:
        forms = anatomy.number_forms(op, s.dtype, s.index, variant)
        form = "0-d" if number == "plain" else number
        for j in range(1, n):
            native = not facts.shapes[j] and form == "0-d"
            if native or form in forms[j]:
                scalars[j] = None if native else form
                homes[j] = "plain" if number == "plain" else "mesh"
                if form != "0-d":
                    targets[j] = None
                break
        else:
            return None
    return Plan(s, scalars, homes, correlation, targets)
