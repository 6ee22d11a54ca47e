"""Atomic file writes: write to a temporary file in the same directory, fsync, rename.

A crash leaves either the old file or the new one, never a half-written file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pandas as pd

from privlab.errors import InvalidInputError


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary sibling of `path` for writing; it replaces `path` only on success."""
    path = Path(path)
    if not path.parent.exists():
        raise InvalidInputError(f"output directory does not exist: {path.parent}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    # mkstemp makes the file 0600; give it the permissions an ordinary open() would.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_open(path, "w") as handle:
        handle.write(text)


def atomic_write_frame(frame: pd.DataFrame, path: str | Path) -> None:
    """Write a DataFrame as CSV (.csv / .csv.gz) or Parquet, atomically."""
    path = Path(path)
    name = path.name.lower()
    if name.endswith(".parquet"):
        with atomic_open(path, "wb") as handle:
            frame.to_parquet(handle, index=False)
    elif name.endswith(".csv.gz"):
        with atomic_open(path, "wb") as handle:
            frame.to_csv(handle, index=False, compression="gzip")
    elif name.endswith(".csv") or name.endswith(".txt"):
        with atomic_open(path, "w") as handle:
            frame.to_csv(handle, index=False)
    else:
        raise InvalidInputError(f"unsupported output format for {path}: use .csv, .csv.gz "
                                "or .parquet")
