"""`privlab datasets list|export`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from privlab.cli.common import console, emit_json
from privlab.cli.options import Json, option
from privlab.data.datasets import DATASETS, list_datasets, load_dataset
from privlab.errors import InvalidInputError
from privlab.utils.atomic import atomic_write_frame

OUTPUT_SUFFIXES = (".csv", ".csv.gz", ".parquet")

#: Datasets made of several tables, and their tables (the first is what the loader defaults to).
TABLES = {"movielens": ("ratings", "movies")}

datasets_app = typer.Typer(help="Bundled datasets (no network needed).", no_args_is_help=True)


@datasets_app.command("list")
def list_cmd(
    as_json: Json = False,
) -> None:
    """List the bundled and generated datasets."""
    rows = list_datasets()
    if as_json:
        emit_json({"datasets": rows})
        return
    table = Table("name", "description", "licence")
    for row in rows:
        table.add_row(row["name"], row["description"], row["licence"])
    console.print(table)


@datasets_app.command("export")
def export_cmd(
    name: str = typer.Argument(..., help="Dataset name (see `privlab datasets list`)."),
    path: Path = typer.Argument(..., help="Output file: .csv, .csv.gz or .parquet."),
    drop_missing: bool = typer.Option(False, "--drop-missing", help="Adult: drop rows with '?'."),
    rows: Annotated[int, option("rows",
                                "census/classification: number of rows (default: the generator's "
                                "own).")] = None,
    seed: Annotated[int, option("seed",
                                "census/classification: generator seed (default: the generator's "
                                "fixed one).")] = None,
    table: str = typer.Option(None, "--table",
                              help="movielens: which table, ratings (default) or movies."),
    as_json: Json = False,
) -> None:
    """Write a dataset to a file (atomically)."""
    # Check the destination before loading anything, so a bad path fails fast and writes nothing.
    if not path.name.lower().endswith(OUTPUT_SUFFIXES):
        raise InvalidInputError(f"unsupported output format for {path}: use .csv, .csv.gz "
                                "or .parquet")
    if not path.parent.is_dir():
        raise InvalidInputError(f"output directory does not exist: {path.parent}")
    if (rows is not None or seed is not None) and name in DATASETS and name not in (
            "census", "classification"):
        raise InvalidInputError("--rows and --seed apply to the census and classification "
                                "datasets only")
    options: dict = {}
    if table is not None and name in DATASETS:
        if name not in TABLES:
            raise InvalidInputError(f"--table applies only to datasets with several tables "
                                    f"({', '.join(TABLES)}); {name} has one")
        if table not in TABLES[name]:
            raise InvalidInputError(f"--table for {name} must be one of "
                                    f"{', '.join(TABLES[name])}, got {table!r}")
        options["table"] = table
    if drop_missing:
        if name != "adult":
            raise InvalidInputError("--drop-missing applies to the adult dataset only")
        options["drop_missing"] = True
    if rows is not None:
        if rows < 1:
            raise InvalidInputError(f"--rows must be >= 1, got {rows}")
        options["n" if name == "census" else "n_samples"] = rows
    if seed is not None:
        options["seed" if name == "census" else "random_state"] = seed
    frame = load_dataset(name, **options)
    atomic_write_frame(frame, path)
    chosen = {"table": table or TABLES[name][0]} if name in TABLES else {}
    if as_json:
        emit_json({"dataset": name, **chosen, "path": str(path), "rows": len(frame),
                   "columns": list(map(str, frame.columns))})
    else:
        which = f" ({chosen['table']})" if chosen else ""
        console.print(f"wrote {len(frame):,} rows of {name}{which} to {path}")


def register(app: typer.Typer) -> None:
    app.add_typer(datasets_app, name="datasets")
