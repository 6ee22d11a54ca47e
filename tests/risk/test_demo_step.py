"""`privlab demo --epsilons`: the short epsilon selection step on an Adult sample."""

import json

import pytest

pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")


def test_demo_choose_epsilon_step(tmp_path):
    from privlab.cli.demo import _choose_epsilon
    from privlab.data.datasets import load_adult

    res = _choose_epsilon(load_adult(drop_missing=True), [8.0], tmp_path, seed=1,
                          attacks=("loss",), max_rows=1500)
    assert 1400 <= res["rows"] <= 1500  # duplicate encoded rows are dropped
    assert [r["epsilon"] for r in res["per_epsilon"]] == [8.0]
    chosen = res["chosen_epsilon"]
    # the answer and its stated reason agree: a refusal says so, a choice names its epsilon
    if chosen is None:
        assert res["reason"].startswith("no epsilon")
    else:
        assert chosen == 8.0 and "epsilon 8 " in res["reason"]
    # a sane model (always predicting the majority class gives 0.75)
    assert all(0.5 < r["accuracy"] <= 1 for r in res["per_epsilon"])
    g = res["per_epsilon"][0]["guarantee"]
    assert g["epsilon"] <= 8.0 + 1e-9 and g["is_dp"] and "PLD" in g["accountant"]
    html = (tmp_path / "choose_epsilon.html").read_text()
    assert "Choosing epsilon" in html or "choosing epsilon" in html
    json.dumps(res)
