"""A schema review in progress: the draft drawn from the data, the columns the person's
analyses use, and each column's reviewed declaration, one page of columns at a time.

Why pages: a table of thousands of columns must be reviewable without a page of megabytes or
a form of tens of thousands of fields (starlette refuses more than its `max_fields`). Why
"columns used": a column no analysis uses needs no public domain; it is declared `text`
(never released by any command), so nothing about it is drawn from the rows or must be
reviewed. Every key the CLI schema has (`privlab.schema.model`: categories, other, bounds,
missing, scale, bins, point_masses, default, description) is a field of a column's form, so a
reviewed schema keeps what the CLI keeps (a dropped `point_masses` smeared a spike of zeros
over its bin). Categories are one per line: a category may contain a comma ("Smith, J")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from privlab.errors import InvalidInputError

#: Columns per review page: a few hundred form fields, a page of a few hundred KB at most.
PAGE = 25
#: What a column that no analysis uses is declared as: never released, nothing to review.
UNUSED = {"type": "text", "missing": True,
          "description": "not used by the analyses reviewed in privlab studio; never released"}
#: The fields of one column's form (`c<i>_<field>`).
FIELDS = ("type", "categories", "other", "lo", "hi", "format", "missing", "scale", "bins",
          "point_masses", "default", "description", "reviewed")
#: The checkbox fields (present and "on" when ticked).
CHECKS = ("other", "missing", "reviewed")
#: The fields of the whole schema (beside the columns).
SCHEMA_FIELDS = ("privacy_unit", "max_rows_per_unit", "public_size", "description")


@dataclass
class Review:
    """`draft`: the draft Schema (private); `used`: the names under review, in the draft's
    order; `done`: name -> reviewed declaration (validated); `unit`: the schema's own fields
    as last submitted."""

    draft: Any
    used: list[str]
    done: dict[str, dict[str, Any]] = field(default_factory=dict)
    unit: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, draft: Any) -> Review:
        return cls(draft, list(draft.names))

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.used) // PAGE))

    def page_columns(self, page: int) -> list[tuple[int, Any]]:
        """(index in the draft, draft column) of the used columns on `page` (0-based)."""
        index = {c.name: i for i, c in enumerate(self.draft.columns)}
        names = self.used[page * PAGE:(page + 1) * PAGE]
        return [(index[n], self.draft.columns[index[n]]) for n in names]

    def first_open_page(self) -> int | None:
        """The first page holding a column not reviewed yet (None: all are)."""
        for i, name in enumerate(self.used):
            if name not in self.done:
                return i // PAGE
        return None

    def choose_columns(self, text: str) -> None:
        """The columns the analyses use, one per line (empty: every column); reviews of
        columns still used are kept."""
        names = [line.strip() for line in text.splitlines() if line.strip()]
        if not names:
            self.used = list(self.draft.names)
            return
        unknown = [n for n in names if self.draft.get(n) is None]
        if unknown:
            raise InvalidInputError(f"columns used: {', '.join(map(repr, unknown[:5]))} "
                                    f"{'is' if len(unknown) == 1 else 'are'} not a column of "
                                    "the data; write one column name per line")
        chosen = set(names)
        self.used = [n for n in self.draft.names if n in chosen]
        self.done = {k: v for k, v in self.done.items() if k in chosen}

    def values(self, index: int, col: Any, edits: dict[str, str] | None) -> dict[str, Any]:
        """A column's form values: the person's edits (a refused submission), else its
        reviewed declaration, else the draft's (drawn from the data)."""
        key = f"c{index}"
        if edits is not None and f"{key}_type" in edits:
            return {f: (f"{key}_{f}" in edits) if f in CHECKS else edits.get(f"{key}_{f}", "")
                    for f in FIELDS}
        spec = self.done.get(col.name)
        out = spec_fields(spec if spec is not None else col.to_dict())
        out["reviewed"] = spec is not None
        return out

    def accept_page(self, form: Any, page: int) -> None:
        """Every column of `page` from the submitted form: all must be ticked reviewed and
        valid, else nothing of the page is kept (one error naming the columns or field)."""
        from privlab.schema.model import parse_column

        cols = self.page_columns(page)
        unreviewed = [c.name for i, c in cols if form.get(f"c{i}_reviewed") != "on"]
        if unreviewed:
            raise InvalidInputError(
                f"review every column before saving; not yet reviewed: {', '.join(unreviewed)} "
                "(tick 'reviewed' once its values are public, documented ones)")
        specs = {c.name: column_spec(form, f"c{i}", c) for i, c in cols}
        for name, spec in specs.items():
            parse_column(name, spec, self.draft.name)  # the CLI's checks, one line each
        self.done.update(specs)
        self.unit = {f: str(form.get(f) or "").strip() for f in SCHEMA_FIELDS}

    def schema(self) -> Any:
        """The reviewed Schema (every used column reviewed; the others declared text)."""
        from privlab.schema import parse_schema
        from privlab.studio.web import whole_number

        columns = {n: self.done.get(n, UNUSED) for n in self.draft.names}
        raw: dict[str, Any] = {"name": self.draft.name,
                               "privacy_unit": self.unit.get("privacy_unit") or "row",
                               "columns": columns,
                               "description": self.unit.get("description") or
                               "reviewed in privlab studio"}
        for key, label in (("max_rows_per_unit", "max rows per person"),
                           ("public_size", "public row count")):
            if self.unit.get(key):
                raw[key] = whole_number(self.unit[key], label)
        return parse_schema(raw, name=self.draft.name)


def spec_fields(spec: dict[str, Any]) -> dict[str, Any]:
    """A column declaration (`ColumnSchema.to_dict` form) as the form's field values."""
    bounds = spec.get("bounds") or ["", ""]
    default = spec.get("default")
    return {"type": spec["type"], "categories": "\n".join(spec.get("categories", [])),
            "other": bool(spec.get("other")), "lo": str(bounds[0]), "hi": str(bounds[1]),
            "format": str(spec.get("format") or ""),
            "missing": bool(spec.get("missing", True)), "scale": spec.get("scale", "linear"),
            "bins": str(spec.get("bins") or ""),
            "point_masses": " ".join(str(v) for v in spec.get("point_masses", [])),
            "default": "" if default is None else str(default),
            "description": str(spec.get("description") or "")}


def column_spec(form: Any, key: str, col: Any) -> dict[str, Any]:
    """One column's declaration from its fields (`key`_type, ...): categories one per line;
    bounds, scale, bins and point masses by type; a default and a description if given."""
    from privlab.studio.web import number, whole_number

    def text(name: str) -> str:
        return str(form.get(f"{key}_{name}") or "").strip()

    kind = text("type") or col.type
    spec: dict[str, Any] = {"type": kind, "missing": form.get(f"{key}_missing") == "on"}
    if kind == "categorical":
        spec["categories"] = [c.strip() for c in str(form.get(f"{key}_categories") or "")
                              .splitlines() if c.strip()]
        if form.get(f"{key}_other") == "on":
            spec["other"] = True
    where = col.name
    if kind in ("integer", "numeric", "datetime"):
        lo, hi = text("lo"), text("hi")
        if kind == "datetime":
            spec["bounds"] = [lo, hi]
            if text("format"):  # empty: the schema's default, ISO 8601
                spec["format"] = text("format")
        else:
            read = whole_number if kind == "integer" else number
            spec["bounds"] = [read(lo, f"{where}: lower bound"),
                              read(hi, f"{where}: upper bound")]
    if kind in ("integer", "numeric"):
        if text("scale") and text("scale") != "linear":
            spec["scale"] = text("scale")
        if text("bins"):
            spec["bins"] = whole_number(text("bins"), f"{where}: bins")
        points = text("point_masses").replace(",", " ").split()
        if points:
            spec["point_masses"] = [number(p, f"{where}: point masses") for p in points]
    default = text("default")
    if default:
        spec["default"] = (whole_number(default, f"{where}: default") if kind == "integer"
                           else number(default, f"{where}: default") if kind == "numeric"
                           else default)
    if text("description"):
        spec["description"] = text("description")
    return spec
