"""The NCCL paths of the harness that need no GPU to check: where each rank's tensors live, how a
CUDA world starts, and why a machine cannot run one. A GPU runner meets these first; a CPU-only
CI pins them here, with the GPU count set by the test."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from conformance import rank_devices
from conformance.tasks import codec
from conformance.world.backends import backend_named, default_start_method
from conformance.world.rank import to_cpu


@pytest.fixture
def gpus(monkeypatch):
    """Pretend the machine has ``n`` GPUs and a torch build with NCCL."""

    def have(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(dist, "is_nccl_available", lambda: True)

    return have


@pytest.mark.parametrize("name", ["nccl", "cpu:gloo,cuda:nccl"])
def test_a_cuda_world_puts_each_rank_on_its_own_gpu_and_starts_by_spawn(gpus, name):
    gpus(4)
    backend = backend_named(name)
    assert [backend.device_for(r) for r in range(4)] == [torch.device("cuda", r) for r in range(4)]
    assert backend.torch_name == name
    assert default_start_method(backend) == "spawn"


def test_a_gloo_world_keeps_every_rank_on_the_cpu_and_starts_by_fork(gpus):
    gpus(4)
    backend = backend_named("gloo")
    assert {backend.device_for(r) for r in range(4)} == {torch.device("cpu")}
    assert default_start_method(backend) == "fork"


def test_nccl_needs_one_gpu_per_rank(gpus):
    gpus(1)
    nccl = backend_named("nccl")
    assert nccl.unavailable_reason(1) is None
    assert nccl.unavailable_reason(2) == (
        "NCCL needs one GPU per rank: world size 2 needs 2 GPU(s), this machine has 1"
    )
    assert backend_named("cpu:gloo,cuda:nccl").unavailable_reason(2) == nccl.unavailable_reason(2)


def test_nccl_on_a_build_without_it_is_refused_with_the_reason(monkeypatch):
    monkeypatch.setattr(dist, "is_nccl_available", lambda: False)
    assert backend_named("nccl").unavailable_reason(1) == (
        "this torch build has no NCCL backend (a CPU-only build?)"
    )


def test_an_unknown_backend_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown backend 'mpi'; expected one of \['cpu:gloo"):
        backend_named("mpi")


def test_out_buffers_and_inputs_are_made_on_the_ranks_device():
    """Tasks make ``out`` buffers and inputs on ``ctx.device`` (``cuda:r`` on NCCL); the meta
    device stands in for a GPU: nothing is computed, only where the tensor lives and its
    strides."""
    meta = torch.device("meta")
    out = codec.out_tensor({"shape": [3, 2], "dtype": "float32", "transposed": True}, meta)
    assert (out.device, out.shape, out.stride()) == (meta, torch.Size([3, 2]), (1, 3))
    view = codec.laid_out(torch.empty(3, 4, device=meta), "strided")
    assert (view.device, view.stride()) == (meta, (8, 2))


def test_results_come_back_to_the_driver_on_the_cpu():
    nested = {"a": [torch.ones(2, requires_grad=True)], "b": (torch.zeros(1),)}
    back = to_cpu(nested)
    assert back["a"][0].device.type == "cpu"
    assert not back["a"][0].requires_grad
    assert isinstance(back["b"], tuple)


def test_the_suites_placements_name_each_ranks_own_device(gpus, monkeypatch):
    """Cases and expectations place rank ``r``'s shards where the world keeps its tensors, so a
    layout valid on Gloo is drawn valid on NCCL too (it once said ``cpu`` there); and every rank
    spells every rank's placement alike (a rank once gave all of them its own GPU)."""
    gpus(4)
    monkeypatch.setattr(rank_devices, "_backend", rank_devices._backend)
    nccl = backend_named("nccl")
    rank_devices.use(nccl)
    assert [rank_devices.placement(r) for r in (0, 3)] == ["rank:0/cuda:0", "rank:3/cuda:3"]
    assert rank_devices.device(2) == "cuda:2"
    assert codec.placements_of([3, 0], nccl) == ["rank:3/cuda:3", "rank:0/cuda:0"]
    rank_devices.use(backend_named("gloo"))
    assert [rank_devices.placement(r) for r in (0, 3)] == ["rank:0/cpu", "rank:3/cpu"]
