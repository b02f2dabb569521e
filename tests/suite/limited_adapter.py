"""The reference behind adapters that have written only some methods: the table of the methods
each capability needs (``contract.METHODS``) is true when an adapter with just those passes, and
a method not written is *not implemented* however the suite reaches it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from conformance.adapters import contract
from conformance.adapters.reference import ReferenceAdapter
from conformance.world.unimplemented import NotImplementedInAdapter

# What the reference claims that brings no method of its own (contract.METHODS): inputs the
# families' methods take, and how its messages read.
INPUTS = frozenset(
    {"partial:sum", "partial:avg", "partial:max", "partial:min", "partial:product"}
    | {"strided_shard", "sub_groups", "rule_ids_in_messages"}
)


def limited(claims: Iterable[str], written: Iterable[str] | None = None) -> Any:
    """The reference claiming ``claims``, with only ``written`` of the contract's methods
    (default: those the table lists for ``claims``); every other method is unwritten."""
    claims = frozenset(claims)
    written = set(contract.methods_for(claims) if written is None else written)

    def unwritten(name: str) -> Any:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedInAdapter(name, "not written in this adapter")

        return method

    declared = {m for methods in contract.METHODS.values() for m in methods}
    body = {name: unwritten(name) for name in declared - written}
    body |= {"name": "reference", "capabilities": claims}
    return type("LimitedReference", (ReferenceAdapter,), body)()


SHARDED_TENSOR = limited({"sharded_tensor", *INPUTS})
DTENSOR = limited({"dtensor", "mesh_flatten", "interop", "dtensor_factories", *INPUTS})
DTENSOR_OPS_AND_GRAD = limited({"dtensor", "dtensor_ops", "dtensor_grad", *INPUTS})
# Every capability claimed and every method written but dt_op: a random sequence judged step by
# step (conformance.tasks.draws) turns a raise into data, and must still say "not implemented".
ALL_BUT_DT_OP = limited(
    ReferenceAdapter.capabilities,
    [m for m in contract.methods_for(ReferenceAdapter.capabilities) if m != "dt_op"],
)
