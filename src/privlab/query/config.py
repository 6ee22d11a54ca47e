"""Gateway configuration: the database, the public metadata of the tables analysts may query,
the ledger and the analysts (hashed API keys, budgets).

Everything here is *public* metadata chosen by the data owner: clamping bounds, GROUP BY
domains and the contribution bound are never derived from the data (that would leak).
A config file is YAML (`load_config`) or a dict (`parse_config`); every mistake raises an
`InvalidInputError` that names the field, e.g. `tables.adult.columns.age.bounds`.
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privlab.errors import InvalidInputError

COLUMN_TYPES = ("int", "float", "text", "bool")
#: Largest magnitude allowed for declared bounds. A sum of clamped values then stays below
#: 2^63 rows x 1e15 ~ 1e34, far inside DOUBLE / NUMERIC range on both engines, so SUM cannot
#: overflow whatever the data (an overflow error would itself reveal the data).
MAX_BOUND = 1e15
#: Default `tables.<name>.min_epsilon_per_query`: a query cheaper than this is refused, so a
#: flood of near-free probes cannot map the data for almost no budget.
DEFAULT_MIN_EPSILON = 0.01
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,62}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def hash_key(key: str) -> str:
    """SHA-256 hex digest of an API key: what the config stores instead of the key.

    Keys are 256-bit random tokens (`new_key`), so a fast hash is enough: there is nothing
    to brute-force that a salt or a slow KDF would protect.
    """
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    """A fresh random API key (43 URL-safe characters, 256 bits)."""
    return "pk_" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class ColumnSpec:
    """Public metadata of one column."""

    name: str
    type: str
    bounds: tuple[float, float] | None = None  # clamping range for SUM/AVG/quantiles
    domain: tuple[Any, ...] | None = None  # public GROUP BY domain
    partition_selection: bool = False  # GROUP BY allowed without a domain (needs delta > 0)
    nullable: bool = True

    @property
    def numeric(self) -> bool:
        return self.type in ("int", "float")

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "nullable": self.nullable}
        if self.bounds is not None:
            out["bounds"] = list(self.bounds)
        if self.domain is not None:
            out["domain"] = list(self.domain)
        if self.partition_selection:
            out["partition_selection"] = True
        return out


@dataclass(frozen=True)
class TableSpec:
    """A table analysts may query. `privacy_unit` None: each row is one person."""

    name: str
    source: str  # table name in the database
    columns: dict[str, ColumnSpec]
    privacy_unit: str | None = None
    max_rows: int = 1
    public: bool = False  # a public (non-personal) table: only usable through a declared join
    description: str = ""
    #: a query reading this table must spend at least this epsilon (400 below it)
    min_epsilon_per_query: float = DEFAULT_MIN_EPSILON
    #: a public (declared, not measured) size n of the table: delta must stay below 1/n
    public_size: int | None = None

    def column(self, name: str) -> ColumnSpec | None:
        """Look a column up: exact name first, then case-insensitively."""
        if name in self.columns:
            return self.columns[name]
        lowered = {k.lower(): v for k, v in self.columns.items()}
        return lowered.get(name.lower())

    def public_metadata(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "public": self.public,
            "privacy_unit": self.privacy_unit,
            "max_rows_per_unit": None if self.public else self.max_rows,
            "neighbouring": ("none (public table)" if self.public else
                             "user" if self.privacy_unit else "add_remove_record"),
            "min_epsilon_per_query": None if self.public else self.min_epsilon_per_query,
            "columns": {k: v.public() for k, v in self.columns.items()},
        }


@dataclass(frozen=True)
class JoinSpec:
    """A declared equi-join `left_table.left_column = right_table.right_column`."""

    left_table: str
    left_column: str
    right_table: str
    right_column: str

    def matches(self, a: tuple[str, str], b: tuple[str, str]) -> bool:
        pair = {(self.left_table, self.left_column), (self.right_table, self.right_column)}
        return {a, b} == pair and a != b

    def public(self) -> dict[str, str]:
        return {"left": f"{self.left_table}.{self.left_column}",
                "right": f"{self.right_table}.{self.right_column}"}


@dataclass(frozen=True)
class AnalystSpec:
    name: str
    key_sha256: str
    epsilon: float
    delta: float = 0.0
    tables: tuple[str, ...] | None = None  # None: every declared table
    principal: str = ""  # ledger principal (default: the analyst's name)


@dataclass(frozen=True)
class Limits:
    """Request limits; rate limits are per analyst and per server process."""

    max_request_bytes: int = 16_384
    max_sql_chars: int = 4_000
    max_groups: int = 10_000
    max_aggregates: int = 16
    max_joins: int = 3
    max_epsilon_per_query: float = 10.0
    #: largest delta one query may spend (partition selection, gaussian); also below 1/n
    #: of every queried table's declared `public_size` n
    max_delta_per_query: float = 1e-6
    statement_timeout_s: float = 10.0
    rate_per_second: float = 50.0
    burst: int = 100
    #: SQL tokens above which a query is refused before parsing (the parse-time budget)
    max_sql_tokens: int = 1_000
    #: failed authentications per client address before exponential backoff (429)
    max_failed_auth: int = 5
    #: seconds a client may take to send an announced request body (then 408, closed)
    body_timeout_s: float = 10.0
    #: bytes of request line and headers (then 431, closed; `privlab serve`'s HTTP layer)
    max_header_bytes: int = 16_384
    #: seconds an idle keep-alive connection stays open
    keep_alive_s: float = 5.0
    #: open connections per server process (more: 503, closed)
    max_connections: int = 1_000


@dataclass(frozen=True)
class GatewayConfig:
    database: str  # DuckDB file path or SQLAlchemy URL
    tables: dict[str, TableSpec]
    analysts: dict[str, AnalystSpec]
    ledger: str
    audit: str | None = None  # default: the ledger's database
    schema: str | None = None  # PostgreSQL schema holding the tables
    #: DuckDB threads per query (1: concurrent requests are the parallelism; a small query on
    #: several threads is slower, 1.7 -> 1.1 ms on Adult). Ignored by PostgreSQL.
    threads: int = 1
    joins: tuple[JoinSpec, ...] = ()
    limits: Limits = field(default_factory=Limits)
    base_dir: Path = field(default_factory=Path.cwd)
    #: file holding the audit log's HMAC key (outside the database); PRIVLAB_AUDIT_KEY wins
    audit_key_file: Path | None = None
    #: file holding the signed head of the audit log (apart from the database)
    audit_checkpoint: Path | None = None
    #: proxies (addresses or networks) whose X-Forwarded-For is believed; none by default
    trusted_proxies: tuple[str, ...] = ()

    def audit_key(self, create: bool = False) -> bytes | None:
        """The audit chain's HMAC key: `PRIVLAB_AUDIT_KEY` if set, else the contents of
        `audit_key_file` (a new random key is written there, mode 0600, when `create` and
        the file is missing), else None (an unkeyed SHA-256 chain)."""
        import os

        env = os.environ.get("PRIVLAB_AUDIT_KEY")
        if env:
            return env.encode("utf-8")
        path = self.audit_key_file
        if path is None:
            return None
        if not path.is_file():
            if not create:
                return None
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(secrets.token_hex(32) + "\n")
        key = path.read_text(encoding="utf-8").strip()
        if len(key) < 32:
            raise InvalidInputError(f"audit_key_file: {path} must hold a secret of at least 32 "
                                    "characters (e.g. 64 hex digits)")
        return key.encode("utf-8")

    def table(self, name: str) -> TableSpec | None:
        if name in self.tables:
            return self.tables[name]
        lowered = {k.lower(): v for k, v in self.tables.items()}
        return lowered.get(name.lower())

    def analyst_by_key(self, key: str) -> AnalystSpec | None:
        """The analyst owning `key` (constant-time comparison of the hashes)."""
        import hmac

        digest = hash_key(key)
        found = None
        for analyst in self.analysts.values():
            if hmac.compare_digest(digest, analyst.key_sha256):
                found = analyst
        return found

    @property
    def audit_target(self) -> str:
        """The audit log's database: `audit`, else the ledger's own database (PostgreSQL or
        SQLite), so an answered query's charge and audit row share one commit
        (`privlab.query.commit`). A SQLite ledger whose audit log was kept apart before
        (`ledger.db` -> `ledger-audit.db`, the default until then) keeps using that file."""
        if self.audit:
            return self.audit
        if "://" in self.ledger:
            return self.ledger
        path = Path(self.ledger)
        apart = path.with_name(f"{path.stem}-audit{path.suffix or '.db'}")
        return str(apart) if apart.exists() else self.ledger


# --------------------------------------------------------------------------- parsing

def _fail(where: str, message: str) -> InvalidInputError:
    return InvalidInputError(f"{where}: {message}")


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"must be a mapping, got {type(value).__name__}")
    return value


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise _fail(where, "must be a name of letters, digits, '_' or '-' (at most 63 "
                    f"characters, not starting with a digit), got {value!r}")
    return value


def _number(value: Any, where: str, *, positive: bool = False, lo: float | None = None,
            hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(where, f"must be a number, got {value!r}")
    out = float(value)
    if not math.isfinite(out) or (positive and out <= 0) or (lo is not None and out < lo) \
            or (hi is not None and out > hi):
        rng = "> 0" if positive else f"in [{lo}, {hi}]"
        raise _fail(where, f"must be a finite number {rng}, got {value!r}")
    return out


def _column(name: str, raw: Any, where: str) -> ColumnSpec:
    if isinstance(raw, str):
        raw = {"type": raw}
    raw = _mapping(raw, where)
    unknown = set(raw) - {"type", "bounds", "domain", "partition_selection", "nullable"}
    if unknown:
        raise _fail(where, f"unknown keys {sorted(unknown)}; allowed: type, bounds, domain, "
                    "partition_selection, nullable")
    ctype = raw.get("type")
    if ctype not in COLUMN_TYPES:
        raise _fail(f"{where}.type", f"must be one of {', '.join(COLUMN_TYPES)}, got {ctype!r}")
    bounds = None
    if raw.get("bounds") is not None:
        b = raw["bounds"]
        if ctype not in ("int", "float"):
            raise _fail(f"{where}.bounds", "only numeric columns (int, float) have bounds")
        if not isinstance(b, (list, tuple)) or len(b) != 2:
            raise _fail(f"{where}.bounds", f"must be [LO, HI], got {b!r}")
        lo, hi = (_number(x, f"{where}.bounds") for x in b)
        if max(abs(lo), abs(hi)) > MAX_BOUND:
            raise _fail(f"{where}.bounds", f"magnitudes above {MAX_BOUND:g} are refused (a sum "
                        "of clamped values must not be able to overflow); rescale the column")
        if lo >= hi:
            raise _fail(f"{where}.bounds", f"LO={lo:g} must be < HI={hi:g}")
        if ctype == "int" and not (lo.is_integer() and hi.is_integer()):
            raise _fail(f"{where}.bounds", "an int column needs integer bounds")
        bounds = (int(lo), int(hi)) if ctype == "int" else (lo, hi)
    domain = None
    if raw.get("domain") is not None:
        d = raw["domain"]
        if not isinstance(d, (list, tuple)) or not d:
            raise _fail(f"{where}.domain", "must be a non-empty list of values")
        checked = []
        for v in d:
            ok = (ctype == "text" and isinstance(v, str)) or \
                 (ctype == "bool" and isinstance(v, bool)) or \
                 (ctype == "int" and isinstance(v, int) and not isinstance(v, bool)) or \
                 (ctype == "float" and isinstance(v, (int, float)) and not isinstance(v, bool))
            if not ok:
                raise _fail(f"{where}.domain", f"value {v!r} is not of type {ctype}")
            if ctype == "float" and not math.isfinite(v):
                # a released key is a JSON number: NaN or an infinity could never be encoded
                raise _fail(f"{where}.domain", f"value {v!r} is not finite; list finite "
                            "numbers only")
            if ctype == "int" and abs(v) >= 2**63:
                raise _fail(f"{where}.domain", f"value {v!r} does not fit in 64 bits (the "
                            "range of an int column)")
            checked.append(float(v) if ctype == "float" else v)
        if len(set(checked)) != len(checked):
            raise _fail(f"{where}.domain", "values must be distinct")
        domain = tuple(checked)
    ps = raw.get("partition_selection", False)
    if not isinstance(ps, bool):
        raise _fail(f"{where}.partition_selection", "must be true or false")
    nullable = raw.get("nullable", True)
    if not isinstance(nullable, bool):
        raise _fail(f"{where}.nullable", "must be true or false")
    return ColumnSpec(name=name, type=ctype, bounds=bounds, domain=domain,
                      partition_selection=ps, nullable=nullable)


def _table(name: str, raw: Any, where: str) -> TableSpec:
    raw = _mapping(raw, where)
    unknown = set(raw) - {"source", "columns", "privacy_unit", "max_rows", "public",
                          "description", "min_epsilon_per_query", "public_size"}
    if unknown:
        raise _fail(where, f"unknown keys {sorted(unknown)}; allowed: source, columns, "
                    "privacy_unit, max_rows, public, description, min_epsilon_per_query, "
                    "public_size")
    source = _name(raw.get("source", name), f"{where}.source")
    cols_raw = _mapping(raw.get("columns"), f"{where}.columns")
    if not cols_raw:
        raise _fail(f"{where}.columns", "declare at least one column")
    columns = {}
    for cname, craw in cols_raw.items():
        _name(cname, f"{where}.columns")
        columns[cname] = _column(cname, craw, f"{where}.columns.{cname}")
    if len({c.lower() for c in columns}) != len(columns):
        raise _fail(f"{where}.columns", "column names must differ by more than case")
    public = raw.get("public", False)
    if not isinstance(public, bool):
        raise _fail(f"{where}.public", "must be true or false")
    unit = raw.get("privacy_unit")
    if unit is not None:
        if public:
            raise _fail(f"{where}.privacy_unit", "a public table has no privacy unit")
        if unit not in columns:
            raise _fail(f"{where}.privacy_unit", f"{unit!r} is not a declared column")
    max_rows = raw.get("max_rows", 1)
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or not 1 <= max_rows <= 10_000:
        raise _fail(f"{where}.max_rows", f"must be an integer in [1, 10000], got {max_rows!r}")
    if unit is None and max_rows != 1 and not public:
        raise _fail(f"{where}.max_rows", "without a privacy_unit each row is one person, so "
                    "max_rows must be 1; declare privacy_unit to bound several rows per person")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise _fail(f"{where}.description", "must be text")
    min_eps = _number(raw.get("min_epsilon_per_query", DEFAULT_MIN_EPSILON),
                      f"{where}.min_epsilon_per_query", positive=True)
    size = raw.get("public_size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise _fail(f"{where}.public_size", f"must be a positive integer (a public bound on the "
                    f"number of people, not read from the data), got {size!r}")
    return TableSpec(name=name, source=source, columns=columns, privacy_unit=unit,
                     max_rows=max_rows, public=public, description=description,
                     min_epsilon_per_query=min_eps, public_size=size)


def _join(raw: Any, where: str, tables: dict[str, TableSpec]) -> JoinSpec:
    raw = _mapping(raw, where)
    sides = []
    for key in ("left", "right"):
        text = raw.get(key)
        if not isinstance(text, str) or text.count(".") != 1:
            raise _fail(f"{where}.{key}", f"must be 'table.column', got {text!r}")
        tname, cname = text.split(".")
        if tname not in tables:
            raise _fail(f"{where}.{key}", f"table {tname!r} is not declared")
        if cname not in tables[tname].columns:
            raise _fail(f"{where}.{key}", f"column {cname!r} is not declared in {tname!r}")
        sides.append((tname, cname))
    (lt, lc), (rt, rc) = sides
    if lt == rt:
        raise _fail(where, "a join connects two different tables")
    a, b = tables[lt], tables[rt]
    if a.public and b.public:
        raise _fail(where, "joining two public tables releases nothing private; not needed")
    for t in (a, b):
        if not t.public and t.privacy_unit is None:
            raise _fail(where, f"table {t.name!r} has no privacy_unit; a private table needs one "
                        "to be joined (contributions are bounded per unit after the join)")
    if not a.public and not b.public and (lc != a.privacy_unit or rc != b.privacy_unit):
        raise _fail(where, "two private tables may only be joined on their privacy units "
                    f"({a.name}.{a.privacy_unit} = {b.name}.{b.privacy_unit})")
    if a.columns[lc].type != b.columns[rc].type:
        raise _fail(where, "the joined columns must have the same type")
    return JoinSpec(lt, lc, rt, rc)


def _analyst(name: str, raw: Any, where: str, tables: dict[str, TableSpec]) -> AnalystSpec:
    raw = _mapping(raw, where)
    unknown = set(raw) - {"key_sha256", "epsilon", "delta", "tables", "principal"}
    if unknown:
        raise _fail(where, f"unknown keys {sorted(unknown)}; allowed: key_sha256, epsilon, "
                    "delta, tables, principal (store the SHA-256 of the key, never the key: "
                    "`privlab serve --new-key`)")
    digest = raw.get("key_sha256")
    if not isinstance(digest, str) or not _HEX64.match(digest):
        raise _fail(f"{where}.key_sha256", "must be the 64-hex-digit SHA-256 of the API key "
                    "(`privlab serve --new-key` prints a key and its hash)")
    eps = _number(raw.get("epsilon"), f"{where}.epsilon", positive=True)
    delta = _number(raw.get("delta", 0.0), f"{where}.delta", lo=0.0, hi=0.5)
    allowed = raw.get("tables")
    if allowed is not None:
        if not isinstance(allowed, list) or not all(isinstance(t, str) for t in allowed):
            raise _fail(f"{where}.tables", "must be a list of declared table names")
        for t in allowed:
            if t not in tables:
                raise _fail(f"{where}.tables", f"table {t!r} is not declared")
        allowed = tuple(allowed)
    principal = raw.get("principal", name)
    if not isinstance(principal, str) or not principal.strip():
        raise _fail(f"{where}.principal", "must be a non-empty name")
    return AnalystSpec(name=name, key_sha256=digest, epsilon=eps, delta=delta, tables=allowed,
                       principal=principal)


def _limits(raw: Any) -> Limits:
    if raw is None:
        return Limits()
    raw = _mapping(raw, "limits")
    defaults = Limits()
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if not hasattr(defaults, key):
            raise _fail("limits", f"unknown key {key!r}; allowed: "
                        f"{', '.join(Limits.__dataclass_fields__)}")
        current = getattr(defaults, key)
        number = _number(value, f"limits.{key}", positive=True)
        if isinstance(current, int) and not float(number).is_integer():
            raise _fail(f"limits.{key}", f"must be a positive integer, got {value!r}")
        values[key] = int(number) if isinstance(current, int) else number
    if values.get("max_delta_per_query", 0.0) >= 1.0:
        raise _fail("limits.max_delta_per_query", "must be < 1 (e.g. 1e-6)")
    return Limits(**values)


def _resolve(target: str, base: Path) -> str:
    """Relative file paths in the config are relative to the config file."""
    if target.startswith("spark:") and "://" not in target and target != "spark:catalog":
        return "spark:" + _resolve(target[len("spark:"):], base)  # spark:DIR, DIR relative
    if "://" in target or target == ":memory:" or target.startswith("spark:"):
        return target
    path = Path(target).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())


def parse_config(raw: Any, base_dir: str | Path | None = None,
                 defaults: dict[str, str] | None = None) -> GatewayConfig:
    """Validate a config mapping (see `examples/gateway.yaml`); `defaults` supplies values
    for absent keys (`load_config`: the audit key and checkpoint files beside the config)."""
    raw = _mapping(raw, "config")
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    unknown = set(raw) - {"database", "ledger", "audit", "tables", "joins", "analysts",
                          "limits", "audit_key_file", "audit_checkpoint", "trusted_proxies"}
    if unknown:
        raise _fail("config", f"unknown keys {sorted(unknown)}; allowed: database, ledger, "
                    "audit, audit_key_file, audit_checkpoint, tables, joins, analysts, limits, "
                    "trusted_proxies")
    db = raw.get("database")
    if isinstance(db, str):
        db = {"url": db}
    db = _mapping(db, "database")
    url = db.get("url")
    if not isinstance(url, str) or not url.strip():
        raise _fail("database.url", "must be a DuckDB file path or a SQLAlchemy URL "
                    "(postgresql+psycopg://user@host/db)")
    schema = db.get("schema")
    if schema is not None:
        schema = _name(schema, "database.schema")
    threads = db.get("threads", 1)
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 256:
        raise _fail("database.threads", "must be an integer from 1 to 256 (DuckDB threads per "
                    "query; default 1)")
    extra = set(db) - {"url", "schema", "threads"}
    if extra:
        raise _fail("database", f"unknown keys {sorted(extra)}; allowed: url, schema, threads")
    ledger = raw.get("ledger")
    if not isinstance(ledger, str) or not ledger.strip():
        raise _fail("ledger", "must be a SQLite file path or a database URL")
    audit = raw.get("audit")
    if audit is not None and (not isinstance(audit, str) or not audit.strip()):
        raise _fail("audit", "must be a SQLite file path or a database URL")
    audit_files: dict[str, Path | None] = {}
    for key_name in ("audit_key_file", "audit_checkpoint"):
        value = raw.get(key_name, defaults.get(key_name) if defaults else None)
        if value is not None and (not isinstance(value, (str, Path)) or not str(value).strip()
                                  or "://" in str(value)):
            raise _fail(key_name, "must be a file path (relative to the config file)")
        audit_files[key_name] = None if value is None else Path(_resolve(str(value), base))
    tables_raw = _mapping(raw.get("tables"), "tables")
    if not tables_raw:
        raise _fail("tables", "declare at least one table")
    tables = {}
    for tname, traw in tables_raw.items():
        _name(tname, "tables")
        tables[tname] = _table(tname, traw, f"tables.{tname}")
    if len({t.lower() for t in tables}) != len(tables):
        raise _fail("tables", "table names must differ by more than case")
    joins_raw = raw.get("joins") or []
    if not isinstance(joins_raw, list):
        raise _fail("joins", "must be a list of {left: table.column, right: table.column}")
    joins = tuple(_join(j, f"joins[{i}]", tables) for i, j in enumerate(joins_raw))
    analysts_raw = _mapping(raw.get("analysts"), "analysts")
    if not analysts_raw:
        raise _fail("analysts", "declare at least one analyst")
    analysts = {n: _analyst(n, a, f"analysts.{n}", tables) for n, a in analysts_raw.items()}
    digests = [a.key_sha256 for a in analysts.values()]
    if len(set(digests)) != len(digests):
        raise _fail("analysts", "two analysts share one API key; give each its own")
    principals = [a.principal for a in analysts.values()]
    if len(set(principals)) != len(principals):
        raise _fail("analysts", "two analysts share one ledger principal")
    limits = _limits(raw.get("limits"))
    for t in tables.values():
        if not t.public and t.min_epsilon_per_query > limits.max_epsilon_per_query:
            raise _fail(f"tables.{t.name}.min_epsilon_per_query",
                        f"{t.min_epsilon_per_query:g} is above limits.max_epsilon_per_query "
                        f"{limits.max_epsilon_per_query:g}: no query could be answered")
    return GatewayConfig(
        database=_resolve(url, base), tables=tables, analysts=analysts,
        ledger=_resolve(ledger, base), audit=None if audit is None else _resolve(audit, base),
        schema=schema, joins=joins, limits=limits, base_dir=base,
        threads=threads, audit_key_file=audit_files["audit_key_file"],
        audit_checkpoint=audit_files["audit_checkpoint"],
        trusted_proxies=_proxies(raw.get("trusted_proxies")),
    )


def _proxies(raw: Any) -> tuple[str, ...]:
    """`trusted_proxies`: addresses or networks of the reverse proxies in front."""
    import ipaddress

    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _fail("trusted_proxies", "must be a list of proxy addresses or networks "
                    "(e.g. [127.0.0.1] for nginx on the same host)")
    out = []
    for i, item in enumerate(raw):
        try:
            out.append(str(ipaddress.ip_network(str(item), strict=False)))
        except ValueError:
            raise _fail(f"trusted_proxies[{i}]", f"{str(item)[:60]!r} is not an IP address "
                        "or network (e.g. 10.0.0.0/8)") from None
    return tuple(out)


def load_config(path: str | Path) -> GatewayConfig:
    """Read and validate a YAML gateway config; relative paths are relative to the file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"--config {path} does not exist; see examples/gateway.yaml")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise InvalidInputError(f"--config {path} is not valid YAML{where}") from None
    # the audit key and the signed head live beside the config, never in the database
    return parse_config(raw, base_dir=path.parent.resolve(),
                        defaults={"audit_key_file": f"{path.stem}.audit-key",
                                  "audit_checkpoint": f"{path.stem}.audit-head.json"})
