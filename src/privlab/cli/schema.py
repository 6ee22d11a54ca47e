"""`privlab schema list|show|draft|check|from-domain`: declared public schemas (docs/schema.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from privlab.cli.common import console, emit_json, err_console
from privlab.cli.options import Json, option
from privlab.errors import InvalidInputError

schema_app = typer.Typer(help="Declared public schemas: the public domain of every column.",
                         no_args_is_help=True)


@schema_app.command("list")
def list_cmd(as_json: Json = False) -> None:
    """List the schemas bundled for privlab's datasets."""
    from privlab.schema import BUNDLED_SCHEMAS, bundled_schema

    rows = []
    for name in BUNDLED_SCHEMAS:
        s = bundled_schema(name)
        rows.append({"name": name, "columns": len(s.columns), "privacy_unit": s.privacy_unit,
                     "fingerprint": s.fingerprint()})
    if as_json:
        emit_json({"schemas": rows})
        return
    table = Table("name", "columns", "privacy unit", "fingerprint")
    for r in rows:
        table.add_row(r["name"], str(r["columns"]), r["privacy_unit"], r["fingerprint"])
    console.print(table)


@schema_app.command("show")
def show_cmd(
    source: str = typer.Argument(..., help="A bundled schema name or a YAML/JSON file."),
    as_json: Annotated[bool, option("machine output", "JSON instead of YAML.")] = False,
) -> None:
    """Print a schema (validated) as YAML or JSON."""
    from privlab.schema import load_schema

    schema = load_schema(source)
    if as_json:
        emit_json(schema.to_dict() | {"fingerprint": schema.fingerprint()})
        return
    typer.echo(schema.to_yaml(), nl=False)


@schema_app.command("draft")
def draft_cmd(
    data: Path = typer.Argument(..., help="CSV/TSV/Parquet file to draft a schema from."),
    name: str = typer.Option(None, "--name", help="Schema name (default: the file's stem)."),
    out: Annotated[Path, option("output file",
                                "Write the draft here (atomically; default: stdout).")] = None,
) -> None:
    """Draft a schema FROM THE DATA (private!): review it before use; drafts are refused."""
    from privlab.data.io import read_table
    from privlab.schema import draft_schema, draft_yaml
    from privlab.utils.atomic import atomic_write_text

    frame = read_table(data)
    schema = draft_schema(frame, name=name or data.name.split(".")[0])
    text = draft_yaml(schema)
    err_console.print(
        "[bold red]WARNING[/]: this draft was computed from the data itself: its categories "
        "and bounds are private. Review every column, replace them with public, documented "
        "values, treat the file as public, then delete 'draft: true'. privlab refuses a "
        "draft until then.", highlight=False)
    if out is None:
        typer.echo(text, nl=False)
        return
    if not out.parent.is_dir():
        raise InvalidInputError(f"--out: directory does not exist: {out.parent}")
    atomic_write_text(out, text)
    err_console.print(f"draft written to {out}", highlight=False)


@schema_app.command("check")
def check_cmd(
    data: Path = typer.Argument(..., help="CSV/TSV/Parquet file to check."),
    schema_source: Annotated[str, option("declared schema",
                                         "Bundled schema name or YAML/JSON file.")] = ...,
    as_json: Json = False,
) -> None:
    """For the data's curator: does every value fit the schema? (Prints facts about the
    data; nothing here is private-safe to publish.)"""
    from privlab.data.io import read_table
    from privlab.schema import conform, load_schema

    schema = load_schema(schema_source)
    frame = read_table(data)
    problems: list[str] = []
    for col in schema.columns:
        if col.name not in frame.columns:
            problems.append(f"column {col.name!r}: missing from the data")
            continue
        try:
            conform(frame[[col.name]], schema, "refuse", columns=[col.name])
        except InvalidInputError as exc:
            problems.append(str(exc).split("; fix the data")[0])
    extra = [str(c) for c in frame.columns if schema.get(str(c)) is None]
    problems += [f"column {c!r}: not declared in the schema" for c in extra]
    if as_json:
        emit_json({"schema": schema.name, "fingerprint": schema.fingerprint(),
                   "fits": not problems, "problems": problems,
                   "note": "curator-only: these facts come from the private data"})
    else:
        for p in problems:
            console.print(f"  {p}", highlight=False)
        console.print("fits the schema" if not problems else
                      f"{len(problems)} column(s) do not fit (curator-only output)")
    if problems:
        raise typer.Exit(2)


@schema_app.command("from-domain")
def from_domain_cmd(
    source: Path = typer.Argument(..., help="A retired `--domain` JSON declaration."),
    out: Annotated[Path, option("output file",
                                "Write the schema here (atomically; default: stdout).")] = None,
    name: str = typer.Option(None, "--name", help="Schema name (default: the file's stem)."),
) -> None:
    """Convert a retired --domain JSON declaration into a schema (reads no data). A column
    whose categories / bounds were left unset is refused by name: declare public ones."""
    from privlab.synth.legacy import read_domain_json, schema_from_domain
    from privlab.utils.atomic import atomic_write_text

    if out is not None and not out.parent.is_dir():
        raise InvalidInputError(f"--out: directory does not exist: {out.parent}")
    _, decl = read_domain_json(source)
    schema, notes = schema_from_domain(decl, name or source.name.split(".")[0])
    text = schema.to_yaml()
    for note in notes:
        err_console.print(f"note: {note}", highlight=False)
    if out is None:
        typer.echo(text, nl=False)
        return
    atomic_write_text(out, text)
    err_console.print(f"schema written to {out} (use it with --schema {out})", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(schema_app, name="schema")
