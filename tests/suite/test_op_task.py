"""The op task (conformance/tasks/ops.py) builds every case's inputs afresh on its ranks."""

from __future__ import annotations

import torch

from conformance.ops import catalogue
from conformance.world import Case


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
