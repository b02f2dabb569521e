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

An implementation's behaviour changes between its releases, so its known failures are kept per
release: ``xfails/<adapter>/<release>.txt`` (``xfails/torch/2.13.0.txt``), chosen by the release
the adapter reports (``release``). A release with no file of its own runs with the nearest older
one, and the run's header says so: what that release does differently shows as new failures and
unexpected passes, never hidden.
"""

from __future__ import annotations

import re
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


@dataclass(frozen=True)
class Choice:
    """The known-failures file a run uses, and why that one (for the run's header)."""

    path: Path | None
    note: str
    borrowed: bool = False  # the file of another release than the one judged


def release_key(release: str) -> tuple[int, ...]:
    """``"2.13.0+cpu"`` -> ``(2, 13, 0)``: the numeric release, without build or pre-release tags
    (``2.15.0.dev20261101`` sorts with ``2.15.0``)."""
    numbers = re.match(r"\d+(?:\.\d+)*", release)
    if numbers is None:
        raise ValueError(f"release {release!r} does not start with a version number")
    return tuple(int(part) for part in numbers.group().split("."))


def default_for(impl: str, release: str | None, shipped: Path | None = None) -> Choice:
    """The known-failures file shipped (in ``shipped``, by default ``FOLDER``) for a registered
    adapter at ``release``."""
    folder = (shipped or FOLDER) / impl
    files = sorted(folder.glob("*.txt"), key=lambda f: release_key(f.stem)) if impl else []
    if ":" in impl or not files:
        return Choice(None, f"none shipped for {impl!r}")
    if release is None:
        raise ValueError(f"adapter {impl!r} has per-release known failures but no 'release'")
    wanted = release_key(release)
    exact = [f for f in files if release_key(f.stem) == wanted]
    if exact:
        return Choice(exact[0], f"for {impl} {release}")
    older = [f for f in files if release_key(f.stem) < wanted]
    if older:
        return Choice(
            older[-1],
            f"{impl} {release} has no file of its own: using {older[-1].stem}'s, the nearest "
            "older release (new failures and unexpected passes are what changed)",
            borrowed=True,
        )
    return Choice(
        files[0],
        f"{impl} {release} is older than every file: using {files[0].stem}'s, the oldest "
        "(new failures and unexpected passes are what changed)",
        borrowed=True,
    )


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
