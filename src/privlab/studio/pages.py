"""Rendering: the studio's Jinja2 templates (autoescaped, strict) and their filters."""

from __future__ import annotations

import functools
from typing import Any

import jinja2

from privlab.report.html import fmt, pct


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("privlab.studio", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["pct"] = pct
    env.filters["num"] = lambda v: "" if v is None else f"{v:.4g}"
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
