"""Known failures of an implementation: one test id per line, with the reason beside it.

    # Uneven ShardedTensor gather drops the last shard (https://github.com/pytorch/pytorch/issues/N)
    conformance/suite/test_st_gather.py::test_gather_uneven   # reason, if not given above
    conformance/suite/test_st_gather.py::test_gather ST-GATHER-10  # only this rule's failures

A line's id matches a test whose node id equals it or starts with it followed by ``[``, so one
line can cover every parametrisation. Ids that match no collected test are reported, since a
stale entry would silently hide a fixed bug.

A line without rule ids makes the whole test a strict xfail: its first failure ends it, and it
must fail. A line with rule ids lets the test go on: a failed check blamed on those rules only
is counted as a known failure of them and its example discarded, so the test still judges every
other rule it cites (see ``judge.fail``). Use the rule form wherever the failure is quick; a
known hang wants the test form, or every example that hangs costs a case timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from conformance.world.protocol import RULE_ID


@dataclass(frozen=True)
class XFail:
    test_id: str
    reason: str
    line: int
    rules: tuple[str, ...] = ()


FOLDER = Path(__file__).parent / "xfails"


def default_for(impl: str) -> str | None:
    """The known-failures file shipped for a registered adapter, if there is one."""
    path = FOLDER / f"{impl}.txt"
    return str(path) if ":" not in impl and path.exists() else None


def parse(path: Path) -> list[XFail]:
    entries: list[XFail] = []
    group_reason, in_comment = "", False
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        text = raw.strip()
        if not text:
            group_reason, in_comment = "", False
            continue
        if text.startswith("#"):
            # Consecutive comment lines make one reason.
            line = text.lstrip("#").strip()
            group_reason = f"{group_reason} {line}".strip() if in_comment else line
            in_comment = True
            continue
        in_comment = False
        entry, _, comment = text.partition("#")
        test_id, *rules = entry.split()
        reason = comment.strip() or group_reason
        if not reason:
            raise ValueError(f"{path}:{number}: xfail entry {test_id!r} gives no reason")
        bad = [r for r in rules if not RULE_ID.fullmatch(r)]
        if bad:
            raise ValueError(f"{path}:{number}: {bad} after {test_id!r} are not rule ids")
        entries.append(XFail(test_id, reason, number, tuple(rules)))
    return entries


def matches(entry: XFail, nodeid: str) -> bool:
    return nodeid == entry.test_id or nodeid.startswith(entry.test_id + "[")
