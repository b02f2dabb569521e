"""Finding records: loading, what their outcomes mean, the rendered FINDINGS.md, and
``findings check`` replaying programs on real Gloo worlds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from expecttest import assert_expected_inline

from conformance import rules
from conformance.findings import changes, check, issue, records, render, snippet, triage, verdict
from conformance.findings.records import Record

FINDINGS = Path(render.__file__).resolve().parents[1] / "FINDINGS.md"
RELEASES = FINDINGS.with_name("RELEASES.md")


def record(**changes) -> Record:
    fields = {
        "id": "r",
        "rules": ("ST-GATHER-1",),
        "case": "a case",
        "world_size": 3,
        "code": "result = rank\n",
        "spec": ("returns 1",),
        "releases": {"2.13.0": ("returns 1",)},
    }
    return Record(**{**fields, **changes})


def write(root: Path, data: dict) -> Path:
    root.mkdir(exist_ok=True)
    path = root / f"{data['id']}.json"
    path.write_text(json.dumps(data))
    return path


GOOD = {
    "id": "one-rank",
    "rules": ["ST-GATHER-10"],
    "subject": ["ShardedTensor.gather"],
    "layouts": ["none"],
    "case": "1 rank",
    "world_size": 1,
    "code": ["result = torch.tensor([1.5]) * 2"],
    "spec": ["returns [3.0]"],
    "releases": {"2.13.0": ["returns [3.5]"]},
}


REACH = {"via": "a view of a sharded tensor", "code": ["result = 1"], "releases": ["2.13.0"]}


def test_every_record_loads_and_names_rules_of_the_spec():
    known = {rule.id for rule in rules.load()}
    loaded = records.load_all()
    assert len(loaded) >= 40
    assert [r for r in loaded if not set(r.rules) <= known] == []


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"id": "Not Kebab"}, "does not match record.schema.json"),
        ({"extra": 1}, "does not match record.schema.json"),
        ({"id": "other-name"}, "is not its file name"),
        ({"rules": ["ST-GATHER"]}, "'ST-GATHER' is no rule id"),
        ({"spec": ["returns 1", "returns 2"]}, "spec: 2 outcomes for 1 rank(s)"),
        ({"releases": {"2.13.0": ["crashes"]}}, "2.13.0: 'crashes' is no outcome"),
        ({"releases": {"latest": ["hangs"]}}, "does not start with a version number"),
        ({"distinct_from": {"nothing-here": "why"}}, "distinct_from names no record"),
        ({"breaks": {"2.13.0": ["ST-GATHER-1"]}}, "'ST-GATHER-1' is not one of its rules"),
        ({"breaks": {"2.12.1": []}}, "breaks: 2.12.1 is no release it records"),
        (
            {"breaks": {"2.13.0": []}, "releases": {"2.13.0": ["returns [3.0]"]}},
            "breaks: 2.13.0 gives the spec's outcome, which breaks nothing",
        ),
        ({"reach": {**REACH, "releases": ["2.12.1"]}}, "reach: 2.12.1 is no release it records"),
        (
            {"reach": REACH, "releases": {"2.13.0": ["returns [3.0]"]}},
            "reach: it deviates on none of the releases its reach lists",
        ),
        (
            {"reach": {**REACH, "code": ["x = _StridedShard(0, split_factor=2)"]}},
            "reach: its program builds a private placement by hand",
        ),
    ],
)
def test_a_record_that_is_not_one_is_refused_naming_its_file(tmp_path, change, complaint):
    path = write(tmp_path, {**GOOD, **change})
    if path.stem != GOOD["id"]:  # the id test: keep the file name, change the id
        path.rename(tmp_path / "one-rank.json")
    with pytest.raises(ValueError, match=r"one-rank\.json") as raised:
        records.load_all(tmp_path)
    assert complaint in str(raised.value)


def test_a_release_without_outcomes_of_its_own_is_judged_by_the_nearest_older_one():
    r = record(releases={"2.11.0": ("hangs",), "2.13.0": ("dies",)})
    assert r.recorded_for("2.13.0") == "2.13.0"
    assert r.recorded_for("2.12.1") == "2.11.0"
    assert r.recorded_for("2.15.0") == "2.13.0"
    assert r.recorded_for("2.9.0") == "2.11.0"


def test_how_a_release_deviates_is_derived_from_each_ranks_outcome():
    r = record(spec=("returns 1", "returns 1", "raises ValueError"))
    seen = ("returns 2", "hangs", "returns 1")
    assert_expected_inline(
        str(sorted(map(str, verdict.symptom(r, seen)))),
        """['rank 0 wrong value', 'rank 1 hangs', 'rank 2 returns']""",
    )
    assert_expected_inline(
        verdict.describe(r, seen),
        """rank 0: returns `2`; rank 1: hangs; rank 2: returns `1`""",
    )
    assert verdict.describe(r, r.spec) == "conforms"
    assert verdict.symptom(r, r.spec) == frozenset()
    assert_expected_inline(verdict.describe(r, ("raises IndexError",)), """raise `IndexError`""")


def test_a_release_breaks_the_rules_its_record_names_for_it_and_an_allowed_outcome_none():
    """2.11.0 refusing where 2.13.0 writes a wrong value breaks the refusal rule alone; an
    outcome the spec allows too (a ``NotImplementedError`` refusal) breaks nothing."""
    r = record(
        rules=("DT-OP-1", "DT-OP-7"),
        releases={
            "2.11.0": ("raises RuntimeError",),
            "2.12.1": ("raises NotImplementedError",),
            "2.13.0": ("returns 2",),
            "2.14.1": ("returns 1",),
        },
        breaks_in={"2.11.0": ("DT-OP-7",), "2.12.1": ()},
    )
    assert [r.breaks(release) for release in r.releases] == [
        ("DT-OP-7",), (), ("DT-OP-1", "DT-OP-7"), ()
    ]  # fmt: skip
    assert [r.deviates(release) for release in r.releases] == [True, False, True, False]
    assert_expected_inline(
        "\n".join(render.releases_text(r).split("; ")),
        """\
**2.11.0**: raise `RuntimeError` (breaks DT-OP-7)
**2.12.1**: raise `NotImplementedError`, which the spec allows
**2.13.0**: return `2`
**2.14.1**: conforms""",
    )
    passed = {"2.11.0": {"DT-OP-7": "pass", "DT-OP-1": "xfail"}}
    assert render.not_drawn([r], passed) == [(r, ["2.11.0"])]


def test_a_findings_severity_is_how_the_newest_release_it_holds_in_shows_it():
    def shown(*outcomes: str, spec: tuple[str, ...] = ("returns 1",)) -> str:
        return triage.severity(record(spec=spec, releases={"2.13.0": outcomes}))

    assert shown("returns 2") == "silent wrong value"
    assert shown("returns 1", "returns 2", "returns 1") == "silent wrong value"
    assert shown("raises ValueError") == "internal error on valid input"
    assert shown("raises ValueError", "hangs", "hangs") == "ranks part ways or hang"
    assert shown("raises ValueError", "returns 1", "returns 1") == "ranks part ways or hang"
    assert shown("returns 1", spec=("raises ValueError",)) == "invalid input accepted"
    assert shown("raises TypeError", spec=("raises ValueError",)) == "refusal of the wrong type"
    # a program that tries several calls: its 'raises X' values are counted
    tries = ("returns ['raises TypeError', 2]",)
    assert shown("returns [1, 2]", spec=tries) == "invalid input accepted"
    assert shown("returns ['raises TypeError', 'raises ValueError']", spec=tries) == (
        "internal error on valid input"
    )
    assert shown("returns ['raises ValueError', 2]", spec=tries) == "refusal of the wrong type"
    fixed = record(releases={"2.11.0": ("returns 2",), "2.13.0": ("returns 1",)})
    assert triage.severity(fixed) == "silent wrong value"
    assert "**2.11.0**: return `2`; **2.13.0**: conforms" in render.row(fixed)
    with pytest.raises(ValueError, match="conforms in every release"):
        triage.severity(record())


def test_a_record_states_a_severity_only_where_its_outcomes_cannot_show_it():
    """A malformed output returns (or raises once read): the record says so; it cannot call a
    hang or a wrong refusal malformed."""
    malformed = record(releases={"2.13.0": ("returns 2",)}, severity="malformed output")
    assert (triage.severity(malformed), triage.check_stated(malformed)) == (
        "malformed output",
        None,
    )
    hang = replace(malformed, releases={"2.13.0": ("hangs",)})
    assert triage.severity(hang) == "ranks part ways or hang"
    assert triage.check_stated(hang) == (
        "r: states 'malformed output' where its outcomes show 'ranks part ways or hang'"
    )
    assert [triage.check_stated(r) for r in records.load_all() if triage.check_stated(r)] == []


def test_reach_is_private_where_the_program_builds_a_private_placement():
    assert triage.reach(record()) == "public API"
    strided = "x = distribute_tensor(t, mesh, [_StridedShard(0, split_factor=2), Shard(0)])\n"
    assert triage.reach(record(code=strided)) == "private placement"
    via_fsdp = records.Reach("FSDP with tensor parallelism", "result = 1\n", ("2.13.0",))
    assert triage.reach(record(code=strided, reach=via_fsdp)) == "FSDP with tensor parallelism"


def test_a_reach_program_that_does_not_give_the_records_outcome_fails_the_check(tmp_path):
    """A public path is shown only by a program that meets the same outcome: one that reaches
    another layout, or none, is a mismatch like a record's own."""
    release = check.installed_release()
    reach = {**REACH, "code": ["result = torch.tensor([1.5]) * 2 + 1"], "releases": [release]}
    code = ["result = torch.tensor([1.5]) * 2 + 0.5"]
    write(
        tmp_path, {**GOOD, "code": code, "releases": {release: ["returns [3.5]"]}, "reach": reach}
    )
    lines: list[str] = []
    assert check.check(root=tmp_path, out=lines.append) == 1
    assert lines[1:6] == [
        f"ok        one-rank ({release}): returns `[3.5]`",
        f"MISMATCH  one-rank ({release}, reached a view of a sharded tensor):",
        "    recorded: returns `[3.5]`",
        "    seen:     returns `[4.0]`",
        "    replay:   python -m conformance findings replay one-rank",
    ]
    assert lines[-1] == "findings check: 0 of 1 as recorded"


def test_upstream_status_is_that_of_the_thread_of_the_same_behaviour():
    def thread(relation: str) -> dict[str, str]:
        return {
            "url": "https://github.com/pytorch/pytorch/issues/1",
            "title": "t",
            "relation": relation,
        }

    assert triage.upstream_status(record()) == "not reported"
    assert triage.upstream_status(record(upstream=(thread("related: the cause"),))) == (
        "not reported"
    )
    for status in ("open", "fixed", "closed", "closed as intended"):
        cited = record(upstream=(thread("related"), thread(f"same: {status} (in 2.14)")))
        assert triage.upstream_status(cited) == f"reported, {status}"
    # where PyTorch closed the report as intended, the record says why the spec decides otherwise
    unexplained = [
        r.id for r in records.load_all() for t in r.upstream
        if t["relation"].startswith("same: closed as intended") and "spec" not in t["relation"]
    ]  # fmt: skip
    assert unexplained == []


def test_found_not_drawn_needs_a_ci_run_that_judged_every_rule_and_failed_none():
    deviates = record(rules=("ST-GATHER-1", "ERR-10"), releases={"2.13.0": ("returns 2",)})
    passed = {"2.13.0": {"ST-GATHER-1": "pass", "ERR-10": "pass"}}
    assert render.not_drawn([deviates], passed) == [(deviates, ["2.13.0"])]
    failed = {"2.13.0": {"ST-GATHER-1": "pass", "ERR-10": "xfail"}}
    assert render.not_drawn([deviates], failed) == []
    unjudged = {"2.13.0": {"ST-GATHER-1": "pass"}}  # a rule newer than the matrix
    assert render.not_drawn([deviates], unjudged) == []
    assert render.not_drawn([deviates], {"2.12.1": passed["2.13.0"]}) == []


def test_two_records_of_one_rule_with_the_same_symptom_are_one_behaviour_told_twice():
    a = record(id="a", releases={"2.13.0": ("raises ValueError",)})
    b = record(id="b", code="x\n", releases={"2.13.0": ("raises ValueError",)})
    other_rule = record(id="c", rules=("ST-GATHER-2",), releases=b.releases)
    other_symptom = record(id="d", releases={"2.13.0": ("raises TypeError",)})
    (found,) = verdict.duplicates([a, b, other_rule, other_symptom])
    assert found.startswith("a and b: ST-GATHER-1 with the same symptom (raises ValueError)")
    waived = record(id="b", releases=b.releases, distinct_from={"a": "another API"})
    assert verdict.duplicates([a, waived]) == []
    # ERR-6 (ranks part ways) is how many behaviours show, not a behaviour of its own
    split = {"2.13.0": ("raises ValueError", "hangs", "hangs")}
    one = record(id="e", rules=("ST-GATHER-4", "ERR-6"), releases=split)
    two = record(id="f", rules=("ST-GATHER-5", "ERR-6"), releases=split)
    assert verdict.duplicates([one, two]) == []
    # a shared rule the one release breaks in the other record only is no shared behaviour
    both = record(id="g", rules=("ST-GATHER-1", "ST-GATHER-2"), releases=a.releases)
    assert verdict.duplicates([a, both]) != []
    narrowed = replace(both, breaks_in={"2.13.0": ("ST-GATHER-2",)})
    assert verdict.duplicates([a, narrowed]) == []
    # keys that tell them apart: another call, or another layout class, is another behaviour
    keyed = replace(a, subject=("ShardedTensor.gather",), layouts=("none",))
    assert verdict.duplicates([keyed, replace(b, subject=("ShardedTensor.reshard",))]) == []
    assert verdict.duplicates([keyed, replace(b, layouts=("S uneven",))]) == []
    assert verdict.duplicates([keyed, replace(b, subject=("ShardedTensor.gather", "x"))]) != []


def test_a_record_says_why_it_is_distinct_only_from_a_record_it_collides_with_in_one_line():
    """``distinct_from`` answers a collision (the same rule, symptom, call and layout class):
    toward a record whose keys already differ it is boilerplate."""
    loaded = {r.id: r for r in records.load_all()}
    needless = [
        f"{r.id} -> {other}" for r in loaded.values() for other in r.distinct_from
        if not verdict.collide(r, loaded[other])
    ]  # fmt: skip
    long = [f"{r.id} -> {o}" for r in loaded.values() for o, why in r.distinct_from.items()
            if "\n" in why or len(why) > 200]  # fmt: skip
    assert (needless, long) == ([], [])


def test_no_two_records_tell_one_behaviour():
    """``findings check`` refuses duplicates too; this finds them without running a program."""
    assert verdict.duplicates(records.load_all()) == []


def test_findings_md_is_rendered_from_the_records():
    """``python -m conformance findings render --out conformance/FINDINGS.md`` makes it."""
    assert FINDINGS.read_text() == render.page(records.load_all())


def test_releases_md_is_rendered_from_the_records():
    """``python -m conformance findings changes --out conformance/RELEASES.md`` makes it."""
    assert RELEASES.read_text() == changes.page(records.load_all())


def test_a_change_between_releases_is_a_break_a_fix_or_another_way_of_showing():
    def outcomes(*per_release: str) -> dict[str, tuple[str, ...]]:
        return {r: (o,) for r, o in zip(("2.12.1", "2.13.0", "2.14.1"), per_release, strict=False)}

    kept = record(id="kept", releases=outcomes("returns 2", "returns 2", "returns 2"))
    broke = record(id="broke", releases=outcomes("returns 1", "returns 2", "returns 2"))
    fixed = record(id="fixed", releases=outcomes("returns 2", "returns 2", "returns 1"))
    moved = record(id="moved", releases=outcomes("returns 2", "raises ValueError"))
    unrecorded = record(id="unrecorded", releases={"2.12.1": ("returns 2",)})
    found = [record(id="same", releases=outcomes("returns 1", "returns 1", "returns 1"))]
    found += [kept, broke, fixed, moved, unrecorded]
    assert changes.releases(found) == ["2.12.1", "2.13.0", "2.14.1"]
    seen = {
        (old, new): [(c.kind, c.record.id) for c in changes.between(found, old, new)]
        for old, new in (("2.12.1", "2.13.0"), ("2.13.0", "2.14.1"))
    }
    assert seen == {
        ("2.12.1", "2.13.0"): [("regression", "broke"), ("changed", "moved")],
        ("2.13.0", "2.14.1"): [("fix", "fixed")],
    }
    # fewer rules broken is another way of showing; none (an allowed outcome) is a fix
    wider = replace(kept, rules=("ST-GATHER-1", "ERR-1"))
    narrowed = replace(wider, breaks_in={"2.14.1": ("ERR-1",)})
    allowed = replace(wider, breaks_in={"2.14.1": ()})
    assert [c.kind for c in changes.between([narrowed, allowed], "2.13.0", "2.14.1")] == [
        "fix",
        "changed",
    ]
    assert_expected_inline(
        changes.page([broke]).split("## ", 2)[2],
        """\
2.12.1 to 2.13.0

Behaviours: 1 broke, 0 fixed, 0 show another way.

### Broke: conformed in 2.12.1, deviates in 2.13.0

| record | rules | minimal case | 2.12.1 | 2.13.0 |
| --- | --- | --- | --- | --- |
| `broke` | ST-GATHER-1 | a case | conforms | return `2` |
""",
    )


def test_check_passes_a_record_the_installed_release_bears_out_and_fails_one_it_does_not(
    tmp_path,
):
    release = check.installed_release()
    honest = {**GOOD, "releases": {release: ["returns [3.0]"]}}
    write(tmp_path, honest)
    lines: list[str] = []
    assert check.check(root=tmp_path, out=lines.append) == 0
    assert f"ok        one-rank ({release}): conforms" in lines
    write(tmp_path, {**honest, "releases": {release: ["returns [3.5]"]}})
    lines.clear()
    assert check.check(root=tmp_path, out=lines.append) == 1
    assert lines[1:5] == [
        f"MISMATCH  one-rank ({release}):",
        "    recorded: returns `[3.5]`",
        "    seen:     conforms",
        "    replay:   python -m conformance findings replay one-rank",
    ]


def test_check_sees_a_rank_that_raises_while_its_peer_hangs(tmp_path):
    release = check.installed_release()
    program = [
        "if rank == 0:",
        "    raise ValueError('refused on rank 0 only')",
        "dist.recv(torch.empty(1), src=0)",
    ]
    outcomes = ["raises ValueError", "hangs"]
    data = {**GOOD, "world_size": 2, "code": program, "spec": ["raises ValueError"]}
    write(tmp_path, {**data, "releases": {release: outcomes}})
    lines: list[str] = []
    assert check.check(root=tmp_path, out=lines.append, timeout_s=5) == 0, lines
    assert lines[1] == f"ok        one-rank ({release}): rank 0: raises `ValueError`; rank 1: hangs"


def test_record_mode_writes_what_the_installed_release_does(tmp_path):
    release = check.installed_release()
    path = write(tmp_path, {**GOOD, "releases": {"2.0.0": ["hangs"]}})
    assert check.check(record=True, root=tmp_path, out=lambda line: None) == 0
    written = json.loads(path.read_text())
    assert written["releases"] == {"2.0.0": ["hangs"], release: ["returns [3.0]"]}
    assert path.read_text() == check.dumps(written)


def test_a_program_needing_an_api_the_release_lacks_cannot_run_and_neither_conforms_nor_deviates(
    tmp_path,
):
    release = check.installed_release()
    lacking = ["result = distribute_tensor(torch.ones(1), no_such_argument=1)"]
    needs = "distribute_tensor's no_such_argument (PyTorch 9.9)"
    two_ranks = {**GOOD, "world_size": 2, "code": lacking, "needs": needs}
    path = write(tmp_path, {**two_ranks, "releases": {"2.0.0": ["returns [3.5]"]}})
    assert check.check(record=True, root=tmp_path, out=lambda line: None) == 0
    (loaded,) = records.load_all(tmp_path)
    assert loaded.releases[release] == ("cannot run",)
    assert check.check(root=tmp_path, out=lambda line: None) == 0  # and a replay bears it out
    assert not loaded.runs_on(release)
    assert not loaded.deviates(release)
    assert verdict.describe(loaded, loaded.releases[release]) == f"cannot run (it needs {needs})"
    assert [c.kind for c in changes.between([loaded], "2.0.0", release)] == []
    came = replace(loaded, releases={"2.0.0": ("cannot run",), release: ("returns [3.5]",)})
    assert [c.kind for c in changes.between([came], "2.0.0", release)] == ["arrived"]
    # Without 'needs' the same failure is an outcome like any other, never excused.
    data = json.loads(path.read_text())
    del data["needs"]
    write(tmp_path, {**data, "releases": {"2.0.0": ["returns [3.5]"]}})
    assert check.check(record=True, root=tmp_path, out=lambda line: None) == 0
    (loaded,) = records.load_all(tmp_path)
    assert loaded.releases[release] == ("raises TypeError",)
    assert loaded.deviates(release)


def test_a_record_that_cannot_run_somewhere_says_what_it_needs(tmp_path):
    write(tmp_path, {**GOOD, "releases": {"2.0.0": ["cannot run"]}})
    with pytest.raises(ValueError, match="cannot run, but the record says no API it needs"):
        records.load_all(tmp_path)


def test_the_cli_refuses_a_record_id_that_names_no_record(tmp_path):
    for action in ("check", "replay"):
        done = subprocess.run(
            [sys.executable, "-m", "conformance", "findings", action, "no-such-finding"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert done.returncode == 4, done.stderr
        assert "no such finding: no-such-finding" in done.stderr


def test_replay_prints_the_program_and_each_ranks_outcome_beside_the_spec(tmp_path):
    shutil.copytree(records.RECORDS, tmp_path / "records")
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "findings", "replay", "gather-through-float32",
         "--show"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "from torch.distributed.tensor import DeviceMesh" in done.stdout
    assert "t.gather(dst=0, out=out)" in done.stdout
    assert "rank 0: returns [904623.3125]    (the spec: returns [904623.3])" in done.stdout


def test_every_records_script_is_python_that_compiles():
    """``findings report`` and a user's file hold the program as one script; a program line
    that only ran inside the suite's namespace would show here."""
    for r in records.load_all():
        compile(snippet.script(r.code, r.world_size, r.id), r.id, "exec")
        if r.reach is not None:
            compile(snippet.script(r.reach.code, r.world_size, r.id), f"{r.id} reach", "exec")


def test_a_script_runs_under_the_hash_seed_its_outcomes_were_seen_under(tmp_path):
    """PyTorch's choice among equal strategies follows string hashing: a script started under
    another seed restarts itself under the suite's before it runs the program."""
    code = "import os\nresult = os.environ['PYTHONHASHSEED']\n"
    (tmp_path / "repro.py").write_text(snippet.script(code, 1, "the hash seed"))
    ran = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
         "repro.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONHASHSEED": "1"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "rank 0: returns '0'" in ran.stdout.splitlines()


def test_a_report_of_a_private_layout_shows_the_public_path_to_it():
    (r,) = [r for r in records.load_all() if r.id == "chunk-list-of-strided-shard-overlaps"]
    body = issue.body(r)
    assert "## How a user gets there: a view of a sharded tensor\n" in body
    assert "[Shard(1)]).view(4)" in body.split("## How a user gets there")[1]
    assert "reach: a view of a sharded tensor." in body


def test_a_report_holds_a_program_that_runs_under_torchrun_as_its_record_says(tmp_path):
    """The program of ``findings report`` runs as it stands, one process per rank under
    torchrun, and each rank prints the outcome the record holds for the installed release (a
    record whose program calls the ``attempt`` helper, which the script carries)."""
    (r,) = [
        r for r in records.load_all() if r.id == "integer-partial-shifted-part-by-part-overflows"
    ]
    body = issue.body(r)
    assert body.startswith(f"# [DTensor] {r.id.replace('-', ' ')}\n")
    assert "## Expected\n\n```\nrank 0: returns [[8], [8]]\nrank 1: returns [[8], [8]]\n```" in body
    assert "#   The spec: every rank returns [[8], [8]]\n" in body
    assert "#   PyTorch 2.11.0: every rank returns [[8], 'raises RuntimeError']\n" in body
    _runs_under_torchrun_as_recorded(r, body, tmp_path)


def test_a_report_program_returns_none_on_a_rank_its_program_gives_no_result(tmp_path):
    """A record's program may set ``result`` on some ranks only (here rank 1, the one member of
    the group): the other ranks return ``None``, in the report's program as in the suite's
    replay, not a NameError."""
    (r,) = [r for r in records.load_all() if r.id == "gather-on-subgroup"]
    assert "result = out" in r.code
    assert r.spec[0] == "returns None"
    _runs_under_torchrun_as_recorded(r, issue.body(r), tmp_path)


def _runs_under_torchrun_as_recorded(r: Record, body: str, folder: Path) -> None:
    """Run the report's program under torchrun, one process per rank: it exits 0 and each rank
    prints the outcome the record holds for the installed release."""
    import torch

    (folder / "repro.py").write_text(body.split("```python\n", 1)[1].split("```", 1)[0])
    ran = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         str(r.world_size), "repro.py"],
        cwd=folder, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    printed = sorted(line for line in ran.stdout.splitlines() if line.startswith("rank "))
    recorded = r.per_rank(r.releases[r.recorded_for(torch.__version__)])
    assert printed == [f"rank {n}: {o}" for n, o in enumerate(recorded)]
