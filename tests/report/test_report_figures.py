"""Report figures have no overlapping labels (checked on the rendered matplotlib text boxes)."""

from __future__ import annotations

import pytest

from privlab.report import figures as F

GRID = [0.25, 0.5, 1, 2, 4, 8, 16, 32]


def simulated_doc(policy: str) -> dict:
    """A choose-epsilon document from simulated measurements (no training)."""
    from privlab.risk import decide, fit_curves, make_policy, prior_sensitivity
    from privlab.risk.pipeline import ChooseResult, PipelineConfig, Sweep
    from privlab.risk.simulate import simulator

    ev = simulator(seed=2)
    evs = [ev(e) for e in GRID]
    pol = make_policy(policy)
    d = decide(fit_curves(evs, level=pol.level, n_draws=500), pol)
    info = {"rows": 1000, "target": "y"}
    sens = prior_sensitivity(evs, pol, n_draws=200)
    return ChooseResult(d, Sweep(evs, {}, None, len(evs)), PipelineConfig(epsilons=GRID), info,
                        sens, [], GRID, GRID, 0.0).to_dict()


def test_text_overlaps_finds_overlap_and_place_labels_avoids_it():
    fig = F.new_figure(4, 3)
    ax = fig.add_subplot()
    ax.scatter([0.0, 0.5, 1.0], [0.0, 0.5, 1.0])
    ax.annotate("eps 1", (0.5, 0.5), xytext=(3, 3), textcoords="offset points")
    ax.annotate("eps 2", (0.5, 0.5), xytext=(6, 3), textcoords="offset points")
    assert ("eps 1", "eps 2") in F.text_overlaps(fig)
    fig2 = F.new_figure(4, 3)
    ax2 = fig2.add_subplot()
    ax2.scatter([0.0, 1.0], [0.0, 1.0])
    pts = [(0.5, 0.5 + 1e-4 * i) for i in range(6)]  # six labels on (almost) one point
    F.place_labels(ax2, pts, [f"eps {i}" for i in range(6)])
    assert F.text_overlaps(fig2) == []


@pytest.mark.parametrize("policy", ["medical", "finance"])
def test_choose_epsilon_report_figures_have_no_overlapping_labels(monkeypatch, policy):
    from privlab.risk import report as R

    figs = []
    monkeypatch.setattr(R, "figure_data_uri", lambda fig: figs.append(fig) or "data:")
    doc = simulated_doc(policy)
    # a flat curve puts the Pareto points on top of each other: the hard case for labels
    for r in doc["per_epsilon"]:
        r["risk_mean"], r["utility_loss"] = 0.01, 0.2
    R._accuracy_fig(doc), R._risk_fig(doc), R._loss_fig(doc)
    assert len(figs) == 3
    for fig in figs:
        assert F.text_overlaps(fig) == []


def test_choose_epsilon_report_starts_in_plain_words_and_shows_no_raw_dicts(tmp_path):
    from privlab.risk.report import write_report

    doc = simulated_doc("finance")
    doc["data"].update(class_counts={"no": 700, "yes": 300},
                       split={"target_train": 300, "test": 300, "attacker_pool": 400})
    doc["chosen_epsilon"] = 16.0  # a weak choice must be flagged on the first page
    html = write_report(doc, tmp_path / "r.html").read_text()
    first = html.index("<section")
    assert html.index('id="summary"') < html.index("<section", first + 1)
    assert "WARNING: the recommended epsilon 16 is weak" in html
    assert "{&#39;" not in html and "{'" not in html
    assert "no: 700; yes: 300" in html and "target train: 300" in html
