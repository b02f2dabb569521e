"""The spec is machine-readable: every rule has a unique, well-formed id in its chapter, and the
conformance suite's citations of rules are checked against it."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

from conformance import judge, rules
from conformance.cli import main

PARTS = ("**Rule.**", "**Why.**", "**Example.**", "**PyTorch 2.13.**")


@pytest.fixture(scope="module")
def spec_rules() -> list[rules.Rule]:
    return rules.load()


def test_each_chapter_uses_the_prefix_the_index_gives_it(spec_rules):
    index = (rules.SPEC / "README.md").read_text()
    declared = dict(re.findall(r"^\| \[([\w-]+\.md)\]\(\1\) \| `([A-Z-]+)` \|", index, re.M))
    assert declared, "spec/README.md lists no chapter prefixes"
    for rule in spec_rules:
        assert declared.get(rule.chapter) == rule.prefix, f"{rule.id} in {rule.chapter}"


def test_ids_in_a_chapter_count_from_one_without_gaps(spec_rules):
    numbers = defaultdict(list)
    for rule in spec_rules:
        numbers[rule.prefix].append(int(rule.id.rsplit("-", 1)[1]))
    for prefix, found in numbers.items():
        assert found == list(range(1, len(found) + 1)), prefix


def test_every_rule_has_its_four_parts_in_order(spec_rules):
    for chapter in sorted({rule.chapter for rule in spec_rules}):
        text = (rules.SPEC / chapter).read_text()
        bodies = re.split(r"^### ", text, flags=re.M)[1:]
        for body in bodies:
            rule_id = body.split(":", 1)[0]
            positions = [body.find(part) for part in PARTS]
            assert -1 not in positions, f"{rule_id} in {chapter} lacks one of {PARTS}"
            assert positions == sorted(positions), f"{rule_id} in {chapter}: parts out of order"


def test_a_duplicate_id_is_refused(tmp_path):
    (tmp_path / "a.md").write_text("### X-1: one\n")
    (tmp_path / "b.md").write_text("### X-1: again\n")
    with pytest.raises(ValueError, match=r"X-1 is defined twice: a\.md:1 and b\.md:1"):
        rules.load(tmp_path)


def test_the_suite_cites_only_rules_the_spec_defines(spec_rules):
    unknown = set(rules.citations()) - {rule.id for rule in spec_rules}
    assert not unknown, f"tests cite ids the spec does not define: {sorted(unknown)}"


def test_the_uncovered_list_is_exactly_the_rules_without_a_conformance_test(spec_rules):
    cited = rules.citations()
    uncovered = {rule.id for rule in spec_rules if not rule.retired and rule.id not in cited}
    listed = rules.read_uncovered()
    assert not (uncovered - listed), f"rules without a test: {sorted(uncovered - listed)}"
    assert not (listed - uncovered), (
        f"now covered, remove from {rules.UNCOVERED.name}: {sorted(listed - uncovered)}"
    )


def test_the_rules_command_lists_every_rule(spec_rules, capsys):
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    for rule in spec_rules:
        assert re.search(rf"^{re.escape(rule.id)} +\d+ test\(s\)", out, re.M), rule.id
    assert f"{len(spec_rules)} rules, " in out


# The judge's checks that must say which rule they enforce; the verdict checks take theirs from
# the oracle's verdict.
NEEDS_A_RULE = {
    "assert_equal",
    "assert_tensor_exact",
    "all_returned",
    "assert_verdicts_by_rank",
    "fail",
}


def _checks_without_a_rule(path: Path, known: set[str]) -> list[str]:
    """Judge calls in one suite file that name no rule, a rule the spec lacks, or (in a test
    function) a rule the test does not cite."""
    problems = []

    def cited_by(function: ast.FunctionDef) -> set[str] | None:
        ids = [
            arg.value
            for deco in function.decorator_list
            if isinstance(deco, ast.Call) and ast.unparse(deco.func) == "pytest.mark.rules"
            for arg in deco.args
            if isinstance(arg, ast.Constant)
        ]
        return set(ids) if ids else None

    for function in ast.walk(ast.parse(path.read_text())):
        if not isinstance(function, ast.FunctionDef):
            continue
        cited = cited_by(function)
        for call in ast.walk(function):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and ast.unparse(call.func.value) == "judge"
            ):
                continue
            rule = next((k.value for k in call.keywords if k.arg in ("rule", "rules")), None)
            if call.func.attr == "fail" and len(call.args) > 1:
                rule = call.args[1]
            where = f"{path.name}:{call.lineno} judge.{call.func.attr}"
            if rule is None or (isinstance(rule, ast.Constant) and rule.value is None):
                if call.func.attr in NEEDS_A_RULE:
                    problems.append(f"{where} names no rule")
                continue
            # A rule computed at run time cannot be read here; literal ids are checked.
            literals = rule.elts if isinstance(rule, ast.Tuple | ast.List) else [rule]
            for node in literals:
                if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                    continue
                if node.value not in known:
                    problems.append(f"{where} names {node.value}, which the spec lacks")
                elif cited is not None and node.value not in cited:
                    problems.append(f"{where} names {node.value}, which its test does not cite")
    return problems


def test_the_rule_check_reports_a_missing_unknown_or_uncited_rule(spec_rules, tmp_path):
    assert set(dir(judge)) >= NEEDS_A_RULE
    suite_file = tmp_path / "test_planted.py"
    suite_file.write_text(
        "@pytest.mark.rules('ST-GATHER-1')\n"
        "def test_planted():\n"
        "    judge.assert_equal('a', 1, 1, 'c')\n"
        "    judge.assert_equal('a', 1, 1, 'c', rule=None)\n"
        "    judge.assert_equal('a', 1, 1, 'c', rule='ST-NOPE-1')\n"
        "    judge.fail('m', ('ST-GATHER-1', 'ST-GATHER-2'))\n"
        "    judge.all_returned(r, rule='ST-GATHER-1')\n"
    )
    problems = _checks_without_a_rule(suite_file, {rule.id for rule in spec_rules})
    assert problems == [
        "test_planted.py:3 judge.assert_equal names no rule",
        "test_planted.py:4 judge.assert_equal names no rule",
        "test_planted.py:5 judge.assert_equal names ST-NOPE-1, which the spec lacks",
        "test_planted.py:6 judge.fail names ST-GATHER-2, which its test does not cite",
    ]


def test_every_check_of_the_suite_names_the_rule_it_enforces(spec_rules):
    known = {rule.id for rule in spec_rules}
    problems = [
        problem
        for path in sorted(rules.SUITE.glob("test_*.py"))
        for problem in _checks_without_a_rule(path, known)
    ]
    assert not problems, "\n".join(problems)
