"""Which process-group backend a world uses, on which device each rank keeps its tensors, and why
a world size cannot run here (the reason becomes an environment error or a test's skip message).

Any backend torch.distributed knows can run a world: its own (``gloo``, ``nccl``, ``xccl``,
``ucc``, ``mpi``), one an accelerator's package registers when ``import torch`` loads it (torch's
device-backend entry points), one registered from Python with
``torch.distributed.Backend.register_backend`` by a module the ranks import first (the ``--impl``
module's), and a ``device:backend,...`` map (``cpu:gloo,cuda:nccl``). The device is the one the
user names, or else the backend's own: the CPU where the backend serves it, else the first device
type it declares (``cuda`` for NCCL, ``xpu`` for XCCL)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Backend:
    """A world's backend as torch.distributed takes it, the device type of its ranks' tensors,
    and the modules each rank imports before it joins (those that register the backend)."""

    name: str
    device_type: str = "cpu"
    modules: tuple[str, ...] = ()

    @property
    def torch_name(self) -> str:
        return self.name

    @property
    def options(self) -> str:
        """The command-line options that name this backend on this device (a replay line's)."""
        own = _own_device(self.name, _devices_served(self.name))
        device = "" if self.device_type == own else f" --device {self.device_type}"
        return f"--backend {self.name}{device}"

    @property
    def uses_accelerator(self) -> bool:
        """Ranks compute on an accelerator: one device each, set before the group starts."""
        return self.device_type != "cpu"

    def device_for(self, rank: int) -> torch.device:
        """Rank ``r`` on device ``r`` of its type (modulo the node's count); the CPU is one."""
        if not self.uses_accelerator:
            return torch.device("cpu")
        return torch.device(self.device_type, rank % max(1, _device_count(self.device_type)))

    def placement(self, rank: int) -> str:
        """Where ``rank``'s shards live, as a ShardMetadata placement (``rank:1/cuda:1``): the one
        spelling of rank devices that the ranks' cases and the driver's expectations share."""
        return f"rank:{rank}/{self.device_for(rank)}"

    def unavailable_reason(self, world_size: int) -> str | None:
        """Why this backend cannot run a world of ``world_size`` ranks here, or ``None``."""
        if world_size < 1:
            return f"world size must be at least 1; got {world_size}"
        for name in _backend_names(self.name):
            built = getattr(dist, f"is_{name}_available", None)
            if built is not None and not built():
                hint = " (a CPU-only build?)" if name == "nccl" else ""
                return f"this torch build has no {name.upper()} backend{hint}"
        if not self.uses_accelerator:
            return None
        if not _device_module(self.device_type).is_available():
            return f"this machine has no {self.device_type} device for --backend {self.name}"
        count = _device_count(self.device_type)
        if count < world_size:
            return (
                f"{self._label()} needs one {_noun(self.device_type)} per rank: world size "
                f"{world_size} needs {world_size} {_noun(self.device_type)}(s), this machine "
                f"has {count}"
            )
        return None

    def _label(self) -> str:
        """The backend that moves this device's tensors: ``NCCL`` for ``cpu:gloo,cuda:nccl``."""
        pairs = dict(part.split(":", 1) for part in self.name.split(",") if ":" in part)
        return pairs.get(self.device_type, self.name).upper()

    def set_rank_device(self, rank: int) -> None:
        """Make rank ``rank``'s device current, before its group starts (NCCL and its kin bind
        a communicator to the device current then)."""
        if self.uses_accelerator:
            _device_module(self.device_type).set_device(self.device_for(rank))


def backend_named(name: str, device: str | None = None, modules: Sequence[str] = ()) -> Backend:
    """The backend ``name`` on ``device`` (default: the backend's own), after importing
    ``modules`` (they may register it). A name torch.distributed does not know, a device type
    torch does not know, or a device the backend does not serve is a ``ValueError``: bad input,
    whatever the machine. (A known backend or device this machine lacks is
    ``unavailable_reason``'s: an environment error.)"""
    for module in modules:
        importlib.import_module(module)
    served = _devices_served(name)
    if device is None:
        device = _own_device(name, served)
    try:
        device_type = torch.device(device).type
    except RuntimeError:
        raise ValueError(f"unknown device type {device!r}") from None
    if device_type not in served:
        raise ValueError(
            f"--backend {name} does not serve {device_type} tensors (it serves "
            f"{', '.join(served)}); choose --device {' or '.join(served)}, or another backend"
        )
    return Backend(name, device_type, tuple(modules))


def _own_device(name: str, served: list[str]) -> str:
    """A backend's device when none is named: the CPU where a single backend serves it (Gloo
    serves CUDA tensors too, but a Gloo world computes on the CPU), the accelerator of a
    ``device:backend`` map (``cpu:gloo,cuda:nccl`` asks for CUDA ranks), else the first served."""
    if ":" not in name and "cpu" in served:
        return "cpu"
    return next((device for device in served if device != "cpu"), served[0])


def _devices_served(name: str) -> list[str]:
    """The device types ``name`` declares, as ``torch.distributed.Backend`` records them; for a
    ``device:backend,...`` map, the devices it maps (each backend must be known)."""
    if ":" in name:
        pairs = [part.split(":", 1) for part in name.split(",")]
        for _, backend in pairs:
            _devices_served(backend)
        return [device for device, _ in pairs]
    known = dist.Backend.backend_capability
    if name.lower() not in known or name.lower() == "undefined":
        raise ValueError(
            f"unknown backend {name!r}; torch.distributed knows {', '.join(sorted(known))} (a "
            "backend registered with torch.distributed.Backend.register_backend counts once "
            "the --impl module, or a package torch loads, has registered it)"
        )
    return list(known[name.lower()])


def _backend_names(name: str) -> list[str]:
    return [part.split(":", 1)[-1] for part in name.split(",")]


def _device_module(device_type: str) -> object:
    return torch.get_device_module(device_type)


def _device_count(device_type: str) -> int:
    return int(_device_module(device_type).device_count())


def _noun(device_type: str) -> str:
    return "GPU" if device_type == "cuda" else f"{device_type} device"


def default_start_method(backend: Backend) -> str:
    """Fork is the cheapest start, but an accelerator's runtime cannot survive a fork: spawn."""
    return "spawn" if backend.uses_accelerator else "fork"
