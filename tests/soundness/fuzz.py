"""The neighbour fuzz over the command surface: cases, the runner and the comparison.

A case is a command, its options, a dataset and one edit (a one-row edit, or a one-person edit
for a person-level schema). `run_case` runs `privlab.cli.main.main(argv)` on D and on D' in two
temporary folders under the SAME relative file names and the same `--seed`, and `check_case`
requires, between the two runs:

- the same exit code and the same stderr (byte for byte: error and warning text may carry no
  private count or value), and the same Python warnings;
- stdout: with --json the same document (labelled NOT DP: the same keys, shapes and labels)
  except at the noised keys (which must keep their type
  and shape) and the keys the output itself names as not covered (exact but labelled: only
  their presence is compared); without --json the same text once numbers are masked;
- the same files written: names, and for tables their columns and dtypes (and length when it
  is public), for JSON sidecars the same structural comparison;
- two allowed exceptions: with a declared schema and `--on-invalid refuse` a side may be
  refused (exit 2, one line naming a declared column, nothing written): a curator-facing
  refusal; and a refusal decided on noisy values only (`NOISY_REFUSALS`), a DP outcome;
- a claim that covers the edit: a DP output whose guarantee is record-level must not be run on
  a person-level schema with a one-person edit (the edit is then not a neighbour of the claim).

Edits are only compared when they are neighbours under the claim: under `replace_record` the
row count is public, so an added or removed row is not a neighbour there.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import strategies as st
from neighbours import (
    REPRESENTATION,
    assert_same_shape,
    assert_same_structure,
    one_row_edits,
    representation_edits,
    saved_model_facts,
)

from privlab.schema import Schema, bundled_schema, load_schema

SEED = "7"

# --------------------------------------------------------------------------- datasets


def people_schema(unit: str) -> dict[str, Any]:
    """A small declared schema; `unit` is "row" or "pid" (several rows per person)."""
    return {"name": f"people-{unit}", "privacy_unit": unit, "columns": {
        # a person-level schema allows a missing id: such rows are dropped before
        # contribution bounding (privlab.schema.units; the missing_unit edit)
        "pid": {"type": "identifier", "missing": unit == "pid"},
        "age": {"type": "integer", "bounds": [18, 90], "missing": False},
        "sex": {"type": "categorical", "categories": ["F", "M"], "missing": False},
        "hours": {"type": "numeric", "bounds": [0, 80], "missing": True},
        "label": {"type": "categorical", "categories": ["no", "yes"], "missing": False}}}


@cache
def _adult() -> pd.DataFrame:
    from privlab.data.datasets import load_adult

    return load_adult().sample(120, random_state=4).reset_index(drop=True)


@cache
def _people(rows_per_person: int) -> pd.DataFrame:
    gen = np.random.default_rng(3)
    # 48 persons: with one row kept per person an audit still has its 40 distinct rows
    # after a person is removed (its too-few-rows refusal prints the exact count: reported)
    persons = 80 if rows_per_person == 1 else 48
    pid = np.repeat([f"p{i:03d}" for i in range(persons)], rows_per_person)
    n = len(pid)
    age = gen.integers(18, 91, n)
    return pd.DataFrame({"pid": pid, "age": age, "sex": gen.choice(["F", "M"], n),
                         "hours": np.round(gen.uniform(0, 80, n), 1),
                         "label": np.where(age + gen.normal(0, 10, n) > 50, "yes", "no")})


@cache
def _ratings() -> tuple[pd.DataFrame, pd.DataFrame]:
    from privlab.data.datasets import load_movielens

    movies = load_movielens("movies").head(400)
    ratings = load_movielens("ratings")
    ratings = ratings[(ratings["userId"] <= 10) & ratings["movieId"].isin(movies["movieId"])]
    return ratings.groupby("userId").head(8).reset_index(drop=True), movies


@cache
def _ratings_long_ids() -> pd.DataFrame:
    """The ratings with 19-digit user ids (as text): pandas read them as integers, and as
    floats (users merged) once one id is blank (issue 29)."""
    ratings = _ratings()[0]
    return ratings.assign(userId=[str(1234567890123456000 + int(u)) for u in ratings["userId"]])


@cache
def _trajectories() -> pd.DataFrame:
    gen = np.random.default_rng(0)
    rows = []
    for i in range(3):
        lat = gen.uniform(39.9, 40.0) + np.cumsum(gen.normal(0, 2e-4, 12))
        lon = gen.uniform(116.3, 116.5) + np.cumsum(gen.normal(0, 2e-4, 12))
        times = pd.Timestamp("2009-05-01 08:00") + pd.to_timedelta(
            np.arange(12) * 5 + 60 * i, unit="s")
        rows.append(pd.DataFrame({"lat": lat, "lng": lon, "datetime": times,
                                  "uid": f"u{i:03d}"}))
    return pd.concat(rows, ignore_index=True)


#: Digit codes with leading zeros, "true"/"false" flags, ISO times and 19-digit person ids: the
#: cells whose reading pandas used to infer from the other rows (issue 29).
CODES_SCHEMA = {"name": "codes", "privacy_unit": "row", "columns": {
    "pid": {"type": "identifier", "missing": False},
    "state": {"type": "categorical", "categories": ["01", "02", "06"], "missing": False},
    "flag": {"type": "categorical", "categories": ["true", "false"], "missing": False},
    "when": {"type": "datetime", "bounds": ["2009-01-01", "2010-01-01"], "missing": False},
    "age": {"type": "integer", "bounds": [18, 90], "missing": False}}}
#: The same table with each 19-digit id one person.
CODES_PERSON_SCHEMA = {**CODES_SCHEMA, "name": "codes-person", "privacy_unit": "pid",
                       "max_rows_per_unit": 1}


@cache
def _codes(rows_per_person: int = 1) -> pd.DataFrame:
    gen = np.random.default_rng(5)
    n = 90
    stamps = pd.Timestamp("2009-05-01 08:00") + pd.to_timedelta(gen.integers(0, 86400 * 20, n),
                                                                 unit="s")
    # consecutive 19-digit ids: as float64 (pandas, one blank id) they collapse together
    ids = [str(1234567890123456000 + i // rows_per_person) for i in range(n)]
    return pd.DataFrame({"pid": ids,
                         "state": gen.choice(["01", "02", "06"], n),
                         "flag": gen.choice(["true", "false"], n),
                         "when": [t.strftime("%Y-%m-%d %H:%M:%S") for t in stamps],
                         "age": gen.integers(18, 91, n)})


@dataclass(frozen=True)
class Dataset:
    """D, its declared schema (a bundled name or a spec written to schema.json), its unit."""

    name: str
    frame: Callable[[], pd.DataFrame]
    schema: str | dict[str, Any] | None  # None: no --schema
    unit: str | None = None  # the person column of a person-level schema
    extra_files: Callable[[], dict[str, pd.DataFrame]] = lambda: {}

    def declared(self) -> Schema:
        if self.schema is None:  # the edits still need column types
            return load_schema(people_schema("row")) if "people" in self.name else \
                bundled_schema("adult")
        return load_schema(self.schema) if isinstance(self.schema, dict) else \
            bundled_schema(self.schema)

    def schema_arg(self) -> list[str]:
        if self.schema is None:
            return []
        return ["--schema", "schema.json" if isinstance(self.schema, dict) else self.schema]


DATASETS = {
    "adult": Dataset("adult", _adult, "adult"),
    "adult-noschema": Dataset("adult-noschema", _adult, None),
    "people-row": Dataset("people-row", lambda: _people(1), people_schema("row")),
    "people-person": Dataset("people-person", lambda: _people(4), people_schema("pid"),
                             unit="pid"),
    "people-noschema": Dataset("people-noschema", lambda: _people(1), None),
    # one row: its "remove" neighbour is the empty table
    "tiny": Dataset("tiny", lambda: _people(1).head(1), people_schema("row")),
    "ratings": Dataset("ratings", lambda: _ratings()[0], "movielens-ratings", unit="userId",
                       extra_files=lambda: {"movies.csv": _ratings()[1]}),
    "ratings-longids": Dataset("ratings-longids", _ratings_long_ids, "movielens-ratings",
                               unit="userId",
                               extra_files=lambda: {"movies.csv": _ratings()[1]}),
    "trajectories": Dataset("trajectories", _trajectories, "geolife", unit="uid"),
    "codes": Dataset("codes", _codes, CODES_SCHEMA),
    "codes-person": Dataset("codes-person", lambda: _codes(2), CODES_PERSON_SCHEMA,
                            unit="pid"),
}

#: Edits that keep the row count (a value replaced): neighbours under replace-one as well.
REPLACE = {"rare_category", "new_category", "hostile_string", "missing_categorical",
           "non_integer", "text_in_numeric", "extreme_value", "missing_numeric",
           *REPRESENTATION}  # a cell written another way: one value replaced
#: Edits that change all rows of one person (only neighbours under a person-level claim).
PERSON = {"add_person", "remove_person", "change_person", "missing_unit"}
#: Edits that change the row count by one.
SIZE = {"add", "remove", "duplicate_person"}


def edits(ds: Dataset) -> dict[str, pd.DataFrame]:
    """The one-row edits of `one_row_edits` plus, with a person column, one-person edits."""
    frame = ds.frame().reset_index(drop=True)
    out = one_row_edits(frame, ds.declared())
    # cells written another way (issue 29): digit codes, flags and 19-digit ids on the codes
    # tables and 19-digit user ids on the ratings, a first timestamp with Z / an offset / day
    # first on the codes and the trajectories
    if ds.name.startswith("codes") or ds.name in ("ratings-longids", "trajectories"):
        out |= representation_edits(frame, ds.declared())
    if ds.unit is not None:
        ids = frame[ds.unit]
        first, second = ids.iloc[0], ids[ids != ids.iloc[0]].iloc[0]
        out["remove_person"] = frame[ids != first].reset_index(drop=True)
        new_id = 999 if pd.api.types.is_numeric_dtype(ids) else "p999"
        out["add_person"] = pd.concat([frame, frame[ids == second].assign(**{ds.unit: new_id})],
                                      ignore_index=True)
        rest = frame[ids != first]
        out["change_person"] = pd.concat([rest, frame[ids == second].assign(**{ds.unit: first})],
                                         ignore_index=True)
        # issue 29: two of the first person's rows lose their id (empty cells); they must
        # not become one merged "person" of their own
        assert (ids.iloc[:2] == first).all()
        out["missing_unit"] = frame.assign(**{ds.unit: ids.astype(object).where(
            frame.index >= 2, None)})
    return out


@cache
def edit_names(name: str) -> tuple[str, ...]:
    return tuple(sorted(edits(DATASETS[name])))


# --------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class Command:
    """How to build argv for one command, and what its output declares noised."""

    name: str
    datasets: tuple[str, ...]
    options: Callable[[str], st.SearchStrategy[list[str]]]  # dataset -> option tokens
    argv: Callable[[list[str]], list[str]]  # option tokens -> argv (data file: data.csv)
    noised: frozenset[str] = frozenset()  # keys noised by the mechanism (type/shape compared)
    free: frozenset[str] = frozenset()  # keys compared for presence only (see each command)
    same_length: bool = True  # written tables: is their length public?
    #: the human output is compared with numbers masked; False where it prints curator-only
    #: exact counts on lines of their own (the --json draws check that they are labelled)
    text_exact: bool = True
    #: option tokens -> input files written beside data.csv on both sides (a plan file)
    files: Callable[[list[str]], dict[str, str]] = lambda opts: {}


def _flag(name: str) -> st.SearchStrategy[list[str]]:
    return st.sampled_from([[], [name]])


def _opt(name: str, values: Iterable[Any], none: bool = True) -> st.SearchStrategy[list[str]]:
    choices = ([[]] if none else []) + [[name, str(v)] for v in values]
    return st.sampled_from(choices)


def _join(*parts: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
    return st.tuples(*parts).map(lambda xs: [t for x in xs for t in x])


_ON_INVALID = _opt("--on-invalid", ["refuse", "coerce"])
_JSON = st.sampled_from([["--json"], ["--json"], ["--json"], []])


@st.composite
def _release_options(draw: Any, ds: str) -> list[str]:
    numeric, cat = ("age", "sex") if "people" in ds or ds == "tiny" else ("age", "workclass")
    from privlab.measure import stats  # every statistic of the registry is fuzzed

    stat = draw(st.sampled_from(list(stats.names())))
    column = numeric if stats.get(stat).numeric else draw(st.sampled_from([numeric, cat]))
    if ds.startswith("codes") and stat in ("count", "histogram"):
        column = draw(st.sampled_from(["state", "flag"] + (["when"] if stat == "count" else [])))
    out = [stat, "--column", column]
    mech = draw(st.sampled_from([None, "laplace", "gaussian", "geometric"]))
    if stat == "quantile":
        mech = None
    if mech is not None:
        out += ["--mechanism", mech]
    # delta: none, strong, weak, or exactly 1/n of D ("1/n" is resolved against D's rows)
    delta = draw(st.sampled_from(["1e-6", "1e-3", "2e-3", "1/n", "1/n"])) \
        if mech == "gaussian" else draw(st.sampled_from([None, None, None, "1e-6"]))
    if delta is not None:
        out += ["--delta", delta]
    out += draw(_flag("--allow-weak"))
    if DATASETS[ds].schema is None:
        if column == numeric:
            out += ["--bounds", "18:90"]
        if stat == "histogram":
            out += (["--categories", "F,M"] if column == "sex" else
                    ["--categories", "Private,Self-emp-not-inc,Local-gov"]
                    if column == "workclass" else ["--bins", "4"])
    else:
        out += draw(_ON_INVALID)
        if stat == "histogram" and column == numeric:
            out += draw(_opt("--bins", [4]))
    if DATASETS[ds].unit is not None:
        out += draw(_opt("--max-rows-per-unit", [2, 4]))
    if stat == "quantile":
        out += draw(_opt("--q", [0.25]))
    out += draw(_opt("--public-size", [120]))
    out += ["--epsilon", draw(st.sampled_from(["1", "1", "9"]))]
    out += draw(st.sampled_from([[], [], ["--ledger", "ledger.db", "--principal", "alice"]]))
    return out + draw(_JSON)


def _release_argv(opts: list[str]) -> list[str]:
    return ["release", opts[0], "data.csv", *opts[1:], "--seed", SEED]


RELEASE = Command(
    "release", ("adult", "adult-noschema", "people-row", "people-person", "people-noschema",
                "tiny", "codes", "codes-person"),
    _release_options, _release_argv,
    # the noisy value; a mean's noisy sum and noisy count
    noised=frozenset({"value", "noisy_sum", "noisy_count", "noisy_centred_sum",
                     "noisy_centred_sum_squares", "mean_half_width_95_approx",
                     "variance_half_width_95_approx", "stddev_half_width_95_approx"}))


@st.composite
def _plan_options(draw: Any, ds: str) -> list[str]:
    """`release plan`: the plan spelled as its first token (`_plan_files` writes it),
    `stat:column:weight[:by];...|epsilon|mechanism[|M]` (mechanism "", "gaussian", or
    "mixed": Laplace and Gaussian items under one delta, composed by PLD; `by`: a declared
    categorical or integer column, one release per declared group), then the command's own
    options."""
    numeric, cat = ("age", "sex") if "people" in ds or ds == "tiny" else ("age", "education")
    groups = ("label", "sex", "age") if "people" in ds or ds == "tiny" else ("sex", "age")
    from privlab.measure import stats

    names = draw(st.lists(st.sampled_from(list(stats.names())), min_size=1, max_size=3))
    items = []
    for stat in names:
        column = numeric if stats.get(stat).numeric else draw(st.sampled_from([numeric, cat]))
        by = draw(st.sampled_from([None, None, *(g for g in groups if g != column)]))
        items.append(f"{stat}:{column}:{draw(st.sampled_from([1, 2]))}" +
                     (f":{by}" if by else ""))
    mech = draw(st.sampled_from(["", "", "gaussian", "mixed"]))
    if mech == "gaussian" and "quantile" in names:
        mech = ""
    spec = f"{';'.join(items)}|{draw(st.sampled_from(['1', '9']))}|{mech}"
    if DATASETS[ds].unit is not None:  # the contribution bound M, in the plan
        spec += f"|{draw(st.sampled_from([1, 2]))}"
    out = [spec]
    if mech:
        out += draw(_flag("--allow-weak"))
    out += draw(_ON_INVALID)
    out += draw(_flag("--preview"))
    out += draw(_opt("-o", ["."]))  # release.json beside the inputs: compared
    out += draw(st.sampled_from([[], [], ["--ledger", "ledger.db", "--principal", "alice"]]))
    return out + draw(_JSON)


def _plan_files(opts: list[str]) -> dict[str, str]:
    """The plan file of `_plan_options`' first token (YAML is a superset of JSON); "mixed"
    gives the items Laplace and Gaussian in turn (a quantile keeps its own mechanism)."""
    items, epsilon, mech, *bound = opts[0].split("|")
    stats_ = []
    for n, item in enumerate(items.split(";")):
        stat, column, weight, *by = item.split(":")
        entry: dict[str, Any] = {"statistic": stat, "column": column, "weight": int(weight)}
        if by:
            entry["by"] = by[0]
        if mech == "gaussian" or (mech == "mixed" and stat != "quantile"):
            entry["mechanism"] = mech if mech == "gaussian" else ("laplace", "gaussian")[n % 2]
        stats_.append(entry)
    plan = {"epsilon": float(epsilon), "delta": 1e-6 if mech else 0.0, "statistics": stats_}
    if bound:
        plan["max_rows_per_unit"] = int(bound[0])
    return {"plan.yaml": json.dumps(plan)}


#: `release plan`: a whole plan's values (and each mean's or variance's noisy parts)
PLAN = Command(
    "release plan", ("adult", "people-row", "people-person", "tiny"), _plan_options,
    lambda o: ["release", "plan", "data.csv", "--plan", "plan.yaml", *o[1:], "--seed", SEED],
    noised=RELEASE.noised, files=_plan_files)


def _target(ds: str) -> list[str]:
    return ["--target", "salary" if ds.startswith("adult") else
            "flag" if ds.startswith("codes") else "label"]


@st.composite
def _train_options(draw: Any, ds: str) -> list[str]:
    model = draw(st.sampled_from(["logreg", "logreg", "mlp"]))
    method = draw(st.sampled_from(["objective", "output", "dpsgd", "none"])) \
        if model == "logreg" else draw(st.sampled_from(["dpsgd", "dpsgd", "none"]))
    out = [*_target(ds), "--model", model, "--method", method, "--epochs", "1",
           "--batch-size", "32", "--epsilon", draw(st.sampled_from(["1", "4"]))]
    if method == "dpsgd":
        out += draw(_opt("--sample-rate", [0.25]))
        out += draw(_opt("--accountant", ["rdp"]))
        out += ["--delta", draw(st.sampled_from(["1e-5", "1e-5", "2e-3"]))]
    else:
        out += ["--delta", draw(st.sampled_from(["0", "1e-5", "2e-3"]))]
    out += draw(_opt("--metrics-share", [0, 0.3]))
    out += draw(_flag("--allow-weak"))
    if DATASETS[ds].schema is None:  # refused, or fitted on the data and labelled NOT DP
        out += draw(_flag("--unsafe-encoding"))
    else:
        out += draw(_ON_INVALID)
    if DATASETS[ds].unit is not None:
        out += draw(_opt("--max-rows-per-unit", [1, 4]))
    out += draw(st.sampled_from([[], ["--save", "model.pkl"]]))
    return out + draw(_JSON)


TRAIN = Command("train", ("adult", "people-row", "people-person", "people-noschema", "codes"),
                _train_options,
                lambda o: ["train", "data.csv", *o, "--seed", SEED])


@st.composite
def _audit_options(draw: Any, ds: str) -> list[str]:
    # (10 members on the person-level frame: with one row per person it has 48 distinct
    # rows, and the audit's members-range refusal prints the exact count: reported)
    members = "10" if DATASETS[ds].unit is not None else "20"
    out = [*_target(ds), "--members", members, "--epochs", "1", "--batch-size", "8",
           "--attacks", "loss"]
    out += draw(st.sampled_from([["--epsilon", "2"], ["--epsilon", "2"], ["--no-dp"]]))
    out += draw(_opt("--model", ["logreg"]))
    if DATASETS[ds].unit is not None:
        out += draw(_opt("--max-rows-per-unit", [1, 4]))
    out += draw(_ON_INVALID)
    out += draw(st.sampled_from([[], ["--report", "audit.html"]]))
    return out + ["--json"]


AUDIT = Command("audit", ("adult", "people-row", "people-person", "codes"), _audit_options,
                lambda o: ["audit", "data.csv", *o, "--seed", SEED],
                # wall time of the audit
                free=frozenset({"seconds"}))


@st.composite
def _synth_options(draw: Any, ds: str) -> list[str]:
    method = draw(st.sampled_from(["mst", "aim", "dpvae"]))
    out = ["--method", method, "--epsilon", "6", "--rows", "30",
           "--out", draw(st.sampled_from(["synth.parquet", "synth.csv"]))]
    if method == "aim":
        out += ["--workload", "2way"]
    if method == "dpvae":
        out += ["--epochs", "1"]
    out += draw(st.sampled_from([[], [], ["--holdout", "0.25", "--evaluate"]]))
    out += draw(_ON_INVALID)
    if method != "dpvae":
        # categories / bounds estimated under DP instead of the declared ones
        out += draw(st.sampled_from([[], [], ["--estimate-domain", "all"],
                                     ["--estimate-domain", "age"]]
                                    + ([["--estimate-domain", "state"]] if ds == "codes"
                                       else [])))
        out += draw(_opt("--bins", [8]))
    out += draw(_opt("--missing", ["drop"]))
    if ds != "codes":
        out += draw(_opt("--exclude", ["hours" if "people" in ds else "fnlwgt"]))
    else:
        out += ["--exclude", "when,flag"]  # synthesizers take no datetime column
    # the one delta policy: a weak delta is refused (exit 4) or accepted with a warning
    out += draw(st.sampled_from([[], [], ["--delta", "2e-3"]]))
    out += draw(_flag("--allow-weak"))
    return out + draw(_JSON)


SYNTH = Command(
    "synth", ("adult", "people-row", "people-person", "codes"), _synth_options,
    lambda o: ["synth", "data.csv", *o, "--seed", SEED],
    # MST / AIM choose trees, marginals and rounds by the exponential mechanism on noisy
    # scores and estimate the row count from noisy totals (tests/soundness/test_synth_...)
    # (DP-VAE: the sampling rate, steps, batch and noise multiplier follow from the noisy
    # row count)
    noised=frozenset({"tree_edges", "compressed_sizes", "estimated_rows", "rounds",
                      "model_cliques", "model_cells", "final_loss", "sample_rate", "steps",
                      "expected_batch", "noise_multiplier"}),
    # warnings are computed from the noisy measurements only: even their number may differ
    free=frozenset({"warnings"}))


@st.composite
def _federated_options(draw: Any, ds: str) -> list[str]:
    algorithm = draw(st.sampled_from(["dpam", "dpfedavg", "dpftrl"]))
    out = ["train", "--ratings", "data.csv", "--movies", "movies.csv", "--algorithm",
           algorithm, "--rounds", "1",
           *draw(st.sampled_from([["--epsilon", "4"], ["--epsilon", "4"], ["--non-private"]])),
           *draw(_opt("--engine", ["loop"]))]
    if algorithm != "dpam":
        out += ["--clients-per-round", "4"]
    out += draw(_opt("--users", [20]))
    out += draw(_opt("--max-users", [6]))
    out += draw(st.sampled_from([[], ["--no-eval"]]))
    out += draw(_ON_INVALID)
    return out + draw(_JSON)


FEDERATED = Command("federated", ("ratings", "ratings-longids"), _federated_options,
                    lambda o: ["federated", *o, "--seed", SEED])


@st.composite
def _trajectory_options(draw: Any, ds: str) -> list[str]:
    mode = draw(st.sampled_from([["--mechanism", "planar", "--radius", "50"],
                                 ["--mechanism", "laplace", "--sensitivity", "bbox"]]))
    out = ["anonymize", "data.csv", "--out", "pub.csv", "--window", "3", "--epsilon", "1",
           "--bbox", "39.80,116.20,40.10,116.60", *mode]
    out += draw(_ON_INVALID)
    return out + draw(_JSON)


TRAJECTORY = Command(
    "trajectory", ("trajectories",), _trajectory_options,
    lambda o: ["trajectory", *o, "--seed", SEED],
    # local model: the counts are functions of the published (randomized) rows
    noised=frozenset({"counts"}), same_length=False, text_exact=False)


@st.composite
def _choose_options(draw: Any, ds: str) -> list[str]:
    out = [*_target(ds), "--epsilons", "1,4", "--seeds", "1", "--epochs", "1",
           "--shadow-models", "1", "--attacks", "loss", "--batch-size", "16"]
    out += draw(_opt("--model", ["logreg"]))
    out += draw(_opt("--policy", ["medical", "recommender"]))
    out += draw(_ON_INVALID)
    return out + ["--json"]


#: Not in the CI file (a run trains and attacks several models: tens of seconds); the
#: experiment draws it. Its output is an evaluation labelled NOT DP whose `not_covered` names
#: every measured key, so only the echoed settings and the labels are compared.
CHOOSE = Command("choose-epsilon", ("people-row", "people-person"), _choose_options,
                 lambda o: ["choose-epsilon", "data.csv", *o, "--seed", SEED])

COMMANDS = {c.name: c for c in (RELEASE, PLAN, TRAIN, AUDIT, SYNTH, FEDERATED, TRAJECTORY,
                                CHOOSE)}


@dataclass(frozen=True)
class Case:
    command: str
    dataset: str
    options: tuple[str, ...]
    edit: str
    #: PRIVLAB_PROGRESS=1: plain progress lines on stderr, which must match too
    progress: bool = False

    def __str__(self) -> str:
        env = "PRIVLAB_PROGRESS=1 " if self.progress else ""
        return (f"{env}{self.command} on {self.dataset} [{' '.join(self.options)}] "
                f"edit={self.edit}")


@st.composite
def cases(draw: Any, commands: Iterable[str] = tuple(COMMANDS),
          datasets: Iterable[str] | None = None) -> Case:
    """A command, a dataset it accepts (among `datasets` when given), its options and one
    edit."""
    cmd = COMMANDS[draw(st.sampled_from(sorted(commands)))]
    allowed = cmd.datasets if datasets is None else \
        tuple(d for d in cmd.datasets if d in set(datasets))
    ds = draw(st.sampled_from(allowed))
    opts = draw(cmd.options(ds))
    names = edit_names(ds)
    # weighted towards the edits that move n or a whole person (uniform would draw a
    # one-person edit on a person-level schema 3 times in 15)
    edit = draw(st.one_of(st.sampled_from(names),
                          st.sampled_from([n for n in names if n in PERSON | SIZE] or names)))
    return Case(cmd.name, ds, tuple(opts), edit, progress=draw(st.booleans()))


# --------------------------------------------------------------------------- the runner


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    warnings: list[str]
    files: dict[str, Any] = field(default_factory=dict)

    @property
    def doc(self) -> Any:
        try:
            return json.loads(self.stdout)
        except ValueError:
            return None


def _write_inputs(folder: Path, ds: Dataset, frame: pd.DataFrame) -> set[str]:
    frame.to_csv(folder / "data.csv", index=False)
    names = {"data.csv"}
    if isinstance(ds.schema, dict):
        (folder / "schema.json").write_text(json.dumps(ds.schema))
        names.add("schema.json")
    for name, extra in ds.extra_files().items():
        extra.to_csv(folder / name, index=False)
        names.add(name)
    return names


def _read_output(path: Path) -> Any:
    """What a written file may reveal: a table's columns, dtypes and length, and the codes of
    its text columns (compared with the declared domain: `_check_codes`); a JSON document; a
    saved model's attributes (`saved_model_facts`: the weights as shapes); else only that it
    exists."""
    name = path.name
    if name.endswith(".parquet"):
        table = pd.read_parquet(path)
        text, dtypes = table.astype(object), [str(t) for t in table.dtypes]
    elif name.endswith((".csv", ".csv.gz")):
        # a CSV has no dtypes: its cells are text ("01" is not 1), and what a column shows of
        # its type is the form of its written cells (integer, decimal, other text)
        text = pd.read_csv(path, dtype=str, keep_default_na=False)
        table, dtypes = text, [_cell_form(text[c]) for c in text.columns]
    elif name.endswith(".json"):
        return json.loads(path.read_text())
    elif name.endswith(".pkl"):  # a saved model: its unpickled attributes (issue 29)
        from privlab.learn.estimators import load_model

        return saved_model_facts(load_model(path))
    else:
        return "present"
    return {"columns": list(table.columns), "dtypes": dtypes, "length": len(table),
            "codes": {str(c): sorted({str(v) for v in text[c] if isinstance(v, str) and v})
                      for c in text.columns}}


def _cell_form(cells: pd.Series) -> str:
    """The written form of a CSV column's non-blank cells: integer, decimal or text."""
    filled = cells[cells != ""]
    if filled.str.fullmatch(r"[+-]?\d+").all():
        return "integer"
    if filled.str.fullmatch(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?").all():
        return "decimal"
    return "text"


def _check_codes(files: Mapping[str, Any], ds: Dataset, case: Case, where: str) -> None:
    """A written table's categorical cells are declared codes (or `<other>`): a category read
    from the rows another way ("1" for "01") is a domain that came from the data."""
    if ds.schema is None:
        return
    for name, table in files.items():
        if not (isinstance(table, Mapping) and "codes" in table):
            continue
        for col in ds.declared().columns:
            if col.type == "categorical" and col.name in table["codes"]:
                extra = set(table["codes"][col.name]) - set(col.categories) - {"<other>"}
                assert not extra, f"{where} {name}: column {col.name!r} holds undeclared " \
                    f"codes {sorted(extra)[:5]} ({case.edit})"


def _stat_moves(case: Case, a: Run, b: Run, where: str) -> None:
    """With the same seed the noise is the same draw on D and D': a count or histogram may
    move by its sensitivity only (one row in or out of a bin: L1 <= 2 x the rows per person).
    A cell written another way must not move the other rows' values (issue 29)."""
    if case.command != "release" or case.edit not in REPRESENTATION or a.code or b.code:
        return
    if case.options[0] not in ("count", "histogram") or a.doc is None or b.doc is None:
        return
    opts = list(case.options)
    per = int(opts[opts.index("--max-rows-per-unit") + 1]) \
        if "--max-rows-per-unit" in opts else 1
    va, vb = a.doc["value"], b.doc["value"]
    va, vb = (va, vb) if isinstance(va, list) else ([va], [vb])
    l1 = sum(abs(float(x) - float(y)) for x, y in zip(va, vb, strict=True))
    assert l1 <= 2 * per + 1e-6 * (1 + sum(abs(float(x)) for x in va)), \
        f"{where} the noised values moved by L1 {l1:g} (sensitivity {2 * per}): {va} vs {vb}"


def run_cli(argv: list[str], folder: Path, inputs: set[str], progress: bool = False) -> Run:
    """`main(argv)` with `folder` as the working directory, capturing everything it says
    (with `progress`, the plain progress lines of PRIVLAB_PROGRESS=1 too; else none)."""
    from privlab.cli.common import console, err_console
    from privlab.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    # unwrapped (soft wrap): a line that names the folder would otherwise break at a place
    # that depends on the temp folder's length, and `here` would not be found to replace
    with contextlib.chdir(folder), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err), warnings.catch_warnings(record=True) as caught, \
            _progress_env("1" if progress else "0"), _soft_wrap(console, err_console):
        warnings.simplefilter("always")
        code = main(argv)
    files = {p.name: _read_output(p) for p in sorted(folder.iterdir())
             if p.name not in inputs and p.is_file()}
    # the two sides run in different folders: their own path is not a difference
    here = str(folder.resolve())
    return Run(code, out.getvalue().replace(here, "<dir>"), err.getvalue().replace(here, "<dir>"),
               sorted({f"{w.category.__name__}: {w.message}" for w in caught}), files)


@contextlib.contextmanager
def _soft_wrap(*consoles: Any) -> Any:
    """The consoles print without wrapping lines, then wrap again as before."""
    old = [c.soft_wrap for c in consoles]
    for c in consoles:
        c.soft_wrap = True
    try:
        yield
    finally:
        for c, was in zip(consoles, old, strict=True):
            c.soft_wrap = was


@contextlib.contextmanager
def _progress_env(value: str) -> Any:
    old = os.environ.get("PRIVLAB_PROGRESS")
    os.environ["PRIVLAB_PROGRESS"] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PRIVLAB_PROGRESS", None)
        else:
            os.environ["PRIVLAB_PROGRESS"] = old


def resolve(opts: Iterable[str], frame: pd.DataFrame) -> list[str]:
    """Options that name a fact of D ("1/n": a delta of exactly one over D's rows)."""
    return [repr(1.0 / len(frame)) if o == "1/n" else o for o in opts]


def run_case(case: Case) -> tuple[Run, Run]:
    cmd, ds = COMMANDS[case.command], DATASETS[case.dataset]
    base = ds.frame().reset_index(drop=True)
    edited = edits(ds)[case.edit]
    argv = cmd.argv(resolve(case.options, base)) + ds.schema_arg()
    runs = []
    with tempfile.TemporaryDirectory(prefix="privlab-fuzz-") as root:
        for side, frame in (("D", base), ("D'", edited)):
            folder = Path(root) / ("a" if side == "D" else "b")
            folder.mkdir()
            inputs = _write_inputs(folder, ds, frame)
            for name, text in cmd.files(list(case.options)).items():
                (folder / name).write_text(text)
                inputs.add(name)
            if "--ledger" in argv:  # a budget for the principal, as a curator would set
                ledger = argv[argv.index("--ledger") + 1]
                setup = run_cli(["budget", "set", "--ledger", ledger, "--principal", "alice",
                                 "--epsilon", "5", "--delta", "1e-4"], folder, inputs)
                assert setup.code == 0, setup.stderr
                inputs |= {p.name for p in folder.iterdir()}  # the ledger is an input
            runs.append(run_cli(argv, folder, inputs, progress=case.progress))
    return runs[0], runs[1]


# --------------------------------------------------------------------------- the comparison

_NAME = re.compile(r"^[A-Za-z_][\w.]*$")


def labelled_not_covered(doc: Any) -> set[str]:
    """Keys the output itself names as exact-but-labelled: every guarantee's `not_covered`
    entries ("n_test (exact ...)", "data.rows", "a, b (...)") and a top-level `noised` list."""
    found: set[str] = set()
    if isinstance(doc, Mapping):
        for key, value in doc.items():
            if key == "not_covered" and isinstance(value, list):
                for entry in value:
                    head = re.split(r" \(|: ", str(entry), maxsplit=1)[0]
                    for token in head.split(","):
                        token = token.strip()
                        if _NAME.match(token):
                            found.add(token.rsplit(".", 1)[-1])
            else:
                found |= labelled_not_covered(value)
    elif isinstance(doc, list):
        for value in doc:
            found |= labelled_not_covered(value)
    return found


def declared_noised(doc: Any) -> set[str]:
    """A top-level `noised` list (train): the keys the command says carry noise."""
    if isinstance(doc, Mapping) and isinstance(doc.get("noised"), list):
        return {str(k) for k in doc["noised"]}
    return set()


def _guarantees(doc: Any) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    if isinstance(doc, Mapping):
        if "is_dp" in doc and "neighbouring" in doc:
            out.append(doc)
        for value in doc.values():
            out.extend(_guarantees(value))
    elif isinstance(doc, list):
        for value in doc:
            out.extend(_guarantees(value))
    return out


def not_dp(doc: Any) -> bool:
    """The output holds guarantees and none claims DP: it is labelled NOT DP throughout."""
    found = _guarantees(doc)
    return bool(found) and not any(g.get("is_dp") for g in found)


def claim(doc: Any) -> str | None:
    """The neighbouring relation of the output's DP claim: its top-level `guarantee` when it
    has one, else the first DP guarantee inside it (None: no DP claim)."""
    top = doc.get("guarantee") if isinstance(doc, Mapping) else None
    if isinstance(top, Mapping) and "is_dp" in top:
        return str(top["neighbouring"]) if top["is_dp"] else None
    for g in _guarantees(doc):
        if g.get("is_dp"):
            return str(g["neighbouring"])
    return None


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


#: Verdicts printed from values that are noised (DP post-processing) or named in
#: `not_covered` (a NOT-DP output): like those values, they may differ between neighbours.
_VERDICTS = re.compile(r"the model is no better than always predicting '[^']*': it learnt "
                       r"nothing useful \(more epochs, more rows or a larger epsilon may help\)")

_MAJORITY = re.compile(r"always predicting '[^']*'")


def mask_numbers(text: str) -> str:
    """Human output: numbers may be noised values, and verdicts drawn from them may come and
    go; the other words around them may not move."""
    kept = _VERDICTS.sub("", " ".join(text.split()))
    # the majority class is read from noisy class counts (DP) or is itself not covered
    kept = _MAJORITY.sub("always predicting '?'", kept)
    return _NUMBER.sub("#", " ".join(kept.split()))


def check_runs(case: Case, a: Run, b: Run) -> str:
    """Raise AssertionError naming what differs; return "compared" or why it was skipped."""
    cmd, ds = COMMANDS[case.command], DATASETS[case.dataset]
    where = f"[{case}]"
    relation = claim(a.doc) or claim(b.doc)
    if case.edit in PERSON and relation in ("add_remove_record", "replace_record"):
        raise AssertionError(
            f"{where} schema privacy unit {ds.unit!r} (one person, many rows), yet the output "
            f"claims record-level DP ({relation}): a one-person edit is not covered")
    if relation == "replace_record" and case.edit not in REPLACE:
        return "not a neighbour under replace_record (the row count is public)"
    if (a.code, a.stderr) != (b.code, b.stderr):
        if _noisy_refusal(a) or _noisy_refusal(b):
            return "refused on noisy values (a DP decision; the message prints noisy values)"
        if (a.code and _schema_refusal(case, a, b)) or (b.code and _schema_refusal(case, b, a)):
            return "refused by the schema's refuse policy (curator-facing, nothing written)"
    assert a.code == b.code, f"{where} exit {a.code} on D vs {b.code} on D': " \
        f"{a.stderr.strip()[:300]!r} / {b.stderr.strip()[:300]!r}"
    assert a.stderr == b.stderr, f"{where} stderr differs: {a.stderr!r} vs {b.stderr!r}"
    assert a.warnings == b.warnings, f"{where} warnings differ: {a.warnings} vs {b.warnings}"
    free = set(cmd.free) | labelled_not_covered(a.doc)
    noised = set(cmd.noised) | declared_noised(a.doc)
    if case.command == "synth" and "aim" in case.options:
        # AIM's rounds are DP choices: its guarantee notes and budget steps list them, and
        # even their number may differ
        free |= {"notes", "budget", "rounds", "model_cliques"}
    if a.doc is not None or b.doc is not None:
        assert a.doc is not None and b.doc is not None, f"{where} JSON on one side only"
        _compare_doc(a.doc, b.doc, free, noised, where)
    elif cmd.text_exact:
        assert mask_numbers(a.stdout) == mask_numbers(b.stdout), \
            f"{where} stdout differs beyond numbers:\n{a.stdout}\n---\n{b.stdout}"
    assert sorted(a.files) == sorted(b.files), \
        f"{where} files written differ: {sorted(a.files)} vs {sorted(b.files)}"
    _stat_moves(case, a, b, where)
    _check_codes(a.files, ds, case, where)
    _check_codes(b.files, ds, case, where)
    for name, fa in a.files.items():
        fb = b.files[name]
        if isinstance(fa, Mapping) and "dtypes" in fa and "codes" in fa:
            assert fa["columns"] == fb["columns"], f"{where} {name}: columns differ"
            assert fa["dtypes"] == fb["dtypes"], \
                f"{where} {name}: dtypes differ {fa['dtypes']} vs {fb['dtypes']}"
            if cmd.same_length:
                assert fa["length"] == fb["length"], f"{where} {name}: lengths differ"
        elif name.endswith(".pkl") and "model_guarantee" in noised:
            # the model's plan came from noisy values (a DP-estimated size): what derives
            # from it may differ; keys, lengths and kinds may not
            assert_same_shape(fa, fb, f"{where} {name}")
        else:
            _compare_doc(fa, fb, free | labelled_not_covered(fa), noised, f"{where} {name}")
    return "compared: both ran" if a.code == 0 else f"compared: both refused alike (exit {a.code})"


def _compare_doc(a: Any, b: Any, free: set[str], noised: set[str], where: str) -> None:
    if not_dp(a):
        # labelled NOT differentially private (e.g. an undeclared user count, trajectory
        # times): the same keys, shapes and labels are required, not the same values
        assert [(g["is_dp"], g["not_covered"]) for g in _guarantees(a)] == \
            [(g["is_dp"], g["not_covered"]) for g in _guarantees(b)], \
            f"{where} the NOT-DP labels differ"
        assert_same_shape(_strip(a, free), _strip(b, free), where)
    else:
        assert_same_structure(_strip(a, free), _strip(b, free), noised, where)


#: How the refusals decided on noisy values say so (MST / AIM marginals; DP-VAE's DP-SGD row
#: count): docs/guarantees.md, "refusal when epsilon is too small".
NOISY_REFUSALS = ("(estimated privately)", "the noisy row count (")


def _noisy_refusal(run: Run) -> bool:
    """A refusal decided on noisy values only (e.g. MST: the marginals' noise outweighs a
    privately estimated row count): a DP outcome, documented in docs/guarantees.md."""
    return run.code != 0 and any(m in run.stderr for m in NOISY_REFUSALS)


def _schema_refusal(case: Case, run: Run, other: Run) -> bool:
    """The one data-dependent outcome allowed, and only to the curator: with a declared schema
    and `--on-invalid refuse` (the default) a row outside the schema is refused (exit 2, one
    line naming a declared column, nothing written). docs/guarantees.md lists it."""
    ds = DATASETS[case.dataset]
    if ds.schema is None or "coerce" in case.options:
        return False
    lines, before = run.stderr.strip().splitlines(), other.stderr.strip().splitlines()
    names = [c.name for c in ds.declared().columns]
    # the same warnings as the other side, then one error line
    return (run.code == 2 and bool(lines) and lines[:-1] == before[:len(lines) - 1]
            and lines[-1].startswith("error: ") and any(n in lines[-1] for n in names)
            and not run.files)


def _strip(doc: Any, free: set[str]) -> Any:
    """The document with the values of `free` keys replaced by a marker (presence kept)."""
    if isinstance(doc, Mapping):
        return {k: ("<free>" if k in free else _strip(v, free)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_strip(v, free) for v in doc]
    return doc


def check_case(case: Case) -> str:
    """Run and check one case; with PRIVLAB_FUZZ_LOG=FILE each outcome is appended there
    (how many drawn cases were compared, skipped or refused)."""
    result = "problem"
    try:
        result = check_runs(case, *run_case(case))
        return result
    finally:
        log = os.environ.get("PRIVLAB_FUZZ_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(f"{case.command}\t{result}\t{case}\n")
