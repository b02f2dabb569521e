"""shardspec's own reference implementation under the adapter contract."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from conformance import vocabulary
from conformance.vocabulary import ShardBox, properties_data, shard_box
from reference import dtensor as dt
from reference import sharded_tensor as st
from reference.dtensor import ops as dt_ops
from reference.dtensor.interop import checkpoint_plan, to_sharded_metadata
from reference.verdict import group_of


def _placement(text: str) -> dt.Placement:
    p = vocabulary.parse_placement(text)
    if isinstance(p, vocabulary.Shard):
        return dt.Shard(p.dim)
    if isinstance(p, vocabulary.StridedShard):
        return dt.StridedShard(p.dim, p.split_factor)
    if isinstance(p, vocabulary.Partial):
        return dt.Partial(p.op)
    return dt.Replicate()


def _placements(texts: Sequence[str] | None) -> tuple[dt.Placement, ...] | None:
    return None if texts is None else tuple(map(_placement, texts))


def _to_metadata(s: ShardBox) -> st.ShardMetadata:
    return st.ShardMetadata(list(s["offsets"]), list(s["sizes"]), s["placement"])


def _from_metadata(m: st.ShardMetadata) -> ShardBox:
    return shard_box(list(m.shard_offsets), list(m.shard_sizes), str(m.placement))


class ReferenceAdapter:
    name = "reference"
    capabilities = frozenset(
        {
            "sharded_tensor",
            "sharded_tensor_ops",
            "dtensor",
            "rule_ids_in_messages",
            "partial:sum",
            "partial:avg",
            "partial:max",
            "partial:min",
            "partial:product",
            "strided_shard",
            "sub_groups",
            "mesh_flatten",
            "cuda",
            "distribute_source",
            "dtensor_factories",
            "dtensor_ops",
            "dtensor_grad",
            "dtensor_random",
            "dtensor_random_parity",
            "interop",
            "interop_checkpoint",
        }
    )

    # -- ShardedTensor ------------------------------------------------------------------------

    def st_chunk_metadata(self, global_shape, dim, placements) -> list[ShardBox]:
        spec = st.ChunkShardingSpec(dim, list(placements))
        built = spec.build_metadata(torch.Size(global_shape), st.TensorProperties())
        return [_from_metadata(m) for m in built.shards_metadata]

    def st_validate(self, shards, global_shape) -> None:
        metadata = [_to_metadata(s) for s in shards]
        st.check_layout(st.ShardedTensorMetadata(metadata, torch.Size(global_shape)))

    def st_shard(self, tensor, dim, placements, src_rank, group) -> st.ShardedTensor:
        return self.st_shard_by_spec(
            tensor, self.st_chunk_spec(dim, list(placements)), src_rank, group
        )

    def st_local_shards(self, t: st.ShardedTensor) -> list[tuple[torch.Tensor, ShardBox]]:
        return [(s.tensor, _from_metadata(s.metadata)) for s in t.local_shards()]

    def st_describe(self, t: st.ShardedTensor) -> dict[str, Any]:
        metadata = t.metadata()
        return {
            "size": list(metadata.size),
            "properties": properties_data(metadata.tensor_properties),
            "shards": [_from_metadata(m) for m in metadata.shards_metadata],
        }

    def st_gather(self, t: st.ShardedTensor, dst: int, out: torch.Tensor | None) -> None:
        t.gather(dst=dst, out=out)

    def st_reshard(self, t: st.ShardedTensor, dim, placements) -> st.ShardedTensor:
        return t.reshard(self.st_chunk_spec(dim, list(placements)))

    def st_remote_device(self, text):
        return st.Placement(text)

    def st_shard_metadata(self, offsets, sizes, placement) -> st.ShardMetadata:
        return st.ShardMetadata(offsets, sizes, placement)

    def st_tensor_properties(self, **fields) -> st.TensorProperties:
        return st.TensorProperties(**fields)

    def st_memory_format_encoding(self) -> type:
        return st.MEM_FORMAT_ENCODING

    def st_sharded_tensor_metadata(self, *args) -> st.ShardedTensorMetadata:
        return st.ShardedTensorMetadata(*args)

    def st_chunk_spec(self, dim, placements) -> st.ChunkShardingSpec:
        return st.ChunkShardingSpec(dim, placements)

    def st_enumerable_spec(self, shards) -> st.EnumerableShardingSpec:
        return st.EnumerableShardingSpec(shards)

    def st_local_shard(self, tensor, metadata) -> st.Shard:
        return st.Shard(tensor, metadata)

    def st_create(self, fill, spec, *args, **options) -> st.ShardedTensor:
        return getattr(st, fill)(spec, *args, **options)

    def st_shard_by_spec(self, tensor, spec, src_rank, group) -> st.ShardedTensor:
        return st.shard(tensor, spec, src_rank=src_rank, process_group=group)

    def st_init_from_local_shards(self, shards, *size, group) -> st.ShardedTensor:
        return st.init_from_local_shards(shards, *size, process_group=group)

    def st_init_from_global_metadata(self, shards, metadata, group) -> st.ShardedTensor:
        return st.init_from_local_shards_and_global_metadata(shards, metadata, process_group=group)

    def st_nest(self, shards, metadata, group) -> st.ShardedTensor:
        return st.ShardedTensor(metadata, list(shards), group_of(group))

    def st_group_ranks(self, t) -> list[int]:
        return dist.get_process_group_ranks(t.process_group)

    def st_op(self, fn, args, kwargs) -> Any:
        return fn(*args, **kwargs)

    def st_flatten(self, state_dict):
        return st.flatten_sharded_tensors(state_dict)

    # -- DTensor ------------------------------------------------------------------------------

    def dt_mesh(self, device_type, shape, ranks, names) -> dt.DeviceMesh:
        mesh = torch.tensor(list(ranks), dtype=torch.int64).reshape(list(shape))
        names = None if names is None else list(names)
        return dt.DeviceMesh(device_type, mesh, mesh_dim_names=names)

    def dt_local_shape_and_offset(self, global_shape, mesh_shape, placements, coordinate):
        shape, offset = dt.local_shape_and_offset(
            global_shape, mesh_shape, _placements(placements), coordinate
        )
        return list(shape), list(offset)

    def dt_distribute(self, tensor, mesh, placements, src_data_rank) -> dt.DTensor:
        return dt.distribute_tensor(
            tensor, mesh, _placements(placements), src_data_rank=src_data_rank
        )

    def dt_from_local(
        self, local, mesh, placements, run_check, shape, stride, grad_placements=None
    ) -> dt.DTensor:
        return dt.DTensor.from_local(
            local,
            mesh,
            _placements(placements),
            run_check=run_check,
            shape=shape,
            stride=stride,
            grad_placements=_placements(grad_placements),
        )

    def dt_to_local(self, d: dt.DTensor, grad_placements=None) -> torch.Tensor:
        return d.to_local(grad_placements=_placements(grad_placements))

    def dt_full_tensor(self, d: dt.DTensor, grad_placements=None) -> torch.Tensor:
        return d.full_tensor(grad_placements=_placements(grad_placements))

    def dt_grad(self, d: dt.DTensor) -> dt.DTensor | None:
        return d.grad

    def dt_redistribute(self, d: dt.DTensor, placements, device_mesh=None) -> dt.DTensor:
        mesh = d.device_mesh if device_mesh is None else device_mesh
        return d.redistribute(mesh, _placements(placements))

    def dt_describe(self, d: dt.DTensor) -> dict[str, Any]:
        return {
            "shape": list(d.shape),
            "stride": list(d.stride()),
            "dtype": str(d.dtype).removeprefix("torch."),
            "placements": [str(p) for p in d.placements],
        }

    def dt_mesh_describe(self, mesh: dt.DeviceMesh) -> dict[str, Any]:
        coordinate = mesh.get_coordinate()
        return {
            "mesh": mesh.mesh.tolist(),
            "ndim": mesh.ndim,
            "size": mesh.size(),
            "sizes": [mesh.size(i) for i in range(mesh.ndim)],
            "coordinate": None if coordinate is None else list(coordinate),
            "names": None if mesh.mesh_dim_names is None else list(mesh.mesh_dim_names),
        }

    def dt_mesh_group(self, mesh: dt.DeviceMesh, dim: int) -> tuple[list[int], int]:
        return list(mesh.members(dim)), mesh.get_local_rank(dim)

    def dt_mesh_named(self, mesh: dt.DeviceMesh, name: str) -> Any:
        return mesh[name].mesh.tolist()

    def dt_mesh_coordinate(self, mesh: dt.DeviceMesh) -> list[int] | None:
        coordinate = mesh.get_coordinate()
        return None if coordinate is None else list(coordinate)

    def dt_mesh_flatten(self, mesh: dt.DeviceMesh, names, name) -> dt.DeviceMesh:
        return mesh.flatten(names, name)

    def dt_op(self, fn, args, kwargs) -> Any:
        return dt_ops.call(fn, *args, **kwargs)

    def dt_factory(self, op, size, mesh, placements, fill_value, dtype, requires_grad):
        options = {"device_mesh": mesh, "placements": _placements(placements), "dtype": dtype,
                   "requires_grad": requires_grad}  # fmt: skip
        if op == "full":
            return dt.full(size, fill_value, **options)
        return getattr(dt, op)(size, **options)

    def dt_placement(self, kind: str, *args: Any) -> Any:
        kinds = {"Shard": dt.Shard, "_StridedShard": dt.StridedShard,
                 "Replicate": dt.Replicate, "Partial": dt.Partial}  # fmt: skip
        return kinds[kind](*args)

    def dt_to_sharded_metadata(
        self, global_shape, dtype, mesh_shape, mesh_ranks, placements, device_type
    ) -> list[ShardBox]:
        mesh = torch.tensor(list(mesh_ranks), dtype=torch.int64).reshape(list(mesh_shape))
        metadata = to_sharded_metadata(
            global_shape, getattr(torch, dtype), mesh, _placements(placements), device_type
        )
        return [_from_metadata(m) for m in metadata.shards_metadata]

    def dt_checkpoint_plan(self, dtensor: dt.DTensor) -> dict[str, Any]:
        metadata = checkpoint_plan(dtensor)
        return {
            "boxes": [_from_metadata(m) for m in metadata.shards_metadata],
            "size": list(metadata.size),
            "dtype": str(metadata.tensor_properties.dtype).removeprefix("torch."),
        }


ADAPTER = ReferenceAdapter()
