"""A failed check's message shows what a reader acts on: for tensors, the positions where they
differ and the values at those positions."""

from __future__ import annotations

import pytest
import torch
from expecttest import TestCase

from conformance import judge


def message(check, *args, **kwargs) -> str:
    with pytest.raises(pytest.fail.Exception) as info:
        check(*args, **kwargs)
    return str(info.value)


class TestTensorMessages(TestCase):
    def test_unequal_tensors_show_the_values_where_they_differ(self):
        actual = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
        expected = actual.clone()
        expected[1, 2] = 7.0
        self.assertExpectedInline(
            message(judge.assert_tensor_exact, "gradient", actual, expected, "c", rule="DT-GRAD-7"),
            """\
gradient at [[1, 2]]=[5.0], but should be [7.0] [DT-GRAD-7; c]
  symptom: wrong value
  rules: DT-GRAD-7""",
        )

    def test_nan_where_both_hold_one_is_not_shown_as_a_difference(self):
        actual = torch.tensor([float("nan"), 1.0, 2.0])
        expected = torch.tensor([float("nan"), 1.0, 3.0])
        self.assertExpectedInline(
            message(judge.assert_tensor_exact, "full_tensor()", actual, expected, "case"),
            """\
full_tensor() at [[2]]=[2.0], but should be [3.0] [case]
  symptom: wrong value""",
        )

    def test_a_0d_tensor_shows_its_value(self):
        self.assertExpectedInline(
            message(judge.assert_tensor_exact, "sum", torch.tensor(1), torch.tensor(2), "case"),
            """\
sum at [[]]=[1], but should be [2] [case]
  symptom: wrong value""",
        )
