"""A known failure is a rule *and* a symptom: which ranks raise which exception type, which hang,
which return a wrong value. A failure of the same rule with another symptom is a new failure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conformance import known_failures, symptoms
from conformance.symptoms import Behaviour
from conformance.world import Died, Hung, Raised, Returned


def test_a_symptom_reads_back_from_its_text():
    text = "rank 1 raises ValueError, rank 0 hangs, returns, wrong value, rank 3 dies"
    parsed = symptoms.parse(text)
    assert parsed == {
        Behaviour("raises", "ValueError", 1),
        Behaviour("hangs", rank=0),
        Behaviour("returns"),
        Behaviour("wrong value"),
        Behaviour("dies", rank=3),
    }
    assert symptoms.parse(symptoms.render(parsed)) == parsed


@pytest.mark.parametrize("text", ["raises", "hang", "rank x hangs", "raises Value Error", ""])
def test_a_behaviour_outside_the_vocabulary_is_refused(text):
    with pytest.raises(ValueError, match="is not a behaviour"):
        symptoms.parse(text)


def test_each_rank_outcome_is_one_behaviour():
    outcomes = [
        Returned(0, 1),
        Raised(1, ("IndexError", "LookupError", "Exception"), "m", ""),
        Hung(2, 5.0, ""),
        Died(3, -11, ""),
    ]
    assert symptoms.render(symptoms.of_outcomes(outcomes)) == (
        "rank 0 returns, rank 1 raises IndexError, rank 2 hangs, rank 3 dies"
    )


@pytest.mark.parametrize(
    ("seen", "allowed", "match"),
    [
        ("rank 1 raises ValueError, rank 0 hangs", "raises ValueError, hangs", True),
        ("rank 1 raises ValueError, rank 0 hangs", "rank 1 raises ValueError, hangs", True),
        ("rank 0 raises ValueError, rank 1 hangs", "rank 1 raises ValueError, hangs", False),
        ("rank 0 raises IndexError", "raises ValueError", False),
        # The type is the exception's own, not a base class of it.
        ("rank 0 raises IndexError", "raises LookupError", False),
        ("rank 0 returns, rank 1 hangs", "raises ValueError, hangs", False),
        ("wrong value", "raises ValueError", False),
        ("wrong value", "wrong value, hangs", True),
        ("rank 0 dies", "hangs", False),
    ],
)
def test_a_failure_matches_an_entry_only_if_the_entry_lists_every_behaviour_it_showed(
    seen, allowed, match
):
    assert symptoms.matches(symptoms.parse(seen), symptoms.parse(allowed)) is match


def test_a_failure_without_a_symptom_matches_no_entry():
    everything = symptoms.parse("raises Exception, returns, hangs, dies, wrong value")
    assert not symptoms.matches(None, everything)
    assert not symptoms.matches(frozenset(), everything)


def test_an_entry_gives_each_rule_its_symptom_and_may_stop_the_test_at_its_first_failure(
    tmp_path,
):
    path = tmp_path / "xfails.txt"
    path.write_text(
        "# ST-VALID-8: rank 1 raises, rank 0 hangs\n"
        "a.py::test_one\n"
        "    ST-VALID-8: raises ValueError, hangs\n"
        "    ST-VALID-9: wrong value\n"
        "a.py::test_two  # own reason\n"
        "    whole test\n"
        "    ST-GATHER-9: rank 0 raises IndexError, hangs\n"
    )
    one, two = known_failures.parse(path)
    assert one.rules == ("ST-VALID-8", "ST-VALID-9")
    assert one.symptoms["ST-VALID-8"] == symptoms.parse("raises ValueError, hangs")
    assert not one.whole
    assert (two.reason, two.rules, two.whole) == ("own reason", ("ST-GATHER-9",), True)
    assert two.symptoms["ST-GATHER-9"] == symptoms.parse("rank 0 raises IndexError, hangs")


MALFORMED = {
    "none": ("# r\na.py::t\n", "xfails.txt:2: xfail entry 'a.py::t' gives no symptom"),
    "none-then-another": ("# r\na.py::t\n# next\nb.py::u\n  ST-SPEC-2: hangs\n",
                          "xfails.txt:2: xfail entry 'a.py::t' gives no symptom"),
    "whole-test-alone": ("# r\na.py::t\n  whole test\n",
                         "xfails.txt:2: xfail entry 'a.py::t' gives no symptom"),
    "inline-rules": ("# r\na.py::t ST-SPEC-2\n",
                     "xfails.txt:2: ['ST-SPEC-2'] after 'a.py::t': rules and their symptoms"),
    "no-colon": ("# r\na.py::t\n  ST-SPEC-2 raises X\n", "xfails.txt:3: 'ST-SPEC-2 raises X' is"),
    "bad-term": ("# r\na.py::t\n  ST-SPEC-2: raised X\n", "xfails.txt:3: 'raised X' is not a"),
    "whole-test-symptom": ("# r\na.py::t\n  ST-SPEC-2: hangs\n  whole test: hangs\n",
                           "xfails.txt:4: 'whole test: hangs' is not '<rule id>: <symptom>'"),
    "twice": ("# r\na.py::t\n  ST-SPEC-2: hangs\n  ST-SPEC-2: dies\n",
              "xfails.txt:4: ST-SPEC-2 given twice"),
    "orphan": ("  ST-SPEC-2: hangs\n", "xfails.txt:1: a symptom line before any test id"),
}  # fmt: skip


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_entry_is_refused_with_its_line(tmp_path, name):
    text, error = MALFORMED[name]
    path = tmp_path / "xfails.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(error)):
        known_failures.parse(path)


TASKS = """
def raise_on_last(ctx, error):
    if ctx.rank == ctx.world_size - 1:
        raise {"ValueError": ValueError, "IndexError": IndexError}[error]("planted")
    return ctx.rank
"""

TESTS = """
import os
import pytest
from conformance import judge
from conformance.world import Case

ERROR = os.environ["PLANTED_ERROR"]

@pytest.mark.rules("ST-GATHER-1", "ST-GATHER-2")
def test_rule_form(world):
    judge.all_returned(world.run(Case("tasks:raise_on_last", {"error": ERROR})), rule="ST-GATHER-1")
    judge.assert_equal("answer", 42, 42, "example", rule="ST-GATHER-2")

@pytest.mark.rules("ST-SPEC-1")
def test_whole_form(world):
    judge.all_returned(world.run(Case("tasks:raise_on_last", {"error": ERROR})), rule="ST-SPEC-1")

@pytest.mark.rules("ST-SPEC-2")
def test_whole_form_broken_by_the_suite(world, impl):
    {}["the suite's own bug"]
"""

ENTRIES = """# planted: the last rank raises ValueError
test_planted.py::test_rule_form
    ST-GATHER-1: raises ValueError, returns
    ERR-6: raises ValueError, returns
test_planted.py::test_whole_form
    whole test
    ST-SPEC-1: raises ValueError, returns
    ERR-6: raises ValueError, returns
test_planted.py::test_whole_form_broken_by_the_suite
    whole test
    ST-SPEC-2: raises KeyError
"""


def run_planted(pytester: pytest.Pytester, error: str) -> tuple[pytest.RunResult, dict]:
    pytester.makepyfile(tasks=TASKS, test_planted=TESTS)
    pytester.path.joinpath("xfails.txt").write_text(ENTRIES)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLANTED_ERROR", error)
        result = pytester.runpytest_subprocess(
            "-p", "conformance.plugin", "-p", "no:cacheprovider", "--world-sizes", "2",
            "--xfails", "xfails.txt", "--report-dir", "out",
        )  # fmt: skip
    rules = json.loads(Path(pytester.path, "out", "rules.json").read_text())["rules"]
    return result, {rule: cells["gloo ws2"] for rule, cells in rules.items()}


def test_a_planted_failure_with_the_listed_symptom_is_the_known_failure(pytester):
    result, table = run_planted(pytester, "ValueError")
    result.assert_outcomes(xfailed=2, failed=1)
    # The suite's own error is no verdict, whatever an entry lists: the run ends as an error.
    assert result.ret == 3
    assert table == {"ST-GATHER-1": "xfail", "ST-GATHER-2": "blocked", "ST-SPEC-1": "xfail",
                     "ST-SPEC-2": "error", "ERR-6": "xfail"}  # fmt: skip
    result.stdout.fnmatch_lines(
        [
            "shardspec: suite error (no check failed): test_planted.py::test_whole_form_broken_by"
            "_the_suite[[]ws2[]]: KeyError: *the suite's own bug*"
        ]
    )


def test_the_same_rule_failing_with_another_symptom_is_a_new_failure(pytester):
    result, table = run_planted(pytester, "IndexError")
    result.assert_outcomes(failed=3)
    assert table == {"ST-GATHER-1": "fail", "ST-GATHER-2": "blocked", "ST-SPEC-1": "fail",
                     "ST-SPEC-2": "error", "ERR-6": "fail"}  # fmt: skip
    result.stdout.fnmatch_lines(
        [
            "*a new failure: xfails.txt:5 lists test_planted.py::test_whole_form as failing"
            " ST-SPEC-1 (raises ValueError, returns); ERR-6 (raises ValueError, returns), but it"
            " fails ST-SPEC-1, ERR-6 (rank 0 returns, rank 1 raises IndexError)*",
            "*symptom: rank 0 returns, rank 1 raises IndexError*",
        ]
    )
