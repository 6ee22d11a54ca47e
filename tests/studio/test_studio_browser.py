"""privlab studio end to end in headless Chromium (Playwright, the system's Chromium; no
browser download): review a schema draft, run an assessment, release a DP mean and watch the
ledger go down, generate and download a synthetic table, verify a gateway's audit log and see
a tampered one flagged; keyboard-only use and labelled controls; the actions from start to a
downloaded DP release are counted (at most 9). And the attacks of issue #30: a page on
another port of 127.0.0.1 planting cookies and posting a form, and a local user without
the token.

Skips unless PRIVLAB_TEST_CHROMIUM=1 (CI sets it; scripts/ci-chromium.sh installs Chromium).
With PRIVLAB_STUDIO_SCREENSHOTS=DIR the screenshots are also copied there (docs/studio/)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gw_fixtures import serve_on_loopback
from studio_helpers import Actions, gateway_config, tamper_audit

if os.environ.get("PRIVLAB_TEST_CHROMIUM") != "1":
    pytest.skip("browser tests need PRIVLAB_TEST_CHROMIUM=1 and Chromium "
                "(scripts/ci-chromium.sh installs it)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="the browser tests need playwright (pip install "
                                      "'privlab[dev]'; no browser download: the system "
                                      "Chromium is used)")

from privlab.report.pdf import find_browser  # noqa: E402
from privlab.studio import StudioConfig, create_app  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
MAX_ACTIONS = 9  # DP Wizard 0.10 needed 9 (4 entries, 5 clicks)
SHOTS = os.environ.get("PRIVLAB_STUDIO_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    exe = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else find_browser()
    if exe is None:
        pytest.fail("PRIVLAB_TEST_CHROMIUM=1 but no Chromium found")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(exe), args=CHROMIUM_ARGS)
        yield b
        b.close()


#: The access token of each live studio, by URL (what `privlab studio` prints).
TOKENS: dict[str, str] = {}


@pytest.fixture
def studio(workspace: Path, tmp_path: Path, request: pytest.FixtureRequest
           ) -> Iterator[tuple[str, Path]]:
    """A live studio on a free loopback port; with a gateway config for the gateway test."""
    gw = gateway_config(tmp_path / "gw") if "gateway" in request.node.name else None
    app = create_app(StudioConfig(workspace=workspace, gateway_config=gw))
    with serve_on_loopback(app) as url:
        TOKENS[url] = app.state.config.token
        yield url, tmp_path / "gw"


def log_in(page: Any, url: str) -> None:
    """Open the printed URL (with the token) once: the browser keeps the access cookie and
    the token leaves the address bar."""
    token = TOKENS[url]
    page.goto(f"{url}/?token={token}" if token else url)  # (a --no-token studio: none)
    assert "token=" not in page.url


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A browser page; logged in to the test's studio when it has one."""
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    if "studio" in request.fixturenames:
        log_in(pg, request.getfixturevalue("studio")[0])
    yield pg
    context.close()


def shot(page: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    assert path.stat().st_size > 10_000  # a rendered page, not a blank one
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(SHOTS) / path.name)


def budget_left(page: Any) -> float:
    return float(page.inner_text("#budget-left strong").split("=")[1])


def test_dp_mean_release_in_at_most_nine_actions(page: Any, studio: tuple[str, Path],
                                                 tmp_path: Path) -> None:
    url, _ = studio
    page.goto(url)
    act = Actions(page)
    act.click("#use-adult")
    assert budget_left(page) == 10.0
    act.select("#statistic", "mean")
    act.select("#column", "age")
    act.fill("#epsilon", "0.5")
    act.fill("#expected_rows", "30000")
    act.click("#preview")
    assert "Budget split" in page.inner_text("main")
    assert "0.25" in page.inner_text(".preview table")  # half to the sum, half to the count
    assert budget_left(page) == 10.0  # the preview spent nothing
    page.evaluate("document.getElementById('h-preview').scrollIntoView()")
    shot(page, tmp_path, "protect-preview")
    act.click("#release")
    assert budget_left(page) == 9.5  # the ledger went down by the release's epsilon
    mean = float(page.inner_text("#released-value"))
    assert 17 <= mean <= 90
    shot(page, tmp_path, "release-result")
    with page.expect_download() as download:
        act.click("#download-package")
    archive = tmp_path / "package.zip"
    download.value.save_as(archive)
    names = zipfile.ZipFile(archive).namelist()
    assert any(n.endswith("/release.json") for n in names)
    assert any(n.endswith("/reproduce.py") for n in names)
    assert act.n <= MAX_ACTIONS, f"{act.n} actions from start to a downloaded release"
    # the shortest path: the defaults (mean of age at epsilon 1) need 3 actions
    page.goto(url)
    short = Actions(page)
    short.click("#use-adult")
    short.click("#release")
    with page.expect_download():
        short.click("#download-package")
    assert short.n == 3 and budget_left(page) == 8.5


def test_review_a_schema_draft(page: Any, studio: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = studio
    page.goto(url)
    page.select_option("#ws-path", "people.csv")
    page.click("#use-file")
    page.click("#draft")
    assert page.locator(".badge.private").count() >= 5  # every drawn value flagged
    shot(page, tmp_path, "schema-draft")
    page.fill("#c0_lo", "0")
    page.fill("#c0_hi", "120")
    page.select_option("#c3_type", "integer")  # drafted as an identifier: all distinct
    page.fill("#c3_lo", "0")
    page.fill("#c3_hi", "5000")
    page.click("#save-schema")
    assert "review every column before saving" in page.inner_text(".messages")
    assert page.input_value("#c0_hi") == "120"  # the edits are kept
    for i in range(4):
        page.check(f"#c{i}_reviewed")
    page.click("#save-schema")
    assert "reviewed schema saved" in page.inner_text(".messages")
    assert page.url.endswith("/protect")
    page.goto(url + "/schema")
    assert "public" in page.inner_text("main") and "0 to 120" in page.inner_text("main")


def test_run_an_assessment(page: Any, studio: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = studio
    page.goto(url)
    page.click("#use-adult")
    page.click("nav >> text=Assess")
    page.fill("#quasi_identifiers", "age, sex, race")
    page.click("#run-assess")
    main = page.inner_text("main")
    assert "In plain words" in main and "k-anonymity" in main and "DO NOT PUBLISH" in main
    assert page.locator("#results img").count() >= 2  # the charts
    page.locator("#sec-plain-words").scroll_into_view_if_needed()
    shot(page, tmp_path, "assess")


def test_generate_and_download_a_synthetic_table(page: Any, studio: tuple[str, Path],
                                                 tmp_path: Path) -> None:
    url, _ = studio
    page.goto(url)
    page.click("#use-adult")
    page.goto(url + "/synth")
    page.select_option("#method", "mst")
    for box in page.locator("input[type=checkbox][name=columns]").all():
        box.uncheck()
    for name in ("age", "sex", "race", "salary"):
        page.check(f"input[type=checkbox][name=columns][value={name}]")
    page.fill("#s-rows", "200")
    page.fill("#s-expected", "30000")
    page.click("#preview-synth")
    assert "4 one-way marginals" in page.inner_text(".preview")
    assert "Expected total-variation distance" in page.inner_text(".preview")
    assert budget_left(page) == 10.0  # the preview spent nothing
    page.evaluate("document.getElementById('h-synth-preview').scrollIntoView()")
    shot(page, tmp_path, "synth-preview")
    page.click("#start-synth")
    assert budget_left(page) == 9.0  # charged before the job started
    page.wait_for_selector("#download-synthetic-csv", timeout=60_000)
    assert "(1, delta=1e-06)-DP" in page.inner_text("main")
    shot(page, tmp_path, "synth-done")
    with page.expect_download() as download:
        page.click("#download-synthetic-csv")
    path = tmp_path / "synthetic.csv"
    download.value.save_as(path)
    lines = path.read_text().splitlines()
    assert lines[0] == "age,race,sex,salary"  # schema order and len(lines) == 201


def test_verify_a_gateway_audit_log(page: Any, studio: tuple[str, Path],
                                    tmp_path: Path) -> None:
    url, folder = studio
    page.goto(url + "/gateway")
    assert "row-level reads are refused" in page.inner_text("main")
    page.click("#verify-audit")
    assert page.inner_text("#audit-status").startswith("Intact: 4 rows")
    tamper_audit(folder, "UPDATE privlab_gateway_audit SET analyst = 'mallory' WHERE seq = 3")
    page.click("#verify-audit")
    status = page.inner_text("#audit-status")
    assert "TAMPERED" in status and "audit row 3" in status
    shot(page, tmp_path, "gateway-tampered")


def _unlabelled(page: Any) -> list[str]:
    return page.evaluate("""() => [...document.querySelectorAll('input, select, textarea')]
        .filter(e => e.type !== 'hidden')
        .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
        .map(e => e.name || e.id)""")


def test_keyboard_only_and_labelled_controls(page: Any, studio: tuple[str, Path]) -> None:
    url, _ = studio
    page.goto(url)

    def tab_to(selector: str, limit: int = 80) -> None:
        target = page.locator(selector)
        for _ in range(limit):
            page.keyboard.press("Tab")
            if target.evaluate("e => e === document.activeElement"):
                outline = page.evaluate(
                    "getComputedStyle(document.activeElement).outlineStyle")
                assert outline != "none", f"{selector} has no visible focus"
                return
        raise AssertionError(f"{selector} cannot be reached with Tab")

    tab_to("a.skip")  # the first stop skips the navigation
    tab_to("#use-adult")
    page.keyboard.press("Enter")
    page.wait_for_url("**/protect")
    tab_to("#release")
    page.keyboard.press("Enter")
    page.wait_for_url("**/results/*")
    assert budget_left(page) == 9.0
    tab_to("#download-package")
    for path in ("/", "/schema", "/protect", "/assess", "/synth", "/model", "/choose",
                 "/results", "/gateway"):
        page.goto(url + path)
        assert _unlabelled(page) == [], path
        assert page.locator("main h1").count() == 1, path
    page.goto(url + "/")
    page.select_option("#ws-path", "people.csv")
    page.click("#use-file")
    page.click("#draft")
    assert _unlabelled(page) == []


def test_two_browser_sessions_never_see_each_other(browser: Any, studio: tuple[str, Path]
                                                   ) -> None:
    url, _ = studio
    alice = browser.new_context().new_page()
    bob = browser.new_context().new_page()
    try:
        log_in(alice, url)
        log_in(bob, url)
        alice.goto(url)
        alice.click("#use-adult")
        alice.click("#release")
        result_url = alice.url
        assert "/results/" in result_url
        bob.goto(url)
        assert bob.locator(".context").count() == 0  # no data chosen in bob's session
        bob.goto(result_url)
        assert "No such release in this session" in bob.inner_text("main")
        bob.goto(url + "/results")
        assert "Nothing released in this session yet" in bob.inner_text("main")
    finally:
        alice.context.close()
        bob.context.close()


@contextlib.contextmanager
def attacker_site(pages: dict[str, tuple[list[tuple[str, str]], str]]) -> Iterator[str]:
    """A web server on another port of 127.0.0.1: path -> (headers, HTML body)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path not in pages:
                self.send_error(404)
                return
            headers, body = pages[self.path]
            self.send_response(200)
            for name, value in [("Content-Type", "text/html"), *headers]:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def attacker_session(url: str) -> tuple[dict[str, str], str]:
    """What an attacker gets from the studio without its token: on 524af6d a session and
    its CSRF token (no token on loopback); now nothing, so it forges them."""
    import httpx

    r = httpx.get(url + "/")
    found = re.search(r'name="csrf" value="([^"]+)"', r.text)
    if r.status_code == 200 and found:
        return dict(r.cookies), found.group(1)
    port = url.rsplit(":", 1)[1]  # the studio names its cookies after its port
    return {f"privlab_studio_session_{port}": "a" * 32 + "." + "b" * 32 + "." + "c" * 32,
            f"privlab_studio_csrf_{port}": "forged"}, "forged"


def test_a_page_on_another_port_cannot_plant_a_session_or_post(browser: Any,
                                                               studio: tuple[str, Path],
                                                               workspace: Path) -> None:
    """Cookies ignore ports: a page on 127.0.0.1:OTHER sets the studio's session and CSRF
    cookies (HttpOnly, from its server) to the attacker's and auto-submits a form. On
    524af6d the forged POST passed the double-submit check and the curator's next upload
    landed in the attacker's session. Now the form is refused (origin), the planted cookie
    is not a session issued for this token, and the attacker sees nothing."""
    url, _ = studio
    cookies, csrf = attacker_session(url)
    port = url.rsplit(":", 1)[1]
    plant = [("Set-Cookie", f"{name}={value}; Path=/; HttpOnly; SameSite=Strict")
             for name, value in cookies.items()]
    form = (f'<form method="post" action="{url}/data/select">'
            f'<input name="csrf" value="{csrf}"><input name="kind" value="bundled">'
            '<input name="name" value="census"></form>'
            "<script>document.forms[0].submit()</script>")
    curator = browser.new_context().new_page()
    try:
        log_in(curator, url)
        with attacker_site({"/": (plant, "<p>cute cats</p>"), "/go": ([], form)}) as evil:
            assert evil.rsplit(":", 1)[1] != port
            curator.goto(evil + "/")  # the planted cookies
            with curator.expect_response(lambda r: "/data/select" in r.url) as posted:
                curator.goto(evil + "/go")
            assert posted.value.status in (401, 403)
        # the curator goes on: an upload, in the curator's own session
        curator.goto(url + "/")
        if curator.locator("#upload-file, input[type=file]").count() == 0:
            log_in(curator, url)  # the planted cookies logged the curator out, nothing more
        curator.set_input_files("input[type=file]", files=[{
            "name": "mine.csv", "mimeType": "text/csv", "buffer": b"x,y\n1,2\n3,4\n"}])
        with curator.expect_navigation():  # the upload's page, not the one before it
            curator.locator("input[type=file]").evaluate("e => e.form.requestSubmit()")
        assert "mine.csv" in curator.inner_text("main")
        assert curator.locator(".context").count() == 0  # the forged choice (census) not made
        # the attacker, with the cookies it planted, sees nothing of it
        import httpx

        spy = httpx.get(url + "/", cookies=cookies)
        assert "mine.csv" not in spy.text
        planted_sid = next(v for k, v in cookies.items() if "session" in k).split(".")[0]
        assert not list(workspace.glob(f".privlab-studio/sessions/{planted_sid}/uploads/*"))
    finally:
        curator.context.close()


def test_a_local_user_without_the_token_gets_nothing(browser: Any, studio: tuple[str, Path],
                                                     workspace: Path) -> None:
    """Any local account can connect to 127.0.0.1: on 524af6d it could draft a 0600 file
    of the curator's workspace and see its categories. Without the token: 401, no data."""
    url, _ = studio
    (workspace / "secret.csv").write_text("code\nTOPSECRET\n", encoding="utf-8")
    other = browser.new_context().new_page()
    try:
        for path in ("/", "/schema", "/results", "/protect"):
            response = other.goto(url + path)
            assert response.status in (401, 403), path
            assert "secret.csv" not in other.content() and "people.csv" not in other.content()
        other.goto(url + "/?token=" + "x" * 43)
        assert "secret.csv" not in other.content()
        # a form posted from the studio's own origin, without the access cookie
        other.goto(url + "/static/studio.css")
        status = other.evaluate("""async () => {
            const body = new URLSearchParams({kind: 'workspace', path: 'secret.csv'});
            const r = await fetch('/data/select', {method: 'POST', body});
            const d = await fetch('/schema/draft', {method: 'POST', body});
            return [r.status, d.status, await d.text()];
        }""")
        assert status[0] in (401, 403) and status[1] in (401, 403)
        assert "TOPSECRET" not in status[2]
        assert not (workspace / ".privlab-studio" / "sessions").exists()
    finally:
        other.context.close()
