"""The CLI's one grammar: each option concept has one spelling (long flag and short flag).

Why a module: the docs table (docs/cli.md) and the test that walks the Typer app
(tests/cli/test_grammar.py) both read this table, so a command that spells a shared concept
differently (``--target`` without ``-t``, ``--out`` without ``-o``) fails CI instead of
surprising a newcomer.
"""

from __future__ import annotations

# concept -> (long flag, short flag or None, meaning)
SPELLINGS: dict[str, tuple[str, str | None, str]] = {
    "label column": ("--target", "-t", "Label (class) column"),
    "epsilon": ("--epsilon", "-e", "Privacy budget epsilon of this run"),
    "delta": ("--delta", None, "Privacy delta; one policy (check_delta_strength) everywhere"),
    "weak delta": ("--allow-weak", None, "Accept a delta above the safe bound (exit 4 otherwise)"),
    "declared schema": ("--schema", None, "Declared public schema (bundled name or YAML path)"),
    "invalid rows": ("--on-invalid", None, "With --schema: refuse (exit 2) or coerce bad values"),
    "contribution bound": ("--max-rows-per-unit", None,
                           "Rows kept per person with a person-level schema (first M)"),
    "machine output": ("--json", None, "Machine-readable output on stdout"),
    "seed": ("--seed", None, "Seeded noise, for testing only"),
    "output file": ("--out", "-o", "Where the output file (or folder) is written"),
    "report": ("--report", None, "Where the HTML report is written"),
    "ledger": ("--ledger", None, "Budget ledger database"),
    "principal": ("--principal", None, "Whose budget a release is charged to"),
    "quasi-identifiers": ("--quasi-identifiers", "-q", "Columns that identify in combination"),
    "sensitive": ("--sensitive", "-s", "Sensitive columns"),
    "rows": ("--rows", "-n", "Number of rows to generate"),
    "columns to leave out": ("--exclude", None, "Columns not used (--drop: deprecated alias)"),
}

# deprecated spellings: hidden from --help, still accepted with one warning line
DEPRECATED: dict[str, str] = {"--drop": "--exclude"}

# short flags that name a different concept per command (documented, not a conflict):
# -m is the one "which algorithm" flag (--model / --method / --mechanism), -c the one
# "which column/config" flag of a single-purpose command.
SHARED_SHORT: dict[str, set[str]] = {
    "-m": {"--model", "--method", "--mechanism"},
    "-c": {"--column", "--config"},
    "-w": {"--workspace"},
}

# long flags whose short flag every command must offer (a newcomer types `-t` everywhere)
REQUIRED_SHORT: frozenset[str] = frozenset({"--target", "--quasi-identifiers", "--sensitive",
                                           "--out"})

# commands that read a table of rows (a DATA argument): each must take --schema
READS_ROWS: frozenset[str] = frozenset({
    "anonymize", "assess", "audit", "choose-epsilon", "release", "release plan", "synth",
    "train",
    "federated train", "federated serve", "federated client", "schema check",
    "trajectory anonymize", "trajectory experiment",
})


def markdown_table() -> str:
    """The docs table (docs/cli.md between its markers), generated from SPELLINGS."""
    lines = ["| concept | long flag | short | meaning |", "|---|---|---|---|"]
    for concept, (long, short, meaning) in SPELLINGS.items():
        lines.append(f"| {concept} | `{long}` | {f'`{short}`' if short else '-'} | {meaning} |")
    return "\n".join(lines)


# value syntax -> (spelling, example, meaning): one way to write each kind of value
VALUE_SYNTAX: dict[str, tuple[str, str, str]] = {
    "numeric range": ("LO:HI", "--bounds -5:5", "Two numbers, colon-separated (LO,HI: "
                      "deprecated, accepted with one warning line)"),
    "per-column ranges": ("COL=LO:HI[,COL=LO:HI]", "--bounds age=17:90,hours=1:99",
                          "One range per named column, comma-separated"),
    "list": ("A,B,C", "--exclude fnlwgt,race", "Comma-separated names or numbers"),
}

# options whose value is a numeric range (`LO:HI`, parsed by cli.common.parse_range) or
# per-column ranges (`COL=LO:HI,...`, cli.common.parse_column_ranges)
RANGE_OPTIONS: frozenset[str] = frozenset({"--bounds", "--rating-range", "--heading"})

# An option whose default is None shows no `[default: ...]` in --help, so its help text must
# say what happens when it is omitted: it contains one of these words (case-insensitive).
OMITTED_WORDS: tuple[str, ...] = ("default", "unset", "if omitted", "without it", "optional")



def value_table() -> str:
    """The docs table of value spellings (docs/cli.md), generated from VALUE_SYNTAX."""
    lines = ["| value | spelling | example | meaning |", "|---|---|---|---|"]
    for concept, (syntax, example, meaning) in VALUE_SYNTAX.items():
        lines.append(f"| {concept} | `{syntax}` | `{example}` | {meaning} |")
    return "\n".join(lines)
