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


def data_dir(name: str) -> Path:
    """The folder ``name`` of the checkout, or of the installation; the checkout's path when
    neither exists, so that a message about a missing file names where it was looked for."""
    candidates = [
        CHECKOUT / name,
        Path(sys.prefix, "share", "shardspec", name),
        Path(site.USER_BASE or "", "share", "shardspec", name),
    ]
    return next((path for path in candidates if path.is_dir()), candidates[0])
