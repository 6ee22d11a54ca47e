"""Public schemas of the datasets privlab ships (and of its generated ones).

Shipped datasets have YAML files in `privlab/data/bundled/schemas/`, each stating where its
categories and bounds come from (documentation, legal or survey limits), never the rows.
Generated datasets get their schema from the same public tables their generator uses.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from privlab.errors import InvalidInputError
from privlab.schema.model import Schema, parse_schema, read_schema_file


def _from_file(stem: str) -> Callable[[], Schema]:
    def load() -> Schema:
        from privlab.data.bundled import bundled_path

        return read_schema_file(bundled_path("schemas", f"{stem}.yaml"))

    return load


def _census() -> Schema:
    from privlab.data.census import MARITAL_STATUSES, SEXES, census_tables

    t = census_tables()
    ages = t["ages"]
    names = sorted(set(t["first_names"]["name"].astype(str)))
    surnames = sorted(set(t["surnames"]["surname"].astype(str)))
    provinces = t["provinces"]["province"].astype(str).tolist()
    return parse_schema({
        "name": "census",
        "description": "synthetic Turkish census (privlab.data.census): domains from the "
                       "generator's public tables",
        "privacy_unit": "row",
        "columns": {
            "tckno": {"type": "identifier", "missing": False},
            "name": {"type": "categorical", "categories": names, "missing": False},
            "surname": {"type": "categorical", "categories": surnames, "missing": False},
            "age": {"type": "integer", "bounds": [int(ages["age_from"].min()),
                                                  int(ages["age_to"].max())],
                    "missing": False},
            "sex": {"type": "categorical", "categories": list(SEXES), "missing": False},
            "hometown": {"type": "categorical", "categories": provinces, "missing": False},
            "marital_status": {"type": "categorical", "categories": list(MARITAL_STATUSES),
                               "missing": False},
        },
    }, name="census")


def _digits() -> Schema:
    cols: dict = {f"pixel_{i}": {"type": "integer", "bounds": [0, 16], "missing": False}
                  for i in range(64)}
    cols["target"] = {"type": "categorical", "categories": [str(d) for d in range(10)],
                      "missing": False}
    return parse_schema({"name": "digits", "description": "scikit-learn 8x8 digits: pixel "
                         "intensities 0-16 (documented), classes 0-9", "columns": cols},
                        name="digits")


def _classification(n_features: int = 100) -> Schema:
    # make_classification's informative features are normal clusters on a hypercube; its
    # redundant ones are random linear combinations of them and reach |x| ~ 40 for the
    # generator's defaults. [-64, 64] is a property of the generator (generated, not personal
    # data) chosen with margin; a clipping range, not read from any sample.
    cols: dict = {f"x{i}": {"type": "numeric", "bounds": [-64.0, 64.0], "missing": False}
                  for i in range(n_features)}
    cols["target"] = {"type": "categorical", "categories": ["0", "1"], "missing": False}
    return parse_schema({"name": "classification", "description": "make_classification "
                         "features clipped to the public range [-64, 64]", "columns": cols},
                        name="classification")


BUNDLED_SCHEMAS: dict[str, Callable[[], Schema]] = {
    "adult": _from_file("adult"),
    "movielens-ratings": _from_file("movielens-ratings"),
    "movielens-movies": _from_file("movielens-movies"),
    "geolife": _from_file("geolife"),
    "census": _census,
    "digits": _digits,
    "classification": _classification,
}


@cache
def bundled_schema(name: str) -> Schema:
    """The public schema shipped for a dataset (see BUNDLED_SCHEMAS)."""
    if name not in BUNDLED_SCHEMAS:
        raise InvalidInputError(f"no bundled schema {name!r}; choose one of "
                                f"{', '.join(BUNDLED_SCHEMAS)}")
    return BUNDLED_SCHEMAS[name]()


def schema_for_dataset(dataset: str, table: str | None = None) -> Schema:
    """The schema of a bundled dataset as `privlab datasets export` writes it."""
    if dataset == "movielens":
        return bundled_schema(f"movielens-{table or 'ratings'}")
    return bundled_schema(dataset)
