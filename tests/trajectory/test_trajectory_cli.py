"""`privlab trajectory anonymize|evaluate|plot|experiment` through `main(argv)`."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from trajectory_helpers import BOX

from privlab.cli.main import main

BOX_ARG = str(BOX)


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_anonymize_evaluate_plot_roundtrip(tmp_path, traj_csv, capsys):
    out = tmp_path / "pub.csv"
    rc = main(["trajectory", "anonymize", traj_csv, "--out", str(out), "--window", "2",
               "--epsilon", "1", "--bbox", BOX_ARG, "--radius", "50", "--seed", "1", "--json"])
    assert rc == 0
    data = _json(capsys)
    assert data["guarantee"]["neighbouring"] == "location_radius"
    # a claim on the locations; the exact times and trip structure are named as not covered
    assert data["guarantee"]["is_dp"] is False and data["guarantee"]["epsilon"] == 1.0
    assert data["guarantee"]["not_covered"][0].startswith("time, trip and window")
    assert data["counts"]["windows"] == 12 * 39
    pub = pd.read_csv(out, dtype={"id": str})
    assert len(pub) == 12 * 39 and pub["id"].iloc[0] == "u000"
    assert (tmp_path / "pub.csv.json").exists()

    rc = main(["trajectory", "evaluate", traj_csv, str(out), "--k", "1,2", "--max-points",
               "40", "--json"])
    assert rc == 0
    ev = _json(capsys)
    assert ev["utility"]["windows"] == 12 * 39
    assert ev["trajectories"] == 12
    link = ev["linkage"]
    # the 12 trips lie kilometres apart: the true window means link every trip back, and so
    # does a release whose noise (mean 2 r / eps = 100 m) is far below that spacing
    for kind in ("space", "space_time"):
        assert link[kind]["before (T', averaged only)"]["top1_accuracy"] == 1.0
        assert link[kind]["before (T', averaged only)"]["random_guess"] == 1 / 12
    assert link["space"]["after (T'', published)"]["top1_accuracy"] == 1.0

    pytest.importorskip("folium", reason="the map needs the geo extra: pip install -e '.[geo]'")
    rc = main(["trajectory", "plot", traj_csv, str(out), "--out", str(tmp_path / "figs"),
               "--json"])
    assert rc == 0
    files = _json(capsys)["files"]
    for key in ("x_over_time", "y_over_time", "xyt_3d", "map"):
        assert (tmp_path / "figs").joinpath(files[key].split("/")[-1]).stat().st_size > 1000
    html = (tmp_path / "figs" / "map.html").read_text()
    assert "leaflet" in html.lower() and "anonymized" in html

    rc = main(["trajectory", "evaluate", traj_csv, str(out), "--no-shapes", "--no-linkage",
               "--k", "2"])
    assert rc == 0
    assert "uniqueness" in capsys.readouterr().out


def test_linkage_falls_at_a_small_epsilon(tmp_path, traj_csv, capsys):
    """At eps 0.002, r 50 m the planar noise (mean 2 r / eps = 50 km) is larger than the box:
    the spatial vote can no longer link most trips (20 seeds: at most 0.28, chance 1/12)."""
    out = tmp_path / "small.csv"
    assert main(["trajectory", "anonymize", traj_csv, "--out", str(out), "--window", "2",
                 "--epsilon", "0.002", "--bbox", BOX_ARG, "--radius", "50", "--seed", "1",
                 "--json"]) == 0
    capsys.readouterr()
    assert main(["trajectory", "evaluate", traj_csv, str(out), "--no-shapes", "--k", "1",
                 "--json"]) == 0
    space = _json(capsys)["linkage"]["space"]
    before = space["before (T', averaged only)"]["top1_accuracy"]
    after = space["after (T'', published)"]["top1_accuracy"]
    assert before == 1.0 and after <= 0.5


def test_parquet_input_with_named_columns_gives_the_csv_release(tmp_path, traj, traj_csv,
                                                                capsys):
    """Parquet input (native timestamps, own column names) is read like the CSV: with the same
    seed the published windows are identical, and evaluate/plot re-read it from the sidecar's
    read options."""
    src = tmp_path / "traj.parquet"
    traj.rename(columns={"uid": "vehicle", "datetime": "ts", "lat": "y", "lng": "x"}).to_parquet(
        src, index=False)
    common = ["--window", "3", "--stride", "1", "--epsilon", "1", "--bbox", BOX_ARG,
              "--radius", "50", "--seed", "7", "--json"]
    pq_out, csv_out = tmp_path / "from_parquet.csv", tmp_path / "from_csv.csv"
    assert main(["trajectory", "anonymize", str(src), "--out", str(pq_out), "--id-col",
                 "vehicle", "--time-col", "ts", "--lat-col", "y", "--lon-col", "x",
                 *common]) == 0
    data = _json(capsys)
    assert data["counts"]["windows"] == 12 * 38
    assert data["parameters"]["read_options"]["id_col"] == "vehicle"
    assert main(["trajectory", "anonymize", traj_csv, "--out", str(csv_out), *common]) == 0
    capsys.readouterr()
    a = pd.read_csv(pq_out, dtype={"id": str})
    b = pd.read_csv(csv_out, dtype={"id": str})
    pd.testing.assert_frame_equal(a, b)
    assert main(["trajectory", "evaluate", str(src), str(pq_out), "--no-shapes",
                 "--no-linkage", "--k", "1", "--json"]) == 0
    assert _json(capsys)["utility"]["windows"] == 12 * 38
    pytest.importorskip("folium", reason="the map needs the geo extra: pip install -e '.[geo]'")
    assert main(["trajectory", "plot", str(src), str(pq_out), "--out",
                 str(tmp_path / "figs"), "--json"]) == 0
    assert _json(capsys)["is_dp"] is False  # the times are published exactly


def test_paper_setting_warns_on_stderr_and_in_json(tmp_path, traj_csv, capsys):
    out = tmp_path / "paper.parquet"
    rc = main(["trajectory", "anonymize", traj_csv, "--out", str(out), "--window", "2",
               "--epsilon", "2", "--mechanism", "laplace", "--sensitivity", "paper", "--json"])
    assert rc == 0
    captured = capsys.readouterr()
    assert "NOT differentially private" in captured.err
    data = json.loads(captured.out)
    assert data["guarantee"]["is_dp"] is False and data["guarantee"]["epsilon"] is None
    assert data["warnings"]


def test_bad_input_gives_one_line_errors(tmp_path, traj_csv, traj, capsys):
    out = str(tmp_path / "x.csv")
    base = ["trajectory", "anonymize", traj_csv, "--out", out, "--epsilon", "1"]
    cases = [
        (base + ["--window", "0", "--bbox", BOX_ARG], "--window"),
        (base + ["--window", "2"], "needs a public --bbox"),
        (base + ["--window", "2", "--bbox", "10,10,11,11"], "excludes every fix"),
        (base + ["--window", "2", "--stride", "3", "--bbox", BOX_ARG], "--stride"),
        (base + ["--window", "99", "--bbox", BOX_ARG], "shorter than --window 99"),
        (base + ["--window", "2", "--bbox", "1,2,3"], "--bbox"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    bad = traj.copy()
    bad.loc[4, "lat"] = float("nan")
    path = tmp_path / "bad.csv"
    bad.to_csv(path, index=False)
    argv = ["trajectory", "anonymize", str(path), "--out", out, "--epsilon", "1", "--window",
            "2", "--bbox", BOX_ARG]
    assert main(argv) == 2
    assert "--drop-invalid" in capsys.readouterr().err
    assert main(argv + ["--drop-invalid", "--json"]) == 0
    assert _json(capsys)["curator_counts"]["invalid_dropped"] == 1
    assert main(["trajectory", "evaluate", traj_csv, str(tmp_path / "none.csv")]) == 2


def test_experiment_table(tmp_path, traj_csv, capsys):
    rc = main(["trajectory", "experiment", traj_csv, "--bbox", BOX_ARG, "--windows", "2,3",
               "--epsilons", "1,2", "--seed", "0", "--out", str(tmp_path / "t.csv"), "--json"])
    assert rc == 0
    rows = _json(capsys)["rows"]
    assert len(rows) == 3 * 2 * 2
    by = {(r["setting"], r["window"], r["epsilon"]): r for r in rows}
    assert by[("laplace-paper", 2, 1.0)]["is_dp"] is False
    assert by[("laplace-bbox", 2, 1.0)]["epsilon_per_fix"] == 2.0
    # bbox sensitivity falls with PB; everything falls with epsilon
    assert by[("laplace-bbox", 3, 1.0)]["rmse_lat_deg"] < by[("laplace-bbox", 2, 1.0)][
        "rmse_lat_deg"]
    assert by[("planar", 2, 2.0)]["rmse_m"] < by[("planar", 2, 1.0)]["rmse_m"]
    assert len(pd.read_csv(tmp_path / "t.csv")) == 12
    rc = main(["trajectory", "experiment", traj_csv, "--bbox", BOX_ARG, "--windows", "2",
               "--epsilons", "1", "--settings", "planar"])
    assert rc == 0
    assert "RMSE" in capsys.readouterr().out


def test_anonymize_with_filters_from_the_command_line(tmp_path, traj_csv, capsys):
    out = tmp_path / "f.csv.gz"
    rc = main(["trajectory", "anonymize", traj_csv, "--out", str(out), "--window", "3",
               "--stride", "3", "--epsilon", "1", "--mechanism", "laplace", "--bbox", BOX_ARG,
               "--time-window", "2020-01-01 08:00,2020-01-01 09:00", "--heading", "0:360",
               "--max-speed", "300", "--gap", "10", "--json"])
    assert rc == 0
    data = _json(capsys)
    assert data["parameters"]["filters"]["heading"] == [0.0, 360.0]
    assert data["curator_counts"]["outside_time_window_dropped"] == 6 * 40  # the second trips
    assert data["guarantee"]["epsilon"] == 1.0  # stride = PB: one window per fix
    assert main(["trajectory", "anonymize", traj_csv, "--out", str(out), "--window", "2",
                 "--epsilon", "1", "--bbox", BOX_ARG, "--heading", "10"]) == 2
    assert "--heading" in capsys.readouterr().err


def test_evaluate_reads_the_published_times_as_declared(tmp_path, traj_csv, capsys):
    """Issue 29: the published file's cells are read by their declared types, each on its own.
    A first time written with a Z (the same instant) or the ids written as digits must not
    change how the other rows are read: the evaluation is the same (pandas took the time format
    from the first row and read every other time as another or a missing one)."""
    out = tmp_path / "pub.csv"
    assert main(["trajectory", "anonymize", traj_csv, "--out", str(out), "--window", "2",
                 "--epsilon", "1", "--bbox", BOX_ARG, "--radius", "50", "--seed", "1",
                 "--json"]) == 0
    capsys.readouterr()
    argv = ["--k", "1", "--no-shapes", "--no-linkage", "--json"]
    assert main(["trajectory", "evaluate", traj_csv, str(out), *argv]) == 0
    base = _json(capsys)
    text = pd.read_csv(out, dtype=str, keep_default_na=False)
    first = pd.Timestamp(text.at[0, "time"])
    text.at[0, "time"] = first.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    text.to_csv(out, index=False)  # the sidecar beside it is unchanged
    assert main(["trajectory", "evaluate", traj_csv, str(out), *argv]) == 0
    assert _json(capsys)["utility"] == base["utility"]
    text.at[0, "time"] = "not a time"
    text.to_csv(out, index=False)
    assert main(["trajectory", "evaluate", traj_csv, str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert "column 'time' row 1" in err and len(err.strip().splitlines()) == 1
