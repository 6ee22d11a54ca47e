"""`Analysis`: several statistics over several columns, one budget split by weights.

Why: each `privlab release` is its own release with its own epsilon, so three statistics at
epsilon 1 cost epsilon 3. A plan states every measurement before any row is read, splits one
(epsilon, delta) across them by weight, composes them with the tightest valid accountant
(the sum of epsilons for a pure plan; zCDP where a Gaussian draws, never looser than the
sum of epsilons and deltas), charges the composed total once, and packages
every value with its guarantee and the plan itself, so the package can be rerun.
Group-by statistics are not offered: the registry has no by-group statistic yet.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privlab.core.guarantee import PrivacyGuarantee, check_delta, check_epsilon
from privlab.core.rng import RngLike
from privlab.errors import InvalidInputError
from privlab.measure import stats
from privlab.measure.measurement import Measurement, measurement
from privlab.utils.atomic import atomic_write_text

#: Keys a plan's item may carry (anything else is refused, naming it).
ITEM_KEYS = frozenset({"statistic", "column", "weight", "mechanism", "bins", "q"})
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

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"statistic": self.statistic, "weight": self.weight}
        if self.column is not None:
            out["column"] = self.column
        for key in ("mechanism", "bins"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.statistic == "quantile":
            out["q"] = self.q
        return out


@dataclass(frozen=True)
class Composed:
    """The plan's total guarantee and the accountant that gave it."""

    epsilon: float
    delta: float
    accountant: str


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
            mechanism: str | None = None, bins: int | None = None, q: float = 0.5
            ) -> Analysis:
        """Add one statistic (refused at once if the registry has no such statistic)."""
        stats.get(statistic)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or \
                not weight > 0 or weight == float("inf"):
            raise InvalidInputError(f"weight of {statistic} must be a number > 0, got {weight!r}")
        self.items.append(Item(statistic, column, float(weight), mechanism, bins, float(q)))
        return self

    # ------------------------------------------------------------------ before any row
    def measurements(self) -> list[Measurement]:
        """Each item's measurement at its weighted share of (epsilon, delta)."""
        if not self.items:
            raise InvalidInputError("the plan has no statistics: add at least one")
        eps, delta = check_epsilon(self.epsilon), check_delta(self.delta)
        total = sum(i.weight for i in self.items)
        out = []
        for item in self.items:
            share = item.weight / total
            mech = item.mechanism
            if mech is None and delta > 0 and "gaussian" in stats.get(item.statistic).mechanisms:
                mech = "gaussian"
            column = item.column if item.column is not None else _any_column(self.schema)
            out.append(measurement(
                self.schema, item.statistic, column, epsilon=eps * share,
                delta=delta * share if mech == "gaussian" else 0.0, mechanism=mech,
                relation=self.relation, max_rows_per_unit=self.max_rows_per_unit,
                bins=item.bins, q=item.q))
        return out

    def composed(self, ms: list[Measurement] | None = None) -> Composed:
        """The tightest valid total: the sum for a pure plan; with Gaussian noise the lower of
        the basic sums and the zCDP composition converted at the plan's delta (a relation of
        several add/remove steps: the basic sums)."""
        ms = self.measurements() if ms is None else ms
        eps = math.fsum(m.epsilon for m in ms)
        delta = math.fsum(m.delta for m in ms)
        if abs(eps - self.epsilon) <= 1e-12 * self.epsilon:
            eps = float(self.epsilon)  # the shares sum to the budget (not one ulp above it)
        if delta == 0:
            return Composed(eps, 0.0, "sequential composition (sum of epsilons)")
        if any(m.relation.steps != 1 for m in ms):
            return Composed(eps, delta, "basic composition (sums of epsilon and delta)")
        zcdp = zcdp_epsilon(ms, delta)
        if zcdp < eps:
            return Composed(zcdp, delta, "zCDP composition (rho summed, converted at delta)")
        return Composed(eps, delta, "basic composition (sums of epsilon and delta)")

    def guarantee(self, ms: list[Measurement] | None = None) -> PrivacyGuarantee:
        """The plan's total guarantee, covering every statistic."""
        ms = self.measurements() if ms is None else ms
        total = self.composed(ms)
        first = ms[0].guarantee
        return PrivacyGuarantee(
            epsilon=total.epsilon, delta=total.delta, neighbouring=first.neighbouring,
            mechanism="; ".join(sorted({m.guarantee.mechanism for m in ms})),
            accountant=total.accountant, notes=first.notes,
            covers=tuple(c for m in ms for c in m.guarantee.covers))

    def preview(self) -> dict[str, Any]:
        """Everything stated before the data: measurements, noise, half-widths, the total."""
        ms = self.measurements()
        return {"plan": self.to_plan(), "measurements": [m.to_dict() for m in ms],
                "describe": [m.describe() for m in ms],
                "guarantee": self.guarantee(ms).to_dict()}

    def to_plan(self) -> dict[str, Any]:
        """The plan as data (what `from_plan` reads back: the package reruns from it)."""
        sch = self.schema
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
            description: str = "analysis plan") -> dict[str, Any]:
        """Charge the composed total once (before any value is computed), release every
        statistic, and (with `out`) write one release.json atomically."""
        if (ledger is None) != (principal is None):
            raise InvalidInputError("ledger and principal go together")
        ms = self.measurements()
        total = self.guarantee(ms)
        frame = _read(data, ms, on_invalid)  # a row the schema refuses: refused before the charge
        charge = None
        if ledger is not None:
            from privlab.core.ledger import BudgetLedger

            with BudgetLedger(str(ledger), create=False) as book:
                charge = book.charge(principal, total.epsilon, total.delta,
                                     description=description, guarantee=total)
        gen = _generator(rng)
        releases = []
        for item, m in zip(self.items, ms, strict=True):
            r = m(frame, rng=gen, on_invalid=on_invalid)
            releases.append({"statistic": item.statistic, "column": item.column,
                             "weight": item.weight, "half_width_95": m.half_width(),
                             **r.to_dict()})
        package = {"plan": self.to_plan(), "releases": releases, "guarantee": total.to_dict()}
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
                  mechanism=it.get("mechanism"), bins=it.get("bins"), q=it.get("q", 0.5))
        return a


def plan_rho(ms: list[Measurement]) -> float:
    """The plan's zCDP rho (row-level relation): a (discrete) Gaussian draw of L2
    sensitivity D and scale s is (D/s)^2/2-zCDP (Canonne, Kamath, Steinke 2020, Thm 4); any
    other draw, or a quantile, is pure epsilon-DP, hence epsilon^2/2-zCDP (Bun, Steinke 2016,
    Prop. 1.4). zCDP composes by summing rho."""
    rho = 0.0
    for m in ms:
        if not m.noise:
            rho += m.row_epsilon ** 2 / 2
        for n in m.noise:
            rho += (n.sensitivity / n.scale) ** 2 / 2 if n.mechanism == "gaussian" else \
                n.epsilon ** 2 / 2
    return rho


def zcdp_epsilon(ms: list[Measurement], delta: float) -> float:
    """The plan's epsilon at `delta` by zCDP (core.calibration's tight conversion)."""
    from privlab.core.calibration import zcdp_to_approx_dp

    return zcdp_to_approx_dp(plan_rho(ms), delta)


def _read(data: Any, ms: list[Measurement], on_invalid: str) -> Any:
    """The columns the plan reads (and the person column), read once as the schema
    declares, so every refusal comes before the ledger is charged."""
    from privlab.schema.read import read_declared

    wanted = list(dict.fromkeys(
        [m.domain.column for m in ms] + [m.relation.unit for m in ms if m.relation.unit]))
    return read_declared(data, ms[0].schema, on_invalid, columns=wanted, allow_empty=True)


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


__all__ = ["Analysis", "Composed", "Item", "load_plan", "plan_rho", "zcdp_epsilon"]
