"""Run only under a launcher, by tests/suite/test_cli.py: a run that lasts until it is stopped,
to interrupt. It says it has started by creating the file ``$SHARDSPEC_STARTED``."""

import os
from pathlib import Path

import pytest

from conformance.world import Case


@pytest.mark.rules("DT-MESH-1")
def test_cases_until_stopped(world):
    Path(os.environ["SHARDSPEC_STARTED"]).touch()
    for _ in range(1_000_000):
        assert world.run(Case("world_tasks:whoami")).ok
