"""The op task (conformance/tasks/ops.py) builds every case's inputs afresh on its ranks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from conformance.ops import catalogue
from conformance.suite.test_dt_op_grad import stuck_in_backward
from conformance.suite.test_dt_ops import WARM, WARM_TIMEOUT_S
from conformance.world import Case, Died, Hung, Raised, Returned
from conformance.world.local import LocalWorld

ROOT = Path(__file__).resolve().parents[2]


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


BACKWARD_STUCK = "every rank that hung or died was in the backward pass (its stack)"
RERUN_RETURNED = "the case returns on every rank without its backward pass"


def no_rerun(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the rerun without the backward pass ran, where a stack said enough")


def rerun_returns(*args: Any, **kwargs: Any) -> Any:
    return SimpleNamespace(ok=True)


def rerun_fails(*args: Any, **kwargs: Any) -> Any:
    return SimpleNamespace(ok=False)


@pytest.mark.parametrize(
    ("impl", "why"),
    [("mutants:FORWARD_SPINS", ""), ("mutants:BACKWARD_SPINS", BACKWARD_STUCK)],
)
def test_a_hung_ranks_stack_places_the_hang_in_the_forward_call_or_the_backward_pass(impl, why):
    """A forward call that computes for about the case timeout may return in time when run
    again: a rerun without the backward pass would blame its hang on the backward pass
    (DT-GRAD-7). The hung rank's stack places it, and no rerun is needed."""
    with LocalWorld(1, case_timeout_s=5.0, grace_s=2.0) as world:
        assert world.run(Case(WARM), timeout_s=WARM_TIMEOUT_S).ok
        result = world.run(Case("conformance.tasks.ops:apply", {**GRAD_CASE, "impl": impl}))
    (hung,) = result.outcomes
    assert isinstance(hung, Hung), result.report("the planted hang did not hang")
    assert stuck_in_backward(no_rerun, 1, GRAD_CASE, result.outcomes) == why


def frame(function: str) -> str:
    """A frame of the op task as faulthandler prints it (a local world's stacks)."""
    return f'  File "/site-packages/conformance/tasks/ops.py", line 1 in {function}\n'


def test_a_rank_in_the_forward_call_makes_it_the_forwards_whatever_the_others_did():
    """Ranks that part ways in the forward call: one waits there (or raised there), another has
    gone on to the backward pass and waits in it, or died with no stack. The forward call did
    not return on every rank."""
    backward = Hung(1, 2.0, frame("_backward") + frame("apply"))
    raised = Raised(0, ("RuntimeError",), "in the forward", "")
    for parted in [(Hung(0, 2.0, frame("apply")), backward), (raised, backward),
                   (Hung(0, 2.0, frame("apply")), Died(1, 1, ""))]:  # fmt: skip
        assert stuck_in_backward(no_rerun, 2, GRAD_CASE, parted) == ""


def test_an_attached_worlds_stack_and_a_crashed_ranks_log_place_it_too():
    """An attached world posts traceback's format (``line 1, in f``); a rank killed by a signal
    leaves faulthandler's stacks in its log."""
    posted = '  File "/site-packages/conformance/tasks/ops.py", line 151, in _backward\n    x\n'
    crashed = "Fatal Python error: Segmentation fault\n" + frame("_backward") + frame("apply")
    outcomes = (Hung(0, 2.0, posted), Died(1, -11, crashed))
    assert stuck_in_backward(no_rerun, 2, GRAD_CASE, outcomes) == BACKWARD_STUCK


def test_a_rank_that_cannot_say_where_it_was_is_placed_by_the_rerun():
    """faulthandler prints 100 frames of a stack: a deep one loses the task's frames; a rank
    that exited leaves none. The same case without its backward pass decides."""
    deep = Hung(0, 2.0, '  File "/site-packages/torch/_ops.py", line 1 in __call__\n' * 100)
    for unplaced in [
        (deep,),
        (Died(0, 1, ""),),
        (Died(0, -9, ""), Hung(1, 2.0, frame("_backward"))),
    ]:
        assert stuck_in_backward(rerun_returns, 2, GRAD_CASE, unplaced) == RERUN_RETURNED
        assert stuck_in_backward(rerun_fails, 2, GRAD_CASE, unplaced) == ""
    assert stuck_in_backward(no_rerun, 1, GRAD_CASE, (Returned(0, {}),)) == ""


def test_a_refused_max_over_a_python_number_dim_passes_the_ci_draws():
    """``torch.max(x, 1)`` refused with ``NotImplementedError`` on every rank is DT-OP-7's
    allowed refusal; its twin with a 0-d ``R`` DTensor is the elementwise max, another op, so
    DT-OP-12 has nothing to say (``anatomy.reads_as_a_value``)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conformance.plugin", "-p", "no:cacheprovider",
         "conformance/suite/test_dt_ops.py::test_an_op_on_dtensors_gives_the_single_device_result",
         "--impl", "mutants:MAX_OVER_A_DIM_REFUSED", "--ops", "max/binary,min/binary",
         "--hypothesis-profile=ci", "-q"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests" / "suite")},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout.splitlines()[-1]
