"""PostgreSQL engine (SQLAlchemy + psycopg): `default_transaction_read_only` sessions with a
`statement_timeout`; a non-PostgreSQL URL is refused."""

from __future__ import annotations

from typing import Any

from privlab.engines.base import Engine, EngineError
from privlab.errors import InvalidInputError


class PostgresEngine(Engine):
    """PostgreSQL through SQLAlchemy; read-only sessions with a statement timeout."""

    dialect = "postgres"

    def __init__(self, url: str, timeout_s: float = 10.0, pool_size: int = 8):
        import sqlalchemy as sa
        from sqlalchemy.engine import make_url

        try:
            parsed = make_url(url)
        except Exception:
            raise InvalidInputError("database.url is not a valid SQLAlchemy URL") from None
        if parsed.get_backend_name() != "postgresql":
            raise InvalidInputError("database.url: only DuckDB files and postgresql URLs are "
                                    "supported")
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        options = (f"-c default_transaction_read_only=on "
                   f"-c statement_timeout={int(timeout_s * 1000)}")
        self._sa = sa
        self._engine = sa.create_engine(parsed, pool_size=pool_size, max_overflow=pool_size * 2,
                                        pool_pre_ping=True,
                                        connect_args={"options": options, "connect_timeout": 5})
        self.timeout_s = timeout_s
        self._hold(self._engine.dispose, f"PostgresEngine({parsed.render_as_string()!r})")

    @staticmethod
    def placeholder(i: int) -> str:
        return f":p{i}"

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        sa = self._sa
        try:
            with self._engine.connect() as conn:
                result = conn.execute(sa.text(sql), {f"p{i}": v for i, v in enumerate(params)})
                rows = [tuple(r) for r in result.fetchall()]
                conn.rollback()
                return rows
        except sa.exc.SQLAlchemyError as exc:
            raise EngineError(f"postgres: {type(exc).__name__}") from exc

    def result_types(self, sql: str) -> list[str]:
        sa = self._sa
        try:
            with self._engine.connect() as conn:
                result = conn.exec_driver_sql(sql)
                cursor = result.cursor
                # with the type modifier: numeric(p, s) and numeric differ in what they hold
                mods = [cursor.pgresult.fmod(i) for i in range(len(cursor.description))]
                names = [conn.exec_driver_sql("SELECT format_type(%(oid)s, %(mod)s)",
                                              {"oid": d[1], "mod": mod}).scalar_one()
                         for d, mod in zip(cursor.description, mods, strict=True)]
                conn.rollback()
        except sa.exc.SQLAlchemyError as exc:
            raise EngineError(f"postgres: {type(exc).__name__}") from exc
        return [str(n) for n in names]
