"""The studio on a shared machine (issue #30, items 2-4), over HTTP (FastAPI TestClient): a
token always, exchanged once for a derived cookie and dropped from the URL; state-changing
requests from another origin refused; session cookies accepted only when issued for this
token; cookie-less traffic creating and evicting nothing; sessions and results surviving a
restart; state and uploads owner-only; a tampered session record never unpickled. The
same attacks in real Chromium: test_studio_browser.py."""

from __future__ import annotations

import os
import pickle
import re
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from studio_helpers import csrf_of, make_client

from privlab.studio import StudioConfig, create_app
from privlab.studio.sessions import MAX_AGE_S, STATE_FILE

BASE = "http://127.0.0.1:8765"
#: The cookies' names on this port (two studios on one machine keep theirs apart).
SESSION_COOKIE = "privlab_studio_session_8765"
TOKEN_COOKIE = "privlab_studio_token_8765"


def released(client: Any) -> str:
    """Select Adult and release its mean age; the release's id."""
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
    page = client.post("/protect/release", data={"csrf": csrf, "statistic": "mean",
                                                 "column": "age", "epsilon": "1"}).text
    return re.search(r"/results/([0-9a-f]+)/", page).group(1)


def test_without_the_token_nothing_is_served_and_no_session_is_made(workspace: Path) -> None:
    """Also on loopback (any local account can connect to 127.0.0.1): a request without the
    token gets 401, no data, no cookie; the token is exchanged once for a cookie derived
    from it, and a redirect drops it from the address bar."""
    app = create_app(StudioConfig(workspace=workspace))
    token = app.state.config.token
    stranger = TestClient(app, base_url=BASE)
    for method, path in (("GET", "/"), ("GET", "/results"), ("GET", "/schema"),
                         ("POST", "/data/select"), ("POST", "/schema/draft"),
                         ("GET", "/?token=" + "x" * 43), ("POST", f"/data/select?token={token}")):
        r = stranger.request(method, path, data={"kind": "workspace", "path": "people.csv"})
        assert r.status_code == 401, (method, path)
        assert "people.csv" not in r.text and "set-cookie" not in r.headers, (method, path)
    assert not (workspace / ".privlab-studio" / "sessions").exists()
    r = stranger.get(f"/protect?token={token}&statistic=count", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/protect?statistic=count"
    cookies = r.headers.get_list("set-cookie")
    auth = next(c for c in cookies if c.startswith(TOKEN_COOKIE + "="))
    assert "HttpOnly" in auth and "SameSite=strict" in auth and token not in auth
    assert any(c.startswith(SESSION_COOKIE + "=") for c in cookies)
    assert stranger.get("/").status_code == 200 and "people.csv" in stranger.get("/").text
    # a script may send the token as a header instead
    assert TestClient(app, base_url=BASE).get("/", headers={"X-Privlab-Token": token}
                                               ).status_code == 200


def test_state_changing_requests_from_another_origin_are_refused(workspace: Path) -> None:
    """A page on another port of 127.0.0.1 is same-site: SameSite=Strict cookies go with
    its forms. Only the origin tells it apart."""
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    form = {"csrf": csrf, "kind": "bundled", "name": "adult"}
    for headers in ({"Origin": "http://127.0.0.1:9999"}, {"Origin": "http://localhost:8765"},
                    {"Origin": "null"}, {"Sec-Fetch-Site": "same-site"},
                    {"Sec-Fetch-Site": "cross-site", "Origin": "http://127.0.0.1:8765"}):
        r = client.post("/data/select", data=form, headers=headers)
        assert r.status_code == 403 and "another web page" in r.text, headers
        assert "Data: <strong>" not in client.get("/").text  # nothing was selected
    # the studio's own forms: Chromium sends Origin: null under Referrer-Policy: no-referrer
    for headers in ({"Origin": "http://127.0.0.1:8765"},
                    {"Origin": "null", "Sec-Fetch-Site": "same-origin"}):
        assert client.post("/data/select", data=form, headers=headers).status_code == 200


def test_a_session_cookie_not_issued_for_this_token_is_ignored(workspace: Path,
                                                               tmp_path: Path) -> None:
    app = create_app(StudioConfig(workspace=workspace))
    alice = make_client(app)
    rid = released(alice)
    sid = alice.cookies.get(SESSION_COOKIE).split(".")[0]
    bob = make_client(app)
    # forged signatures, a bare id, and a cookie signed by another workspace's studio
    other_ws = tmp_path / "other"
    other_ws.mkdir()
    other = make_client(StudioConfig(workspace=other_ws))
    other_sid_cookie = other.cookies.get(SESSION_COOKIE)
    for value in (f"{sid}.{'0' * 32}.{'0' * 32}", sid, other_sid_cookie,
                  other_sid_cookie.replace(other_sid_cookie.split(".")[0], sid)):
        bob.cookies.set(SESSION_COOKIE, value, domain="127.0.0.1")
        assert bob.get(f"/results/{rid}").status_code == 404
    # the same workspace restarted under a new token: alice's cookies are the old token's
    restarted = create_app(StudioConfig(workspace=workspace))
    stale = TestClient(restarted, base_url=BASE, cookies=dict(alice.cookies))
    assert stale.get(f"/results/{rid}").status_code == 401  # the access cookie is stale
    # a cookie of a --no-token launch is never taken over by a token's exchange
    loose = make_client(StudioConfig(workspace=workspace, no_token=True))
    released(loose)
    planted = TestClient(restarted, base_url=BASE,
                         cookies={SESSION_COOKIE: loose.cookies.get(SESSION_COOKIE)})
    planted.get("/", params={"token": restarted.state.config.token})
    assert "Data: <strong>" not in planted.get("/").text


def test_cookieless_traffic_neither_creates_nor_evicts_sessions(workspace: Path) -> None:
    """An <img> loop on any web page used to push out the curator's session past 1,000 new
    ones (results in memory only, a running job killed). Now a request without cookies
    stores nothing, and only age or the owner removes a session."""
    for options in ({}, {"no_token": True}):
        app = create_app(StudioConfig(workspace=workspace, **options))
        alice = make_client(app)
        rid = released(alice)
        sessions = workspace / ".privlab-studio" / "sessions"
        before = sorted(p.name for p in sessions.iterdir()) if sessions.is_dir() else []
        flood = TestClient(app, base_url=BASE)
        for _ in range(1100):
            flood.cookies.clear()
            flood.get("/results")
        assert alice.get(f"/results/{rid}").status_code == 200  # still there
        assert sorted(p.name for p in sessions.iterdir()) == before
        assert len(app.state.store.all()) == len(before)


def test_sessions_and_results_survive_a_restart(workspace: Path) -> None:
    token = "the-same-token-0123456789"
    alice = make_client(StudioConfig(workspace=workspace, token=token))
    rid = released(alice)
    csrf = csrf_of(alice)
    files = {"file": ("mine.csv", b"x,y\n1,2\n3,4\n", "text/csv")}
    assert alice.post("/data/upload", data={"csrf": csrf}, files=files).status_code == 200
    # the same token (--token-file): the browser's cookies still work
    again = TestClient(create_app(StudioConfig(workspace=workspace, token=token)),
                       base_url=BASE, cookies=dict(alice.cookies))
    assert again.get(f"/results/{rid}").status_code == 200
    assert again.get(f"/results/{rid}/privlab-release-{rid}.zip").status_code == 200
    assert "mine.csv" in again.get("/").text
    # a new random token: the browser opens the new URL and takes its session back
    fresh = create_app(StudioConfig(workspace=workspace))
    back = TestClient(fresh, base_url=BASE, cookies=dict(alice.cookies))
    assert back.get("/", params={"token": fresh.state.config.token}).status_code == 200
    assert back.get(f"/results/{rid}").status_code == 200
    assert rid in back.get("/results").text


def test_sessions_go_by_age_or_on_request_only(workspace: Path) -> None:
    app = create_app(StudioConfig(workspace=workspace))
    alice, bob, carol = make_client(app), make_client(app), make_client(app)
    for client in (alice, bob, carol):
        released(client)
    sessions = workspace / ".privlab-studio" / "sessions"
    folder = {name: sessions / c.cookies.get(SESSION_COOKIE).split(".")[0]
              for name, c in (("alice", alice), ("bob", bob), ("carol", carol))}
    old = time.time() - MAX_AGE_S - 60
    os.utime(folder["alice"] / STATE_FILE, (old, old))
    # carol deletes hers: its folder goes, and her next visit starts an empty session
    r = carol.post("/session/forget", data={"csrf": csrf_of(carol)})
    assert r.status_code == 200 and "Nothing released" in carol.get("/results").text
    assert not folder["carol"].exists()
    store = create_app(StudioConfig(workspace=workspace)).state.store  # a restart
    assert [s.sid for s in store.all()] == [folder["bob"].name]  # alice's was too old
    assert not folder["alice"].exists() and folder["bob"].exists()


def test_state_and_uploads_are_owner_only(workspace: Path) -> None:
    """Uploads and state were world-readable (drwxr-xr-x, -rw-r--r--); an older studio's
    state folder is taken to owner-only at start."""
    state = workspace / ".privlab-studio"
    state.mkdir(mode=0o755)
    (state / "sessions").mkdir(mode=0o755)
    (state / "sessions" / "left.csv").write_text("a\n1\n", encoding="utf-8")
    os.chmod(state / "sessions" / "left.csv", 0o644)
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    files = {"file": ("mine.csv", b"x,y\n1,2\n", "text/csv")}
    assert client.post("/data/upload", data={"csrf": csrf}, files=files).status_code == 200
    (upload,) = state.rglob("mine.csv")
    session = upload.parent.parent

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    for folder in (state, state / "sessions", session, upload.parent):
        assert mode(folder) == 0o700, folder
    for path in (upload, session / STATE_FILE, state / "cookie.key",
                 state / "sessions" / "left.csv"):
        assert mode(path) == 0o600, path


def test_a_tampered_session_record_is_never_unpickled(workspace: Path) -> None:
    """The session records are pickles: they are read back only when their HMAC (the
    workspace's cookie key) matches, so a planted record cannot run code."""
    app = create_app(StudioConfig(workspace=workspace))
    alice = make_client(app)
    released(alice)
    (record,) = (workspace / ".privlab-studio" / "sessions").glob(f"*/{STATE_FILE}")
    marker = workspace / "PWNED"

    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (marker.touch, ())

    mac = record.read_bytes().partition(b"\n")[0]
    record.write_bytes(mac + b"\n" + pickle.dumps(Boom()))
    restarted = TestClient(create_app(StudioConfig(workspace=workspace,
                                                   token=app.state.config.token)),
                           base_url=BASE, cookies=dict(alice.cookies))
    assert "Nothing released in this session yet" in restarted.get("/results").text
    assert not marker.exists()


@pytest.mark.parametrize("name", ["evil.example", "127.0.0.1.nip.io", "localhost."])
def test_the_token_exchange_checks_the_host_first(workspace: Path, name: str) -> None:
    app = create_app(StudioConfig(workspace=workspace))
    client = TestClient(app, base_url=f"http://{name}:8765")
    r = client.get("/", params={"token": app.state.config.token}, follow_redirects=False)
    assert r.status_code == 400 and "set-cookie" not in r.headers


def test_a_session_record_from_before_a_new_field_still_loads(tmp_path: Path) -> None:
    """Records outlive releases of privlab: a field added to `Session` later gets its
    default when an older record is read back (jobs never come back: live processes)."""
    from privlab.studio.sessions import Session

    session = Session(sid="a" * 32, csrf="c", root=tmp_path, show_help=False,
                      jobs={"j": object()})
    state = session.__getstate__()
    assert state["jobs"] == {}
    del state["forgotten"], state["releases"]
    old = Session.__new__(Session)
    old.__setstate__(state)
    assert old.forgotten is False and old.releases == [] and old.show_help is False
