"""Which process-group backends a world can use, where each one puts a rank's tensors, and why a
world size cannot run (the reason becomes the test's skip message)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Backend:
    """A backend as the suite names it: ``gloo``, ``nccl`` or ``cpu:gloo,cuda:nccl``."""

    name: str

    @property
    def torch_name(self) -> str:
        return self.name

    @property
    def uses_cuda(self) -> bool:
        return "nccl" in self.name

    def device_for(self, rank: int) -> torch.device:
        """One GPU per rank for NCCL worlds; every rank on the CPU for Gloo."""
        if not self.uses_cuda:
            return torch.device("cpu")
        return torch.device("cuda", rank % max(1, torch.cuda.device_count()))

    def placement(self, rank: int) -> str:
        """Where ``rank``'s shards live, as a ShardMetadata placement (``rank:1/cuda:1``): the one
        spelling of rank devices that the ranks' cases and the driver's expectations share."""
        return f"rank:{rank}/{self.device_for(rank)}"

    def unavailable_reason(self, world_size: int) -> str | None:
        """Why this backend cannot run a world of ``world_size`` ranks here, or ``None``."""
        if world_size < 1:
            return f"world size must be at least 1; got {world_size}"
        if "gloo" in self.name and not dist.is_gloo_available():
            return "this torch build has no Gloo backend"
        if self.uses_cuda:
            if not dist.is_nccl_available():
                return "this torch build has no NCCL backend (a CPU-only build?)"
            gpus = torch.cuda.device_count()
            if gpus < world_size:
                return (
                    f"NCCL needs one GPU per rank: world size {world_size} needs {world_size} "
                    f"GPU(s), this machine has {gpus}"
                )
        return None


BACKENDS = {name: Backend(name) for name in ("gloo", "nccl", "cpu:gloo,cuda:nccl")}


def backend_named(name: str) -> Backend:
    """Look a backend up by name, with an error that lists the known ones."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; expected one of {sorted(BACKENDS)}") from None


def default_start_method(backend: Backend) -> str:
    """Fork is the cheapest start, but CUDA cannot survive a fork: spawn for CUDA worlds."""
    return "spawn" if backend.uses_cuda else "fork"
