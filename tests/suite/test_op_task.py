"""The op task (conformance/tasks/ops.py) builds every case's inputs afresh on its ranks."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from conformance.ops import catalogue
from conformance.suite.test_dt_op_grad import stuck_in_backward
from conformance.suite.test_dt_ops import WARM, WARM_TIMEOUT_S
from conformance.world import Case, Died, Hung, Returned
from conformance.world.local import LocalWorld


def test_an_op_that_writes_an_argument_leaves_the_ranks_samples_as_they_were(world_pool):
    """A rank builds every case's inputs from the catalogue's samples, made once per process,
    and a plain argument (DT-OP-12) is passed as it is: ``batch_norm`` in training updates its
    running statistics in place, and had it written the sample, every later case on that rank
    would read other inputs than the driver's (and blame DT-REDIST-3 on a correct
    implementation). Twice the same case: the second reads the statistics the first did."""
    op = "nn.functional.batch_norm"
    sample = 0  # (5, 5, 5) in training, momentum 0.5: the running mean and variance change
    args = {"impl": "reference", "op": op, "dtype": "float32", "sample": sample, "mesh_shape": [1],
            "mesh_ranks": [0], "placements": [["R"], [], [], ["R"], ["R"]], "seed": 0,
            "homes": ["mesh", "plain", "plain", "mesh", "mesh"]}  # fmt: skip
    world = world_pool.get(1)
    first, second = (world.run(Case("conformance.tasks.ops:apply", args)).values()[0]
                     for _ in range(2))  # fmt: skip
    running_mean = catalogue.samples(op, "float32")[sample].tensors()[1]
    assert torch.equal(first["inputs_full"][1], running_mean)
    assert torch.equal(second["inputs_full"][1], running_mean)


GRAD_CASE = {"op": "add", "dtype": "float32", "sample": 0, "mesh_shape": [1], "mesh_ranks": [0],
             "placements": [["R"], ["R"]], "seed": 0, "starts": ["from_local", "from_local"],
             "backward": [0], "upstream_seed": 1}  # fmt: skip


def no_rerun(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the rerun without the backward pass ran, where a stack said enough")


@pytest.mark.parametrize(
    ("impl", "why"),
    [("mutants:FORWARD_SPINS", ""),
     ("mutants:BACKWARD_SPINS",
      "the stack of every rank that did not return is in the backward pass")],
)  # fmt: skip
def test_a_hung_ranks_stack_places_the_hang_in_the_forward_call_or_the_backward_pass(impl, why):
    """A forward call that computes for about the case timeout may return in time when run
    again: a rerun without the backward pass would blame its hang on the backward pass
    (DT-GRAD-7). The hung rank's stack places it, and no rerun is needed."""
    with LocalWorld(1, case_timeout_s=2.0, grace_s=2.0) as world:
        assert world.run(Case(WARM), timeout_s=WARM_TIMEOUT_S).ok
        result = world.run(Case("conformance.tasks.ops:apply", {**GRAD_CASE, "impl": impl}))
    (hung,) = result.outcomes
    assert isinstance(hung, Hung), result.report("the planted hang did not hang")
    assert stuck_in_backward(no_rerun, 1, GRAD_CASE, result.outcomes) == why


def frame(function: str) -> str:
    return f'  File "/site-packages/conformance/tasks/ops.py", line 1 in {function}\n'


def test_a_hang_in_the_backward_pass_while_a_rank_hangs_in_the_forward_call_is_the_forwards():
    """Ranks that part ways in the forward call: one waits there, another has gone on to the
    backward pass and waits in it. The forward call did not return on every rank."""
    both = (Hung(0, 2.0, frame("apply")), Hung(1, 2.0, frame("_backward") + frame("apply")))
    assert stuck_in_backward(no_rerun, 2, GRAD_CASE, both) == ""


def test_a_stack_that_shows_no_frame_of_the_task_is_placed_by_the_rerun():
    """faulthandler prints 100 frames of a stack: a deep one loses the task's frames, which
    would have said where it was."""
    deep = '  File "/site-packages/torch/_ops.py", line 1 in __call__\n' * 100 + "  ...\n"
    forward_returns = lambda *args, **kwargs: SimpleNamespace(ok=True)  # noqa: E731
    assert stuck_in_backward(forward_returns, 1, GRAD_CASE, (Hung(0, 2.0, deep),)) == (
        "the case returns on every rank without its backward pass"
    )


def test_a_rank_that_died_is_placed_by_the_rerun_without_the_backward_pass():
    died = (Died(0, -9, ""),)
    forward_returns = lambda *args, **kwargs: SimpleNamespace(ok=True)  # noqa: E731
    forward_dies = lambda *args, **kwargs: SimpleNamespace(ok=False)  # noqa: E731
    assert stuck_in_backward(forward_returns, 1, GRAD_CASE, died) == (
        "the case returns on every rank without its backward pass"
    )
    assert stuck_in_backward(forward_dies, 1, GRAD_CASE, died) == ""
    assert stuck_in_backward(no_rerun, 1, GRAD_CASE, (Returned(0, {}),)) == ""
