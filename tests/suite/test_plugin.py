"""The pytest plugin: options choose the worlds and the implementation, known failures are
xfailed strictly, and a failing case tells how to replay it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from conformance import known_failures, profiles

INNER_TASKS = """
import torch, torch.distributed as dist

def rank_sum(ctx):
    t = torch.tensor([float(ctx.rank)])
    dist.all_reduce(t)
    return float(t)

def fail_on_last(ctx):
    if ctx.rank == ctx.world_size - 1:
        raise ValueError("[ST-GATHER-1] planted")
    return ctx.rank
"""

INNER_TESTS = """
from conformance import judge
from conformance.world import Case

def test_sum(world):
    n = world.world_size
    assert world.run(Case("inner_tasks:rank_sum")).values() == [n * (n - 1) / 2] * n

def test_fails(world):
    judge.all_returned(world.run(Case("inner_tasks:fail_on_last")))

def test_impl(impl):
    assert impl.name == "inner"
"""

ADAPTER = """
class Adapter:
    name = "inner"
    capabilities = frozenset()


ADAPTER = Adapter()
"""


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(inner_tasks=INNER_TASKS, test_inner=INNER_TESTS, my_adapter=ADAPTER)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "conformance.plugin", "-p", "no:cacheprovider", *args
    )


def test_world_tests_run_once_per_world_size_and_failures_print_the_replay(inner):
    result = run(inner, "--world-sizes", "1,3", "--impl", "my_adapter:ADAPTER", "-v")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_sum[[]ws1[]] PASSED*",
            "*test_sum[[]ws3[]] PASSED*",
            "*rank 2: raised ValueError: [[]ST-GATHER-1[]] planted*",
            "*replay: python -m conformance replay --backend gloo --world-size 3 *inner_tasks*",
        ]
    )


def test_known_failures_are_strict_xfails_and_stale_entries_are_reported(inner):
    inner.path.joinpath("xfails.txt").write_text(
        "# planted failure (https://example.invalid/issue/1)\n"
        "test_inner.py::test_fails\n"
        "    whole test\n    ST-GATHER-1: raises ValueError, returns\n"
        "    ERR-6: raises ValueError, returns\n"
        "test_inner.py::test_sum[ws1]   # listed, but it passes: strict xfail fails\n"
        "    whole test\n    ST-GATHER-1: wrong value\n"
        "test_inner.py::test_gone       # matches nothing\n"
        "    whole test\n    ST-GATHER-1: wrong value\n"
    )
    result = run(
        inner, "--world-sizes", "1,2", "--impl", "my_adapter:ADAPTER", "--xfails", "xfails.txt"
    )
    result.assert_outcomes(passed=2, xfailed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["*test_gone*matches no collected test*", "*test_sum[[]ws1[]]*XPASS(strict)*"]
    )


def test_a_reason_may_span_several_comment_lines(tmp_path):
    path = tmp_path / "xfails.txt"
    path.write_text(
        "# RULE-1: the first line\n#   and the second\na::one\n  ST-SPEC-1: hangs\n"
        "a::two\n  ST-SPEC-1: hangs\n"
        "# RULE-2: own reason\na::three\n  ST-SPEC-1: hangs\n"
    )
    reasons = [(e.test_id, e.reason) for e in known_failures.parse(path)]
    assert reasons == [
        ("a::one", "RULE-1: the first line and the second"),
        ("a::two", "RULE-1: the first line and the second"),
        ("a::three", "RULE-2: own reason"),
    ]


def test_an_xfail_entry_without_a_reason_is_refused(inner):
    inner.path.joinpath("xfails.txt").write_text(
        "test_inner.py::test_fails\n    ST-GATHER-1: raises ValueError\n"
    )
    result = run(inner, "--xfails", "xfails.txt", "--impl", "my_adapter:ADAPTER")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*xfails.txt:1*gives no reason*"])


def test_an_unknown_implementation_is_one_usage_error_before_any_test(inner):
    result = run(inner, "-k", "impl", "--impl", "no_such_module:thing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--impl 'no_such_module:thing' cannot be loaded*"])
    assert result.stderr.str().count("cannot be loaded") == 1


def test_bad_world_sizes_are_a_usage_error(inner):
    result = run(inner, "--world-sizes", "0,9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--world-sizes: world sizes must lie in 1..8*"])


def test_nccl_worlds_without_a_gpu_are_an_error_unless_their_skips_are_asked_for(inner):
    """A GPU gate whose CUDA is broken must not go green on the tests that need no world."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    refused = run(inner, "-k", "sum", "--backend", "nccl", "--world-sizes", "2")
    assert refused.ret == 3
    refused.stderr.fnmatch_lines(["*environment error: --backend nccl cannot run world size 2*"])
    skipped = run(
        inner, "-k", "sum", "--backend", "nccl", "--world-sizes", "2", "-rs", "--skip-unavailable"
    )
    skipped.assert_outcomes(skipped=1)
    skipped.stdout.fnmatch_lines(["*NCCL*"])


def test_worlds_work_under_xdist(inner):
    result = run(inner, "-k", "sum", "-n", "2", "--world-sizes", "1,2,3,4")
    result.assert_outcomes(passed=4)


RULE_LEVEL_TESTS = """
import pytest
from hypothesis import given, strategies as st
from conformance import judge

@pytest.mark.rules("ST-GATHER-1", "ST-GATHER-2")
@given(st.integers(0, 9))
def test_sometimes_breaks_one_rule(x):
    judge.assert_equal("x < 5", x < 5, True, str(x), rule="ST-GATHER-1")
    judge.assert_equal("x >= 0", x >= 0, True, str(x), rule="ST-GATHER-2")

@pytest.mark.rules("ST-RESHARD-1", "ST-RESHARD-2")
@given(st.integers(0, 9))
def test_always_breaks_one_rule(x):
    judge.assert_equal("x > 9", x > 9, True, str(x), rule="ST-RESHARD-1")

@pytest.mark.rules("ST-SPEC-1", "ST-SPEC-2")
def test_one_example_breaks_one_rule():
    judge.assert_equal("answer", 41, 42, "example", rule="ST-SPEC-1")

@pytest.mark.rules("DT-MESH-1")
def test_never_breaks():
    judge.assert_equal("answer", 42, 42, "example", rule="DT-MESH-1")
"""


def test_a_rule_entry_counts_its_failures_and_judges_the_other_rules(pytester):
    pytester.makepyfile(test_rule_level=RULE_LEVEL_TESTS)
    pytester.path.joinpath("xfails.txt").write_text(
        "# planted\n"
        "test_rule_level.py::test_sometimes_breaks_one_rule\n    ST-GATHER-1: wrong value\n"
        "test_rule_level.py::test_always_breaks_one_rule\n    ST-RESHARD-1: wrong value\n"
        "test_rule_level.py::test_one_example_breaks_one_rule\n    ST-SPEC-1: wrong value\n"
        "test_rule_level.py::test_never_breaks\n    DT-MESH-1: wrong value\n"
    )
    result = run(pytester, "--xfails", "xfails.txt", "-rx")
    result.assert_outcomes(passed=2, xfailed=2)
    result.stdout.fnmatch_lines(
        [
            "xfails.txt:8: known failure of DT-MESH-1 in *test_never_breaks not met in this run",
            "ST-SPEC-1     xfail",
            "ST-SPEC-2     blocked",
            "ST-GATHER-1   xfail",
            "ST-GATHER-2   pass",
            "ST-RESHARD-1  xfail",
            "ST-RESHARD-2  blocked",
            "DT-MESH-1     pass",
            "*test_always_breaks_one_rule*every example met a known failure of ST-RESHARD-1*",
            "*test_one_example_breaks_one_rule*known failure of ST-SPEC-1 (wrong value): answer*",
        ]
    )


BUDGET_TEST = """
import pytest
from hypothesis import given, settings, strategies as st
from conformance import judge

@pytest.mark.rules("ST-GATHER-1", "ST-GATHER-2")
@settings(max_examples=20, derandomize=True, database=None)
@given(st.integers(0, 1000))
def test_half_known(x):
    with open("examples.txt", "a") as ran:
        ran.write(f"{x}\\n")
    judge.assert_equal("even", x % 2, 0, str(x), rule="ST-GATHER-1")
"""


def test_an_example_that_meets_a_known_failure_counts_toward_max_examples(pytester):
    """So a property's known failures (each may be a hang, costing the grace period) cost at
    most its ``max_examples``, not up to ten times as many discarded ones."""
    pytester.makepyfile(test_budget=BUDGET_TEST)
    pytester.path.joinpath("xfails.txt").write_text(
        "# planted\ntest_budget.py::test_half_known\n    ST-GATHER-1: wrong value\n"
    )
    result = run(pytester, "--xfails", "xfails.txt")
    result.assert_outcomes(passed=1)
    drawn = pytester.path.joinpath("examples.txt").read_text().split()
    assert len(drawn) == 20
    assert any(int(x) % 2 for x in drawn)
    assert any(int(x) % 2 == 0 for x in drawn)
    result.stdout.fnmatch_lines(["ST-GATHER-1  xfail", "ST-GATHER-2  pass"])


EDGES_TEST = """
import pytest
from hypothesis import given, settings, strategies as st
from conformance import edges, judge

@pytest.mark.rules("ST-GATHER-1")
@pytest.mark.edges("group")
@settings(max_examples=10, derandomize=True, database=None)
@given(st.integers(1, 4))
def test_draws_whole_worlds_only(n):
    edges.group(list(range(n)), n)
"""


PAIRS_TEST = """
import pytest
from hypothesis import given, settings, strategies as st
from conformance import edges

@pytest.mark.rules("ST-GATHER-1")
@pytest.mark.edges("group", "permutation")
@settings(max_examples=6, derandomize=True, database=None)
@given(data=st.data())
def test_pairs(data):
    sub = data.draw(st.integers(0, 40)) == 0  # rare: plain draws seldom meet it
    members = [0, 1, 2] if sub else [0, 1, 2, 3]
    kind = data.draw(st.sampled_from(["identity", "swap", "cycle"]))
    after = {"identity": members, "swap": [members[1], members[0], *members[2:]],
             "cycle": members[1:] + members[:1]}[kind]
    edges.group(members, 4)
    edges.permutation(members, after)
    with open("ran.txt", "a") as f:
        f.write(f"{sub},{kind}\\n")
    assert not (sub and kind == "cycle"), "planted: a sub-group with a longer cycle"
"""


VOLUME_TEST = """
import pytest
from hypothesis import given, settings, strategies as st

@pytest.mark.rules("ST-VALID-1")
@pytest.mark.volume(5)
@settings(max_examples=20, derandomize=True, database=None)
@given(st.integers(0, 10**6))
def test_at_volume(x):
    with open("examples.txt", "a") as ran:
        ran.write(f"{x}\\n")
"""


def test_a_property_at_volume_runs_its_factor_times_the_examples_and_says_how_many(pytester):
    pytester.makepyfile(test_volume=VOLUME_TEST)
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert len(pytester.path.joinpath("examples.txt").read_text().split()) == 100
    result.stdout.fnmatch_lines(
        [
            "test_volume.py::test_at_volume: 100",
            "shardspec: 100 examples of properties at volume",
        ]
    )


def test_the_ci_profile_judges_ten_thousand_pure_examples_per_run():
    """The properties marked ``volume`` (the pure ones, and one world test at 2) draw at least
    10,000 examples in ci together (each runs to its ``max_examples``: a run prints the count it
    reached)."""
    suite = Path(__file__).resolve().parents[2] / "conformance" / "suite"
    factors = [
        eval(ast.unparse(node.args[0]), {})  # a number, or a fraction such as 1 / 3
        for path in suite.glob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "pytest.mark.volume"
    ]
    assert sum(factors) * profiles.PROFILES["ci"]["max_examples"] >= 10_000, factors


def test_a_declared_edge_class_never_drawn_is_reported_and_with_require_edges_an_error(pytester):
    pytester.makepyfile(test_edges=EDGES_TEST)
    reported = run(pytester)
    assert reported.ret == 0
    reported.stdout.fnmatch_lines(
        [
            "*test_draws_whole_worlds_only: group: the whole world 4",
            "shardspec: test_edges.py::test_draws_whole_worlds_only never drew: group: a sub-group",
        ]
    )
    assert run(pytester, "--require-edges").ret == 3
    # A world of one rank cannot draw a sub-group: that run is not asked to.
    alone = run(pytester, "--require-edges", "--world-sizes", "1")
    assert alone.ret == 0
    assert "never drew" not in alone.stdout.str()


def test_an_unknown_rule_failure_still_fails_a_test_with_rule_entries(pytester):
    pytester.makepyfile(test_rule_level=RULE_LEVEL_TESTS)
    pytester.path.joinpath("xfails.txt").write_text(
        "test_rule_level.py::test_sometimes_breaks_one_rule  # not the one it breaks\n"
        "    ST-GATHER-2: wrong value\n"
    )
    result = run(pytester, "--xfails", "xfails.txt", "-k", "sometimes")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*x < 5=False, but should be True [[]ST-GATHER-1; *"])


def test_an_xfail_entry_with_something_other_than_rule_ids_is_refused(inner):
    inner.path.joinpath("xfails.txt").write_text(
        "test_inner.py::test_fails  # reason\n    gather: raises ValueError\n"
    )
    result = run(inner, "--xfails", "xfails.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*xfails.txt:2: 'gather: raises ValueError' is not '<rule id>*"])


def test_a_known_failing_property_is_not_shrunk(pytester):
    pytester.makepyfile(
        test_shrink="""
        from hypothesis import given, strategies as st

        from conformance import judge

        @given(st.integers(0, 10**6))
        def test_big_numbers_fail(x):
            if x >= 1000:
                with open("failing.txt", "a") as log:
                    log.write(f"{x}\\n")
                judge.assert_equal("x < 1000", False, True, str(x), rule="ST-SPEC-1")
        """
    )
    pytester.path.joinpath("xfails.txt").write_text(
        "test_shrink.py::test_big_numbers_fail  # r\n    whole test\n    ST-SPEC-1: wrong value\n"
    )
    result = run(pytester, "--xfails", "xfails.txt")
    result.assert_outcomes(xfailed=1)
    failing = pytester.path.joinpath("failing.txt").read_text().split()
    assert len(failing) <= 2, failing  # the failing example, and Hypothesis's replay of it
    pytester.path.joinpath("failing.txt").unlink()
    result = run(pytester)
    result.assert_outcomes(failed=1)
    # Without the entry Hypothesis shrinks to the minimal example and replays it last. Read off
    # the example log, not Hypothesis's report, whose wording changes between releases.
    failing = pytester.path.joinpath("failing.txt").read_text().split()
    assert len(failing) > 2, failing
    assert failing[-1] == "1000", failing


FLAKY = """
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from conformance import judge

@pytest.mark.rules("ST-SPEC-1", "ST-SPEC-2", "ST-SPEC-3")
@given(st.integers(0, 10))
@settings(derandomize=True, database=None)
def test_fails_once(x):
    calls = Path("calls.txt")
    n = int(calls.read_text()) if calls.exists() else 0
    calls.write_text(str(n + 1))
    if n == 0:
        judge.fail("rank 0: planted fault that fires once", "ST-SPEC-2")
"""


def test_a_fault_that_fires_once_is_one_failure_of_its_rule_reported_once(pytester):
    pytester.makepyfile(test_flaky=FLAKY)
    result = pytester.runpytest_subprocess("-p", "conformance.plugin", "--report-dir", "out")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    # The failure's report itself, not the short summary (which, untruncated under CI, repeats
    # the whole message).
    failures = out.split(" FAILURES ")[1].split(" short test summary info ")[0]
    report = failures.splitlines()
    verdicts = [line for line in report if "failed once, passed on replay (flaky)" in line]
    assert len(verdicts) == 1, out
    assert len([line for line in report if "planted fault that fires once" in line]) == 1, out
    rules = json.loads((pytester.path / "out" / "rules.json").read_text())["rules"]
    assert {rule: set(cells.values()) - {""} for rule, cells in rules.items()} == {
        "ST-SPEC-1": {"blocked"},
        "ST-SPEC-2": {"fail"},
        "ST-SPEC-3": {"blocked"},
    }


def test_a_listed_behaviour_no_failure_showed_is_reported(pytester):
    """An entry's rule met only as ``wrong value`` says it never hung: the run confirms one of
    the two behaviours it lists."""
    pytester.makepyfile(test_rule_level=RULE_LEVEL_TESTS)
    pytester.path.joinpath("xfails.txt").write_text(
        "# planted\n"
        "test_rule_level.py::test_sometimes_breaks_one_rule\n"
        "    ST-GATHER-1: wrong value, hangs\n"
        "test_rule_level.py::test_one_example_breaks_one_rule\n    ST-SPEC-1: wrong value\n"
    )
    result = run(pytester, "--xfails", "xfails.txt", "-k", "sometimes or one_example")
    result.assert_outcomes(passed=1, xfailed=1)
    result.stdout.fnmatch_lines(
        [
            "xfails.txt:2: known failure of ST-GATHER-1 in *test_sometimes_breaks_one_rule met, "
            "but never as: hangs"
        ]
    )
    result.stdout.no_fnmatch_line("*ST-SPEC-1*never as*")


DRAWING_TEST = """
import json
from hypothesis import given, strategies as st

@given(st.integers(0, 10**9))
def test_draws(n):
    {body}
    with open("draws.jsonl", "a") as f:
        f.write(json.dumps(n) + "\\n")
"""


def _draws(pytester: pytest.Pytester, body: str, name: str = "test_draws") -> list[int]:
    """The examples a ci run of a one-property file draws."""
    source = DRAWING_TEST.format(body=body).replace("def test_draws", f"def {name}")
    pytester.makepyfile(test_drawing=source)
    (pytester.path / "draws.jsonl").unlink(missing_ok=True)
    run(pytester, "--hypothesis-profile", "ci").assert_outcomes(passed=1)
    return [json.loads(line) for line in (pytester.path / "draws.jsonl").read_text().split()]


def test_a_ci_run_draws_by_the_tests_name_not_its_source(pytester):
    """A refactor of a test body keeps the examples ci draws, so its verdicts can be compared
    with the ones before it; another test name draws others."""
    first = _draws(pytester, "pass")
    assert len(first) == 60
    assert _draws(pytester, "x = 1  # a refactored body") == first
    assert _draws(pytester, "pass", name="test_renamed") != first


def test_ci_draws_every_pair_of_declared_classes_first_and_so_meets_a_fault_of_two_rare_ones(
    pytester,
):
    """A fault that needs two classes at once (here a sub-group, rare, with a longer cycle):
    draws of each class alone miss it; the covering examples the ci profile runs first meet
    it, and --require-edges refuses a run that never drew a pair."""
    pytester.makepyfile(test_pairs=PAIRS_TEST)
    plain = run(pytester, "--require-edges")
    assert plain.ret == 3, plain.stdout.str()
    plain.stdout.fnmatch_lines(["*test_pairs: * of 6 pairs", "    never together: *sub-group*"])
    pytester.path.joinpath("ran.txt").unlink()
    covered = run(pytester, "--hypothesis-profile", "ci")
    assert covered.ret == 1
    covered.stdout.fnmatch_lines(["*planted: a sub-group with a longer cycle*"])
    first = pytester.path.joinpath("ran.txt").read_text().split()
    assert "True,cycle" in first


# PAIRS_TEST whose sub-groups break a rule the xfails file lists, but with a longer cycle another.
KNOWN_IN_COVERING_TEST = (
    PAIRS_TEST.replace("import edges", "import edges, judge, symptoms")
    .replace('"ST-GATHER-1")', '"ST-GATHER-1", "ST-GATHER-2")')
    .replace(
        '    assert not (sub and kind == "cycle"), "planted: a sub-group with a longer cycle"',
        "    if sub:\n"
        '        rule = "ST-GATHER-2" if kind == "cycle" else "ST-GATHER-1"\n'
        '        judge.fail(f"planted: a sub-group, {kind}", rule, symptoms.WRONG_VALUE)',
    )
)


def test_a_known_failure_in_a_covering_example_ends_that_example_not_the_test(pytester):
    """Covering examples run like the property's own: one that meets a known failure ends
    there and the next runs, so a failure of another rule that a later covering example meets
    is reported, not hidden behind the known one as an expected failure of the whole test."""
    pytester.makepyfile(test_pairs=KNOWN_IN_COVERING_TEST)
    pytester.path.joinpath("xfails.txt").write_text(
        "# planted\ntest_pairs.py::test_pairs\n    ST-GATHER-1: wrong value\n"
    )
    result = run(pytester, "--hypothesis-profile", "ci", "--xfails", "xfails.txt")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*planted: a sub-group, cycle*"])


def test_a_seed_draws_the_same_examples_whatever_modules_are_imported(tmp_path, monkeypatch):
    """Hypothesis would mix literals of "local" modules (the suite in a checkout, none in a
    wheel) into its draws: the same seed must draw the same examples either way."""
    from hypothesis import given, seed, settings
    from hypothesis import strategies as st

    def draws() -> list[int]:
        seen: list[int] = []

        @seed(2026)
        @settings(max_examples=300, database=None, derandomize=False)
        @given(st.integers(0, 10**12))
        def collect(n: int) -> None:
            seen.append(n)

        collect()
        return seen

    before = draws()
    (tmp_path / "users_module.py").write_text(
        "".join(f"C{i} = {123_456_789_000 + i}\n" for i in range(50))
    )
    monkeypatch.syspath_prepend(tmp_path)
    import users_module  # noqa: F401  (a module outside site-packages, full of literals)

    assert draws() == before


# EDGES_TEST whose property skips, as a test does whose capability the adapter does not claim.
SKIPPED_EDGES_TEST = EDGES_TEST.replace(
    "    edges.group(list(range(n)), n)",
    '    pytest.skip("the adapter does not claim what this test judges")',
)


def test_a_skipped_test_is_not_asked_for_the_edge_classes_it_declares(pytester):
    """A test that skips (a capability its adapter does not claim) draws nothing, and a run
    with --require-edges is no error for it: its rules are reported as skipped."""
    pytester.makepyfile(test_skipped=SKIPPED_EDGES_TEST)
    result = run(pytester, "--require-edges")
    assert result.ret == 0, result.stdout.str()
    assert "never drew" not in result.stdout.str()


# PAIRS_TEST whose property skips before its first draw, as one whose capability is not claimed.
SKIPPED_PAIRS_TEST = PAIRS_TEST.replace(
    "    sub = data.draw", '    pytest.skip("not claimed: a capability")\n    sub = data.draw'
)


def test_a_test_that_skips_while_its_covering_examples_are_drawn_is_skipped_cleanly(pytester):
    """The ci profile draws a property's covering examples at setup; a property that skips
    there (its adapter claims no capability for it) is reported skipped, with no warning of a
    plugin that raised in its hook."""
    pytester.makepyfile(test_pairs=SKIPPED_PAIRS_TEST)
    result = run(pytester, "--hypothesis-profile", "ci", "--require-edges")
    result.assert_outcomes(skipped=1)
    assert result.ret == 0
    assert "PluggyTeardownRaisedWarning" not in result.stdout.str()


PER_OP_TEST = """
import pytest

def with_a_variant():
    return ["mm", "softmax"]

@pytest.mark.rules("DT-OP-1")
@pytest.mark.per_op
def test_every_op(op):
    pass

@pytest.mark.rules("DT-OP-11")
@pytest.mark.per_op(ops=with_a_variant)
def test_ops_with_a_variant(op):
    pass
"""


def test_a_per_op_test_runs_once_per_chosen_op_of_those_it_can_run(pytester):
    """``per_op`` parametrizes by ``--ops``; ``per_op(ops=...)`` keeps the chosen ops that the
    test can run (the in-place test: those with an in-place variant)."""
    pytester.makepyfile(test_per_op=PER_OP_TEST)
    result = run(pytester, "--ops", "add,mm,softmax", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "test_per_op.py::test_every_op[[]add[]]",
            "test_per_op.py::test_every_op[[]mm[]]",
            "test_per_op.py::test_every_op[[]softmax[]]",
            "test_per_op.py::test_ops_with_a_variant[[]mm[]]",
            "test_per_op.py::test_ops_with_a_variant[[]softmax[]]",
        ]
    )
    assert "test_ops_with_a_variant[add]" not in result.stdout.str()


def test_a_per_op_test_left_with_no_chosen_op_is_skipped_with_its_reason_under_xdist(pytester):
    """``--ops add`` leaves the in-place test no op: one skipped item that says why, which
    xdist can hand to a worker (an empty parameter set ended the run in an INTERNALERROR)."""
    pytester.makepyfile(test_per_op=PER_OP_TEST)
    result = run(pytester, "--ops", "add", "-n", "2", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*--ops add: none of these ops is one this test runs*"])
    assert "INTERNALERROR" not in result.stdout.str()


PER_OP_KNOWN = """
import pytest
from hypothesis import given, strategies as st
from conformance import judge

@pytest.mark.rules("DT-OP-1", "DT-MESH-8")
@pytest.mark.per_op
@given(st.integers(0, 9))
def test_every_op(op, x):
    if x == 0:  # one example of every op: a mesh whose ranks do not ascend
        judge.assert_equal("mesh order", 1, 2, "example", rule="DT-MESH-8")
    if op == "mm" and x == 1:
        judge.assert_equal("value", 1, 2, "example", rule="DT-OP-1")
    if op == "softmax":  # every example of softmax meets the known failure of every op
        judge.assert_equal("mesh order", 1, 2, "example", rule="DT-MESH-8")
"""


def test_an_entry_for_every_op_of_a_test_leaves_each_ops_cell_its_own_verdict(pytester):
    """A known failure listed for a whole per-op test (the order of a mesh's ranks) is another
    behaviour than each op's: it turns no op's cell to xfail; an entry scoped to an op does,
    and the cells name the records each entry's comment names."""
    pytester.makepyfile(test_per_op=PER_OP_KNOWN)
    pytester.path.joinpath("xfails.txt").write_text(
        "# every op, on meshes whose ranks do not ascend\n# finding: mesh-order\n"
        "test_per_op.py::test_every_op\n    DT-MESH-8: wrong value\n\n"
        "# mm's own\n# finding: mm-value\n"
        "test_per_op.py::test_every_op[mm]\n    DT-OP-1: wrong value\n"
    )
    result = run(
        pytester, "--ops", "add,mm,softmax", "--xfails", "xfails.txt", "--report-dir", "out"
    )
    result.assert_outcomes(passed=2, xfailed=1)
    report = json.loads((pytester.path / "out" / "rules.json").read_text())
    assert {op: set(cells.values()) - {""} for op, cells in report["ops"].items()} == {
        "add": {"pass"},
        "mm": {"xfail"},
        "softmax": {"blocked"},
    }
    assert report["op_findings"] == {
        "add": {"other": ["mesh-order"]},
        "mm": {"other": ["mesh-order"], "own": ["mm-value"]},
        "softmax": {"other": ["mesh-order"]},
    }
    assert report["rule_findings"] == {"DT-MESH-8": ["mesh-order"], "DT-OP-1": ["mm-value"]}
