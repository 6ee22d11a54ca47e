"""Schemas shared by the synth tests."""

from __future__ import annotations

from privlab.schema import Schema, bundled_schema


def adult_any_missing(drop: tuple[str, ...] = ()) -> Schema:
    """The bundled Adult schema with every column allowed missing (the declaration the retired
    `--domain adult` made, so these tests' tolerances and seeds keep their meaning)."""
    s = bundled_schema("adult").allowing_missing()
    return s.select([n for n in s.names if n not in drop])


def types_schema(types: dict[str, str], name: str = "types") -> dict:
    """A schema mapping stating only each column's type, for `estimate_domain="all"`: the
    categories / bounds written here are placeholders that an estimated column never uses
    (the schema format requires them; `--estimate-domain` reads the type alone)."""
    cols = {c: ({"type": "categorical", "categories": ["placeholder"]} if t == "categorical"
                else {"type": t, "bounds": [0, 1]}) for c, t in types.items()}
    return {"name": name, "columns": cols}
