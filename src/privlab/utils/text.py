"""Text that every supported database can store."""

from __future__ import annotations


def escape_nul(text: str | None) -> str | None:
    """NUL cannot be stored in PostgreSQL text (SQLite would keep it): write it as the four
    characters `\\x00` on every backend, so a hostile string is recorded, not a crash. A lone
    UTF-16 surrogate (JSON `"\\ud800"`) cannot be encoded as UTF-8 by either driver: it is
    written as the six characters `\\ud800`."""
    if text is None:
        return None
    text = text.replace("\x00", "\\x00")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
