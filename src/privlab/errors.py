"""The error model: one base class, a few subclasses, each with the CLI exit code it maps to.

A user's mistake is a `PrivlabError` with a one-line message that names the field and the
fix; the CLI prints that line and exits with `exit_code`, never a traceback.
"""

from __future__ import annotations


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
