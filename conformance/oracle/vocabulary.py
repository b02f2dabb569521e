"""Words every chapter uses (spec/vocabulary.md, spec/errors.md, DT-PLACE-9): placements in short
notation, meshes as plain data, verdicts, and the helper notation ``ceil_div``, ``chunk_bounds``,
``normdim``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

# -- helper notation (vocabulary.md) ---------------------------------------------------------------


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def chunk_bounds(length: int, k: int, c: int) -> tuple[int, int]:
    """Half-open interval of chunk ``c`` of ``k`` over ``[0, length)``: ``torch.chunk``'s rule,
    all ``k`` chunks kept, an empty chunk starting at ``length`` (vocabulary.md)."""
    cs = ceil_div(length, k)
    return min(length, c * cs), min(length, (c + 1) * cs)


def normdim(d: int, n: int) -> int:
    """``d + n`` for negative ``d``; callers check ``-n <= d < n`` first."""
    return d + n if d < 0 else d


# -- placements (DT-PLACE-9 short notation) --------------------------------------------------------


@dataclass(frozen=True)
class Shard:
    dim: int

    def __str__(self) -> str:
        return f"S({self.dim})"


@dataclass(frozen=True)
class StridedShard:
    dim: int
    split_factor: int

    def __str__(self) -> str:
        return f"_S({self.dim}, {self.split_factor})"


@dataclass(frozen=True)
class Replicate:
    def __str__(self) -> str:
        return "R"


@dataclass(frozen=True)
class Partial:
    op: str = "sum"

    def __str__(self) -> str:
        return f"P({self.op})"


Placement = Shard | StridedShard | Replicate | Partial
ShardLike = (Shard, StridedShard)

_INT = r"\s*([+-]?[0-9]+)\s*"
_FORMS = (
    (re.compile(rf"S\({_INT}\)", re.ASCII), lambda m: Shard(int(m[1]))),
    (re.compile(rf"_S\({_INT},{_INT}\)", re.ASCII), lambda m: StridedShard(int(m[1]), int(m[2]))),
    (re.compile(r"R"), lambda m: Replicate()),
    (re.compile(r"P\(\s*(\w+)\s*\)", re.ASCII), lambda m: Partial(m[1])),
)


def parse_placement(text: str) -> Placement:
    """Read a placement in short notation (DT-PLACE-9): ``S(0)``, ``_S(0, 2)`` (the space is
    optional), ``R``, ``P(sum)``. Syntax only: ``P(foo)`` and ``_S(0, 0)`` parse, so that cases
    can carry the invalid placements DT-PLACE-5 and DT-PLACE-7 are about."""
    for pattern, make in _FORMS:
        if m := pattern.fullmatch(text.strip()):
            return make(m)
    raise ValueError(f"not a placement in short notation (DT-PLACE-9): {text!r}")


def format_placement(p: Placement) -> str:
    return str(p)


def parse_placements(texts: list[str] | tuple[str, ...]) -> tuple[Placement, ...]:
    return tuple(parse_placement(t) for t in texts)


def format_placements(ps: tuple[Placement, ...] | list[Placement]) -> list[str]:
    return [str(p) for p in ps]


# -- meshes (DT-MESH) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mesh:
    """A mesh tensor as plain data: its shape and its entries in row-major order.

    Only the structure is checked here (one entry per position); duplicate, out-of-range, empty
    and 0-d meshes are representable so that DT-MESH verdicts can judge them."""

    shape: tuple[int, ...]
    ranks: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "ranks", tuple(self.ranks))
        if math.prod(self.shape) != len(self.ranks):
            raise ValueError(
                f"mesh shape {self.shape} needs {math.prod(self.shape)} ranks; "
                f"got ranks={list(self.ranks)}"
            )

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Mesh:
        return cls(tuple(data["shape"]), tuple(data["ranks"]))

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "ranks": list(self.ranks)}

    def nested(self) -> Any:
        """The mesh tensor as a nested list (``mesh.mesh.tolist()``)."""

        def build(dims: tuple[int, ...], flat: tuple[int, ...]) -> Any:
            if not dims:
                return flat[0]
            step = len(flat) // dims[0] if dims[0] else 0
            return [build(dims[1:], flat[i * step : (i + 1) * step]) for i in range(dims[0])]

        return build(self.shape, self.ranks)


# -- verdicts (errors.md) --------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What every member of a collective must do (ERR-6): return (``rule is None``), or raise
    ``error`` because ``rule`` is broken. ``optional`` marks an unsupported request that an
    implementation MAY support instead (ERR-3), e.g. ST-RESHARD-7."""

    rule: str | None = None
    error: str | None = None
    optional: bool = False

    @property
    def ok(self) -> bool:
        return self.rule is None

    def to_json(self) -> str | dict[str, Any]:
        if self.ok:
            return "valid"
        return {"rule": self.rule, "error": self.error, "optional": self.optional}

    def __str__(self) -> str:
        if self.ok:
            return "valid"
        return f"{self.error} ({self.rule}{', may be supported' if self.optional else ''})"


VALID = Verdict()


def value_error(rule: str) -> Verdict:
    return Verdict(rule, "ValueError")


def type_error(rule: str) -> Verdict:
    return Verdict(rule, "TypeError")


def unsupported(rule: str, *, optional: bool = True) -> Verdict:
    return Verdict(rule, "NotImplementedError", optional)


def is_int(x: object) -> bool:
    """An ``int`` that is not a ``bool`` (ERR-2)."""
    return isinstance(x, int) and not isinstance(x, bool)
