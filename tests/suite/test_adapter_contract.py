"""The adapter is the only door to an implementation: tasks call only the methods the contract
declares, take their inputs from ``codec`` (the one task module that may read the oracle's input
generators) and never judge; every shipped adapter implements the whole contract."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from conformance import adapters
from conformance.adapters import contract

TASKS = Path(contract.__file__).resolve().parent.parent / "tasks"
DECLARED = {
    name
    for family in (contract.ShardedTensorAdapter, contract.DTensorAdapter)
    for name, member in vars(family).items()
    if inspect.isfunction(member) and not name.startswith("_")
}
# What the adapter claims may choose a task's input too (distribute's source): readable, not called.
READABLE = DECLARED | {"capabilities"}


def undeclared_calls(source: str) -> list[str]:
    """``adapter.<name>`` uses of names the contract does not declare, where ``adapter`` is a
    name bound to ``adapters.load(...)`` or a parameter called ``adapter``."""
    tree = ast.parse(source)
    bound = {"adapter"}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) == "adapters.load"
        ):
            bound.update(t.id for t in node.targets if isinstance(t, ast.Name))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr not in READABLE:
            owner = ast.unparse(node.value)
            if owner in bound or owner.startswith("adapters.load("):
                found.append(f"{owner}.{node.attr}")
    return sorted(found)


def oracle_imports(source: str) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
    return sorted(n for n in names if n.startswith("conformance.oracle"))


@pytest.mark.parametrize("path", sorted(TASKS.glob("*.py")), ids=lambda p: p.name)
def test_tasks_call_only_what_the_contract_declares(path):
    assert undeclared_calls(path.read_text()) == []


@pytest.mark.parametrize(
    "path", sorted(p for p in TASKS.glob("*.py") if p.name != "codec.py"), ids=lambda p: p.name
)
def test_tasks_other_than_the_codec_never_read_the_oracle(path):
    assert oracle_imports(path.read_text()) == []


def test_a_side_door_is_found():
    planted = (
        "def task(ctx, impl):\n"
        "    api = adapters.load(impl).st_api()\n"
        "    adapter = adapters.load(impl)\n"
        "    return adapter.ShardMetadata([0], [1], 'rank:0/cpu'), adapter.st_describe(api)\n"
    )
    assert undeclared_calls(planted) == ["adapter.ShardMetadata", "adapters.load(impl).st_api"]


def test_the_adapter_guide_lists_every_capability():
    guide = (Path(contract.__file__).parent / "README.md").read_text()
    listed = set(
        re.findall(r"`([a-z_:]+)`", guide.split("## 3. Capabilities")[1].split("## 4.")[0])
    )
    assert sorted(set(contract.CAPABILITIES) - listed) == []


@pytest.mark.parametrize("name", sorted(adapters.REGISTRY))
def test_each_shipped_adapter_implements_the_whole_contract(name):
    adapter = adapters.load(name)
    missing = sorted(m for m in DECLARED if not callable(getattr(adapter, m, None)))
    assert missing == []
    for method in sorted(DECLARED):
        declared = inspect.signature(getattr(contract.Adapter, method))
        given = inspect.signature(getattr(type(adapter), method))
        assert _shape(given) == _shape(declared), method


def _shape(signature: inspect.Signature) -> list[tuple[str, str]]:
    """How a method can be called: each parameter's kind, and its name where callers pass it by
    name (tasks pass the others by position, so their names are the adapter's own)."""
    return [
        (p.kind.name, p.name if p.kind is p.KEYWORD_ONLY else "")
        for p in signature.parameters.values()
    ]
