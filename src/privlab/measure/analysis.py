"""`Analysis`: several statistics over several columns, one budget split by weights.

Why: each `privlab release` is its own release with its own epsilon, so three statistics at
epsilon 1 cost epsilon 3. A plan states every measurement before any row is read, splits one
(epsilon, delta) across them by weight, composes them with the tightest valid accountant
(privlab.measure.composition: the sum of epsilons for a pure plan; zCDP where a Gaussian
draws, PLD for a mixed plan, never looser than the sum of epsilons and deltas), charges the
composed total once, and packages
every value with its guarantee and the plan itself, so the package can be rerun.
An item may be released per declared group of a `by:` column (privlab.measure.groups):
the groups are disjoint, so the item costs what one group costs (parallel composition).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.rng import RngLike
from privlab.errors import InvalidInputError
from privlab.measure import stats
from privlab.measure.composition import (
    Composed,
    compose,
    plan_draws,
    plan_rho,
    pld_epsilon,
    zcdp_epsilon,
)
from privlab.measure.groups import Groups, by_note, groups_of
from privlab.measure.measurement import Measurement, measurement
from privlab.utils.atomic import atomic_write_text

#: Keys a plan's item may carry (anything else is refused, naming it).
ITEM_KEYS = frozenset({"statistic", "column", "weight", "mechanism", "bins", "q", "by"})
PLAN_KEYS = frozenset({"schema", "epsilon", "delta", "max_rows_per_unit", "statistics"})


@dataclass(frozen=True)
class Item:
    """One statistic of the plan and its share of the budget (by weight)."""

    statistic: str
    column: str | None
    weight: float = 1.0
    mechanism: str | None = None
    bins: int | None = None
    q: float = 0.5
    by: str | None = None  # released per declared group of this column

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"statistic": self.statistic, "weight": self.weight}
        if self.column is not None:
            out["column"] = self.column
        for key in ("mechanism", "bins"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.statistic == "quantile":
            out["q"] = self.q
        if self.by is not None:
            out["by"] = self.by
        return out


@dataclass
class Analysis:
    """A plan: `Analysis(schema, epsilon=1).add("count").add("mean", "age", weight=2)`."""

    schema: Any
    epsilon: float = 1.0
    delta: float = 0.0
    relation: Any = None
    max_rows_per_unit: int | None = None
    items: list[Item] = field(default_factory=list)

    def add(self, statistic: str, column: str | None = None, *, weight: float = 1.0,
            mechanism: str | None = None, bins: int | None = None, q: float = 0.5,
            by: str | None = None) -> Analysis:
        """Add one statistic (refused at once if the registry has no such statistic, or if
        `by` is not a column with declared groups)."""
        stats.get(statistic)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or \
                not weight > 0 or weight == float("inf"):
            raise InvalidInputError(f"weight of {statistic} must be a number > 0, got {weight!r}")
        if by is not None:
            from privlab.schema import load_schema

            groups_of(load_schema(self.schema), str(by), column)
        self.items.append(Item(statistic, column, float(weight), mechanism, bins, float(q),
                               None if by is None else str(by)))
        return self

    def groups(self) -> list[Groups | None]:
        """Each item's declared groups (None: released once over all rows)."""
        from privlab.schema import load_schema

        sch = load_schema(self.schema)
        return [None if i.by is None else groups_of(sch, i.by, i.column) for i in self.items]

    # ------------------------------------------------------------------ before any row
    def measurements(self) -> list[Measurement]:
        """Each item's measurement at its weighted share of (epsilon, delta)."""
        if not self.items:
            raise InvalidInputError("the plan has no statistics: add at least one")
        eps, delta = check_epsilon(self.epsilon), check_delta(self.delta)
        total = sum(i.weight for i in self.items)
        mechs = [self._mechanism(item, delta) for item in self.items]
        # delta is spent only by Gaussian items: it is split by weight among them alone, so
        # a Laplace item's share of delta is not left unused
        gaussian_weight = sum(i.weight for i, m in zip(self.items, mechs, strict=True)
                              if m == "gaussian")
        out = []
        for item, mech in zip(self.items, mechs, strict=True):
            share = item.weight / total
            column = item.column if item.column is not None else _any_column(self.schema)
            out.append(measurement(
                self.schema, item.statistic, column, epsilon=eps * share,
                delta=delta * item.weight / gaussian_weight if mech == "gaussian" else 0.0,
                mechanism=mech,
                relation=self.relation, max_rows_per_unit=self.max_rows_per_unit,
                bins=item.bins, q=item.q))
        return out

    @staticmethod
    def _mechanism(item: Item, delta: float) -> str | None:
        """The item's mechanism: as asked, else Gaussian where delta > 0 and it can be."""
        if item.mechanism is None and delta > 0 and \
                "gaussian" in stats.get(item.statistic).mechanisms:
            return "gaussian"
        return item.mechanism

    def composed(self, ms: list[Measurement] | None = None) -> Composed:
        """The tightest valid total (privlab.measure.composition): the sum for a pure plan;
        with Gaussian noise the lowest of the basic sums, zCDP and, for a mixed plan, PLD
        (a relation of several add/remove steps: the basic sums)."""
        return compose(self.measurements() if ms is None else ms, self.epsilon)

    def guarantee(self, ms: list[Measurement] | None = None) -> PrivacyGuarantee:
        """The plan's total guarantee, covering every statistic."""
        ms = self.measurements() if ms is None else ms
        total = self.composed(ms)
        first = ms[0].guarantee
        items = self.item_guarantees(ms)
        by = tuple(n for g in items for n in g.notes if n.startswith("by "))
        return PrivacyGuarantee(
            epsilon=total.epsilon, delta=total.delta, neighbouring=first.neighbouring,
            mechanism="; ".join(sorted({m.guarantee.mechanism for m in ms})),
            accountant=total.accountant, notes=first.notes + by,
            covers=tuple(c for g in items for c in g.covers))

    def item_guarantees(self, ms: list[Measurement] | None = None) -> list[PrivacyGuarantee]:
        """Each item's claim: its measurement's, and for a by-group item the same claim over
        all its groups (they compose in parallel), with a note saying why."""
        ms = self.measurements() if ms is None else ms
        out = []
        for item, m, groups in zip(self.items, ms, self.groups(), strict=True):
            g = m.guarantee
            if groups is not None:
                g = replace(g.with_notes(by_note(groups, m.epsilon, m.relation)), covers=(
                    f"{item.statistic} of column {m.domain.column!r} per declared group of "
                    f"{groups.column!r} (each noisy value and its details)",))
            out.append(g)
        return out

    def preview(self) -> dict[str, Any]:
        """Everything stated before the data: measurements, noise, half-widths (per group
        for a by-group item), the total."""
        ms = self.measurements()
        stated, words = [], []
        for m, groups, g in zip(ms, self.groups(), self.item_guarantees(ms), strict=True):
            d = m.to_dict()
            if groups is None:
                stated.append(d)
                words.append(m.describe())
                continue
            each = _per_group(m)
            d.update(by=groups.column, groups=list(groups.labels),
                     half_width_95=each.half_width(), guarantee=g.to_dict(),
                     noise_half_widths_95=[n.half_width() for n in m.noise])
            stated.append(d)
            words.append(_describe_by(m, groups))
        return {"plan": self.to_plan(), "measurements": stated, "describe": words,
                "guarantee": self.guarantee(ms).to_dict()}

    def to_plan(self, schema: str | None = None) -> dict[str, Any]:
        """The plan as data (what `from_plan` reads back: the package reruns from it).
        `schema` names the schema as the package ships it (e.g. "schema.yaml" beside the
        plan) instead of the schema's own name, so the package reruns from itself."""
        sch = self.schema if schema is None else schema
        plan: dict[str, Any] = {"schema": sch if isinstance(sch, str) else
                                getattr(sch, "name", str(sch)),
                                "epsilon": self.epsilon, "delta": self.delta,
                                "statistics": [i.to_dict() for i in self.items]}
        if self.max_rows_per_unit is not None:
            plan["max_rows_per_unit"] = self.max_rows_per_unit
        return plan

    # ------------------------------------------------------------------ on data
    def run(self, data: Any, *, ledger: str | None = None, principal: str | None = None,
            rng: RngLike = None, out: str | Path | None = None, on_invalid: str = "refuse",
            description: str = "analysis plan", plan_schema: str | None = None
            ) -> dict[str, Any]:
        """Charge the composed total once (before any value is computed), release every
        statistic, and (with `out`) write one release.json atomically. `plan_schema`: how
        release.json's plan names the schema (`to_plan`; default: the schema's name)."""
        if (ledger is None) != (principal is None):
            raise InvalidInputError("ledger and principal go together")
        ms = self.measurements()
        total = self.guarantee(ms)
        # a row the schema refuses: refused before the charge
        frame = _read(data, ms, on_invalid, tuple(i.by for i in self.items if i.by))
        charge = None
        if ledger is not None:
            from privlab.core.ledger import BudgetLedger

            with BudgetLedger(str(ledger), create=False) as book:
                charge = book.charge(principal, total.epsilon, total.delta,
                                     description=description, guarantee=total)
        gen = _generator(rng)
        releases = []
        for item, m, groups, g in zip(self.items, ms, self.groups(), self.item_guarantees(ms),
                                      strict=True):
            if groups is None:
                r = m(frame, rng=gen, on_invalid=on_invalid)
                releases.append({"statistic": item.statistic, "column": item.column,
                                 "weight": item.weight, "half_width_95": m.half_width(),
                                 **r.to_dict()})
                continue
            releases.append({"statistic": item.statistic, "column": item.column,
                             "weight": item.weight, "by": groups.column,
                             **_release_by(m, groups, frame, gen, on_invalid),
                             "guarantee": g.to_dict()})
        package = {"plan": self.to_plan(plan_schema), "releases": releases,
                   "guarantee": total.to_dict()}
        if charge is not None:
            package["ledger"] = {"principal": principal, "entry_id": charge.entry_id,
                                 "remaining_epsilon": charge.remaining_epsilon,
                                 "remaining_delta": charge.remaining_delta}
        if out is not None:
            folder = Path(out)
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_text(folder / "release.json", json.dumps(package, indent=2,
                                                                  default=str) + "\n")
        return package

    @classmethod
    def from_plan(cls, plan: Any, schema: Any = None) -> Analysis:
        """Read a plan (a dict, as in a YAML file or a package's "plan"); `schema` overrides
        the plan's own."""
        if not isinstance(plan, dict):
            raise InvalidInputError("the plan must be a mapping with statistics: [...]")
        unknown = sorted(set(plan) - PLAN_KEYS)
        if unknown:
            raise InvalidInputError(f"unknown plan key {unknown[0]!r}; allowed: "
                                    f"{', '.join(sorted(PLAN_KEYS))}")
        sch = schema if schema is not None else plan.get("schema")
        if sch is None:
            raise InvalidInputError("the plan names no schema: add schema: NAME|FILE or "
                                    "pass --schema")
        items = plan.get("statistics")
        if not isinstance(items, list) or not items:
            raise InvalidInputError("the plan's statistics must be a non-empty list")
        a = cls(sch, epsilon=_number(plan, "epsilon", 1.0), delta=_number(plan, "delta", 0.0),
                max_rows_per_unit=plan.get("max_rows_per_unit"))
        for n, it in enumerate(items, 1):
            if not isinstance(it, dict) or "statistic" not in it:
                raise InvalidInputError(f"statistics item {n} needs statistic: NAME")
            bad = sorted(set(it) - ITEM_KEYS)
            if bad:
                raise InvalidInputError(f"statistics item {n}: unknown key {bad[0]!r}; "
                                        f"allowed: {', '.join(sorted(ITEM_KEYS))}")
            a.add(str(it["statistic"]), it.get("column"), weight=it.get("weight", 1.0),
                  mechanism=it.get("mechanism"), bins=it.get("bins"), q=it.get("q", 0.5),
                  by=it.get("by"))
        return a


def _read(data: Any, ms: list[Measurement], on_invalid: str, by: tuple[str, ...] = ()
          ) -> Any:
    """The columns the plan reads (and the person column), read once as the schema
    declares, so every refusal comes before the ledger is charged."""
    from privlab.schema.read import read_declared

    wanted = list(dict.fromkeys(
        [m.domain.column for m in ms] + [m.relation.unit for m in ms if m.relation.unit] +
        list(by)))
    return read_declared(data, ms[0].schema, on_invalid, columns=wanted, allow_empty=True)


def _per_group(m: Measurement) -> Measurement:
    """The measurement as stated for one group: the schema's public size is the table's,
    not a group's, so a ratio's (mean, variance) half-width has no per-group closed form."""
    return replace(m, public_size=None)


def _describe_by(m: Measurement, groups: Groups) -> str:
    """A by-group item in plain words: the claim, and the noise of each group."""
    each = _per_group(m)
    hw = each.half_width()
    labels = ", ".join(groups.labels[:6]) + (", ..." if len(groups.labels) > 6 else "")
    acc = (f"95% of the time within \u00b1{hw:.4g} in each group" if hw is not None else
           "in each group a noisy sum and a noisy count (" + ", ".join(
               f"\u00b1{n.half_width():.4g}" for n in m.noise if n.half_width() is not None) +
           " at 95%), their ratio has no closed-form half-width")
    return (f"{m.statistic} of {m.domain.column} by {groups.column} "
            f"({len(groups.labels)} declared groups: {labels}): {each._mechanism_text()}; "
            f"{acc}; {m.guarantee.claim} per {m.relation.name.replace('_', ' ')} "
            "(the groups compose in parallel)")


def _release_by(m: Measurement, groups: Groups, frame: Any, gen: Any,
                on_invalid: str) -> dict[str, Any]:
    """One release per declared group. Each person's first M rows are kept before the
    split (so a person has at most M rows over all groups, not M in each)."""
    from privlab.schema.units import bound_per_unit

    unit = m.relation.unit
    rows = bound_per_unit(frame, unit, m.relation.steps) if unit is not None else frame
    per_group = []
    for label, part in zip(groups.labels, groups.split(rows), strict=True):
        r = m(part, rng=gen, on_invalid=on_invalid).to_dict()
        r.pop("guarantee", None)
        per_group.append({"group": label, **r})
    return {"groups": list(groups.labels), "half_width_95": _per_group(m).half_width(),
            "value": {p["group"]: p["value"] for p in per_group}, "per_group": per_group}


def _number(plan: dict[str, Any], key: str, default: float) -> float:
    """A plan's epsilon or delta as a number (YAML reads `1e-6` as text: accepted)."""
    value = plan.get(key, default)
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"the plan's {key} must be a number, got {value!r}") from None


def _any_column(schema: Any) -> str:
    """A count reads no value: the first released column stands in for 'rows'."""
    from privlab.schema import load_schema

    sch = load_schema(schema)
    for col in sch.columns:
        if col.is_released:
            return col.name
    raise InvalidInputError(f"schema {sch.name!r} has no released column to count")


def _generator(rng: RngLike) -> Any:
    """One generator shared by the plan's releases (secure without a seed; a seed, for
    tests, fixes them all)."""
    from privlab.core.rng import make_rng

    return make_rng(rng)


def load_plan(path: str | Path) -> dict[str, Any]:
    """A plan file (YAML or JSON), refused with one line naming the file."""
    import yaml

    p = Path(path)
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InvalidInputError(f"--plan {p}: no such file") from exc
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"--plan {p}: not valid YAML/JSON ({exc})") from exc


__all__ = ["Analysis", "Composed", "Item", "load_plan", "pld_epsilon", "plan_draws", "plan_rho",
           "zcdp_epsilon"]
