"""Studio settings and the two safety checks everything else relies on: where it may listen
(loopback unless a token is set) and which files it may touch (only inside the workspace)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from privlab.errors import InvalidInputError, UnsafeConfigurationError
from privlab.utils.net import is_loopback

#: Files the data picker offers and the readers accept.
DATA_SUFFIXES = (".csv", ".tsv", ".csv.gz", ".tsv.gz", ".parquet", ".txt")
#: Largest upload accepted by default (bytes).
DEFAULT_MAX_UPLOAD = 20 * 2**20
#: The studio's own files inside the workspace (sessions' outputs, the ledger).
STATE_DIR = ".privlab-studio"




@dataclass
class StudioConfig:
    """What `privlab studio` was started with. `secret` signs session cookies (random per
    process unless given, so a restart logs every browser out)."""

    workspace: Path
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD
    gateway_config: Path | None = None
    budget_epsilon: float = 10.0
    budget_delta: float = 1e-5
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace).expanduser().resolve()
        if not self.workspace.is_dir():
            raise InvalidInputError(f"--workspace: directory does not exist: {self.workspace}; "
                                    "create it or pass another")
        if self.token is not None and len(self.token) < 16:
            raise InvalidInputError("--token must be at least 16 characters (e.g. from "
                                    "`python -c 'import secrets; print(secrets.token_urlsafe())'`)")
        if not is_loopback(self.host) and self.token is None:
            raise UnsafeConfigurationError(
                f"--host {self.host} lets other machines connect: pass --token SECRET (every "
                "browser must then open the URL with ?token=SECRET once), or keep 127.0.0.1")
        if self.max_upload_bytes < 1:
            raise InvalidInputError(f"--max-upload-mb must be positive, got "
                                    f"{self.max_upload_bytes} bytes")
        if self.gateway_config is not None:
            self.gateway_config = Path(self.gateway_config).expanduser().resolve()
            if not self.gateway_config.is_file():
                raise InvalidInputError(f"--gateway-config: file not found: "
                                        f"{self.gateway_config}")
        self.state_dir.mkdir(exist_ok=True)

    @property
    def state_dir(self) -> Path:
        return self.workspace / STATE_DIR

    @property
    def ledger_path(self) -> Path:
        """The workspace's budget ledger: one per workspace, one principal per data source."""
        return self.state_dir / "ledger.db"


def inside(root: Path, relative: str) -> Path:
    """`root / relative`, resolved (symlinks followed), refused unless it stays inside `root`.

    Every path a browser names goes through here: `..`, absolute paths, symlinks out of the
    workspace and NUL bytes are refused with one line, before anything is opened."""
    if not isinstance(relative, str) or not relative or "\x00" in relative:
        raise InvalidInputError("path: give a file name inside the workspace")
    if Path(relative).is_absolute() or relative.startswith(("/", "\\", "~")):
        raise InvalidInputError(f"path {relative!r}: absolute paths are refused; name a file "
                                "inside the workspace")
    base = root.resolve()
    target = (base / relative).resolve()
    if target != base and not target.is_relative_to(base):
        raise InvalidInputError(f"path {relative!r} is outside the workspace; name a file "
                                "inside it")
    if STATE_DIR in target.relative_to(base).parts:
        raise InvalidInputError(f"path {relative!r}: the studio's own files are not data")
    return target


def workspace_files(root: Path, limit: int = 500) -> list[str]:
    """Data files under the workspace (relative names, sorted), the studio's state excluded."""
    base = root.resolve()
    out: list[str] = []
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base)
        if STATE_DIR in rel.parts or any(p.startswith(".") for p in rel.parts):
            continue
        if path.is_file() and path.name.lower().endswith(DATA_SUFFIXES):
            try:
                inside(base, str(rel))
            except InvalidInputError:
                continue  # a symlink out of the workspace is not offered
            out.append(str(rel))
            if len(out) >= limit:
                break
    return out
