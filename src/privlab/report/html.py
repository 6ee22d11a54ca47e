"""HTML report pages: Jinja2 templates (autoescaped) written atomically.

Any verb builds a list of `Section`s (paragraphs, key figures, tables, images, recommendations)
and calls `write_page`; the shared `page.html.j2` lays them out. A verb that needs its own
layout can add a template extending `base.html.j2` and call `write_html`.

Every page states whether it shows exact values computed from the real records (member
counts, accuracies, AUCs, true statistics): `exact_values` is a required argument of every
writer, a description of them or None, and `base.html.j2` turns a description into a "NOT
differentially private" banner at the top of the page (issue 29), so no page can forget it.
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from privlab import __version__
from privlab.core.guarantee import PrivacyGuarantee
from privlab.utils.atomic import atomic_write_text


@dataclass
class Table:
    """A table: column names and rows (sequences or dicts keyed by column)."""

    columns: Sequence[str]
    rows: Sequence[Sequence[Any] | Mapping[str, Any]]
    caption: str = ""
    #: indices of rows to highlight (e.g. escalated combinations)
    highlight: Sequence[int] = ()

    def cells(self) -> list[list[Any]]:
        out = []
        for r in self.rows:
            if isinstance(r, Mapping):
                out.append([r.get(c, "") for c in self.columns])
            else:
                out.append(list(r))
        return out


@dataclass
class Image:
    """An embedded image (a data URI from `privlab.report.figures`)."""

    src: str
    alt: str
    caption: str = ""


@dataclass
class Section:
    """One titled block of a report page."""

    title: str
    paragraphs: Sequence[str] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
    images: Sequence[Image] = ()
    tables: Sequence[Table] = ()
    items: Sequence[str] = ()
    anchor: str = ""

    def __post_init__(self) -> None:
        if not self.anchor:
            self.anchor = "".join(ch if ch.isalnum() else "-" for ch in self.title.lower())


def fmt(value: Any, digits: int = 3) -> str:
    """Human number formatting for tables: ints with separators, floats to `digits`."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else ("yes" if value else "no")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if math.isinf(value):
            return "inf"
        if value != 0 and abs(value) < 10 ** (-digits):
            return f"{value:.2e}"
        return f"{value:,.{digits}f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt(v, digits) for v in value)
    return str(value)


def pct(value: float, digits: int = 1) -> str:
    if value is None:
        return ""
    if 0 < value < 10 ** (-digits) / 100:
        return f"<{10 ** (-digits):g}%"
    return f"{100 * value:.{digits}f}%"


def make_environment(package: str) -> jinja2.Environment:
    """An autoescaping, strict Jinja2 environment over `package`'s templates folder, with the
    report's number filters (shared by the reports and the studio's pages)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["pct"] = pct
    return env


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return make_environment("privlab.report")


#: The banner of a page that shows exact values (`exact_values` says which).
NOT_DP_BANNER = "NOT differentially private: this page shows exact values from the real records"


def render_html(template: str, *, exact_values: str | None, **context: Any) -> str:
    """Render a template from `privlab/report/templates` with the common page context.
    `exact_values`: which exact (not DP) values computed from the real records the page
    shows (a NOT-DP banner names them), or None when it shows only DP or public values."""
    if exact_values is not None and not str(exact_values).strip():
        raise ValueError("exact_values must name the exact values shown, or be None")
    ctx = {
        "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
        "subtitle": "",
        "guarantee": None,
        "meta": {},
    }
    ctx.update(context)
    ctx["exact_values"] = exact_values
    ctx["not_dp_banner"] = NOT_DP_BANNER
    g = ctx.get("guarantee")
    if isinstance(g, PrivacyGuarantee):
        ctx["guarantee"] = {"is_dp": g.is_dp, "text": g.describe()}
    return environment().get_template(template).render(**ctx)


def write_html(path: str | Path, template: str, *, exact_values: str | None,
               **context: Any) -> Path:
    """Render and write atomically (a crash leaves the old file or the new one)."""
    path = Path(path)
    atomic_write_text(path, render_html(template, exact_values=exact_values, **context))
    return path


#: The title of every report's first section.
PLAIN_WORDS = "In plain words"


def write_page(path: str | Path, title: str, sections: Sequence[Section], *,
               exact_values: str | None, subtitle: str = "",
               guarantee: PrivacyGuarantee | None = None,
               meta: Mapping[str, Any] | None = None) -> Path:
    """Write a generic report page made of `sections` (the shared layout). Every report
    opens with "In plain words" (issue 23): a reader who stops after one section must still
    learn what was done and how safe it is, so a page without it is a programming error.
    `exact_values` (required): the exact values from the real records the page shows, for
    its NOT-DP banner, or None (see the module docstring)."""
    if not sections or sections[0].title != PLAIN_WORDS:
        raise ValueError(f"a report's first section must be {PLAIN_WORDS!r}, got "
                         f"{sections[0].title if sections else None!r}")
    return write_html(path, "page.html.j2", exact_values=exact_values, title=title,
                      subtitle=subtitle, sections=sections, guarantee=guarantee,
                      meta=dict(meta or {}))
