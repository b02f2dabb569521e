"""The adapter contract: what an implementation provides so the suite can judge it.

An adapter is the only door to an implementation: tasks reach it through these methods alone
(``tests/suite/test_adapter_contract.py`` keeps them to it). It is thin: it translates the
suite's vocabulary (``conformance.vocabulary``: placement strings, ``ShardBox`` dicts, plain
shapes) into the implementation's own types and back, and declares which capabilities it
claims. It holds no logic of its own; a rule the implementation breaks must not be papered over
here.

Two kinds of method serve the two kinds of rule. Most rules are about what happens to data
(layouts, gathers, redistributions): their methods take and return the vocabulary. Some rules
are about the implementation's objects themselves (``ShardMetadata`` equality, what pickling
keeps, what ``size()`` returns: ST-META, ST-LIFE, ST-FLAT): their methods build those objects,
and the objects follow the PyTorch-shaped protocols below (``ShardedTensorLike``, ...).

Methods run on the ranks of a world (inside a case), except the ones marked *pure*, which run in
the sandbox, a child process with no process group (``conformance.tasks.pure``). A method
signals the implementation's verdict by raising its exception unchanged: the suite judges the
type.

Rules an adapter does not claim (see ``CAPABILITIES``) are reported as "not claimed", not failed.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist

from conformance.vocabulary import ShardBox
from conformance.world.unimplemented import NotImplementedInAdapter  # noqa: F401 (a skeleton's)

CAPABILITIES = {
    "sharded_tensor": "the ShardedTensor family (ST-* rules)",
    "sharded_tensor_ops": "torch functions on ShardedTensors: equal, copy_, _like, nn.init (ST-OP)",
    "dtensor": "the DeviceMesh/DTensor family (DT-*, INTEROP-* rules)",
    "partial:sum": "Partial(sum) placements; likewise partial:avg, partial:max, ...",
    "strided_shard": "the strided shard placement _S(dim, split_factor)",
    "sub_groups": "process groups that are a strict subset of the world",
    "mesh_flatten": "mesh dims flattened into one, as FSDP2 and HSDP build them (DT-MESH-11 to 14)",
    "interop": "to_sharded_metadata, a layout as ShardedTensor boxes, pure (INTEROP-1 to 7)",
    "interop_checkpoint": "the boxes a checkpoint of a live DTensor writes (INTEROP-8, 9)",
    "distribute_source": "distribute_tensor from any rank's data, or each rank's own "
    "(src_data_rank; DT-API-2, 3): without it, from the mesh's first rank",
    "dtensor_factories": "zeros, ones, empty, full, rand, randn of a DTensor (DT-API-16 to 18)",
    "dtensor_ops": "operators on DTensors, but the adapter's unclaimed_ops (DT-OP)",
    "dtensor_grad": "gradients through the DTensor API and, with dtensor_ops, its ops (DT-GRAD)",
    "dtensor_random": "random factories and ops on DTensors, seeded by torch.manual_seed (DT-RAND)",
    "dtensor_random_parity": "random DTensors equal to the single-device draw (DT-RAND-7)",
    "cuda": "CUDA tensors on NCCL worlds",
    "rule_ids_in_messages": "error messages name the rule they enforce (ERR-5, a SHOULD)",
}

# The methods each capability brings: the suite calls these, and no others, for the rules behind
# it, on top of those of the capability's family (``FAMILY``). A capability that is not listed
# brings none of its own (``partial:sum``, ``strided_shard``, ``sub_groups``: inputs the family's
# methods take). Tests run the reference through an adapter that has only the table's methods
# of what it claims (tests/suite/test_adapter_contract.py).
METHODS: dict[str, tuple[str, ...]] = {
    "sharded_tensor": (
        "st_chunk_metadata", "st_validate", "st_shard", "st_local_shards", "st_describe",
        "st_gather", "st_reshard", "st_remote_device", "st_shard_metadata",
        "st_tensor_properties", "st_memory_format_encoding", "st_sharded_tensor_metadata",
        "st_chunk_spec", "st_enumerable_spec", "st_local_shard", "st_create",
        "st_shard_by_spec", "st_init_from_local_shards", "st_init_from_global_metadata",
        "st_nest", "st_flatten",
    ),
    "sharded_tensor_ops": ("st_op", "st_group_ranks"),
    "dtensor": (
        "dt_mesh", "dt_local_shape_and_offset", "dt_distribute", "dt_from_local",
        "dt_to_local", "dt_full_tensor", "dt_redistribute", "dt_describe", "dt_mesh_describe",
        "dt_mesh_group", "dt_mesh_named", "dt_mesh_coordinate", "dt_placement",
    ),
    "mesh_flatten": ("dt_mesh_flatten",),
    "interop": ("dt_to_sharded_metadata",),
    "interop_checkpoint": ("dt_checkpoint_plan",),
    "dtensor_factories": ("dt_factory",),
    "dtensor_ops": ("dt_op",),
    "dtensor_grad": ("dt_grad",),
    "dtensor_random": ("dt_factory", "dt_op"),
}  # fmt: skip
# The family a capability extends: its tests need the family's methods too.
FAMILY = {
    capability: "sharded_tensor" if capability.startswith("sharded_tensor") else "dtensor"
    for capability in CAPABILITIES
    if capability not in ("cuda", "rule_ids_in_messages")
} | {f"partial:{op}": "dtensor" for op in ("sum", "avg", "max", "min", "product")}


def methods_for(capabilities: Iterable[str]) -> list[str]:
    """Every method an adapter claiming ``capabilities`` needs, in the table's order."""
    claimed = set(capabilities)
    claimed |= {FAMILY[c] for c in claimed if c in FAMILY}
    listed = [m for c, methods in METHODS.items() if c in claimed for m in methods]
    return list(dict.fromkeys(listed))


# -- the implementation's ShardedTensor objects, as the object rules see them --------------------


class RemoteDeviceLike(Protocol):
    """A shard's placement (``"rank:1/cpu"``): ``==``, ``hash``, ``str`` (ST-META-4 to 7)."""

    def rank(self) -> int | None: ...

    def device(self) -> torch.device: ...


class ShardMetadataLike(Protocol):
    """One shard's box and placement (ST-META-1 to 3): ``==``, ``hash``, pickling."""

    shard_offsets: list[int]
    shard_sizes: list[int]
    placement: RemoteDeviceLike


class LocalShardLike(Protocol):
    """A rank's own shard: its tensor and its metadata."""

    tensor: torch.Tensor
    metadata: ShardMetadataLike


class ShardedTensorMetadataLike(Protocol):
    """The global metadata (ST-META-8 to 12): ``==`` and pickling."""

    shards_metadata: list[ShardMetadataLike]
    size: torch.Size
    tensor_properties: Any


class ShardingSpecLike(Protocol):
    def build_metadata(
        self, tensor_sizes: torch.Size, tensor_properties: Any
    ) -> ShardedTensorMetadataLike: ...


class ShardedTensorLike(Protocol):
    """A sharded tensor (ST-LIFE, ST-GATHER, ST-RESHARD); it also pickles (``torch.save``)."""

    dtype: torch.dtype

    def metadata(self) -> ShardedTensorMetadataLike: ...

    def local_shards(self) -> list[LocalShardLike]: ...

    def local_tensor(self) -> torch.Tensor: ...

    def size(self, dim: int | None = None) -> Any: ...

    def dim(self) -> int: ...

    def gather(self, dst: int = 0, out: torch.Tensor | None = None) -> None: ...

    def reshard(self, resharding_spec: ShardingSpecLike) -> ShardedTensorLike: ...

    def to(self, *args: Any, **kwargs: Any) -> ShardedTensorLike: ...

    def cpu(self) -> ShardedTensorLike: ...

    def clone(self) -> ShardedTensorLike: ...


class ShardedTensorAdapter(Protocol):
    """The ShardedTensor family (capability ``sharded_tensor``)."""

    def st_chunk_metadata(
        self, global_shape: Sequence[int], dim: int, placements: Sequence[str]
    ) -> list[ShardBox]:
        """*Pure.* The shards a ``ChunkShardingSpec(dim, placements)`` lays out (ST-SPEC)."""

    def st_validate(self, shards: Sequence[ShardBox], global_shape: Sequence[int]) -> None:
        """*Pure.* Raise if ``shards`` cannot describe a tensor of ``global_shape`` (ST-VALID)."""

    def st_shard(
        self,
        tensor: torch.Tensor | None,
        dim: int,
        placements: Sequence[str],
        src_rank: int,
        group: dist.ProcessGroup | None,
    ) -> Any:
        """Scatter ``tensor`` (meaningful on ``src_rank``) into a sharded tensor (ST-LIFE)."""

    def st_local_shards(self, st: Any) -> list[tuple[torch.Tensor, ShardBox]]:
        """This rank's shards, each with its metadata."""

    def st_describe(self, st: Any) -> dict[str, Any]:
        """The global metadata as data, spelled as ``ShardedTensorMetadata`` names its parts:
        ``{"shards": [ShardBox, ...], "size": [...], "properties": properties_data(...)}``
        (``conformance.vocabulary.properties_data``)."""

    def st_gather(self, st: Any, dst: int, out: torch.Tensor | None) -> None:
        """Gather into ``out`` on ``dst`` (ST-GATHER)."""

    def st_reshard(self, st: Any, dim: int, placements: Sequence[str]) -> Any:
        """The tensor re-laid out by ``ChunkShardingSpec(dim, placements)`` (ST-RESHARD)."""

    # Object rules: each method builds one of the implementation's objects from arguments passed
    # as given (the suite passes bad ones on purpose), and raises what the implementation raises.

    def st_remote_device(self, text: Any) -> RemoteDeviceLike:
        """*Pure.* A placement read from ``text`` (``"rank:0/cpu"``), as ``ShardMetadata`` reads
        it."""

    def st_shard_metadata(self, offsets: Any, sizes: Any, placement: Any) -> ShardMetadataLike:
        """*Pure.* ``ShardMetadata(offsets, sizes, placement)``."""

    def st_tensor_properties(self, **fields: Any) -> Any:
        """*Pure.* ``TensorProperties(**fields)``: ``dtype``, ``layout``, ``requires_grad``,
        ``memory_format``, ``pin_memory``; it must support ``==``, ``__getstate__`` and pickling
        (ST-META-8, 9)."""

    def st_memory_format_encoding(self) -> type:
        """*Pure.* The enum type ``TensorProperties.__getstate__`` encodes memory formats with
        (ST-META-9)."""

    def st_sharded_tensor_metadata(self, *args: Any) -> ShardedTensorMetadataLike:
        """*Pure.* ``ShardedTensorMetadata(shards, size, properties)``, or with no arguments."""

    def st_chunk_spec(self, dim: Any, placements: Sequence[Any]) -> ShardingSpecLike:
        """*Pure.* ``ChunkShardingSpec(dim, placements)`` (ST-SPEC)."""

    def st_enumerable_spec(self, shards: Sequence[ShardMetadataLike]) -> ShardingSpecLike:
        """*Pure.* ``EnumerableShardingSpec(shards)`` (ST-SPEC)."""

    def st_local_shard(self, tensor: torch.Tensor, metadata: ShardMetadataLike) -> LocalShardLike:
        """*Pure.* ``Shard(tensor, metadata)``: a local shard to build a tensor from."""

    def st_create(self, fill: str, spec: Any, *args: Any, **options: Any) -> ShardedTensorLike:
        """``fill(spec, *args, **options)``, ``fill`` one of ``empty``, ``zeros``, ``ones``,
        ``full``; ``args`` as the function takes them (the size as one sequence or dim by dim;
        ``full``: the size, then the fill value); ``options``: ``dtype``, ``layout``,
        ``memory_format``, ``requires_grad``, ``process_group`` (ST-LIFE-1 to 6)."""

    def st_shard_by_spec(
        self, tensor: torch.Tensor, spec: Any, src_rank: Any, group: dist.ProcessGroup | None
    ) -> ShardedTensorLike:
        """``shard(tensor, spec, src_rank, process_group)`` with any sharding spec (ST-LIFE)."""

    def st_init_from_local_shards(
        self, shards: Sequence[LocalShardLike], *size: Any, group: dist.ProcessGroup | None
    ) -> ShardedTensorLike:
        """``init_from_local_shards(shards, *size, process_group)`` (ST-LIFE, ST-VALID)."""

    def st_init_from_global_metadata(
        self,
        shards: Sequence[LocalShardLike],
        metadata: ShardedTensorMetadataLike,
        group: dist.ProcessGroup | None,
    ) -> ShardedTensorLike:
        """``init_from_local_shards_and_global_metadata`` (ST-LIFE, ST-VALID)."""

    def st_nest(
        self,
        shards: Sequence[LocalShardLike],
        metadata: ShardedTensorMetadataLike,
        group: dist.ProcessGroup | None,
    ) -> ShardedTensorLike:
        """A sharded tensor whose local shards' tensors are sharded tensors themselves: the 2-D
        nesting ST-FLAT flattens."""

    def st_group_ranks(self, st: Any) -> list[int]:
        """The global ranks of the process group ``st`` lives on, in group-rank order."""

    def st_op(self, fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """``fn(*args, **kwargs)``, some arguments ShardedTensors of this implementation, as a
        user calls it: ``fn`` is a torch function (``torch.equal``, ``torch.zeros_like``,
        ``torch.nn.init.uniform_``) or calls a method of its first argument (``x.clone()``);
        results returned as the implementation returns them (capability
        ``sharded_tensor_ops``, ST-OP)."""

    def st_flatten(self, state_dict: dict[str, Any]) -> dict[str, Any]:
        """The state dict with nested sharded tensors flattened (ST-FLAT)."""


class DTensorAdapter(Protocol):
    """The DeviceMesh/DTensor family (capability ``dtensor``)."""

    def dt_mesh(
        self,
        device_type: str,
        shape: Sequence[int],
        ranks: Sequence[int],
        names: Sequence[str] | None,
    ) -> Any:
        """A device mesh of ``shape`` over ``ranks`` (row-major), on every rank (DT-MESH)."""

    def dt_local_shape_and_offset(
        self,
        global_shape: Sequence[int],
        mesh_shape: Sequence[int],
        placements: Sequence[str],
        coordinate: Sequence[int],
    ) -> tuple[list[int], list[int]]:
        """*Pure.* The local shape and global offset of ``coordinate`` (DT-LAYOUT)."""

    def dt_distribute(
        self, tensor: torch.Tensor, mesh: Any, placements: Sequence[str], src_data_rank: int
    ) -> Any:
        """``distribute_tensor`` (DT-API)."""

    def dt_from_local(
        self,
        local: torch.Tensor,
        mesh: Any,
        placements: Sequence[str],
        run_check: bool,
        shape: Sequence[int] | None,
        stride: Sequence[int] | None,
        grad_placements: Sequence[str] | None = None,
    ) -> Any:
        """``DTensor.from_local`` (DT-API); ``grad_placements`` only where given (capability
        ``dtensor_grad``, DT-GRAD-4)."""

    def dt_to_local(self, dt: Any, grad_placements: Sequence[str] | None = None) -> torch.Tensor:
        """``dt.to_local()``; ``grad_placements`` only where given (DT-GRAD-3)."""

    def dt_full_tensor(self, dt: Any, grad_placements: Sequence[str] | None = None) -> torch.Tensor:
        """``dt.full_tensor()``; ``grad_placements`` only where given (DT-GRAD-3)."""

    def dt_grad(self, dt: Any) -> Any:
        """``dt.grad``: a leaf DTensor's gradient, a DTensor or ``None`` (capability
        ``dtensor_grad``, DT-GRAD-2)."""

    def dt_redistribute(
        self, dt: Any, placements: Sequence[str] | None, device_mesh: Any = None
    ) -> Any:
        """``dt.redistribute(device_mesh or dt's own mesh, placements)``; ``placements`` may be
        ``None`` (DT-REDIST)."""

    def dt_describe(self, dt: Any) -> dict[str, Any]:
        """``{"shape", "stride", "dtype", "placements"}``, placements in the vocabulary."""

    def dt_mesh_describe(self, mesh: Any) -> dict[str, Any]:
        """``{"mesh": mesh.mesh.tolist(), "ndim", "size": mesh.size(), "sizes": [mesh.size(i)],
        "coordinate": list or None, "names": list or None}`` on the calling rank (DT-MESH)."""

    def dt_mesh_group(self, mesh: Any, dim: int) -> tuple[list[int], int]:
        """The global ranks of the calling rank's group along mesh dim ``dim``, in the order the
        group's collectives use, and the rank's local rank there (DT-MESH-7)."""

    def dt_mesh_named(self, mesh: Any, name: str) -> Any:
        """``mesh[name].mesh.tolist()``: the 1-D sub-mesh along the dim called ``name``."""

    def dt_mesh_coordinate(self, mesh: Any) -> list[int] | None:
        """``mesh.get_coordinate()`` as a list, ``None`` outside the mesh (DT-MESH-6): all that
        the spec says of a flattened mesh on a rank outside it (DT-MESH-11)."""

    def dt_mesh_flatten(self, mesh: Any, names: Sequence[str] | None, name: str | None) -> Any:
        """The 1-D mesh flattening the dims called ``names`` (every dim when ``None``) under
        ``name`` (the default name when ``None``); collective over the world (capability
        ``mesh_flatten``, DT-MESH-11 to 14)."""

    def dt_placement(self, kind: str, *args: Any) -> Any:
        """*Pure.* The placement ``kind(*args)``, kind one of ``Shard``, ``_StridedShard``
        (``dim, split_factor``), ``Replicate``, ``Partial``; the object must support ``==``,
        ``hash`` and ``str`` (DT-PLACE-4 to 9)."""

    def dt_to_sharded_metadata(
        self,
        global_shape: Sequence[int],
        dtype: str,
        mesh_shape: Sequence[int],
        mesh_ranks: Sequence[int],
        placements: Sequence[str],
        device_type: str,
    ) -> list[ShardBox]:
        """*Pure.* ``to_sharded_metadata``: the layout's boxes (capability ``interop``)."""

    def dt_checkpoint_plan(self, dt: Any) -> dict[str, Any]:
        """The boxes a checkpoint of ``dt`` writes, as its save planner decides them: collective,
        called on every rank of the world (the checkpoint's group), each rank returning the
        whole plan: ``{"boxes": [ShardBox whose placement names the writer], "size": [...],
        "dtype": "float32"}`` (capability ``interop_checkpoint``, INTEROP-8, 9)."""

    def dt_factory(
        self,
        op: str,
        size: Sequence[int],
        mesh: Any,
        placements: Sequence[str] | None,
        fill_value: bool | int | float | None,
        dtype: torch.dtype | None,
        requires_grad: bool,
    ) -> Any:
        """The DTensor factory ``op`` (``zeros``, ``ones``, ``empty``, ``full``, ``rand``,
        ``randn``) of global ``size``; ``fill_value`` for ``full`` only, ``dtype`` and
        ``placements`` ``None`` for the default (capability ``dtensor_factories``)."""

    def dt_op(self, fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """``fn(*args, **kwargs)``, some arguments DTensors of this implementation on one mesh:
        the op as the implementation runs it, its outputs returned as it returns them
        (capability ``dtensor_ops``, DT-OP). ``fn`` is the catalogue's callable (``torch.add``,
        ``Tensor.view``, an OpInfo wrapper), the one the single-device result comes from."""


class Adapter(ShardedTensorAdapter, DTensorAdapter, Protocol):
    """An implementation under the contract: both families' methods; a method of a family it
    does not claim may raise ``NotImplementedError``."""

    name: str
    capabilities: frozenset[str]
    # Optional, with ``dtensor_ops``: the catalogue's ops (conformance/ops/catalogue.py names)
    # it does not claim, reported as "not claimed": a set, or any container that answers ``in``
    # (the torch adapter's reads PyTorch's registries op by op).
    unclaimed_ops: Container[str]
    # Optional: the implementation's version ("2.13.0+cpu"). It appears in the run's header, and
    # a registered adapter's known failures are chosen by it (conformance/known_failures.py).
    release: str
    # Optional: folders of per-release known-failures files (<release>.txt), layered in order,
    # instead of shardspec's own for a registered adapter's name (known_failures.layers).
    known_failures: Sequence[str | Path]
