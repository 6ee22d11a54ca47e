"""Where the files privlab ships live (`privlab/data/bundled/`): datasets, their public schemas
and the census generator's frequency tables.

Why a module of its own: the dataset loaders (`data.datasets`), the census generator
(`data.census`) and the bundled schemas (`schema.bundled`) all read shipped files; the path is
the one thing they share, so it sits below them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def bundled_path(*parts: str) -> Path:
    """Filesystem path of a file shipped in privlab/data/bundled."""
    return Path(str(resources.files("privlab.data").joinpath("bundled", *parts)))


__all__ = ["bundled_path"]
