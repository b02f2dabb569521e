"""The suite's one vocabulary (spec/vocabulary.md, DT-PLACE-9): how cases, the oracle, the
golden vectors and adapters name placements, meshes and ShardedTensor boxes.

Cases travel as JSON, so a placement is its short notation and a box a dict; this module parses
and prints them, and holds no semantics beyond spelling (what a placement means is the oracle's).

==============  =============================  =====================================
text            parsed                         meaning
==============  =============================  =====================================
``S(0)``        ``Shard(0)``                   shard tensor dim 0 (may be negative)
``R``           ``Replicate()``                replicate
``P(sum)``      ``Partial("sum")``             partial values, reduced with ``sum``
``_S(0, 2)``    ``StridedShard(0, 2)``         strided shard of dim 0, split factor 2
==============  =============================  =====================================
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, TypedDict

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


# -- ShardedTensor boxes (ST-META) -----------------------------------------------------------------


class ShardBox(TypedDict):
    """One ShardedTensor shard as data: a box of the global tensor and who holds it."""

    offsets: list[int]
    sizes: list[int]
    placement: str  # "rank:<global rank>/<device>", as ShardMetadata spells it


def shard_box(offsets: list[int], sizes: list[int], placement: str) -> ShardBox:
    return {"offsets": list(offsets), "sizes": list(sizes), "placement": placement}


def properties_data(properties: Any) -> dict[str, Any]:
    """A ``TensorProperties`` as data, each torch value by its name: ``{"dtype": "float32",
    "layout": "strided", "requires_grad": False, "memory_format": "contiguous_format",
    "pin_memory": False}``."""

    def name(value: object) -> str:
        return str(value).removeprefix("torch.")

    return {
        "dtype": name(properties.dtype),
        "layout": name(properties.layout),
        "requires_grad": properties.requires_grad,
        "memory_format": name(properties.memory_format),
        "pin_memory": properties.pin_memory,
    }
