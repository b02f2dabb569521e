"""A method the adapter has not written yet, told apart from the implementation's refusal.

A skeleton's method (``python -m conformance adapter skeleton``) raises
``NotImplementedInAdapter``, a ``NotImplementedError``. But ``NotImplementedError`` is also an
implementation's allowed refusal (DT-OP-7, ST-OP-9), and some tasks turn an exception into data
(a random sequence judged step by step). So a rank notes every one raised during a case, whatever
the task did with it, and the case's outcome on that rank becomes that raise (``taken``, read by
``rank.execute``); the driver then ends the test as *not implemented* (``AdapterIncomplete``):
never a pass, and never a conformance failure of a rule, only a method still to write.
"""

from __future__ import annotations

import unittest
from collections.abc import Sequence

_RAISED: list[str] = []  # this process's, since the case began


class NotImplementedInAdapter(NotImplementedError):
    """Raised by an adapter method that is not written yet, with its contract line."""

    def __init__(self, method: str, contract: str = "") -> None:
        told = f": {contract}" if contract else ""
        super().__init__(f"{method} is not implemented in the adapter{told}")
        self.method = method
        _RAISED.append(method)


def taken() -> list[str]:
    """The methods that raised ``NotImplementedInAdapter`` here since the last call, once each."""
    methods = list(dict.fromkeys(_RAISED))
    _RAISED.clear()
    return methods


class AdapterIncomplete(unittest.SkipTest):
    """In the driver: a case reached methods the adapter has not written. A skip to Hypothesis,
    which stops at once instead of shrinking an example every example shares; the plugin reports
    the test as *not implemented* and the run fails (exit 1)."""

    def __init__(self, methods: Sequence[str], replay: str) -> None:
        super().__init__(f"not implemented in the adapter: {', '.join(methods)} [{replay}]")
        self.methods = tuple(methods)
