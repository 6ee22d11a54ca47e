"""Entry point: builds the Typer app from one module per verb and maps errors to exit codes.

Exit codes (also in `privlab --help`, `EXIT_CODES`): 0 ok; 1 the gateway could not be reached
or refused the request (wrong API key, rate limit: `privlab query`), or an internal error; 2
invalid input; 3 budget exceeded; 4 unsafe configuration (e.g. a delta too large without
--allow-weak); 5 an optional extra is missing (the message gives the pip command); 130
interrupted. A `PrivlabError` prints one line (`error: ...`) and no traceback.
"""

from __future__ import annotations

import sys

import typer

from privlab import __version__
from privlab.cli.exits import run_command

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
    # every option shows its default in --help (issue 23: one grammar); inherited by sub-apps
    context_settings={"show_default": True},
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
    return run_command(app, argv, "privlab")


def run() -> None:
    sys.exit(main())
