"""The header of a run: what was judged, on what, how hard, and against which known failures.

A verdict means something only with its circumstances: the same suite can pass one PyTorch
release and fail the next, draw other examples under another Hypothesis release, or meet a rule
on Gloo that NCCL breaks. Every report (terminal, ``rules.md``, ``rules.json``, the CI step
summary) starts with these lines, so a table read later says what it is a table of.
"""

from __future__ import annotations

import platform

import hypothesis
import torch
from hypothesis import settings

from conformance import hash_seed, profiles


def torch_build() -> str:
    """``2.13.0+cpu (CPU build, git 1a2b3c4)`` or ``2.11.0+cu130 (CUDA 13.0, git ...)``."""
    cuda = torch.version.cuda
    build = f"CUDA {cuda}" if cuda else "CPU build"
    git = (getattr(torch.version, "git_version", "") or "")[:7]
    return f"{torch.__version__} ({build}{', git ' + git if git else ''})"


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
