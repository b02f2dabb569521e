"""Adapters: each maps the suite's vocabulary onto one implementation (see ``contract``)."""

from __future__ import annotations

import importlib
import types
from functools import cache
from typing import Any

REGISTRY = {
    "reference": "conformance.adapters.reference:ADAPTER",
    "torch": "conformance.adapters.pytorch:ADAPTER",
}


@cache
def load(spec: str) -> Any:
    """The adapter named ``spec``: a key of ``REGISTRY`` or ``"module:attr"``.

    Cached, so ranks that run many cases import and build it once.
    """
    if ":" not in spec:
        if spec not in REGISTRY:
            raise ValueError(
                f"{spec!r} is neither a registered adapter {sorted(REGISTRY)} nor 'module:attr'"
            )
        spec = REGISTRY[spec]
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{spec!r} cannot be loaded: {exc}") from exc
    _check_is_adapter(spec, obj)
    return obj


def user_modules(spec: str) -> tuple[str, ...]:
    """The module of a user's adapter (``"mypkg.adapter:ADAPTER"``), which every rank imports
    before its group starts, so that it may register the backend the run names; none for
    shardspec's own adapters."""
    return (spec.partition(":")[0],) if ":" in spec else ()


def _check_is_adapter(spec: str, obj: Any) -> None:
    """An adapter is an instance (``ADAPTER = MyAdapter()``) with a ``name`` and its
    ``capabilities`` (``contract.Adapter``). A class, a module or a function in its place would
    otherwise fail every test, blamed on the implementation."""
    if isinstance(obj, type):
        found = f"the class {obj.__name__}"
    elif isinstance(obj, types.ModuleType):
        found = f"the module {obj.__name__}"
    elif isinstance(obj, types.FunctionType | types.BuiltinFunctionType | types.MethodType):
        found = f"the function {obj.__name__}"
    elif not isinstance(getattr(obj, "name", None), str):
        found = f"a {type(obj).__name__} without a 'name'"
    elif not isinstance(getattr(obj, "capabilities", None), frozenset | set):
        found = f"a {type(obj).__name__} without 'capabilities' (a frozenset)"
    else:
        return
    raise ValueError(
        f"{spec!r} is {found}, not an adapter instance: give 'module:attr' of an object with a "
        "name and capabilities, e.g. ADAPTER = MyAdapter() (conformance/adapters/README.md)"
    )
