"""Readers and preprocessing: formats, column recognition, bad input, filters."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privlab.data.datasets import bundled_path
from privlab.errors import InvalidInputError
from privlab.trajectory.geo import BBox, bearing_deg, haversine_m
from privlab.trajectory.io import detect_format, from_frame, read_trajectories
from privlab.trajectory.preprocess import Filters, prepare


def test_bundled_geolife_sample_reads_with_recognised_columns():
    frame = read_trajectories(bundled_path("geolife", "geolife_sample.txt.gz"))
    assert list(frame.columns) == ["id", "time", "lat", "lon"]
    assert len(frame) == 217_653
    assert set(frame["id"]) == {"001", "005"}  # leading zeros kept
    assert frame["time"].dtype == "datetime64[ns]"
    assert frame["lat"].between(22, 42).all() and frame["lon"].between(113, 122).all()


def test_tdrive_format_is_detected_and_longitude_comes_first(tmp_path):
    path = tmp_path / "1.txt"
    path.write_text("1,2008-02-02 15:36:08,116.51172,39.92123\n"
                    "1,2008-02-02 15:46:08,116.51135,39.93883\n"
                    "2,2008-02-02 15:56:08,116.51627,39.91034\n")
    assert detect_format(path) == "tdrive"
    frame = read_trajectories(path)
    assert frame["lat"].tolist() == [39.92123, 39.93883, 39.91034]
    assert frame["lon"].iloc[0] == 116.51172
    assert frame["id"].tolist() == ["1", "1", "2"]
    # a directory of T-Drive files is read as one table
    (tmp_path / "2.txt").write_text("3,2008-02-03 10:00:00,116.4,39.9\n")
    assert len(read_trajectories(tmp_path, fmt="tdrive")) == 4


def test_geolife_plt_takes_the_user_from_the_directory(tmp_path):
    folder = tmp_path / "Data" / "007" / "Trajectory"
    folder.mkdir(parents=True)
    header = "Geolife trajectory\nWGS 84\nAltitude is in Feet\nReserved 3\n0,2,255,My Track,0," \
             "0,2,8421376\n0\n"
    (folder / "20081023025304.plt").write_text(
        header + "39.984702,116.318417,0,492,39744.1201851852,2008-10-23,02:53:04\n"
                 "39.984683,116.31845,0,492,39744.1202546296,2008-10-23,02:53:10\n")
    frame = read_trajectories(tmp_path / "Data")
    assert frame["id"].tolist() == ["007", "007"]
    assert frame["time"].iloc[1] == pd.Timestamp("2008-10-23 02:53:10")


def test_configurable_columns_and_numeric_times(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({"vehicle": ["a", "a"], "ts": [1_600_000_000, 1_600_000_005],
                  "Y": [40.0, 40.001], "X": [116.0, 116.001]}).to_csv(path, index=False)
    with pytest.raises(InvalidInputError, match="--lat-col"):
        read_trajectories(path, id_col="vehicle", time_col="ts")
    frame = read_trajectories(path, id_col="vehicle", time_col="ts", lat_col="Y", lon_col="X")
    assert frame["time"].iloc[0] == pd.Timestamp("2020-09-13 12:26:40")
    with pytest.raises(InvalidInputError, match="unknown --id-col"):
        read_trajectories(path, id_col="nope")


def test_unparseable_time_is_an_error_naming_the_column_not_the_row():
    """Since issue 21 the one-line error names the column and the fix, never a row number or
    a value of the private trajectories."""
    frame = pd.DataFrame({"id": ["a", "a"], "time": ["2020-01-01 10:00", "yesterday"],
                          "lat": [1.0, 1.0], "lon": [2.0, 2.0]})
    with pytest.raises(InvalidInputError, match="time column 'time': a missing or unparse") as e:
        from_frame(frame)
    assert "row" not in str(e.value).replace("rows", "") and "yesterday" not in str(e.value)


def test_unsorted_input_is_sorted_and_reported(traj):
    shuffled = traj.sample(frac=1.0, random_state=3)
    a = prepare(from_frame(traj))
    b = prepare(from_frame(shuffled))
    assert a.counts["input_was_sorted"] and not b.counts["input_was_sorted"]
    np.testing.assert_array_equal(a.t, b.t)
    np.testing.assert_array_equal(a.lat, b.lat)
    assert np.all(np.diff(b.codes) >= 0)


def test_duplicate_timestamps_keep_the_first_fix(traj):
    dup = pd.concat([traj.iloc[:5], traj.iloc[[2]].assign(lat=0.0), traj.iloc[5:]])
    p = prepare(from_frame(dup))
    assert p.counts["duplicate_timestamps_dropped"] == 1
    assert len(p) == len(traj)
    assert 0.0 not in p.lat


def test_nan_and_out_of_range_coordinates(traj):
    bad = traj.copy()
    bad.loc[7, "lat"] = np.nan
    with pytest.raises(InvalidInputError, match="--drop-invalid"):
        prepare(from_frame(bad))
    p = prepare(from_frame(bad), on_invalid="drop")
    assert p.counts["invalid_dropped"] == 1 and len(p) == len(traj) - 1
    swapped = traj.rename(columns={"lat": "lng", "lng": "lat"})
    with pytest.raises(InvalidInputError, match="swapped"):
        prepare(from_frame(swapped))


def test_bbox_that_excludes_everything_is_an_error(traj):
    with pytest.raises(InvalidInputError, match="excludes every fix"):
        prepare(from_frame(traj), Filters(bbox=BBox(10, 10, 11, 11)))


def test_bbox_parsing_rejects_bad_boxes():
    assert BBox.parse("39.8,116.2,40.1,116.6") == BBox(39.8, 116.2, 40.1, 116.6)
    # reversed corners are refused with the corrected order in the message, not swapped
    with pytest.raises(InvalidInputError, match="reversed.*39.8,116.2,40.1,116.6"):
        BBox.parse("40.1,116.6,39.8,116.2")
    for text in ("1,2,3", "a,b,c,d", "91,0,92,1", "10,10,10,20", "0,170,1,-170.5x"):
        with pytest.raises(InvalidInputError):
            BBox.parse(text)


def test_time_window_and_heading_filters():
    t = pd.date_range("2020-01-01", periods=6, freq="10s")
    # west-south-west for 3 steps (heading ~ 225), then due east (90)
    lat = [40.0, 39.999, 39.998, 39.997, 39.997, 39.997]
    lon = [116.0, 115.999, 115.998, 115.997, 115.998, 115.999]
    frame = pd.DataFrame({"id": "a", "time": t, "lat": lat, "lon": lon})
    p = prepare(frame, Filters(heading=(180, 270)))
    assert p.counts["heading_computed"]
    assert len(p) == 3 and p.counts["outside_heading_dropped"] == 3
    wrap = prepare(frame, Filters(heading=(300, 135)))  # wraps through north: east kept
    assert len(wrap) == 3 and wrap.lon[-1] == 115.999
    p = prepare(frame, Filters(time_window=(t[1], t[3])))
    assert len(p) == 3
    with pytest.raises(InvalidInputError, match="time-window"):
        prepare(frame, Filters(time_window=(pd.Timestamp("2021-01-01"),
                                            pd.Timestamp("2021-01-02"))))


def test_speed_spike_is_removed_but_plausible_motion_kept():
    t = pd.date_range("2020-01-01", periods=7, freq="5s")
    lat = 40.0 + np.arange(7) * 1e-4  # ~11 m per 5 s = 8 km/h
    lat[3] = 40.5  # a 55 km jump and back: a GPS glitch
    frame = pd.DataFrame({"id": "a", "time": t, "lat": lat, "lon": 116.0})
    p = prepare(frame, Filters(max_speed_kmh=200))
    assert p.counts["speed_outliers_dropped"] == 1
    assert 40.5 not in p.lat and len(p) == 6


def test_haversine_and_bearing_reference_values():
    # one degree of latitude on the mean-radius sphere
    assert haversine_m(np.array([0.0]), np.array([0.0]), np.array([1.0]),
                       np.array([0.0]))[0] == pytest.approx(111_195.08, rel=1e-6)
    assert bearing_deg(0.0, 0.0, 0.0, 1.0) == pytest.approx(90.0)
    assert bearing_deg(1.0, 0.0, 0.0, 0.0) == pytest.approx(180.0)


def test_canonical_looking_frames_are_still_validated():
    frame = pd.DataFrame({"id": ["a", None], "time": pd.to_datetime(["2020-01-01",
                                                                     "2020-01-02"]),
                          "lat": [40.0, 40.0], "lon": [116.0, 116.0]})
    with pytest.raises(InvalidInputError, match="has a missing value"):
        prepare(frame)
    frame = frame.assign(id="a", lat=["40.0", "north"])
    with pytest.raises(InvalidInputError, match="not a number"):
        prepare(frame)
    aware = pd.to_datetime(["2020-01-01 08:00", "2020-01-01 10:00"], utc=True)
    p = prepare(frame.assign(lat=40.0, time=aware.tz_convert("Europe/Istanbul")))
    assert p.t[1] - p.t[0] == 2 * 3600 * 10**9
    assert p.t[0] == pd.Timestamp("2020-01-01 08:00").value  # naive UTC
    text = frame.assign(lat=40.0, time=["2020-01-01 10:00+02:00", "2020-01-01 10:00+00:00"])
    p = prepare(text)
    assert p.t[1] - p.t[0] == 2 * 3600 * 10**9  # mixed offsets converted to UTC


def test_each_time_cell_is_read_on_its_own() -> None:
    """Issue 29: no cell's format decides another's. ISO 8601 with an offset or Z is UTC;
    "13/01/2009" is not ISO 8601 (on 524af6d it made "05/01/2009" read day first); a number
    is an epoch offset even among text times."""
    from privlab.trajectory.io import parse_times

    got = parse_times(pd.Series(["2009-06-01T10:00:00+02:00", "2009-06-01T08:00:00Z",
                                 "2009-06-01 08:00:00", "1243843200"], dtype=object))
    assert got.tolist() == [pd.Timestamp("2009-06-01 08:00")] * 4
    with pytest.raises(InvalidInputError, match="unparseable timestamp"):
        parse_times(pd.Series(["13/01/2009", "05/01/2009"], dtype=object))
