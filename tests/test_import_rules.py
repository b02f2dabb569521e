"""The floors of the design, kept by a test: the vocabulary (the spec's words) imports nothing of
the project, the oracle (written from the spec) imports only itself and the vocabulary, and the
reference (teaching code) never imports the harness. A verdict checked against an oracle that
borrowed the reference's code would prove nothing, and a reader of ``reference/`` should meet
only ``torch.distributed``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROJECT = ("conformance", "reference", "tests")
# (folder or module, packages it may not import, the sub-packages excepted, why)
RULES = [
    ("conformance/vocabulary.py", PROJECT, (), "the vocabulary imports nothing of the project"),
    ("conformance/oracle", ("reference",), (), "the oracle is written from the spec alone"),
    (
        "conformance/oracle",
        ("conformance",),
        ("conformance.oracle", "conformance.vocabulary"),
        "the oracle imports only itself and the vocabulary",
    ),
    ("reference", ("conformance", "tests"), (), "the reference never depends on the harness"),
]


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, by its full dotted name."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def broken(where: Path, forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    """``file: module`` for each import in ``where`` (a module, or every module under a folder)
    of a forbidden package, the ``allowed`` sub-packages excepted."""
    paths = [where] if where.suffix == ".py" else sorted(where.rglob("*.py"))
    return [
        f"{path.relative_to(where.parent)}: {name}"
        for path in paths
        for name in sorted(imported(path))
        if _within(name, forbidden) and not _within(name, allowed)
    ]


@pytest.mark.parametrize(("where", "forbidden", "allowed", "why"), RULES, ids=[r[3] for r in RULES])
def test_each_floor_imports_only_what_is_below_it(where, forbidden, allowed, why):
    assert broken(ROOT / where, forbidden, allowed) == [], why


def test_a_forbidden_import_is_found_however_it_is_written(tmp_path):
    folder = tmp_path / "reference"
    (folder / "dtensor").mkdir(parents=True)
    (folder / "dtensor" / "bench.py").write_text(
        "import os\nfrom conformance.world import Case\nimport conformance\n"
        "def f():\n    import conformance.oracle.layout as layout\n"
    )
    assert broken(folder, ("conformance",), ("conformance.world",)) == [
        "reference/dtensor/bench.py: conformance",
        "reference/dtensor/bench.py: conformance.oracle.layout",
    ]


def test_each_step_of_the_plugin_imports_only_the_steps_before_it():
    """The plugin's modules, in the order ``conformance.plugin`` lists them, are the path a case
    takes from options to report: a step that imported a later one would hide that path."""
    import conformance.plugin

    steps = conformance.plugin.pytest_plugins
    for index, step in enumerate(steps):
        path = ROOT / (step.replace(".", "/") + ".py")
        later = {*steps[index + 1 :], "conformance.plugin"}
        wrong = sorted(n for n in imported(path) if n in later)
        assert wrong == [], f"{step} imports {wrong}, a later step of the plugin"
