"""Entry point: builds the Typer app from one module per verb and maps errors to exit codes.

Exit codes (also in `privlab --help`, `EXIT_CODES`): 0 ok; 1 the gateway could not be reached
or refused the request (wrong API key, rate limit: `privlab query`), or an internal error; 2
invalid input; 3 budget exceeded; 4 unsafe configuration (e.g. a delta too large without
--allow-weak); 5 an optional extra is missing (the message gives the pip command); 130
interrupted. A `PrivlabError` prints one line (`error: ...`) and no traceback.
"""

from __future__ import annotations

import os
import sys

import click
import typer

from privlab import __version__
from privlab.cli.common import one_line_warnings
from privlab.errors import InvalidInputError, PrivlabError, cli_context

EXIT_CODES = {
    0: "success",
    1: "the gateway could not be reached or refused the request (wrong API key, rate "
       "limit), or an internal error",
    2: "invalid input (the message names the option and the fix)",
    3: "privacy budget exceeded: nothing was released",
    4: "unsafe configuration (e.g. a delta too large without --allow-weak)",
    5: "an optional extra is missing (the message gives the pip command)",
    130: "interrupted",
}

app = typer.Typer(
    name="privlab",
    help="Assess, protect, audit and choose epsilon for personal data.",
    epilog="Exit codes: " + "; ".join(f"{k} {v}" for k, v in EXIT_CODES.items()) + ".",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"privlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """privlab: assess -> protect -> audit -> choose epsilon -> report."""


def _register() -> None:
    # One module per verb; each exposes `register(app)`.
    from privlab.cli import (
        anonymize,
        assess,
        audit,
        budget,
        choose_epsilon,
        datasets,
        demo,
        federated,
        query,
        release,
        schema,
        serve,
        studio,
        synth,
        train,
        trajectory,
    )

    for module in (anonymize, assess, audit, budget, choose_epsilon, datasets, demo, federated,
                   query, release, schema, serve, studio, synth, train, trajectory):
        module.register(app)


_register()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (used by `run` and by the tests)."""
    try:
        with cli_context(), one_line_warnings():
            rv = app(args=argv, prog_name="privlab", standalone_mode=False)
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
    except Exception as exc:  # a bug, not a user mistake: short message, traceback on request
        if os.environ.get("PRIVLAB_DEBUG"):
            raise
        click.echo(f"internal error: {type(exc).__name__}: {exc} (set PRIVLAB_DEBUG=1 for the "
                   "traceback and please report it)", err=True)
        return 1
    return rv if isinstance(rv, int) else 0


def run() -> None:
    sys.exit(main())
