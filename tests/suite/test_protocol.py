"""Cases are plain data, outcomes say what each rank did, and a failure report can be acted on."""

from __future__ import annotations

import pickle

import pytest
import torch
from expecttest import TestCase

from conformance.world import Case, CaseFailed, CaseResult, Died, Hung, Raised, Returned
from conformance.world.backends import backend_named
from conformance.world.rank import encode


def test_a_case_round_trips_through_json():
    case = Case("pkg.mod:task", {"shape": [4, 2], "placements": ["S(0)", "R"]})
    assert Case.from_json(case.to_json()) == case


def test_a_case_refuses_arguments_that_cannot_be_replayed():
    with pytest.raises(TypeError, match="JSON-able"):
        Case("pkg.mod:task", {"tensor": object()})


def test_a_case_needs_a_module_and_function_name():
    with pytest.raises(TypeError, match="'module:function'"):
        Case("task_without_module")


def test_raised_reads_the_rule_id_from_the_message():
    raised = Raised(0, ("ValueError", "Exception"), "[ST-VALID-3] shards 0 and 1 overlap", "")
    assert raised.rule == "ST-VALID-3"
    assert raised.is_a("ValueError")
    assert not raised.is_a("TypeError")
    assert Raised(0, ("ValueError",), "no id here", "").rule is None


@pytest.mark.parametrize(
    "tensor",
    [
        torch.tensor([[1.5, -0.0], [float("nan"), float("-inf")]]),
        torch.tensor(7, dtype=torch.int64),
        torch.zeros(2, 0, 3),
        torch.tensor([True, False]),
        torch.tensor([1.0, 2.5], dtype=torch.bfloat16),
        torch.tensor([2**63 - 1, -(2**63)]),
        torch.arange(12.0).reshape(3, 4).t(),  # strides of its own: pickled as ever
        torch.arange(6.0)[2:5],  # contiguous, at an offset into a larger storage
        torch.ones(2, 1, 3)[:, :, :].as_strided((2, 1, 3), (3, 5, 1)),  # a size-1 dim's stride
    ],
    ids=["special floats", "0-d", "empty", "bool", "bfloat16", "int64 ends", "transposed",
         "offset", "odd stride of a size-1 dim"],
)  # fmt: skip
def test_an_outcome_carries_each_tensor_back_bit_for_bit(tensor):
    """Outcomes pickle contiguous tensors as raw bytes (``rank.encode``): dtype, shape, strides
    and every bit (NaN, -0.0) arrive as sent."""
    back = pickle.loads(encode(Returned(1, {"x": [tensor]}))).value["x"][0]
    assert (back.dtype, back.shape, back.stride()) == (tensor.dtype, tensor.shape, tensor.stride())

    def bits(t: torch.Tensor) -> torch.Tensor:
        return t.contiguous().reshape(-1).view(torch.uint8)

    assert torch.equal(bits(back), bits(tensor))


def test_values_returns_every_rank_in_rank_order():
    result = CaseResult(
        Case("m:f"), (Returned(0, "a"), Returned(1, "b")), 2, backend_named("gloo"), 0.1
    )
    assert result.ok
    assert not result.faulted
    assert result.values() == ["a", "b"]


class TestReport(TestCase):
    def test_report_shows_every_rank_and_the_replay_command(self):
        result = CaseResult(
            Case("conformance.suite.tasks:gather", {"shape": [5], "dst": 1}),
            (
                Raised(0, ("ValueError",), "[ST-GATHER-2] out has shape (4,)", "Traceback: ..."),
                Hung(1, 5.0, 'File "gather.py", line 9 in gather'),
                Died(2, -11, "Fatal Python error: Segmentation fault"),
                Returned(3, [1.0]),
            ),
            4,
            backend_named("gloo"),
            5.2,
        )
        with pytest.raises(CaseFailed) as info:
            result.values()
        self.assertExpectedInline(
            str(info.value),
            """\
not every rank returned [conformance.suite.tasks:gather on 4 rank(s), gloo]
  case: {"args": {"dst": 1, "shape": [5]}, "task": "conformance.suite.tasks:gather"}
  rank 0: raised ValueError: [ST-GATHER-2] out has shape (4,)
  rank 1: no answer after 5.0 s (hung)
  rank 2: process died with exit code -11
  rank 3: returned [1.0]
  --- rank 0 traceback ---
  | Traceback: ...
  --- rank 1 stack ---
  | File "gather.py", line 9 in gather
  --- rank 2 log_tail ---
  | Fatal Python error: Segmentation fault
  replay: python -m conformance replay --backend gloo --world-size 4 --task-module conformance.suite.tasks '{"args": {"dst": 1, "shape": [5]}, "task": "conformance.suite.tasks:gather"}'""",
        )
