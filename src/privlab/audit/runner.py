"""End-to-end membership audit of a model trained on a table (what `privlab audit` runs).

1. Rows are deduplicated (a record present twice could be a member and a non-member at once),
   shuffled with the seed and split into members (the target's training rows), the same
   number of non-members, and an attacker pool (the rest).
2. The target (`mlp`: LayerNorm MLP; `logreg`: softmax regression) is trained on the members,
   plainly or by DP-SGD to (epsilon, delta) with a PLD-calibrated noise multiplier
   (`privlab.learn`). Its accounted guarantee is reported next to every empirical figure.
3. Shadow models are trained like the target (same architecture, config, privacy setting)
   on attacker-side data, all at once (`privlab.learn.multi.train_many`).
4. Each requested attack gives AUC, advantage, TPR at fixed FPRs, balanced accuracy and
   (successes, trials) at its attacker-side threshold, and an empirical epsilon with its
   Clopper-Pearson and Bayesian intervals (`privlab.audit.epsilon`).

The audit's own figures are computed from the training records and are NOT differentially
private (`audit_guarantee` says so, naming every such field in `not_covered`; the report
carries `"release": false`): share them with the data owner, not publicly. The TARGET's
guarantee (`guarantee`) is honest on its own: its features and classes come from the declared
schema; with the data-fitted encoding (`unsafe_encoding`) or a member count read from the
data (no `--members`), it names those in `not_covered`.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privlab.audit.attacks import (
    AttackResult,
    lira,
    reference_calibration,
    shadow_attack,
    threshold_attack,
)
from privlab.audit.epsilon import max_attainable
from privlab.audit.metrics import check_fprs, roc_curve
from privlab.core.guarantee import PrivacyGuarantee
from privlab.errors import InvalidInputError

ATTACKS = ("loss", "confidence", "entropy", "mentr", "shadow", "shadow_label", "lira",
           "lira_offline")
MODELS = ("mlp", "logreg")
TARGET_SEED_OFFSET = 7_919_000

Stage = Callable[[str], None]


@dataclass
class TableAuditConfig:
    target: str
    model: str = "mlp"
    epsilon: float | None = None
    delta: float = 1e-5
    attacks: Sequence[str] = ("loss", "confidence", "shadow", "lira")
    shadow_models: int = 5
    lira_models: int = 16
    members: int | None = None
    epochs: int = 30
    batch_size: int = 64
    lr: float = 1e-3
    clip: float = 1.0
    hidden: tuple[int, ...] = (128, 64)
    dropout: float = 0.0
    fprs: Sequence[float] | None = None
    level: float = 0.95
    eps_method: str = "holdout"
    seed: int = 0
    adult_pipeline: bool = False
    schema: Any = None
    on_invalid: str = "refuse"
    exclude: Sequence[str] = ()
    unsafe_encoding: bool = False
    max_rows_per_unit: int | None = None
    notes: list[str] = field(default_factory=list)

    def validate(self) -> None:
        bad = [a for a in self.attacks if a not in ATTACKS]
        if bad or not self.attacks:
            raise InvalidInputError(f"--attacks must be a list from {', '.join(ATTACKS)}; got "
                                    f"{', '.join(bad) if bad else 'nothing'}")
        if self.model not in MODELS:
            raise InvalidInputError(f"--model must be one of {', '.join(MODELS)}, got "
                                    f"{self.model!r}")
        if not (isinstance(self.shadow_models, int) and self.shadow_models >= 1):
            raise InvalidInputError(f"--shadow-models must be >= 1, got {self.shadow_models!r}")
        lira_wanted = {"lira", "lira_offline"} & set(self.attacks)
        if lira_wanted and not (isinstance(self.lira_models, int) and self.lira_models >= 2):
            raise InvalidInputError(f"--lira-models must be >= 2, got {self.lira_models!r}")
        if "lira" in self.attacks and self.lira_models % 2:
            raise InvalidInputError(f"--lira-models must be even for online LiRA (pairs of "
                                    f"complementary halves), got {self.lira_models}")
        if not (0 < self.level < 1):
            raise InvalidInputError(f"--level must be in (0, 1), got {self.level!r}")
        if self.eps_method not in ("holdout", "bonferroni"):
            raise InvalidInputError(f"--eps-method must be holdout or bonferroni, got "
                                    f"{self.eps_method!r}")


def _model_fn(model: str, d: int, k: int, hidden: tuple[int, ...], dropout: float) -> Callable:
    from privlab.learn.models import LogisticModel, SeedMLP

    if model == "logreg":
        return lambda: LogisticModel(d, k)
    return lambda: SeedMLP(d, hidden, k, dropout=dropout)


def split_for_audit(frame: pd.DataFrame, target: str, members: int | None, seed: int, *,
                    adult: bool = False, schema: Any = None, on_invalid: str = "refuse",
                    exclude: Sequence[str] = (), unsafe_encoding: bool = False,
                    max_rows_per_unit: int | None = None) -> dict[str, Any]:
    """Conform to the schema, deduplicate, shuffle, split, encode from the schema alone
    (`adult=True`: the bundled Adult schema without fnlwgt). Without a schema only the
    data-fitted encoding (`unsafe_encoding`, statistics of the MEMBERS) remains; `leaks`
    names what it read. A person-level schema (`privacy_unit: pid`) needs
    `max_rows_per_unit` 1: the attacks test single rows, so each person keeps one row."""
    from privlab.learn.data import (
        SchemaEncoder,
        TablePreprocessor,
        encode_labels,
        schema_classes,
        split_target,
    )

    if adult and schema is None:
        from privlab.schema import bundled_schema

        schema, exclude = bundled_schema("adult"), tuple(exclude) or ("fnlwgt",)
    declared: list[str] | None = None
    encoder = None
    if schema is not None:
        from privlab.schema import check_policy, conform

        check_policy(on_invalid)
        unit = audit_unit(schema, max_rows_per_unit)
        declared = schema_classes(schema, target)
        encoder = SchemaEncoder.for_target(schema, target, exclude)
        rows = conform(frame, schema, on_invalid,
                       columns=list(encoder.columns) + [target] + ([unit] if unit else []))
        if rows[target].isna().any():
            if on_invalid == "refuse":
                raise InvalidInputError(f"column {target!r}: a missing label; fix the data or "
                                        "pass --on-invalid coerce (drops such rows)")
            rows = rows.loc[rows[target].notna().to_numpy()].reset_index(drop=True)
        if unit:
            from privlab.schema.units import bound_per_unit

            rows = bound_per_unit(rows, unit, 1).reset_index(drop=True)
        features, y = rows[list(encoder.columns)], rows[target].astype(str)
    elif unsafe_encoding:
        if max_rows_per_unit is not None:
            raise InvalidInputError("--max-rows-per-unit needs --schema with a privacy unit "
                                    "column")
        features, y = split_target(frame, target)
    else:
        raise InvalidInputError("no public schema: pass --schema NAME|FILE (draft one with "
                                "`privlab schema draft DATA > schema.yaml` and review it), or "
                                "--unsafe-encoding to fit the encoding on the members (the "
                                "target's guarantee then says NOT DP)")
    full = features.assign(**{"\0y": y.to_numpy()})
    dup = full.duplicated()
    removed = int(dup.sum())
    features, y = features[~dup.to_numpy()], y[~dup.to_numpy()]
    n = len(y)
    if n < 40:
        # no count in the text: the number of distinct rows is private (issue 21)
        raise InvalidInputError("too few distinct rows: a membership audit needs at least 40 "
                                "(members, non-members and an attacker pool)")
    m = n // 4 if members is None else int(members)
    if not (2 <= m <= (n - 4) // 3):
        raise InvalidInputError(f"--members {m} is too large for this table (or below 2): "
                                "it needs as many non-members and a pool of at least as many "
                                "distinct rows (at most about a third of them); pass a smaller "
                                "--members")
    codes, classes = encode_labels(y.to_numpy(), declared)
    order = np.random.default_rng(seed).permutation(n)
    mi, ni, pi = order[:m], order[m:2 * m], order[2 * m:]
    if encoder is not None:
        x, leaks = encoder.transform(features), []
    else:
        prep = TablePreprocessor(one_hot=True).fit(features.iloc[mi])
        x, leaks = prep.transform(features), list(prep.leaks) + ["classes read from the data"]
    return {"x_mem": x[mi], "y_mem": codes[mi], "x_non": x[ni], "y_non": codes[ni],
            "x_pool": x[pi], "y_pool": codes[pi], "classes": classes, "removed": removed,
            "rows": n, "features": x.shape[1], "leaks": leaks,
            "schema": None if schema is None else schema.name,
            "privacy_unit": None if schema is None else audit_unit(schema, max_rows_per_unit)}


def audit_unit(schema: Any, max_rows_per_unit: int | None) -> str | None:
    """The person column of a person-level schema (None for "row"). The audit's attacks and
    its target's record-level accounting are about single rows, so a person must be one row:
    anything but a bound of 1 is refused, naming the option (as `privlab release` does)."""
    from privlab.schema.facts import PublicFacts

    facts = PublicFacts.from_schema(schema).with_arguments(max_rows_per_unit=max_rows_per_unit)
    unit, per_unit = facts.person_bound("--max-rows-per-unit")
    if unit is not None and per_unit != 1:
        raise InvalidInputError(
            f"--max-rows-per-unit: privlab audit attacks single rows, so with privacy unit "
            f"{unit!r} each person must be one row; pass --max-rows-per-unit 1 (each person's "
            "first row)")
    return unit


def _roc_points(res: AttackResult, points: int = 60) -> dict[str, list[float]]:
    roc = roc_curve(res.scores_in, res.scores_out)
    grid = np.unique(np.r_[0.0, np.geomspace(1.0 / max(roc.n_out, 1), 1.0, points)])
    tpr = [float(roc.tpr[roc.fpr <= f + 1e-12].max()) for f in grid]
    return {"fpr": grid.tolist(), "tpr": tpr}


def audit_steps(config: TableAuditConfig) -> int:
    """How many times `audit_table` calls its `stage` callback (for a progress bar)."""
    a = set(config.attacks)
    shadows = len(a & {"shadow", "shadow_label"})
    reference = int(bool(a & {"loss", "confidence", "entropy", "mentr"}) and not shadows)
    return 2 + shadows + reference + len(a & {"lira", "lira_offline"})


def audit_table(frame: pd.DataFrame, config: TableAuditConfig, *,
                stage: Stage | None = None,
                progress: Callable[[int, int, Any], None] | None = None) -> dict[str, Any]:
    """Train the target, run the attacks, return a JSON-ready report. `stage(message)` is
    called at each stage (`audit_steps` of them), `progress` after each target epoch."""
    import torch

    from privlab.audit.trainers import TorchTrainer
    from privlab.learn.dpsgd import TrainConfig, accuracy
    from privlab.learn.multi import train_one

    config.validate()
    say = stage or (lambda _s: None)
    started = time.perf_counter()
    data = split_for_audit(frame, config.target, config.members, config.seed,
                           adult=config.adult_pipeline, schema=config.schema,
                           on_invalid=config.on_invalid, exclude=config.exclude,
                           unsafe_encoding=config.unsafe_encoding,
                           max_rows_per_unit=config.max_rows_per_unit)
    m, k = len(data["y_mem"]), len(data["classes"])
    fprs = check_fprs(config.fprs, m, explicit=config.fprs is not None)
    if config.epsilon is None:
        tcfg = TrainConfig(method="none", epochs=config.epochs, batch_size=config.batch_size,
                           lr=config.lr)
    else:
        # --members is the public size (the split takes exactly that many members); without
        # it the members are a quarter of the distinct rows, named in not_covered below
        tcfg = TrainConfig(epsilon=config.epsilon, delta=config.delta, clip=config.clip,
                           epochs=config.epochs, batch_size=config.batch_size, lr=config.lr,
                           public_size=m,
                           public_size_source="rows" if config.members is None else "public")
    tcfg.validate(m)
    model_fn = _model_fn(config.model, data["features"], k, tuple(config.hidden),
                         config.dropout)
    # (no member count: without --members it is a quarter of the distinct rows, and progress
    # goes to stderr, which must not depend on one row)
    say("training the target")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # an initialisation seed no shadow model uses (TorchTrainer seeds seed*1000 + m)
        target, res = train_one(model_fn, data["x_mem"], data["y_mem"], tcfg,
                                seed=TARGET_SEED_OFFSET + config.seed, progress=progress)
    guarantee: PrivacyGuarantee = res.guarantee.with_covers("target model weights")
    if data["privacy_unit"] and guarantee.is_dp:
        import dataclasses

        guarantee = dataclasses.replace(guarantee, neighbouring="user").with_notes(
            f"privacy unit {data['privacy_unit']!r}: each person's first row only "
            "(--max-rows-per-unit 1), so one row is one person")
    if data["leaks"]:
        guarantee = guarantee.with_not_covered(
            "feature encoding (" + "; ".join(data["leaks"][:3])
            + (" ..." if len(data["leaks"]) > 3 else "") + ")")
    if config.members is None and config.epsilon is not None:
        guarantee = guarantee.with_not_covered(
            "sample_rate (batch size / members, and members = a quarter of the distinct rows: "
            "pass --members to make it public)")
    delta = guarantee.delta if guarantee.is_dp else config.delta
    mem = (data["x_mem"], data["y_mem"])
    non = (data["x_non"], data["y_non"])
    pool = (data["x_pool"], data["y_pool"])
    trainer = TorchTrainer(model_fn, tcfg, n_classes=k, at_once=True)
    results: list[AttackResult] = []
    timings: dict[str, float] = {}
    calibration = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("shadow", "shadow_label"):
            if name in config.attacks:
                say(f"{name}: {config.shadow_models} shadow models")
                t = time.perf_counter()
                r = shadow_attack(target, mem, non, pool, trainer, n_shadow=config.shadow_models,
                                  shadow_size=m, features="label" if name == "shadow_label"
                                  else "softmax", rng=config.seed)
                timings[name] = time.perf_counter() - t
                calibration = calibration or r.calibration
                results.append(r)
        thresholds = [a for a in ("loss", "confidence", "entropy", "mentr")
                      if a in config.attacks]
        if thresholds and calibration is None:
            say("reference model for the attacker-side thresholds")
            calibration = reference_calibration(trainer, pool, m, rng=config.seed)
        for name in thresholds:
            results.append(threshold_attack(name, target, mem, non, calibration=calibration))
        for name, online in (("lira", True), ("lira_offline", False)):
            if name in config.attacks:
                say(f"{name}: {config.lira_models} shadow models trained at once")
                t = time.perf_counter()
                results.append(lira(target, mem, non, trainer, n_shadow=config.lira_models,
                                    pool=pool, online=online, rng=config.seed))
                timings[name] = time.perf_counter() - t
    say("metrics and empirical epsilon")
    order = {a: i for i, a in enumerate(ATTACKS)}
    results.sort(key=lambda r: order.get(r.name, 99))
    attacks: dict[str, Any] = {}
    for r in results:
        d = r.to_dict(fprs=fprs, delta=delta, level=config.level, method=config.eps_method)
        d["roc"] = _roc_points(r)
        if r.name in timings:
            d["seconds"] = timings[r.name]
        attacks[r.name] = d
    best = max(attacks.values(), key=lambda d: d["empirical_epsilon"]["lower"])
    lower = best["empirical_epsilon"]["lower"]
    accounted = guarantee.epsilon if guarantee.is_dp else None
    summary = {
        "strongest_attack_by_epsilon": best["attack"],
        "empirical_epsilon_lower": lower,
        "empirical_epsilon_interval": best["empirical_epsilon"]["clopper_pearson"],
        "bayesian_interval": best["empirical_epsilon"]["bayesian"],
        "accounted_epsilon": accounted,
        "max_attainable_lower_bound": max_attainable(m // 2, m // 2, config.level, delta)
        if config.eps_method == "holdout" else max_attainable(m, m, config.level, delta),
        "consistent": None if accounted is None else bool(lower <= accounted + 1e-9),
        "level": config.level, "method": config.eps_method, "delta": delta,
    }
    if accounted is not None and lower > accounted + 1e-9:
        summary["alarm"] = ("the empirical lower bound exceeds the accounted epsilon: the "
                            "accountant, the training or the attack is broken")
    return {
        "data": {"rows": data["rows"], "duplicates_removed": data["removed"], "members": m,
                 "nonmembers": len(data["y_non"]), "pool": len(data["y_pool"]),
                 "features": data["features"], "classes": [str(c) for c in data["classes"]],
                 "schema": data["schema"],
                 "target": config.target, "seed": config.seed},
        "model": {"kind": config.model, "epochs": config.epochs, "batch_size":
                  config.batch_size, "lr": config.lr,
                  "train_accuracy": accuracy(target, *mem),
                  "test_accuracy": accuracy(target, *non),
                  "baseline": majority_comparison(target, mem, non, data["classes"]),
                  "torch_threads": torch.get_num_threads()},
        "release": False,
        "guarantee": guarantee.to_dict(),
        "audit_guarantee": audit_guarantee().to_dict(),
        "attacks": attacks,
        "summary": summary,
        "seconds": time.perf_counter() - started,
    }


def majority_comparison(target: Any, mem: tuple[np.ndarray, np.ndarray],
                        non: tuple[np.ndarray, np.ndarray], classes: Sequence[Any]
                        ) -> dict[str, Any]:
    """The majority-class baseline beside the target's accuracies: always predicting the
    members' most common label, scored on the members and on the non-members (exact, like the
    accuracies: the audit is an evaluation); "better" by the one-sided exact McNemar test on
    the non-members (`privlab.learn.baseline`)."""
    from privlab.audit.target import as_target
    from privlab.learn.baseline import beats_exact, majority_class, no_better_text

    code = int(majority_class(np.asarray(mem[1]).tolist()))
    hits = as_target(target).log_proba(non[0]).argmax(1) == non[1]
    better = beats_exact(hits, non[1] == code)
    label = str(classes[code])
    return {"majority_class": label, "train_accuracy": float(np.mean(mem[1] == code)),
            "test_accuracy": float(np.mean(non[1] == code)), "better_than_baseline": better,
            "verdict": ("better than" if better else "no better than")
            + no_better_text(label).removeprefix("no better than"),
            "measured": "the members' majority class scored on the same members and "
                        "non-members (exact); better: one-sided exact McNemar at 5% on the "
                        "non-members"}


#: Every audit output computed from the rows (none is protected: the audit is not a release).
AUDIT_FIELDS = ("data.rows", "data.duplicates_removed", "data.members", "data.nonmembers",
                "data.pool", "model.train_accuracy", "model.test_accuracy", "model.baseline",
                "attacks", "summary")


def audit_guarantee() -> PrivacyGuarantee:
    """The audit report's own label: NOT DP, every row-derived field named."""
    return PrivacyGuarantee.not_private(
        "membership-inference audit", "an evaluation, not a release: attack scores, rates, "
        "counts and accuracies are computed exactly from the training records; share the "
        "audit with the data owner only").with_not_covered(*AUDIT_FIELDS)


def write_audit_html(path: str, report: dict[str, Any]) -> None:
    """An HTML page: guarantee, per-attack table, ROC curves (log-log)."""
    from privlab.report.figures import figure_data_uri, new_figure
    from privlab.report.html import Image, Section, Table, fmt, write_page

    attacks = report["attacks"]
    fkeys = sorted({f for d in attacks.values() for f in d["tpr_at_fpr"]}, key=float)
    cols = ["attack", "AUC", "advantage"] + [f"TPR@{f}" for f in fkeys] + [
        "balanced acc.", "successes / trials", "eps lower (CP)", "eps interval (CP)",
        "eps interval (Bayes)"]
    rows = []
    for name, d in attacks.items():
        e = d["empirical_epsilon"]
        c = d.get("counts")
        rows.append([name, fmt(d["auc"]), fmt(d["advantage"])]
                    + [fmt(d["tpr_at_fpr"][f]) for f in fkeys]
                    + [fmt(d.get("balanced_accuracy")),
                       f"{c['successes']} / {c['trials']}" if c else "",
                       fmt(e["lower"]), _interval(e["clopper_pearson"]),
                       _interval(e["bayesian"])])
    fig = new_figure(6.5, 4.5)
    ax = fig.add_subplot()
    for name, d in attacks.items():
        fpr, tpr = np.array(d["roc"]["fpr"]), np.array(d["roc"]["tpr"])
        ok = fpr > 0
        ax.plot(fpr[ok], np.maximum(tpr[ok], 1e-4), label=f"{name} (AUC {d['auc']:.3f})")
    lo = min(min(d["roc"]["fpr"][1:] or [1e-3]) for d in attacks.values())
    ax.plot([lo, 1], [lo, 1], "k--", linewidth=0.8, label="chance")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.legend(fontsize=7)
    s = report["summary"]
    g = report["guarantee"]
    facts = {"training guarantee": "not DP" if not g["is_dp"] else
             f"epsilon = {g['epsilon']:.4g}, delta = {g['delta']:g} ({g['accountant']})",
             "strongest attack (by empirical epsilon)": s["strongest_attack_by_epsilon"],
             "empirical epsilon (lower end, CP)": fmt(s["empirical_epsilon_lower"]),
             "largest bound these trials allow": fmt(s["max_attainable_lower_bound"]),
             "train / test accuracy": f"{report['model']['train_accuracy']:.3f} / "
                                      f"{report['model']['test_accuracy']:.3f}"}
    base = report["model"].get("baseline")
    if base:
        facts["majority-class baseline (train / test)"] = (
            f"{base['train_accuracy']:.3f} / {base['test_accuracy']:.3f} (always "
            f"{base['majority_class']!r}; the model is {base['verdict']})")
    paragraphs = ["Membership inference against the model trained on "
                  f"{report['data']['members']} member rows; {report['data']['nonmembers']} "
                  "non-members from the same distribution; attacker pool of "
                  f"{report['data']['pool']} rows. Decision thresholds are chosen on "
                  "attacker-side data; empirical epsilon uses the "
                  f"{s['method']} procedure at level {s['level']:g}."]
    if "alarm" in s:
        paragraphs.append("ALARM: " + s["alarm"])
    sections = [audit_plain_section(report),
                Section("Summary", paragraphs=paragraphs, facts=facts),
                Section("Attacks", tables=[Table(cols, rows)]),
                Section("ROC curves", images=[Image(figure_data_uri(fig), "ROC curves")])]
    write_page(path, "Membership-inference audit", sections,
               exact_values="member counts, accuracies, attack success rates, AUCs, ROC "
                            "curves",
               subtitle=f"target column {report['data']['target']!r}, model "
                        f"{report['model']['kind']}",
               guarantee=None)


def _sig(v: float | None) -> str:
    """A number rounded for people: two significant digits, "unbounded" for infinity."""
    if v is None or not math.isfinite(v):
        return "unbounded"
    return f"{v:.2g}"


def audit_plain_section(report: dict[str, Any]) -> Any:
    """The first section, for people: what was measured, what an attacker could learn, how
    sure we are; rounded numbers and every term defined where it is used."""
    from privlab.report.html import Section

    data, model, s, g = report["data"], report["model"], report["summary"], report["guarantee"]
    attacks = report["attacks"]
    what = (f"What was measured: a model ({model['kind']}) was trained on the records of "
            f"{data['members']} people (the members). We then attacked it: each attack tries "
            f"to tell the members apart from {data['nonmembers']} similar people whose records "
            "were not used (the non-members). This is a membership attack; knowing that "
            "someone's record was used can itself be sensitive (for example, that they were "
            "a patient of the hospital whose data trained the model).")
    if g.get("is_dp"):
        what += (f" The model was trained with differential privacy (DP-SGD) at epsilon "
                 f"{_sig(g['epsilon'])}. Epsilon is a promise about how much the model can "
                 "reveal about any one person: smaller is more private; 1 or less is strong, "
                 "above 8 is weak.")
    else:
        what += (" The model was trained WITHOUT differential privacy: nothing limits what it "
                 "reveals, and this audit is the only evidence of how much it leaks.")
    name, best = max(attacks.items(), key=lambda kv: kv[1]["auc"])
    auc = best["auc"]
    learn = (f"What an attacker could learn: the strongest attack ({name}) ranked a member "
             f"above a non-member {auc:.0%} of the time, where a coin toss does so 50% of the "
             "time")
    tpr = best["tpr_at_fpr"]
    at = next((f for f in sorted(tpr, key=float) if tpr[f] is not None), None)
    if at is not None:
        learn += (f"; when it may wrongly accuse {100 * float(at):g}% of the non-members "
                  f"(its false alarms), it finds {tpr[at]:.0%} of the members")
    learn += "."
    if auc < 0.55:
        learn += (" That is close to a coin toss: no measurable leak. It does not prove "
                  "safety; a stronger attacker might do better.")
    elif auc >= 0.6:
        learn += " That is a clear leak: the model remembers who was in its training data."
    base = model.get("baseline")
    if base and not base["better_than_baseline"]:
        learn += (f" Note: the model itself is {base['verdict']} (right "
                  f"{model['test_accuracy']:.0%} of the time on the non-members, the most "
                  f"common label alone {base['test_accuracy']:.0%}): it learnt nothing useful, "
                  "so an attack on it says little about a model worth releasing.")
    lower, top = s["empirical_epsilon_lower"], s["max_attainable_lower_bound"]
    c = attacks[s["strongest_attack_by_epsilon"]].get("counts") or {}
    trials = f"from {c['trials']} guesses" if c.get("trials") else "from these guesses"
    sure = (f"How sure we are: {trials}, we can say with {s['level']:.0%} confidence that the "
            f"model's real epsilon is at least {_sig(lower)} (the empirical epsilon: a lower "
            "bound measured from the attacks' success; 0 means they showed nothing). With "
            f"this many people the audit can never show more than {_sig(top)}, so a leak "
            "beyond that would go unseen; it is a check, not a guarantee.")
    if s.get("accounted_epsilon") is not None:
        if s.get("consistent"):
            sure += (f" The measured bound is below the promised epsilon "
                     f"{_sig(s['accounted_epsilon'])}, as it must be.")
        else:
            sure += (f" ALARM: the measured bound is ABOVE the promised epsilon "
                     f"{_sig(s['accounted_epsilon'])}: the training, the accounting or the "
                     "attack is broken; do not rely on the promise.")
    facts = {"people attacked (members / non-members)": f"{data['members']} / "
                                                        f"{data['nonmembers']}",
             "trained with DP": "no" if not g.get("is_dp") else f"yes, epsilon "
                                                                f"{_sig(g['epsilon'])}",
             "strongest attack, right": f"{auc:.0%} (coin toss 50%)",
             "empirical epsilon, at least": _sig(lower)}
    return Section("In plain words", paragraphs=[what, learn, sure], facts=facts,
                   anchor="plain-words")


def _interval(pair: Sequence[float | None]) -> str:
    lo, hi = pair
    f = lambda v: "inf" if v is None or not math.isfinite(v) else f"{v:.3f}"  # noqa: E731
    return f"[{f(lo)}, {f(hi)}]"
