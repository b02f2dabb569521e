"""The torch adapter's claim on operators (conformance/adapters/pytorch_ops.py): the ops its
DTensor has a way to run, read from PyTorch's own registries."""

from __future__ import annotations

import torch

from conformance.adapters import pytorch_ops
from conformance.ops import catalogue


def test_an_aten_op_without_a_strategy_is_not_runnable():
    library = torch.library.Library("shardspec_test", "DEF")
    library.define("twice(Tensor x) -> Tensor")
    library.impl("twice", lambda x: x * 2, "CPU")
    runnable = pytorch_ops._runnable()
    assert runnable(torch.ops.aten.add.Tensor)
    assert runnable(torch.ops.aten.mm.default)
    assert not runnable(torch.ops.shardspec_test.twice.default)


def test_the_core_ops_are_claimed_and_unknown_names_are_not_reported_unclaimed():
    unclaimed = pytorch_ops.Unclaimed()
    assert [op for op in catalogue.CORE_OPS if op in unclaimed] == []
    assert "no.such.op" not in unclaimed
