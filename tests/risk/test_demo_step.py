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
    if chosen is None:  # none acceptable, or the models learnt nothing (issue 23)
        assert res["reason"].startswith(("no epsilon", "no recommendation"))
    else:
        assert chosen == 8.0 and "epsilon 8 " in res["reason"]
    # a sane model (always predicting the majority class gives 0.75)
    assert all(0.5 < r["accuracy"] <= 1 for r in res["per_epsilon"])
    g = res["per_epsilon"][0]["guarantee"]
    assert g["epsilon"] <= 8.0 + 1e-9 and g["is_dp"] and "PLD" in g["accountant"]
    html = (tmp_path / "choose_epsilon.html").read_text()
    assert "Choosing epsilon" in html or "choosing epsilon" in html
    json.dumps(res)


def test_torch_threads_follow_the_idle_cores():
    # issue 23: torch's default threads spin on a busy machine (15 s CPU with one thread,
    # 35-38 s with the default): only the cores the load leaves idle are used, at least one
    from privlab.risk.pipeline import torch_threads_for_machine

    assert torch_threads_for_machine(cores=2, load=0.0) == 2
    assert torch_threads_for_machine(cores=8, load=2.5) == 5
    assert torch_threads_for_machine(cores=2, load=1.5) == 1
    assert torch_threads_for_machine(cores=2, load=9.0) == 1
    assert torch_threads_for_machine(cores=1, load=0.0) == 1
    assert 1 <= torch_threads_for_machine() <= max(1, __import__("os").cpu_count() or 1)


def test_choose_epsilon_runs_with_the_machines_threads_and_restores_them(monkeypatch):
    import torch

    from privlab.risk import pipeline

    seen = []
    monkeypatch.setattr(pipeline, "torch_threads_for_machine", lambda: 1)
    monkeypatch.setattr(pipeline, "_choose_epsilon",
                        lambda *a, **k: seen.append(torch.get_num_threads()) or "done")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert pipeline.choose_epsilon(None, "y", None) == "done"
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
