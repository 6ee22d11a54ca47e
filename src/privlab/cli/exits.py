"""Errors to exit codes, one mapping for every entry point (`privlab`, `python -m
privlab.cli.federated`): a `PrivlabError` prints one line and exits with its code; an import of
a missing optional extra exits 5 with the install command; a bug prints one line (the
traceback with PRIVLAB_DEBUG=1) and exits 1.

Kept apart from `privlab.cli.main` because importing that module registers every verb;
`python -m privlab.cli.federated` must load only its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from privlab.cli.common import one_line_warnings
from privlab.errors import InvalidInputError, PrivlabError, cli_context, missing_extra_from


def _command_name(prog_name: str, argv: Sequence[str] | None) -> str:
    """"privlab audit" for `privlab audit data.csv ...` (names the command in exit-5 lines)."""
    args = sys.argv[1:] if argv is None else argv
    verb = next((a for a in args if not a.startswith("-")), None)
    return f"{prog_name} {verb}" if verb else prog_name


def run_command(command: Callable[..., Any], argv: Sequence[str] | None, prog_name: str) -> int:
    """Run a Click/Typer command without standalone mode and return its exit code."""
    try:
        with cli_context(), one_line_warnings():
            rv = command(args=None if argv is None else list(argv), prog_name=prog_name,
                         standalone_mode=False)
    except PrivlabError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return 2 if isinstance(exc, click.UsageError) else exc.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        return 130
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        click.echo(f"error: {exc.strerror or exc}: {exc.filename}", err=True)
        return InvalidInputError.exit_code
    except Exception as exc:
        if isinstance(exc, ImportError):
            missing = missing_extra_from(exc, _command_name(prog_name, argv))
            if missing is not None:
                click.echo(f"error: {missing}", err=True)
                return missing.exit_code
        # a bug, not a user mistake: short message, traceback on request
        if os.environ.get("PRIVLAB_DEBUG"):
            raise
        click.echo(f"internal error: {type(exc).__name__}: {exc} (set PRIVLAB_DEBUG=1 for the "
                   "traceback and please report it)", err=True)
        return 1
    return rv if isinstance(rv, int) else 0
