"""`privlab anonymize FILE --quasi-identifiers A,B --k K [--l L --sensitive S] --out OUT.csv`:
Mondrian generalization, verified with the assess checker before it is written. With
`--schema` the rows are conformed to the declaration, its identifier/text columns are dropped,
and numeric intervals are cut over the declared bounds (docs/assess.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privlab.cli.common import (
    check_column_options,
    console,
    emit_json,
    err_console,
    exclude_columns,
    parse_list,
)
from privlab.cli.options import DropAlias, Json, option
from privlab.data.io import read_table
from privlab.errors import InvalidInputError


def anonymize_cmd(
    file: Path = typer.Argument(..., help="CSV / TSV / Parquet file."),
    quasi_identifiers: Annotated[str, option("quasi-identifiers",
                                             "Quasi-identifier columns A,B,C.")] = ...,
    k: int = typer.Option(..., "--k", help="Every class gets at least k records (>= 2)."),
    l_div: int = typer.Option(None, "--l", help="Also at least l distinct "
                                "sensitive values (default: k-anonymity only)."),
    sensitive: Annotated[str, option("sensitive",
                                     "Sensitive attribute (needed with --l; without it: no "
                                     "l-diversity).")] = None,
    out: Annotated[Path, option("output file", "Output: .csv, .csv.gz or .parquet.")] = ...,
    exclude: Annotated[str, option("columns to leave out",
                                   "Columns to leave out (direct identifiers; default: none, or "
                                   "the schema's identifiers).")] = None,
    drop: DropAlias = None,
    delimiter: str = typer.Option(None, "--delimiter", help="Field delimiter (sniffed if unset)."),
    schema: Annotated[str, option("declared schema",
                                  "Declared public schema: a bundled name (privlab schema list) or "
                                  "a YAML/JSON file. Identifier/text columns are dropped (refused "
                                  "as a QI); numeric intervals are cut over the declared bounds, "
                                  "not the data's min/max. Default: generalise the "
                                  "values present.")] = None,
    on_invalid: Annotated[str, option("invalid rows",
                                      "With --schema: refuse (exit 2, one line naming the column, "
                                      "nothing written) or coerce (clamp, <other>/missing, drop "
                                      "rows with no place) values outside it.")] = "refuse",
    as_json: Json = False,
) -> None:
    """Generalize quasi-identifiers with Mondrian to reach k-anonymity (and l-diversity)."""
    from privlab.anonymize import mondrian
    from privlab.schema import check_policy, load_schema
    from privlab.utils.atomic import atomic_write_frame

    name = out.name.lower()
    if not (name.endswith(".csv") or name.endswith(".csv.gz") or name.endswith(".parquet")):
        raise InvalidInputError(f"--out must end in .csv, .csv.gz or .parquet, got {out}")
    if not out.parent.exists():
        raise InvalidInputError(f"--out directory does not exist: {out.parent}")
    qis = parse_list(quasi_identifiers, "--quasi-identifiers") or []
    check_policy(on_invalid)
    declared = load_schema(schema) if schema is not None else None  # before reading rows
    # --schema: cells as text, typed by the declaration; without one k-anonymity is NOT DP
    # and reads pandas' types
    frame = read_table(file, delimiter=delimiter, infer=declared is None)
    leave_out = exclude_columns(exclude, drop)
    # every column-naming option names a column of DATA (one line naming it, exit 2)
    check_column_options(frame, file.name, {"--quasi-identifiers": qis, "--sensitive": sensitive,
                                            "--exclude": leave_out})
    result = mondrian(frame, qis, k, l_div=l_div, sensitive=sensitive,
                      drop=leave_out, schema=declared,
                      on_invalid=on_invalid)
    atomic_write_frame(result.frame, out)
    payload = {"input": str(file), "out": str(out), **result.to_dict()}
    if as_json:
        emit_json(payload)
        return
    loss = payload["information_loss"]
    console.print(result.guarantee.headline(), style="bold red", highlight=False)
    if result.schema is not None:
        sch = result.schema
        console.print(f"declared schema {sch['name']!r} ({sch['fingerprint']}), --on-invalid "
                      f"{sch['on_invalid']}: {sch['rows_dropped']:,} of {sch['rows_read']:,} "
                      "rows dropped by the schema; left out: "
                      f"{', '.join(sch['dropped']) or 'none'}", highlight=False)
    console.print(f"wrote {result.rows_out:,} rows to {out}: {result.classes:,} classes, "
                  f"checked k = {result.achieved['k']}"
                  + (f", l = {result.achieved['l']}" if "l" in result.achieved else ""))
    console.print(f"information loss: NCP {loss['ncp']:.4f}, discernibility "
                  f"{loss['discernibility']:,}, average class size / k "
                  f"{loss['avg_class_size_ratio']:.2f}; suppressed {result.suppressed:,}")
    for w in result.warnings:
        err_console.print(f"warning: {w}")
    for note in result.guarantee.notes:
        err_console.print(f"warning: {note}")


def register(app: typer.Typer) -> None:
    app.command("anonymize")(anonymize_cmd)
