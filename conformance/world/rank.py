"""The rank side of a world: join the process group, then run cases until told to stop.

A rank never judges. It runs ``task(ctx, **args)`` (``execute``) and answers with one outcome; an
exception is an answer too. Local worlds answer over a pipe (``serve``); attached worlds run the
same ``execute`` in a loop of their own over the rendezvous store (``attach.serve_cases``).
"""

from __future__ import annotations

import importlib
import io
import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol

import torch
import torch.distributed as dist

from conformance.world import step, unimplemented
from conformance.world.backends import Backend
from conformance.world.protocol import (
    FACTS_ATTRIBUTE,
    UNIMPLEMENTED_SAYS,
    Outcome,
    Raised,
    Returned,
)


class Channel(Protocol):
    """How a rank receives pickled ``(seq, task, args)`` messages and sends outcomes back."""

    def receive(self) -> bytes | None: ...

    def send(self, payload: bytes) -> None: ...


class RankContext:
    """What a task sees of its rank: who it is, its device, and the world's groups.

    Sub-groups are created on first use and cached for the life of the world. Creating a group is
    itself collective, so every rank must ask for the same groups in the same order, which holds
    because every rank runs the same cases in the same order.
    """

    def __init__(self, rank: int, world_size: int, backend: Backend) -> None:
        self.rank = rank
        self.world_size = world_size
        self.backend = backend
        self.device = backend.device_for(rank)
        self._groups: dict[tuple[int, ...], dist.ProcessGroup | None] = {}
        self._cache: dict[Any, Any] = {}

    def group(self, ranks: Sequence[int] | None = None) -> dist.ProcessGroup | None:
        """The process group of ``ranks`` (global ranks), or the world's group for ``None``.

        On a rank outside ``ranks`` the result is not a member group; tasks skip their work there.
        """
        if ranks is None or sorted(ranks) == list(range(self.world_size)):
            return dist.group.WORLD
        key = tuple(ranks)
        if key not in self._groups:
            self._groups[key] = dist.new_group(list(key), backend=self.backend.torch_name)
        return self._groups[key]

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        """A per-world object (a device mesh, say) made once by ``make`` on every rank."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


def resolve_task(name: str) -> Callable[..., Any]:
    """Import ``"package.module:function"`` (dots after the colon walk attributes)."""
    module_name, _, attr = name.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def to_cpu(value: Any) -> Any:
    """Move every tensor in a nest of lists, tuples and dicts to the CPU for the trip back."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, list | tuple):
        return type(value)(to_cpu(v) for v in value)
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    return value


def execute(ctx: RankContext, task: str, args: dict[str, Any]) -> Outcome:
    """Run one task and capture what happened as an outcome, never as an escaping exception. A
    case that reached an adapter method not written yet ends in that raise, whatever the task
    made of it (``conformance.world.unimplemented``)."""
    step.case_started()
    unimplemented.taken()
    try:
        outcome: Outcome = Returned(ctx.rank, to_cpu(resolve_task(task)(ctx, **args)))
    except Exception as exc:
        outcome = Raised(
            rank=ctx.rank,
            types=tuple(cls.__name__ for cls in type(exc).__mro__),
            message=str(exc),
            traceback=traceback.format_exc(),
            facts=getattr(exc, FACTS_ATTRIBUTE, None),
        )
    methods = unimplemented.taken()
    if not methods:
        return outcome
    return Raised(
        rank=ctx.rank,
        types=tuple(cls.__name__ for cls in unimplemented.NotImplementedInAdapter.__mro__),
        message=UNIMPLEMENTED_SAYS + ", ".join(methods),
        traceback=getattr(outcome, "traceback", ""),
    )


def tensor_from_bytes(dtype: str, shape: tuple[int, ...], data: bytes) -> torch.Tensor:
    """The contiguous CPU tensor ``_OutcomePickler`` sent: its dtype, shape and raw bytes."""
    kind = getattr(torch, dtype)
    if not data:
        return torch.empty(shape, dtype=kind)
    return torch.frombuffer(bytearray(data), dtype=kind).reshape(shape)


class _OutcomePickler(pickle.Pickler):
    """Pickles a plain contiguous CPU tensor as its raw bytes: a tenth of the time of a
    tensor's own pickling (``torch.serialization``) both ways, and an outcome carries several.
    Every other object, tensors with strides or state of their own included, pickles as ever."""

    def reducer_override(self, obj: Any) -> Any:
        if (
            type(obj) is torch.Tensor
            and obj.layout == torch.strided
            and obj.device.type == "cpu"
            and not obj.requires_grad
            and not (obj.is_conj() or obj.is_neg() or obj.is_quantized)
            and obj.stride() == _contiguous_strides(obj.shape)
        ):
            data = obj.reshape(-1).view(torch.uint8).numpy().tobytes() if obj.numel() else b""
            dtype = str(obj.dtype).removeprefix("torch.")
            return tensor_from_bytes, (dtype, tuple(obj.shape), data)
        return NotImplemented


def _contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def encode(outcome: Outcome) -> bytes:
    """Pickle an outcome; a value that cannot be pickled becomes a ``Raised`` that says so."""
    buffer = io.BytesIO()
    try:
        _OutcomePickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(outcome)
        return buffer.getvalue()
    except Exception as exc:
        return pickle.dumps(
            Raised(outcome.rank, ("PicklingError", "Exception"), f"result not picklable: {exc}", "")
        )


def serve(ctx: RankContext, channel: Channel) -> None:
    """Answer cases until the channel closes."""
    while (message := channel.receive()) is not None:
        _seq, task, args = pickle.loads(message)
        channel.send(encode(execute(ctx, task, args)))


def isolate_from_driver_terminal() -> None:
    """Ctrl-C in the driver's terminal reaches ranks too; the driver decides what stops. A forked
    rank also inherits the driver's SIGTERM handler (``conformance run`` turns SIGTERM into an
    interrupt): a rank stops at SIGTERM, as the driver's ``close`` expects."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def drop_driver_tracers() -> None:
    """A forked rank inherits the driver's tracing: Hypothesis traces a failing example's replay
    (``sys.settrace``, or ``sys.monitoring`` from Python 3.12) to explain it, and a world started
    then ran every line of its ranks under that tracer, slowly enough to turn a first import
    into a timeout. Ranks run untraced."""
    sys.settrace(None)
    threading.settrace(None)
    monitoring = getattr(sys, "monitoring", None)
    for tool in range(6) if monitoring else ():  # sys.monitoring has tool ids 0-5
        if monitoring.get_tool(tool) is not None:
            monitoring.set_events(tool, monitoring.events.NO_EVENTS)
            monitoring.free_tool_id(tool)


def share_the_cores(world_size: int) -> None:
    """Compute on the threads ``OMP_NUM_THREADS`` names, else on one thread per rank of a
    world of several, as torchrun sets it for more than one process per node: the ranks of a
    local world share the machine's cores, and each rank's pool of one thread per core would
    oversubscribe them ``world_size`` times over, with threads that spin at every parallel
    region's end. A forked rank would otherwise keep the driver's count, whatever the variable
    says now.

    The ranks of a world of several also run under Linux's batch policy (``SCHED_BATCH``, no
    privilege needed), which their Gloo threads inherit: with more ranks than cores, waking a
    peer preempted the rank that woke it, and a 4-rank all-gather on 2 cores took 3.3 ms of wall
    time and 1.1 ms of CPU per rank, against 0.42 ms and 0.19 ms as batch work (measured here,
    torch 2.13.0). It changes how the cores are shared, never what a rank computes."""
    given = os.environ.get("OMP_NUM_THREADS", "")
    if given.isdigit() and int(given) > 0:
        torch.set_num_threads(int(given))
    elif not given and world_size > 1:
        torch.set_num_threads(1)
    if world_size > 1 and hasattr(os, "SCHED_BATCH"):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


def die_with_parent() -> None:
    """Ask Linux to kill this rank when the driver dies, so no rank outlives a crashed run."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() == 1:
        os._exit(1)


def init_group(
    backend: Backend, rank: int, world_size: int, store: dist.Store | None, timeout_s: float
) -> None:
    """Join the default process group; ``store=None`` means the launcher's ``env://``. The
    backend's modules come first: one of them may register it."""
    for module in backend.modules:
        importlib.import_module(module)
    backend.set_rank_device(rank)
    kwargs: dict[str, Any] = {"timeout": timedelta(seconds=timeout_s)}
    if store is None:
        kwargs["init_method"] = "env://"
    else:
        kwargs["store"] = store
    dist.init_process_group(backend.torch_name, rank=rank, world_size=world_size, **kwargs)
    step.watch()
