"""A failure blames the rule its check enforces and the rules of errors.md that its symptom
breaks whatever that rule is: a hang (ERR-7), members of one collective that part ways (ERR-6), an
invalid input not refused with its rule's type (ERR-1, ERR-2; ERR-3 for a wrong type)."""

from __future__ import annotations

import pytest

from conformance import judge
from conformance.oracle.vocabulary import VALID, Verdict, type_error, value_error
from conformance.world import Case, CaseResult, Hung, Raised, Returned
from conformance.world.backends import backend_named


def raised(rank: int, *types: str) -> Raised:
    return Raised(rank, (*types, "Exception", "BaseException", "object"), "planted", "")


def result(*outcomes) -> CaseResult:
    return CaseResult(
        Case("planted:task", {}), tuple(outcomes), len(outcomes), backend_named("gloo"), 0.0
    )


def blamed(check, *args, **kwargs) -> tuple[str, ...]:
    with pytest.raises(pytest.fail.Exception) as info:
        check(*args, **kwargs)
    return info.value.violated


def test_a_wrong_exception_type_blames_the_rule_and_the_type_rule():
    got = blamed(judge.assert_collective_verdict,
                 result(raised(0, "IndexError"), raised(1, "IndexError")),
                 value_error("ST-GATHER-5"))  # fmt: skip
    assert got == ("ST-GATHER-5", "ERR-1")


def test_returning_for_an_invalid_argument_type_blames_err2_but_declining_is_optional():
    got = blamed(judge.assert_pure_verdict, result(Returned(0, None)), type_error("ST-SPEC-7"),
                 "ChunkShardingSpec(0.0, ...)")  # fmt: skip
    assert got == ("ST-SPEC-7", "ERR-2")
    unsupported = Verdict(rule="ST-RESHARD-8", error="NotImplementedError")
    got = blamed(judge.assert_pure_verdict, result(Returned(0, None)), unsupported, "reshard")
    assert got == ("ST-RESHARD-8",)
    got = blamed(judge.assert_pure_verdict, result(raised(0, "RuntimeError")), unsupported, "x")
    assert got == ("ST-RESHARD-8", "ERR-3")


def test_members_that_part_ways_blame_err6_and_a_hang_blames_err7():
    got = blamed(judge.assert_collective_verdict,
                 result(raised(0, "ValueError"), Hung(1, 1.0, "", asleep=True)),
                 value_error("ST-GATHER-5"))  # fmt: skip
    assert got == ("ST-GATHER-5", "ERR-6", "ERR-7")


def test_members_that_raise_different_types_part_ways():
    got = blamed(judge.assert_collective_verdict,
                 result(raised(0, "ValueError"), raised(1, "TypeError")),
                 type_error("ST-GATHER-3"))  # fmt: skip
    assert got == ("ST-GATHER-3", "ERR-2", "ERR-6")


def test_a_valid_collective_refused_on_one_rank_blames_err6():
    got = blamed(judge.all_returned, result(Returned(0, 1), raised(1, "RuntimeError")),
                 rule="DT-API-4")  # fmt: skip
    assert got == ("DT-API-4", "ERR-6")


def test_a_local_call_may_part_ways_but_not_raise_the_wrong_type():
    verdicts = {0: VALID, 1: value_error("DT-PLACE-3")}
    ok = result(Returned(0, 1), raised(1, "ValueError"))
    assert judge.assert_verdicts_by_rank(ok, verdicts, rule="ERR-6") == [1, None]
    wrong = result(Returned(0, 1), raised(1, "AssertionError"))
    assert blamed(judge.assert_verdicts_by_rank, wrong, verdicts, rule="ERR-6") == (
        "DT-PLACE-3",
        "ERR-1",
    )


def test_a_failure_prints_the_rules_it_blames():
    with pytest.raises(pytest.fail.Exception) as info:
        judge.assert_equal("answer", 41, 42, "example", rule="ST-SPEC-1")
    assert str(info.value).splitlines()[-1] == "  rules: ST-SPEC-1"


def test_a_tensor_that_could_not_be_built_blames_its_constructor_not_the_operation():
    built_not = Raised(0, ("IndexError", "Exception"), "planted", "", facts={"built": False})
    case = result(built_not, Hung(1, 1.0, "", asleep=True))
    assert blamed(judge.assert_built, case, rule="ST-LIFE-7") == ("ST-LIFE-7", "ERR-6", "ERR-7")
    reshard_raised = Raised(0, ("ValueError", "Exception"), "planted", "", facts={"kept": True})
    judge.assert_built(result(reshard_raised, raised(1, "ValueError")), rule="ST-LIFE-7")
