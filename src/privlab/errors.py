"""The error model: one base class, a few subclasses, each with the CLI exit code it maps to.

A user's mistake is a `PrivlabError` with a one-line message that names the field and the
fix; the CLI prints that line and exits with `exit_code`, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class PrivlabError(Exception):
    """Base class of every error privlab raises on purpose."""

    exit_code: int = 1


class InvalidInputError(PrivlabError, ValueError):
    """Bad input: a value out of range, a missing column, an unreadable file (exit code 2)."""

    exit_code = 2


class BudgetExceededError(PrivlabError):
    """A charge would take a principal past its privacy budget; nothing was released (exit 3)."""

    exit_code = 3


class UnsafeConfigurationError(PrivlabError):
    """A configuration that would not deliver the privacy it claims (exit code 4)."""

    exit_code = 4


class MissingExtraError(PrivlabError):
    """An optional dependency (extra) the command needs is not installed (exit code 5)."""

    exit_code = 5


#: The optional extra (pyproject.toml) that installs each optional top-level module, so that
#: an ImportError anywhere below a command becomes exit 5 with the install command.
EXTRA_OF_MODULE: dict[str, str] = {
    "torch": "ml", "opacus": "ml", "transformers": "ml", "tokenizers": "ml",
    "fastapi": "server", "uvicorn": "server", "pydantic": "server", "sqlglot": "server",
    "httpx": "server", "anyio": "server", "psycopg": "postgres", "folium": "geo",
    "flwr": "federated", "pyspark": "spark",
}


def missing_extra(module: str, what: str) -> MissingExtraError:
    """The one-line exit-5 error for `what` when the optional `module` is not installed."""
    top = module.split(".")[0]
    extra = EXTRA_OF_MODULE.get(top, "all")
    return MissingExtraError(f"{what} needs the [{extra}] extra (missing: {top}); install it "
                             f"with: pip install 'privlab[{extra}]'")


def missing_extra_from(exc: ImportError, what: str) -> MissingExtraError | None:
    """`missing_extra` when `exc` is the import of an optional extra's module, else None
    (a missing core dependency or a broken import is a bug, not a missing extra)."""
    name = getattr(exc, "name", None) or ""
    if not isinstance(exc, ModuleNotFoundError) or name.split(".")[0] not in EXTRA_OF_MODULE:
        return None
    return missing_extra(name, what)


# Which name a one-line error should use for a setting: the CLI option a user typed inside
# `privlab ...`, the Python parameter when the library is called directly. `privlab.cli.main`
# sets this for the length of one command; library code asks `option_name`.
_IN_CLI: ContextVar[bool] = ContextVar("privlab_in_cli", default=False)


@contextmanager
def cli_context() -> Iterator[None]:
    """Mark the enclosed code as running under the `privlab` CLI (errors name CLI options)."""
    token = _IN_CLI.set(True)
    try:
        yield
    finally:
        _IN_CLI.reset(token)


@contextmanager
def library_context() -> Iterator[None]:
    """Undo `cli_context` inside a command that serves library callers (the HTTP gateway):
    errors there name request fields and parameters, not CLI options."""
    token = _IN_CLI.set(False)
    try:
        yield
    finally:
        _IN_CLI.reset(token)


def in_cli() -> bool:
    """True while a `privlab` command runs (see `cli_context`)."""
    return _IN_CLI.get()


def option_name(param: str, cli: str) -> str:
    """`cli` (e.g. "--batch-size") under the CLI, the Python parameter `param` otherwise."""
    return cli if _IN_CLI.get() else param


def setting(param: str, cli: str, value: object) -> str:
    """A setting and its value as the caller wrote it: "--batch-size 64" or "batch_size=64"."""
    return f"{cli} {value}" if _IN_CLI.get() else f"{param}={value}"
