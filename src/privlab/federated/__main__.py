"""`python -m privlab.federated {train,serve,client} ...`: the `privlab federated` verbs alone.

Same commands as `privlab federated ...`; loads only this verb, so Flower client processes
start faster than through the full CLI. Errors map to the same one-line messages and exit codes.
"""

from __future__ import annotations

import sys

import click

from privlab.errors import PrivlabError


def main(argv: list[str] | None = None) -> int:
    from privlab.cli.federated import federated_app

    try:
        rv = federated_app(args=argv, prog_name="privlab federated", standalone_mode=False)
    except PrivlabError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return 2 if isinstance(exc, click.UsageError) else exc.exit_code
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
