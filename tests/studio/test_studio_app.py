"""privlab studio over HTTP (FastAPI TestClient): the guards (CSRF, token, Host, upload size,
workspace confinement), session isolation, the public-only preview, the ledger, the schema
review, the release package and the gateway page."""

from __future__ import annotations

import html
import io
import json
import math
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from studio_helpers import PEOPLE_CSV, csrf_of, gateway_config, make_client, tamper_audit

from privlab.errors import InvalidInputError, UnsafeConfigurationError
from privlab.studio import StudioConfig
from privlab.studio.config import inside

SRC = str(Path(__file__).resolve().parents[2] / "src")


def use_adult(client, csrf: str):
    return client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})


def release(client, csrf: str, **fields):
    data = {"csrf": csrf, "statistic": "mean", "column": "age", "epsilon": "1", **fields}
    return client.post("/protect/release", data=data)


def remaining(page: str) -> float:
    return float(re.search(r'id="budget-left">[^<]*<strong>ε = ([0-9.e+-]+)</strong>',
                           page).group(1))


def test_state_changing_requests_need_the_csrf_token(workspace: Path) -> None:
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    assert use_adult(client, csrf).status_code == 200
    before = remaining(client.get("/protect").text)
    for data in ({}, {"csrf": "forged"}, {"csrf": csrf + "x"}):
        r = client.post("/protect/release", data={"statistic": "mean", "column": "age",
                                                  "epsilon": "1", **data})
        assert r.status_code == 403 and "CSRF" in r.text
    # the right field without its cookie (another site's form posting blind) is refused too
    cookies = dict(client.cookies)
    client.cookies.delete("privlab_studio_csrf_8765")
    assert release(client, csrf).status_code == 403
    client.cookies.update(cookies)
    assert remaining(client.get("/protect").text) == before  # nothing was charged
    for url in ("/data/select", "/schema/draft", "/assess", "/synth", "/help",
                "/gateway/verify"):
        assert client.post(url, data={"kind": "bundled", "name": "adult"}).status_code == 403
    assert release(client, csrf).status_code == 200
    assert remaining(client.get("/protect").text) == before - 1


def test_paths_outside_the_workspace_are_refused(workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n", encoding="utf-8")
    (workspace / "link.csv").symlink_to(secret)
    for bad in ("../secret.csv", str(secret), "link.csv", "sub/../../secret.csv",
                ".privlab-studio/ledger.db", "people.csv\x00"):
        with pytest.raises(InvalidInputError):
            inside(workspace, bad)
    assert inside(workspace, "people.csv") == (workspace / "people.csv").resolve()
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    home = client.get("/").text
    assert "people.csv" in home and "link.csv" not in home  # the symlink out is not offered
    for bad in ("../secret.csv", str(secret), "link.csv"):
        r = client.post("/data/select", data={"csrf": csrf, "kind": "workspace", "path": bad})
        assert r.status_code == 200 and "outside the workspace" in r.text or \
            "absolute paths are refused" in r.text
        assert "Data: <strong>" not in r.text  # nothing was selected
    r = client.post("/data/select", data={"csrf": csrf, "kind": "upload",
                                          "name": "../../ledger.db"})
    assert "outside the workspace" in r.text


def test_two_sessions_never_see_each_other(workspace: Path) -> None:
    config = StudioConfig(workspace=workspace)
    from privlab.studio import create_app

    app = create_app(config)
    alice = make_client(app)
    bob = make_client(app)
    ca, cb = csrf_of(alice), csrf_of(bob)
    assert ca != cb
    files = {"file": ("mine.csv", b"x,y\n1,2\n3,4\n", "text/csv")}
    assert alice.post("/data/upload", data={"csrf": ca}, files=files).status_code == 200
    use_adult(alice, ca)
    page = release(alice, ca).text
    rid = re.search(r"/results/([0-9a-f]+)/", page).group(1)
    assert "mine.csv" in alice.get("/").text and "mine.csv" not in bob.get("/").text
    assert bob.get(f"/results/{rid}").status_code == 404
    assert bob.get(f"/results/{rid}/release.json").status_code == 404
    assert rid not in bob.get("/results").text and rid in alice.get("/results").text
    assert "Data: <strong>" not in bob.get("/").text  # alice's choice is not bob's
    # bob cannot use alice's session id: the cookie is signed with the server's secret
    sid = alice.cookies.get("privlab_studio_session_8765").split(".")[0]
    bob.cookies.set("privlab_studio_session_8765", sid + ".0000", domain="127.0.0.1")
    assert bob.get(f"/results/{rid}").status_code == 404
    # bob's upload CSRF token is not alice's
    assert bob.post("/data/upload", data={"csrf": ca}, files=files).status_code == 403


def test_an_upload_keeps_its_budget_across_sessions_and_names(workspace: Path) -> None:
    """An upload's ledger principal is a keyed hash of its bytes: the same rows uploaded
    again in a new session or under another name draw on the same budget (the principal used
    to be the session id and the file name, a fresh budget each time). Keyed (the workspace's
    upload.key): the principal goes into every package, and a plain sha256 of the private
    file would confirm a guessed table."""
    import hashlib
    import hmac

    from privlab.studio import create_app

    app = create_app(StudioConfig(workspace=workspace))
    body = PEOPLE_CSV.encode()
    key_file = workspace / ".privlab-studio" / "upload.key"
    left = []
    for name in ("people.csv", "renamed.csv", "people.csv"):
        client = make_client(app)  # a new session each time
        csrf = csrf_of(client)
        client.post("/data/upload", data={"csrf": csrf},
                    files={"file": (name, body, "text/csv")})
        client.post("/data/select", data={"csrf": csrf, "kind": "upload", "name": name})
        (session,) = [s for s in app.state.store.all() if s.csrf == csrf]
        assert key_file.stat().st_mode & 0o077 == 0  # owner-only
        key = bytes.fromhex(key_file.read_text())
        principal = f"upload:{hmac.new(key, body, hashlib.sha256).hexdigest()}"
        assert session.source.principal == principal
        assert hashlib.sha256(body).hexdigest() not in principal
        left.append(remaining(client.get("/").text))
        app.state.ledger.charge(principal, 1.0, 0.0, description="a release")
    assert left == [10.0, 9.0, 8.0]


def test_variance_and_stddev_release_over_http(workspace: Path) -> None:
    """The registry's variance and stddev are offered, released and described (the result
    page's half-width is the registry's words, not the exponential mechanism's)."""
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    use_adult(client, csrf)
    form = client.get("/protect").text
    assert "<option>variance</option>" in form and "<option>stddev</option>" in form
    page = release(client, csrf, statistic="stddev", column="hours-per-week")
    assert page.status_code == 200, page.text
    rid = re.search(r"/results/([0-9a-f]+)/", page.text).group(1)
    result = client.get(f"/results/{rid}").text
    assert "first order, at the noisy count" in result and "exponential" not in result
    released = client.get(f"/results/{rid}/release.json").json()
    assert released["statistic"] == "stddev" and 0 <= released["value"] <= 49


def test_preview_reads_no_private_row(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reader of rows raises; the preview still renders the split and the noise."""
    import privlab.data.datasets as datasets
    import privlab.data.io as io_mod
    from privlab.core import queries
    from privlab.studio import sources

    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    use_adult(client, csrf)
    # what the real releases report, on the real rows (read before the readers break)
    adult = datasets.load_adult()
    real_sum = queries.dp_sum(adult["hours-per-week"], (1, 99), 1.0).confidence_interval()
    real_count = queries.dp_count(adult["age"], 0.5).confidence_interval()

    def no_rows(*a, **k):
        raise AssertionError("the preview read the private rows")

    monkeypatch.setattr(sources.Source, "load", no_rows)
    monkeypatch.setattr(datasets, "load_dataset", no_rows)
    monkeypatch.setattr(datasets, "load_adult", no_rows)
    monkeypatch.setattr(io_mod, "read_table", no_rows)
    sources._bundled_frame.cache_clear()
    for query, expect in (("statistic=mean&column=age&epsilon=1&expected_rows=30000",
                           "mean half-width"),
                          ("statistic=count&column=age&epsilon=0.5", f"± {real_count:.4g}"),
                          ("statistic=histogram&column=workclass&epsilon=2", "per cell"),
                          ("statistic=sum&column=hours-per-week&epsilon=1",
                           f"± {real_sum:.4g}"),
                          ("statistic=variance&column=age&epsilon=1&expected_rows=30000",
                           "variance half-width (first order)"),
                          ("statistic=stddev&column=age&epsilon=1", "no closed form")):
        page = client.get("/protect?" + query)
        assert page.status_code == 200, page.text
        assert "Budget split" in page.text and expect in page.text, query
    # the synthetic-data preview too: MST's split of rho = rho_for_target(1, 1e-6)
    from privlab.core.calibration import rho_for_target

    page = client.get("/synth?method=mst&columns=age&columns=sex&columns=race&epsilon=1"
                      "&delta=1e-6&rows=50&expected_rows=30000").text
    rho = rho_for_target(1.0, 1e-6)
    assert f"ρ = {rho:.4g}" in page and "3 one-way marginals" in page
    assert f"sigma {math.sqrt(3 / (2 * rho / 3)):.3g} per cell" in page
    assert remaining(client.get("/protect").text) == 10.0  # previews spend nothing
    # releasing does read rows (and is refused here before anything is charged)
    with pytest.raises(AssertionError, match="read the private rows"):
        release(client, csrf)
    assert remaining(client.get("/protect").text) == 10.0


def test_release_charges_the_ledger_and_stops_at_the_budget(workspace: Path) -> None:
    client = make_client(StudioConfig(workspace=workspace, budget_epsilon=1.5))
    csrf = csrf_of(client)
    use_adult(client, csrf)
    assert remaining(client.get("/protect").text) == 1.5
    first = release(client, csrf)
    assert "/results/" in str(first.url) and remaining(first.text) == 0.5
    second = release(client, csrf)
    assert "budget exceeded: nothing was released" in second.text
    assert remaining(second.text) == 0.5 and len(re.findall(r'href="/results/[0-9a-f]+"',
                                                            client.get("/results").text)) == 1
    # the budget belongs to the data: a new browser session does not reset it
    other = make_client(StudioConfig(workspace=workspace, budget_epsilon=1.5))
    use_adult(other, csrf_of(other))
    assert remaining(other.get("/protect").text) == 0.5


def test_the_package_reruns_from_a_clean_folder(workspace: Path, tmp_path: Path) -> None:
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    use_adult(client, csrf)
    page = release(client, csrf, statistic="histogram", column="sex").text
    rid = re.search(r"/results/([0-9a-f]+)/", page).group(1)
    released = json.loads(client.get(f"/results/{rid}/release.json").text)
    guarantee = json.loads(client.get(f"/results/{rid}/guarantee.json").text)
    assert guarantee == released["guarantee"] and guarantee["epsilon"] == 1.0
    z = client.get(f"/results/{rid}/privlab-release-{rid}.zip")
    assert z.headers["content-disposition"].startswith("attachment")
    clean = tmp_path / "clean"
    clean.mkdir()
    zipfile.ZipFile(io.BytesIO(z.content)).extractall(clean)
    folder = clean / f"privlab-release-{rid}"
    assert {p.name for p in folder.iterdir()} >= {"release.json", "guarantee.json",
                                                  "report.html", "reproduce.py",
                                                  "reproduce.sh", "README.txt"}
    report = (folder / "report.html").read_text()
    assert "(1)-DP" in report and "Noisy values" in report and "Female" in report
    # a release by group: the mean of age for each declared sex (its CLI has no --by)
    page = release(client, csrf, statistic="mean", column="age", by="sex").text
    gid = re.search(r"/results/([0-9a-f]+)/", page).group(1)
    assert re.findall(r"<tr><td>(Female|Male)</td>", page) == ["Female", "Male"]
    by_group = json.loads(client.get(f"/results/{gid}/release.json").text)
    assert by_group["details"]["groups"] == ["Female", "Male"]
    assert all(17 <= m <= 90 for m in by_group["value"])
    assert any("compose in parallel at epsilon 1" in n for n in by_group["guarantee"]["notes"])
    assert not any("seeded" in n for n in by_group["guarantee"]["notes"])
    zipfile.ZipFile(io.BytesIO(client.get(f"/results/{gid}/privlab-release-{gid}.zip").content)
                    ).extractall(clean)
    # and a release of a per-person table (its schema in the package)
    pid = person_release(workspace, client, csrf)
    per_person = json.loads(client.get(f"/results/{pid}/release.json").text)
    zipfile.ZipFile(io.BytesIO(client.get(f"/results/{pid}/privlab-release-{pid}.zip").content)
                    ).extractall(clean)
    # the three scripts rerun from the clean folder, in one interpreter
    env = {**os.environ, "PYTHONPATH": SRC}
    driver = ("import runpy, sys\n"
              "for f in sys.argv[1:]:\n"
              "    runpy.run_path(f, run_name='__main__')\n    print('=====')\n")
    run = subprocess.run([sys.executable, "-c", driver, f"privlab-release-{rid}/reproduce.py",
                          f"privlab-release-{gid}/reproduce.py",
                          f"privlab-release-{pid}/reproduce.py"], cwd=clean, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    again, again_by, again_person = (json.loads(x) for x in run.stdout.split("=====")[:3])
    # a rerun's guarantee is the studio's (covers, per-person claim, by-group note)
    assert again["guarantee"] == released["guarantee"]
    assert again_by["guarantee"] == by_group["guarantee"]
    assert again_person["guarantee"] == per_person["guarantee"]
    assert again_person["guarantee"]["neighbouring"] == "user"
    assert again_person["ledger"]["remaining_epsilon"] == 6.0  # 10 - 2 - 2
    assert again["details"]["labels"] == released["details"]["labels"] == ["Female", "Male"]
    assert again["noise"] == released["noise"]
    assert again["guarantee"]["epsilon"] == released["guarantee"]["epsilon"]
    assert again["ledger"]["remaining_epsilon"] == 7.0  # the reruns were charged too
    assert again_by["groups"] == ["Female", "Male"] and len(again_by["value"]) == 2
    assert again_by["noise"] == {k: by_group["noise"][k] for k in again_by["noise"]}
    assert again_by["ledger"]["remaining_epsilon"] == 6.0
    assert "privlab release histogram adult.csv --column sex" in \
        (folder / "reproduce.sh").read_text()


VISITS_SCHEMA = """name: visits
privacy_unit: pid
max_rows_per_unit: 2
columns:
  pid: {type: identifier}
  sex: {type: categorical, categories: [F, M]}
  age: {type: integer, bounds: [0, 99]}
"""


def person_release(workspace: Path, client: Any, csrf: str) -> str:
    """A release of a workspace file whose reviewed schema is per person; its result id."""
    (workspace / "visits.csv").write_text("pid,sex,age\n" + "".join(
        f"p{i % 20},{'FM'[i % 2]},{20 + i % 40}\n" for i in range(60)), encoding="utf-8")
    (workspace / "visits.schema.yaml").write_text(VISITS_SCHEMA, encoding="utf-8")
    client.post("/data/select", data={"csrf": csrf, "kind": "workspace", "path": "visits.csv"})
    page = release(client, csrf, statistic="mean", column="age", epsilon="2").text
    return re.search(r"/results/([0-9a-f]+)/", page).group(1)


def test_a_person_release_report_says_per_person(workspace: Path) -> None:
    """report.html's guarantee banner is the release's own guarantee: a per-person release
    says user-level (it was rebuilt from four fields and said "one record")."""
    from privlab.core.guarantee import NEIGHBOURING

    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    pid = person_release(workspace, client, csrf)
    released = json.loads(client.get(f"/results/{pid}/release.json").text)
    assert released["guarantee"]["neighbouring"] == "user"
    files = zipfile.ZipFile(io.BytesIO(client.get(
        f"/results/{pid}/privlab-release-{pid}.zip").content))
    report = files.read(f"privlab-release-{pid}/report.html").decode()
    banner = html.unescape(re.search(r'id="guarantee">(.*?)</div>', report, re.S).group(1))
    assert NEIGHBOURING["user"] in banner and NEIGHBOURING["add_remove_record"] not in banner


def test_schema_draft_is_private_until_every_column_is_reviewed(workspace: Path) -> None:
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    r = client.post("/data/select", data={"csrf": csrf, "kind": "workspace",
                                          "path": "people.csv"})
    assert str(r.url).endswith("/schema")  # no reviewed schema yet
    assert "Draft a schema from the data" in r.text
    page = client.post("/schema/draft", data={"csrf": csrf}).text
    assert page.count("drawn from the data") == 4 and "private until reviewed" in page
    assert 'value="20"' in page and 'value="69"' in page  # the observed age range
    form = {"csrf": csrf, "privacy_unit": "row"}
    types = {"age": "integer", "sex": "categorical", "city": "categorical", "income": "integer"}
    for i, name in enumerate(("age", "sex", "city", "income")):
        form[f"c{i}_type"] = types[name]
        form[f"c{i}_missing"] = "on"
    form.update({"c0_lo": "0", "c0_hi": "120", "c1_categories": "F\nM\nX",
                 "c2_categories": "Ankara\nIzmir\nKyiv\nLviv", "c3_lo": "0", "c3_hi": "5000"})
    refused = client.post("/schema/save", data=form).text
    assert "review every column before saving" in refused and "age, sex, city, income" in refused
    form.update({f"c{i}_reviewed": "on" for i in range(4)})
    saved = client.post("/schema/save", data=form)
    assert str(saved.url).endswith("/protect") and "reviewed schema saved" in saved.text
    yaml_text = client.get("/schema/download").text
    assert "draft" not in yaml_text and "- 120" in yaml_text and "Lviv" in yaml_text
    # the preview uses the reviewed bounds [0, 120], not the data's [20, 69]
    page = client.get("/protect?statistic=sum&column=age&epsilon=1").text
    assert "0 to 120" in page
    assert "/results/" in str(release(client, csrf).url)
    # a histogram has one noisy cell per declared category, also one no row holds (X)
    page = release(client, csrf, statistic="histogram", column="sex").text
    rid = re.search(r"/results/([0-9a-f]+)/", page).group(1)
    released = json.loads(client.get(f"/results/{rid}/release.json").text)
    assert released["details"]["labels"] == ["F", "M", "X"] and len(released["value"]) == 3
    # charged to the file's own budget, named by its place in the workspace
    assert released["ledger"]["principal"] == "workspace:people.csv"
    assert released["ledger"]["remaining_epsilon"] == 8.0


def test_a_reviewed_schema_belongs_to_its_file_not_to_its_name(workspace: Path) -> None:
    """Two files named people.csv (in two folders, or an upload) never share the schema one
    of them was reviewed with (it was saved as schemas/people.yaml and adopted by both)."""
    for sub in ("a", "b"):
        (workspace / sub).mkdir()
        (workspace / sub / "people.csv").write_text(PEOPLE_CSV, encoding="utf-8")
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "workspace",
                                      "path": "a/people.csv"})
    client.post("/schema/draft", data={"csrf": csrf})
    form = {"csrf": csrf, "privacy_unit": "row", "c0_lo": "0", "c0_hi": "120",
            "c1_categories": "F\nM", "c2_categories": "Ankara\nIzmir\nKyiv", "c3_lo": "0",
            "c3_hi": "5000"}
    for i, kind in enumerate(("integer", "categorical", "categorical", "integer")):
        form.update({f"c{i}_type": kind, f"c{i}_reviewed": "on"})
    assert str(client.post("/schema/save", data=form).url).endswith("/protect")
    for other in ({"kind": "workspace", "path": "b/people.csv"},
                  {"kind": "upload", "name": "people.csv"}):
        if other["kind"] == "upload":
            client.post("/data/upload", data={"csrf": csrf},
                        files={"file": ("people.csv", PEOPLE_CSV.encode(), "text/csv")})
        r = client.post("/data/select", data={"csrf": csrf, **other})
        assert str(r.url).endswith("/schema"), other  # no reviewed schema yet
    r = client.post("/data/select", data={"csrf": csrf, "kind": "workspace",
                                          "path": "a/people.csv"})
    assert str(r.url).endswith("/protect")  # its own reviewed schema is still its own
    (saved,) = (workspace / ".privlab-studio" / "sessions").glob("*/schemas/*.yaml")
    assert saved.name.startswith("people-")


def test_a_visit_that_writes_nothing_leaves_nothing(workspace: Path) -> None:
    client = make_client(StudioConfig(workspace=workspace))
    for path in ("/", "/protect", "/assess", "/results", "/static/studio.css"):
        assert client.get(path).status_code == 200
    r = client.get("/static/studio.js")
    assert "Content-Security-Policy" in r.headers and "privlab_studio_session" not in \
        r.headers.get("set-cookie", "")
    assert not (workspace / ".privlab-studio" / "sessions").exists()
    assert 'class="explain"' in client.get("/").text


def test_a_reviewed_schema_beside_a_workspace_file_is_used(workspace: Path) -> None:
    from privlab.data.io import read_table
    from privlab.schema import draft_schema, draft_yaml, parse_schema

    draft = draft_schema(read_table(workspace / "people.csv"), name="people")
    (workspace / "people.schema.yaml").write_text(draft_yaml(draft), encoding="utf-8")
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    page = client.post("/data/select", data={"csrf": csrf, "kind": "workspace",
                                             "path": "people.csv"})
    assert str(page.url).endswith("/schema") and "schema beside the file not used" in page.text
    spec = draft.to_dict()
    spec.pop("draft")
    spec["columns"]["income"] = {"type": "integer", "bounds": [0, 5000]}
    (workspace / "people.schema.yaml").write_text(parse_schema(spec).to_yaml(),
                                                  encoding="utf-8")
    page = client.post("/data/select", data={"csrf": csrf, "kind": "workspace",
                                             "path": "people.csv"})
    assert str(page.url).endswith("/protect") and "Budget split" in page.text


def test_explanations_can_be_hidden(workspace: Path) -> None:
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    assert 'class="explain"' in client.get("/assess").text
    page = client.post("/help", data={"csrf": csrf, "next": "/assess"})
    assert str(page.url).endswith("/assess") and 'class="explain"' not in page.text
    assert "Show explanations" in page.text and 'class="explain"' not in client.get("/").text
    assert "The same with the library" in client.get("/").text  # the calls stay
    page = client.post("/help", data={"csrf": csrf, "next": "//evil.example/"})
    assert str(page.url) == "http://127.0.0.1:8765/" and 'class="explain"' in page.text


def test_a_token_always_and_no_token_only_on_loopback(workspace: Path) -> None:
    """Off loopback as on it, a studio without a given token draws a random one; --no-token
    is refused off loopback; a short token is refused."""
    from fastapi.testclient import TestClient

    from privlab.studio import create_app

    drawn = StudioConfig(workspace=workspace, host="0.0.0.0")
    assert drawn.token is not None and len(drawn.token) >= 32
    assert StudioConfig(workspace=workspace).token != drawn.token  # per launch
    with pytest.raises(UnsafeConfigurationError, match="--no-token"):
        StudioConfig(workspace=workspace, host="0.0.0.0", no_token=True)
    with pytest.raises(InvalidInputError, match="16 characters"):
        StudioConfig(workspace=workspace, host="0.0.0.0", token="short")
    token = "t" * 24
    app = create_app(StudioConfig(workspace=workspace, host="0.0.0.0", token=token))
    client = TestClient(app, base_url="http://studio.example:8765")
    assert client.get("/").status_code == 401
    assert client.get("/?token=wrong-token-wrong-token").status_code == 401
    assert client.get(f"/?token={token}").status_code == 200
    assert client.get("/results").status_code == 200  # the cookie carries it from now on


def test_host_header_and_upload_size_are_checked(workspace: Path) -> None:
    client = make_client(StudioConfig(workspace=workspace, max_upload_bytes=1000))
    assert client.get("/", headers={"host": "evil.example"}).status_code == 400
    csrf = csrf_of(client)
    big = {"file": ("big.csv", b"a\n" + b"1\n" * 20_000, "text/csv")}
    r = client.post("/data/upload", data={"csrf": csrf}, files=big)
    assert r.status_code == 413 and "upload too large" in r.text
    just_over = {"file": ("big.csv", b"a\n" + b"1\n" * 500, "text/csv")}  # 1002 bytes
    r = client.post("/data/upload", data={"csrf": csrf}, files=just_over)
    assert r.status_code == 200 and "upload too large" in r.text
    assert not list((workspace / ".privlab-studio").rglob("big.csv"))
    small = {"file": ("../../small.csv", b"a\n1\n", "text/csv")}
    assert client.post("/data/upload", data={"csrf": csrf}, files=small).status_code == 200
    assert [p.name for p in (workspace / ".privlab-studio").rglob("small.csv")] == ["small.csv"]
    assert not (workspace.parent / "small.csv").exists()


def test_gateway_page_lists_analysts_and_verifies_the_audit_log(tmp_path: Path,
                                                                workspace: Path) -> None:
    folder = tmp_path / "gw"
    config = gateway_config(folder)
    client = make_client(StudioConfig(workspace=workspace, gateway_config=config))
    csrf = csrf_of(client)
    page = client.get("/gateway").text
    assert "alice" in page and "bob" in page and "row-level reads are refused" in page
    assert re.search(r"<td>alice</td><td>all</td><td>10</td><td>0.5</td><td>9.5</td>", page)
    ok = client.post("/gateway/verify", data={"csrf": csrf}).text
    assert "Intact: 4 rows" in ok and "HMAC" in ok
    tamper_audit(folder, "UPDATE privlab_gateway_audit SET sql = 'SELECT 1' WHERE seq = 2")
    bad = client.post("/gateway/verify", data={"csrf": csrf}).text
    assert "TAMPERED" in bad and "audit row 2: contents do not match its HMAC" in bad


def test_assess_uses_the_sessions_schema(workspace: Path) -> None:
    """Issue 23: the studio's assessment reads the reviewed schema as `privlab assess
    --schema` does: a column declared identifier is named as a direct identifier, not
    assessed, and the rerun call carries the schema."""
    from privlab.schema import parse_schema

    spec = {"name": "people", "columns": {
        "age": {"type": "integer", "bounds": [0, 120], "missing": False},
        "sex": {"type": "categorical", "categories": ["F", "M"], "missing": False},
        "city": {"type": "identifier", "missing": False},
        "income": {"type": "integer", "bounds": [0, 5000], "missing": False}}}
    (workspace / "people.schema.yaml").write_text(parse_schema(spec).to_yaml(),
                                                  encoding="utf-8")
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "workspace", "path": "people.csv"})
    page = client.post("/assess", data={"csrf": csrf, "quasi_identifiers": "age,sex",
                                        "max_combination_size": "2"}).text
    text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    assert "direct identifiers (declared in the schema" in text and "city" in text
    assert "schema=privlab.schema.load_schema(&#39;schema.yaml&#39;)" in page
    assert "<td>drop</td><td>city</td>" in page  # the recommendation: drop it
    assert not re.search(r"\((?:hide|low|none)\): [^<]*city", page)  # never given a tier
    assert re.search(r"\(hide\): [^<]*age", page)
