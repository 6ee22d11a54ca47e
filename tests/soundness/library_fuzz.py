"""The neighbour fuzz over the library API: every public function and estimator that releases.

Each check takes D and D' (one element or row added, removed or replaced, drawn by
Hypothesis), calls the API on both with the same seed and requires the same outcome: the same
error text, or results whose non-noised attributes agree (shapes, classes_, the guarantee with
its notes, domains, dtypes). As in `fuzz.check_runs`, an added or removed row is no neighbour
of a `replace_record` claim (n is public there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import strategies as st
from neighbours import assert_same_frame_structure, assert_same_structure

from privlab.errors import PrivlabError

SEED = 11


@dataclass(frozen=True)
class Outcome:
    error: str | None
    facts: Any = None


def outcome(fn: Callable[[], Any]) -> Outcome:
    try:
        return Outcome(None, fn())
    except PrivlabError as exc:
        return Outcome(f"{type(exc).__name__}: {exc}")


#: The library's curator-facing refusal, like the CLI's refuse policy: a value outside a
#: declared domain (e.g. a label outside `classes`) is refused before anything is released.
DECLARED = "outside the declared"


def compare(a: Outcome, b: Outcome, noised: tuple[str, ...], where: str) -> None:
    if a.error != b.error and DECLARED in f"{a.error}{b.error}":
        return
    assert a.error == b.error, f"{where}: {a.error!r} vs {b.error!r}"
    if a.error is None:
        assert_same_structure(a.facts, b.facts, noised, where)


def edit_array(values: list[float], edit: str, new: float) -> list[float]:
    if edit == "add":
        return [*values, new]
    if edit == "remove":
        return values[1:]
    return [new, *values[1:]]  # replace


# --------------------------------------------------------------------------- queries

@st.composite
def query_cases(draw: Any) -> tuple[str, dict[str, Any], list[float], str, float]:
    fn = draw(st.sampled_from(["dp_count", "dp_sum", "dp_mean", "dp_histogram", "dp_quantile"]))
    mech = draw(st.sampled_from(["laplace", "gaussian", "geometric"]))
    kwargs: dict[str, Any] = {"epsilon": draw(st.sampled_from([0.5, 2.0]))}
    if fn != "dp_quantile":
        kwargs["mechanism"] = mech
        if mech == "gaussian":
            kwargs["delta"] = draw(st.sampled_from([1e-6, 1e-3]))
    if fn in ("dp_sum", "dp_mean", "dp_quantile"):
        kwargs["bounds"] = (0.0, 100.0)
    if fn == "dp_quantile":
        kwargs["q"] = draw(st.sampled_from([0.1, 0.5]))
    if fn == "dp_histogram":
        kwargs.update(draw(st.sampled_from([{"bounds": (0.0, 100.0), "bins": 5},
                                            {"categories": [0.0, 1.0, 2.0]}])))
    values = draw(st.lists(st.integers(0, 100).map(float), min_size=0, max_size=12))
    edit = draw(st.sampled_from(["add", "remove", "replace"]))
    new = draw(st.sampled_from([0.0, 1.0, 57.0, 100.0, 1e9, -5.0]))
    if edit != "add" and not values:
        edit = "add"
    return fn, kwargs, values, edit, new


def check_query(fn: str, kwargs: dict[str, Any], values: list[float], edit: str,
                new: float) -> None:
    from privlab.core import queries

    def call(v: list[float]) -> Outcome:
        return outcome(lambda: getattr(queries, fn)(np.array(v, dtype=float), **kwargs,
                                                    rng=SEED).to_dict())

    where = f"{fn}({kwargs}) on {len(values)} values, edit {edit} {new}"
    compare(call(values), call(edit_array(values, edit, new)),
            ("value", "noisy_sum", "noisy_count"), where)


# --------------------------------------------------------------------------- estimators

@st.composite
def estimator_cases(draw: Any) -> tuple[str, dict[str, Any], int, str]:
    kind = draw(st.sampled_from(["logreg", "logreg", "mlp"]))
    params: dict[str, Any] = {"epsilon": 2.0, "random_state": SEED}
    if kind == "logreg":
        params["method"] = draw(st.sampled_from(["objective", "output", "dpsgd"]))
    if kind == "mlp" or params["method"] == "dpsgd":
        params.update(delta=1e-5, epochs=1, batch_size=16)
        params["sample_rate"] = draw(st.sampled_from([None, 0.25]))
    if kind == "mlp":
        params["hidden_layer_sizes"] = (4,)
    params["classes"] = draw(st.sampled_from([None, [0, 1], [0, 1, 2]]))
    n = draw(st.sampled_from([40, 41]))
    edit = draw(st.sampled_from(["add", "remove", "replace_x", "new_label"]))
    return kind, params, n, edit


def _xy(n: int) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(1)
    x = gen.uniform(-1, 1, (n, 3)) / np.sqrt(3)
    return x, (x[:, 0] + x[:, 1] > 0).astype(int)


def _edit_xy(x: np.ndarray, y: np.ndarray, edit: str) -> tuple[np.ndarray, np.ndarray]:
    if edit == "add":
        return np.vstack([x, x[:1]]), np.concatenate([y, y[:1]])
    if edit == "remove":
        return x[1:], y[1:]
    x2, y2 = x.copy(), y.copy()
    if edit == "replace_x":
        x2[0] = -x2[0]
    else:  # a label that D does not hold (declared or not)
        y2[0] = 2
    return x2, y2


def _estimator_facts(est: Any) -> dict[str, Any]:
    g = est.guarantee_.to_dict()
    return {"classes_": [str(c) for c in est.classes_], "n_features_in_": est.n_features_in_,
            "coef_shape": list(np.shape(getattr(est, "coef_", ()))),
            "guarantee": g}


def check_estimator(kind: str, params: dict[str, Any], n: int, edit: str) -> str:
    from privlab.learn import DPLogisticRegression, DPMLPClassifier

    cls = DPLogisticRegression if kind == "logreg" else DPMLPClassifier
    x, y = _xy(n)
    x2, y2 = _edit_xy(x, y, edit)

    def fit(xx: np.ndarray, yy: np.ndarray) -> Outcome:
        return outcome(lambda: _estimator_facts(cls(**params).fit(xx, yy)))

    a, b = fit(x, y), fit(x2, y2)
    relation = a.facts["guarantee"]["neighbouring"] if a.error is None else None
    if relation == "replace_record" and edit in ("add", "remove"):
        return "not a neighbour under replace_record"
    compare(a, b, (), f"{cls.__name__}({params}) on n={n}, edit {edit}")
    return "compared"


# --------------------------------------------------------------------------- synth

PEOPLE = {"name": "people", "columns": {
    "age": {"type": "integer", "bounds": [18, 90], "missing": False},
    "sex": {"type": "categorical", "categories": ["F", "M"], "missing": False},
    "hours": {"type": "numeric", "bounds": [0, 80], "missing": True}}}


@st.composite
def synth_cases(draw: Any) -> tuple[str, str, str]:
    return (draw(st.sampled_from(["mst", "aim"])), draw(st.sampled_from(["refuse", "coerce"])),
            draw(st.sampled_from(["add", "remove", "rare", "outside"])))


def check_synth(method: str, policy: str, edit: str) -> None:
    from privlab.synth import MSTSynthesizer
    from privlab.synth.aim import AIMSynthesizer

    gen = np.random.default_rng(2)
    d = pd.DataFrame({"age": gen.integers(18, 91, 300), "sex": gen.choice(["F", "M"], 300),
                      "hours": np.round(gen.uniform(0, 80, 300), 1)})
    d2 = d.copy().astype({"age": object})
    if edit == "add":
        d2 = pd.concat([d, d.iloc[[0]]], ignore_index=True)
    elif edit == "remove":
        d2 = d.iloc[1:].reset_index(drop=True)
    elif edit == "rare":
        d2.at[0, "hours"] = np.nan
    else:
        d2.at[0, "age"] = 500
    cls = MSTSynthesizer if method == "mst" else AIMSynthesizer
    extra = {"workload": "2way"} if method == "aim" else {}

    def fit(frame: pd.DataFrame) -> Outcome:
        def go() -> Any:
            s = cls(schema=PEOPLE, rng=SEED, on_invalid=policy, **extra).fit(frame, 8.0)
            return {"domain": s.domain.to_dict(), "guarantee": s.guarantee.to_dict(),
                    "sample": s.sample(25)}
        return outcome(go)

    a, b = fit(d), fit(d2)
    where = f"{cls.__name__}(on_invalid={policy}) edit {edit}"
    if a.error != b.error and policy == "refuse" and edit == "outside":
        return  # the schema refusal, to the curator
    assert a.error == b.error, f"{where}: {a.error!r} vs {b.error!r}"
    if a.error is None:
        assert_same_frame_structure(a.facts.pop("sample"), b.facts.pop("sample"))
        if method == "aim":  # its guarantee notes list its noisy rounds (even their number)
            a.facts["guarantee"].pop("notes")
            b.facts["guarantee"].pop("notes")
        compare(a, b, (), where)


# --------------------------------------------------------------------------- federated

@st.composite
def federated_cases(draw: Any) -> tuple[int | None, str]:
    return (draw(st.sampled_from([None, 2, 4, 6])),
            draw(st.sampled_from(["add_user", "add_user_last", "remove_user", *REPRESENTED])))


#: Representation edits of the ratings file (issue 29): 19-digit user ids with one cell blank
#: (pandas read the ids as floats, which merged users), and one blank id in user 1's rows.
REPRESENTED = ("long_ids_missing_one", "missing_unit")
LONG_ID = 1234567890123456000


def _rows_by_user(data: Any) -> dict[int, tuple[frozenset, frozenset]]:
    """Every user's (training rows, test rows) as sets of (movie id, rating)."""
    out = {}
    for pos, uid in enumerate(data.user_ids):
        parts = []
        for part in (data.train, data.test):
            a, b = part.indptr[pos], part.indptr[pos + 1]
            parts.append(frozenset(zip(data.item_ids[part.items[a:b]].tolist(),
                                       part.values[a:b].tolist(), strict=True)))
        out[int(uid)] = (parts[0], parts[1])
    return out


def check_max_users(tmp: Any, max_users: int | None, edit: str) -> None:
    """A ratings file and a one-user neighbour (with the public `--users 20`, and
    `--max-users N` when drawn): the users whose data is kept on D and on D' differ at most by
    the edited user, and every other user's training rows and test rows are the same on both
    (the per-user split is keyed by the user's own id, issue 29). The representation edits
    blank one cell of user 1's id (its rows are dropped, not merged into another user), the
    ids written with 19 digits or not."""
    from privlab.data.datasets import load_movielens
    from privlab.federated.data import load_ratings_files

    ratings = load_movielens("ratings")
    ratings = ratings[ratings["userId"] <= 8].groupby("userId").head(12).reset_index(drop=True)
    if edit == "add_user":  # a user whose id sorts first
        edited, user = pd.concat([ratings[ratings["userId"] == 3].assign(userId=0), ratings],
                                 ignore_index=True), 0
    elif edit == "add_user_last":  # ... and one whose id sorts last
        edited, user = pd.concat([ratings, ratings[ratings["userId"] == 3].assign(userId=99)],
                                 ignore_index=True), 99
    elif edit == "remove_user":
        edited, user = ratings[ratings["userId"] != 1], 1
    else:  # a cell of user 1's id written blank (19-digit ids: all of them long)
        if edit == "long_ids_missing_one":
            ratings = ratings.assign(userId=[str(LONG_ID + u) for u in ratings["userId"]])
        user = LONG_ID + 1 if edit == "long_ids_missing_one" else 1
        edited = ratings.astype({"userId": object})
        edited.loc[edited.index[edited["userId"].astype(str) == str(user)][0], "userId"] = None
    kept, rows = [], []
    for name, frame in (("D.csv", ratings), ("D2.csv", edited)):
        path = tmp / name
        frame.to_csv(path, index=False)
        data = load_ratings_files(path, max_users=max_users, on_invalid="coerce",
                                  declared_users=20)
        rated = (np.diff(data.train.indptr) + np.diff(data.test.indptr)) > 0
        kept.append({int(u) for u, r in zip(data.user_ids, rated, strict=True) if r})
        rows.append({u: r for u, r in _rows_by_user(data).items() if u >= 0})  # < 0: padding
    moved = kept[0] ^ kept[1]
    assert moved <= {user}, f"--max-users {max_users}, edit {edit} (user {user}): kept " \
        f"users differ by {sorted(moved)}, not only by the edited user"
    others = (set(rows[0]) | set(rows[1])) - {user}
    assert others and all(u in rows[0] and u in rows[1] for u in others), (edit, others)
    changed = sorted(u for u in others if rows[0][u] != rows[1][u])
    assert not changed, f"--max-users {max_users}, edit {edit} (user {user}): the training " \
        f"or test rows of the other users {changed} differ between D and D'"
