"""The reference's gradients on a real Gloo world of 2 ranks: spec/dt-grad.md's worked examples,
value for value, and the layouts the reference chooses (informative in the spec)."""

from __future__ import annotations

import pytest
import torch

from conformance.world import Case


@pytest.mark.rules("DT-GRAD-1", "DT-GRAD-2", "DT-GRAD-3", "DT-GRAD-4", "DT-GRAD-5")
def test_gradients_flow_back_through_the_api_as_the_spec_examples_say(world_pool):
    ranks = world_pool.get(2).run(Case("dt_tasks:grad_examples")).values()
    for rank, seen in enumerate(ranks):
        assert seen["distribute is a leaf"]
        assert torch.equal(seen["grad after one pass"], torch.tensor([1.0, 2.0, 3.0, 4.0]))
        assert torch.equal(seen["grad after two passes"], torch.tensor([2.0, 4.0, 6.0, 8.0]))
        assert seen["grad placements"] == "[S(0)]"  # the leaf's gradient placements
        assert torch.equal(seen["grad local"], torch.tensor([[2.0, 4.0], [6.0, 8.0]])[rank])
        assert torch.equal(seen["to_local in parts"], torch.tensor([1.0, 3.0]))
        assert torch.equal(seen["from_local default"], torch.tensor([1.0, 2.0]))  # read as R
        assert torch.equal(seen["redistribute back"], torch.tensor([5.0, 7.0]))  # R, whole
        assert seen["nothing requires grad"] == [False, False, False, None]
    parts = sum(seen["from_local in parts"] for seen in ranks)
    assert torch.equal(parts, torch.tensor([1.0, 2.0]))  # P(sum): the parts sum to it


@pytest.mark.rules("DT-GRAD-6", "DT-GRAD-7")
def test_an_ops_gradients_are_the_single_device_ones_as_the_spec_examples_say(world_pool):
    for seen in world_pool.get(2).run(Case("dt_tasks:op_grad_examples")).values():
        assert seen["requires grad"] == [True, True, False]
        assert seen["product placements"] == "[P(sum)]"
        assert torch.equal(seen["a.grad"], torch.full((2, 3), 2.0))
        assert torch.equal(seen["b.grad"], torch.tensor([[3.0, 3.0], [5.0, 5.0], [7.0, 7.0]]))
        assert seen["grad placements"] == ["[S(1)]", "[S(0)]"]
