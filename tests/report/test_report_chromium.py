"""Reports in headless Chromium: the first page fits one screen, no text overlaps, PDF export.

Layout is measured inside Chromium: a script appended to a copy of the page records the plain
summary's bottom edge and every pair of overlapping text boxes into the DOM, which
`--dump-dom` returns. A screenshot of the first screen is checked not to be blank.
"""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest

from privlab.report.pdf import browser_command, export_pdf, find_browser

CHROMIUM = find_browser()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium; "
    "scripts/ci-chromium.sh installs it in CI)")
WIDTH, HEIGHT = 1280, 900
LAYOUT_JS = """
<script>
(function () {
  const sel = 'h1, h2, p, nav a, th, td, dt, dd, figcaption, caption, li';
  const els = [...document.querySelectorAll(sel)].filter(e => e.textContent.trim());
  const boxes = els.map(e => [e, e.getBoundingClientRect()])
                   .filter(([e, r]) => r.width > 0 && r.height > 0);
  const clash = [];
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, ra] = boxes[i], [b, rb] = boxes[j];
      if (a.contains(b) || b.contains(a)) continue;
      const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
      const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
      if (w > 2 && h > 2) clash.push([a.textContent.trim().slice(0, 40),
                                      b.textContent.trim().slice(0, 40)]);
    }
  }
  const s = document.getElementById('summary');
  const out = {summary_bottom: s ? s.getBoundingClientRect().bottom : null,
               viewport: window.innerHeight, overlaps: clash.slice(0, 20)};
  const pre = document.createElement('pre');
  pre.id = 'layout-report';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def _layout(page, tmp_path) -> dict:
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", LAYOUT_JS + "</body>"))
    cmd = [*browser_command(CHROMIUM, tmp_path / "profile"), f"--window-size={WIDTH},{HEIGHT}",
           "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()]
    dom = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120).stdout
    m = re.search(r'<pre id="layout-report">(.*?)</pre>', dom, re.S)
    assert m, "the layout probe did not run"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def _screenshot(page, tmp_path):
    from matplotlib.image import imread

    shot = tmp_path / "first-screen.png"
    subprocess.run([*browser_command(CHROMIUM, tmp_path / "profile2"),
                    f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    img = imread(shot)
    assert img.shape[:2] == (HEIGHT, WIDTH)
    assert float(np.std(img[..., :3])) > 0.05  # not blank
    # the header band (#1f3b57) is at the top: the page starts where a reader looks first
    assert np.allclose(img[5, 5, :3], [0x1F / 255, 0x3B / 255, 0x57 / 255], atol=0.05)


def _choose_epsilon_report(tmp_path):
    from privlab.risk import decide, fit_curves, make_policy, prior_sensitivity
    from privlab.risk.pipeline import ChooseResult, PipelineConfig, Sweep
    from privlab.risk.report import write_report
    from privlab.risk.simulate import simulator
    from privlab.risk.uncertainty import choice_uncertainty

    grid = [0.5, 1, 2, 4, 8, 16]
    ev = simulator(seed=2)
    evs = [ev(e) for e in grid]
    pol = make_policy("finance")
    curves = fit_curves(evs, level=pol.level, n_draws=500)
    unc = choice_uncertainty(curves, [e.accuracy for e in evs], pol, n_draws=500)
    info = {"rows": 1000, "target": "salary", "class_counts": {"0": 750, "1": 250},
            "features_encoded": 104, "split": {"target_train": 300, "test": 300,
                                               "attacker_pool": 400}}
    doc = ChooseResult(decide(curves, pol), Sweep(evs, {}, None, len(evs)),
                       PipelineConfig(epsilons=grid), info,
                       prior_sensitivity(evs, pol, n_draws=200), [], grid, grid, 0.0,
                       unc).to_dict()
    return write_report(doc, tmp_path / "choose.html", source="a simulated table")


def test_choose_epsilon_report_first_page_fits_one_screen_without_overlaps(tmp_path):
    page = _choose_epsilon_report(tmp_path)
    lay = _layout(page, tmp_path)
    assert lay["overlaps"] == []
    assert lay["summary_bottom"] is not None and lay["summary_bottom"] <= lay["viewport"]
    _screenshot(page, tmp_path)
    html = page.read_text()
    assert "In plain words" in html and "How sure we are" in html


def _fake_choice(frame, epsilons, out, seed, show):
    """What the demo's epsilon step returns, without training (layout only)."""
    g = {"epsilon": 2.0, "delta": 1e-5, "accountant": "PLD (dp-accounting)"}
    return {"chosen_epsilon": 2.0, "interval": [1.0, 8.0], "argmin_epsilon": 4.0,
            "reason": "epsilon 4 has the lowest expected loss, but epsilon 2 is within one "
                      "standard error of it",
            "prob_best": {"1": 0.07, "2": 0.43, "4": 0.19, "8": 0.31},
            "prob_recommended": {"1": 0.2, "2": 0.5, "4": 0.3, "8": 0.0},
            "notes": ["every membership attack was at chance (...)"],
            "models_per_epsilon": 8, "policy": "finance", "attacks": ["loss", "shadow", "lira"],
            "rows": 5799, "report": str(out / "choose_epsilon.html"),
            "per_epsilon": [{"epsilon": e, "accuracy": 0.8, "risk_mean": 0.01,
                             "risk_upper": 0.02, "guarantee": {**g, "epsilon": e}}
                            for e in (1.0, 2.0, 4.0, 8.0)]}


def test_demo_report_first_page_fits_one_screen_without_overlaps(tmp_path, capsys,
                                                                 monkeypatch):
    from privlab.cli import demo
    from privlab.cli.main import main

    # the full section list, including the long "Choosing epsilon (...)" title in the nav bar
    # (a nav link broken over two lines once overlapped its neighbours)
    monkeypatch.setattr(demo, "_choose_epsilon_step", _fake_choice)
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--seed", "1", "--json"]) == 0
    capsys.readouterr()
    page = out / "report.html"
    lay = _layout(page, tmp_path)
    assert lay["overlaps"] == []
    assert lay["summary_bottom"] is not None and lay["summary_bottom"] <= lay["viewport"]
    _screenshot(page, tmp_path)
    html = page.read_text()
    assert "DO NOT PUBLISH" in html and "Choosing epsilon (audit" in html
    assert "a re-run with other random seeds would recommend an epsilon from 1 to 8" in html


def test_pdf_export(tmp_path):
    page = _choose_epsilon_report(tmp_path)
    pdf = export_pdf(page, tmp_path / "choose.pdf")
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF") and len(data) > 20_000  # text plus three figures
