"""The one statistics registry: every module of this package that defines `STATISTICS`
(a tuple of `base.Statistic`) registers them, found by name, so a new statistic is one new
module here (plus its tests and docs) and every front end built from the registry
(`privlab.measure.measurement`, `privlab release`) offers it."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from privlab.errors import InvalidInputError
from privlab.measure.stats.base import Inputs, Statistic, draw


@cache
def registry() -> dict[str, Statistic]:
    """name -> statistic, in a stable order (the basic five first, then by module name)."""
    found: dict[str, Statistic] = {}
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "base")
    for module in ["basic"] + [n for n in names if n != "basic"]:
        for stat in getattr(importlib.import_module(f"{__name__}.{module}"), "STATISTICS", ()):
            if stat.name in found:
                raise RuntimeError(f"statistic {stat.name!r} registered twice")
            found[stat.name] = stat
    return found


def names() -> tuple[str, ...]:
    return tuple(registry())


def get(name: str) -> Statistic:
    """The statistic called `name`, or a one-line refusal listing the known ones."""
    try:
        return registry()[name]
    except KeyError:
        raise InvalidInputError(f"statistic must be one of {', '.join(names())}, "
                                f"got {name!r}") from None


def sql_names() -> tuple[str, ...]:
    """The statistics with an SQL form (the gateway offers them, `Statistic.sql_functions`)."""
    return tuple(n for n, s in registry().items() if s.sql_functions)


def by_sql(function: str) -> Statistic | None:
    """The statistic an SQL function asks for (a sqlglot expression key such as "variance"),
    or None when no statistic of the registry has that SQL form."""
    for stat in registry().values():
        if function in stat.sql_functions:
            return stat
    return None


__all__ = ["Inputs", "Statistic", "by_sql", "draw", "get", "names", "registry", "sql_names"]
