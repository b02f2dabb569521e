"""DTensor and DeviceMesh in direct code, next to spec/dt-*.md and spec/interop.md.

One module per job: ``placements`` (what a placement is), ``layout`` (what each coordinate
holds, pure), ``mesh`` (ranks in a grid and their groups), ``verdict`` (one outcome on every
rank), ``collectives`` (data movement along one mesh dim, in coordinate order), ``redistribute``
(transition plans), ``autograd`` (gradients back through them), ``dtensor`` (the user-facing
API), ``factories`` (DTensors made from a shape), ``random`` (random draws), ``ops``
(operators on DTensors), ``interop`` (ShardedTensor boxes), ``draw`` (a picture of a layout).

Each module's docstring lists the rules it implements and where they live.
"""

from reference.dtensor.dtensor import DTensor, distribute_tensor
from reference.dtensor.factories import empty, full, ones, zeros
from reference.dtensor.layout import local_shape_and_offset
from reference.dtensor.mesh import DeviceMesh
from reference.dtensor.placements import Partial, Placement, Replicate, Shard, StridedShard
from reference.dtensor.random import rand, randn

__all__ = [
    "DTensor",
    "DeviceMesh",
    "Partial",
    "Placement",
    "Replicate",
    "Shard",
    "StridedShard",
    "distribute_tensor",
    "empty",
    "full",
    "local_shape_and_offset",
    "ones",
    "rand",
    "randn",
    "zeros",
]
