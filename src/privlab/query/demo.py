"""Demo databases and configs for the gateway: UCI Adult in DuckDB or PostgreSQL.

Used by `examples/gateway.yaml`, the benchmark and the tests. Adult's public metadata
(category lists, ranges) is read from the bundled public schema (`privlab schema show adult`,
taken from the dataset's published description `adult.names`), not from the data: bounds and
domains a data owner could state without looking at the records.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from privlab.errors import InvalidInputError
from privlab.schema import Schema, bundled_schema

#: Gateway columns that the demo shows with partition selection (GROUP BY without a public
#: domain, needs delta > 0) instead of the schema's category list: a demo choice.
PARTITION_SELECTION = ("native-country",)
#: Integer columns small enough to GROUP BY, given the list of values their bounds allow.
ENUMERATED = ("education-num",)


def gateway_columns(schema: Schema, *, nullable: bool = False) -> dict[str, dict[str, Any]]:
    """A gateway table's columns from a public schema (the one declaration format): integer
    -> int with the schema's bounds, numeric -> float, categorical -> text with its categories
    (sorted) as the GROUP BY domain. `nullable` False: the demo loads Adult without its
    missing rows (`load_adult(drop_missing=True)`), a rule of the loader, not of the data."""
    cols: dict[str, dict[str, Any]] = {}
    for c in schema.columns:
        if c.type == "integer":
            lo, hi = c.bounds  # type: ignore[misc]
            spec: dict[str, Any] = {"type": "int", "bounds": [int(lo), int(hi)],
                                    "nullable": nullable}
            if c.name in ENUMERATED:
                spec["domain"] = list(range(int(lo), int(hi) + 1))
        elif c.type == "numeric":
            spec = {"type": "float", "bounds": [float(v) for v in c.bounds],  # type: ignore[union-attr]
                    "nullable": nullable}
        elif c.type == "categorical":
            spec = {"type": "text", "nullable": nullable}
            if c.name in PARTITION_SELECTION:
                spec["partition_selection"] = True
            else:
                spec["domain"] = sorted(c.categories)
        else:
            continue
        cols[c.name] = spec
    return cols


#: Adult in the gateway: read from the bundled public schema (`privlab schema show adult`).
ADULT_COLUMNS: dict[str, dict[str, Any]] = gateway_columns(bundled_schema("adult"))


def adult_frame() -> Any:
    """Adult without missing values (30,162 rows), as shipped in privlab."""
    from privlab.data.datasets import load_adult

    return load_adult(drop_missing=True)


def load_adult_duckdb(path: str | Path, table: str = "adult") -> Path:
    """Write Adult into a new DuckDB file (replacing `table` if present)."""
    from privlab.utils.duck import connect

    path = Path(path)
    frame = adult_frame()
    con = connect(str(path))
    try:
        con.execute("SET enable_progress_bar = false")  # it would write to the terminal
        con.register("adult_frame", frame)
        con.execute(f'CREATE OR REPLACE TABLE "{table}" AS SELECT * FROM adult_frame')
    finally:
        con.close()
    return path


def load_movielens_duckdb(path: str | Path) -> Path:
    """Add MovieLens `ratings` (private, several rows per userId) and `movies` (public)."""
    from privlab.data.datasets import load_movielens
    from privlab.utils.duck import connect

    ratings, movies = load_movielens("ratings"), load_movielens("movies")
    con = connect(str(path))
    try:
        con.execute("SET enable_progress_bar = false")  # it would write to the terminal
        con.register("ratings_frame", ratings)
        con.register("movies_frame", movies)
        con.execute('CREATE OR REPLACE TABLE ratings AS SELECT "userId", "movieId", rating, '
                    '"timestamp" FROM ratings_frame')
        con.execute('CREATE OR REPLACE TABLE movies AS SELECT "movieId", title, genres '
                    'FROM movies_frame')
    finally:
        con.close()
    return Path(path)


def init_demo(directory: str | Path) -> tuple[Path, str]:
    """Create DIR/demo.duckdb (Adult, MovieLens) and DIR/gateway.yaml with one analyst;
    returns (config path, the analyst's API key). Refuses to overwrite a config."""
    from privlab.query.config import hash_key, new_key
    from privlab.utils.atomic import atomic_write_text

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "gateway.yaml"
    if config.exists():
        raise InvalidInputError(f"{config} exists; choose an empty directory")
    db = directory / "demo.duckdb"
    load_adult_duckdb(db)
    load_movielens_duckdb(db)
    key = new_key()
    atomic_write_text(config, render_config(hash_key(key)))
    return config, key


#: The key whose hash `examples/gateway.yaml` carries: an example, never use it for real.
EXAMPLE_KEY = "pk_example_analyst_do_not_use_in_production"


def render_config(key_sha256: str, database: str = "demo.duckdb",
                  ledger: str = "gateway-ledger.db") -> str:
    """The demo gateway config (YAML text), with one analyst holding `key_sha256`."""
    return (GATEWAY_TEMPLATE.replace("{KEY_SHA256}", key_sha256)
            .replace("{DATABASE}", database).replace("{LEDGER}", ledger))


def load_adult_postgres(url: str, schema: str = "public", table: str = "adult") -> None:
    """Create `schema.table` in PostgreSQL and COPY Adult into it."""
    import sqlalchemy as sa

    frame = adult_frame()
    types = {c: ("BIGINT" if spec["type"] == "int" else "DOUBLE PRECISION"
                 if spec["type"] == "float" else "TEXT") for c, spec in ADULT_COLUMNS.items()}
    cols = ", ".join(f'"{c}" {types[c]}' for c in frame.columns)
    engine = sa.create_engine(_pg(url))
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{schema}"."{table}"')
            conn.exec_driver_sql(f'CREATE TABLE "{schema}"."{table}" ({cols})')
            buffer = io.StringIO()
            frame.to_csv(buffer, index=False, header=False)
            raw = conn.connection.driver_connection
            names = ", ".join(f'"{c}"' for c in frame.columns)
            with raw.cursor() as cur, \
                    cur.copy(f'COPY "{schema}"."{table}" ({names}) FROM STDIN WITH (FORMAT csv)'
                             ) as copy:
                copy.write(buffer.getvalue())
    finally:
        engine.dispose()


def _pg(url: str) -> str:
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://"):]
    if not url.startswith("postgresql"):
        raise InvalidInputError(f"not a PostgreSQL URL: {url!r}")
    return url


def adult_config(database: str, ledger: str, analysts: dict[str, dict[str, Any]], *,
                 schema: str | None = None, audit: str | None = None,
                 limits: dict[str, Any] | None = None, table: str = "adult") -> dict[str, Any]:
    """A gateway config (as a dict) exposing Adult; `analysts` maps names to
    {"key_sha256": ..., "epsilon": ..., "delta": ...}."""
    db: dict[str, Any] = {"url": database}
    if schema:
        db["schema"] = schema
    cfg: dict[str, Any] = {
        "database": db, "ledger": ledger,
        "tables": {table: {"description": "UCI Adult census extract; one row per person",
                           "columns": ADULT_COLUMNS}},
        "analysts": analysts,
    }
    if audit:
        cfg["audit"] = audit
    if limits:
        cfg["limits"] = limits
    return cfg


def _yaml_columns(columns: dict[str, dict[str, Any]], indent: str) -> str:
    import json

    lines = []
    for name, spec in columns.items():
        parts = ", ".join(f"{k}: {json.dumps(v)}" for k, v in spec.items())
        lines.append(f"{indent}{json.dumps(name) if '-' in name else name}: {{{parts}}}")
    return "\n".join(lines)


GATEWAY_TEMPLATE = f"""\
# privlab DP query gateway: `privlab serve --config gateway.yaml`
# Everything below is PUBLIC metadata chosen by the data owner. Bounds and domains must
# not be read off the data (that would leak it); Adult's follow its published description.

database:
  url: {{DATABASE}}          # a DuckDB file (relative to this file), or
  # url: postgresql+psycopg://reader@127.0.0.1:5432/census
  # schema: public            # PostgreSQL schema holding the tables

ledger: {{LEDGER}}  # privacy budgets (SQLite file or PostgreSQL URL); charged first
# audit: gateway-audit.db     # default: the ledger's database (one commit per query)

# audit_key_file: gateway.audit-key      # HMAC key of the audit chain (default: beside this
# audit_checkpoint: gateway.audit-head.json  # file; created by the first `privlab serve`)

limits:                       # choosing them: docs/gateway.md "Choosing limits"
  max_request_bytes: 16384
  max_sql_chars: 4000
  max_sql_tokens: 1000        # refused before parsing above this
  max_epsilon_per_query: 1    # no single answer spends more than epsilon 1
  max_delta_per_query: 1.0e-6 # and at most this delta (partition selection)
  statement_timeout_s: 10
  rate_per_second: 50         # per analyst and server process
  burst: 100
  max_failed_auth: 5          # per client address, then exponential backoff (429)
  body_timeout_s: 10          # request head, then body, must arrive within this (408)
  max_header_bytes: 16384     # request line and headers (431)

# X-Forwarded-For is believed only from these proxies (nginx on this host: [127.0.0.1]);
# none by default: the client address is the TCP peer (docs/gateway.md "Client address")
trusted_proxies: []

tables:
  adult:
    description: UCI Adult census extract, one row per person (neighbouring = one record)
    columns:
{_yaml_columns(ADULT_COLUMNS, "      ")}
  ratings:
    description: MovieLens ratings; a user may have many rows (neighbouring = one user)
    privacy_unit: userId      # the person behind each row
    max_rows: 50              # rows kept per user (chosen at random) before aggregating
    columns:
      userId: {{type: int, nullable: false}}
      movieId: {{type: int, nullable: false}}
      rating: {{type: float, bounds: [0.5, 5.0], nullable: false,
               domain: [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]}}
  movies:
    public: true              # not personal: usable through a declared join only
    columns:
      movieId: {{type: int}}
      title: {{type: text}}
      genres: {{type: text}}

joins:
  - {{left: ratings.movieId, right: movies.movieId}}

analysts:
  analyst:
    key_sha256: {{KEY_SHA256}}   # `privlab serve --new-key` prints a key and its hash
    epsilon: 10               # total budget (sequential composition)
    delta: 1.0e-5
    # tables: [adult]         # optional allow-list (403 for the others)
"""
