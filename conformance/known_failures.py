"""Known failures of an implementation: one test id per line, with the reason beside it.

    # Uneven ShardedTensor gather drops the last shard (https://github.com/pytorch/pytorch/issues/N)
    conformance/suite/test_st_gather.py::test_gather_uneven   # reason, if not given above

A line's id matches a test whose node id equals it or starts with it followed by ``[``, so one
line can cover every parametrisation. Ids that match no collected test are reported, since a
stale entry would silently hide a fixed bug.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class XFail:
    test_id: str
    reason: str
    line: int


FOLDER = Path(__file__).parent / "xfails"


def default_for(impl: str) -> str | None:
    """The known-failures file shipped for a registered adapter, if there is one."""
    path = FOLDER / f"{impl}.txt"
    return str(path) if ":" not in impl and path.exists() else None


def parse(path: Path) -> list[XFail]:
    entries: list[XFail] = []
    group_reason = ""
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        text = raw.strip()
        if not text:
            group_reason = ""
            continue
        if text.startswith("#"):
            group_reason = text.lstrip("#").strip()
            continue
        test_id, _, comment = text.partition("#")
        reason = comment.strip() or group_reason
        if not reason:
            raise ValueError(f"{path}:{number}: xfail entry {test_id.strip()!r} gives no reason")
        entries.append(XFail(test_id.strip(), reason, number))
    return entries


def matches(entry: XFail, nodeid: str) -> bool:
    return nodeid == entry.test_id or nodeid.startswith(entry.test_id + "[")
