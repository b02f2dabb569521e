"""Errors of the harness or the environment, told apart from an implementation's verdicts.

A suite that blames an implementation for a missing package or a world that cannot start gives
verdicts nobody can trust: with numpy missing, PyTorch's ShardedTensor raised ``Numpy is not
available`` on every rank and the suite counted it as a known failure. Such a run ends as an
*error* instead (exit code 3, ``error`` in the per-rule table), never as pass, fail or xfail.

What counts as the environment's fault, on any rank: an ``ImportError`` (a module the
implementation or the harness needs is missing or broken), the messages of known missing
run-time dependencies below, and a rank killed by ``SIGKILL``, which no code a case runs sends
(the kernel's out-of-memory killer does, or a person). Everything else an implementation raises,
and every other way a rank dies (a segfault, an abort, an exit), is its verdict.
"""

from __future__ import annotations

import signal

from conformance.world import unimplemented
from conformance.world.protocol import CaseResult, Died, Raised

EXIT_CODE = 3  # pytest's own codes: 0 passed, 1 failed, 2 interrupted, 4 usage error

# (exception class in the MRO, text in the message): raised by a library, not by the code under
# test, because a run-time dependency is missing.
_SIGNATURES = (
    ("ImportError", ""),  # ModuleNotFoundError too
    ("RuntimeError", "Numpy is not available"),  # torch's object collectives without numpy
)


class HarnessError(Exception):
    """The run cannot judge: the cause is the harness or the environment, not the implementation."""


def environment_fault(outcome: object) -> bool:
    if isinstance(outcome, Died):
        return outcome.exitcode == -signal.SIGKILL
    return isinstance(outcome, Raised) and any(
        outcome.is_a(cls) and text in outcome.message for cls, text in _SIGNATURES
    )


def check(result: CaseResult) -> CaseResult:
    """``result`` unchanged, or ``HarnessError`` if a rank failed for the environment's sake,
    or ``AdapterIncomplete`` if a rank reached a method the adapter has not written: neither is
    the implementation's verdict, so no check may read it as one."""
    faults = [o for o in result.outcomes if environment_fault(o)]
    if faults:
        why = "an environment error, not a verdict"
        if any(isinstance(o, Died) for o in faults):
            why += ": a rank was killed by SIGKILL, which no case sends (out of memory?)"
        raise HarnessError(result.report(why))
    methods = result.unimplemented()
    if methods:
        raise unimplemented.AdapterIncomplete(methods, result.replay_command())
    return result


def missing_driver_dependency() -> str | None:
    """What the driver lacks to run any case, before the first world starts."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return (
            "numpy is not installed: torch.distributed's object collectives, which "
            "implementations call, need it (pip install numpy)"
        )
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        return (
            "jsonschema is not installed: the suite checks fixtures and saved regressions "
            "against their schemas (pip install jsonschema, or reinstall shardspec)"
        )
    return None
