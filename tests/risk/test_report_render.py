"""The report renders in headless Chromium: screenshot, DOM with the key elements."""

import json
import shutil
import subprocess
from importlib import resources

import jsonschema
import numpy as np
import pytest

from privlab.risk import decide, fit_curves, make_policy, prior_sensitivity
from privlab.risk.pipeline import ChooseResult, PipelineConfig, Sweep
from privlab.risk.report import write_report
from privlab.risk.simulate import simulator

GRID = [0.25, 0.5, 1, 2, 4, 8, 16, 32]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def simulated_doc(policy: str = "finance", **kw) -> dict:
    ev = simulator(seed=2)
    evs = [ev(e) for e in GRID]
    pol = make_policy(policy, **kw)
    d = decide(fit_curves(evs, level=pol.level, n_draws=1000), pol)
    info = {"rows": 1000, "target": "y", "class_counts": {"0": 500, "1": 500},
            "features_encoded": 10, "split": {"target_train": 300, "test": 300,
                                              "attacker_pool": 400}}
    sens = prior_sensitivity(evs, pol, n_draws=500)
    r = ChooseResult(d, Sweep(evs, {}, None, len(evs)), PipelineConfig(epsilons=GRID), info,
                     sens, ["simulated measurements (privlab.risk.simulate)"], GRID, GRID, 0.0)
    return r.to_dict()


def test_simulated_document_validates():
    s = json.loads(resources.files("privlab.risk").joinpath(
        "schema/choose_epsilon.schema.json").read_text())
    for pol, kw in (("medical", {}), ("recommender", {}), ("medical", {"max_risk": 0.0})):
        doc = simulated_doc(pol, **kw)
        jsonschema.validate(doc, s)
    assert doc["chosen_epsilon"] is None  # cap 0: nothing acceptable, still a valid document


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed "
                    "(apt-get install chromium) - the render test needs /usr/bin/chromium")
def test_report_renders_in_headless_chromium(tmp_path):
    doc = simulated_doc("medical")
    page = write_report(doc, tmp_path / "report.html")
    shot = tmp_path / "shot.png"
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}"]
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1200,2400",
                    page.as_uri()], check=True, capture_output=True, timeout=90)
    from matplotlib.image import imread

    img = imread(shot)
    assert img.shape[0] >= 2000 and img.shape[1] >= 1100
    assert float(np.std(img[..., :3])) > 0.05  # not a blank page
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], check=True,
                         capture_output=True, text=True, timeout=90).stdout
    for anchor in ("answer", "curves", "per-epsilon", "guarantee-and-accountant",
                   "prior-sensitivity", "data"):
        assert f'id="{anchor}"' in dom
    assert dom.count("<img") == 3 and "data:image/png;base64," in dom
    assert f"Use epsilon = {doc['chosen_epsilon']:g}" in dom
