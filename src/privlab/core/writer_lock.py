"""`WriterLock` moved into the store (`privlab.core.store.writer_lock`), beside the rest of the
database handling; this path keeps working."""

from privlab.core.store.writer_lock import LOCK_SUFFIX, WriterLock, sqlite_file

__all__ = ["LOCK_SUFFIX", "WriterLock", "sqlite_file"]
