"""The adapter contract: what an implementation provides so the suite can judge it.

An adapter is thin: it translates the suite's neutral vocabulary (``conformance.vocabulary``:
placement strings, shard dicts, plain shapes) into the implementation's own types and back, and
declares which capabilities it claims. It holds no logic of its own; a rule the implementation
breaks must not be papered over here.

Methods run on the ranks of a world (inside a case), except the ones marked *pure*, which run in
the sandbox, a child process with no process group (``conformance.tasks.pure``). A method
signals the implementation's verdict by raising its exception unchanged: the suite judges the
type.

Rules an adapter does not claim (see ``CAPABILITIES``) are reported as "not claimed", not failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
import torch.distributed as dist

from conformance.vocabulary import ShardBox

CAPABILITIES = {
    "sharded_tensor": "the ShardedTensor family (ST-* rules)",
    "dtensor": "the DeviceMesh/DTensor family (DT-*, INTEROP-* rules)",
    "partial:sum": "Partial(sum) placements; likewise partial:avg, partial:max, ...",
    "strided_shard": "the strided shard placement _S(dim, split_factor)",
    "sub_groups": "process groups that are a strict subset of the world",
    "interop": "to_sharded_metadata, a layout as ShardedTensor boxes (INTEROP-* rules)",
    "cuda": "CUDA tensors on NCCL worlds",
    "rule_ids_in_messages": "error messages name the rule they enforce (ERR-5, a SHOULD)",
}


class Adapter(Protocol):
    name: str
    capabilities: frozenset[str]
    # Optional: the implementation's version ("2.13.0+cpu"). It appears in the run's header, and
    # a registered adapter's known failures are chosen by it (conformance/known_failures.py).
    release: str

    # -- ShardedTensor ------------------------------------------------------------------------

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

    def st_from_local_shards(
        self,
        local: Sequence[tuple[torch.Tensor, ShardBox]],
        global_shape: Sequence[int],
        group: dist.ProcessGroup | None,
    ) -> Any:
        """Build a sharded tensor from each rank's own shards (ST-LIFE, ST-VALID)."""

    def st_local_shards(self, st: Any) -> list[tuple[torch.Tensor, ShardBox]]:
        """This rank's shards, each with its metadata."""

    def st_describe(self, st: Any) -> dict[str, Any]:
        """``{"shape": [...], "dtype": "float32", "shards": [ShardBox, ...]}`` (global metadata)."""

    def st_gather(self, st: Any, dst: int, out: torch.Tensor | None) -> None:
        """Gather into ``out`` on ``dst`` (ST-GATHER)."""

    def st_reshard(self, st: Any, dim: int, placements: Sequence[str]) -> Any:
        """The tensor re-laid out by ``ChunkShardingSpec(dim, placements)`` (ST-RESHARD)."""

    def st_api(self) -> Any:
        """*Pure.* The implementation's own ShardedTensor API, for rules about its objects and
        arguments (ST-META, ST-LIFE, ST-FLAT, ST-RESHARD-7/9), as a namespace of these names:

        - ``ShardMetadata``, ``TensorProperties``, ``ShardedTensorMetadata``,
          ``MEM_FORMAT_ENCODING``, ``Shard``, ``ChunkShardingSpec``, ``EnumerableShardingSpec``,
          ``ShardingSpec``, ``ShardedTensor`` (the classes);
        - ``placement(text)``: a parsed placement (``rank()``, ``device()``, ``str()``);
        - ``empty``, ``zeros``, ``ones``, ``full`` (``full(spec, size, fill_value, ...)``);
        - ``shard(tensor, spec, src_rank, process_group)``;
        - ``init_from_local_shards(local_shards, *size, process_group)``;
        - ``init_from_local_shards_and_global_metadata(local_shards, metadata, process_group)``;
        - ``flatten(state_dict)``: the flattening of nested sharded tensors (ST-FLAT);
        - ``nest(local_shards, metadata, process_group)``: a sharded tensor whose local shards'
          tensors are sharded tensors themselves (the 2-D nesting ST-FLAT flattens).

        Sharded tensors expose ``metadata()``, ``local_shards()``, ``local_tensor()``,
        ``size()``, ``dim()``, ``dtype``, ``sharding_spec()``, ``gather(dst, out)``,
        ``reshard(spec)``, ``to(dtype)``, ``cpu()``, ``clone()`` and pickle (ST-LIFE).
        """

    # -- DTensor ------------------------------------------------------------------------------

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
    ) -> Any:
        """``DTensor.from_local`` (DT-API)."""

    def dt_to_local(self, dt: Any) -> torch.Tensor: ...

    def dt_full_tensor(self, dt: Any) -> torch.Tensor: ...

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
