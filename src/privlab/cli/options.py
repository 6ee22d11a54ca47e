"""The CLI's shared options, generated from the grammar table (`privlab.cli.grammar.SPELLINGS`).

Why: each option concept (`--json`, `--seed`, `-o/--out`, `--epsilon`, `--schema`, ...) used to
be spelled by hand in every command that took it (`--json` 24 times in 16 files), and the
grammar test could only catch a drifted spelling after the fact. Here the flags come from the
table, so a command cannot spell a concept differently:

- `option(concept, help)` is the `typer.Option` of a concept whose help is the command's own:
  `epsilon: Annotated[float, option("epsilon", "Epsilon per window, > 0.")] = ...`;
- the ready `Annotated` types carry a help text several commands share:
  `as_json: Json = False`, `allow_weak: AllowWeak = False`, `seed: TestingSeed = None`.

Defaults stay in each command's signature (`= ...` for a required option), as Typer wants
with `Annotated`. `tests/cli/test_grammar.py` fails on a `typer.Option` outside this module
that names a flag of the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from privlab.cli.common import ALLOW_WEAK_HELP
from privlab.cli.grammar import DEPRECATED, SPELLINGS
from privlab.errors import InvalidInputError


def flags(concept: str) -> tuple[str, ...]:
    """The concept's long flag and, where the grammar gives one, its short flag."""
    long, short, _meaning = SPELLINGS[concept]
    return (long, short) if short else (long,)


def option(concept: str, help: str, **settings: Any) -> Any:
    """`typer.Option` with the grammar's flags of `concept` (a key of `SPELLINGS`), for
    `Annotated` (its default `...` here: the command's signature gives the default)."""
    return typer.Option(..., *flags(concept), help=help, **settings)


def deprecated_option(old: str) -> Any:
    """The hidden alias `old` of a renamed flag (`grammar.DEPRECATED`): still accepted, with one
    warning line from the command, never shown in --help."""
    return typer.Option(..., old, hidden=True, help=f"Deprecated: {DEPRECATED[old]}.")


# help texts that several commands share, each written once
MACHINE_OUTPUT = "Machine-readable output."
TESTING_SEED = "Reproducible noise: for testing ONLY (default: fresh randomness)."
TESTING_RUN_SEED = "Reproducible run (seeded noise): testing ONLY (default: fresh randomness)."
ON_INVALID = "With --schema: refuse (one-line error) or coerce values outside it."
REPORT = "Write an HTML report here (default: none)."
CHARGE_LEDGER = "Budget ledger (SQLite file or DB URL; default: none, nothing is charged)."
CHARGE_PRINCIPAL = "Whose budget to charge (with --ledger; default: none)."

#: `--json`: one JSON document on stdout (`cli.common.emit_json`).
Json = Annotated[bool, option("machine output", MACHINE_OUTPUT)]
#: `--allow-weak`: the one delta policy's escape (`cli.common.check_delta_policy`).
AllowWeak = Annotated[bool, option("weak delta", ALLOW_WEAK_HELP)]
#: `--seed` of a command whose only randomness is DP noise.
TestingSeed = Annotated[int, option("seed", TESTING_SEED)]
#: `--seed` of a command that also splits and initialises (train, choose-epsilon).
TestingRunSeed = Annotated[int, option("seed", TESTING_RUN_SEED)]
#: `--on-invalid` beside `--schema`.
OnInvalid = Annotated[str, option("invalid rows", ON_INVALID)]
#: `--report`: an HTML report, none by default.
Report = Annotated[Path, option("report", REPORT)]
#: `--ledger` / `--principal` of a command that charges its release (both or neither:
#: `check_charge_options`).
ChargeLedger = Annotated[str, option("ledger", CHARGE_LEDGER)]
ChargePrincipal = Annotated[str, option("principal", CHARGE_PRINCIPAL)]
#: `--drop`: the old spelling of `--exclude`.
DropAlias = Annotated[str, deprecated_option("--drop")]

__all__ = ["CHARGE_LEDGER", "CHARGE_PRINCIPAL", "ON_INVALID", "REPORT", "TESTING_RUN_SEED",
           "TESTING_SEED", "AllowWeak", "ChargeLedger", "ChargePrincipal", "DropAlias", "Json",
           "MACHINE_OUTPUT", "OnInvalid", "Report", "TestingRunSeed", "TestingSeed",
           "check_charge_options", "deprecated_option", "flags", "option"]


def check_charge_options(ledger: str | None, principal: str | None) -> None:
    """`--ledger` and `--principal` come together or not at all (a charge needs both)."""
    if (ledger is None) != (principal is None):
        raise InvalidInputError("--ledger and --principal go together")
