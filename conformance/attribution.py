"""Which findings an op's known failures stand for, for its cell of the per-op table.

A known-failures group names the records of the behaviours its entries list (``# finding:``),
and one group often lists several ops and several records: a refusal that every view op shares,
say, with a record for ``flatten`` and one for ``expand``. Named as a whole, every op of the group
would show every record. An op's cell shows the group's records that break a rule its entry
met, on the release judged (``Record.breaks``), and of those the ones whose subject names the op
where any does: ``squeeze_`` meets the squeeze record and not the ``fill_`` one beside it, an op
no record names meets all that break its rule (the group's account of it).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conformance.findings.records import Record


@cache
def _records() -> dict[str, Record]:
    # Imported here: the records need jsonschema, whose absence the plugin reports in one line
    # once it is configured (harness.missing_driver_dependency), not as a failed plugin load.
    from conformance.findings.records import load_all

    return {record.id: record for record in load_all()}


def call_name(name: str) -> str:
    """The bare call an op or a record's subject names: ``Tensor.squeeze_``, ``squeeze/multiple``
    and ``torch.squeeze backward`` are all ``squeeze``."""
    call = name.split()[0].split("/")[0].rsplit(".", 1)[-1]
    return call.rstrip("_") or call


def findings_of(
    named: Iterable[str], rules_met: Iterable[str], op: str, release: str | None
) -> list[str]:
    """The records among ``named`` (an entry's) that stand for ``op``'s failure of ``rules_met``
    on ``release`` (``op`` empty: a test of no op, whose records are those of the rules); an id
    that is no record stays, for the agreement tests to report."""
    records = _records()
    met = set(rules_met)
    ids = deviating(named, release)
    known = [records[i] for i in ids if i in records]
    breaking = [r for r in known if met & set(_broken(r, release) or r.rules)] or known
    naming = [r for r in breaking if op and call_name(op) in {call_name(s) for s in r.subject}]
    chosen = {r.id for r in naming or breaking}
    return [i for i in ids if i in chosen or i not in records]


def deviating(named: Iterable[str], release: str | None) -> list[str]:
    """The records among ``named`` that deviate on ``release``: one its record shows conforming
    there (fixed, or not yet broken) is not what a run of it met, though an entry written for
    several releases names it. Where every one conforms, all stay (the entry's own account, for
    the agreement tests to question), and so does an id that is no record."""
    records = _records()
    ids = list(dict.fromkeys(named))
    conforming = {i for i in ids if i in records and not _broken(records[i], release)}
    return [i for i in ids if i not in conforming] or ids


def _broken(record: Record, release: str | None) -> tuple[str, ...]:
    """The rules ``record`` breaks on ``release`` (its nearest recorded one); all of its rules
    where no release is given or it records none."""
    if release is None or not record.releases:
        return record.rules
    return record.breaks(record.recorded_for(release))
