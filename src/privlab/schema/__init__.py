"""Declared public schemas (docs/schema.md): the public domain of every column that a command
fits, encodes or publishes, so that nothing released depends on the private rows' shape."""

from privlab.schema.bundled import BUNDLED_SCHEMAS, bundled_schema, schema_for_dataset
from privlab.schema.conform import POLICIES, check_policy, conform
from privlab.schema.draft import draft_schema, draft_yaml
from privlab.schema.load import load_schema
from privlab.schema.model import (
    COLUMN_TYPES,
    OTHER,
    ColumnSchema,
    Schema,
    parse_schema,
    schema_from_columns,
)
from privlab.schema.read import read_declared

__all__ = [
    "BUNDLED_SCHEMAS", "COLUMN_TYPES", "OTHER", "POLICIES", "ColumnSchema", "Schema",
    "bundled_schema", "check_policy", "conform", "draft_schema", "draft_yaml", "load_schema",
    "parse_schema", "read_declared", "schema_for_dataset", "schema_from_columns",
]
