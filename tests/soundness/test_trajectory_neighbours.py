"""`privlab trajectory anonymize --schema geolife`: the local-model neighbouring harness.

In the local model each user randomizes their own trajectory, so that user's published rows
depend on their data by design. The rule checked here, on D and on each D' (one fix edited,
a fix added or duplicated, a user added or removed) with the same seed: the published rows of
every OTHER user are identical, the published columns and dtypes are identical, and the
sidecar has the same keys and the same values except the counts, which are functions of the
published rows and named in the guarantee's not_covered. In refuse mode a D' may instead be
refused (exit 2, one line naming the column) with nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from neighbours import (
    assert_same_frame_structure,
    assert_same_structure,
    one_row_edits,
    representation_edits,
)

from privlab.cli.main import main
from privlab.schema import bundled_schema

BOX = "39.80,116.20,40.10,116.60"
EDITED = "u000"  # the user whose fix row 0 is edited
MODES = {"planar": ["--mechanism", "planar", "--radius", "50"],
         "laplace-bbox": ["--mechanism", "laplace", "--sensitivity", "bbox"]}


def _trajectories(n_ids: int = 4, points: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n_ids):
        lat = rng.uniform(39.9, 40.0) + np.cumsum(rng.normal(0, 2e-4, points))
        lon = rng.uniform(116.3, 116.5) + np.cumsum(rng.normal(0, 2e-4, points))
        times = pd.Timestamp("2009-05-01 08:00") + pd.to_timedelta(
            np.arange(points) * 5 + 60 * i, unit="s")
        rows.append(pd.DataFrame({"lat": lat, "lng": lon, "datetime": times,
                                  "uid": f"u{i:03d}"}))
    return pd.concat(rows, ignore_index=True)


def _edits(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    edits = one_row_edits(frame, bundled_schema("geolife"))
    moved = frame.copy()
    moved.loc[0, "lat"] += 0.002
    edits["move_fix"] = moved
    edits["remove_user"] = frame[frame["uid"] != EDITED].reset_index(drop=True)
    new = frame[frame["uid"] == "u001"].assign(uid="u999")
    edits["add_user"] = pd.concat([frame, new], ignore_index=True)
    # issue 29: the first fix's time written with Z / an offset / day first
    edits |= {k: v for k, v in representation_edits(frame, bundled_schema("geolife")).items()
              if k.startswith("first_row_")}
    # issue 29: a new first user whose times all end in "Z" (on 524af6d, under coerce, the
    # other users' times became unparseable and they were dropped)
    zulu = frame[frame["uid"] == "u001"].assign(
        uid="u998", datetime=lambda f: f["datetime"].dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
    edits["add_zulu_user_first"] = pd.concat([zulu, frame], ignore_index=True)
    return edits


def _run(capsys: pytest.CaptureFixture[str], data: Path, out: Path, policy: str,
         mode: list[str]) -> tuple[int, dict | str]:
    code = main(["trajectory", "anonymize", str(data), "--out", str(out), "--window", "3",
                 "--epsilon", "1", "--bbox", BOX, "--seed", "4", "--schema", "geolife",
                 "--on-invalid", policy, "--json", *mode])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else captured.err.strip())


def _sidecar(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("out", "sidecar", "curator_counts")}


@pytest.mark.parametrize("policy", ["refuse", "coerce"])
@pytest.mark.parametrize("mode", list(MODES))
def test_other_users_rows_and_the_sidecar_do_not_change(tmp_path, capsys, mode, policy) -> None:
    frame = _trajectories()
    d = tmp_path / "D.csv"
    frame.to_csv(d, index=False)
    code, ref = _run(capsys, d, tmp_path / "D.pub.csv", policy, MODES[mode])
    assert code == 0, ref
    ref_pub = pd.read_csv(tmp_path / "D.pub.csv", dtype={"id": str})
    refused = []
    for name, edited in _edits(frame).items():
        path = tmp_path / f"{name}.csv"
        edited.to_csv(path, index=False)
        out = tmp_path / f"{name}.pub.csv"
        code, doc = _run(capsys, path, out, policy, MODES[mode])
        if code != 0:
            assert policy == "refuse" and code == 2, (name, doc)
            assert doc.startswith(("error: column 'lat'", "error: column 'datetime'")) and \
                len(doc.splitlines()) == 1, doc
            assert not out.exists() and not Path(str(out) + ".json").exists()
            refused.append(name)
            continue
        assert_same_structure(_sidecar(ref), _sidecar(doc), noised=("counts",))
        pub = pd.read_csv(out, dtype={"id": str})
        assert_same_frame_structure(ref_pub, pub, same_length=False)
        others = sorted(set(ref_pub["id"]) - {EDITED})
        a = ref_pub[ref_pub["id"].isin(others)].reset_index(drop=True)
        b = pub[pub["id"].isin(others)].reset_index(drop=True)
        pd.testing.assert_frame_equal(a, b, obj=f"other users' rows after {name}")
    if policy == "refuse":
        assert {"text_in_numeric", "extreme_value", "missing_numeric",
                "first_row_dayfirst"} == set(refused)
    else:
        assert refused == []


def test_sidecar_holds_no_input_counts_and_names_what_is_not_covered(tmp_path, capsys) -> None:
    """Regression: the sidecar shipped with the release held exact input counts (fixes kept,
    dropped, in short trips) beside a bare DP claim."""
    d = tmp_path / "D.csv"
    _trajectories().to_csv(d, index=False)
    out = tmp_path / "pub.csv"
    code, doc = _run(capsys, d, out, "refuse", MODES["planar"])
    assert code == 0, doc
    side = json.loads(Path(str(out) + ".json").read_text())
    assert set(side["counts"]) == {"windows", "trips", "ids", "max_windows_per_trip"}
    assert "kept_fixes" in doc["curator_counts"] and "kept_fixes" not in side["counts"]
    g = side["guarantee"]
    assert g["covers"] and "lat, lon" in g["covers"][0]
    assert any(n.startswith("time, trip and window") for n in g["not_covered"])
    assert g["is_dp"] is False and g["headline"].startswith("NOT differentially private")
    # the CLI output, which also prints the exact input counts, names them; the sidecar not
    assert any(n.startswith("curator_counts") for n in doc["guarantee"]["not_covered"])
    assert not any(n.startswith("curator_counts") for n in g["not_covered"])
    assert g["epsilon"] is not None  # the claim on the locations is still stated


def test_paper_mode_names_its_data_derived_bounds(tmp_path, capsys) -> None:
    d = tmp_path / "D.csv"
    _trajectories().to_csv(d, index=False)
    code, doc = _run(capsys, d, tmp_path / "p.csv", "refuse",
                     ["--mechanism", "laplace", "--sensitivity", "paper"])
    assert code == 0, doc
    assert any("own min/max" in n for n in doc["guarantee"]["not_covered"])
