"""Where the project's data folders (``spec/``, ``fixtures/``) are.

In a checkout or an editable install they sit beside the packages. A wheel installs them as
data files under ``<prefix>/share/shardspec/`` (pyproject.toml), so that the suite installed
with ``pip install git+...`` still knows every rule and golden vector.
"""

from __future__ import annotations

import site
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
# The pytest configuration every command that runs pytest over the suite reads, and its rootdir:
# the folder that holds the package, so test ids read ``conformance/suite/...`` wherever the
# suite is installed (see the file).
RUN_CONFIG = Path(__file__).resolve().parent / "pytest-run.ini"


def pytest_isolation(extra: list[str] = ()) -> list[str]:
    """pytest options that make a run of the suite read its own configuration, never the one of
    the folder it starts in (a user's repository): ``-c``, ``--rootdir``, and the cache where
    pytest would keep it, in the current folder (unless ``extra`` turns the cache off)."""
    options = ["-c", str(RUN_CONFIG), "--rootdir", str(CHECKOUT)]
    if "no:cacheprovider" not in extra:
        options += ["-o", f"cache_dir={Path.cwd() / '.pytest_cache'}"]
    return options


def data_dir(name: str) -> Path:
    """The folder ``name`` of the checkout, or of the installation; the checkout's path when
    neither exists, so that a message about a missing file names where it was looked for."""
    candidates = [
        CHECKOUT / name,
        Path(sys.prefix, "share", "shardspec", name),
        Path(site.USER_BASE or "", "share", "shardspec", name),
    ]
    return next((path for path in candidates if path.is_dir()), candidates[0])
