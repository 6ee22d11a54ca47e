"""Studio settings and the safety checks everything else relies on: who may connect (a
token always, unless explicitly waived on loopback), which files it may touch (only inside
the workspace) and who else may read what it writes (nobody: its state folder is 0700, its
files 0600, its cookie key made once and kept there)."""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from privlab.errors import InvalidInputError, UnsafeConfigurationError
from privlab.utils.net import is_loopback

#: Files the data picker offers and the readers accept.
DATA_SUFFIXES = (".csv", ".tsv", ".csv.gz", ".tsv.gz", ".parquet", ".txt")
#: Largest upload accepted by default (bytes).
DEFAULT_MAX_UPLOAD = 20 * 2**20
#: The studio's own files inside the workspace (sessions' outputs, the ledger).
STATE_DIR = ".privlab-studio"
#: The key that signs the studio's cookies (in the state folder, 0600): kept across restarts
#: so that sessions survive one, never leaving the machine.
COOKIE_KEY = "cookie.key"


@dataclass
class StudioConfig:
    """What `privlab studio` was started with.

    `token`: every browser presents it once (the printed URL's `?token=`) and gets a cookie
    bound to it; None draws a random one per launch (Jupyter's model). `no_token=True` is
    the explicit, warned opt-out, loopback only: then any local user and any page that can
    reach the port gets a session. `secret` signs the cookies: by default the workspace's own
    key (`.privlab-studio/cookie.key`, made once, owner-only), so sessions survive a restart."""

    workspace: Path
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD
    gateway_config: Path | None = None
    budget_epsilon: float = 10.0
    budget_delta: float = 1e-5
    secret: bytes | None = None
    no_token: bool = False

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace).expanduser().resolve()
        if not self.workspace.is_dir():
            raise InvalidInputError(f"--workspace: directory does not exist: {self.workspace}; "
                                    "create it or pass another")
        self._check_token()
        if self.max_upload_bytes < 1:
            raise InvalidInputError(f"--max-upload-mb must be positive, got "
                                    f"{self.max_upload_bytes} bytes")
        if self.gateway_config is not None:
            self.gateway_config = Path(self.gateway_config).expanduser().resolve()
            if not self.gateway_config.is_file():
                raise InvalidInputError(f"--gateway-config: file not found: "
                                        f"{self.gateway_config}")
        secure_state_dir(self.state_dir)
        if self.secret is None:
            self.secret = cookie_key(self.state_dir)

    def _check_token(self) -> None:
        if self.no_token:
            if self.token is not None:
                raise InvalidInputError("--no-token and a token: choose one")
            if not is_loopback(self.host):
                raise UnsafeConfigurationError(
                    f"--host {self.host} lets other machines connect: --no-token is refused "
                    "there; drop --no-token (a random token is printed in the URL)")
            return
        if self.token is None:
            self.token = secrets.token_urlsafe(32)  # per launch, printed in the URL once
        elif len(self.token) < 16:
            raise InvalidInputError("token: must be at least 16 characters (e.g. from "
                                    "`python -c 'import secrets; print(secrets.token_urlsafe())'`)")

    @property
    def state_dir(self) -> Path:
        return self.workspace / STATE_DIR

    @property
    def ledger_path(self) -> Path:
        """The workspace's budget ledger: one per workspace, one principal per data source."""
        return self.state_dir / "ledger.db"


def secure_state_dir(path: Path) -> None:
    """Make the state folder (0700) and take every file and folder already under it to
    owner-only (0600 / 0700): an older studio left them world-readable. Refused when the
    folder belongs to another user (they could read or plant the studio's sessions)."""
    path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
        raise UnsafeConfigurationError(f"{path}: the studio's state folder is a link or belongs "
                                       "to another user; remove it or choose another workspace")
    os.chmod(path, 0o700)
    for root, dirs, files in os.walk(path):
        for name in dirs:
            _chmod_own(Path(root) / name, 0o700)
        for name in files:
            _chmod_own(Path(root) / name, 0o600)


def _chmod_own(path: Path, mode: int) -> None:
    info = path.lstat()
    if not stat.S_ISLNK(info.st_mode) and info.st_uid == os.getuid() \
            and stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o077 & (mode | 0o100))


def private_dir(path: Path) -> Path:
    """`path` made (with its missing parents, inside the state folder) owner-only (0700)."""
    missing = []
    parent = path
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
    if missing == [] and stat.S_IMODE(path.stat().st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def private_file(path: Path) -> Path:
    """`path` made owner-only (0600): uploads and session records are private rows."""
    os.chmod(path, 0o600)
    return path


def cookie_key(state_dir: Path) -> bytes:
    """The workspace's cookie key (32 random bytes, hex, 0600), made once."""
    return workspace_key(state_dir / COOKIE_KEY, "not a studio cookie key; remove it (every "
                         "browser then opens the printed URL again)")


def workspace_key(path: Path, not_a_key: str) -> bytes:
    """A workspace key file (32 random bytes, hex, 0600), made once: exclusive create, so two
    studios on one workspace agree on one key. `not_a_key`: the error when it is damaged."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32))
    text = path.read_text(encoding="ascii").strip()
    if len(text) != 64:
        raise InvalidInputError(f"{path}: {not_a_key}")
    return bytes.fromhex(text)


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
