"""The NCCL paths of the harness that need no GPU to check: where each rank's tensors live, how a
CUDA world starts, and why a machine cannot run one. A GPU runner meets these first; a CPU-only
CI pins them here, with the GPU count set by the test."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from conformance import rank_devices
from conformance.tasks import codec
from conformance.world.backends import backend_named, default_start_method
from conformance.world.rank import to_cpu

TESTS = Path(__file__).parent
ROOT = TESTS.parents[1]
SUITE = ROOT / "conformance" / "suite"


@pytest.fixture
def gpus(monkeypatch):
    """Pretend the machine has ``n`` GPUs and a torch build with NCCL."""

    def have(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
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


def test_a_backend_registered_from_python_runs_worlds_whose_ranks_import_it_first():
    """Spawned ranks inherit nothing from the driver: each imports the adapter's module (which
    registers ``shardgloo``) before it joins, and the group it joins is that backend's."""
    from conformance.world import Case, LocalWorld

    backend = backend_named("shardgloo", modules=["registered_backend"])
    assert (backend.device_type, backend.options) == ("cpu", "--backend shardgloo")
    with LocalWorld(3, backend, start_method="spawn") as world:
        result = world.run(Case("registered_backend:world_backend"))
    assert result.values() == [["shardgloo", 6.0]] * 3


def test_the_suite_judges_an_implementation_on_a_backend_its_adapter_module_registers(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "run", "--impl", "registered_backend:ADAPTER",
         "--backend", "shardgloo", "--world-sizes", "1,2", "--report-dir", str(tmp_path),
         str(SUITE / "test_st_gather.py")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT)])},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "rules.json").read_text())
    assert report["run"]["backend"] == "shardgloo"
    verdicts = {cell for rule in report["rules"].values() for cell in rule.values()}
    assert verdicts == {"pass"}, verdicts


@pytest.mark.parametrize(
    ("name", "device", "message"),
    [
        ("nosuch", None, "unknown backend 'nosuch'; torch.distributed knows "),
        ("nccl", "cpu", "--backend nccl does not serve cpu tensors (it serves cuda); choose "),
        ("gloo", "xpu", "--backend gloo does not serve xpu tensors (it serves cpu, cuda)"),
        ("gloo", "warp", "unknown device type 'warp'"),
    ],
)
def test_a_backend_or_device_that_means_nothing_is_bad_input(name, device, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        backend_named(name, device)


def test_a_known_backend_this_build_lacks_is_an_environment_reason():
    """XCCL is torch.distributed's own (XPU tensors); a build or machine without it cannot run
    a world, which is the environment's fault, not the command's."""
    xccl = backend_named("xccl")
    assert xccl.device_type == "xpu"
    if not dist.is_xccl_available():
        assert xccl.unavailable_reason(1) == "this torch build has no XCCL backend"


def test_any_backend_on_an_accelerator_puts_each_rank_on_its_own_device(gpus):
    gpus(2)
    gloo_on_gpus = backend_named("gloo", "cuda")
    assert [gloo_on_gpus.device_for(r) for r in range(2)] == [
        torch.device("cuda", r) for r in (0, 1)
    ]
    assert gloo_on_gpus.options == "--backend gloo --device cuda"
    assert default_start_method(gloo_on_gpus) == "spawn"
    assert gloo_on_gpus.unavailable_reason(3) == (
        "GLOO needs one GPU per rank: world size 3 needs 3 GPU(s), this machine has 2"
    )
    assert backend_named("nccl").options == "--backend nccl"
