"""The suite's neutral vocabulary: how cases name placements, shards and meshes.

Cases travel as JSON, so placements are short strings (the notation of spec/dt-placements.md)
and shards are dicts. An adapter parses them with these helpers and builds its own types; this
module holds no semantics beyond spelling.

==============  ========================  =====================================
text            parsed                    meaning
==============  ========================  =====================================
``S(0)``        ``Placement("S", 0)``     shard tensor dim 0 (may be negative)
``R``           ``Placement("R")``        replicate
``P(sum)``      ``Placement("P", "sum")`` partial values, reduced with ``sum``
``_S(0,2)``     ``Placement("_S", 0, 2)`` strided shard of dim 0, split factor 2
==============  ========================  =====================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypedDict

_PLACEMENT = re.compile(r"^(?:(R)|S\((-?\d+)\)|P\((\w+)\)|_S\((-?\d+),\s*(-?\d+)\))$")


@dataclass(frozen=True)
class Placement:
    kind: str
    dim_or_op: int | str | None = None
    split_factor: int | None = None

    def __str__(self) -> str:
        if self.kind == "R":
            return "R"
        if self.kind == "_S":
            return f"_S({self.dim_or_op},{self.split_factor})"
        return f"{self.kind}({self.dim_or_op})"


def parse_placement(text: str) -> Placement:
    """``"S(-1)"`` -> ``Placement("S", -1)``; anything else than the table above is an error."""
    match = _PLACEMENT.match(text.strip())
    if not match:
        raise ValueError(f"not a placement of the suite's vocabulary: {text!r}")
    replicate, shard_dim, partial_op, strided_dim, split = match.groups()
    if replicate:
        return Placement("R")
    if shard_dim is not None:
        return Placement("S", int(shard_dim))
    if partial_op is not None:
        return Placement("P", partial_op)
    return Placement("_S", int(strided_dim), int(split))


class Shard(TypedDict):
    """One ShardedTensor shard: a box of the global tensor and who holds it."""

    offsets: list[int]
    sizes: list[int]
    placement: str  # "rank:<global rank>/<device>", as ShardMetadata spells it


def shard(offsets: list[int], sizes: list[int], placement: str) -> Shard:
    return {"offsets": list(offsets), "sizes": list(sizes), "placement": placement}
