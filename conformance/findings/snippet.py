"""The rank side of a finding: run its program on one rank of a world and return its result.

A program is plain PyTorch code. It sees ``rank``, ``world_size``, the names of ``PRELUDE`` and
``attempt``, and leaves what it observed in ``result``: an exception that escapes is the rank's
outcome (``raises <type>``), as is a hang. The value comes back as its ``repr``, tensors as
lists, so an outcome is text that a record can hold and any release can be compared against.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import torch

from conformance import hash_seed
from conformance.world.rank import RankContext

# What every program may use without importing it; `findings replay --show` prints it above the
# program, so that a reader sees where every name comes from; `findings replay --script` (and
# `findings report`) print a file that runs as it stands under torchrun (`script`).
PRELUDE = """\
import torch
import torch.distributed as dist
import torch.distributed._shard.sharded_tensor as st
from torch.distributed._shard import _shard_tensor
from torch.distributed._shard.metadata import ShardMetadata
from torch.distributed._shard.sharded_tensor import Shard as LocalShard
from torch.distributed._shard.sharding_spec import ChunkShardingSpec, EnumerableShardingSpec
from torch.distributed.tensor import DeviceMesh, DTensor, Partial, Replicate, Shard
from torch.distributed.tensor import distribute_tensor
from torch.distributed.tensor.placement_types import _StridedShard
"""


def attempt(call: Callable[[], Any]) -> Any:
    """``call()``'s value, or the name of the exception type it raised: for programs that try
    several inputs and report each outcome in one result."""
    try:
        return call()
    except Exception as exc:
        return f"raises {type(exc).__name__}"


def preload() -> None:
    """Import what the programs' calls import on first use (``distribute_tensor`` imports
    TorchDynamo, seconds on a busy machine), so that a program's timeout measures what it does,
    not a first import. The driver calls it before it forks worlds, which then start with it."""
    import torch._dynamo
    import torch.distributed.tensor  # noqa: F401


def warm(ctx: RankContext) -> None:
    """``preload`` on a rank (a spawned one starts without the driver's imports)."""
    preload()


def run(ctx: RankContext, code: str) -> str:
    """Run ``code`` on this rank; the ``repr`` of its ``result`` (``None`` if it sets none)."""
    namespace: dict[str, Any] = {
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "attempt": attempt,
    }
    exec(PRELUDE, namespace)
    torch.manual_seed(0)
    exec(compile(code, "<finding>", "exec"), namespace)
    return repr(_plain(namespace.get("result")))


def _plain(value: Any) -> Any:
    """Tensors as nested lists (their ``repr`` carries devices and grad functions that say
    nothing about the finding), inside lists, tuples and dicts too."""
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


SCRIPT = """\
# {title}
# Run on {world} process(es): torchrun --nproc-per-node {world} {name}
# Each rank prints its outcome in shardspec's words ("returns <value>", "raises <type>").
{outcomes}from __future__ import annotations

import os
import sys

# PyTorch picks among equally cheap sharding strategies in an order that follows string hashing:
# the outcomes above were seen under PYTHONHASHSEED={seed}, which only a new interpreter reads.
if os.environ.get("PYTHONHASHSEED") != "{seed}":
    os.environ["PYTHONHASHSEED"] = "{seed}"
    os.execv(sys.executable, [sys.executable, "-u", *sys.argv])  # -u, as torchrun starts it

{prelude}


{attempt}


{plain}


dist.init_process_group("gloo")
rank, world_size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
result = None  # what a rank returns where the program sets no result for it
try:
{body}
    said = f"rank {{rank}}: returns {{_plain(result)!r}}"
except Exception as exc:
    said = f"rank {{rank}}: raises {{type(exc).__name__}}"
os.write(1, f"{{said}}\\n".encode())  # one write: a line printed in parts can mix with a peer's
# Leave at once, the group as it is: a Gloo worker thread may still be dropping the last tensors,
# and must take the GIL to do so. destroy_process_group can then deadlock (2.5's Gloo destructor
# joins that thread holding the GIL, until pytorch#154976) and Python's finalization can
# abort the rank ("terminate called without an active exception", pytorch#190489).
os._exit(0)
"""


def script(
    code: str, world_size: int, title: str, name: str = "repro.py", outcomes: Sequence[str] = ()
) -> str:
    """``code`` as one file that runs as it stands under ``torchrun``: the prelude, the helpers
    a program may call, a Gloo process group, ``rank`` and ``world_size``, the seeds the suite
    sets (the hash seed by restarting itself under it), and each rank's outcome printed as a
    record writes it; ``outcomes``, what the spec and each release give, head it as comments."""
    return SCRIPT.format(
        title=title,
        world=world_size,
        name=name,
        outcomes="".join(f"#   {line}\n" for line in outcomes),
        seed=hash_seed.SEED,
        prelude=PRELUDE.rstrip(),
        attempt=inspect.getsource(attempt).rstrip(),
        plain=inspect.getsource(_plain).rstrip(),
        body=textwrap.indent(code.rstrip(), "    "),
    )
