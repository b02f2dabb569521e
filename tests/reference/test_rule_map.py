"""Each reference module's docstring maps the rules it implements to the names that implement
them, so a reader of spec/ finds the code and a reader of reference/ finds the rule.

The map follows the line ``Rules and where they live:`` and a blank line, and ends at the next
blank line. One item per line, continued on lines indented by two spaces::

    - ST-VALID-8, ST-VALID-9: ``check_local_tensor``
    - ST-VALID-14: ``init_from_local_shards`` (no rank passed a shard)
    - ST-VALID-6, ST-VALID-7: see ``reference.sharded_tensor.from_local``

Ids are the spec's; names are defined in the module (``Class.method`` allowed); a note in
parentheses has no backticks; ``see`` names the module whose map lists those rules by its own
names. Every rule the module's source mentions (``ST-VALID-2 to 5`` and ``ERR-1..3`` count as
ranges) is in its map. Packages only re-export and have no map.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from conformance import rules

ROOT = Path(__file__).resolve().parents[2]
HEADING = "Rules and where they live:"
# Pictures of layouts and the tour's numbers: they show rules at work, and none lives there.
UNMAPPED = {
    "reference.dtensor.draw",
    "reference.dtensor.plan",
    "reference.pictures",
    "reference.sharded_tensor.draw",
    "reference.svg",
    "reference.tour",
}
MODULES = {
    ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for path in (ROOT / "reference").rglob("*.py")
}

SPEC_IDS = {rule.id for rule in rules.load()}
_ID = r"[A-Z]+(?:-[A-Z]+)*-\d+"
_NAME = r"``[A-Za-z_][\w.]*``"
ITEM = re.compile(
    rf"- (?P<ids>{_ID}(?:, {_ID})*): "
    rf"(?:see ``(?P<module>[\w.]+)``|(?P<names>{_NAME}(?:, {_NAME})*)(?: \([^`()]+\))?)"
)
# A citation in the source: an id of a spec prefix, then more numbers of the same prefix.
_PREFIX = "|".join(sorted({i.rsplit("-", 1)[0] for i in SPEC_IDS}, key=len, reverse=True))
_SEP = r"(?:, | and | to | ?\.\. ?|/)"
CITATION = re.compile(rf"\b({_PREFIX})-(\d+)((?:{_SEP}(?:\1-|-)?\d+)*)")
STEP = re.compile(rf"({_SEP})(?:[A-Z-]+-|-)?(\d+)")


def items(doc: str) -> list[str]:
    """The items of the map in ``doc``, each joined onto one line."""
    _, _, rest = doc.partition(f"\n{HEADING}\n\n")
    found: list[str] = []
    for line in rest.splitlines():
        if not line.strip():
            break
        if line.startswith("  ") and found:
            found[-1] += " " + line.strip()
        else:
            found.append(line)
    return found


def named(module: ModuleType) -> set[str]:
    """The rules ``module``'s map lists by names of its own (not ``see``)."""
    matches = [ITEM.fullmatch(item) for item in items(module.__doc__ or "")]
    return {i for m in matches if m and m["names"] for i in m["ids"].split(", ")}


def defined(module: ModuleType, dotted: str) -> bool:
    """Whether ``dotted`` is an attribute of ``module`` that it defines rather than imports."""
    first, *rest = dotted.split(".")
    try:
        functools.reduce(getattr, rest, getattr(module, first))
    except AttributeError:
        return False
    return getattr(getattr(module, first), "__module__", module.__name__) == module.__name__


def cited(source: str) -> set[str]:
    """Every rule id ``source`` mentions, ranges spelled out."""
    ids = set()
    for match in CITATION.finditer(source):
        numbers = [int(match[2])]
        for sep, number in STEP.findall(match[3]):
            ranged = sep.strip() in ("to", "..")
            numbers += range(numbers[-1] + 1, int(number) + 1) if ranged else [int(number)]
        ids |= {f"{match[1]}-{n}" for n in numbers}
    return ids


def problems(module: ModuleType) -> list[str]:
    """What is wrong with ``module``'s map, one finding a line."""
    found, mapped = [], set()
    entries = items(module.__doc__ or "")
    if not entries and not module.__file__.endswith("__init__.py"):
        found.append(f"no '{HEADING}' list")
    for entry in entries:
        match = ITEM.fullmatch(entry)
        if match is None:
            found.append(f"not an item: {entry!r}")
            continue
        ids = match["ids"].split(", ")
        mapped |= set(ids)
        found += [f"{i} is not a rule of spec/" for i in ids if i not in SPEC_IDS]
        if match["module"]:
            there = named(importlib.import_module(match["module"]))
            found += [f"{i} is not in {match['module']}'s map" for i in ids if i not in there]
        else:
            names = re.findall(r"``([\w.]+)``", match["names"])
            found += [f"``{n}`` is not defined here" for n in names if not defined(module, n)]
    missing = sorted(cited(Path(module.__file__).read_text()) - mapped)
    if missing:
        found.append(f"cited but not in the map: {', '.join(missing)}")
    return found


@pytest.mark.parametrize("name", sorted(MODULES - UNMAPPED))
def test_the_docstring_maps_every_rule_the_module_cites_to_its_own_names(name):
    assert problems(importlib.import_module(name)) == []


def test_a_map_that_lies_is_caught(tmp_path):
    path = tmp_path / "planted.py"
    path.write_text(
        '"""Why.\n\nRules and where they live:\n\n'
        "- ST-VALID-99: ``check``\n"
        "- ST-VALID-1: ``missing``,\n  ``Path``\n"
        "- ST-VALID-2 ``check``\n"
        "- ST-VALID-5: see ``reference.chunks``\n"
        '"""\n\nfrom pathlib import Path\n\n\n'
        "def check():\n"
        '    raise ValueError("[ST-VALID-3 to 5, ST-VALID-9] ...")\n'
    )
    spec = importlib.util.spec_from_file_location("planted", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert problems(module) == [
        "ST-VALID-99 is not a rule of spec/",
        "``missing`` is not defined here",
        "``Path`` is not defined here",
        "not an item: '- ST-VALID-2 ``check``'",
        "ST-VALID-5 is not in reference.chunks's map",
        "cited but not in the map: ST-VALID-2, ST-VALID-3, ST-VALID-4, ST-VALID-9",
    ]


def test_ranges_and_lists_of_rule_ids_are_spelled_out():
    source = "ERR-1..3; DT-API-6 .. DT-API-8, 14; (DT-MESH-1, -5); ST-VALID-6, 7 and 10/11"
    assert cited(source) == {
        *("ERR-1", "ERR-2", "ERR-3", "DT-API-6", "DT-API-7", "DT-API-8", "DT-API-14"),
        *("DT-MESH-1", "DT-MESH-5", "ST-VALID-6", "ST-VALID-7", "ST-VALID-10", "ST-VALID-11"),
    }
