"""Placements: how the coordinates along one mesh dim share a tensor (spec/dt-placements.md).

Each placement is a frozen value: equal parameters mean equal placements and equal hashes
(DT-PLACE-8), and ``str`` gives the short form the spec writes (DT-PLACE-9). ``normalize`` is the
one place where every API checks a placement list against a tensor and a mesh. What a strided
shard holds is a layout question, answered in ``layout.py``.

Rules and where they live:

- DT-PLACE-1, DT-PLACE-6: ``normalize``
- DT-PLACE-2, DT-PLACE-3: ``_normalize_one``
- DT-PLACE-4, ERR-2: ``_require_int``, ``Shard.__post_init__``, ``StridedShard.__post_init__``,
  ``Partial.__post_init__``
- DT-PLACE-5: ``REDUCE_OPS``, ``Partial.__post_init__``
- DT-PLACE-7: ``StridedShard.__post_init__``
- DT-PLACE-8: ``Shard``, ``StridedShard``, ``Replicate``, ``Partial`` (frozen dataclasses)
- DT-PLACE-9: ``parse``, ``show``, ``Shard.__str__``, ``StridedShard.__str__``,
  ``Replicate.__str__``, ``Partial.__str__``
- DT-PLACE-12: see ``reference.dtensor.layout``
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# DT-PLACE-5: the reduce ops a Partial may carry.
REDUCE_OPS = ("sum", "avg", "min", "max", "product")


def _require_int(name: str, value: object, rule: str) -> None:
    # ERR-2: bool is an int to Python, but never a valid dim or count.
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"[{rule}] {name} must be an int; got {name}={value!r}")


@dataclass(frozen=True)
class Shard:
    """``S(dim)``: tensor dim ``dim`` is split into one chunk per coordinate (chunk rule)."""

    dim: int

    def __post_init__(self) -> None:
        # DT-PLACE-4
        _require_int("dim", self.dim, "DT-PLACE-4")

    def __str__(self) -> str:
        return f"S({self.dim})"

    __repr__ = __str__


@dataclass(frozen=True)
class StridedShard:
    """``_S(dim, split_factor)``: ``dim`` is cut into ``split_factor`` pieces and each piece is
    split over the coordinates; a coordinate holds its chunk of every piece (DT-PLACE-12).

    Note: PyTorch names this class ``_StridedShard`` (private); the spec's short form keeps the
    underscore, the class here does not.
    """

    dim: int
    split_factor: int

    def __post_init__(self) -> None:
        # DT-PLACE-4
        _require_int("dim", self.dim, "DT-PLACE-4")
        _require_int("split_factor", self.split_factor, "DT-PLACE-4")
        # DT-PLACE-7
        if self.split_factor < 1:
            raise ValueError(
                f"[DT-PLACE-7] split_factor must be at least 1; got {self.split_factor}"
            )

    def __str__(self) -> str:
        return f"_S({self.dim}, {self.split_factor})"

    __repr__ = __str__


@dataclass(frozen=True)
class Replicate:
    """``R``: every coordinate holds the same data."""

    def __str__(self) -> str:
        return "R"

    __repr__ = __str__


@dataclass(frozen=True)
class Partial:
    """``P(op)``: every coordinate holds a partial value; the tensor is their ``op``-reduction."""

    reduce_op: str = "sum"

    def __post_init__(self) -> None:
        # DT-PLACE-4
        if not isinstance(self.reduce_op, str):
            raise TypeError(f"[DT-PLACE-4] reduce_op must be a str; got {self.reduce_op!r}")
        # DT-PLACE-5
        # Note: PyTorch accepts any string here and fails at first use.
        if self.reduce_op not in REDUCE_OPS:
            raise ValueError(
                f"[DT-PLACE-5] reduce_op must be one of {', '.join(REDUCE_OPS)}; "
                f"got {self.reduce_op!r}"
            )

    def __str__(self) -> str:
        return f"P({self.reduce_op})"

    __repr__ = __str__


Placement = Shard | StridedShard | Replicate | Partial
ShardLike = Shard | StridedShard


def normalize(placements: object, tensor_ndim: int, mesh_ndim: int) -> tuple[Placement, ...]:
    """Check a placement list against a tensor and a mesh; return it with shard dims >= 0.

    Every API that takes placements calls this before anything moves, so the rules are checked
    in one place and in the same order everywhere.
    """
    if isinstance(placements, str | bytes) or not isinstance(placements, Sequence):
        raise TypeError(f"placements must be a sequence of placements; got {placements!r}")
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(
                f"placements must hold Shard, StridedShard, Replicate or Partial; got {p!r}"
            )
    # DT-PLACE-1
    if len(placements) != mesh_ndim:
        raise ValueError(
            f"[DT-PLACE-1] {len(placements)} placements for a {mesh_ndim}-d mesh; "
            "give exactly one per mesh dim"
        )
    # DT-PLACE-6
    ops = {p.reduce_op for p in placements if isinstance(p, Partial)}
    if len(ops) > 1:
        raise ValueError(f"[DT-PLACE-6] Partial placements mix reduce ops {sorted(ops)}")
    return tuple(_normalize_one(p, tensor_ndim) for p in placements)


def _normalize_one(p: Placement, ndim: int) -> Placement:
    if not isinstance(p, ShardLike):
        return p
    # DT-PLACE-3
    if not -ndim <= p.dim < ndim:
        raise ValueError(f"[DT-PLACE-3] Shard dim {p.dim} is out of range for a {ndim}-d tensor")
    # DT-PLACE-2
    dim = p.dim + ndim if p.dim < 0 else p.dim
    return Shard(dim) if isinstance(p, Shard) else StridedShard(dim, p.split_factor)


_SHORT_FORM = re.compile(
    r"S\((?P<s>-?\d+)\)|_S\((?P<sd>-?\d+), ?(?P<sf>-?\d+)\)|(?P<r>R)|P\((?P<p>\w+)\)"
)


def parse(text: str) -> tuple[Placement, ...]:
    """Read a list in short forms, ``"S(0), R"`` or ``"[_S(0, 2), P(sum)]"`` (DT-PLACE-9)."""
    body = text.strip().removeprefix("[").removesuffix("]")
    placements: list[Placement] = []
    position = 0
    while position < len(body):
        if body[position] in ", ":
            position += 1
            continue
        match = _SHORT_FORM.match(body, position)
        if match is None:
            raise ValueError(f"[DT-PLACE-9] cannot read a placement at {body[position:]!r}")
        if match["s"] is not None:
            placements.append(Shard(int(match["s"])))
        elif match["sd"] is not None:
            placements.append(StridedShard(int(match["sd"]), int(match["sf"])))
        elif match["r"]:
            placements.append(Replicate())
        else:
            placements.append(Partial(match["p"]))
        position = match.end()
    return tuple(placements)


def show(placements: Sequence[Placement]) -> str:
    """The spec's notation for a list: ``[S(0), R]``."""
    return "[" + ", ".join(map(str, placements)) + "]"
