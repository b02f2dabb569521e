"""The per-rule table: the worst verdict wins a cell, and it renders for people and machines."""

from __future__ import annotations

import json

import pytest
from expecttest import TestCase

from conformance.report import RuleTable, render_json, render_markdown, render_text, verdict_of


def sample() -> RuleTable:
    table = RuleTable()
    table.add(["ST-VALID-1", "ERR-6"], "1", "pass")
    table.add(["ST-VALID-1"], "2", "pass")
    table.add(["ST-VALID-1"], "2", "fail")
    table.add(["ST-GATHER-3"], "2", "xfail")
    table.add(["DT-API-2"], "any", "not claimed")
    return table


ORDER = ["ERR-6", "ST-VALID-1", "ST-GATHER-3", "DT-API-2"]


def test_a_cell_shows_the_worst_verdict_of_its_tests():
    table = sample()
    assert table.cells["ST-VALID-1"] == {"1": "pass", "2": "fail"}
    assert table.counts() == {"pass": 1, "fail": 1, "xfail": 1, "not claimed": 1}


@pytest.mark.parametrize(
    ("outcome", "wasxfail", "reason", "verdict"),
    [
        ("passed", False, "", "pass"),
        ("failed", False, "", "fail"),
        ("skipped", True, "", "xfail"),
        ("passed", True, "", "xpass"),
        ("skipped", False, "not claimed: strided_shard", "not claimed"),
        ("skipped", False, "NCCL needs one GPU per rank", "skip"),
    ],
)
def test_pytest_outcomes_map_to_verdicts(outcome, wasxfail, reason, verdict):
    assert verdict_of(outcome, wasxfail, reason) == verdict


class TestRendering(TestCase):
    def test_text_table(self):
        self.assertExpectedInline(
            render_text(sample(), ORDER),
            """\
rule         ws1   ws2    any
ERR-6        pass
ST-VALID-1   pass  fail
ST-GATHER-3        xfail
DT-API-2                  not claimed
rules: 1 fail, 1 xfail, 1 pass, 1 not claimed""",
        )

    def test_markdown_table(self):
        self.assertExpectedInline(
            render_markdown(sample(), ORDER),
            """\
| rule | ws1 | ws2 | any |
| --- | --- | --- | --- |
| ERR-6 | pass |  |  |
| ST-VALID-1 | pass | fail |  |
| ST-GATHER-3 |  | xfail |  |
| DT-API-2 |  |  | not claimed |

rules: 1 fail, 1 xfail, 1 pass, 1 not claimed
""",
        )


def test_json_has_every_cell_and_the_summary():
    data = json.loads(render_json(sample(), ORDER))
    assert data["rules"]["ST-VALID-1"] == {"ws1": "pass", "ws2": "fail", "any": ""}
    assert data["summary"] == {"pass": 1, "fail": 1, "xfail": 1, "not claimed": 1}


def test_world_size_columns_are_headed_by_the_backend():
    table = sample()
    table.backend = "gloo"
    assert table.headers() == ["gloo ws1", "gloo ws2", "any"]


INNER = """
@pytest.mark.rules("ST-SPEC-1")
def test_passes(world):
    pass

@pytest.mark.rules("ST-SPEC-2", "ERR-1")
def test_fails_on_two(world):
    assert world.world_size != 2

@pytest.mark.rules("ST-GATHER-1", "ST-GATHER-2")
def test_breaks_one_of_its_rules(world):
    judge.assert_equal("out", world.world_size, 1, "gather", rule="ST-GATHER-2")

@pytest.mark.rules("DT-PLACE-7")
def test_unclaimed():
    pytest.skip("not claimed: strided_shard")

@pytest.mark.rules("DT-API-1")
@given(st.sampled_from([1, 2]))
@settings(derandomize=True, database=None)
def test_draws_its_size_and_breaks_on_two(world_pool, n):
    result = world_pool.get(n).run(Case("inner_tasks:size"))
    judge.assert_equal("size", result.values()[0], 1, "a case", rule="DT-API-1")

@pytest.mark.rules("DT-API-2")
@given(st.sampled_from([1, 2]))
@settings(derandomize=True, database=None)
def test_draws_its_size_and_holds(world_pool, n):
    world_pool.get(n).run(Case("inner_tasks:size"))
"""

INNER_HEADER = """
import pytest
from hypothesis import given, settings, strategies as st
from conformance import judge
from conformance.world import Case
"""

INNER_TASKS = """
def size(ctx):
    return ctx.world_size
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_run_prints_the_table_blaming_the_rule_a_check_names_and_writes_reports(
    pytester, workers
):
    pytester.makepyfile(test_inner=INNER_HEADER + INNER, inner_tasks=INNER_TASKS)
    result = pytester.runpytest_subprocess(
        "-p", "conformance.plugin", "--world-sizes", "1,2", "--report-dir", "out", *workers
    )
    result.assert_outcomes(passed=5, failed=3, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*shardspec: results per rule*",
            "implementation: reference",
            "backend:        gloo",
            "world sizes:    1,2",
            "rule         gloo ws1  gloo ws2  any",
            "ERR-1        pass      fail",
            "ST-SPEC-1    pass      pass",
            "ST-SPEC-2    pass      fail",
            "ST-GATHER-1  pass      blocked",
            "ST-GATHER-2  pass      fail",
            "DT-PLACE-7                       not claimed",
            "DT-API-1               fail",
            "DT-API-2     pass      pass",
            "rules: 4 fail, 1 blocked, 2 pass, 1 not claimed",
        ]
    )
    data = json.loads((pytester.path / "out" / "rules.json").read_text())
    assert data["summary"] == {"pass": 2, "fail": 4, "blocked": 1, "not claimed": 1}
    assert data["run"]["backend"] == "gloo"
    assert data["run"]["known failures"] == "none shipped for 'reference'"
    markdown = (pytester.path / "out" / "rules.md").read_text()
    assert "| world sizes | 1,2 |" in markdown
    assert "| ST-SPEC-2 | pass | fail |  |" in markdown


def ops_sample() -> RuleTable:
    table = RuleTable()
    table.add(["add"], "2", "pass")
    table.add(["view"], "2", "xfail")
    table.add(["view"], "3", "fail")
    table.add(["mm"], "any", "not claimed")
    return table


class TestPerOpTable(TestCase):
    def test_ops_render_as_rows_in_the_runs_order_of_names(self):
        self.assertExpectedInline(
            render_text(ops_sample(), [], noun="op"),
            """\
op    ws2    ws3   any
add   pass
mm                 not claimed
view  xfail  fail
ops: 1 fail, 1 pass, 1 not claimed""",
        )


def test_json_carries_the_per_op_table_beside_the_rules():
    data = json.loads(render_json(sample(), ORDER, ops=ops_sample()))
    assert data["ops"]["view"] == {"ws2": "xfail", "ws3": "fail", "any": ""}
    assert "ops" not in json.loads(render_json(sample(), ORDER))


def test_a_test_that_checked_a_rule_outranks_one_stopped_before_it_within_a_cell():
    """One op's test stopped by that op's known failure does not hide a rule every other op's
    test judged; across world sizes, a size where no test reached the rule still shows."""
    table = RuleTable()
    table.add(["DT-OP-2"], "2", "blocked")
    table.add(["DT-OP-2"], "2", "pass")
    table.add(["DT-OP-2"], "3", "blocked")
    table.add(["DT-OP-2"], "3", "xfail")
    table.add(["DT-OP-4"], "2", "blocked")
    assert dict(table.cells) == {
        "DT-OP-2": {"2": "pass", "3": "xfail"},
        "DT-OP-4": {"2": "blocked"},
    }
    table.add(["DT-OP-4"], "3", "pass")
    assert table.counts() == {"xfail": 1, "blocked": 1}
