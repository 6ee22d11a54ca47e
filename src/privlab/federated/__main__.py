"""`python -m privlab.federated {train,serve,client} ...`: the `privlab federated` verbs alone.

Same commands as `privlab federated ...`; loads only this verb, so Flower client processes
start faster than through the full CLI. Errors map to the same one-line messages and exit codes
(`privlab.cli.exits.run_command`, the CLI's own mapping).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from privlab.cli.exits import run_command
    from privlab.cli.federated import federated_app

    return run_command(federated_app, argv, "privlab federated")


if __name__ == "__main__":
    sys.exit(main())
