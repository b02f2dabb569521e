"""The suite as its users run it: a wheel built from this checkout, installed (not editable) into
an environment of its own, and run from an empty folder that is not the checkout.

The environment is a new venv whose only link to this one is a ``.pth`` line naming this
environment's site-packages: torch, pytest and Hypothesis come from there, but the path line
does not run the ``.pth`` files there, so an editable install of the checkout stays invisible.
``import conformance`` finds the wheel's copy, with only the files the wheel ships.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
_NOT_SOURCE = ("build", "dist", ".git", ".tox", "venv", "installed", "runner", "*.egg-info",
               "__pycache__", ".hypothesis", ".pytest_cache", "conformance-results")  # fmt: skip


@dataclass(frozen=True)
class Installed:
    python: Path  # the new environment's interpreter
    package: Path  # its installed ``conformance`` package
    empty: Path  # a folder with nothing of the checkout in it, to run from
    lock: Path  # runs share it; a test that changes the installed data holds it alone

    def run(
        self, *args: str, cwd: Path | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        with self.locked(fcntl.LOCK_SH):
            return subprocess.run(
                [str(self.python), *args],
                cwd=cwd or self.empty,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=environment,
            )

    @contextmanager
    def locked(self, mode: int) -> Iterator[None]:
        """Hold the data lock: shared for a run, exclusive to change the installed files (other
        xdist workers' runs read them)."""
        with open(self.lock, "a") as handle:
            fcntl.flock(handle, mode)
            yield


def install(folder: Path) -> Installed:
    """Build the wheel and install it under ``folder``, once for every xdist worker (a lock in
    ``folder`` lets the first build it and the others wait)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = folder / "installed"
        if not done.exists():
            _build_and_install(folder)
            done.write_text("")
    venv = folder / "venv"
    python = venv / "bin" / "python"
    installed = Installed(python, Path(), folder / "empty", folder / "data-lock")
    probe = "import conformance, os; print(os.path.dirname(conformance.__file__))"
    package = installed.run("-c", probe).stdout.strip()
    return Installed(python, Path(package), folder / "empty", folder / "data-lock")


def _build_and_install(folder: Path) -> None:
    wheels, venv = folder / "wheels", folder / "venv"
    (folder / "empty").mkdir(exist_ok=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    # A copy of the tree, without build/ (setuptools never prunes it: a file deleted since an
    # earlier build would ship) and without the virtual environments .ci/ makes.
    source = folder / "source"
    shutil.copytree(CHECKOUT, source, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    build = [*pip, "wheel", "--no-deps", "-w", str(wheels), str(source)]
    # An isolated build installs its backend first (seconds); skip that where this environment
    # has the backend pyproject.toml asks for.
    if _has_build_backend():
        build.append("--no-build-isolation")
    subprocess.run(build, check=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()}
    Path(purelib, "_parent_environment.pth").write_text("\n".join(sorted(ours)) + "\n")
    (wheel,) = wheels.glob("shardspec-*.whl")
    subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "--quiet", "install",
         "--no-deps", "--ignore-installed", "--no-compile", str(wheel)],
        check=True,
    )  # fmt: skip


def _has_build_backend() -> bool:
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    wanted = re.search(r'"setuptools>=([\d.]+)"', (CHECKOUT / "pyproject.toml").read_text())
    return wanted is not None and _numbers(version) >= _numbers(wanted.group(1))


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])
