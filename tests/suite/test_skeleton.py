"""An adapter starts as a skeleton (``python -m conformance skeleton``): every method its
capabilities need (``contract.METHODS``), each raising ``NotImplementedInAdapter`` with its
contract line. A test that reaches such a method is *not implemented*: it fails the run and
shows so in the tables, and never passes, not even where a ``NotImplementedError`` is the
implementation's allowed refusal or a task turns the raise into data."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from expecttest import assert_expected_inline

from conformance.adapters import contract, skeleton
from conformance.world import Case, LocalWorld
from conformance.world.unimplemented import AdapterIncomplete, NotImplementedInAdapter

TESTS = Path(__file__).parent
ROOT = TESTS.parents[1]
SUITE = ROOT / "conformance" / "suite"
DECLARED = {
    name
    for family in (contract.ShardedTensorAdapter, contract.DTensorAdapter)
    for name, member in vars(family).items()
    if inspect.isfunction(member) and not name.startswith("_")
}


def conformance(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), str(TESTS), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "conformance", *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
    )  # fmt: skip


def test_the_table_gives_every_contract_method_to_a_capability_the_contract_defines():
    listed = [m for methods in contract.METHODS.values() for m in methods]
    assert set(listed) == DECLARED
    assert set(contract.METHODS) <= set(contract.CAPABILITIES)
    assert set(contract.FAMILY.values()) == {"sharded_tensor", "dtensor"}
    assert contract.methods_for(["dtensor_random"]) == [
        *contract.METHODS["dtensor"],
        "dt_factory",
        "dt_op",
    ]


def test_the_adapter_guide_shows_the_table():
    guide = (Path(contract.__file__).parent / "README.md").read_text()
    for capability, methods in contract.METHODS.items():
        row = next(line for line in guide.splitlines() if line.startswith(f"| `{capability}` |"))
        assert all(f"`{m}`" in row for m in methods), capability


@pytest.mark.parametrize("capability", sorted(contract.CAPABILITIES))
def test_a_skeleton_has_every_method_its_capabilities_need_each_raising_its_contract_line(
    capability, tmp_path
):
    path = tmp_path / "skel.py"
    path.write_text(skeleton.render([capability]))
    spec = importlib.util.spec_from_file_location("skel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    adapter = module.ADAPTER
    assert capability in adapter.capabilities
    needed = contract.methods_for(adapter.capabilities)
    written = sorted(n for n in DECLARED if callable(getattr(adapter, n, None)))
    assert written == sorted(needed)
    for name in needed:
        declared = inspect.signature(getattr(contract.Adapter, name))
        given = inspect.signature(getattr(type(adapter), name))
        assert list(given.parameters) == list(declared.parameters), name
        with pytest.raises(NotImplementedInAdapter, match=f"^{name} is not implemented"):
            getattr(adapter, name)(*_placeholders(declared), **_keywords(declared))


def _placeholders(signature: inspect.Signature) -> list[None]:
    """``None`` for each positional parameter but ``self``."""
    kinds = [p.kind for p in signature.parameters.values()]
    return [None] * (kinds.count(inspect.Parameter.POSITIONAL_OR_KEYWORD) - 1)


def _keywords(signature: inspect.Signature) -> dict[str, None]:
    return {n: None for n, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY}


def test_a_skeleton_method_reads_as_the_contract_declares_it():
    assert_expected_inline(
        skeleton._method("dt_to_local"),
        '''\
    def dt_to_local(self, dt: Any, grad_placements: Sequence[str] | None = None) -> torch.Tensor:
        """``dt.to_local()``; ``grad_placements`` only where given (DT-GRAD-3)."""
        raise NotImplementedInAdapter(
            "dt_to_local",
            "``dt.to_local()``; ``grad_placements`` only where given (DT-GRAD-3).",
        )''',
    )


def test_a_skeleton_of_no_or_unknown_capabilities_is_bad_input(tmp_path):
    for argv, says in ((["dtensors"], "unknown capabilities dtensors"), ([], "")):
        done = conformance("skeleton", *argv, cwd=tmp_path, timeout=60)
        assert done.returncode == 4, done.stderr
        assert says in done.stderr


def test_a_raise_the_task_swallowed_still_ends_the_case_as_not_implemented():
    with LocalWorld(1) as world, pytest.raises(AdapterIncomplete) as info:
        world.run(Case("world_tasks:refuses_through_an_unwritten_method"))
    assert info.value.methods == ("dt_op",)


def test_a_skeleton_run_is_not_implemented_where_a_refusal_would_pass(tmp_path):
    """DT-OP-7 allows an op to refuse with NotImplementedError on every rank; a skeleton's
    methods raise one: the per-op test must say "not implemented", never "pass"."""
    written = conformance("skeleton", "dtensor_ops", "--out", "skel.py", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    done = conformance(
        "run", "--impl", "skel:ADAPTER", "--world-sizes", "1,2", "--report-dir", "out",
        str(SUITE / "test_dt_ops.py"), "--", "--ops", "add,sum", "-k", "single_device_result",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "rules.json").read_text())
    cells = {cell for row in report["rules"].values() for cell in row.values()}
    assert cells == {"not implemented"}
    assert "DT-OP-7" in report["rules"]
    assert {c for row in report["ops"].values() for c in row.values()} == {"not implemented"}
    assert "shardspec: not implemented in the adapter: dt_mesh" in done.stdout


def test_a_raise_a_random_sequence_turns_into_data_is_still_not_implemented(tmp_path):
    done = conformance(
        "run", "--impl", "limited_adapter:ALL_BUT_DT_OP", "--world-sizes", "2", "--report-dir",
        "out", str(SUITE / "test_dt_random.py"), "--", "-k", "in_sequence", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "rules.json").read_text())
    assert {c for row in report["rules"].values() for c in row.values()} == {"not implemented"}
    assert "not implemented in the adapter: dt_op" in done.stdout


def test_fixtures_verify_of_a_skeleton_passes_nothing_and_fails(tmp_path):
    conformance("skeleton", "sharded_tensor", "--out", "skel.py", cwd=tmp_path)
    done = conformance("fixtures", "verify", "--impl", "skel:ADAPTER", cwd=tmp_path)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "\n0 passed, 0 failed, " in done.stdout
    assert "NOT IMPLEMENTED chunk_sharding.json: the adapter's st_chunk_metadata" in done.stdout


DT_CHAPTERS = ("dt_layout", "dt_mesh", "dt_placements", "dt_redistribute", "dt_api", "interop")
LIMITED = [
    ("SHARDED_TENSOR", ["test_st_*.py"], []),
    ("DTENSOR", [f"test_{chapter}.py" for chapter in DT_CHAPTERS], []),
    (
        "DTENSOR_OPS_AND_GRAD",
        ["test_dt_ops.py", "test_dt_op_grad.py", "test_dt_grad.py"],
        ["--", "--ops", "add,mm,softmax,view,sum"],
    ),
]


@pytest.mark.mutation
@pytest.mark.parametrize(("adapter", "chapters", "extra"), LIMITED, ids=[a for a, *_ in LIMITED])
def test_an_adapter_with_just_the_tables_methods_of_its_claims_is_judged_in_full(
    adapter, chapters, extra, tmp_path
):
    """The table is true: the reference, with only the methods the table lists for what it
    claims, reaches no method it lacks in the chapters of those claims."""
    paths = sorted(str(p) for pattern in chapters for p in SUITE.glob(pattern))
    done = conformance(
        "run", "--impl", f"limited_adapter:{adapter}", "-n", "2", "--report-dir", "out",
        *paths, *extra, cwd=tmp_path, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "rules.json").read_text())
    cells = {c for row in report["rules"].values() for c in row.values()}
    assert "not implemented" not in cells
    assert "pass" in cells
