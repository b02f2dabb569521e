"""Run only under a launcher, by tests/suite/test_cli.py: ``torchrun ... -m conformance run
<this>``."""

from hypothesis import given
from hypothesis import strategies as st

from conformance.world import Case


def test_every_launched_rank_answers(world):
    n = world.world_size
    assert world.run(Case("world_tasks:whoami")).values() == [[r, n] for r in range(n)]


@given(length=st.integers(0, 9))
def test_a_property_runs_on_the_launchers_ranks(length, world):
    result = world.run(Case("world_tasks:chunk_sizes", {"length": length}))
    assert len(result.values()) == world.world_size


def test_a_refusal_on_every_rank_in_step_keeps_the_launchers_world(world):
    """The launcher's world cannot be replaced; a refusal that left it in step costs nothing."""
    assert not world.run(Case("world_tasks:raise_after_reducing")).ok
    assert world.run(Case("world_tasks:whoami")).ok


# Last: after a hang an attached world cannot run further cases.
def test_a_hang_is_reported_with_the_stack_the_rank_posted(world):
    world.run(Case("world_tasks:hang", {"rank": 1})).values()
