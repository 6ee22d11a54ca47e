"""`privlab assess`: JSON shape, report, options, and one-line errors on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from privlab.cli.main import main


@pytest.fixture(scope="module")
def adult_csv(tmp_path_factory, adult_raw) -> Path:
    path = tmp_path_factory.mktemp("assess") / "adult_small.csv"
    adult_raw.iloc[:3000].to_csv(path, index=False, na_rep="?")
    return path


def run_json(capsys, argv: list[str]) -> dict:
    code = main(argv + ["--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_assess_json_shape(capsys, adult_csv):
    doc = run_json(capsys, ["assess", str(adult_csv), "--drop-missing",
                            "--quasi-identifiers", "age,education,sex", "--sensitive",
                            "occupation"])
    assert doc["missing_values"]["policy"] == "drop"
    assert {a["name"] for a in doc["attributes"]} >= {"age", "sex", "native-country"}
    for a in doc["attributes"]:
        assert {"name", "distinct", "richness", "tier"} <= set(a)
        assert a["tier"] in ("none", "low", "hide")
    assert {"low", "high", "kmin", "kmax", "mode"} <= set(doc["thresholds"])
    assert doc["combinations"], "Adult has candidate pairs"
    for c in doc["combinations"]:
        assert {"attributes", "richness", "tier", "escalated", "unique_share", "k"} <= set(c)
    pm = doc["privacy_models"]
    assert pm["quasi_identifiers"] == ["age", "education", "sex"]
    assert pm["k_anonymity"]["k"] >= 1
    assert {"distinct_l", "entropy_l", "recursive"} <= set(pm["l_diversity"])
    assert pm["t_closeness"]["distance"].startswith("equal")
    assert {"prosecutor", "journalist", "marketer", "unique_share"} <= set(
        pm["reidentification_risk"])
    assert doc["guarantee"]["is_dp"] is False
    assert any(r["action"] == "generalize" for r in doc["recommendations"])


def test_assess_thresholds_and_sizes(capsys, adult_csv):
    doc = run_json(capsys, ["assess", str(adult_csv), "--thresholds", "0.4,0.75",
                            "--max-combination-size", "3", "--attributes",
                            "race,sex,workclass,native-country,salary"])
    assert doc["thresholds"]["mode"] == "absolute"
    assert doc["thresholds"]["low"] == 0.4 and doc["thresholds"]["high"] == 0.75
    assert max(len(c["attributes"]) for c in doc["combinations"]) == 3
    assert "privacy_models" not in doc


def test_assess_report_and_human_output(capsys, adult_csv, tmp_path):
    report = tmp_path / "out.html"
    code = main(["assess", str(adult_csv), "-q", "age,sex", "-s", "hours-per-week",
                 "--report", str(report)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "richness" in out.out and "report written" in out.out
    assert "not differential privacy" in out.err
    html = report.read_text()
    for heading in ("Domain richness", "Risky combinations", "Privacy models",
                    "Recommendations"):
        assert f"<h2>{heading}</h2>" in html
    assert "data:image/png;base64," in html


def test_assess_population(capsys, tmp_path):
    pop = pd.DataFrame({"age": [30, 30, 40, 40, 50], "sex": ["F", "F", "M", "M", "F"]})
    pop.to_csv(tmp_path / "pop.csv", index=False)
    pop.iloc[[0, 2, 3]].to_csv(tmp_path / "sample.csv", index=False)
    doc = run_json(capsys, ["assess", str(tmp_path / "sample.csv"), "-q", "age,sex",
                            "--population", str(tmp_path / "pop.csv")])
    d = doc["privacy_models"]["delta_presence"]
    assert (d["delta_min"], d["delta_max"]) == (0.0, 1.0)


def _bad_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    (tmp / "empty.csv").write_text("")
    (tmp / "one.csv").write_text("a,b\n1,2\n")
    (tmp / "allmissing.csv").write_text("a,b\n1,\n2,\n3,\n")
    (tmp / "dupes.csv").write_text("a,a,b\n1,2,3\n4,5,6\n")
    (tmp / "ok.csv").write_text("a,b\n1,2\n3,4\n5,6\n")
    (tmp / "semi.csv").write_text("a;b\n1;2\n3;4\n")
    (tmp / "latin1.csv").write_bytes("name,city\nJos\xe9,K\xf6ln\nAna,Ulm\n".encode("latin-1"))
    return {
        "empty": (["empty.csv"], "empty"),
        "one row": (["one.csv"], "at least 2 rows"),
        "all missing": (["allmissing.csv"], "entirely missing"),
        "duplicate names": (["dupes.csv"], "duplicate column"),
        "unknown QI": (["ok.csv", "-q", "a,zz"],
                       "--quasi-identifiers 'zz' is not a column of ok.csv"),
        "wrong delimiter": (["semi.csv", "--delimiter", ","], "delimit"),
        "not utf-8": (["latin1.csv"], "UTF-8"),
        "sensitive without QIs": (["ok.csv", "-s", "a"], "--quasi-identifiers"),
        "bad thresholds": (["ok.csv", "--thresholds", "high"], "--thresholds"),
        "bad size": (["ok.csv", "--max-combination-size", "0"], "max-combination-size"),
    }


BAD_CASES = ["empty", "one row", "all missing", "duplicate names", "unknown QI",
             "wrong delimiter", "not utf-8", "sensitive without QIs", "bad thresholds",
             "bad size"]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_input_one_line_error(capsys, tmp_path, case):
    argv, needle = _bad_inputs(tmp_path)[case]
    argv = [str(tmp_path / argv[0])] + argv[1:]
    code = main(["assess", *argv])
    err = capsys.readouterr().err
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error:") and needle in lines[0], lines[0]


def test_assess_report_opens_with_plain_words(capsys, adult_csv, tmp_path):
    """The report's first section is for people: what was measured, what an attacker could
    learn with DO NOT PUBLISH beside the riskiest combinations, how sure we are, rounded."""
    import re

    from privlab.assess.report import share_words

    assert (share_words(0), share_words(0.004), share_words(0.123)) == ("none", "under 1%", "12%")
    report = tmp_path / "out.html"
    code = main(["assess", str(adult_csv), "-q", "age,sex", "--json", "--report", str(report)])
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = json.loads(out.out)
    html = report.read_text()
    headings = re.findall(r"<h2>(.*?)</h2>", html)
    assert headings[0] == "In plain words" and headings[1] == "Summary"
    first = html[html.index("<h2>In plain words</h2>"):html.index("<h2>Summary</h2>")]
    for words in ("What was measured", "What an attacker could learn", "How sure we are",
                  "Richness, from 0 to 1", "unique share is", "quasi-identifiers"):
        assert words in first, words
    # identifying = a group smaller than k = 5 (whatever the richness tier): DO NOT PUBLISH
    escalated = sorted((c for c in doc["combinations"] if c["escalated"] and c["k"] < 5),
                       key=lambda c: ({"hide": 0, "low": 1, "none": 2}[c["tier"]],
                                      -c["unique_share"]))
    assert escalated, "Adult has escalated pairs"
    for c in escalated[:6]:
        named = (f"{' + '.join(c['attributes'])} (richness {c['richness']:.2f}, "
                 f"{share_words(c['unique_share'])} of people unique, DO NOT PUBLISH)")
        assert named in first, named
    assert f"and {len(escalated) - 6} more" in first if len(escalated) > 6 else True
    for a in doc["attributes"]:
        if a["k"] == 1:
            assert (f"{a['name']} (richness {a['richness']:.2f}, "
                    f"{share_words(a['unique_share'])} of people unique, DO NOT PUBLISH)") in first
        elif a["k"] >= 5 and a["tier"] == "hide":
            assert (f"{a['name']} (richness {a['richness']:.2f}, no one unique, every value "
                    f"shared by at least {a['k']})") in first
        elif a["k"] >= 5:
            assert not re.search(rf"(?<!\+ ){re.escape(a['name'])} \(richness", first)
    assert "none of people unique" not in first
    pm = doc["privacy_models"]
    k = pm["k_anonymity"]["k"]
    assert f"k-anonymity k = {k}" in first
    assert f"{share_words(pm['reidentification_risk']['unique_share'])} of people are unique" \
        in first
    # rounded: no long decimals in the plain section's prose
    assert not re.search(r"\d\.\d{3,}", first)


def test_tier_wording_follows_uniqueness_and_k(tmp_path, capsys):
    """Issue 23: a 6-value band with k = 139 was said to "identify people on their own (none
    of people unique, DO NOT PUBLISH)", while a column where one person holds a rare value
    (k = 1) was tier "none" and kept without comment."""
    import re

    import numpy as np
    import pandas as pd

    n = 834
    gen = np.random.default_rng(0)
    frame = pd.DataFrame({
        "band": np.repeat(["18-25", "26-35", "36-45", "46-55", "56-65", "66+"], 139),
        "status": ["common"] * (n - 1) + ["rare"],
        "noise": gen.integers(0, 2, n).astype(str)})
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    report = tmp_path / "r.html"
    code = main(["assess", str(path), "--json", "--report", str(report)])
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = json.loads(out.out)
    band = next(a for a in doc["attributes"] if a["name"] == "band")
    status = next(a for a in doc["attributes"] if a["name"] == "status")
    assert band["tier"] == "hide" and band["k"] == 139 and band["unique_share"] == 0
    assert status["tier"] == "none" and status["k"] == 1
    html = report.read_text()
    first = " ".join(html[html.index("<h2>In plain words</h2>"):
                          html.index("<h2>Summary</h2>")].split())
    assert "band (richness 0.83, no one unique, every value shared by at least 139)" in first
    assert not re.search(r"band \(richness [0-9.]+, [^)]*DO NOT PUBLISH", first)
    assert "identify people on their own: status (richness 0.00, under 1% of people unique, " \
           "DO NOT PUBLISH)" in first
    recs = {tuple(r["target"]): r for r in doc["recommendations"]}
    assert "does not identify anyone on its own" in recs[("band",)]["reason"]
    assert recs[("status",)]["action"] == "generalize"
    assert "rarest value is held by 1 record" in recs[("status",)]["reason"]


def test_assess_directory_reads_one_table_and_names_a_foreign_file(tmp_path, capsys):
    """Issue 23: `assess DIR` read every Parquet file under the tree and ended in `internal
    error` (exit 1) on a foreign file. Now: files in DIR and in key=value partition folders
    only; a foreign file is a one-line error naming it (exit 2)."""
    import numpy as np
    import pandas as pd

    gen = np.random.default_rng(1)
    table = pd.DataFrame({"age": gen.integers(18, 90, 300), "sex": gen.choice(["F", "M"], 300)})
    folder = tmp_path / "dataset"
    for year, part in (("2024", table.iloc[:150]), ("2025", table.iloc[150:])):
        (folder / f"year={year}").mkdir(parents=True)
        part.to_parquet(folder / f"year={year}" / "part-0.parquet")
    (folder / "other").mkdir()  # a foreign table kept beside it: not part of this one
    pd.DataFrame({"x": [1.5, 2.5]}).to_parquet(folder / "other" / "x.parquet")
    code = main(["assess", str(folder), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out)["rows_used"] == 300
    pd.DataFrame({"x": [1.5, 2.5]}).to_parquet(folder / "year=2025" / "foreign.parquet")
    code = main(["assess", str(folder), "--json"])
    out = capsys.readouterr()
    assert code == 2
    lines = [ln for ln in out.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: DATA: ") and "foreign.parquet" in \
        lines[0], out.err
