"""The floors of the design, kept by a test: the oracle (written from the spec) never imports the
reference, and the reference (teaching code) never imports the harness. A verdict checked against
an oracle that borrowed the reference's code would prove nothing, and a reader of ``reference/``
should meet only ``torch.distributed``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# (folder, packages its modules may not import, why)
RULES = [
    ("conformance/oracle", ("reference",), "the oracle is written from the spec alone"),
    ("conformance/oracle", ("conformance",), "the oracle imports only itself"),
    ("reference", ("conformance", "tests"), "the reference never depends on the harness"),
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


def broken(folder: Path, forbidden: tuple[str, ...], allowed: str = "") -> list[str]:
    """``file: module`` for each import under ``folder`` of a forbidden package (``allowed``, a
    sub-package, excepted)."""
    return [
        f"{path.relative_to(folder.parent)}: {name}"
        for path in sorted(folder.rglob("*.py"))
        for name in sorted(imported(path))
        if any(name == f or name.startswith(f + ".") for f in forbidden)
        and not (allowed and (name == allowed or name.startswith(allowed + ".")))
    ]


@pytest.mark.parametrize(("folder", "forbidden", "why"), RULES, ids=[r[2] for r in RULES])
def test_each_floor_imports_only_what_is_below_it(folder, forbidden, why):
    own = folder.replace("/", ".") if folder.startswith("conformance") else ""
    assert broken(ROOT / folder, forbidden, own) == [], why


def test_a_forbidden_import_is_found_however_it_is_written(tmp_path):
    folder = tmp_path / "reference"
    (folder / "dtensor").mkdir(parents=True)
    (folder / "dtensor" / "bench.py").write_text(
        "import os\nfrom conformance.world import Case\nimport conformance\n"
        "def f():\n    import conformance.oracle.layout as layout\n"
    )
    assert broken(folder, ("conformance",)) == [
        "reference/dtensor/bench.py: conformance",
        "reference/dtensor/bench.py: conformance.oracle.layout",
        "reference/dtensor/bench.py: conformance.world",
    ]
