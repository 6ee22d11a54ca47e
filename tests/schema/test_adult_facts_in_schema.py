"""Issue 24: Adult's public facts (category lists, ranges) live in one place, the bundled
schema (src/privlab/data/bundled/schemas/adult.yaml); code reads them from there. A category
list or a range copied into code would drift from it silently, so none may reappear."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from privlab.schema import bundled_schema

SRC = Path(__file__).resolve().parents[2] / "src" / "privlab"
#: Labels that only Adult uses (generic words such as "Male" or "Other" are left out).
ADULT_LABELS = ("Never-married", "Prof-school", "Married-civ-spouse", "Self-emp-not-inc",
                "Machine-op-inspct", "Amer-Indian-Eskimo", "Asian-Pac-Islander",
                "Not-in-family", "Some-college", "Assoc-acdm", "Handlers-cleaners")


def test_no_adult_category_literal_outside_the_schema() -> None:
    schema = bundled_schema("adult")
    cats = {c for col in schema.columns for c in col.categories}
    assert set(ADULT_LABELS) <= cats  # the probes are Adult's own labels
    found = []
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for label in ADULT_LABELS:
            if re.search(rf"[\"']{re.escape(label)}[\"']", text):
                found.append(f"{path.relative_to(SRC)}: {label!r}")
    assert not found, f"Adult categories written in code (read the schema instead): {found}"


def _pairs(node: ast.AST) -> set[tuple[float, float]]:
    """Every two-number tuple / list literal under `node`."""
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Tuple, ast.List)) and len(sub.elts) == 2 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, (int, float))
                and not isinstance(e.value, bool) for e in sub.elts):
            out.add((float(sub.elts[0].value), float(sub.elts[1].value)))  # type: ignore[attr-defined]
    return out


def test_no_adult_range_literal_next_to_an_adult_column() -> None:
    """A literal (dict, tuple or list) naming an Adult column next to that column's bounds,
    e.g. `{"age": {"bounds": [17, 90]}}` or `("mean", "age", {"bounds": (17, 90)})`: read
    from the schema instead. (Docstring examples are text, not literals: not matched.)"""
    bounds = {c.name: (float(c.bounds[0]), float(c.bounds[1]))
              for c in bundled_schema("adult").columns if c.bounds is not None}
    found = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                direct = [k for k in node.keys if k is not None]
            elif isinstance(node, (ast.Tuple, ast.List)):
                direct = node.elts
            else:
                continue
            names = {e.value for e in direct if isinstance(e, ast.Constant)
                     and isinstance(e.value, str)} & set(bounds)
            pairs = _pairs(node) if names else set()
            found += [f"{path.relative_to(SRC)}:{node.lineno}: {n}" for n in names
                      if bounds[n] in pairs]
    assert not found, f"Adult ranges written in code (read the schema instead): {found}"
