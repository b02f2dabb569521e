"""The reference's random draws on a real Gloo world of 2 ranks: spec/dt-random.md's worked
examples, value for value (the reference claims parity, DT-RAND-7)."""

from __future__ import annotations

import pytest
import torch

from conformance.world import Case

# torch.manual_seed(0); torch.rand(5): the single-device draws the examples cut up.
DRAWN = torch.tensor([0.4962565899, 0.7682217956, 0.0884774327, 0.1320304871, 0.3074228168])


@pytest.mark.rules(
    "DT-RAND-1", "DT-RAND-2", "DT-RAND-3", "DT-RAND-5", "DT-RAND-6", "DT-RAND-7"
)  # fmt: skip
def test_random_draws_are_the_single_device_draw_cut_up_as_the_spec_examples_say(world_pool):
    ranks = world_pool.get(2).run(Case("dt_tasks:random_examples")).values()
    for rank, seen in enumerate(ranks):
        torch.testing.assert_close(seen["rand S(0)"], DRAWN[2 * rank : 2 * rank + 2])
        torch.testing.assert_close(seen["rand then"], DRAWN[4:5])
        assert seen["uniform_ is d"]
        assert seen["uniform_ placements"] == "[S(0)]"
        torch.testing.assert_close(seen["uniform_ local"], DRAWN[:3][[[0, 1], [2]][rank]])
        torch.testing.assert_close(seen["uniform_ then"], DRAWN[3:5])  # alike on both ranks
        assert torch.equal(seen["rand P(sum) local"], DRAWN[:4] / 2)
        assert torch.equal(seen["rand P(sum) value"], DRAWN[:4])
        assert seen["same seed, same draw"]
        assert seen["dropout placements"] == "[P(sum)]"
        assert torch.equal(seen["dropout value"], seen["dropout single-device"])
