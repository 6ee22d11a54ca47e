"""Where a store lives: a path or URL read as a SQLAlchemy `URL`, and SQLite's files on disk.

A plain path is a SQLite file (`sqlite:///<absolute path>`); a URL must be SQLite or
PostgreSQL (`postgresql://` means psycopg 3, the driver privlab ships with). A bad value is
one line naming the setting (`--ledger`, `audit`) and the fix, before anything is created.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from privlab.core.store.writer_lock import LOCK_SUFFIX, sqlite_file
from privlab.errors import InvalidInputError

__all__ = ["SQLITE_SIDECARS", "database_url", "remove_sqlite_files", "same_database"]

#: SQLite's own files beside a database `<db>` (rollback journal, WAL and its index).
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")


def database_url(target: str | os.PathLike[str] | URL, *, setting: str,
                 example: str) -> URL:
    """`target` as a URL; `setting` names it in errors (`--ledger`), `example` is a file name
    for the error's example URL."""
    if isinstance(target, URL):
        url = target
    else:
        text = os.fspath(target)
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(f"{setting} must be a file path or a database URL, "
                                    f"got {target!r}")
        if "://" in text:
            try:
                url = make_url(text)
            except (ArgumentError, ValueError):
                raise InvalidInputError(f"{setting} {text!r} is not a valid database URL "
                                        f"(e.g. sqlite:///{example})") from None
        else:
            url = URL.create("sqlite", database=str(Path(text).expanduser().resolve()))
    backend = url.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise InvalidInputError(f"{setting} database {backend!r} is not supported; use a "
                                "SQLite path or a postgresql+psycopg:// URL")
    if backend == "postgresql" and url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    path = sqlite_file(url.database) if backend == "sqlite" else None
    if path is not None:
        if path.is_dir():
            raise InvalidInputError(f"{setting} {path} is a directory; give a file path")
        if not path.parent.is_dir():
            raise InvalidInputError(f"{setting} directory {path.parent} does not exist; "
                                    "create it first")
    return url


def same_database(a: URL, b: URL) -> bool:
    """Whether two stores are one database (one transaction can hold both's rows): the same
    SQLite file, or the same PostgreSQL URL. In-memory and URI SQLite databases never are."""
    if a.get_backend_name() != b.get_backend_name():
        return False
    if a.get_backend_name() == "sqlite":
        fa, fb = sqlite_file(a.database), sqlite_file(b.database)
        return fa is not None and fb is not None and \
            os.path.realpath(fa) == os.path.realpath(fb)
    return bool(a.render_as_string(hide_password=False)
                == b.render_as_string(hide_password=False))


def remove_sqlite_files(base: Path, *, database: bool = True) -> None:
    """Remove a SQLite database's journal files and writer lock (and with `database`, the
    file itself), where present."""
    for suffix in ("", *SQLITE_SIDECARS, LOCK_SUFFIX) if database else SQLITE_SIDECARS:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{base}{suffix}")
