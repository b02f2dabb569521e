"""spec/tour.md shows only what the reference prints: every console block is rerun, the rules it
cites exist, and its byte counts are what a real Gloo world receives."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import shlex
from pathlib import Path

import torch

from conformance.world import Case
from reference import tour
from reference.dtensor.placements import show
from reference.dtensor.redistribute import plan

SPEC = Path(__file__).resolve().parents[2] / "spec"
TOUR = SPEC / "tour.md"
BLOCK = re.compile(r"^```console\n\$ (python -m [^\n]+)\n(.*?)^```$", re.M | re.S)
RULE_ID = re.compile(r"\b([A-Z]+(?:-[A-Z]+)*-\d+)\b")


def printed(command: str) -> str:
    """What ``python -m MODULE ARGS`` prints, run in this process (its ``main(argv)``)."""
    _, _, module, *argv = shlex.split(command)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        importlib.import_module(module).main(argv)
    return out.getvalue()


def test_every_console_block_is_what_its_command_prints():
    blocks = BLOCK.findall(TOUR.read_text())
    assert len(blocks) == 8, "the tour's console blocks were not all found"
    for command, shown in blocks:
        assert shown == printed(command), f"spec/tour.md is stale for: {command}"


def test_the_tour_cites_only_rules_the_spec_defines():
    defined = set(re.findall(r"^### ([A-Z-]+-\d+):", _chapters(), re.M))
    cited = set(RULE_ID.findall(TOUR.read_text()))
    assert cited, "the tour cites no rule"
    assert cited <= defined, sorted(cited - defined)
    assert not re.search(r"^### ", TOUR.read_text(), re.M), "the tour defines no rules"


def _chapters() -> str:
    return "\n".join(p.read_text() for p in sorted(SPEC.glob("*.md")) if p != TOUR)


def test_the_tours_prose_quotes_the_computed_totals():
    size = tour.global_tensor().element_size()
    coords = [(i, j) for i in range(tour.MESH_SHAPE[0]) for j in range(tour.MESH_SHAPE[1])]
    the_plan = plan(tour.SOURCE, tour.TARGET)
    lacks = sum(
        tour.lacking(tour.SHAPE, tour.MESH_SHAPE, tour.SOURCE, tour.TARGET, c) for c in coords
    )
    received = sum(
        tour.all_gather_receives(tour.SHAPE, tour.MESH_SHAPE, the_plan, c) for c in coords
    )
    text = " ".join(TOUR.read_text().split())
    assert f"{lacks * size} bytes must move and {received * size} do" in text
    assert f"the other {(received - lacks) * size} are padding" in text


def test_the_tours_traffic_is_what_a_gloo_world_receives(world_pool):
    """Counted at the torch.distributed calls the reference's redistribute makes (dt_tasks)."""
    world = world_pool.get(len(tour.RANKS))
    result = world.run(
        Case(
            "dt_tasks:traffic",
            {
                "mesh_shape": list(tour.MESH_SHAPE),
                "ranks": tour.RANKS,
                "shape": list(tour.SHAPE),
                "src": show(tour.SOURCE),
                "tgt": show(tour.TARGET),
            },
        )
    )
    the_plan = plan(tour.SOURCE, tour.TARGET)
    size = tour.global_tensor().element_size()
    expected = {}
    for i, row in enumerate(tour.MESH):
        for j, rank in enumerate(row):
            received = tour.all_gather_receives(tour.SHAPE, tour.MESH_SHAPE, the_plan, (i, j))
            expected[rank] = received * size
    assert result.values() == [expected[rank] for rank in range(len(tour.RANKS))]


def test_the_tours_gradient_is_what_a_gloo_world_computes(world_pool):
    """Section 7's blocks are the reference's ``d.grad`` after a real backward on 4 ranks."""
    results = world_pool.get(4).run(Case("dt_tasks:tour_grad")).values()
    weights = tour.weights()
    for rank, (placements, local) in enumerate(results):
        assert placements == show(tour.SOURCE)
        i, j = divmod(tour.RANKS.index(rank), tour.MESH_SHAPE[1])
        rows, cols = ((0, 3), (3, 5))[i], ((0, 2), (2, 3))[j]
        assert torch.equal(local, weights[rows[0] : rows[1], cols[0] : cols[1]])
