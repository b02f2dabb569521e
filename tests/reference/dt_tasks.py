"""Tasks the DTensor tests send to ranks, and the dense oracle the driver checks them against.

Tasks build their inputs from plain data (shapes, rank lists, placement strings) so every case
can be replayed; they return local tensors and the driver compares each one with ``block``,
which slices the global tensor from the spec's definition without using ``reference.dtensor``.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from conformance.benchmarks.dtensor import counting_receives
from conformance.world import RankContext
from reference.dtensor import DeviceMesh, DTensor, distribute_tensor, factories, interop
from reference.dtensor import placements as pl

# -- the oracle (spec/dt-layout.md, Semantics, written from scratch) ---------------------------


def oracle_indices(global_shape, mesh_shape, placements: str, coordinate) -> list[list[int]]:
    """Each dim's global indices held at ``coordinate``: chunk rule, nested left to right."""
    indices = [list(range(n)) for n in global_shape]
    for placement, k, c in zip(pl.parse(placements), mesh_shape, coordinate, strict=True):
        if isinstance(placement, pl.Replicate | pl.Partial):
            continue
        dim = placement.dim % len(global_shape)
        pieces = [indices[dim]]
        if isinstance(placement, pl.StridedShard):
            f = placement.split_factor
            size = -(-len(indices[dim]) // f)
            pieces = [indices[dim][p * size : (p + 1) * size] for p in range(f)]
        kept = []
        for piece in pieces:
            size = -(-len(piece) // k)
            kept += piece[c * size : (c + 1) * size]
        indices[dim] = kept
    return indices


def block(full: torch.Tensor, mesh_shape, placements: str, coordinate) -> torch.Tensor:
    """The global tensor indexed by the coordinate's index sequences (DT-LAYOUT-12)."""
    out = full
    for dim, idx in enumerate(oracle_indices(full.shape, mesh_shape, placements, coordinate)):
        out = out.index_select(dim, torch.tensor(idx, dtype=torch.long))
    return out


def global_tensor(shape, dtype: str = "float64") -> torch.Tensor:
    """Distinct values, 1 upwards, so a misplaced element is always visible."""
    numel = 1
    for n in shape:
        numel *= n
    return (torch.arange(numel, dtype=torch.float64) + 1).reshape(shape).to(getattr(torch, dtype))


def coordinates(mesh_shape) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(k) for k in mesh_shape)))


def partial_factor(mesh_shape, placements: str, coordinate) -> int:
    """Coordinate's multiplier of a ``P`` source: 1 + its row-major index over the ``P`` dims."""
    index = 0
    for p, k, c in zip(pl.parse(placements), mesh_shape, coordinate, strict=True):
        if isinstance(p, pl.Partial):
            index = index * k + c
    return index + 1


def logical(full: torch.Tensor, mesh_shape, placements: str) -> torch.Tensor:
    """The value a ``source`` DTensor stands for: the reduction of ``full * (q + 1)``."""
    parsed = pl.parse(placements)
    n = 1
    for p, k in zip(parsed, mesh_shape, strict=True):
        n *= k if isinstance(p, pl.Partial) else 1
    op = next((p.reduce_op for p in parsed if isinstance(p, pl.Partial)), None)
    if op is None:
        return full
    if op == "product":
        return full**n * torch.arange(1, n + 1).prod().item()
    factor = {"sum": n * (n + 1) // 2, "avg": (n + 1) / 2, "min": 1, "max": n}[op]
    return full * factor


# -- rank-side helpers ------------------------------------------------------------------------


def mesh_of(ctx: RankContext, shape, ranks, names=None) -> DeviceMesh:
    key = ("mesh", tuple(shape), tuple(ranks), None if names is None else tuple(names))
    return ctx.cached(
        key,
        lambda: DeviceMesh("cpu", torch.tensor(ranks).reshape(shape), mesh_dim_names=names),
    )


def source(ctx, mesh: DeviceMesh, shape, placements: str, dtype: str) -> DTensor:
    """A DTensor of ``global_tensor(shape)``; ``P`` dims hold it times ``partial_factor``."""
    full = global_tensor(shape, dtype)
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        return distribute_tensor(full, mesh, pl.parse(placements), src_data_rank=None)
    local = block(full, mesh.shape, placements, coordinate)
    local = local * partial_factor(mesh.shape, placements, coordinate)
    return DTensor.from_local(
        local, mesh, pl.parse(placements), shape=full.shape, stride=full.stride()
    )


# -- tasks --------------------------------------------------------------------------------------


def mesh_facts(ctx: RankContext, shape, ranks, names=None) -> dict[str, Any]:
    mesh = mesh_of(ctx, shape, ranks, names)
    inside = mesh.get_coordinate() is not None
    return {
        "ndim": mesh.ndim,
        "size": mesh.size(),
        "sizes": [mesh.size(i) for i in range(mesh.ndim)],
        "mesh": mesh.mesh.tolist(),
        "names": mesh.mesh_dim_names,
        "coordinate": mesh.get_coordinate(),
        "groups": [mesh.members(i) for i in range(mesh.ndim)] if inside else None,
        "local_ranks": [mesh.get_local_rank(i) for i in range(mesh.ndim)] if inside else None,
        "sub": {n: mesh[n].mesh.tolist() for n in names} if names and inside else None,
    }


def make_mesh(ctx: RankContext, mesh: Any, names=None, per_rank: dict | None = None) -> list:
    """Construct a (possibly invalid) mesh; no caching, the point is the verdict."""
    mesh = per_rank[str(ctx.rank)] if per_rank else mesh
    return DeviceMesh("cpu", mesh, mesh_dim_names=names).mesh.tolist()


def redistribute_pairs(
    ctx: RankContext, mesh_shape, ranks, shape, pairs, dtype: str = "float64"
) -> list[dict[str, Any]]:
    """For each ``(source, target)``: the result's local tensor and placements, and whether the
    source's local tensor survived unchanged (DT-REDIST-12)."""
    mesh = mesh_of(ctx, mesh_shape, ranks)
    out = []
    for src, tgt in pairs:
        d = source(ctx, mesh, shape, src, dtype)
        before = d.to_local().clone()
        r = d.redistribute(mesh, pl.parse(tgt))
        out.append(
            {
                "local": r.to_local(),
                "placements": pl.show(r.placements),
                "shape": list(r.shape),
                "stride": list(r.stride()),
                "dtype": str(r.dtype),
                "source_kept": torch.equal(before, d.to_local())
                and pl.show(d.placements)
                == pl.show(pl.normalize(pl.parse(src), len(shape), mesh.ndim)),
                "full": d.full_tensor(),
                "result_full": r.full_tensor(),
            }
        )
    return out


def distribute(
    ctx: RankContext, mesh_shape, ranks, shape, placements: str, src_data_rank=0, dtype="float64"
) -> dict[str, Any]:
    """distribute_tensor of ``global_tensor + 100 * rank``: only the source's values may win
    (with ``src_data_rank=None`` every rank passes ``global_tensor``)."""
    mesh = mesh_of(ctx, mesh_shape, ranks)
    t = global_tensor(shape, dtype) + (0 if src_data_rank is None else 100 * ctx.rank)
    kept = t.clone()
    d = distribute_tensor(t, mesh, pl.parse(placements), src_data_rank=src_data_rank)
    return {
        "local": d.to_local(),
        "shape": list(d.shape),
        "stride": list(d.stride()),
        "placements": pl.show(d.placements),
        "input_kept": torch.equal(t, kept),
        "full": d.full_tensor(),
    }


def from_local(
    ctx: RankContext,
    mesh_shape,
    ranks,
    locals_by_rank: dict,
    placements: str,
    run_check: bool,
    shape=None,
    stride=None,
    dtype_by_rank: dict | None = None,
) -> dict[str, Any]:
    """from_local of ``locals_by_rank[str(rank)]`` (a nested list)."""
    mesh = mesh_of(ctx, mesh_shape, ranks)
    dtype = (dtype_by_rank or {}).get(str(ctx.rank), "float64")
    local = torch.tensor(locals_by_rank[str(ctx.rank)], dtype=getattr(torch, dtype))
    kept = local.clone()
    d = DTensor.from_local(
        local, mesh, pl.parse(placements), run_check=run_check, shape=shape, stride=stride
    )
    return {
        "local": d.to_local(),
        "shape": list(d.shape),
        "stride": list(d.stride()),
        "placements": pl.show(d.placements),
        "input_kept": torch.equal(local, kept),
        "full": d.full_tensor(),
    }


def call(ctx: RankContext, api: str, mesh_shape, ranks, shape, placements, **kw) -> None:
    """Make one (possibly invalid) call; per-rank arguments come as ``{"rank": value}`` dicts."""
    mesh = mesh_of(ctx, mesh_shape, ranks)
    kw = {k: v[str(ctx.rank)] if isinstance(v, dict) else v for k, v in kw.items()}
    placements = placements[str(ctx.rank)] if isinstance(placements, dict) else placements
    if api == "distribute":
        dtype = getattr(torch, kw.pop("dtype", "float64"))
        distribute_tensor(global_tensor(shape).to(dtype), mesh, pl.parse(placements), **kw)
    elif api == "from_local":
        local = torch.ones(kw.pop("local_shape"), dtype=getattr(torch, kw.pop("dtype", "float64")))
        shape = kw.pop("from_shape", None)
        DTensor.from_local(local, mesh, pl.parse(placements), shape=shape, **kw)
    elif api == "redistribute":
        d = source(ctx, mesh, shape, placements, kw.pop("dtype", "float64"))
        target = kw.pop("target")
        other = kw.pop("other_mesh", None)
        d.redistribute(
            mesh if other is None else mesh_of(ctx, mesh_shape, other),
            None if target is None else pl.parse(target),
        )
    else:
        source(ctx, mesh, shape, placements, kw.pop("dtype", "float64")).full_tensor()


def traffic(ctx: RankContext, mesh_shape, ranks, shape, src: str, tgt: str) -> int:
    """The bytes this rank receives during the redistribution, counted at the collectives."""
    mesh = mesh_of(ctx, mesh_shape, ranks)
    d = source(ctx, mesh, shape, src, "float32")
    with counting_receives() as received:
        d.redistribute(mesh, pl.parse(tgt))
    return received[0]


def factory(ctx: RankContext, op: str, size, placements: str, dtype: str) -> dict[str, Any]:
    """``reference.dtensor.<op>`` on the 1-D mesh of every rank but the last; the local tensor
    and the logical value (``full_tensor``, in-mesh)."""
    mesh = mesh_of(ctx, [ctx.world_size - 1], list(range(ctx.world_size - 1)))
    made = getattr(factories, op)(size, device_mesh=mesh, placements=pl.parse(placements),
                                  dtype=getattr(torch, dtype))  # fmt: skip
    inside = mesh.get_coordinate() is not None
    return {"local": made.to_local(), "full": made.full_tensor() if inside else None}


def checkpoint_plan(ctx: RankContext, shape, mesh_shape, ranks, placements: str) -> dict[str, Any]:
    """The checkpoint plan of a DTensor of ``global_tensor(shape)``, and the bytes this rank
    received while planning it."""
    mesh = mesh_of(ctx, mesh_shape, ranks)
    dtensor = source(ctx, mesh, shape, placements, "float32")
    with counting_receives() as received:
        plan = interop.checkpoint_plan(dtensor)
    boxes = [(m.shard_offsets, m.shard_sizes, str(m.placement)) for m in plan.shards_metadata]
    kept = [list(plan.size), plan.tensor_properties.dtype]
    return {"boxes": boxes, "size_and_dtype": kept, "received": received[0]}


def op_placements(ctx: RankContext, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call ``{"op", "inputs": [[shape, placements], ...], "args"}`` of the reference's
    dispatch on a 1-D mesh of the world, its inputs distributed from ``global_tensor``s (the
    second one negated, so two inputs differ), a list among the args as a tensor: the output's
    placements, global stride, local tensor and full tensor, and whether the inputs kept their
    local tensors."""
    from reference.dtensor import ops

    mesh = DeviceMesh("cpu", list(range(ctx.world_size)))
    seen = []
    for call in calls:
        inputs = [
            distribute_tensor(global_tensor(shape) * (-1) ** i, mesh, pl.parse(p))
            for i, (shape, p) in enumerate(call["inputs"])
        ]
        before = [d.to_local().clone() for d in inputs]
        args = [torch.tensor(a) if isinstance(a, list) else a for a in call["args"]]
        out = ops.call(getattr(torch, call["op"]), *inputs, *args)
        seen.append(
            {
                "placements": pl.show(out.placements),
                "stride": list(out.stride()),
                "local": out.to_local().clone(),
                "full": out.full_tensor(),
                "inputs_kept": all(
                    torch.equal(d.to_local(), b) for d, b in zip(inputs, before, strict=True)
                ),
            }
        )
    return seen


def op_in_place(ctx: RankContext) -> dict[str, Any]:
    """The reference's dispatch of in-place calls on a 1-D mesh of the world: ``x.add_(1)`` of a
    ``P(sum)`` ``x`` whose first coordinate holds the value, ``x.t_()`` of an ``S(0)`` one, and
    ``x.contiguous()`` (which returns its argument untouched, and writes nothing), and
    ``F.silu(x, inplace=True)`` of an empty ``x`` (an in-place call that changes nothing)."""
    from reference.dtensor import ops

    mesh = DeviceMesh("cpu", list(range(ctx.world_size)))
    value = global_tensor((5, 3))
    part = value if mesh.get_coordinate()[0] == 0 else torch.zeros_like(value)
    partial = DTensor.from_local(part, mesh, pl.parse("P(sum)"), run_check=False)
    added = ops.call(torch.Tensor.add_, partial, 1)
    sharded = distribute_tensor(value, mesh, pl.parse("S(0)"))
    transposed = ops.call(torch.Tensor.t_, sharded)
    kept = distribute_tensor(value, mesh, pl.parse("S(0)"))
    ops.call(torch.Tensor.contiguous, kept)
    empty = distribute_tensor(torch.zeros(0, 3), mesh, pl.parse("S(0)"))
    silu = ops.call(lambda x: torch.nn.functional.silu(x, inplace=True), empty)
    return {
        "add_ returned x": added is partial,
        "add_": partial.full_tensor(),
        "t_ returned x": transposed is sharded,
        "t_ shape": list(sharded.shape),
        "t_": sharded.full_tensor(),
        "contiguous kept": pl.show(kept.placements),
        "silu of an empty x returned x": silu is empty,
        "silu kept": pl.show(empty.placements),
    }


def op_out_and_mixing(ctx: RankContext) -> dict[str, Any]:
    """The reference's dispatch of ``torch.add(x, y, out=z)`` with ``z`` of other placements,
    and of ``x + p`` for a plain tensor ``p`` and ``x + e`` for ``e`` on the mesh of the same
    ranks in reverse order."""
    from reference.dtensor import ops

    value = global_tensor((4, 3))
    mesh = DeviceMesh("cpu", list(range(ctx.world_size)))
    reverse = DeviceMesh("cpu", list(reversed(range(ctx.world_size))))
    x = distribute_tensor(value, mesh, pl.parse("S(0)"))
    z = distribute_tensor(torch.zeros(4, 3, dtype=value.dtype), mesh, pl.parse("S(1)"))
    returned = ops.call(torch.add, x, x, out=z)
    plain = ops.call(torch.add, x, torch.ones(4, 3, dtype=value.dtype))
    other = ops.call(torch.add, x, distribute_tensor(value, reverse, pl.parse("S(1)")))
    return {
        "out returned z": returned is z,
        "out": z.full_tensor(),
        "out placements": pl.show(z.placements),
        "plain": plain.full_tensor(),
        "other mesh": other.full_tensor(),
        "other mesh's output on x's mesh": other.device_mesh is mesh,
    }


def grad_examples(ctx: RankContext) -> dict[str, Any]:
    """spec/dt-grad.md's worked examples on a world of 2, each a fresh leaf and one backward
    pass: what each leaf's gradient became, and its layout."""
    mesh = DeviceMesh("cpu", [0, 1])
    rank = ctx.rank
    seen: dict[str, Any] = {}

    d = distribute_tensor(torch.arange(4.0, requires_grad=True), mesh, pl.parse("S(0)"))
    seen["distribute is a leaf"] = d.requires_grad and d.is_leaf
    h = torch.tensor([1.0, 2.0, 3.0, 4.0])
    for _ in range(2):  # DT-GRAD-2: a second pass adds to .grad
        (d.full_tensor() * h).sum().backward()
        seen.setdefault("grad after one pass", d.grad.full_tensor())
    seen["grad after two passes"] = d.grad.full_tensor()
    seen["grad placements"] = pl.show(d.grad.placements)
    seen["grad local"] = d.grad.to_local().clone()

    r = distribute_tensor(torch.tensor([1.0, 2.0], requires_grad=True), mesh, pl.parse("R"))
    y = r.to_local(grad_placements=pl.parse("P(sum)"))  # DT-GRAD-3
    (y * torch.tensor([[1.0, 0.0], [0.0, 3.0]])[rank]).sum().backward()
    seen["to_local in parts"] = r.grad.full_tensor()

    t = torch.ones(2, requires_grad=True)  # DT-GRAD-4
    p = DTensor.from_local(t, mesh, pl.parse("P(sum)"))
    (p.full_tensor() * torch.tensor([1.0, 2.0])).sum().backward()
    seen["from_local default"] = t.grad.clone()
    u = torch.ones(2, requires_grad=True)
    q = DTensor.from_local(u, mesh, pl.parse("P(sum)"), grad_placements=pl.parse("P(sum)"))
    (q.full_tensor() * torch.tensor([1.0, 2.0])).sum().backward()
    seen["from_local in parts"] = u.grad.clone()

    part = torch.tensor([[1.0, 1.0], [2.0, 2.0]])[rank].requires_grad_()  # DT-GRAD-5
    s = DTensor.from_local(part, mesh, pl.parse("P(sum)")).redistribute(mesh, pl.parse("S(0)"))
    (s.full_tensor() * torch.tensor([5.0, 7.0])).sum().backward()
    seen["redistribute back"] = part.grad.clone()

    plain = distribute_tensor(torch.ones(3), mesh, pl.parse("S(0)"))  # DT-GRAD-1
    moved = plain.redistribute(mesh, pl.parse("R"))
    seen["nothing requires grad"] = [plain.requires_grad, moved.requires_grad,
                                     moved.to_local().requires_grad, plain.grad]  # fmt: skip
    return seen


def op_grad_examples(ctx: RankContext) -> dict[str, Any]:
    """spec/dt-grad.md's examples of DT-GRAD-6 and 7 on a world of 2: which outputs require
    grad, and the gradients of ``mm`` of a column-sharded and a row-sharded leaf."""
    from reference.dtensor import ops

    mesh = DeviceMesh("cpu", [0, 1])
    w = distribute_tensor(torch.ones(4, 3, requires_grad=True), mesh, pl.parse("S(0)"))
    x = distribute_tensor(torch.ones(2, 3), mesh, pl.parse("R"))
    values, indices = ops.call(torch.max, w, 1)
    a = distribute_tensor(torch.arange(6.0).reshape(2, 3).requires_grad_(), mesh, pl.parse("S(1)"))
    b = distribute_tensor(torch.ones(3, 2, requires_grad=True), mesh, pl.parse("S(0)"))
    product = ops.call(torch.mm, a, b)
    torch.autograd.backward([product.full_tensor()], [torch.ones(2, 2)])
    return {
        "requires grad": [
            ops.call(torch.mm, x, ops.call(torch.t, w)).requires_grad,
            values.requires_grad,
            indices.requires_grad,
        ],
        "product placements": pl.show(product.placements),
        "a.grad": a.grad.full_tensor(),
        "b.grad": b.grad.full_tensor(),
        "grad placements": [pl.show(a.grad.placements), pl.show(b.grad.placements)],
    }


def tour_grad(ctx: RankContext) -> tuple[str, torch.Tensor]:
    """spec/tour.md section 7 on the tour's mesh: ``d.grad``'s placements and local tensor."""
    from reference import tour

    mesh = mesh_of(ctx, tour.MESH_SHAPE, tour.RANKS)
    d = distribute_tensor(tour.global_tensor().requires_grad_(), mesh, tour.SOURCE)
    (d.full_tensor() * tour.weights()).sum().backward()
    return pl.show(d.grad.placements), d.grad.to_local().detach().clone()


def random_examples(ctx: RankContext) -> dict[str, Any]:
    """spec/dt-random.md's worked examples on a world of 2, each after ``torch.manual_seed(0)``:
    what each rank holds, and what a plain draw that follows gives."""
    from reference.dtensor import ops, random

    mesh = DeviceMesh("cpu", [0, 1])
    seen: dict[str, Any] = {}

    torch.manual_seed(0)  # DT-RAND-7: the single-device draw, the generator where it leaves it
    d = random.rand([4], device_mesh=mesh, placements=pl.parse("S(0)"))
    seen["rand S(0)"] = d.to_local().clone()
    seen["rand then"] = torch.rand(1)

    torch.manual_seed(0)  # DT-RAND-1, DT-RAND-6: in place, uneven, generators alike after
    u = distribute_tensor(torch.zeros(3), mesh, pl.parse("S(0)"))
    seen["uniform_ is d"] = ops.call(torch.Tensor.uniform_, u) is u
    seen["uniform_ placements"] = pl.show(u.placements)
    seen["uniform_ local"] = u.to_local().clone()
    seen["uniform_ then"] = torch.rand(2)

    torch.manual_seed(0)  # DT-RAND-2, DT-RAND-3: a partial draw holds t / 2 on each rank
    p = random.rand([4], device_mesh=mesh, placements=pl.parse("P(sum)"))
    seen["rand P(sum) local"] = p.to_local().clone()
    seen["rand P(sum) value"] = p.full_tensor()

    torch.manual_seed(0)  # DT-RAND-5: the same seed, whatever ran before it
    first = random.randn([4], device_mesh=mesh, placements=pl.parse("S(0)")).to_local()
    torch.rand(7)
    torch.manual_seed(0)
    again = random.randn([4], device_mesh=mesh, placements=pl.parse("S(0)")).to_local()
    seen["same seed, same draw"] = torch.equal(first, again)

    torch.manual_seed(1)  # dropout keeps a partial input partial: its mask scales every part
    x = DTensor.from_local(torch.ones(4), mesh, pl.parse("P(sum)"))
    y = ops.call(torch.nn.functional.dropout, x, 0.5)
    seen["dropout placements"] = pl.show(y.placements)
    seen["dropout value"] = y.full_tensor()
    torch.manual_seed(1)
    seen["dropout single-device"] = torch.nn.functional.dropout(torch.full((4,), 2.0), 0.5)
    return seen
