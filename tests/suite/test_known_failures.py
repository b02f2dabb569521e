"""Known failures are kept per release of an implementation; a run picks the file for the release
it judges, or the nearest older one and says so."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import known_failures, paths
from conformance.known_failures import default_for, release_key

SHIPPED = sorted((paths.CHECKOUT / "conformance" / "xfails" / "torch").glob("*.txt"))


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    for release in ("2.12.1", "2.13.0", "2.9.0"):
        (tmp_path / "impl").mkdir(exist_ok=True)
        (tmp_path / "impl" / f"{release}.txt").write_text("")
    return tmp_path


@pytest.mark.parametrize(
    ("release", "key"),
    [
        ("2.13.0", (2, 13, 0)),
        ("2.13.0+cpu", (2, 13, 0)),
        ("2.11.0+cu130", (2, 11, 0)),
        ("2.15.0.dev20261101+cpu", (2, 15, 0)),
        ("2.15.0a0+git1234abc", (2, 15, 0)),
        ("3", (3,)),
    ],
)
def test_a_release_is_compared_by_its_numbers_alone(release, key):
    assert release_key(release) == key


def test_a_release_that_is_no_version_is_refused():
    with pytest.raises(ValueError, match="does not start with a version number"):
        release_key("nightly")


def test_the_file_of_the_installed_release_is_chosen_whatever_its_build(shipped):
    choice = default_for("impl", "2.12.1+cu130", shipped)
    assert choice.path == shipped / "impl" / "2.12.1.txt"
    assert choice.note == "for impl 2.12.1+cu130"


def test_releases_sort_by_number_not_by_text(shipped):
    # "2.9.0" sorts after "2.13.0" as text; as a release it is older.
    assert default_for("impl", "2.10.0", shipped).path == shipped / "impl" / "2.9.0.txt"


def test_a_release_without_a_file_uses_the_nearest_older_and_says_so(shipped):
    choice = default_for("impl", "2.14.1", shipped)
    assert choice.path == shipped / "impl" / "2.13.0.txt"
    assert "2.14.1 has no file of its own: using 2.13.0's, the nearest older" in choice.note
    assert "new failures and unexpected passes" in choice.note


def test_a_patch_release_without_a_file_uses_its_minor_releases_file_before_an_older_one(shipped):
    """Patches of one minor release that behave alike share a file named for the latest."""
    choice = default_for("impl", "2.12.0+cu128", shipped)
    assert choice.path == shipped / "impl" / "2.12.1.txt"
    assert choice.borrowed
    assert "2.12.0+cu128 has no file of its own: using 2.12.1's, its minor release's" in choice.note


def test_a_release_older_than_every_file_uses_the_oldest_and_says_so(shipped):
    choice = default_for("impl", "2.8.0", shipped)
    assert choice.path == shipped / "impl" / "2.9.0.txt"
    assert "older than every file" in choice.note


def test_an_adapter_without_files_or_given_by_module_has_none(shipped):
    assert default_for("other", "1.0", shipped).path is None
    assert default_for("pkg.mod:ADAPTER", "2.13.0", shipped).path is None


def test_an_adapter_with_files_must_say_its_release(shipped):
    with pytest.raises(ValueError, match="no 'release'"):
        default_for("impl", None, shipped)


def test_every_shipped_file_is_named_for_a_release_and_parses():
    files = sorted(known_failures.FOLDER.glob("*/*.txt"))
    assert files, "no known-failures file is shipped"
    for path in files:
        release_key(path.stem)
        assert known_failures.parse(path), path


INNER_ADAPTER = """
class Adapter:
    name = "fake"
    release = "9.1.0+cpu"
    capabilities = frozenset()

ADAPTER = Adapter()
"""

INNER_CONFTEST = """
from pathlib import Path
from conformance import adapters, known_failures

adapters.REGISTRY["fake"] = "inner_adapter:ADAPTER"
known_failures.FOLDER = Path(__file__).parent / "xfails"
"""

INNER_TESTS = """
import pytest
from conformance import judge, symptoms

@pytest.mark.rules("ST-SPEC-1")
def test_fixed_in_this_release():
    pass

@pytest.mark.rules("ST-SPEC-2")
def test_still_broken():
    judge.fail("still broken", "ST-SPEC-2", symptoms.WRONG_VALUE)

@pytest.mark.rules("ST-SPEC-3")
def test_newly_broken():
    judge.fail("newly broken", "ST-SPEC-3", symptoms.WRONG_VALUE)
"""


def test_a_release_without_its_own_file_runs_with_the_older_one_and_reports_the_difference(
    pytester,
):
    pytester.makepyfile(
        inner_adapter=INNER_ADAPTER, conftest=INNER_CONFTEST, test_inner=INNER_TESTS
    )
    pytester.mkdir("xfails")
    pytester.mkdir("xfails/fake")
    pytester.path.joinpath("xfails/fake/9.0.0.txt").write_text(
        "test_inner.py::test_fixed_in_this_release  # broken in 9.0.0\n"
        "    whole test\n    ST-SPEC-1: wrong value\n"
        "test_inner.py::test_still_broken  # broken in 9.0.0\n"
        "    ST-SPEC-2: wrong value\n"
    )
    result = pytester.runpytest_subprocess("-p", "conformance.plugin", "--impl", "fake")
    result.assert_outcomes(failed=2, xfailed=1)  # the strict xpass fails, the new failure fails
    result.stdout.fnmatch_lines(
        [
            "shardspec implementation: fake 9.1.0+cpu",
            "shardspec known failures: *xfails/fake/9.0.0.txt (fake 9.1.0+cpu has no file of its"
            " own: using 9.0.0's, the nearest older release*",
            "*9.0.0.txt is another release's known failures (see the header). Against it this"
            " release has 1 failing rules, 1 unexpected passes and 0 rule entries not met*",
        ]
    )


def test_an_entry_for_an_op_the_run_did_not_choose_is_not_stale(tmp_path):
    file = "conformance/suite/test_dt_ops.py"
    per_op = f"{file}::test_an_op_on_dtensors_gives_the_single_device_result"
    path = tmp_path / "xfails.txt"
    path.write_text(f"# item of a partial\n{per_op}[item]\n    DT-OP-4: wrong value\n")
    (entry,) = known_failures.parse(path)
    assert not known_failures.stale(entry, {file}, other_ops=frozenset({per_op}))
    assert known_failures.stale(entry, {file})  # every op ran, and none was item: stale


def per_op_tests() -> set[str]:
    """The suite's tests run once per op (``@pytest.mark.per_op``), by suite id."""
    found = set()
    for path in sorted((paths.CHECKOUT / "conformance" / "suite").glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any(
                "per_op" in ast.unparse(d) for d in node.decorator_list
            ):
                found.add(f"conformance/suite/{path.name}::{node.name}")
    return found


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_an_entry_for_every_op_of_a_per_op_test_lists_no_rule_of_an_ops_own(path):
    """An op's cell in the per-op table is its own verdict: an entry naming every op of a test
    (no ``[op]``) is left out of it, so it may list only behaviours of no op (the order of a
    mesh's ranks, a layout's constructor) and their umbrella rules; an op's behaviour, a rule
    of the operator or gradient chapter, is listed for each op that shows it."""
    tests = per_op_tests()
    assert (
        "conformance/suite/test_dt_ops.py::test_an_op_on_dtensors_gives_the_single_device_result"
        in tests
    )
    own = [
        f"{path.name}:{entry.line}: {entry.test_id.split('::')[1]}: {rule}"
        for entry in known_failures.parse(path) if entry.test_id in tests
        for rule in entry.rules if rule.startswith(("DT-OP-", "DT-GRAD-"))
    ]  # fmt: skip
    assert own == []


FORK_ADAPTER = '''
from pathlib import Path

from conformance.adapters.pytorch import PyTorchAdapter
from conformance.known_failures import shipped


class Fork(PyTorchAdapter):
    """PyTorch with one bug more: an EnumerableShardingSpec keeps its shards in reverse."""

    known_failures = (shipped("torch"), Path(__file__).parent / "fork-xfails")

    def st_enumerable_spec(self, shards):
        return super().st_enumerable_spec(list(reversed(shards)))


ADAPTER = Fork()
'''

FORK_ENTRY = """\
# ST-SPEC-12: the fork keeps an EnumerableShardingSpec's shards in reverse
conformance/suite/test_st_sharding_spec.py::test_enumerable_spec_builds_exactly_the_tilings_in_the_given_order
    ST-SPEC-12: wrong value
"""


@pytest.mark.parametrize("lists_its_own", [True, False], ids=["with its file", "without it"])
def test_a_fork_gates_on_upstreams_known_failures_and_its_own(tmp_path, lists_its_own):
    """A fork of PyTorch that fails one rule more than upstream lists it in a file of its own,
    layered on shardspec's for the release: its gate is green, and red without that file."""
    import torch

    (tmp_path / "fork_adapter.py").write_text(FORK_ADAPTER)
    (tmp_path / "fork-xfails").mkdir()
    release = ".".join(map(str, release_key(torch.__version__)))
    own = tmp_path / "fork-xfails" / f"{release}.txt"
    if lists_its_own:
        own.write_text(FORK_ENTRY)
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "run", "--impl", "fork_adapter:ADAPTER",
         # ci: the same draws every run; quick's 20 new ones can miss the reversed order
         "--profile", "ci", "--world-sizes", "1",
         str(paths.CHECKOUT / "conformance/suite/test_st_sharding_spec.py"),
         "--", "-k", "enumerable_spec_builds", "-p", "no:cacheprovider"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == (0 if lists_its_own else 1), out[-3000:]
    shipped_file = f"conformance/xfails/torch/{release}.txt"
    header = next(line for line in out.splitlines() if "known failures:" in line)
    assert shipped_file in header
    assert (str(own) in header) is lists_its_own
    if not lists_its_own:
        assert "ST-SPEC-12" in out


def test_the_files_given_are_layered_on_the_shipped_ones_unless_told_not_to():
    torch_adapter = type("Adapter", (), {"release": "2.13.0+cpu"})()
    given = ["mine.txt", "more.txt"]
    chosen = [c.path for c in known_failures.layers("torch", torch_adapter, given)]
    assert chosen == [known_failures.FOLDER / "torch" / "2.13.0.txt", Path("mine.txt"),
                      Path("more.txt")]  # fmt: skip
    chosen = [c.path for c in known_failures.layers("torch", torch_adapter, given, False)]
    assert chosen == [Path("mine.txt"), Path("more.txt")]


def test_an_adapters_own_folders_stand_for_the_shipped_ones(shipped):
    fork = type("Adapter", (), {"release": "2.13.0", "known_failures": (shipped / "impl",)})()
    (choice,) = known_failures.layers("fork:ADAPTER", fork, [])
    assert choice.path == shipped / "impl" / "2.13.0.txt"
