"""Where the world under test keeps each rank's tensors, spelled as a ShardMetadata placement:
``rank:1/cpu`` on Gloo, ``rank:1/cuda:1`` on NCCL. Cases and the oracle's expectations name the
device each rank really uses (``Backend.device_for``, the rule the ranks themselves follow), so
a layout the suite draws as valid is valid on every backend, and a shard found on another
device is a finding. The plugin sets the run's backend once; unset, it is Gloo's CPU."""

from __future__ import annotations

from conformance.world.backends import Backend, backend_named

_backend = backend_named("gloo")


def use(backend: Backend) -> None:
    """The backend of this run's worlds (the ``--backend`` option)."""
    global _backend
    _backend = backend


def device(rank: int) -> str:
    """The device of ``rank``'s tensors, as ``str(torch.device)`` spells it."""
    return str(_backend.device_for(rank))


def placement(rank: int) -> str:
    """``rank`` on its own device: the placement of a shard that ``rank`` holds."""
    return _backend.placement(rank)
