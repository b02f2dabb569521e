"""Which tests run, and what their reports carry: a test once per world size and, a per-op test,
once per op of ``--ops``; each labelled with the rules it cites, its world size, its op and the
id that known-failures files name it by (``suite_id``)."""

from __future__ import annotations

import inspect

import pytest

from conformance import paths
from conformance.plugin.configure import chosen_ops, ops_option, world_sizes


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that asks for ``world`` runs once per world size of this run, unless it chooses
    its own sizes by taking a ``world_size`` argument; a ``per_op`` test runs once per op of
    ``--ops``."""
    own_arguments = inspect.signature(metafunc.function).parameters
    per_op = metafunc.definition.get_closest_marker("per_op")
    if per_op and "op" in own_arguments:
        ops = chosen_ops(metafunc.config)
        if "core" in per_op.kwargs and ops_option(metafunc.config) == "core":
            ops = per_op.kwargs["core"]()  # the test's own core list (the gradient test's)
        if "ops" in per_op.kwargs:  # the ops the test can run: those with an in-place variant
            runs = set(per_op.kwargs["ops"]())
            ops = [op for op in ops if op in runs]
        if not ops:  # one skipped item with its reason: an empty parameter set breaks xdist
            why = f"--ops {ops_option(metafunc.config)}: none of these ops is one this test runs"
            ops = [pytest.param(None, marks=pytest.mark.skip(reason=why), id="no-runnable-op")]
        metafunc.parametrize("op", ops)
    if "world" in metafunc.fixturenames and "world_size" not in own_arguments:
        sizes = world_sizes(metafunc.config)
        metafunc.parametrize("world_size", sizes, ids=[f"ws{n}" for n in sizes], scope="session")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _label_with_rules(items)


def _label_with_rules(items: list[pytest.Item]) -> None:
    """Carry each test's rule ids, world size and suite id on its reports (they travel from
    xdist workers)."""
    for item in items:
        cited = [rule for marker in item.iter_markers("rules") for rule in marker.args]
        if cited:
            callspec = getattr(item, "callspec", None)
            size = callspec.params.get("world_size", "any") if callspec else "any"
            item.user_properties += [("rules", ",".join(cited)), ("world_size", str(size))]
            item.user_properties.append(("suite_id", suite_id(item)))
            if item.get_closest_marker("per_op") and callspec and callspec.params.get("op"):
                item.user_properties.append(("op", callspec.params["op"]))


def suite_id(item: pytest.Item) -> str:
    """The id a known-failures file names ``item`` by: its path from the folder that holds the
    ``conformance`` package (``conformance/suite/test_st_gather.py::test_gather[ws2]``), the same
    in a checkout, an installed wheel and whatever folder pytest took as its rootdir. A test
    outside that folder (a user's own) keeps its node id."""
    try:
        path = item.path.resolve().relative_to(paths.CHECKOUT)
    except ValueError:
        return item.nodeid
    _, sep, name = item.nodeid.partition("::")
    return path.as_posix() + sep + name
