"""The torch adapter on any release: what a release lacks, the adapter asks it (never its version
number) and does not claim, and a release newer than every known-failures file still runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from conformance import known_failures, paths
from conformance.adapters import pytorch
from conformance.world.unimplemented import NotImplementedInAdapter


@pytest.fixture
def one_rank_world(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_without_src_data_rank_it_distributes_from_the_first_rank_and_refuses_other_sources(
    one_rank_world, monkeypatch
):
    monkeypatch.setattr(pytorch, "DISTRIBUTES_FROM_ANY_SOURCE", False)
    adapter = pytorch.PyTorchAdapter()
    mesh = adapter.dt_mesh("cpu", [1], [0], None)
    dt = adapter.dt_distribute(torch.arange(4.0), mesh, ["S(0)"], 0)
    assert adapter.dt_to_local(dt).tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(NotImplementedInAdapter, match="has no src_data_rank"):
        adapter.dt_distribute(torch.arange(4.0), mesh, ["S(0)"], None)


def test_the_adapter_claims_distribute_source_exactly_where_the_release_takes_the_argument():
    claimed = "distribute_source" in pytorch.ADAPTER.capabilities
    assert claimed == pytorch.DISTRIBUTES_FROM_ANY_SOURCE


def test_a_release_newer_than_every_file_runs_with_the_newest_and_says_so(tmp_path):
    # A release served after the newest file: every process of the run (sitecustomize) sees a
    # version one minor above it. The run must judge with the newest file, say so in its header,
    # and report what differs as new failures or unexpected passes, never crash on the number.
    newest = max(
        (known_failures.FOLDER / "torch").glob("*.txt"),
        key=lambda p: known_failures.release_key(p.stem),
    )
    major, minor, _ = known_failures.release_key(newest.stem)
    release = f"{major}.{minor + 1}.0+cpu"
    (tmp_path / "sitecustomize.py").write_text(f"import torch\ntorch.__version__ = {release!r}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(paths.CHECKOUT)])}
    layout = paths.CHECKOUT / "conformance" / "suite" / "test_dt_layout.py"
    test = f"{layout}::test_local_shape_and_offset_of_every_coordinate"
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "run", test, "--impl", "torch"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert f"shardspec implementation: torch {release}" in done.stdout, done.stdout
    assert f"torch {release} has no file of its own: using {newest.stem}'s" in done.stdout
    assert done.returncode in (0, 1), done.stdout + done.stderr  # a verdict, not an error
    assert "DT-LAYOUT-1" in done.stdout  # the per-rule table: the run judged
