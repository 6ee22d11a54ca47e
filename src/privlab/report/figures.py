"""Matplotlib figures for HTML reports, embedded as base64 PNG data URIs.

Figures are built with `matplotlib.figure.Figure` and the Agg canvas directly, never pyplot, so
no global state or GUI backend is touched (safe in a server and in parallel tests).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

#: Tier styles shared by every report: colour and hatch (the PIA article's Figures 1-2 use hatching:
#: horizontal lines = no hiding, vertical = low-level hiding, solid = must be hidden).
TIER_STYLE = {
    "none": {"color": "#4c9a2a", "hatch": "---", "label": "no hiding needed"},
    "low": {"color": "#e0a526", "hatch": "|||", "label": "low-level hiding"},
    "hide": {"color": "#c0392b", "hatch": "", "label": "must be hidden"},
}


def new_figure(width: float = 8.0, height: float = 4.0) -> Figure:
    """A pyplot-free figure with an Agg canvas attached."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _texts(fig: Figure) -> list:
    """Every visible, non-empty text artist of the figure (labels, ticks, titles, legends,
    annotations), after a draw so their positions are final."""
    fig.canvas.draw()
    cands = list(fig.texts)
    for ax in fig.axes:
        cands += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        for axis in (ax.xaxis, ax.yaxis):
            cands += [axis.label, axis.offsetText]
            for tick in axis._update_ticks():  # only the ticks actually drawn (in view)
                cands += [t for t, on in ((tick.label1, tick.label1.get_visible()),
                                          (tick.label2, tick.label2.get_visible())) if on]
        leg = ax.get_legend()
        if leg is not None:
            cands += [*leg.get_texts(), leg.get_title()]
    return [t for t in cands if t.get_visible() and t.get_text().strip()]


def text_overlaps(fig: Figure, tolerance: float = 1.0) -> list[tuple[str, str]]:
    """Pairs of texts whose boxes overlap by more than `tolerance` pixels each way: labels a
    reader cannot read. Reports are tested to have none."""
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(fig)]
    pairs = []
    for i, (ta, a) in enumerate(boxes):
        for tb, b in boxes[i + 1:]:
            w = min(a.x1, b.x1) - max(a.x0, b.x0)
            h = min(a.y1, b.y1) - max(a.y0, b.y0)
            if w > tolerance and h > tolerance:
                pairs.append((ta, tb))
    return pairs


def place_labels(ax, points: Sequence[tuple[float, float]], labels: Sequence[str], *,
                 fontsize: int = 7) -> None:
    """Annotate points without overlapping: each label tries a few offsets around its point and
    takes the first that overlaps no label placed before it (dropped if none is free)."""
    fig = ax.get_figure()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    placed = []
    offsets = [(4, 4), (4, -11), (-16, 4), (-16, -11), (4, 14), (-16, 14), (4, -21), (-16, -21)]
    for (x, y), text in zip(points, labels, strict=True):
        for dx, dy in offsets:
            ann = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points",
                              fontsize=fontsize)
            box = ann.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in placed):
                placed.append(box)
                break
            ann.remove()


def figure_data_uri(fig: Figure, dpi: int = 110) -> str:
    """Render `fig` to PNG and return it as a `data:image/png;base64,...` URI."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def bar_chart(labels: Sequence[str], values: Sequence[float], *,
              categories: Sequence[str] | None = None,
              styles: Mapping[str, Mapping[str, str]] | None = None,
              title: str = "", ylabel: str = "", ylim: tuple[float, float] | None = None,
              hlines: Sequence[tuple[float, str]] = (), value_labels: bool = True,
              width: float | None = None, height: float = 4.2) -> str:
    """Vertical bars, optionally coloured and hatched by category; returns a data URI."""
    styles = styles or TIER_STYLE
    n = len(labels)
    fig = new_figure(width or max(6.0, 0.55 * n + 2.0), height)
    ax = fig.add_subplot()
    xs = list(range(n))
    cats = list(categories) if categories is not None else [None] * n
    for x, v, c in zip(xs, values, cats, strict=True):
        st = styles.get(c, {}) if c is not None else {}
        ax.bar(x, v, width=0.7, color=st.get("color", "#4a6fa5"), hatch=st.get("hatch", ""),
               edgecolor="black", linewidth=0.6)
        if value_labels:
            ax.text(x, v + 0.01, f"{v:.3f}", ha="center", va="bottom", fontsize=7)
    for y, text in hlines:
        ax.axhline(y, color="#555555", linestyle="--", linewidth=0.8)
        ax.annotate(text, xy=(1.005, y), xycoords=("axes fraction", "data"), va="center",
                    ha="left", fontsize=7, color="#333333", annotation_clip=False)
    pad = max(0.0, (5 - n) / 2)
    ax.set_xlim(-0.6 - pad, n - 0.4 + pad)
    ax.set_xticks(xs, labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    if ylim:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title, fontsize=10, loc="right")
    if categories is not None:
        present = [c for c in styles if c in set(cats)]
        ax.legend(handles=[Patch(facecolor=styles[c]["color"], hatch=styles[c].get("hatch", ""),
                                 edgecolor="black", label=styles[c].get("label", c))
                           for c in present], fontsize=8, loc="lower left",
                  bbox_to_anchor=(0.0, 1.0), ncol=len(present), frameon=False)
    return figure_data_uri(fig)


def line_chart(x: Sequence[float], series: Mapping[str, Sequence[float]], *, title: str = "",
               xlabel: str = "", ylabel: str = "", logx: bool = False,
               width: float = 7.0, height: float = 4.0) -> str:
    """Several named series over a shared x axis; returns a data URI."""
    fig = new_figure(width, height)
    ax = fig.add_subplot()
    for name, ys in series.items():
        ax.plot(list(x), list(ys), marker="o", label=name)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    if len(series) > 1:
        ax.legend(fontsize=8)
    return figure_data_uri(fig)
