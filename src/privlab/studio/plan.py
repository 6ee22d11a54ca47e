"""The analysis-plan page's logic: several statistics over several columns, one total budget
split by weights (`privlab.measure.analysis.Analysis`, the library behind
`privlab release plan`).

Why here and not in the route: the form is parsed into an `Analysis` and previewed from the
declared schema alone (no row is read, nothing is charged), and the run is `Analysis.run`
itself (charged once to the studio's ledger, before any value), writing the same
release.json as the CLI; this module only adds what reruns it (plan.yaml, schema.yaml,
reproduce.sh / reproduce.py with no data-derived text in code) and the zip."""

from __future__ import annotations

import io
import json
import math
import secrets
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privlab.errors import InvalidInputError
from privlab.measure import stats
from privlab.measure.analysis import Analysis
from privlab.measure.groups import group_columns
from privlab.studio.sources import BUNDLED, Source, quote

#: Statistic rows the form can hold; it shows the filled ones plus `SPARE` empty ones.
MAX_ROWS = 20
SPARE = 2
#: The statistics the page offers: the registry's (a new one appears without an edit).
STATISTICS = tuple(stats.names())
#: The noise a row may choose ("" in the form: the library's default, Gaussian with a delta).
MECHANISMS = ("laplace", "gaussian")
#: The form's fields (and the Run form's hidden copies).
TOP_FIELDS = ("epsilon", "delta")
ROW_FIELDS = ("stat", "col", "by", "mech", "weight")


def row_fields() -> list[str]:
    return [f"{f}{i}" for i in range(MAX_ROWS) for f in ROW_FIELDS]


def form_values(query: Mapping[str, Any]) -> dict[str, str]:
    """The plan fields of a query string or form (anything else dropped)."""
    return {k: str(query.get(k) or "").strip() for k in (*TOP_FIELDS, *row_fields())
            if str(query.get(k) or "").strip()}


def shown_rows(q: Mapping[str, str]) -> int:
    """How many statistic rows the page shows: the filled ones, then `SPARE` empty ones
    (three at least: a first plan needs no "add a row" click)."""
    last = max([i + 1 for i in range(MAX_ROWS) if q.get(f"stat{i}")], default=0)
    return min(MAX_ROWS, max(3, last + SPARE))


def _number(raw: str, name: str, default: float) -> float:
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInputError(f"{name}: type a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise InvalidInputError(f"{name}: type a finite number, got {raw!r}")
    return value


def by_columns(schema: Any) -> list[str]:
    """The columns a row may be grouped by: the library's rule (declared groups)."""
    return group_columns(schema) if schema is not None else []


def _row(q: Mapping[str, str], i: int) -> tuple[str, str | None, dict[str, Any]]:
    """Row `i` of the form as (statistic, column, `Analysis.add`'s keywords)."""
    stat = q[f"stat{i}"]
    if stat not in STATISTICS:
        raise InvalidInputError(f"statistic {i + 1}: choose one of {', '.join(STATISTICS)}")
    col = q.get(f"col{i}") or None
    if col is None and stat != "count":
        raise InvalidInputError(f"statistic {i + 1} ({stat}): choose its column")
    mech = q.get(f"mech{i}") or None
    if mech is not None and mech not in MECHANISMS:
        raise InvalidInputError(f"noise of statistic {i + 1}: choose {' or '.join(MECHANISMS)}"
                                " (or the default)")
    weight = _number(q.get(f"weight{i}", ""), f"weight of statistic {i + 1}", 1.0)
    return stat, col, {"weight": weight, "mechanism": mech, "by": q.get(f"by{i}") or None}


def analysis_of(schema: Any, q: Mapping[str, str]) -> Analysis:
    """The plan the form states, checked against the declared schema (one-line errors
    naming the row and field); refused before any row is read."""
    analysis = Analysis(schema, epsilon=_number(q.get("epsilon", ""), "total epsilon", 1.0),
                        delta=_number(q.get("delta", ""), "total delta", 0.0))
    for i in range(MAX_ROWS):
        if not q.get(f"stat{i}"):
            continue
        stat, col, options = _row(q, i)
        try:  # each statistic checked alone against the schema, so the error names its row
            analysis.add(stat, col, **options)
            Analysis(schema, epsilon=analysis.epsilon, delta=analysis.delta,
                     items=analysis.items[-1:]).measurements()
        except InvalidInputError as exc:
            raise InvalidInputError(f"statistic {i + 1}: {exc}") from None
    if not analysis.items:
        raise InvalidInputError("statistics: choose at least one statistic")
    analysis.measurements()  # the whole plan (its budget shares)
    return analysis


def columns_used(q: Mapping[str, str]) -> list[str]:
    """The columns the plan reads, groups included (in order, once each): the only ones to
    review."""
    return list(dict.fromkeys(q[f"{f}{i}"] for i in range(MAX_ROWS) for f in ("col", "by")
                              if q.get(f"stat{i}") and q.get(f"{f}{i}")))


def preview(analysis: Analysis) -> dict[str, Any]:
    """Everything stated before the data (the library's `Analysis.preview`, which reads no
    row) in the page's terms: each statistic's share, noise and 95% half-width, the total and
    the guarantee in plain words. A by-group row states its declared groups and the
    half-width of each group's value."""
    stated = analysis.preview()
    rows = []
    for item, m in zip(analysis.items, stated["measurements"], strict=True):
        hw = m["half_width_95"]
        rows.append({"statistic": item.statistic, "column": item.column or "rows",
                     "by": item.by, "groups": m.get("groups") or [],
                     "weight": item.weight, "epsilon": m["epsilon"], "delta": m["delta"],
                     "half_width": hw, "noise": ", ".join(
                         f"{n['mechanism']} scale {n['scale']:.4g}" for n in m["noise"])
                     or "exponential mechanism (no additive noise)",
                     "no_half_width": _why_no_half_width(item.statistic, item.by is not None)
                     if hw is None else None})
    g = stated["guarantee"]
    return {"rows": rows, "guarantee": g, "plain": plain_words(g, len(rows)),
            "code": library_code(analysis)}


def library_code(analysis: Analysis) -> str:
    """The same plan with the library and the CLI (shown as text, autoescaped; names as
    Python literals)."""
    adds = "".join(f"\n    .add({i.statistic!r}" + (f", {i.column!r}" if i.column else "")
                   + f", weight={i.weight:g}" + (f", by={i.by!r}" if i.by else "")
                   + (f", mechanism={i.mechanism!r}" if i.mechanism else "") + ")"
                   for i in analysis.items)
    delta = f", delta={analysis.delta:g}" if analysis.delta else ""
    return ("from privlab.measure.analysis import Analysis\n"
            f"plan = (Analysis(SCHEMA, epsilon={analysis.epsilon:g}{delta}){adds})\n"
            "plan.preview()  # reads no row\n"
            "package = plan.run(DATA, ledger=LEDGER, principal=NAME, out='package')\n"
            "# CLI: privlab release plan DATA --plan plan.yaml --ledger LEDGER "
            "--principal NAME -o package")


def _why_no_half_width(statistic: str, by_group: bool = False) -> str:
    if statistic == "quantile":
        return "none in closed form (the exponential mechanism picks a value)"
    if by_group:
        return ("none per group in closed form: a ratio of noisy sums, its error depends on "
                "the group's row count (private)")
    return ("approximate only: a ratio of noisy sums, its error depends on the row count "
            "(declare public_size in the schema to see it)")


def plain_words(g: dict[str, Any], n: int) -> str:
    """The total guarantee as a sentence for someone who never read a DP paper."""
    delta = f" (and a chance of at most {g['delta']:.3g} that this fails)" if g["delta"] else ""
    return (f"All {n} released values together are {g['headline']}: for any two datasets "
            f"that differ as stated ({g['neighbouring_meaning']}), the probability of any "
            f"package changes by at most a factor e^{g['epsilon']:.4g} \u2248 "
            f"{math.exp(g['epsilon']):.3g}{delta}. "
            f"One charge of \u03b5 = {g['epsilon']:.4g} covers the whole plan "
            f"({g['accountant']}).")


@dataclass
class PlanResult:
    """One run of a plan as the session keeps it: the package's files."""

    rid: str
    files: dict[str, str]
    summary: list[tuple[str, str, Any]]  # (statistic, column, value)
    epsilon: float
    source_label: str
    entry_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def zip_name(self) -> str:
        return f"privlab-plan-{self.rid}.zip"

    def zip_bytes(self) -> bytes:
        """Every file of the package in one zip, under `privlab-plan-<rid>/`."""
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, text in self.files.items():
                zf.writestr(f"privlab-plan-{self.rid}/{name}", text)
        return buf.getvalue()


def run(analysis: Analysis, source: Source, *, bundled: bool, ledger: Any,
        principal: str, rng: Any = None) -> PlanResult:
    """`Analysis.run` on the source's rows: the composed total charged once to `ledger`
    (a `BudgetLedger`) before any value, release.json written by the library itself."""
    schema_arg = source.bundled_schema if bundled else "schema.yaml"
    with tempfile.TemporaryDirectory(prefix="privlab-plan-") as tmp:
        package = analysis.run(source.load(), ledger=str(ledger.location), principal=principal,
                               rng=rng, out=tmp, on_invalid="coerce", plan_schema=schema_arg,
                               description=f"studio: analysis plan of {len(analysis.items)} "
                                           f"statistics (epsilon {analysis.epsilon:g})")
        release_json = (Path(tmp) / "release.json").read_text(encoding="utf-8")
    plan = analysis.to_plan(schema_arg)  # release.json's plan: the package reruns from it
    files = {"release.json": release_json, "plan.yaml": _yaml(plan),
             "reproduce.sh": reproduce_sh(source, schema_arg, str(ledger.location), principal),
             "reproduce.py": reproduce_py(source, plan, str(ledger.location), principal),
             "README.txt": _readme(package, source)}
    if not bundled:
        files["schema.yaml"] = analysis.schema.to_yaml()
    return PlanResult(secrets.token_hex(6), files,
                      [(r["statistic"], (r["column"] or "rows")
                        + (f" by {r['by']}" if r.get("by") else ""), r["value"])
                       for r in package["releases"]],
                      float(package["guarantee"]["epsilon"]), source.label,
                      package.get("ledger", {}).get("entry_id"))


def _yaml(data: Any) -> str:
    import yaml

    return "# privlab release plan DATA --plan plan.yaml (written by privlab studio)\n" + \
        yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def reproduce_sh(source: Source, schema_arg: str, ledger: str, principal: str) -> str:
    """The CLI command that reruns the plan (fresh noise, charged again); every argument
    quoted for the shell (names and paths come from the data and the workspace)."""
    data, before = source.cli_file()
    cmd = ["privlab", "release", "plan", quote(data), "--plan", "plan.yaml", "--schema",
           quote(schema_arg), "--on-invalid", "coerce", "--ledger", quote(ledger),
           "--principal", quote(principal), "-o", "rerun"]
    return "#!/bin/sh\nset -e\ncd \"$(dirname \"$0\")\"\n" + "\n".join(
        before + [" ".join(cmd)]) + "\n"


def reproduce_py(source: Source, plan: dict[str, Any], ledger: str, principal: str) -> str:
    """A fixed script; everything specific (plan, data, ledger) is one JSON literal, so a
    hostile column name can only change a value, never the code."""
    params = {"plan": plan, "ledger": ledger, "principal": principal,
              "data": ({"dataset": source.name, "options": BUNDLED[source.name][1]}
                       if source.kind == "bundled" else {"path": str(source.path)})}
    return _SCRIPT.replace("PARAMS_LITERAL",
                           repr(json.dumps(params, ensure_ascii=True, sort_keys=True)))


_SCRIPT = '''"""Rerun a privlab studio analysis plan: the same statistics, weights and total
epsilon, with fresh noise, charged once to the same budget ledger first (refused once it is spent).
Writes rerun/release.json beside this script. Everything specific is the JSON in P."""
import json
from pathlib import Path

from privlab.measure.analysis import Analysis
from privlab.measure.groups import group_columns

P = json.loads(PARAMS_LITERAL)
HERE = Path(__file__).resolve().parent
if "dataset" in P["data"]:
    from privlab.data.datasets import load_dataset
    frame = load_dataset(P["data"]["dataset"], **P["data"]["options"])
else:
    frame = P["data"]["path"]
schema = P["plan"]["schema"]
if schema == "schema.yaml":
    schema = str(HERE / "schema.yaml")
package = Analysis.from_plan(P["plan"], schema).run(
    frame, ledger=P["ledger"], principal=P["principal"], out=HERE / "rerun",
    on_invalid="coerce", description="rerun of a studio analysis plan")
print(json.dumps(package, indent=2, default=str))
'''


def _readme(package: dict[str, Any], source: Source) -> str:
    g = package["guarantee"]
    return (f"privlab studio analysis plan on {source.label}: {len(package['releases'])} "
            f"statistics, {g['headline']} in total ({g['accountant']}).\n\n"
            "release.json  every value with its own guarantee, the total and the plan (the "
            "same package as `privlab release plan`)\n"
            "plan.yaml     the plan: privlab release plan DATA --plan plan.yaml\n"
            "reproduce.sh  reruns it with the privlab CLI\n"
            "reproduce.py  reruns it with the library\n"
            "Rerunning draws fresh noise and is charged to the same ledger again.\n")


__all__ = ["MAX_ROWS", "MECHANISMS", "STATISTICS", "PlanResult", "analysis_of", "by_columns",
           "columns_used", "form_values", "preview", "run", "shown_rows"]
