"""Which ops of the catalogue PyTorch's DTensor claims: those it has a way to run.

DTensor runs an aten op on DTensors when its sharding propagator holds a strategy or a rule for
it, when a custom handler or a random-op path takes it, or when it can decompose the op into ops
that have one (``DecompShardingStrategy``). An op of the catalogue is claimed when, on one of
its samples at least, every aten op it dispatches with a tensor argument is such an op: its other
samples are judged too, and a refusal there must be DT-OP-7's ``NotImplementedError``. The aten
ops a sample dispatches are read by running it on plain tensors under a dispatch mode, the level
at which DTensor sees them.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from conformance.ops import catalogue


class _Dispatched(TorchDispatchMode):
    """Collects the aten ops called with a tensor argument (a factory with none never meets a
    DTensor)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[Any] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if any(isinstance(x, torch.Tensor) for x in pytree.tree_leaves((args, kwargs))):
            self.ops.add(func)
        return func(*args, **kwargs)


def _runnable() -> Any:
    """A predicate: whether DTensor has a way to run an aten op, in the installed release."""
    from torch.distributed.tensor import DTensor

    dispatcher = DTensor._op_dispatcher
    propagator = dispatcher.sharding_propagator
    known: set[Any] = set()
    for name in ("op_strategy_funcs", "op_single_dim_strategy_funcs", "op_to_rules"):
        known.update(getattr(propagator, name, {}))
    known.update(getattr(dispatcher, "_custom_op_handlers", {}))
    known.update(getattr(dispatcher, "_random_ops", ()))
    try:
        from torch.distributed.tensor._decompositions import DecompShardingStrategy
    except ImportError:
        return known.__contains__
    return lambda op: op in known or DecompShardingStrategy.has_decomp(op)


@functools.cache
def claimed(op: str) -> bool:
    runnable = _runnable()
    for dtype in catalogue.dtypes(op):
        for sample in catalogue.samples(op, dtype):
            seen = _Dispatched()
            with seen:
                catalogue.call(op, sample)
            if all(runnable(aten) for aten in seen.ops):
                return True
    return False


class Unclaimed:
    """The torch adapter's ``unclaimed_ops``: ``op in`` it asks whether DTensor has no way to run
    the op (``claimed``), op by op as the tests ask, since reading every op's aten calls takes a
    minute."""

    def __contains__(self, op: object) -> bool:
        return isinstance(op, str) and catalogue.known(op) and not claimed(op)
