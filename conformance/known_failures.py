"""Known failures of an implementation: which test fails, which rules it breaks and how.

    # Uneven ShardedTensor gather drops the last shard (https://github.com/pytorch/pytorch/issues/N)
    conformance/suite/test_st_gather.py::test_gather
        ST-GATHER-10: wrong value
        ST-GATHER-3: rank 0 raises IndexError, hangs
    conformance/suite/test_st_gather.py::test_gather_uneven   # reason, if not given above
        whole test
        ST-GATHER-9: raises RuntimeError, hangs

A test id line is followed by indented lines, each a rule id and the symptom its failure shows
(``conformance.symptoms``: which ranks raise which exception type, which hang, which return a
wrong value). A failure of another rule, or of a listed rule with a symptom the entry does not
list, is a new failure: an entry written for one bug never hides another.

A test id is the test's path from the folder that holds the ``conformance`` package, then its
name (``conformance/suite/test_st_gather.py::test_gather``): the same wherever the suite is
installed or run from. It matches a test whose id equals it or starts with it followed by ``[``,
so one entry can cover every parametrisation. Ids that match no collected test of a collected
file, or that name a file the suite does not have, are reported, since a stale entry would
silently hide a fixed bug.

A ``whole test`` line makes the test a strict xfail: its first failure ends it and must be one
the entry lists, and the test must fail. Without it the test goes on: a failed check blamed on
listed rules only, with their symptom, is counted as a known failure of them and its example
ends there, so the test still judges every other rule it cites on its other examples (see
``judge.fail``). A known hang costs the grace period, not the case timeout, once the hung ranks
sleep (``conformance.world.idle``), so it takes the rule form too: ``whole test`` is for tests
that check one thing.

An implementation's behaviour changes between its releases, so its known failures are kept per
release: ``xfails/<adapter>/<release>.txt`` (``xfails/torch/2.13.0.txt``), chosen by the release
the adapter reports (``release``). A release with no file of its own runs with its minor
release's file, else the nearest older one, and the run's header says so: what that release does
differently shows as new failures and unexpected passes, never hidden.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from conformance import paths, symptoms
from conformance.symptoms import Symptom
from conformance.world.protocol import RULE_ID

WHOLE_TEST = "whole test"


@dataclass(frozen=True)
class XFail:
    """One entry: ``symptoms`` maps each known-failing rule to what its failure shows; ``whole``
    makes the test a strict xfail that ends at its first failure."""

    test_id: str
    reason: str
    line: int
    symptoms: dict[str, Symptom] = field(default_factory=dict)
    whole: bool = False
    source: str = ""  # the file it is read from, as messages name it

    @property
    def where(self) -> str:
        """``file:line``, for a message that sends the reader to the entry."""
        return f"{self.source}:{self.line}"

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(self.symptoms)

    @property
    def findings(self) -> tuple[str, ...]:
        """The records its comment names (``# finding: id, id``): the behaviours it lists."""
        return tuple(
            i.strip() for m in FINDING.findall(self.reason) for i in m.split(",") if i.strip()
        )

    def scoped_to(self, test_id: str) -> bool:
        """Whether it names ``test_id`` itself, parametrisation included (``...[add]``), not a
        test whose every parametrisation it names: an entry for every op of a per-op test is
        another behaviour than each op's own (the order of a mesh's ranks, say)."""
        return self.test_id == test_id

    def covers(self, violated: tuple[str, ...], symptom: Symptom | None) -> bool:
        return covers(self.symptoms, violated, symptom)


def covers(
    known: Mapping[str, Symptom], violated: tuple[str, ...], symptom: Symptom | None
) -> bool:
    """Whether a failure of the rules ``violated`` that showed ``symptom`` is a known one: every
    rule is listed, and every behaviour it showed is listed for one of them."""
    if not violated or not all(rule in known for rule in violated):
        return False
    return symptoms.matches(symptom, frozenset().union(*(known[rule] for rule in violated)))


FOLDER = Path(__file__).parent / "xfails"
FINDING = re.compile(r"finding: ([a-z0-9, -]+)")


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
    if ":" in impl or not impl:
        return Choice(None, f"none shipped for {impl!r}")
    return for_release((shipped or FOLDER) / impl, impl, release)


def for_release(folder: Path, impl: str, release: str | None) -> Choice:
    """The file of ``folder`` (one ``<release>.txt`` per release judged) for ``release``: its
    own, else that of its minor release (patches that behave alike share one file, named for
    the latest: 2.7.0 runs with 2.7.1's), else the nearest older release's, else the oldest's."""
    files = sorted(folder.glob("*.txt"), key=lambda f: release_key(f.stem))
    if not files:
        return Choice(None, f"none shipped for {impl!r}")
    if release is None:
        raise ValueError(f"adapter {impl!r} has per-release known failures but no 'release'")
    wanted = release_key(release)
    exact = [f for f in files if release_key(f.stem) == wanted]
    if exact:
        return Choice(exact[0], f"for {impl} {release}")
    minor = [f for f in files if release_key(f.stem)[:2] == wanted[:2]]
    if minor:
        return Choice(
            minor[-1],
            f"{impl} {release} has no file of its own: using {minor[-1].stem}'s, its minor "
            "release's (new failures and unexpected passes are what changed)",
            borrowed=True,
        )
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


def layers(impl_name: str, impl: object, given: list[str], shipped: bool = True) -> list[Choice]:
    """Every known-failures file a run uses, in order: the shipped one for the release of a
    registered adapter, or of each folder an adapter names (``known_failures``: a fork's
    adapter names upstream's folder, then its own), unless ``shipped`` is off; then the files
    given (``--xfails``). An entry of any of them covers what it lists; none replaces another,
    so a fork lists only where it differs, and a shardspec update brings upstream's new entries."""
    release = getattr(impl, "release", None)
    chosen = []
    if shipped:
        folders = getattr(impl, "known_failures", None)
        if folders is None:
            chosen.append(default_for(impl_name, release))
        else:
            for folder in map(Path, folders):
                choice = for_release(folder, impl_name, release)
                chosen.append(choice if choice.path else Choice(None, f"none in {folder}"))
    chosen += [Choice(Path(g), "given with --xfails") for g in given]
    return chosen


def shipped(impl: str) -> Path:
    """The folder of shardspec's own per-release files for a registered adapter: what a fork's
    adapter names first in its ``known_failures``."""
    return FOLDER / impl


def parse(path: Path) -> list[XFail]:
    """Read a known-failures file; a ``ValueError`` naming the line of anything malformed."""
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
        where = f"{path}:{number}"
        if raw[0].isspace():
            if not entries:
                raise ValueError(f"{where}: a symptom line before any test id")
            entries[-1] = _with_symptom(entries[-1], text, where)
            continue
        _check_complete(entries, path)
        entry, _, comment = text.partition("#")
        test_id, *rest = entry.split()
        if rest:
            raise ValueError(
                f"{where}: {rest} after {test_id!r}: rules and their symptoms go on indented "
                "lines below the test id ('    ST-SPEC-2: raises IndexError')"
            )
        reason = comment.strip() or group_reason
        if not reason:
            raise ValueError(f"{where}: xfail entry {test_id!r} gives no reason")
        entries.append(XFail(test_id, reason, number, source=str(path)))
    _check_complete(entries, path)
    return entries


def _with_symptom(entry: XFail, text: str, where: str) -> XFail:
    """``entry`` with one more indented line: ``<rule id>: <symptom>`` or ``whole test``."""
    if text == WHOLE_TEST:
        if entry.whole:
            raise ValueError(f"{where}: '{WHOLE_TEST}' given twice")
        return replace(entry, whole=True)
    subject, colon, said = text.partition(":")
    subject = subject.strip()
    if not colon or not RULE_ID.fullmatch(subject):
        raise ValueError(f"{where}: {text!r} is not '<rule id>: <symptom>' or '{WHOLE_TEST}'")
    try:
        symptom = symptoms.parse(said.strip())
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if subject in entry.symptoms:
        raise ValueError(f"{where}: {subject} given twice")
    return replace(entry, symptoms={**entry.symptoms, subject: symptom})


def _check_complete(entries: list[XFail], path: Path) -> None:
    last = entries[-1] if entries else None
    if last is not None and not last.symptoms:
        raise ValueError(
            f"{path}:{last.line}: xfail entry {last.test_id!r} gives no symptom: indent "
            "'<rule id>: <symptom>' lines below it"
        )


def matches(entry: XFail, test_id: str) -> bool:
    """Whether ``entry`` names the test ``test_id`` (``conformance.plugin.collect.suite_id``) or
    its parametrisation."""
    return test_id == entry.test_id or test_id.startswith(entry.test_id + "[")


def stale(entry: XFail, collected_files: set[str], other_ops: frozenset[str] = frozenset()) -> bool:
    """Whether an entry that matched no collected test names nothing: its file was collected (the
    test is gone), or the file itself is gone. A run restricted to other files says nothing of
    it, nor does a run of a per-op test (``other_ops``: the tests that ran some of the ops, not
    all) of the op an entry's parametrisation names."""
    test, bracket, _ = entry.test_id.partition("[")
    if bracket and test in other_ops:
        return False
    file = entry.test_id.partition("::")[0]
    return file in collected_files or not (paths.CHECKOUT / file).is_file()
