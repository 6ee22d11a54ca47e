"""`privlab assess FILE`: attribute richness and tiers (the attribute-based PIA article,
docs/references.md), risky combinations, privacy models on quasi-identifiers, recommendations;
`--json` and `--report OUT.html`. With `--schema` the declaration decides each column's
treatment (privlab.assess.declared; docs/assess.md, "A declared schema")."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from privlab.cli.common import check_column_options, console, emit_json, err_console, parse_list
from privlab.cli.options import Json, Report, option
from privlab.core.guarantee import PrivacyGuarantee
from privlab.data.io import read_table
from privlab.errors import InvalidInputError

TIER_COLOUR = {"none": "green", "low": "yellow", "hide": "red"}
MAX_RECOMMENDATIONS = 12


def _share(x: float) -> str:
    return "<0.01%" if 0 < x < 1e-4 else f"{100 * x:.2f}%"


def assess_cmd(
    file: Path = typer.Argument(..., help="CSV / TSV / Parquet file."),
    quasi_identifiers: Annotated[str, option("quasi-identifiers",
                                             "QI columns A,B,C: adds k/l/t and risk (without it: "
                                             "attributes and combinations only).")] = None,
    sensitive: Annotated[str, option("sensitive",
                                     "Sensitive attribute (l-diversity, t-closeness; without it: "
                                     "k-anonymity only).")] = None,
    thresholds: str = typer.Option("thirds", "--thresholds",
                                   help="thirds (as in the attribute-based PIA article) | "
                                        "LOW,HIGH absolute (e.g. 0.4,0.75) | HIGH | "
                                        "rel:A,B (fractions of [Kmin, Kmax])."),
    max_combination_size: int = typer.Option(2, "--max-combination-size",
                                             help="Largest attribute set Apriori examines."),
    drop_missing: bool = typer.Option(False, "--drop-missing",
                                      help="Drop rows with a missing value (default: count "
                                           "missing as a value)."),
    attributes: str = typer.Option(None, "--attributes",
                                   help="Only assess these columns A,B,C (default: all)."),
    bin_numeric: int = typer.Option(None, "--bin-numeric",
                                    help="Bin numeric attributes into N equal-width bins "
                                         "(with --schema: over the declared bounds, dates "
                                         "too; default: each number is a value, as the PIA "
                                         "article)."),
    population: Path = typer.Option(None, "--population",
                                    help="Population table (same QI columns): delta-presence "
                                         "and journalist / marketer risk (without it: "
                                         "prosecutor risk only)."),
    sensitive_kind: str = typer.Option("auto", "--sensitive-kind",
                                       help="t-closeness distance: auto | numeric (ordered) | "
                                            "categorical (equal)."),
    recursive_l: int = typer.Option(None, "--recursive-l",
                                    help="l for recursive (c,l)-diversity (default: distinct l)."),
    risk_threshold: float = typer.Option(0.2, "--risk-threshold",
                                         help="Per-record risk counted as 'at risk' above this."),
    target_k: int = typer.Option(5, "--target-k", help="k the recommendations aim for."),
    delimiter: str = typer.Option(None, "--delimiter", help="Field delimiter (sniffed if unset)."),
    engine: str = typer.Option("auto", "--engine",
                               help="auto (DuckDB over Parquet, pandas for CSV) | pandas | "
                                    "duckdb (Parquet, out of core) | spark (Parquet or "
                                    "table:NAME; only counts reach this process)."),
    master: str = typer.Option(None, "--master",
                               help="Spark master (default local[*]; spark://host:7077, "
                                    "sc://host:15002 for Spark Connect, or $SPARK_REMOTE)."),
    schema: Annotated[str, option("declared schema",
                                  "Declared public schema: a bundled name (privlab schema list) or "
                                  "a YAML/JSON file. Its types decide each column's treatment: "
                                  "identifier/text columns are flagged as direct identifiers, not "
                                  "assessed; --bin-numeric cuts numbers and dates over the "
                                  "declared bounds. Default: kinds guessed from the data.")] = None,
    on_invalid: Annotated[str, option("invalid rows",
                                      "With --schema: refuse (exit 2, one line naming the column) "
                                      "or coerce (clamp, <other>/missing, drop rows with no place) "
                                      "values outside it.")] = "refuse",
    report: Report = None,
    as_json: Json = False,
) -> None:
    """Assess which attributes and combinations identify people, and how k/l/t read."""
    from privlab.assess import assess
    from privlab.assess.report import write_assessment_report

    if sensitive_kind not in ("auto", "numeric", "categorical"):
        raise InvalidInputError(f"--sensitive-kind must be auto, numeric or categorical, got "
                                f"{sensitive_kind!r}")
    if report is not None and not report.parent.exists():
        raise InvalidInputError(f"--report directory does not exist: {report.parent}")
    qis = parse_list(quasi_identifiers, "--quasi-identifiers")
    attrs = parse_list(attributes, "--attributes")
    declared = _declared_schema(schema, on_invalid)
    with contextlib.ExitStack() as opened:
        sources = _count_sources(file, population, engine, master)
        for source in sources or ():
            if source is not None:
                opened.callback(source.close)  # a DuckDB source holds a connection
        frame = pop = None
        if sources is None:
            # without a schema assess is exploratory and NOT DP: pandas' types (--schema:
            # text, typed by the declaration)
            infer = declared is None
            frame = read_table(file, delimiter=delimiter, infer=infer)
            pop = read_table(population, delimiter=delimiter, infer=infer) \
                if population is not None else None
        # every column-naming option names a column of DATA (one line naming it, exit 2), on
        # every engine (a grouped source's `columns` are its header too)
        data, other = (frame, pop) if sources is None else sources
        check_column_options(data, file.name, {"--quasi-identifiers": qis,
                                               "--sensitive": sensitive, "--attributes": attrs})
        if other is not None:
            check_column_options(other, f"--population {population.name}",
                                 {"--quasi-identifiers": qis})
        from privlab.assess.pipeline import assess_steps
        from privlab.cli.progress import reporter

        steps = assess_steps(max_combination_size, qis is not None)
        with reporter("assess", as_json) as progress:
            options = dict(attributes=attrs, quasi_identifiers=qis, sensitive=sensitive,
                           thresholds=thresholds, max_combination_size=max_combination_size,
                           missing="drop" if drop_missing else "value", bins=bin_numeric,
                           sensitive_kind=sensitive_kind, recursive_l=recursive_l,
                           risk_threshold=risk_threshold, target_k=target_k, source=str(file),
                           progress=progress)
            if sources is None:
                result = assess(frame, population=pop, schema=declared, on_invalid=on_invalid,
                                **options)  # type: ignore[arg-type]
            else:
                from privlab.assess.grouped import assess_grouped

                result = assess_grouped(sources[0], population=sources[1], schema=declared,
                                        on_invalid=on_invalid, **options)  # type: ignore[arg-type]
            if report is not None:
                progress("writing the HTML report", steps, steps)
                write_assessment_report(result, report)
            else:
                progress("done", steps, steps)
    payload = result.to_dict()
    if report is not None:
        payload["report"] = str(report)
    payload["guarantee"] = ASSESSMENT_GUARANTEE.to_dict()
    if as_json:
        emit_json(payload)
        return
    console.print(ASSESSMENT_GUARANTEE.headline(), style="bold red", highlight=False)
    _print_human(result, report)


#: What `privlab assess` outputs is not a release: exact statistics of the input rows for the
#: data's curator, labelled so (docs/guarantees.md, "privlab assess / anonymize /
#: choose-epsilon (not DP)").
ASSESSMENT_GUARANTEE = PrivacyGuarantee.not_private(
    "re-identification risk assessment (exact, on the input rows)",
    "an assessment for the data's curator: every count, class size, risk and "
    "recommendation is computed exactly from the input rows; do not publish it")


def _declared_schema(schema: str | None, on_invalid: str):  # noqa: ANN202
    """The --schema declaration (bundled name or file), or None; checked before any row is
    read. Every engine conforms the rows: pandas in memory, DuckDB / Spark in SQL."""
    from privlab.schema import check_policy, load_schema

    check_policy(on_invalid)
    if schema is None:
        return None
    return load_schema(schema)


def _count_sources(file: Path, population: Path | None, engine: str,
                   master: str | None) -> tuple[object, object] | None:
    """(data, population) count sources for DuckDB or Spark, or None for the pandas path."""
    from privlab.assess.sources import DuckDBSource, SparkSource, is_parquet

    if engine not in ("auto", "pandas", "duckdb", "spark"):
        raise InvalidInputError(f"--engine must be auto, pandas, duckdb or spark, got {engine!r}")
    if master is not None and engine != "spark":
        raise InvalidInputError("--master applies to --engine spark; add --engine spark")
    paths = [("DATA", str(file))] + ([("--population", str(population))] if population else [])
    if engine == "spark":
        from privlab.engines.spark import get_spark, read_source

        spark = get_spark(master)
        return tuple(SparkSource(read_source(spark, p, what=w)) for w, p in paths) + \
            ((None,) if population is None else ())  # type: ignore[return-value]
    local = [(w, Path(p)) for w, p in paths]
    if engine == "pandas" or (engine == "auto" and not all(is_parquet(p) for _, p in local)):
        return None
    for w, p in local:
        if not p.exists():
            raise InvalidInputError(f"{w}: file not found: {p}")
        if not is_parquet(p):
            raise InvalidInputError(f"{w}: --engine duckdb reads Parquet; {p} is not a .parquet "
                                    "file or directory (use --engine pandas for CSV)")
    opened: list[DuckDBSource] = []
    try:
        for w, p in local:
            opened.append(DuckDBSource(p, what=w))
    except BaseException:
        for source in opened:  # DATA opened, --population refused: close DATA again
            source.close()
        raise
    return tuple(opened) + ((None,) if population is None else ())  # type: ignore[return-value]


def _print_human(result, report: Path | None) -> None:  # noqa: ANN001 - Assessment
    console.print(f"[bold]{result.source}[/bold]: {result.rows_used:,} rows used; "
                  f"{result.missing_statement}")
    if result.schema is not None:
        s = result.schema
        console.print(f"declared schema {s['name']!r} ({s['fingerprint']}), --on-invalid "
                      f"{s['on_invalid']}: {s['rows_dropped']:,} of {s['rows_read']:,} rows "
                      "dropped by the schema")
    if result.direct_identifiers:
        console.print("[bold red]direct identifiers[/bold red] (declared; not assessed, never "
                      "publish them): " + ", ".join(f"{d['name']} ({d['type']})"
                                                    for d in result.direct_identifiers),
                      highlight=False)
    b = result.bounds
    console.print(f"tiers ({b.thresholds.describe()}): none < {b.low:.3f} <= low < "
                  f"{b.high:.3f} <= hide")
    table = Table("attribute", "distinct", "richness", "tier", "unique", "k")
    for a in result.attributes:
        colour = TIER_COLOUR[a.tier]
        table.add_row(a.name, f"{a.distinct:,}", f"{a.richness:.3f}",
                      f"[{colour}]{a.tier}[/{colour}]", _share(a.unique_share),
                      f"{a.k:,}")
    console.print(table)
    combos = result.combinations.combinations
    escalated = [c for c in combos if c.escalated]
    console.print(f"combinations examined: {len(combos)}; escalated: {len(escalated)}")
    if escalated:
        ct = Table("attributes", "richness", "tier", "members", "unique", "k")
        for c in sorted(escalated, key=lambda c: -c.stats.richness)[:20]:
            ct.add_row(" + ".join(c.attributes), f"{c.stats.richness:.3f}", c.tier,
                       ", ".join(c.member_tiers), _share(c.stats.unique_share),
                       f"{c.stats.k:,}")
        console.print(ct)
    pm = result.privacy_models
    if pm is not None:
        line = f"QIs {', '.join(pm.qis)}: k = {pm.k}, {pm.classes:,} classes, " \
               f"unique records {_share(pm.risk['unique_share'])}"
        if pm.sensitive is not None:
            line += (f"; {pm.sensitive}: distinct l = {pm.l_distinct}, "
                     f"entropy l = {pm.entropy_l:.3f}, recursive c (l={pm.recursive_l}) = "
                     f"{pm.recursive_c:.3f}, t = {pm.t:.4f}")
        if pm.delta is not None:
            line += f"; delta-presence [{pm.delta.delta_min:.4f}, {pm.delta.delta_max:.4f}]"
        console.print(line)
        pr = pm.risk["prosecutor"]
        console.print(f"prosecutor risk: highest {pr['highest']:.3f}, average "
                      f"{pr['average']:.3f}; marketer {pm.risk['marketer']['average']:.3f}")
    actions = [r for r in result.recommendations if r["action"] != "keep"]
    for r in actions[:MAX_RECOMMENDATIONS]:
        console.print(f"- [bold]{r['action']}[/bold] {', '.join(r['target'])}: {r['reason']}")
    if len(actions) > MAX_RECOMMENDATIONS:
        console.print(f"  ... {len(actions) - MAX_RECOMMENDATIONS} more recommendations in "
                      "--json / --report")
    for w in result.warnings:
        err_console.print(f"warning: {w}")
    if report is not None:
        console.print(f"report written to {report}")


def register(app: typer.Typer) -> None:
    app.command("assess")(assess_cmd)
