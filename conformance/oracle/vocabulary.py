"""The oracle's own words (spec/vocabulary.md, spec/errors.md): verdicts and the helper notation
``ceil_div``, ``chunk_bounds``, ``normdim``. Placements and meshes are the suite's shared
vocabulary (``conformance.vocabulary``).
"""

from __future__ import annotations

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
