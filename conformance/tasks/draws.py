"""The rank task of spec/dt-random.md: a random call on a DTensor, made as a training script
makes it (after ``torch.manual_seed`` on every rank), twice, and what each rank holds."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from conformance import adapters
from conformance.tasks import codec
from conformance.tasks.codec import contiguous_stride
from conformance.tasks.dtensor import mesh
from conformance.world import RankContext

FACTORIES = ("rand", "randn")
# The callables an adapter's ``dt_op`` gets for the calls that are not factories.
FUNCTIONS = {
    "uniform_": torch.Tensor.uniform_,
    "normal_": torch.Tensor.normal_,
    "bernoulli_": torch.Tensor.bernoulli_,
    "dropout": F.dropout,
    "rand_like": torch.rand_like,
    "randn_like": torch.randn_like,
}


def draw(
    ctx: RankContext,
    impl: str,
    call: str,
    params: list[float],
    shape: list[int],
    dtype: str,
    mesh_shape: list[int],
    mesh_ranks: list[int],
    placements: list[str],
    seed: int,
    input_seed: int,
) -> dict[str, Any]:
    """``call`` after ``torch.manual_seed(seed)``: a factory of ``placements``, or an op on a
    DTensor of ``placements`` (built by ``from_local`` of this rank's part of the seeded
    ``input_value``). Then a plain ``torch.rand(8)`` on the rank's device. Then, after other
    draws (plain, and the same call unseeded), the seed and the call again. Reports the first
    result's metadata, local tensor and device, whether an in-place call returned its DTensor,
    the plain draw, the second result's local tensor, and the input's local tensor after
    both calls."""
    adapter = adapters.load(impl)
    device_mesh = mesh(ctx, impl, mesh_shape, mesh_ranks)
    x = None
    if call not in FACTORIES:
        with codec.building():
            value = codec.random_input(shape, dtype, input_seed)
            local = codec.op_input(ctx.rank, value, mesh_shape, mesh_ranks, placements,
                                   input_seed).to(ctx.device)  # fmt: skip
            x = adapter.dt_from_local(local, device_mesh, placements, False, shape,
                                      contiguous_stride(shape))  # fmt: skip

    def make() -> Any:
        if x is None:
            kind = getattr(torch, dtype)
            return adapter.dt_factory(call, shape, device_mesh, placements, None, kind, False)
        return adapter.dt_op(FUNCTIONS[call], [x, *params], {})

    torch.manual_seed(seed)
    first = make()
    local = adapter.dt_to_local(first)
    report = {
        "describe": adapter.dt_describe(first),
        "local": local.detach().clone(),
        "device": local.device.type,
        "returned_self": first is x,
        "after": torch.rand(8, device=ctx.device),
    }
    torch.rand(7, device=ctx.device)
    make()
    torch.manual_seed(seed)
    report["again"] = adapter.dt_to_local(make()).detach().clone()
    if x is not None:
        report["input_local"] = adapter.dt_to_local(x).detach().clone()
    return report
