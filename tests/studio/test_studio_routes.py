"""Every state-changing route of the studio checks the CSRF token before it does anything.

Since the split of `create_app` into one router per area, the check is a dependency each
POST route declares (`privlab.studio.web.checked_form`); a route added without it would
accept forged requests. So this walks every POST route the app has (not a hand-kept list):
each declares the dependency, and each answers 403 to a POST without the token, with nothing
charged to the ledger and nothing written to the session's folder."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.routing import APIRoute
from studio_helpers import csrf_of, make_client

from privlab.studio import StudioConfig
from privlab.studio.web import checked_form


def api_routes(routes) -> list[APIRoute]:
    """The app's routes; an included router is a route list of its own in newer FastAPI
    (`original_router`), its routes copied onto the app in older ones."""
    out: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            out.append(route)
        elif hasattr(route, "original_router"):
            out += api_routes(route.original_router.routes)
    return out


def post_routes(app) -> list[APIRoute]:
    return [r for r in api_routes(app.routes) if "POST" in r.methods]


def test_every_post_route_declares_the_csrf_check(workspace: Path) -> None:
    from privlab.studio import create_app

    routes = post_routes(create_app(StudioConfig(workspace=workspace)))
    assert {"/data/select", "/data/upload", "/protect/release", "/synth", "/model",
            "/jobs/{jid}/cancel", "/schema/save"} <= {r.path for r in routes}
    for route in routes:
        assert checked_form in [d.call for d in route.dependant.dependencies], route.path
        assert not [m for m in route.methods if m in ("GET", "HEAD")], route.path


def test_every_post_route_refuses_a_request_without_the_token(workspace: Path) -> None:
    from privlab.studio import create_app

    app = create_app(StudioConfig(workspace=workspace))
    client = make_client(app)
    csrf = csrf_of(client)
    assert client.post("/data/select", data={"csrf": csrf, "kind": "bundled",
                                             "name": "adult"}).status_code == 200
    session = app.state.store.all()[0]
    before = app.state.ledger.remaining("bundled:adult")
    files_before = sorted(session.root.rglob("*")) if session.root.exists() else []
    form = {"kind": "bundled", "name": "adult", "statistic": "mean", "column": "age",
            "epsilon": "1", "method": "mst", "rows": "10", "target": "salary"}
    for route in post_routes(app):
        url = re.sub(r"\{[^}]+\}", "x", route.path)
        for data in (form, {**form, "csrf": "forged"}):
            r = client.post(url, data=data, files={"file": ("a.csv", b"a\n1\n")}
                            if url == "/data/upload" else None)
            assert r.status_code == 403 and "CSRF" in r.text, (url, r.status_code)
    assert len(post_routes(app)) >= 12
    assert app.state.ledger.remaining("bundled:adult") == before
    assert session.jobs == {} and session.releases == []
    after = sorted(session.root.rglob("*")) if session.root.exists() else []
    assert after == files_before
