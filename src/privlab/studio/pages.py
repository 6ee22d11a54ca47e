"""Rendering: the studio's Jinja2 templates (autoescaped, strict) and their filters."""

from __future__ import annotations

import functools
from typing import Any

import jinja2

from privlab.report.html import make_environment


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = make_environment("privlab.studio")
    env.filters["num"] = lambda v: "" if v is None else f"{v:.4g}"
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
