"""Figures, map and CLI summaries say what a release guarantees, and NOT DP where it is not.

Akin et al.'s (2021) setting (`--sensitivity paper`) has an `epsilon` parameter but no guarantee: a
figure titled "epsilon = 2" would lie. These tests fail if the label leaves a figure title, the
PNG metadata, the map legend or the CLI output.
"""

from __future__ import annotations

import json
import warnings

import pytest
from PIL import Image
from trajectory_helpers import BOX

from privlab.cli.main import main
from privlab.trajectory.plots import axes_figures, figure_3d, map_document, select
from privlab.trajectory.preprocess import prepare
from privlab.trajectory.publish import (
    NOT_DP_COLOUR,
    NotPrivateWarning,
    anonymize,
    guarantee_label,
)

NOT_DP = "NOT DP (data-dependent bounds)"


def _flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


def _release(traj, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotPrivateWarning)
        return anonymize(traj, window=2, stride=1, epsilon=2.0, rng=1, **kw)


@pytest.fixture
def paper(traj):
    return _release(traj, mechanism="laplace", sensitivity="paper")


def _figures(traj, release, label):
    views = select(prepare(traj), release.averaged, release.published)
    return [*axes_figures(views, label).values(), figure_3d(views, label)], views


def test_labels_of_the_three_settings(traj, paper):
    planar = guarantee_label(_release(traj, bbox=BOX, radius=50).sidecar())
    # the claim is on the locations; the exact times and trips keep the whole release from DP
    assert not planar.is_dp and "planar Laplace r = 50 m" in planar.text
    assert "epsilon = 2 per window, 2 per fix" in planar.text and "NOT DP" not in planar.text
    assert "not covered: times and trip structure" in planar.text
    bbox = guarantee_label(_release(traj, bbox=BOX, mechanism="laplace").sidecar())
    assert not bbox.is_dp and "per-axis Laplace, box sensitivity" in bbox.text
    assert "not covered: times and trip structure" in bbox.text
    assert "epsilon = 2 per window, 4 per fix" in bbox.text  # a fix lies in 2 windows
    label = guarantee_label(paper.sidecar())
    assert not label.is_dp and label.text.startswith(NOT_DP)
    assert label.colour == NOT_DP_COLOUR
    # a sidecar whose guarantee is missing or damaged never reads as private
    side = paper.sidecar()
    for guarantee in ({}, {"is_dp": "yes", "epsilon": 2.0}, {"is_dp": True, "epsilon": None}):
        bad = guarantee_label({**side, "parameters": {**side["parameters"],
                                                      "sensitivity": "bbox"},
                               "guarantee": guarantee})
        assert not bad.is_dp and bad.text.startswith("NOT DP")


def test_every_figure_of_a_not_dp_release_is_headed_not_dp_in_red(traj, paper):
    label = guarantee_label(paper.sidecar())
    figures, _ = _figures(traj, paper, label)
    assert len(figures) == 3
    for fig in figures:
        head = fig._suptitle
        assert head is not None and head.get_text().startswith(NOT_DP)
        assert head.get_color() == NOT_DP_COLOUR and head.get_fontweight() == "bold"
        titles = " ".join(ax.get_title() for ax in fig.axes)
        assert "epsilon" not in titles  # no bare "epsilon = 2" anywhere else


def test_figures_and_map_of_a_dp_release_state_epsilon_and_radius(traj):
    release = _release(traj, bbox=BOX, radius=50)
    label = guarantee_label(release.sidecar())
    figures, views = _figures(traj, release, label)
    for fig in figures:
        text = fig._suptitle.get_text()
        assert "r = 50 m" in text and "epsilon = 2 per window" in text
        assert "not covered: times" in text and fig._suptitle.get_color() == NOT_DP_COLOUR
    pytest.importorskip("folium", reason="the map needs the geo extra: pip install -e '.[geo]'")
    doc = map_document(views, label)
    assert 'id="privlab-guarantee"' in doc and "r = 50 m: epsilon = 2 per window" in doc
    assert "not covered: times" in doc


def test_map_of_a_not_dp_release_has_a_red_not_dp_legend(traj, paper):
    label = guarantee_label(paper.sidecar())
    _, views = _figures(traj, paper, label)
    pytest.importorskip("folium", reason="the map needs the geo extra: pip install -e '.[geo]'")
    doc = map_document(views, label)
    start = doc.index('id="privlab-guarantee"')
    legend = doc[start:doc.index("</div>", start)]
    assert NOT_DP in legend and f"color: {NOT_DP_COLOUR}" in legend
    assert f"<title>{NOT_DP}" in doc
    assert "[NOT DP]" in doc  # the published layer's name in the layer control


def test_plot_and_evaluate_commands_warn_and_label_a_not_dp_release(tmp_path, traj_csv,
                                                                    capsys):
    out = tmp_path / "paper.csv"
    assert main(["trajectory", "anonymize", traj_csv, "--out", str(out), "--window", "2",
                 "--epsilon", "2", "--mechanism", "laplace", "--sensitivity", "paper",
                 "--seed", "1", "--json"]) == 0
    capsys.readouterr()
    figs = tmp_path / "figs"
    pytest.importorskip("folium", reason="the map needs the geo extra: pip install -e '.[geo]'")
    assert main(["trajectory", "plot", traj_csv, str(out), "--out", str(figs), "--json"]) == 0
    captured = capsys.readouterr()
    assert "NOT differentially private" in _flat(captured.err)
    data = json.loads(captured.out)
    assert data["is_dp"] is False and data["guarantee_label"].startswith(NOT_DP)
    for name in ("x_over_time.png", "y_over_time.png", "xyt_3d.png"):
        with Image.open(figs / name) as image:
            assert image.text["Description"].startswith(NOT_DP)
    assert NOT_DP in (figs / "map.html").read_text()

    assert main(["trajectory", "evaluate", traj_csv, str(out), "--no-shapes", "--no-linkage",
                 "--k", "1"]) == 0
    captured = capsys.readouterr()
    err, out_text = _flat(captured.err), _flat(captured.out)
    assert "warning:" in err and "NOT differentially private" in err
    assert f"guarantee: {NOT_DP}" in out_text
    assert "is_dp False" not in out_text


def test_evaluate_of_a_planar_release_warns_about_the_exact_times(tmp_path, traj_csv, capsys):
    out = tmp_path / "planar.csv"
    assert main(["trajectory", "anonymize", traj_csv, "--out", str(out), "--window", "2",
                 "--epsilon", "2", "--bbox", str(BOX), "--radius", "50", "--seed", "1",
                 "--json"]) == 0
    capsys.readouterr()
    assert main(["trajectory", "evaluate", traj_csv, str(out), "--no-shapes", "--no-linkage",
                 "--k", "1"]) == 0
    captured = capsys.readouterr()
    assert "not covered: times and trip structure" in _flat(captured.err)
    assert "planar Laplace r = 50 m: epsilon = 2 per window" in _flat(captured.out)
