"""HTML/JSON reports shared by every verb: Jinja2 templates, matplotlib figures as base64 PNG,
atomic writes. Build `Section`s and call `write_page`."""

from privlab.report.figures import TIER_STYLE, bar_chart, figure_data_uri, line_chart, new_figure
from privlab.report.html import (
    Image,
    Section,
    Table,
    fmt,
    pct,
    render_html,
    write_html,
    write_page,
)

__all__ = [
    "TIER_STYLE", "Image", "Section", "Table", "bar_chart", "figure_data_uri", "fmt",
    "line_chart", "new_figure", "pct", "render_html", "write_html", "write_page",
]
