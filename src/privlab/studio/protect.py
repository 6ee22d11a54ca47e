"""Protect: DP statistics with the budget split and an accuracy preview shown first, then the
release, charged to the ledger before it is computed; and what reruns it.

The preview is computed from public information only: the declared schema (bounds,
categories, privacy unit), the chosen epsilon and, if the user types one, a guessed row count.
It runs the very query function the release runs on an EMPTY placeholder column (so the
noise scale and grid are exactly the release's) and keeps only the noise description; no
private row is read and nothing is charged. The release itself goes through the CLI's own
code (`privlab.schema.release`: schema conformance, person-level contribution bounds, the
guarantee text), so the studio and `privlab release` give the same release."""

from __future__ import annotations

import dataclasses
import json
import math
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from privlab.core import queries
from privlab.core.guarantee import PrivacyGuarantee, check_epsilon
from privlab.errors import InvalidInputError
from privlab.measure import stats
from privlab.schema import OTHER, Schema
from privlab.studio.sources import BUNDLED, Source, quote

#: What the studio offers: the statistics registry (`privlab.measure.stats`) but the quantile
#: (the form has no q); a new statistic there is offered here without an edit.
STATISTICS = tuple(n for n in stats.names() if n != "quantile")
#: The group of rows whose `by` value is missing (when the schema allows missing values).
MISSING = "<missing>"
DEFAULT_MECHANISM = {n: stats.get(n).default_mechanism for n in STATISTICS}


@dataclass(frozen=True)
class Plan:
    """What the user asked for; `expected_rows` is a public guess used by the preview only."""

    statistic: str
    column: str
    epsilon: float
    bins: int | None = None
    expected_rows: int | None = None
    by: str | None = None  # a declared categorical column: one release per declared group


@dataclass(frozen=True)
class Domain:
    """The column's public domain and the contribution bound, from the schema only."""

    bounds: tuple[float, float] | None
    categories: list[str] | None
    bins: int | None
    per_unit: int
    unit: str | None
    groups: list[str] | None = None  # the `by` column's declared groups (public)
    integer: bool = False  # the column is declared integer (a histogram's integer bins)

    def inputs(self, plan: Plan, public_size: int | None = None) -> stats.Inputs:
        """The registry's public inputs at the row-level budget epsilon / per_unit."""
        cats = tuple(self.categories) if self.categories is not None else None
        return stats.Inputs(self.bounds, cats, cats, self.bins, self.integer,
                            DEFAULT_MECHANISM[plan.statistic], plan.epsilon / self.per_unit,
                            0.0, public_size=public_size)


def parse_plan(form: dict[str, Any]) -> Plan:
    """A Plan from form fields, with one-line errors naming the field."""
    stat = str(form.get("statistic", "")).strip()
    if stat not in STATISTICS:
        raise InvalidInputError(f"statistic: choose one of {', '.join(STATISTICS)}")
    column = str(form.get("column", "")).strip()
    if not column:
        raise InvalidInputError("column: choose the column to release")
    try:
        epsilon = check_epsilon(float(str(form.get("epsilon", "")).strip()))
    except ValueError:
        raise InvalidInputError("epsilon: type a number above 0, e.g. 1") from None
    bins = _optional_int(form.get("bins"), "bins")
    rows = _optional_int(form.get("expected_rows"), "expected rows")
    by = str(form.get("by") or "").strip() or None
    return Plan(stat, column, epsilon, bins, rows, by)


def _optional_int(raw: Any, field_name: str) -> int | None:
    text = str(raw or "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise InvalidInputError(f"{field_name}: type a whole number, got {text!r}") from None
    if value < 1:
        raise InvalidInputError(f"{field_name}: must be at least 1, got {value}")
    return value


def domain_of(schema: Schema, plan: Plan) -> Domain:
    """The public domain the release will use: the measurement layer's
    (`privlab.measure.measurement`, the one the CLI and analysis plans use), so bounds,
    categories, bins and the contribution bound have one definition; the studio adds only
    its by-group split (the declared groups of `plan.by`)."""
    from privlab.measure.measurement import measurement

    m = measurement(schema, plan.statistic, plan.column, epsilon=plan.epsilon, bins=plan.bins)
    dom, rel = m.domain, m.relation
    groups = None if plan.by is None else by_groups(schema, plan)
    return Domain(dom.bounds, list(dom.categories) if dom.categories is not None else None,
                  dom.bins, rel.steps if rel.unit is not None else 1, rel.unit, groups,
                  dom.integer)


def by_groups(schema: Schema, plan: Plan) -> list[str]:
    """The declared groups of `plan.by` (public: categories, other, missing)."""
    gcol = schema.column(str(plan.by))
    if plan.statistic == "histogram":
        raise InvalidInputError("by group: choose another statistic (a histogram is "
                                "already one count per cell)")
    if gcol.type != "categorical" or plan.by == plan.column:
        raise InvalidInputError(f"by: {plan.by!r} must be a categorical column other "
                                f"than {plan.column!r} (its groups come from the schema)")
    return list(gcol.categories) + ([OTHER] if gcol.other else []) + \
        ([MISSING] if gcol.missing else [])


def _query(values: Any, plan: Plan, d: Domain, rng: Any) -> Any:
    """The query the release runs: the registry's release (as `privlab release`)."""
    return stats.get(plan.statistic).release(values, d.inputs(plan), rng)


def budget_split(plan: Plan, d: Domain) -> list[tuple[str, float]]:
    """Where the epsilon goes, before anything runs."""
    eps = plan.epsilon / d.per_unit
    each = "" if d.groups is None else f" (in each of the {len(d.groups)} groups of " \
        f"{plan.by}: a row is in one group, so the groups compose in parallel)"
    if plan.statistic == "mean":
        return [("noisy sum of the clamped values" + each, eps / 2), ("noisy count" + each,
                                                                        eps / 2)]
    parts = _SPLIT.get(plan.statistic) or stats.get(plan.statistic).noise_words
    if not parts:  # any other statistic of the registry: its planned noises
        noise = stats.get(plan.statistic).plan(d.inputs(plan))
        parts = tuple(f"noisy measurement {i + 1} of {len(noise)} ({n.mechanism}, "
                      f"sensitivity {n.sensitivity:g})" for i, n in enumerate(noise))
    return [(what + each, eps / len(parts)) for what in parts]


#: The budget split's words of the basic four (others: the registry's `noise_words`).
_SPLIT = {"count": ("noisy count",), "sum": ("noisy sum of the clamped values",),
          "histogram": ("one noisy count per cell (a person is in one cell)",)}


def preview(schema: Schema, plan: Plan) -> dict[str, Any]:
    """The accuracy preview from public information only (see the module docstring)."""
    d = domain_of(schema, plan)
    placeholder: list[Any] = []  # no private row: the noise does not depend on the data
    probe = _query(placeholder, plan, d, rng=0)
    out: dict[str, Any] = {
        "split": budget_split(plan, d), "per_unit": d.per_unit, "unit": d.unit,
        "bounds": d.bounds, "categories": d.categories, "bins": d.bins,
        "granularity": probe.granularity, "noise": probe.noise,
        "half_width": probe.confidence_interval(0.95), "approx": None,
        "expected_rows": plan.expected_rows, "library_call": library_call(plan, d),
        "groups": d.groups,
    }
    n = plan.expected_rows or schema.public_size
    if plan.statistic == "mean":
        lo, hi = d.bounds  # type: ignore[misc]
        sum_hw = probe.noise["sum_scale"] * math.log(20)
        count_hw = probe.noise["count_scale"] * math.log(20)
        out["sum_half_width"], out["count_half_width"] = sum_hw, count_hw
        if n:
            # noisy mean ~ c + S/N: |error| <= (|S noise| + (hi - lo)/2 * |N noise|) / n
            out["approx"] = ("mean half-width", (sum_hw + (hi - lo) / 2 * count_hw) / n)
    elif plan.statistic == "histogram" and n:
        cells = len(d.categories) if d.categories else (d.bins or 10)
        scale = float(probe.noise.get("scale") or 0.0)
        out["approx"] = ("expected TVD from noise", min(1.0, cells * scale / (2 * n)))
    elif plan.statistic in ("count", "sum") and n and out["half_width"] is not None:
        base = n if plan.statistic == "count" else None
        if base:
            out["approx"] = ("relative half-width", out["half_width"] / base)
    elif plan.statistic not in ("count", "sum", "histogram"):  # the registry's, before data
        stat = stats.get(plan.statistic)
        inputs = d.inputs(plan, n)
        out["half_width"] = None
        hw = stat.half_width(inputs, stat.plan(inputs)) if n else None
        out["half_width_words"] = (
            "no closed form: a ratio of noisy sums (" + ", ".join(
                f"{k.replace('_scale', '').replace('_', ' ')} scale {v:.4g}"
                for k, v in probe.noise.items() if k.endswith("_scale")) + ")")
        if hw is not None:
            out["approx"] = (f"{plan.statistic} half-width (first order)", hw)
    return out


def library_call(plan: Plan, d: Domain) -> str:
    eps = f"{plan.epsilon:g}" if d.per_unit == 1 else f"{plan.epsilon:g} / {d.per_unit}"
    if plan.by is not None:
        return library_call(dataclasses.replace(plan, by=None), d) + \
            f"  # for the rows of each group of {plan.by}"
    if plan.statistic == "count":
        return f"queries.dp_count(values, epsilon={eps})"
    if plan.statistic in ("sum", "mean"):
        lo, hi = d.bounds  # type: ignore[misc]
        return f"queries.dp_{plan.statistic}(values, bounds=({lo:g}, {hi:g}), epsilon={eps})"
    if plan.statistic != "histogram":
        lo, hi = d.bounds  # type: ignore[misc]
        return (f"stats.get({plan.statistic!r}).release(values, stats.Inputs(bounds=({lo:g}, "
                f"{hi:g}), ..., epsilon={eps}))")
    if d.categories is not None:
        return (f"queries.dp_histogram(values, epsilon={eps}, "
                f"categories=[{len(d.categories)} labels])")
    lo, hi = d.bounds  # type: ignore[misc]
    return f"queries.dp_histogram(values, epsilon={eps}, bounds=({lo:g}, {hi:g}), bins={d.bins})"


@dataclass
class Result:
    """One release as the session keeps it."""

    rid: str
    statistic: str
    column: str
    epsilon: float
    payload: dict[str, Any]
    source_label: str
    cli: str
    script: str
    schema_yaml: str | None
    #: The release's guarantee itself (the report's banner): rebuilt from the JSON it would
    #: lose the neighbouring relation (a per-person release would read "one record").
    privacy: PrivacyGuarantee
    created: float = field(default_factory=time.time)

    @property
    def guarantee(self) -> dict[str, Any]:
        return self.payload["guarantee"]


def release(frame: Any, schema: Schema, plan: Plan, *, ledger: Any, principal: str,
            source: Source, rng: Any = None) -> tuple[Result, Any]:
    """Conform, check, charge, then compute (nothing is computed before the charge commits).

    Returns the Result and the ledger entry. `frame` is the private table."""
    from privlab.schema.release import release_guarantee

    d = domain_of(schema, plan)  # public checks first: a refusal here reads no row
    parts = [frame] if plan.by is None else _split(frame, schema, plan, d)
    values = [_values(part, schema, plan, d) for part in parts]
    description = f"studio: {plan.statistic} of {plan.column}" + \
        (f" by {plan.by}" if plan.by else "") + f" (epsilon {plan.epsilon:g})"
    entry = ledger.charge(principal, plan.epsilon, 0.0, description=description)
    from privlab.core.rng import make_rng

    # a seed (tests only) gives one seeded stream over the groups; otherwise each query
    # draws from its own CSPRNG
    gen = make_rng(rng) if plan.by is not None and rng is not None else rng
    results = [_query(v, plan, d, gen) for v in values]
    result = results[0]
    if plan.by is not None:
        result = dataclasses.replace(
            result, value=[r.value for r in results],
            details={"groups": d.groups, "by": plan.by,
                     "per_group": [r.details for r in results]},
            guarantee=result.guarantee.with_notes(by_group_note(plan, len(results))))
    is_bundled = _is_bundled(schema, source)
    schema_arg = source.bundled_schema if is_bundled else "schema.yaml"
    guarantee = release_guarantee(result.guarantee, plan.statistic, plan.column, plan.epsilon,
                           d.per_unit, d.unit, schema_arg)
    result = dataclasses.replace(result, guarantee=guarantee)
    payload = {"statistic": plan.statistic, "column": plan.column, **result.to_dict(),
               "ledger": {"principal": principal, "entry_id": entry.entry_id,
                          "remaining_epsilon": entry.remaining_epsilon}}
    from privlab.core.release import ratio_half_width  # the CLI's: both print one figure

    ratio_hw = ratio_half_width(result.noise, result.details or {},
                                "gaussian" in guarantee.mechanism)
    if plan.statistic == "mean" and ratio_hw is not None:
        payload["mean_half_width_95_approx"] = ratio_hw["mean"]
    words = _registry_half_width(plan, d, results)
    if words is not None:
        payload["half_width_words"] = words
    schema_yaml = None if is_bundled else schema.to_yaml()
    out = Result(rid=secrets.token_hex(6), statistic=plan.statistic, column=plan.column,
                 epsilon=plan.epsilon, payload=payload, source_label=source.label,
                 cli=cli_command(plan, source, schema_arg, str(ledger.location), principal),
                 script=python_script(plan, d, source, schema_arg, str(ledger.location),
                                      principal),
                 schema_yaml=schema_yaml, privacy=guarantee)
    return out, entry


def _registry_half_width(plan: Plan, d: Domain, results: list[Any]) -> str | None:
    """The registry's words for a half-width without a closed form (variance, stddev: first
    order at the noisy count), per group for a by-group release; None for the basic four,
    which the CLI's `half_width_text` describes."""
    if plan.statistic in ("count", "sum", "mean", "histogram"):
        return None
    stat = stats.get(plan.statistic)
    if plan.by is None:
        return stat.half_width_words(results[0])
    widths = [stat.release_half_width(r) for r in results]
    return "per group, first order at its noisy count: " + ", ".join(
        f"{g} about {w:.4g}" for g, w in zip(d.groups or [], widths, strict=True)
        if w is not None)


def _values(frame: Any, schema: Schema, plan: Plan, d: Domain) -> Any:
    """The released column's values after `privlab release`'s schema step (conformance and
    the per-person contribution bound)."""
    from privlab.schema.release import ReleaseDomain, conform_for_release

    declared = ReleaseDomain(d.bounds if plan.statistic != "histogram" or d.categories is None
                         else None, d.categories, d.bins, 1, None)
    frame, _ = conform_for_release(frame, schema, "coerce", plan.column, plan.statistic, declared,
                             None, DEFAULT_MECHANISM[plan.statistic],
                             reads_numbers=stats.get(plan.statistic).numeric)
    values = frame[plan.column]
    if stats.get(plan.statistic).numeric:
        return queries.as_numeric(values.to_numpy(), f"column {plan.column!r}")
    if plan.statistic == "histogram":
        values = values.dropna()
        if d.categories is None:
            return queries.as_numeric(values.to_numpy(), f"column {plan.column!r}")
    return values


def _split(frame: Any, schema: Schema, plan: Plan, d: Domain) -> list[Any]:
    """The rows of each declared group of `plan.by`, in the schema's order (a group no row
    falls in is an empty table: its release is noise around zero, like any other)."""
    from privlab.schema import conform
    from privlab.schema.units import bound_per_unit

    keep = list(dict.fromkeys([plan.column, plan.by] + ([d.unit] if d.unit else [])))
    rows = conform(frame, schema, "coerce", columns=keep)
    if d.unit:  # each person's first M rows overall (no id: dropped), before the groups
        rows = bound_per_unit(rows, d.unit, d.per_unit)
    key = rows[plan.by].astype(object).where(rows[plan.by].notna(), MISSING).astype(str)
    cols = [c for c in keep if c != plan.by]
    return [rows.loc[key == g, cols] for g in d.groups or []]


def by_group_note(plan: Plan, groups: int) -> str:
    """The guarantee's note on a by-group release (the release and its rerun script)."""
    return (f"by {plan.by}: one release per declared group ({groups}); each row is in one "
            f"group, so they compose in parallel at epsilon {plan.epsilon:g}")


def _is_bundled(schema: Schema, source: Source) -> bool:
    if source.bundled_schema is None:
        return False
    from privlab.schema import bundled_schema

    return bundled_schema(source.bundled_schema).fingerprint() == schema.fingerprint()


def cli_command(plan: Plan, source: Source, schema_arg: str, ledger: str, principal: str) -> str:
    """The `privlab` commands that rerun this release (fresh noise, charged again)."""
    if plan.by is not None:
        return ("# `privlab release` has no by-group option; rerun this release with\n"
                "python reproduce.py")
    data, before = source.cli_file()
    parts = ["privlab", "release", plan.statistic, quote(data), "--column", quote(plan.column),
             "--epsilon", f"{plan.epsilon:g}", "--schema", quote(schema_arg),
             "--on-invalid", "coerce"]
    if plan.bins is not None:
        parts += ["--bins", str(plan.bins)]
    parts += ["--ledger", quote(ledger), "--principal", quote(principal), "--json"]
    return "\n".join(before + [" ".join(parts)])


def python_script(plan: Plan, d: Domain, source: Source, schema_arg: str, ledger: str,
                  principal: str) -> str:
    """A standalone script that reruns the release with the library (fresh noise, charged to
    the same ledger and principal; it refuses once the budget is spent). Its guarantee is the
    studio's: the query's, with `release_guarantee` applied (covers, person-level claim) and
    the by-group note, so the rerun's guarantee equals release.json's.

    Why the code is one fixed text: column names, categories, groups, paths and the principal
    come from the data or the workspace (a CSV header can hold quotes, newlines or Python).
    They all go into one JSON document, embedded as a Python string literal (`repr` of
    ASCII-only JSON) and parsed with `json.loads`; no data-derived text is ever spliced into
    the code, so the only thing a hostile name can change is a value."""
    numeric = stats.get(plan.statistic).numeric or (plan.statistic == "histogram"
                                                    and d.categories is None)
    params = {
        "statistic": plan.statistic, "column": plan.column, "by": plan.by,
        "epsilon": plan.epsilon, "per_unit": d.per_unit, "unit": d.unit,
        "bounds": list(d.bounds) if d.bounds is not None else None,
        "categories": d.categories, "bins": d.bins or 10, "groups": d.groups,
        "numeric": numeric, "mechanism": DEFAULT_MECHANISM[plan.statistic],
        "integer": d.integer,
        "keep": list(dict.fromkeys([plan.column] + ([plan.by] if plan.by else [])
                                   + ([d.unit] if d.unit else []))),
        "data": ({"dataset": source.name, "options": BUNDLED[source.name][1]}
                 if source.kind == "bundled" else {"path": str(source.path)}),
        "schema": schema_arg, "schema_beside_script": schema_arg == "schema.yaml",
        "ledger": ledger, "principal": principal, "missing": MISSING,
        "by_note": by_group_note(plan, len(d.groups or [])) if plan.by else None,
        "description": f"rerun of a studio release: {plan.statistic} of {plan.column}",
    }
    literal = repr(json.dumps(params, ensure_ascii=True, sort_keys=True))
    return _SCRIPT.replace("PARAMS_LITERAL", literal)


#: reproduce.py: fixed code; everything release-specific is in P (see `python_script`).
_SCRIPT = '''"""Rerun a privlab studio release: the same query, public domain and epsilon, with
fresh noise, charged to the same budget ledger first (refused once it is spent).

Everything specific to this release (column, domain, data, ledger) is the JSON in P below."""
import json
from pathlib import Path

from privlab.core import queries
from privlab.core.ledger import BudgetLedger
from privlab.measure import stats
from privlab.schema import conform, load_schema
from privlab.schema.release import release_guarantee

P = json.loads(PARAMS_LITERAL)

if "dataset" in P["data"]:
    from privlab.data.datasets import load_dataset
    frame = load_dataset(P["data"]["dataset"], **P["data"]["options"])
else:
    from privlab.data.io import read_table
    frame = read_table(P["data"]["path"])
schema = load_schema(Path(__file__).with_name("schema.yaml") if P["schema_beside_script"]
                     else P["schema"])
frame = conform(frame, schema, "coerce", columns=P["keep"])
if P["unit"]:  # each person's first per_unit rows; rows without an id dropped
    from privlab.schema.units import bound_per_unit
    frame = bound_per_unit(frame, P["unit"], P["per_unit"])
with BudgetLedger(P["ledger"]) as ledger:  # charged first; closed at once
    entry = ledger.charge(P["principal"], P["epsilon"], 0.0, description=P["description"])
eps = P["epsilon"] / P["per_unit"]
bounds = tuple(P["bounds"]) if P["bounds"] is not None else None


def query(values):
    """The statistic's one definition in the registry, on the public inputs in P."""
    if P["numeric"]:
        values = queries.as_numeric(values.dropna().to_numpy())
    elif P["statistic"] == "histogram":
        values = values.dropna()
    cats = tuple(P["categories"]) if P["categories"] is not None else None
    inputs = stats.Inputs(bounds, cats, cats, P["bins"], P["integer"], P["mechanism"], eps,
                          0.0)
    return stats.get(P["statistic"]).release(values, inputs, None)


if P["by"] is None:
    release = query(frame[P["column"]])
    out = {"statistic": P["statistic"], "column": P["column"], **release.to_dict()}
    guarantee = release.guarantee
else:
    groups = P["groups"]  # declared in the schema
    by = frame[P["by"]]
    key = by.astype(object).where(by.notna(), P["missing"]).astype(str)
    releases = [query(frame.loc[key == g, P["column"]]) for g in groups]
    out = {"statistic": P["statistic"], "column": P["column"], "by": P["by"],
           "groups": groups, "value": [r.to_dict()["value"] for r in releases],
           "noise": releases[0].noise}
    # each row is in one group: the groups compose in parallel
    guarantee = releases[0].guarantee.with_notes(P["by_note"])
# what the release covers and, with a person column, the per-person claim
guarantee = release_guarantee(guarantee, P["statistic"], P["column"], P["epsilon"],
                              P["per_unit"], P["unit"], P["schema"])
out["guarantee"] = guarantee.to_dict()
out["ledger"] = {"remaining_epsilon": entry.remaining_epsilon}
print(json.dumps(out, indent=2, default=str))
'''


def report_html(result: Result) -> str:
    """The release as one self-contained page of the shared report layout."""
    from privlab.core.release import half_width_text
    from privlab.report import Section, Table, render_html

    v = result.payload
    g = result.guarantee
    # a mean's approximate half-width in the CLI's words (`privlab release` prints the same)
    half_width = half_width_text(None, v["noise"], v.get("details"),
                                 "gaussian" in str(g.get("mechanism", ""))) \
        if "mean_half_width_95_approx" in v else v.get("confidence_interval_95") or \
        "none in closed form (a ratio of a noisy sum and a noisy count)"
    facts = {"statistic": result.statistic, "column": result.column,
             "data": result.source_label, "epsilon": result.epsilon,
             "grid": v.get("granularity"), "95% noise half-width": half_width,
             "ledger": f"{v['ledger']['principal']}, entry {v['ledger']['entry_id']}, "
                       f"{v['ledger']['remaining_epsilon']:g} left after it"}
    tables = []
    if isinstance(v["value"], list):
        details = v.get("details", {})
        labels = details.get("labels") or details.get("groups", [])
        head = ["cell", "noisy count"] if "labels" in details else \
            [details.get("by", "group"), f"noisy {result.statistic}"]
        tables.append(Table(head, list(zip(labels, v["value"], strict=True)),
                            caption="Noisy values"))
    else:
        facts = {"released value": v["value"], **facts}
    sections = [
        Section("Release", facts=facts, tables=tables),
        Section("Guarantee", paragraphs=[f"{g['headline']}: {g['mechanism']}; neighbouring: "
                                         f"{g.get('neighbouring_meaning', g['neighbouring'])}; "
                                         f"accountant: {g['accountant']}."],
                items=list(g.get("notes", [])) + [f"covers: {c}" for c in g.get("covers", [])]),
        Section("Rerun it", paragraphs=["With the CLI: " + result.cli.replace("\n", " && "),
                                        "With the library: reproduce.py in this package. A "
                                        "rerun draws fresh noise and is charged again."]),
    ]
    # only the DP release, its guarantee and public settings: no exact value
    return render_html("page.html.j2", exact_values=None, title=f"privlab release {result.rid}",
                       subtitle=f"{result.statistic} of {result.column}", sections=sections,
                       guarantee=result.privacy)


def package_files(result: Result) -> dict[str, str]:
    """The downloadable package: release, guarantee, report, script, commands, schema."""
    files = {
        "release.json": json.dumps(result.payload, indent=2, default=str),
        "guarantee.json": json.dumps(result.guarantee, indent=2, default=str),
        "report.html": report_html(result),
        "reproduce.py": result.script,
        "reproduce.sh": "#!/bin/sh\nset -e\n" + result.cli + "\n",
        "README.txt": (
            f"privlab studio release {result.rid}: {result.statistic} of {result.column} from "
            f"{result.source_label}, epsilon {result.epsilon:g}.\n"
            f"Guarantee: {result.guarantee.get('headline', '')}\n\n"
            "release.json    the released value, its grid, noise and guarantee\n"
            "guarantee.json  the privacy guarantee alone\n"
            "report.html     the release, its guarantee and how to rerun it, as a page\n"
            "reproduce.py    reruns the same release with the library (python reproduce.py)\n"
            "reproduce.sh    the same with the privlab CLI\n"
            "Rerunning draws fresh noise and is charged to the same ledger: a second release "
            "spends budget again.\n"),
    }
    if result.schema_yaml is not None:
        files["schema.yaml"] = result.schema_yaml
    return files
