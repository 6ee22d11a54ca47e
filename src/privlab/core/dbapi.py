"""`write_transaction` moved into the store (`privlab.core.store.dbapi`), beside the rest of the
database handling; this path keeps working."""

from privlab.core.store.dbapi import write_transaction

__all__ = ["write_transaction"]
