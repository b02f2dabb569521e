"""Faults never hang the run: each is that case's failure, naming the rank, and the next case
runs on a fresh world with no process of the old one left."""

from __future__ import annotations

import multiprocessing as mp
import sys
import time
from collections.abc import Iterator

import pytest
import torch

from conformance import judge
from conformance.world import (
    Case,
    CaseFailed,
    Died,
    Hung,
    LocalWorld,
    Raised,
    Returned,
    costs,
    local,
    step,
)
from conformance.world.costs import COSTS
from conformance.world.harness import HarnessError
from conformance.world.local import MAX_NEW_RANK_THREADS, WALL_FACTOR, one_world

TIMEOUT_S = 4.0
GRACE_S = 2.0
SLOW_TIMEOUT_S = 20.0


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def world4() -> Iterator[LocalWorld]:
    with LocalWorld(4, case_timeout_s=TIMEOUT_S, grace_s=GRACE_S) as world:
        yield world


def run_fault(world: LocalWorld, case: Case):
    before = world.pids()
    began = time.monotonic()
    result = world.run(case)
    elapsed = time.monotonic() - began
    assert elapsed < world.case_timeout_s + 10, f"fault took {elapsed:.1f} s to report"
    assert not world.running, "a faulted world must be torn down"
    assert not [pid for pid in before if alive(pid)], "ranks of the faulted world survive"
    after = world.run(Case("world_tasks:all_reduce_sum", {"length": 2}))
    assert after.ok, after.report("the case after a fault failed")
    return result


def test_one_rank_raising_while_others_wait_reports_the_raiser_and_the_waiters(world4):
    result = run_fault(world4, Case("world_tasks:raise_while_others_wait", {"rank": 2}))
    raised = result.outcomes[2]
    assert isinstance(raised, Raised)
    assert raised.is_a("ValueError")
    assert raised.rule == "ST-VALID-1"
    assert "raise_while_others_wait" in raised.traceback
    for rank in (0, 1, 3):
        hung = result.outcomes[rank]
        assert isinstance(hung, Hung)
        assert hung.waited_s < GRACE_S + 2
        assert "all_reduce" in hung.stack


def test_a_hung_rank_is_reported_with_its_stack(world4):
    result = run_fault(world4, Case("world_tasks:hang", {"rank": 1}))
    assert [type(o) for o in result.outcomes] == [Returned, Hung, Returned, Returned]
    hung = result.outcomes[1]
    assert 'world_tasks.py", line' in hung.stack
    assert "in hang" in hung.stack


def test_a_rank_asleep_in_a_collective_its_peers_left_is_hung_after_the_grace_period():
    """Its peers answered and it sleeps in the kernel: nothing can wake it, so the case ends
    after the grace period, not the case timeout. The timeout is long here: on a loaded machine
    a rank takes a while to fall asleep, and this test is about where the case ends."""
    with LocalWorld(4, case_timeout_s=SLOW_TIMEOUT_S, grace_s=GRACE_S) as world:
        result = run_fault(world, Case("world_tasks:stuck_in_collective", {"rank": 2}))
    assert [type(o) for o in result.outcomes] == [Returned, Returned, Hung, Returned]
    hung = result.outcomes[2]
    assert hung.asleep
    assert GRACE_S <= hung.waited_s < SLOW_TIMEOUT_S
    assert "all_reduce" in hung.stack
    assert "(asleep, hung)" in hung.describe()


def test_a_rank_with_many_groups_asleep_in_a_collective_is_hung_after_the_grace_period():
    """28 groups more (89 threads, near MAX_NEW_RANK_THREADS): their threads keep waking, yet the
    rank does no work, and the case still ends after the grace period."""
    with LocalWorld(2, case_timeout_s=SLOW_TIMEOUT_S, grace_s=GRACE_S) as world:
        case = Case("world_tasks:stuck_in_collective", {"rank": 0, "groups": 28})
        result = run_fault(world, case)
    assert [type(o) for o in result.outcomes] == [Hung, Returned]
    assert result.outcomes[0].asleep
    assert GRACE_S <= result.outcomes[0].waited_s < SLOW_TIMEOUT_S


def test_ranks_asleep_in_a_collective_wait_as_long_as_a_peer_still_computes(world4):
    """Three ranks sleep in an all-reduce longer than the grace period while rank 1 computes:
    a rank that runs can still wake them, so this is no hang."""
    busy_s = GRACE_S + 1.0
    result = world4.run(Case("world_tasks:compute_then_reduce", {"rank": 1, "seconds": busy_s}))
    assert result.ok, result.report("a slow peer was taken for a hang")
    assert result.elapsed_s >= busy_s
    assert [float(v[0]) for v in result.values()] == [10.0] * 4


def test_a_rank_that_still_computes_after_its_peers_refused_is_waited_for(world4):
    """Three ranks refuse at once, the fourth computes for longer than the grace period before it
    refuses too: the refusal is every rank's, not a hang of the slow one."""
    busy_s = GRACE_S + 1.0
    case = Case("world_tasks:raise_now_or_after_computing", {"rank": 3, "seconds": busy_s})
    result = world4.run(case)
    assert all(isinstance(o, Raised) for o in result.outcomes), result.report("slow, not hung")
    assert result.elapsed_s >= busy_s


def test_the_case_timeout_counts_cpu_time_so_a_starved_rank_is_not_hung():
    """A rank that runs a fifth of the time for three case timeouts (what it gets of a core on a
    machine with more ranks than cores) has used far less CPU than the timeout: it answers, and
    the verdict does not depend on the machine's load."""
    timeout_s = 1.0
    with LocalWorld(1, case_timeout_s=timeout_s, grace_s=GRACE_S) as world:
        result = world.run(Case("world_tasks:compute_in_bursts", {"seconds": 3.0, "share": 0.2}))
    assert result.ok, result.report("a rank that made progress was taken for a hang")
    assert result.elapsed_s >= 3.0


def test_a_rank_that_computes_for_the_case_timeout_is_hung():
    timeout_s = 1.0
    with LocalWorld(2, case_timeout_s=timeout_s, grace_s=GRACE_S) as world:
        result = run_fault(world, Case("world_tasks:compute_forever", {"rank": 1}))
    assert [type(o) for o in result.outcomes] == [Returned, Hung]
    hung = result.outcomes[1]
    assert not hung.asleep
    assert timeout_s <= hung.waited_s < timeout_s * WALL_FACTOR
    assert "in compute_forever" in hung.stack


def test_a_rank_that_exits_is_reported_with_its_exit_code(world4):
    result = run_fault(world4, Case("world_tasks:exit_abruptly", {"rank": 3, "code": 7}))
    died = result.outcomes[3]
    assert isinstance(died, Died)
    assert died.exitcode == 7
    assert all(not isinstance(o, Returned) for o in result.outcomes)


def test_a_rank_killed_by_sigkill_is_an_environment_error_not_a_verdict(world4):
    """No code a case runs sends SIGKILL; the out-of-memory killer does (two runs sharing a
    small machine), and a death it causes must not be blamed on the implementation."""
    before = world4.pids()
    with pytest.raises(HarnessError, match="killed by SIGKILL"):
        world4.run(Case("world_tasks:killed", {"rank": 1}))
    assert not [pid for pid in before if alive(pid)], "ranks of the faulted world survive"
    assert world4.run(Case("world_tasks:all_reduce_sum", {"length": 2})).ok


def test_a_connection_reset_by_a_dead_rank_reads_as_its_end():
    """A rank that dies holding a message it never read (the driver's step check) resets the
    pipe: the driver reads that as the rank's end, as it reads EOF, and never raises."""
    driver, rank = mp.Pipe()
    driver.send_bytes(b"a step check the rank never reads")
    rank.send_bytes(b"its last answer")
    rank.close()
    assert local.read(driver) == b"its last answer"
    assert local.read(driver) is None


def test_a_segfaulting_rank_is_reported_with_its_signal_and_stack(world4):
    result = run_fault(world4, Case("world_tasks:segfault", {"rank": 0}))
    died = result.outcomes[0]
    assert isinstance(died, Died)
    assert died.exitcode == -11
    assert "Segmentation fault" in died.log_tail
    assert "in segfault" in died.log_tail


def test_a_raise_on_every_rank_in_step_is_reported_and_keeps_the_world(world4):
    """A refusal before any data moves, or after a collective every rank joined, costs no world
    start: the same processes run the next case."""
    world4.run(Case("world_tasks:whoami"))
    before = world4.pids()
    for task in ("world_tasks:raise_everywhere", "world_tasks:raise_after_reducing"):
        result = world4.run(Case(task))
        assert all(isinstance(o, Raised) and o.rule == "ERR-1" for o in result.outcomes)
        assert world4.pids() == before
    assert world4.run(Case("world_tasks:all_reduce_sum", {"length": 2})).ok
    assert world4.pids() == before


def test_a_raise_after_an_operation_one_rank_ran_alone_on_a_sub_group_replaces_the_world(world4):
    """The world's group is in step, the sub-group [1, 2] is not: rank 1 sent what rank 2 never
    received. Kept, the next case on that sub-group would pair the wrong operations."""
    before = COSTS.to_json()
    run_fault(world4, Case("world_tasks:raise_after_a_lone_send_on", {"ranks": [1, 2]}))
    assert COSTS.since(before)["replaced"] == {costs.OUT_OF_STEP: 1}
    result = world4.run(Case("world_tasks:sub_group_sum", {"ranks": [1, 2]}), timeout_s=TIMEOUT_S)
    assert result.ok, result.report("the sub-group after the replaced world")


def test_a_message_left_in_flight_by_a_raising_rank_does_not_reach_the_next_case(world4):
    run_fault(world4, Case("world_tasks:raise_after_sending"))
    assert world4.run(Case("world_tasks:receive_from_zero")).values()[1] == [7.0]


def test_a_case_the_judge_fails_retires_its_world_though_every_rank_returned(world4):
    """Rank 0 alone builds a group: every rank returns, but the world's group counters disagree,
    so the next sub-group would never meet (the ranks in it hang). Judged a failure, the case
    takes its world with it."""
    assert world4.run(Case("world_tasks:extra_group_on", {"rank": 0})).ok
    before = world4.pids()
    with pytest.raises(pytest.fail.Exception):
        judge.fail("the implementation let one rank build a group alone", "DT-MESH-10")
    assert not world4.running
    assert not [pid for pid in before if alive(pid)]
    result = world4.run(Case("world_tasks:sub_group_sum", {"ranks": [0, 1]}), timeout_s=TIMEOUT_S)
    assert result.ok, result.report("a sub-group after the retired world")


def test_a_case_the_judge_fails_on_a_world_in_step_keeps_the_world(world4):
    """A wrong value is the implementation's verdict, not a world out of step: the processes run
    the next case."""
    assert world4.run(Case("world_tasks:all_reduce_sum", {"length": 2})).ok
    before = world4.pids()
    with pytest.raises(pytest.fail.Exception):
        judge.fail("the implementation returned a wrong value", "DT-API-11")
    assert world4.pids() == before
    assert world4.run(Case("world_tasks:all_reduce_sum", {"length": 2})).ok


def test_a_raise_after_point_to_point_traffic_replaces_the_world(world4):
    """Point-to-point messages are ruled out, not matched: even one that arrived replaces the
    world, since the counts could not tell it from one still in flight."""
    run_fault(world4, Case("world_tasks:raise_after_delivered_messages"))


def test_a_raise_after_one_rank_built_a_group_alone_replaces_the_world(world4):
    """No operation ran, but the ranks' group counters disagree: the next sub-group would never
    meet, so the world that refused is not kept."""
    run_fault(world4, Case("world_tasks:raise_after_a_group_built_on", {"rank": 3}))
    result = world4.run(Case("world_tasks:sub_group_sum", {"ranks": [2, 3]}), timeout_s=TIMEOUT_S)
    assert result.ok, result.report("a sub-group after the replaced world")


def test_values_of_a_failed_case_raise_a_report_with_every_rank_and_the_replay(world4):
    result = world4.run(Case("world_tasks:raise_while_others_wait", {"rank": 0}))
    with pytest.raises(CaseFailed) as info:
        result.values()
    report = str(info.value)
    assert "rank 0: raised ValueError: bad input on one rank [ST-VALID-1]" in report
    assert "rank 3: no answer after" in report
    assert "replay: python -m conformance replay --backend gloo --world-size 4 " in report


def test_sub_groups_use_global_ranks(world4):
    values = world4.run(Case("world_tasks:sub_group_sum", {"ranks": [1, 3]})).values()
    assert values == [None, 4.0, None, 4.0]


def test_rank_output_goes_to_its_log_not_the_driver(world4, capfd):
    assert world4.run(Case("world_tasks:chatty")).values() == [0, 1, 2, 3]
    out, err = capfd.readouterr()
    assert "writes to stdout" not in out + err


def test_an_unpicklable_result_is_reported_not_lost(world4):
    result = world4.run(Case("world_tasks:unpicklable"))
    assert all(isinstance(o, Raised) and o.type == "PicklingError" for o in result.outcomes)


def test_closing_leaves_no_process():
    world = LocalWorld(3)
    world.start()
    pids = world.pids()
    assert all(alive(pid) for pid in pids)
    world.close()
    assert not [pid for pid in pids if alive(pid)]
    assert not world.running


def test_an_unavailable_backend_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="NCCL"):
        LocalWorld(2, "nccl")


def test_ranks_see_their_rank_and_world_size():
    for size in (1, 3, 5, 8):
        with LocalWorld(size) as world:
            assert world.run(Case("world_tasks:whoami")).values() == [
                [r, size] for r in range(size)
            ]


def test_ranks_of_a_local_world_compute_on_one_thread_each_unless_omp_num_threads_says(
    monkeypatch,
):
    """As under torchrun: ranks that share a machine do not each take a thread per core."""
    driver = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with LocalWorld(2) as world:
        assert world.run(Case("world_tasks:threads")).values() == [1, 1]
    with LocalWorld(1) as world:
        assert world.run(Case("world_tasks:threads")).values() == [driver]
    named = driver + 1  # neither one nor what the forked ranks inherit
    monkeypatch.setenv("OMP_NUM_THREADS", str(named))
    for size in (1, 2):
        with LocalWorld(size) as world:
            assert world.run(Case("world_tasks:threads")).values() == [named] * size


def test_a_world_whose_ranks_hold_too_many_threads_is_replaced_between_cases_not_within_one_world():
    """Idle process groups' threads still wake and, hundreds of them, starve a small machine: a
    crowded world is replaced before its next case, except inside ``one_world``, whose cases
    must share processes."""
    crowd = MAX_NEW_RANK_THREADS + 1
    with LocalWorld(2) as world:
        first = world.run(Case("world_tasks:idle_threads", {"count": crowd})).values()
        replaced_before = COSTS.replaced[costs.CROWDED]
        with one_world():
            again = world.run(Case("world_tasks:idle_threads", {"count": 0})).values()
        assert again == first
        after = world.run(Case("world_tasks:idle_threads", {"count": 0})).values()
        assert set(after).isdisjoint(first)
        assert COSTS.replaced[costs.CROWDED] == replaced_before + 1
        assert world.run(Case("world_tasks:idle_threads", {"count": 0})).values() == after


def test_ranks_started_while_the_driver_is_traced_run_untraced():
    """Hypothesis traces the replay of a failing example; a world that starts then must not
    inherit the tracer (it made a first import in a rank take past a case timeout)."""
    world = LocalWorld(2, case_timeout_s=30)
    previous = sys.gettrace()
    sys.settrace(lambda frame, event, arg: None)
    try:
        world.start()
    finally:
        sys.settrace(previous)
    with world:
        assert world.run(Case("world_tasks:traced")).values() == [False, False]


def test_a_torch_that_cannot_count_operations_gets_a_fresh_world_after_every_raise(monkeypatch):
    """The step check reads private counters; where they are missing it says "cannot tell" and
    the world is replaced, as before the check existed, instead of the rank failing."""

    def gone() -> dict[str, int]:
        raise AttributeError("_get_sequence_number_for_group")

    monkeypatch.setattr(step, "operation_counts", gone)  # the forked ranks inherit it
    with LocalWorld(2, case_timeout_s=TIMEOUT_S, grace_s=GRACE_S) as world:
        world.run(Case("world_tasks:whoami"))
        before = world.pids()
        assert all(
            isinstance(o, Raised) for o in world.run(Case("world_tasks:raise_everywhere")).outcomes
        )
        assert not [pid for pid in before if alive(pid)]
        assert world.run(Case("world_tasks:whoami")).ok


def test_a_reply_the_driver_cannot_read_is_an_error_of_the_suite_and_replaces_the_world(world4):
    """The other ranks' replies stay unread: a world kept would hand them to the next case as
    its own (an op case once read the warm-up's None as its outputs)."""
    with pytest.raises(HarnessError, match="could not read a rank's reply"):
        world4.run(Case("world_tasks:unreadable_reply"))
    assert not world4.running
    after = world4.run(Case("world_tasks:whoami"))
    assert after.ok, after.report("the case after an unreadable reply")
    assert [v[0] for v in after.values()] == [0, 1, 2, 3]
