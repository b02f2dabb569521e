"""ShardedTensor collectives (spec/st-lifecycle.md, st-gather.md, st-reshard.md): verdicts and
what every rank holds afterwards.

Models ST-LIFE-1, 7 to 10, 12, 15; ST-GATHER-1 to 9; ST-RESHARD-1 to 10. Per-rank arguments and
results are keyed by global rank; ``group`` lists the group's global ranks in group-rank order.
Data moves exactly, so results are plain slices of the global tensor (ERR-10).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from conformance.oracle.st_metadata import ShardMeta, TensorMeta
from conformance.oracle.st_sharding_spec import (
    ChunkSpec,
    EnumerableSpec,
    Spec,
    build_metadata,
    build_metadata_verdict,
    placement_ranks,
)
from conformance.oracle.st_validation import TensorInfo, layout_verdict
from conformance.oracle.tensors import torch_dtype
from conformance.oracle.vocabulary import (
    VALID,
    Verdict,
    is_int,
    type_error,
    unsupported,
    value_error,
)


def box(tensor: torch.Tensor, shard: ShardMeta) -> torch.Tensor:
    """``x[box(o, s)]``: the narrowed view of a shard's box (vocabulary.md)."""
    for d, (o, n) in enumerate(zip(shard.offsets, shard.sizes, strict=True)):
        tensor = tensor.narrow(d, o, n)
    return tensor


def local_shards(meta: TensorMeta, rank: int) -> list[ShardMeta]:
    """The entries a rank holds, in ``shards_metadata`` order (ST-LIFE-1, ST-LIFE-15,
    ST-SPEC-9)."""
    return [s for s in meta.shards if s.rank == rank]


def shard_tensor(
    global_tensor: torch.Tensor, meta: TensorMeta, group: Sequence[int]
) -> dict[int, list[torch.Tensor]]:
    """Every rank's local tensors when ``global_tensor`` is laid out by ``meta``: the boxes,
    copied (ST-LIFE-7 with the source's tensor, ST-RESHARD-1)."""
    return {r: [box(global_tensor, s).clone() for s in local_shards(meta, r)] for r in group}


def gather(meta: TensorMeta, locals_: Mapping[int, Sequence[torch.Tensor]]) -> torch.Tensor:
    """The inverse of ``shard_tensor``: ``out`` on ``dst`` after a gather, each shard's local
    tensor written into its box (ST-GATHER-1, 9)."""
    out = torch.empty(meta.size, dtype=torch_dtype(meta.properties.dtype))
    taken = {r: iter(ts) for r, ts in locals_.items()}
    for s in meta.shards:
        box(out, s).copy_(next(taken[s.rank]))
    return out


# -- shard (ST-LIFE-7 to 10) -----------------------------------------------------------------------


def shard_verdict(
    specs: Mapping[int, Spec],
    src_ranks: Mapping[int, Any],
    tensors: Mapping[int, TensorInfo],
    group: Sequence[int],
) -> Verdict:
    """Whether ``shard(tensors[r], specs[r], src_ranks[r])`` succeeds on every member.

    Check order: ST-LIFE-8 (``src_rank`` a group rank), ST-LIFE-9 (one ``src_rank``, one spec),
    ST-LIFE-10 (one shape and dtype), the spec against the shape (ST-SPEC-6, or the tiling of an
    enumerable spec), the layout's placements (ST-VALID-13, 12), then ST-SPEC-13 (an enumerable
    spec may be declined)."""
    # ST-LIFE-8 (a src_rank that is not an int is a TypeError, ERR-2)
    if any(not is_int(src_ranks[r]) for r in group):
        return type_error("ST-LIFE-8")
    if any(not 0 <= src_ranks[r] < len(group) for r in group):
        return value_error("ST-LIFE-8")
    # ST-LIFE-9
    if len({src_ranks[r] for r in group}) > 1 or len({specs[r] for r in group}) > 1:
        return value_error("ST-LIFE-9")
    # ST-LIFE-10
    if len({(tensors[r].shape, tensors[r].dtype) for r in group}) > 1:
        return value_error("ST-LIFE-10")
    spec, size = specs[group[0]], tensors[group[0]].shape
    if not (v := build_metadata_verdict(spec, size)).ok:
        return v
    if not (v := layout_verdict(build_metadata(spec, size), group)).ok:
        return v
    # ST-SPEC-13
    return unsupported("ST-SPEC-13") if isinstance(spec, EnumerableSpec) else VALID


# -- gather (ST-GATHER) ----------------------------------------------------------------------------


def gather_verdict(
    meta: TensorMeta,
    group: Sequence[int],
    dst: Mapping[int, Any],
    out: Mapping[int, Any],
) -> Verdict:
    """Whether ``t.gather(dst[r], out[r])`` succeeds on every member of ``group``; ``out``
    values are ``None``, a ``TensorInfo``, or anything else (not a tensor).

    Check order: ST-GATHER-3 (``dst`` an int, then in ``[0, P)``), ST-GATHER-4 (one ``dst``),
    ST-GATHER-5 (a tensor ``out`` on ``dst``, then of the global shape), ST-GATHER-6 (of the
    dtype), ST-GATHER-7 (``None`` elsewhere)."""
    # ST-GATHER-3
    if not all(is_int(dst[r]) for r in group):
        return type_error("ST-GATHER-3")
    if not all(0 <= dst[r] < len(group) for r in group):
        return value_error("ST-GATHER-3")
    # ST-GATHER-4
    if len({dst[r] for r in group}) > 1:
        return value_error("ST-GATHER-4")
    root = group[dst[group[0]]]
    buffer = out.get(root)
    # ST-GATHER-5
    if buffer is not None and not isinstance(buffer, TensorInfo):
        return type_error("ST-GATHER-5")
    if buffer is None or buffer.shape != meta.size:
        return value_error("ST-GATHER-5")
    # ST-GATHER-6
    if buffer.dtype != meta.properties.dtype:
        return value_error("ST-GATHER-6")
    # ST-GATHER-7
    if any(out.get(r) is not None for r in group if r != root):
        return value_error("ST-GATHER-7")
    return VALID


# -- reshard (ST-RESHARD) --------------------------------------------------------------------------


def reshard_verdict(
    spec: Spec, new_spec: Any, size: Sequence[int], group: Sequence[int]
) -> Verdict:
    """Whether ``t.reshard(new_spec)`` succeeds for a valid ``t`` built by ``spec``.

    Check order: ST-RESHARD-9 (``new_spec`` a spec; then its ``dim`` in range and its placements
    members of ``group``), ST-RESHARD-7 (both specs chunk specs), ST-RESHARD-8 (both name every
    member once). 7 and 8 are NotImplementedErrors an implementation MAY lift (then
    ``reshard`` gives the result)."""
    # ST-RESHARD-9
    if not isinstance(new_spec, ChunkSpec | EnumerableSpec):
        return type_error("ST-RESHARD-9")
    if isinstance(new_spec, ChunkSpec) and not -len(size) <= new_spec.dim < len(size):
        return value_error("ST-RESHARD-9")
    if any(r not in group for r in placement_ranks(new_spec)):
        return value_error("ST-RESHARD-9")
    # ST-RESHARD-7
    if not (isinstance(spec, ChunkSpec) and isinstance(new_spec, ChunkSpec)):
        return unsupported("ST-RESHARD-7")
    # ST-RESHARD-8
    members = sorted(group)
    if any(sorted(placement_ranks(s)) != members for s in (spec, new_spec)):
        return unsupported("ST-RESHARD-8")
    return VALID


def reshard_verdict_by_rank(
    spec: Spec, new_specs: Mapping[int, Any], size: Sequence[int], group: Sequence[int]
) -> Verdict:
    """Whether ``t.reshard(new_specs[rank])`` on every member succeeds, the members passing
    possibly different specs (keyed by global rank).

    Check order: each member's own spec as in ``reshard_verdict``, in group order, then
    ST-RESHARD-9 again: the new spec is equal on every member."""
    for rank in group:
        if not (v := reshard_verdict(spec, new_specs[rank], size, group)).ok:
            return v
    # ST-RESHARD-9
    if any(new_specs[rank] != new_specs[group[0]] for rank in group):
        return value_error("ST-RESHARD-9")
    return VALID


def reshard(
    global_tensor: torch.Tensor, meta: TensorMeta, new_spec: Spec, group: Sequence[int]
) -> tuple[TensorMeta, dict[int, list[torch.Tensor]]]:
    """The result of resharding a tensor of layout ``meta`` holding ``global_tensor``: gather,
    then shard by ``new_spec``, keeping size and properties (ST-RESHARD-1 to 5, 10, 11)."""
    new_meta = build_metadata(new_spec, meta.size, meta.properties)
    return new_meta, shard_tensor(global_tensor, new_meta, group)


# -- construction from a spec (ST-LIFE-3 to 6) -----------------------------------------------------


def create_verdict(
    specs: Mapping[int, Any],
    sizes: Mapping[int, Sequence[Any]],
    options: Mapping[int, Mapping[str, Any]],
    group: Sequence[int],
) -> Verdict:
    """Whether ``st.zeros(specs[r], *sizes[r], **options[r])`` (or ``empty/ones/full``)
    succeeds on every member; ``options`` hold ``dtype``, ``layout``, ``memory_format``,
    ``requires_grad`` as names and values.

    Check order: ST-LIFE-5 (a spec), ST-LIFE-3 (int sizes, then non-negative), ST-LIFE-4
    (strided and contiguous only), ST-LIFE-6 (one spec, size and options), then the spec against
    the size (ST-SPEC-6, 12) and the layout's placements (ST-VALID-13, 12)."""
    # ST-LIFE-5
    if any(not isinstance(specs[r], ChunkSpec | EnumerableSpec) for r in group):
        return type_error("ST-LIFE-5")
    # ST-LIFE-3
    if any(not is_int(n) for r in group for n in sizes[r]):
        return type_error("ST-LIFE-3")
    if any(n < 0 for r in group for n in sizes[r]):
        return value_error("ST-LIFE-3")
    # ST-LIFE-4
    if any(
        options[r].get("layout", "strided") != "strided"
        or options[r].get("memory_format", "contiguous_format") != "contiguous_format"
        for r in group
    ):
        return unsupported("ST-LIFE-4", optional=False)
    # ST-LIFE-6
    if len({(specs[r], tuple(sizes[r]), tuple(sorted(options[r].items()))) for r in group}) > 1:
        return value_error("ST-LIFE-6")
    spec, size = specs[group[0]], sizes[group[0]]
    if not (v := build_metadata_verdict(spec, size)).ok:
        return v
    return layout_verdict(build_metadata(spec, size), group)
