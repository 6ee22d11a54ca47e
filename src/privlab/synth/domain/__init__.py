"""The discrete domain a synthesizer works on, and how it is obtained without leaking.

Every column becomes a finite set of codes: categorical columns one code per category (plus
an `<other>` bucket when the categories were selected privately, plus a missing code),
numeric columns one code per bin over bounds, one code per declared point mass (a value that
carries its own mass, e.g. 0: `point_masses` in the schema, so the share of exact zeros
survives instead of being smeared over the bin that holds it), plus a missing code. Where
the categories and bounds come from matters for privacy, so each column says so in `source`:

- declared: the data publisher states them in a public schema (`privlab.schema`, e.g. the
  bundled `adult` schema, taken from the UCI `adult.names` documentation and the survey's
  public top-codes);
- estimated (the columns named by `estimate`, `--estimate-domain`): measured with part of the
  privacy budget (zCDP, see `privlab.synth.budget`):
  categorical labels by a thresholded discrete-Gaussian histogram (a label is kept only if its
  noisy count clears a threshold set so that a label held by one person appears with
  probability <= delta'), numeric bounds by a noisy histogram over a fixed log-scale grid
  (lower bound = left edge of the first bin whose noisy count clears a threshold, upper bound =
  right edge of the last one);
- observed: read from the data without noise (only in the non-private baseline mode).

Which columns exist, their kind (categorical / numeric, integer or not) and whether they may be
missing come from the one declaration format, a `privlab.schema.Schema`, never from the data:
`declaration_from_schema` turns it into this module's internal `DomainDeclaration` (identifier
and text columns are dropped by declaration). The rows are first conformed to the schema
(`privlab.schema.conform`), so their dtypes, and the output's dtypes, do not depend on the
values.

Three modules, this package re-exporting their public names (the path `privlab.synth.domain`
is unchanged): `spec` (ColumnSpec, Domain), `declaration` (the schema read into a declaration,
the column plans) and `estimate` (the domain built, DP estimation of what is not declared).
"""

from __future__ import annotations

from privlab.synth.domain.declaration import (
    ALL,
    NO_SCHEMA,
    ColumnDeclaration,
    ColumnPlan,
    DomainDeclaration,
    conform_schema,
    declaration_from_schema,
    estimate_columns,
    plan_columns,
)
from privlab.synth.domain.estimate import (
    BOUND_FALSE_POSITIVE,
    BOUND_GRID,
    DomainBudget,
    build_domain,
    discrete_gaussian_tail,
    estimate_bounds,
    make_edges,
    own_codes,
    threshold_for,
)
from privlab.synth.domain.spec import (
    DEFAULT_BINS,
    MAX_BINS,
    MAX_CATEGORIES,
    OTHER,
    UNIT_BINS_MAX,
    ColumnSpec,
    Domain,
    Kind,
    numeric_values,
)

__all__ = [
    "ALL",
    "BOUND_FALSE_POSITIVE",
    "BOUND_GRID",
    "ColumnDeclaration",
    "ColumnPlan",
    "ColumnSpec",
    "DEFAULT_BINS",
    "Domain",
    "DomainBudget",
    "DomainDeclaration",
    "Kind",
    "MAX_BINS",
    "MAX_CATEGORIES",
    "NO_SCHEMA",
    "OTHER",
    "UNIT_BINS_MAX",
    "build_domain",
    "conform_schema",
    "declaration_from_schema",
    "discrete_gaussian_tail",
    "estimate_bounds",
    "estimate_columns",
    "make_edges",
    "numeric_values",
    "own_codes",
    "plan_columns",
    "threshold_for",
]
