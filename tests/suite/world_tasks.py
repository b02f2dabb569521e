"""Tasks the engine tests send to ranks: well-behaved ones, and each kind of fault."""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

import torch
import torch.distributed as dist

from conformance.world import RankContext


def whoami(ctx: RankContext) -> list[int]:
    return [ctx.rank, ctx.world_size]


_CALLS = [0]


def calls_so_far(ctx: RankContext) -> int:
    """How many times this rank process has run this task, this call included."""
    _CALLS[0] += 1
    return _CALLS[0]


def string_hash(ctx: RankContext, text: str) -> int:
    """What ``hash`` gives in this rank, which only the interpreter's hash seed decides."""
    return hash(text)


def all_reduce_sum(ctx: RankContext, length: int) -> torch.Tensor:
    tensor = torch.full((length,), float(ctx.rank + 1), dtype=torch.float64)
    dist.all_reduce(tensor)
    return tensor


def sub_group_sum(ctx: RankContext, ranks: list[int]) -> float | None:
    group = ctx.group(ranks)
    if ctx.rank not in ranks:
        return None
    tensor = torch.tensor([float(ctx.rank)])
    dist.all_reduce(tensor, group=group)
    return float(tensor)


def chatty(ctx: RankContext) -> int:
    print(f"rank {ctx.rank} writes to stdout", flush=True)
    os.write(1, b"and straight to fd 1\n")
    return ctx.rank


def raise_everywhere(ctx: RankContext) -> None:
    raise ValueError(f"bad input on every rank [ERR-1] (rank {ctx.rank})")


def raise_on(ctx: RankContext, rank: int) -> int:
    if ctx.rank == rank:
        raise ValueError(f"planted failure on rank {rank}")
    return ctx.rank


def raise_while_others_wait(ctx: RankContext, rank: int) -> torch.Tensor:
    if ctx.rank == rank:
        raise ValueError("bad input on one rank [ST-VALID-1]")
    return all_reduce_sum(ctx, 1)


def raise_after_sending(ctx: RankContext) -> None:
    """Rank 0 sends before raising; the others raise without receiving: out of step."""
    if ctx.rank == 0:
        dist.isend(torch.ones(4), dst=1)
    raise ValueError("raised at different points")


def raise_after_reducing(ctx: RankContext) -> None:
    """Every rank joins one all-reduce, then raises: a refusal that leaves the world in step."""
    all_reduce_sum(ctx, 2)
    raise ValueError(f"refused after a matched collective [ERR-1] (rank {ctx.rank})")


def raise_after_a_lone_send_on(ctx: RankContext, ranks: list[int]) -> None:
    """On the sub-group ``ranks``, its first rank sends to its second, which never receives;
    then every rank raises. The world's own group stays in step, the sub-group does not."""
    group = ctx.group(ranks)
    if ctx.rank == ranks[0]:
        dist.isend(torch.ones(4), dst=ranks[1], group=group)
    raise ValueError("refused after one rank sent [ERR-8]")


def raise_after_delivered_messages(ctx: RankContext) -> None:
    """Each even rank sends to the next odd one, which receives it (an even world), then every
    rank raises: the world's operation count grew by one on every rank, so only the
    point-to-point count tells."""
    if ctx.rank % 2 == 0:
        dist.send(torch.ones(2), dst=ctx.rank + 1)
    else:
        dist.recv(torch.empty(2), src=ctx.rank - 1)
    raise ValueError("refused after delivered messages [ERR-8]")


def receive_from_zero(ctx: RankContext) -> list[float] | None:
    """Rank 0 sends 7 to rank 1; rank 1 must receive exactly that."""
    if ctx.rank == 0:
        dist.send(torch.full((4,), 7.0), dst=1)
    if ctx.rank == 1:
        tensor = torch.empty(4)
        dist.recv(tensor, src=0)
        return tensor.unique().tolist()
    return None


def hang(ctx: RankContext, rank: int) -> int:
    if ctx.rank == rank:
        time.sleep(3600)
    return ctx.rank


def stuck_in_collective(ctx: RankContext, rank: int, groups: int = 0) -> int:
    """``rank`` enters an all-reduce that its peers, who return, never join; first every rank
    builds ``groups`` more process groups and uses each once, whose threads then wake now and
    then, as a rank's do after many cases' meshes."""
    for group in [dist.new_group() for _ in range(groups)]:
        dist.all_reduce(torch.ones(1), group=group)
    if ctx.rank == rank:
        dist.all_reduce(torch.ones(1))
    return ctx.rank


def compute_then_reduce(ctx: RankContext, rank: int, seconds: float) -> torch.Tensor:
    """``rank`` computes for ``seconds`` before the all-reduce its peers already wait in."""
    if ctx.rank == rank:
        ends = time.monotonic() + seconds
        while time.monotonic() < ends:
            pass
    return all_reduce_sum(ctx, 1)


def raise_now_or_after_computing(ctx: RankContext, rank: int, seconds: float) -> None:
    """Every rank refuses, ``rank`` only after computing for ``seconds``."""
    if ctx.rank == rank:
        ends = time.monotonic() + seconds
        while time.monotonic() < ends:
            pass
    raise NotImplementedError(f"refused on rank {ctx.rank}")


def compute_in_bursts(ctx: RankContext, seconds: float, share: float) -> int:
    """Compute for ``share`` of every 50 ms, sleeping the rest, for ``seconds``: a rank that
    makes progress slowly, as one does on a machine with more ranks than cores."""
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        burst = time.monotonic() + 0.05 * share
        while time.monotonic() < burst:
            pass
        time.sleep(0.05 * (1 - share))
    return ctx.rank


def compute_forever(ctx: RankContext, rank: int) -> int:
    if ctx.rank == rank:
        while True:
            pass
    return ctx.rank


def exit_abruptly(ctx: RankContext, rank: int, code: int) -> torch.Tensor:
    if ctx.rank == rank:
        os._exit(code)
    return all_reduce_sum(ctx, 1)


def killed(ctx: RankContext, rank: int) -> torch.Tensor:
    """As the kernel's out-of-memory killer ends a process."""
    if ctx.rank == rank:
        os.kill(os.getpid(), signal.SIGKILL)
    return all_reduce_sum(ctx, 1)


def segfault(ctx: RankContext, rank: int) -> int:
    if ctx.rank == rank:
        ctypes.string_at(0)
    return ctx.rank


def unpicklable(ctx: RankContext) -> object:
    return lambda: None


def chunk_sizes(ctx: RankContext, length: int) -> list[int]:
    """Each rank's torch.chunk piece of ``length`` rows, all-gathered: every rank's view."""
    pieces = torch.arange(length).chunk(ctx.world_size) if length else ()
    mine = pieces[ctx.rank].numel() if ctx.rank < len(pieces) else 0
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(ctx.world_size)]
    dist.all_gather(sizes, torch.tensor([mine]))
    return [int(s) for s in sizes]


def extra_group_on(ctx: RankContext, rank: int) -> None:
    """Only ``rank`` builds a group: every rank returns, but the world's group counters now
    disagree (as after an implementation that let ranks build different meshes)."""
    if ctx.rank == rank:
        dist.new_group([rank], backend=ctx.backend.torch_name)


def raise_after_a_group_built_on(ctx: RankContext, rank: int) -> None:
    """Only ``rank`` builds a group, then every rank raises."""
    extra_group_on(ctx, rank)
    raise ValueError("refused after one rank built a group [DT-MESH-10]")


def traced(ctx: RankContext) -> bool:
    """Whether this rank runs under a tracer (one inherited from the driver would slow it)."""
    import sys

    monitoring = getattr(sys, "monitoring", None)
    tools = [t for t in range(6) if monitoring and monitoring.get_tool(t) is not None]
    return sys.gettrace() is not None or bool(tools)


def has_process_group(ctx: RankContext) -> bool:
    return dist.is_available() and dist.is_initialized()


def process_groups(ctx: RankContext) -> int:
    """How many process groups this rank has made so far (the world's own included)."""
    return len(dist.distributed_c10d._world.pg_map)


def idle_threads(ctx: RankContext, count: int) -> int:
    """Start ``count`` threads that wait for ever, as a process group's idle workers do; return
    this rank's process id."""
    for _ in range(count):
        threading.Thread(target=threading.Event().wait, daemon=True).start()
    return os.getpid()


def threads(ctx: RankContext) -> int:
    """The intra-op threads this rank computes on."""
    return torch.get_num_threads()


class _Unreadable:
    """An object pickle writes and cannot read back: loading it raises."""

    def __reduce__(self) -> tuple:
        return (_refuse_to_load, ())


def _refuse_to_load() -> None:
    raise RuntimeError("this reply cannot be read back")


def unreadable_reply(ctx: RankContext) -> object:
    """A reply pickle writes and cannot read back, on rank 0 only."""
    return _Unreadable() if ctx.rank == 0 else None


def refuses_through_an_unwritten_method(ctx: RankContext) -> str:
    """A task that reads a NotImplementedError as the implementation's refusal, as some checks
    may (DT-OP-7): the method behind it was never written."""
    from conformance.adapters.contract import NotImplementedInAdapter

    try:
        raise NotImplementedInAdapter("dt_op", "the op as the implementation runs it")
    except NotImplementedError:
        return "refused"
