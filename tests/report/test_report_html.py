"""The shared HTML report helper and the assess report built on it."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

from privlab.assess import assess
from privlab.assess.report import write_assessment_report
from privlab.core.guarantee import PrivacyGuarantee
from privlab.report import (
    Image,
    Section,
    Table,
    bar_chart,
    fmt,
    line_chart,
    pct,
    render_html,
    write_page,
)


def test_bar_chart_is_a_png_data_uri():
    uri = bar_chart(["a", "b", "c"], [0.1, 0.5, 0.9], categories=["none", "low", "hide"],
                    hlines=[(0.3, "low")])
    assert uri.startswith("data:image/png;base64,")
    assert base64.b64decode(uri.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert line_chart([1, 2, 3], {"x": [1, 2, 3]}).startswith("data:image/png;base64,")


def test_write_page_sections_escaping_and_atomicity(tmp_path):
    path = tmp_path / "r.html"
    sections = [
        Section("In plain words", paragraphs=["<script>alert(1)</script>"],
                facts={"rows": 1234, "share": 0.5},
                tables=[Table(["name", "value", "tier"], [["x", 0.123456, "hide"],
                                                         {"name": "y", "value": 2, "tier": "low"}],
                              caption="cap", highlight=[1])],
                images=[Image(bar_chart(["a"], [1.0]), "alt text", "a caption")],
                items=["one", "two"]),
        Section("Second part"),
    ]
    write_page(path, "My report", sections, subtitle="sub", exact_values=None,
               guarantee=PrivacyGuarantee.not_private("m", "because"))
    html = path.read_text()
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert '<section id="in-plain-words">' in html and '<a href="#second-part">' in html
    assert "0.123" in html and "1,234" in html and 'class="highlight"' in html
    assert 'class="tier-hide"' in html and "NOT differentially private" in html
    assert "data:image/png;base64," in html and "a caption" in html
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")] == []


def test_every_report_opens_with_in_plain_words(tmp_path):
    """Issue 23: the shared page refuses a report whose first section is not "In plain
    words", so no report (assess, audit, choose-epsilon, synth, demo) can lose it."""
    with pytest.raises(ValueError, match="In plain words"):
        write_page(tmp_path / "r.html", "R", [Section("Summary"), Section("In plain words")],
                   exact_values=None)
    with pytest.raises(ValueError, match="In plain words"):
        write_page(tmp_path / "r.html", "R", [], exact_values=None)
    assert not (tmp_path / "r.html").exists()


def test_fmt_and_pct():
    assert fmt(1234567) == "1,234,567" and fmt(0.5) == "0.500" and fmt(float("inf")) == "inf"
    assert fmt(1e-7) == "1.00e-07" and fmt(None) == "" and fmt([1, 2]) == "1, 2"
    assert pct(0.1234) == "12.3%" and pct(1e-6) == "<0.1%"


def test_assessment_report_has_key_sections(tmp_path):
    frame = pd.DataFrame({"id": range(60), "sex": ["F", "M"] * 30,
                          "marital": ["single", "married", "widowed"] * 20,
                          "age": [20 + i % 7 for i in range(60)],
                          "dx": ["a", "b", "c", "d"] * 15})
    result = assess(frame, quasi_identifiers=["sex", "age"], sensitive="dx")
    path = write_assessment_report(result, tmp_path / "assess.html")
    html = path.read_text()
    for heading in ("Summary", "Domain richness", "Risky combinations", "Privacy models",
                    "Recommendations"):
        assert f"<h2>{heading}</h2>" in html
    assert html.count("data:image/png;base64,") == 2  # richness chart + combinations chart
    assert "Re-identification risk" in html and "drop" in html  # id is an identifier


def test_every_page_must_say_whether_it_shows_exact_values(tmp_path):
    """Issue 29, item 7: the NOT-DP banner is part of the shared writer, driven by a
    required `exact_values`, so no report can forget it; a page of DP values has none."""
    page = [Section("In plain words", paragraphs=["p"])]
    with pytest.raises(TypeError, match="exact_values"):
        write_page(tmp_path / "r.html", "R", page)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="exact_values"):
        render_html("page.html.j2", title="R", sections=page)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="exact_values"):
        write_page(tmp_path / "r.html", "R", page, exact_values=" ")
    exact = write_page(tmp_path / "exact.html", "R", page, exact_values="member counts").read_text()
    assert 'id="not-dp"' in exact and "member counts" in exact
    assert "NOT differentially private: this page shows exact values" in exact
    dp = write_page(tmp_path / "dp.html", "R", page, exact_values=None).read_text()
    assert 'id="not-dp"' not in dp


def test_choose_epsilon_and_assessment_reports_carry_the_not_dp_banner(tmp_path):
    """Regression (issue 29, item 7): `choose-epsilon --report` showed exact accuracies,
    attack successes and AUCs with no "not differentially private" banner."""
    from privlab.risk.report import write_report

    sys.path.insert(0, str(Path(__file__).parents[1] / "risk"))
    from test_report_render import simulated_doc

    html = write_report(simulated_doc("medical"), tmp_path / "choose.html").read_text()
    assert 'id="not-dp"' in html and "accuracies" in html.split('id="not-dp"')[1][:600]
    frame = pd.DataFrame({"sex": ["F", "M"] * 30, "age": [20 + i % 7 for i in range(60)]})
    page = write_assessment_report(assess(frame, quasi_identifiers=["sex", "age"]),
                                   tmp_path / "assess.html").read_text()
    assert 'id="not-dp"' in page
