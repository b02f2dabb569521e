"""PyTorch's own implementation under the adapter contract.

``ShardedTensor`` from ``torch.distributed._shard`` and ``DTensor`` from
``torch.distributed.tensor``. Translation only: where PyTorch breaks a rule, the failure stays
visible and is listed, with its reason, in ``conformance/xfails/torch/<release>.txt``.

Every module is imported at the top, none on first use: the driver imports the adapter before it
forks its rank worlds, so ranks start with them loaded and no case pays for an import (that of
``torch.distributed.checkpoint`` takes seconds on a busy machine, past a short case timeout; so
does that of ``torch._dynamo``, which DeviceMesh sub-meshes and DTensor load lazily).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch
import torch._dynamo  # DeviceMesh and DTensor import it on first use, which takes seconds
import torch.distributed as dist
from torch.distributed import tensor as torch_dtensor
from torch.distributed._shard import sharded_tensor as sharded
from torch.distributed._shard.api import _shard_tensor
from torch.distributed._shard.metadata import ShardMetadata
from torch.distributed._shard.sharded_tensor import Shard as TorchShard
from torch.distributed._shard.sharded_tensor import ShardedTensor, init_from_local_shards, metadata
from torch.distributed._shard.sharded_tensor.metadata import TensorProperties
from torch.distributed._shard.sharding_spec import (
    ChunkShardingSpec,
    EnumerableShardingSpec,
)
from torch.distributed.checkpoint import DefaultSavePlanner
from torch.distributed.checkpoint._sharded_tensor_utils import _flatten_sharded_tensors
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.remote_device import _remote_device
from torch.distributed.tensor import DTensor, Partial, Placement, Replicate, distribute_tensor
from torch.distributed.tensor import Shard as DShard
from torch.distributed.tensor import _utils as dtensor_utils
from torch.distributed.tensor.placement_types import _StridedShard

from conformance import vocabulary
from conformance.adapters.pytorch_ops import Unclaimed
from conformance.vocabulary import ShardBox, properties_data, shard_box
from conformance.world.unimplemented import NotImplementedInAdapter

# What this release has, asked of it, never read off its version number: a release that lacks an
# argument or a helper does not claim the capability behind it (the contract's CAPABILITIES).
DISTRIBUTES_FROM_ANY_SOURCE = "src_data_rank" in inspect.signature(distribute_tensor).parameters
# 2.5 to 2.7 have only the public helper, which reads the coordinate off a mesh (``_MeshAt``).
_LOCAL_SHAPE_OF_COORDINATE = getattr(dtensor_utils, "_compute_local_shape_and_global_offset", None)


class _MeshAt:
    """The three things ``compute_local_shape_and_global_offset`` reads off a mesh (its
    ``ndim``, ``size(dim)`` and this rank's ``get_coordinate()``), for any shape and coordinate:
    the layout is a pure function of them, and no world is needed to ask it."""

    def __init__(self, shape: Sequence[int], coordinate: Sequence[int]) -> None:
        self.ndim = len(shape)
        self._shape = list(shape)
        self._coordinate = list(coordinate)

    def size(self, dim: int) -> int:
        return self._shape[dim]

    def get_coordinate(self) -> list[int]:
        return self._coordinate


def _local_shape_and_offset(global_shape, mesh_shape, coordinate, placements):
    if _LOCAL_SHAPE_OF_COORDINATE is not None:
        return _LOCAL_SHAPE_OF_COORDINATE(global_shape, mesh_shape, coordinate, placements)
    return dtensor_utils.compute_local_shape_and_global_offset(
        global_shape, _MeshAt(mesh_shape, coordinate), placements
    )


def _grad_placements(texts: Sequence[str] | None) -> dict[str, Any]:
    """``grad_placements=`` where given: a release without the argument still runs the calls
    that do not give it."""
    if texts is None:
        return {}
    return {"grad_placements": [_to_torch_placement(p) for p in texts]}


def _to_torch_placement(text: str) -> Placement:
    p = vocabulary.parse_placement(text)
    if isinstance(p, vocabulary.Replicate):
        return Replicate()
    if isinstance(p, vocabulary.Shard):
        return DShard(p.dim)
    if isinstance(p, vocabulary.Partial):
        return Partial(p.op)
    return _StridedShard(p.dim, split_factor=p.split_factor)


def _from_torch_placement(p: Placement) -> str:
    if isinstance(p, _StridedShard):
        return str(vocabulary.StridedShard(p.dim, p.split_factor))
    if isinstance(p, DShard):
        return str(vocabulary.Shard(p.dim))
    if isinstance(p, Partial):
        return str(vocabulary.Partial(p.reduce_op))
    return str(vocabulary.Replicate())


def _to_metadata(s: ShardBox) -> ShardMetadata:
    return ShardMetadata(list(s["offsets"]), list(s["sizes"]), s["placement"])


def _from_metadata(m: ShardMetadata) -> ShardBox:
    return shard_box(m.shard_offsets, m.shard_sizes, str(m.placement))


class PyTorchAdapter:
    name = "torch"
    release = torch.__version__  # picks conformance/xfails/torch/<release>.txt
    capabilities = frozenset(
        {
            *(["distribute_source"] if DISTRIBUTES_FROM_ANY_SOURCE else []),
            "sharded_tensor",
            "sharded_tensor_ops",
            "dtensor",
            "partial:sum",
            "partial:avg",
            "partial:max",
            "partial:min",
            "strided_shard",
            "sub_groups",
            "mesh_flatten",
            "cuda",
            "dtensor_factories",
            "dtensor_ops",
            "dtensor_grad",
            "dtensor_random",
            "interop_checkpoint",
        }
    )
    # Every op DTensor has a strategy, rule, handler or decomposition for (pytorch_ops.claimed).
    unclaimed_ops = Unclaimed()

    # -- ShardedTensor ------------------------------------------------------------------------

    def st_chunk_metadata(
        self, global_shape: Sequence[int], dim: int, placements: Sequence[str]
    ) -> list[ShardBox]:
        spec = ChunkShardingSpec(dim=dim, placements=list(placements))
        built = spec.build_metadata(torch.Size(global_shape), TensorProperties(dtype=torch.float32))
        return [_from_metadata(m) for m in built.shards_metadata]

    def st_validate(self, shards: Sequence[ShardBox], global_shape: Sequence[int]) -> None:
        # The public path that validates a whole layout: EnumerableShardingSpec checks the boxes
        # (ndim, overlaps) and build_metadata checks them against the size.
        spec = EnumerableShardingSpec([_to_metadata(s) for s in shards])
        spec.build_metadata(torch.Size(global_shape), TensorProperties())

    def st_shard(self, tensor, dim, placements, src_rank, group) -> ShardedTensor:
        return self.st_shard_by_spec(
            tensor, self.st_chunk_spec(dim, list(placements)), src_rank, group
        )

    def st_local_shards(self, st: ShardedTensor) -> list[tuple[torch.Tensor, ShardBox]]:
        return [(s.tensor, _from_metadata(s.metadata)) for s in st.local_shards()]

    def st_describe(self, st: ShardedTensor) -> dict[str, Any]:
        metadata = st.metadata()
        return {
            "size": list(metadata.size),
            "properties": properties_data(metadata.tensor_properties),
            "shards": [_from_metadata(m) for m in metadata.shards_metadata],
        }

    def st_gather(self, st: ShardedTensor, dst: int, out: torch.Tensor | None) -> None:
        st.gather(dst=dst, out=out)

    def st_reshard(self, st: ShardedTensor, dim: int, placements: Sequence[str]) -> ShardedTensor:
        return st.reshard(self.st_chunk_spec(dim, list(placements)))

    def st_remote_device(self, text) -> _remote_device:
        return _remote_device(text)

    def st_shard_metadata(self, offsets, sizes, placement) -> ShardMetadata:
        return ShardMetadata(offsets, sizes, placement)

    def st_tensor_properties(self, **fields) -> TensorProperties:
        return TensorProperties(**fields)

    def st_memory_format_encoding(self) -> type:
        return metadata.MEM_FORMAT_ENCODING

    def st_sharded_tensor_metadata(self, *args) -> metadata.ShardedTensorMetadata:
        return metadata.ShardedTensorMetadata(*args)

    def st_chunk_spec(self, dim, placements) -> ChunkShardingSpec:
        return ChunkShardingSpec(dim, placements)

    def st_enumerable_spec(self, shards) -> EnumerableShardingSpec:
        return EnumerableShardingSpec(shards)

    def st_local_shard(self, tensor, metadata) -> TorchShard:
        return TorchShard(tensor, metadata)

    def st_create(self, fill, spec, *args, **options) -> ShardedTensor:
        return getattr(sharded, fill)(spec, *args, **options)

    def st_shard_by_spec(self, tensor, spec, src_rank, group) -> ShardedTensor:
        return _shard_tensor(tensor, spec, src_rank=src_rank, process_group=group)

    def st_init_from_local_shards(self, shards, *size, group) -> ShardedTensor:
        return init_from_local_shards(shards, *size, process_group=group)

    def st_init_from_global_metadata(self, shards, metadata, group) -> ShardedTensor:
        return ShardedTensor._init_from_local_shards_and_global_metadata(
            shards, metadata, process_group=group
        )

    def st_nest(self, shards, metadata, group) -> ShardedTensor:
        return self.st_init_from_global_metadata(shards, metadata, group)

    def st_group_ranks(self, t) -> list[int]:
        return dist.get_process_group_ranks(t._process_group)

    def st_op(self, fn, args, kwargs) -> Any:
        return fn(*args, **kwargs)

    def st_flatten(self, state_dict):
        return _flatten_sharded_tensors(state_dict)

    # -- DTensor ------------------------------------------------------------------------------

    def dt_mesh(self, device_type, shape, ranks, names) -> DeviceMesh:
        mesh = torch.tensor(list(ranks), dtype=torch.int).reshape(list(shape))
        names = None if names is None else tuple(names)
        return DeviceMesh(device_type, mesh, mesh_dim_names=names)

    def dt_local_shape_and_offset(self, global_shape, mesh_shape, placements, coordinate):
        # This private helper expects the Shard dims already normalised, as DTensor's public
        # entry points do before calling it; so normalise here, as they would.
        ndim = len(global_shape)
        normalised = [
            DShard(p.dim % ndim) if type(p) is DShard else p
            for p in map(_to_torch_placement, placements)
        ]
        shape, offset = _local_shape_and_offset(
            list(global_shape), list(mesh_shape), list(coordinate), normalised
        )
        return list(shape), list(offset)

    def dt_distribute(self, tensor, mesh, placements, src_data_rank) -> DTensor:
        torch_placements = [_to_torch_placement(p) for p in placements]
        if DISTRIBUTES_FROM_ANY_SOURCE:
            return distribute_tensor(tensor, mesh, torch_placements, src_data_rank=src_data_rank)
        # Without the argument, the data of the mesh's first rank is distributed: the only source
        # the suite asks for where ``distribute_source`` is not claimed.
        if src_data_rank != mesh.mesh.flatten()[0].item():
            raise NotImplementedInAdapter(
                f"torch {torch.__version__}'s distribute_tensor has no src_data_rank"
            )
        return distribute_tensor(tensor, mesh, torch_placements)

    def dt_from_local(
        self, local, mesh, placements, run_check, shape, stride, grad_placements=None
    ) -> DTensor:
        return DTensor.from_local(
            local,
            mesh,
            [_to_torch_placement(p) for p in placements],
            run_check=run_check,
            shape=torch.Size(shape) if shape is not None else None,
            stride=tuple(stride) if stride is not None else None,
            **_grad_placements(grad_placements),
        )

    def dt_to_local(self, dt: DTensor, grad_placements=None) -> torch.Tensor:
        return dt.to_local(**_grad_placements(grad_placements))

    def dt_full_tensor(self, dt: DTensor, grad_placements=None) -> torch.Tensor:
        return dt.full_tensor(**_grad_placements(grad_placements))

    def dt_grad(self, dt: DTensor) -> DTensor | None:
        return dt.grad

    def dt_redistribute(
        self, dt: DTensor, placements: Sequence[str] | None, device_mesh: Any = None
    ) -> DTensor:
        targets = None if placements is None else [_to_torch_placement(p) for p in placements]
        mesh = dt.device_mesh if device_mesh is None else device_mesh
        return dt.redistribute(mesh, targets)

    def dt_describe(self, dt: DTensor) -> dict[str, Any]:
        return {
            "shape": list(dt.shape),
            "stride": list(dt.stride()),
            "dtype": str(dt.dtype).removeprefix("torch."),
            "placements": [_from_torch_placement(p) for p in dt.placements],
        }

    def dt_mesh_describe(self, mesh: DeviceMesh) -> dict[str, Any]:
        coordinate = mesh.get_coordinate()
        names = mesh.mesh_dim_names
        return {
            "mesh": mesh.mesh.tolist(),
            "ndim": mesh.ndim,
            "size": mesh.size(),
            "sizes": [mesh.size(i) for i in range(mesh.ndim)],
            "coordinate": None if coordinate is None else list(coordinate),
            "names": None if names is None else list(names),
        }

    def dt_mesh_group(self, mesh: DeviceMesh, dim: int) -> tuple[list[int], int]:
        return dist.get_process_group_ranks(mesh.get_group(dim)), mesh.get_local_rank(dim)

    def dt_mesh_named(self, mesh: DeviceMesh, name: str) -> Any:
        return mesh[name].mesh.tolist()

    def dt_mesh_coordinate(self, mesh: DeviceMesh) -> list[int] | None:
        coordinate = mesh.get_coordinate()
        return None if coordinate is None else list(coordinate)

    def dt_mesh_flatten(self, mesh: DeviceMesh, names, name) -> DeviceMesh:
        return (mesh if names is None else mesh[tuple(names)])._flatten(name)

    def dt_placement(self, kind: str, *args: Any) -> Placement:
        kinds = {"Shard": DShard, "Replicate": Replicate, "Partial": Partial}
        if kind == "_StridedShard":
            return _StridedShard(args[0], split_factor=args[1])
        return kinds[kind](*args)

    def dt_op(self, fn, args, kwargs) -> Any:
        return fn(*args, **kwargs)

    def dt_factory(self, op, size, mesh, placements, fill_value, dtype, requires_grad):
        options: dict[str, Any] = {"device_mesh": mesh, "requires_grad": requires_grad}
        if placements is not None:
            options["placements"] = [_to_torch_placement(p) for p in placements]
        if dtype is not None:
            options["dtype"] = dtype
        if op == "full":
            return torch_dtensor.full(list(size), fill_value, **options)
        return getattr(torch_dtensor, op)(list(size), **options)

    def dt_checkpoint_plan(self, dt: DTensor) -> dict[str, Any]:
        # dcp.save's planning, through the public SavePlanner protocol: every rank plans its own
        # writes, the coordinator turns all the plans into the global plan (dropping replicas'
        # copies, then validating). dcp.save gathers the local plans to the coordinator and a
        # rank's planning error with them, then raises every error on every rank, wrapped in a
        # CheckpointException. Here every rank gets every plan and error and plans the global
        # step itself, so each sees the whole plan, or the first failing rank's own error.
        planner = DefaultSavePlanner()
        planner.set_up_planner({"t": dt}, is_coordinator=dist.get_rank() == 0)
        try:
            planned: tuple[Any, Exception | None] = (planner.create_local_plan(), None)
        except Exception as error:
            planned = (None, error)
        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, planned)
        if failures := [error for _, error in gathered if error is not None]:
            raise failures[0]
        plans = [plan for plan, _ in gathered]
        final, checkpoint = planner.create_global_plan(plans)
        device = dt.device_mesh.device_type
        stored = checkpoint.state_dict_metadata["t"]
        return {
            "boxes": [
                shard_box(
                    item.tensor_data.chunk.offsets,
                    item.tensor_data.chunk.sizes,
                    f"rank:{rank}/{device}",
                )
                for rank, plan in enumerate(final)
                for item in plan.items
            ],
            "size": list(stored.size),
            "dtype": str(stored.properties.dtype).removeprefix("torch."),
        }

    def dt_to_sharded_metadata(
        self, global_shape, dtype, mesh_shape, mesh_ranks, placements, device_type
    ) -> list[ShardBox]:
        raise NotImplementedError(
            "PyTorch 2.13 has no pure to_sharded_metadata; its checkpoint planner is"
            " dt_checkpoint_plan (spec/interop.md)"
        )


ADAPTER = PyTorchAdapter()
