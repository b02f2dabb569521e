"""The header of a run: what was judged, on what, how hard, and against which known failures.

A verdict means something only with its circumstances: the same suite can pass one PyTorch
release and fail the next, draw other examples under another Hypothesis release, or meet a rule
on Gloo that NCCL breaks. Every report (terminal, ``rules.md``, ``rules.json``, the CI step
summary) starts with these lines, so a table read later says what it is a table of.
"""

from __future__ import annotations

import hashlib
import platform
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import hypothesis
import torch
from hypothesis import settings

import reference
from conformance import hash_seed, profiles

# What decides a verdict: the suite's and the reference's code (the oracle, the strategies, the
# judge, the tasks, the adapters) and the known-failures files. Records, reports and pages do not.
VERDICT_FILES = ("**/*.py", "**/*.ini", "xfails/**/*.txt")


def torch_build() -> str:
    """``2.13.0+cpu (CPU build, git 1a2b3c4)`` or ``2.11.0+cu130 (CUDA 13.0, git ...)``."""
    cuda = torch.version.cuda
    build = f"CUDA {cuda}" if cuda else "CPU build"
    git = (getattr(torch.version, "git_version", "") or "")[:7]
    return f"{torch.__version__} ({build}{', git ' + git if git else ''})"


def digest(roots: Iterable[Path], patterns: Iterable[str] = VERDICT_FILES) -> str:
    """A short hash of every file under ``roots`` that ``patterns`` match, by path and bytes."""
    sha = hashlib.sha256()
    patterns = tuple(patterns)
    for root in roots:
        files = {f for pattern in patterns for f in root.glob(pattern) if f.is_file()}
        for path in sorted(files):
            sha.update(f"{root.name}/{path.relative_to(root).as_posix()}\0".encode())
            sha.update(path.read_bytes() + b"\0")
    return sha.hexdigest()[:12]


def suite_build() -> str:
    """``shardspec 0.1.0 (digest 1a2b3c4d5e6f)``: the same digest wherever the same tree is
    installed or checked out, so two runs' tables are comparable where it and the torch build
    are equal, and a table kept from a run says which suite made it."""
    try:
        version = metadata.version("shardspec")
    except metadata.PackageNotFoundError:
        version = "not installed"
    roots = [Path(__file__).parent, Path(reference.__file__).parent]
    return f"shardspec {version} (digest {digest(roots)})"


def hypothesis_profile() -> str:
    """The loaded profile's name, examples per property, and whether they repeat every run."""
    current = settings.default
    name = profiles.current_name()
    seeding = "derandomized: the same examples every run" if current.derandomize else "random"
    return f"{name} ({current.max_examples} examples per property, {seeding})"


def collect(
    *,
    impl: str,
    impl_release: str | None,
    backend: str,
    world_sizes: str,
    known_failures: str,
) -> dict[str, str]:
    """The header's fields, in the order they print."""
    return {
        "implementation": impl + (f" {impl_release}" if impl_release else ""),
        "suite": suite_build(),
        "torch": torch_build(),
        "python": platform.python_version(),
        "backend": backend,
        "world sizes": world_sizes,
        "profile": hypothesis_profile(),
        "hypothesis": hypothesis.__version__,
        "hash seed": hash_seed.describe(),
        "known failures": known_failures,
    }


def render_lines(info: dict[str, str]) -> list[str]:
    width = max(map(len, info))
    return [f"{key + ':':<{width + 1}} {value}" for key, value in info.items()]


def render_markdown(info: dict[str, str]) -> str:
    rows = [f"| {key} | {value} |" for key, value in info.items()]
    return "\n".join(["| run | |", "| --- | --- |", *rows, ""])
