"""Issue 31 in headless Chromium (the system's, through Playwright): from the home page to a
downloaded analysis-plan package, count + mean of age + histogram of education on Adult at
epsilon 1 in total, in at most 10 counted actions (clicks, typed entries, choices in a list,
uploads); the package holds the three values, each with its guarantee, and a total epsilon
of 1, and the ledger was charged once, with epsilon 1.

Skips unless PRIVLAB_TEST_CHROMIUM=1, like tests/studio/test_studio_browser.py. With
PRIVLAB_STUDIO_SCREENSHOTS=DIR the preview's screenshot is copied there (docs/studio/)."""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gw_fixtures import serve_on_loopback
from studio_helpers import Actions

if os.environ.get("PRIVLAB_TEST_CHROMIUM") != "1":
    pytest.skip("browser tests need PRIVLAB_TEST_CHROMIUM=1 and Chromium "
                "(scripts/ci-chromium.sh installs it)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="the browser tests need playwright (pip install "
                                      "'privlab[dev]')")

from privlab.core.ledger import BudgetLedger  # noqa: E402
from privlab.report.pdf import find_browser  # noqa: E402
from privlab.studio import StudioConfig, create_app  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
#: Issue 31: at most 10 actions (DP Wizard 0.10: 15; the studio before the plan page: 40).
MAX_ACTIONS = 10


@pytest.fixture
def studio_page(workspace: Path) -> Iterator[tuple[Any, str, Path]]:
    """A page of a live studio, logged in once with the printed URL (not counted: the
    person opens the URL `privlab studio` prints), and the workspace."""
    exe = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else find_browser()
    if exe is None:
        pytest.fail("PRIVLAB_TEST_CHROMIUM=1 but no Chromium found")
    app = create_app(StudioConfig(workspace=workspace))
    with serve_on_loopback(app) as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(exe), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900},
                                      accept_downloads=True)
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{url}/?token={app.state.config.token}")
        assert "token=" not in page.url
        yield page, url, workspace
        browser.close()


def _run_and_download(page: Any, act: Actions, tmp_path: Path, shot: str) -> dict[str, Any]:
    """Screenshot the preview (when PRIVLAB_STUDIO_SCREENSHOTS names a folder), click "Run and
    download" (one action) and return the package's release.json."""
    shots = os.environ.get("PRIVLAB_STUDIO_SCREENSHOTS")
    if shots:
        page.evaluate("document.getElementById('h-preview').scrollIntoView()")
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / shot))
    with page.expect_download() as download:
        act.click("#run-plan")
    archive = tmp_path / "plan.zip"
    download.value.save_as(archive)
    with zipfile.ZipFile(archive) as zf:
        name = next(n for n in zf.namelist() if n.endswith("/release.json"))
        package: dict[str, Any] = json.loads(zf.read(name))
    return package


def test_a_plan_of_three_statistics_in_at_most_ten_actions(
        studio_page: tuple[Any, str, Path], tmp_path: Path) -> None:
    page, url, workspace = studio_page
    assert page.url.rstrip("/") == url.rstrip("/")  # the home page
    act = Actions(page)
    act.click("#plan-adult")
    assert page.url.endswith("/plan")
    act.select("#stat0", "count")
    act.select("#stat1", "mean")
    act.select("#col1", "age")
    act.select("#stat2", "histogram")
    act.select("#col2", "education")
    act.fill("#epsilon", "1")
    act.click("#preview")
    preview = page.inner_text("#plan-preview")
    assert preview.count("0.3333") == 3, preview  # equal weights: a third each
    assert "Total: (1)-DP" in page.inner_text("#plan-total")
    assert "All 3 released values together are (1)-DP" in page.inner_text("#plan-words")
    assert "ε = 10" in page.inner_text("#budget-left")  # the preview spent nothing
    package = _run_and_download(page, act, tmp_path, "plan-preview.png")
    assert act.n <= MAX_ACTIONS, f"{act.n} actions from the home page to the package"
    releases = package["releases"]
    assert [(r["statistic"], r["column"]) for r in releases] == [
        ("count", None), ("mean", "age"), ("histogram", "education")]
    assert all(r["value"] is not None and r["guarantee"]["is_dp"] for r in releases)
    assert [round(r["guarantee"]["epsilon"], 12) for r in releases] == [round(1 / 3, 12)] * 3
    assert len(releases[2]["value"]) == len(releases[2]["details"]["labels"]) == 16
    assert package["guarantee"]["epsilon"] == 1.0 and package["guarantee"]["delta"] == 0.0
    with BudgetLedger(str(workspace / ".privlab-studio" / "ledger.db")) as book:
        charges = [(e.epsilon, e.delta) for e in book.history("bundled:adult")]
    assert charges == [(1.0, 0.0)]  # charged once, with epsilon 1
    page.goto(url + "/plan")
    assert "ε = 9" in page.inner_text("#budget-left")


def test_a_mixed_by_group_plan_in_the_browser(studio_page: tuple[Any, str, Path],
                                              tmp_path: Path) -> None:
    """The optional choices: a Laplace count by sex beside a (default, with a delta:
    Gaussian) mean of age; the preview states the declared groups and the accountant (PLD),
    the package holds one count per declared sex."""
    page, url, workspace = studio_page
    act = Actions(page)
    act.click("#plan-adult")
    act.select("#stat0", "count")
    act.select("#by0", "sex")
    act.select("#mech0", "laplace")
    act.select("#stat1", "mean")
    act.select("#col1", "age")
    act.fill("#epsilon", "1")
    act.fill("#delta", "1e-6")
    act.click("#preview")
    preview = page.inner_text("#plan-preview")
    assert "by sex: 2 declared groups (Female, Male)" in preview, preview
    assert "in each group" in preview
    assert "accountant: PLD (dp-accounting" in page.inner_text("#plan-total")
    package = _run_and_download(page, act, tmp_path, "plan-preview-by-group.png")
    assert act.n <= MAX_ACTIONS
    count, mean = package["releases"]
    assert count["by"] == "sex" and list(count["value"]) == ["Female", "Male"]
    assert "by" not in mean and "gaussian" in mean["guarantee"]["mechanism"]
    assert package["guarantee"]["accountant"].startswith("PLD (dp-accounting")
    page.goto(url + "/results")
    assert "total ε = " in page.inner_text("#plan-packages")
