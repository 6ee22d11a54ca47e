"""Where the rows come from: a bundled dataset, a file in the workspace or a session's
upload; and how a downloaded script (`protect.python_script`) or CLI command finds them
again (never a temporary file: bundled data by name, workspace files and uploads by their
absolute path in the workspace, where the studio keeps them; the private rows are never put
into a download)."""

from __future__ import annotations

import functools
import hashlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from privlab.errors import InvalidInputError

#: Bundled datasets the studio offers: name -> (label, loader options, schema name).
BUNDLED: dict[str, tuple[str, dict[str, Any], str]] = {
    "adult": ("UCI Adult (census income, 32,561 people)", {}, "adult"),
    "census": ("Synthetic Turkish census (300 generated people)", {}, "census"),
}
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Source:
    """A chosen table. kind: "bundled" (name), "workspace" or "upload" (path); an upload's
    `content_id` is `upload_content_id` of its bytes (its ledger principal)."""

    kind: str
    name: str
    path: Path | None = None
    content_id: str | None = None

    @property
    def label(self) -> str:
        if self.kind == "bundled":
            return BUNDLED[self.name][0]
        where = "uploaded in this session" if self.kind == "upload" else "workspace file"
        return f"{self.name} ({where})"

    @property
    def principal(self) -> str:
        """The ledger principal: the budget belongs to the data, not to a browser session,
        so a new session (or a changed epsilon) never starts a fresh budget. Workspace files
        by their relative name (the curator places them); uploads by a keyed hash of their
        content (`upload:HEX`, see `upload_content_id`), so the same rows uploaded again in a
        new session or under another name draw on the same budget (an edited file is other
        bytes: a new principal)."""
        if self.kind == "bundled":
            name = f"bundled:{self.name}"
        elif self.kind == "upload":
            if self.content_id is None:
                raise InvalidInputError("upload: its content id is missing; choose it again")
            name = f"upload:{self.content_id}"
        else:
            name = f"workspace:{self.name}"
        if len(name) > 200:  # the ledger's limit: keep a readable head and a hash
            name = name[:150] + ":" + hashlib.sha256(name.encode()).hexdigest()[:16]
        return name

    @property
    def bundled_schema(self) -> str | None:
        return BUNDLED[self.name][2] if self.kind == "bundled" else None

    def load(self) -> pd.DataFrame:
        """The private rows (only release, assessment and synthesis paths call this)."""
        if self.kind == "bundled":
            return _bundled_frame(self.name).copy()
        assert self.path is not None
        return _file_frame(str(self.path), self.path.stat().st_mtime_ns).copy()

    def cli_file(self) -> tuple[str, list[str]]:
        """(the data file a CLI command reads, the commands that make it first)."""
        if self.kind == "bundled":
            opts = BUNDLED[self.name][1]
            extra = " ".join(f"--{k.replace('_', '-')}" for k, v in opts.items() if v is True)
            return f"{self.name}.csv", [f"privlab datasets export {self.name} {self.name}.csv"
                                        + (f" {extra}" if extra else "")]
        return str(self.path), []


@functools.lru_cache(maxsize=4)
def _bundled_frame(name: str) -> pd.DataFrame:
    from privlab.data.datasets import load_dataset

    if name not in BUNDLED:
        raise InvalidInputError(f"dataset: choose one of {', '.join(BUNDLED)}, got {name!r}")
    return load_dataset(name, **BUNDLED[name][1])


def upload_content_id(path: Path, state_dir: Path) -> str:
    """An upload's identity for the ledger: HMAC-SHA256 of its bytes under the workspace's
    own key (`.privlab-studio/upload.key`, made once, owner-only). Keyed, because the
    principal is written into every release package: a plain sha256 of the private file
    would let anyone holding a candidate table confirm it (it tells D from D' exactly)."""
    import hmac

    digest = hmac.new(_upload_key(state_dir), digestmod=hashlib.sha256)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _upload_key(state_dir: Path) -> bytes:
    from privlab.studio.config import workspace_key

    return workspace_key(state_dir / "upload.key", "not a studio upload key; remove it to make "
                         "a new one (uploads then get new budgets)")


@functools.lru_cache(maxsize=8)
def _file_frame(path: str, mtime_ns: int) -> pd.DataFrame:
    from privlab.data.io import read_table

    return read_table(path)


def bundled(name: str) -> Source:
    if name not in BUNDLED:
        raise InvalidInputError(f"dataset: choose one of {', '.join(BUNDLED)}, got {name!r}")
    return Source("bundled", name)


def safe_upload_name(filename: str) -> str:
    """A file name for an upload: its last component, reduced to [A-Za-z0-9._-]."""
    base = Path(filename.replace("\\", "/")).name
    clean = _SAFE_NAME.sub("_", base).strip("._") or "upload.csv"
    return clean[:100]


def quote(text: str) -> str:
    return shlex.quote(text)
