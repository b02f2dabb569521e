"""The reference's operator dispatch on a real Gloo world of 3 ranks: each propagation rule gives
the placements its docstring promises and the single-device value, and the replicated way gives
the rest (spec/dt-ops.md)."""

from __future__ import annotations

import pytest
import torch
from dt_tasks import global_tensor

from conformance.world import Case

# op, inputs (shape, placements), extra args, the output's placements: 5 rows over 3 ranks
# leave the last rank 1 row, 7 columns leave it 1 column.
CALLS = [
    ("add", [[(5, 7), "S(0)"], [(5, 7), "S(0)"]], [], "S(0)"),  # elementwise: shards kept
    ("add", [[(5, 7), "S(0)"], [(5, 7), "S(1)"]], [], "R"),  # unlike shardings: replicated
    ("sum", [[(5, 7), "S(0)"]], [0], "P(sum)"),  # a sum over the sharded dim: partial sums
    ("sum", [[(5, 7), "S(1)"]], [0], "S(0)"),  # a kept dim's shard, renumbered
    ("mm", [[(5, 7), "S(1)"], [(7, 2), "S(0)"]], [], "P(sum)"),  # the contraction dim sharded
    ("mm", [[(5, 7), "S(0)"], [(7, 2), "R"]], [], "S(0)"),  # rows follow the first operand
    ("transpose", [[(5, 7), "S(0)"]], [0, 1], "S(1)"),  # the shard moves with its dim
    ("index_select", [[(5, 7), "S(1)"]], [0, [4, 0, 4]], "R"),  # no rule: replicated
]


@pytest.mark.rules("DT-OP-1", "DT-OP-3", "DT-OP-4", "DT-OP-5", "DT-OP-6", "DT-OP-8")
def test_each_propagation_rule_gives_its_placements_and_the_single_device_value(world_pool):
    calls = [{"op": op, "inputs": inputs, "args": args} for op, inputs, args, _ in CALLS]
    results = world_pool.get(3).run(Case("dt_tasks:op_placements", {"calls": calls})).values()
    for i, (op, inputs, _, placements) in enumerate(CALLS):
        tensors = [global_tensor(shape) * (-1) ** j for j, (shape, _) in enumerate(inputs)]
        args = [torch.tensor(a) if isinstance(a, list) else a for a in calls[i]["args"]]
        expected = getattr(torch, op)(*tensors, *args)
        for rank, seen in enumerate(results):
            got = seen[i]
            assert got["placements"] == f"[{placements}]", (op, inputs)
            assert got["stride"] == list(expected.stride()), (op, inputs)
            assert torch.equal(got["full"], expected), (op, inputs, rank)
            assert got["inputs_kept"], (op, inputs)
        locals_ = [seen[i]["local"] for seen in results]
        if placements == "P(sum)":
            assert torch.allclose(sum(locals_), expected, rtol=0, atol=1e-12)
        elif placements.startswith("S("):
            dim = int(placements[2])
            assert torch.equal(torch.cat(locals_, dim), expected), (op, inputs)
        else:
            assert all(torch.equal(x, expected) for x in locals_), (op, inputs)


@pytest.mark.rules("DT-OP-11", "DT-OP-8")
def test_an_in_place_op_writes_its_dtensor_and_a_returned_argument_is_not_written(world_pool):
    """``x.add_(1)`` of ``P(sum)`` adds 1 to the value, not to every part; ``x.t_()`` takes the
    new shape; both return ``x``. ``x.contiguous()`` returns its argument untouched: no write;
    nor does an in-place call that changes nothing (``F.silu(x, inplace=True)`` of an empty
    ``x``), which returns ``x`` too (DT-OP-11), whatever its name says."""
    (seen, *_) = world_pool.get(3).run(Case("dt_tasks:op_in_place")).values()
    value = global_tensor((5, 3))
    assert seen["add_ returned x"]
    assert seen["t_ returned x"]
    assert torch.equal(seen["add_"], value + 1)
    assert seen["t_ shape"] == [3, 5]
    assert torch.equal(seen["t_"], value.t())
    assert seen["contiguous kept"] == "[S(0)]"
    assert seen["silu of an empty x returned x"]
    assert seen["silu kept"] == "[S(0)]"


@pytest.mark.rules("DT-OP-12", "DT-OP-13")
def test_an_out_call_writes_its_out_dtensor_and_plain_or_other_mesh_arguments_are_values(
    world_pool,
):
    """``torch.add(x, x, out=z)`` writes ``2 x`` into ``z`` and returns ``z``; a plain tensor
    argument is its value on every rank, not a rank's part; a DTensor of the mesh of the same
    ranks in reverse order is its full tensor, and the output lives on the first argument's
    mesh."""
    (seen, *_) = world_pool.get(3).run(Case("dt_tasks:op_out_and_mixing")).values()
    value = global_tensor((4, 3))
    assert seen["out returned z"]
    assert torch.equal(seen["out"], 2 * value)
    assert torch.equal(seen["plain"], value + 1)
    assert torch.equal(seen["other mesh"], 2 * value)
    assert seen["other mesh's output on x's mesh"]
