"""Text that every supported database can store."""

from __future__ import annotations


def escape_nul(text: str | None) -> str | None:
    """NUL cannot be stored in PostgreSQL text (SQLite would keep it): write it as the four
    characters `\\x00` on every backend, so a hostile string is recorded, not a crash."""
    return None if text is None else text.replace("\x00", "\\x00")
