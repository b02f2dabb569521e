"""Adapters: each maps the suite's vocabulary onto one implementation (see ``contract``)."""

from __future__ import annotations

import importlib
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
    return obj
