"""`load_schema`: the schema a user names, whatever form the name takes (a `Schema`, a mapping,
a bundled dataset's name, or a YAML/JSON file).

Why a module of its own: resolving a name needs the bundled schemas (`schema.bundled`), and
those are built with the model (`schema.model`); the resolver sits above both so that neither
imports the other's upper half.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privlab.errors import InvalidInputError
from privlab.schema.bundled import BUNDLED_SCHEMAS, bundled_schema
from privlab.schema.model import Schema, parse_schema, read_schema_file


def load_schema(source: str | Path | Mapping[str, Any] | Schema, *,
                allow_draft: bool = False) -> Schema:
    """A schema from a `Schema`, a mapping, a bundled dataset name, or a YAML/JSON file."""
    if isinstance(source, Schema):
        if source.draft and not allow_draft:
            raise InvalidInputError(f"schema {source.name!r} is a draft drawn from the data: "
                                    "review it and drop 'draft: true' before use")
        return source
    if isinstance(source, Mapping):
        return parse_schema(source, allow_draft=allow_draft)
    text = str(source)
    if not Path(text).is_file():
        if text in BUNDLED_SCHEMAS:
            return bundled_schema(text)
        raise InvalidInputError(
            f"--schema {text!r} is neither a file nor a bundled schema "
            f"({', '.join(BUNDLED_SCHEMAS)}); draft one with `privlab schema draft DATA`")
    return read_schema_file(text, allow_draft=allow_draft)


__all__ = ["load_schema"]
