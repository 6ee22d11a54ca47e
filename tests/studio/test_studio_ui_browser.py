"""Issue 30, item 12, in headless Chromium (the system's, through Playwright): no page of the
studio makes Chromium fetch a missing resource (it logged a 404 for /favicon.ico), and a
too-large upload answers a page with the form's stated limit and a link back to the form.

Skips unless PRIVLAB_TEST_CHROMIUM=1, like tests/studio/test_studio_browser.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gw_fixtures import serve_on_loopback

if os.environ.get("PRIVLAB_TEST_CHROMIUM") != "1":
    pytest.skip("browser tests need PRIVLAB_TEST_CHROMIUM=1 and Chromium "
                "(scripts/ci-chromium.sh installs it)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="the browser tests need playwright (pip install "
                                      "'privlab[dev]')")

from privlab.report.pdf import find_browser  # noqa: E402
from privlab.studio import StudioConfig, create_app  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


@pytest.fixture
def chromium_page(workspace: Path) -> Iterator[tuple[Any, str, list[str]]]:
    """A page of a live studio (1 MB upload limit) and the list of failed fetches."""
    exe = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else find_browser()
    if exe is None:
        pytest.fail("PRIVLAB_TEST_CHROMIUM=1 but no Chromium found")
    app = create_app(StudioConfig(workspace=workspace, max_upload_bytes=2**20))
    failed: list[str] = []
    with serve_on_loopback(app) as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(exe), args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(20_000)
        page.goto(f"{url}/?token={app.state.config.token}")  # the printed URL, once
        page.on("response", lambda r: failed.append(f"{r.status} {r.url}")
                if r.status >= 400 and r.status != 413 else None)
        page.on("console", lambda m: failed.append(m.text)
                if m.type == "error" and "status of 413" not in m.text else None)
        yield page, url, failed
        browser.close()


def test_no_missing_favicon_and_a_way_back_from_a_too_large_upload(
        chromium_page: tuple[Any, str, list[str]], tmp_path: Path) -> None:
    page, url, failed = chromium_page
    for path in ("/", "/schema", "/protect", "/results"):
        page.goto(url + path)
        page.wait_for_load_state("networkidle")
    assert failed == [], failed  # /favicon.ico was a 404 here
    assert "at most 1 MB" in page.goto(url + "/").text()
    big = tmp_path / "big.csv"
    big.write_bytes(b"a\n" + b"1\n" * 2**20)  # 2 MB
    page.set_input_files("#upload-file", str(big))
    page.click("form[action='/data/upload'] button")
    page.wait_for_load_state("networkidle")
    assert "upload too large: the limit is 1 MB" in page.inner_text("main")
    page.click("#back")
    page.wait_for_load_state("networkidle")
    assert page.url.rstrip("/") == url.rstrip("/") and "Choose the data" in page.inner_text("h1")
    assert failed == [], failed
