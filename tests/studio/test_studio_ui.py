"""Issue 30, "wrong or missing": choose-epsilon on a workspace file, the schema review (every
key of the CLI schema, categories one per line, only the columns an analysis uses, pages that
scale to thousands of columns), the upload errors, the mean's half-width, the clamping text
and the favicon."""

from __future__ import annotations

import html
import re
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from studio_helpers import PEOPLE_SCHEMA, csrf_of, make_client, people_rows

from privlab.studio import StudioConfig


def test_choose_epsilon_on_a_workspace_file_gets_its_reviewed_schema(workspace: Path) -> None:
    """Item 10: the job was started without --schema, so the CLI refused every workspace
    file ("choose-epsilon needs --schema"); it now gets the session's reviewed schema and
    runs to its report."""
    from privlab.schema import load_schema

    (workspace / "big.csv").write_text(people_rows(300), encoding="utf-8")
    app_client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(app_client)
    page = app_client.post("/data/select", data={"csrf": csrf, "kind": "workspace",
                                                 "path": "big.csv"})
    assert str(page.url).endswith("/schema")
    form = {"csrf": csrf, "target": "sex", "model": "logreg", "policy": "finance",
            "epsilons": "1", "seeds": "1", "max_rows": "200"}
    refused = app_client.post("/choose", data=form).text
    assert "review this file&#39;s schema first" in refused  # nothing started without one
    (workspace / "big.schema.yaml").write_text(PEOPLE_SCHEMA, encoding="utf-8")
    app_client.post("/data/select", data={"csrf": csrf, "kind": "workspace",
                                          "path": "big.csv"})
    refused = app_client.post("/choose", data={**form, "target": "age"}).text
    assert "target: choose the label column, a categorical column" in refused
    r = app_client.post("/choose", data=form)
    jid = str(r.url).rsplit("/", 1)[1]
    assert "Choose epsilon: logreg on" in r.text
    import importlib.util

    if all(importlib.util.find_spec(m) for m in ("torch", "opacus")):  # the [ml] extra
        deadline = time.time() + 180
        while (status := app_client.get(f"/jobs/{jid}/status").json())["state"] in (
                "starting", "running"):
            assert time.time() < deadline, status
            time.sleep(0.3)
        assert status["state"] == "done", status
        assert "Choosing epsilon" in app_client.get(f"/jobs/{jid}/choose_epsilon.html").text
    else:
        app_client.post(f"/jobs/{jid}/cancel", data={"csrf": csrf})
    # the command line: the reviewed schema beside the data, coerced like the model job's
    from privlab.studio.routes.choose import choose_command

    schema = load_schema(workspace / "big.schema.yaml")
    source = app_client.app.state.store.all()[0].source
    args, files = choose_command(source, schema, {
        "target": "sex", "model": "logreg", "policy": "finance", "epsilons": "1",
        "seeds": "1", "max_rows": "200"})
    assert args[:6] == ["choose-epsilon", str((workspace / "big.csv").resolve()), "--schema",
                        "schema.yaml", "--on-invalid", "coerce"]
    assert args[-2:] == ["--target", "sex"] and files == {"schema.yaml": schema.to_yaml()}


class FormFields(HTMLParser):
    """The fields a browser would submit from the form posting to `action`, as rendered:
    inputs' values, ticked checkboxes, textareas' text and selects' selected options."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action, self.inside, self.fields = action, False, {}
        self._textarea: str | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form":
            self.inside = a.get("action") == self.action
        if not self.inside:
            return
        if tag == "input" and a.get("name"):
            if a.get("type") != "checkbox":
                self.fields[a["name"]] = a.get("value") or ""
            elif "checked" in a:
                self.fields[a["name"]] = "on"
        elif tag == "textarea":
            self._textarea = a["name"]
            self.fields[a["name"]] = ""
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select and (
                "selected" in a or self._select not in self.fields):
            self.fields[self._select] = a.get("value", "<text>")

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.fields[self._textarea] += data
        elif self._select and self.fields.get(self._select) == "<text>":
            self.fields[self._select] = data

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None
        elif tag == "form":
            self.inside = False


def form_of(page: str, action: str = "/schema/save") -> dict[str, str]:
    parser = FormFields(action)
    parser.feed(page)
    return {k: (v[1:] if k.endswith("_categories") and v.startswith("\n") else v)
            for k, v in parser.fields.items()}


def review_all(client, page: str) -> Any:
    """Submit the review form as rendered, every column ticked reviewed; the response."""
    form = form_of(page)
    form.update({k.replace("_type", "_reviewed"): "on" for k in list(form)
                 if k.endswith("_type")})
    return client.post("/schema/save", data=form)


def select_upload(client, csrf: str, name: str, text: str) -> Any:
    client.post("/data/upload", data={"csrf": csrf},
                files={"file": (name, text.encode(), "text/csv")})
    return client.post("/data/select", data={"csrf": csrf, "kind": "upload", "name": name})


def test_a_reviewed_draft_keeps_point_masses_and_categories_with_commas(workspace: Path
                                                                       ) -> None:
    """Item 11: the draft's point mass (a spike of zeros) is a reviewed field and is kept (it
    was dropped: MST then gave the zeros no code of their own), and a category with a comma
    is one category (one per line; "Smith, J" was split in two)."""
    from privlab.schema import load_schema

    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    rows = "".join(f'"{["Smith, J", "Lee"][i % 2]}",{0 if i % 3 else 1.5 + i}\n'
                   for i in range(60))
    select_upload(client, csrf, "owners.csv", "owner,amount\n" + rows)
    page = client.post("/schema/draft", data={"csrf": csrf}).text
    fields = form_of(page)
    assert fields["c0_categories"].splitlines() == ["Lee", "Smith, J"]
    assert fields["c1_point_masses"] == "0.0"
    saved = review_all(client, page)
    assert str(saved.url).endswith("/protect"), saved.text
    schema = load_schema(__import__("yaml").safe_load(client.get("/schema/download").text))
    assert schema.column("owner").categories == ("Lee", "Smith, J")
    assert schema.column("amount").point_masses == (0.0,)
    assert "point masses 0.0" in client.get("/schema").text


def test_every_key_of_the_cli_schema_is_a_reviewed_field(workspace: Path) -> None:
    """Every column key the CLI schema has survives a review that changes nothing: the form
    shown, submitted as is, gives back the same declaration."""
    from privlab.schema import parse_schema
    from privlab.schema.model import _COLUMN_KEYS
    from privlab.studio.review import Review

    spec = {"name": "every", "draft": True, "columns": {
        "hours": {"type": "numeric", "bounds": [0.0, 5000.0], "scale": "log", "bins": 12,
                  "point_masses": [0.0, 40.0], "missing": False, "default": 40.0,
                  "description": "weekly hours"},
        "kids": {"type": "integer", "bounds": [0, 12], "point_masses": [0], "default": 0},
        "owner": {"type": "categorical", "categories": ["Smith, J", "Lee"], "other": True,
                  "default": "Lee", "missing": False},
        "born": {"type": "datetime", "bounds": ["1900-01-01T00:00:00", "2020-12-31T00:00:00"],
                 "default": "1970-01-01T00:00:00", "format": "%d/%m/%Y"},
        "id": {"type": "identifier", "missing": False},
        "note": {"type": "text", "description": "free text"}}}
    draft = parse_schema(spec, allow_draft=True)
    assert {k for c in spec["columns"].values() for k in c} | {"type"} == _COLUMN_KEYS
    from privlab.studio import create_app

    app = create_app(StudioConfig(workspace=workspace))
    client = make_client(app)
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "workspace", "path": "people.csv"})
    session = app.state.store.all()[0]
    session.draft, session.review = draft, Review.of(draft)
    page = client.get("/schema").text
    form = form_of(page)
    form.update({"privacy_unit": "id", "max_rows_per_unit": "3", "public_size": "1000"})
    form.update({k.replace("_type", "_reviewed"): "on" for k in list(form)
                 if k.endswith("_type")})
    saved = client.post("/schema/save", data=form)
    assert str(saved.url).endswith("/protect"), saved.text
    schema = session.schema
    assert [c.to_dict() for c in schema.columns] == [c.to_dict() for c in draft.columns]
    assert (schema.privacy_unit, schema.max_rows_per_unit, schema.public_size) == (
        "id", 3, 1000)


def test_only_the_columns_used_are_reviewed_a_page_at_a_time(workspace: Path) -> None:
    """A table of 450 columns ("Too many fields" past ~400): the page shows one page of
    columns; the person names the 3 columns an analysis uses and reviews only those; the
    rest are declared text (never released), and a release runs on the saved schema."""
    n = 450
    header = ",".join(f"v{j}" for j in range(n))
    body = "".join(",".join(str((i * (j + 3)) % 17) for j in range(n)) + "\n"
                   for i in range(40))
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    select_upload(client, csrf, "wide.csv", header + "\n" + body)
    page = client.post("/schema/draft", data={"csrf": csrf})
    assert len(page.content) < 200_000 and "page 1 of 18" in page.text
    assert page.text.count('class="col"') == 25
    # all 450, a page at a time: page 1 saved, the next page is shown
    r = review_all(client, page.text)
    assert "25 of 450 columns reviewed" in r.text and "page 2 of 18" in r.text
    bad = client.post("/schema/columns", data={"csrf": csrf, "used": "v1\nnope"}).text
    assert "&#39;nope&#39; is not a column of the data" in bad
    r = client.post("/schema/columns", data={"csrf": csrf, "used": "v7\nv2\n\nv400\n"})
    assert "3 of 450 columns to review" in r.text and r.text.count('class="col"') == 3
    assert "2 of 3 columns reviewed" in r.text  # the reviews of v2 and v7 are kept
    saved = review_all(client, r.text)
    assert str(saved.url).endswith("/protect"), saved.text
    assert "450 columns, 3 reviewed" in saved.text
    schema = client.app.state.store.all()[0].schema
    assert [c.name for c in schema.released_columns()] == ["v2", "v7", "v400"]
    assert len(schema.columns) == n and schema.column("v9").type == "text"
    result = client.post("/protect/release", data={"csrf": csrf, "statistic": "mean",
                                                   "column": "v7", "epsilon": "1"})
    assert "/results/" in str(result.url)


def test_a_too_large_upload_gets_a_page_with_the_stated_limit_and_a_way_back(
        workspace: Path) -> None:
    """Item 12: the 413 was a bare text page stating the body limit ("20.0156 MB", the
    upload limit plus the form's slack) while the form said 20.0 MB, with no way back."""
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    home = client.get("/").text
    assert "(at most 20 MB)" in home
    big = {"file": ("big.csv", b"a\n" + b"1\n" * (21 * 2**19), "text/csv")}  # 21 MB
    r = client.post("/data/upload", data={"csrf": csrf}, files=big)
    assert r.status_code == 413 and r.headers["content-type"].startswith("text/html")
    assert "upload too large: the limit is 20 MB" in r.text and "20.0156" not in r.text
    assert '<a id="back" href="/">' in r.text and 'rel="icon"' in r.text
    # the route's own check (a body inside the slack) states the same limit
    small = make_client(StudioConfig(workspace=workspace, max_upload_bytes=2**20))
    r = small.post("/data/upload", data={"csrf": csrf_of(small)},
                   files={"file": ("b.csv", b"a\n" + b"1\n" * (2**19 + 1), "text/csv")})
    assert r.status_code == 200 and "upload too large: the limit is 1 MB" in r.text
    assert "(at most 1 MB)" in r.text


def test_an_empty_or_header_only_upload_is_refused_at_upload(workspace: Path) -> None:
    """Item 12: such a file was accepted and failed later with the session folder's path in
    the message; now it is refused at once, named as uploaded, and nothing is kept."""
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    for name, body, why in (("empty.csv", b"", "is empty"),
                            ("blank.csv", b"\n\n", "is empty"),
                            ("header.csv", b"age,sex\n", "has no data rows")):
        r = client.post("/data/upload", data={"csrf": csrf},
                        files={"file": (name, body, "text/csv")})
        text = html.unescape(r.text)
        assert f"file '{name}': not uploaded: '{name}' {why}" in text, text
        assert ".privlab-studio" not in text and "staged" not in text
        assert f"<option>{name}</option>" not in r.text  # not offered
    assert not [p for p in (workspace / ".privlab-studio").rglob("*.csv")]
    r = client.post("/data/upload", data={"csrf": csrf},
                    files={"file": ("ok.csv", b"age\n1\n", "text/csv")})
    assert "uploaded ok.csv" in r.text and "<option>ok.csv</option>" in r.text


def test_a_released_mean_shows_the_clis_approximate_half_width(workspace: Path) -> None:
    """Item 12: the result page said "none in closed form" for a mean where `privlab release`
    prints "about W (a ratio ...)"; the studio now prints the CLI's words and figure, and
    release.json carries mean_half_width_95_approx as the CLI's JSON does."""
    import json

    from privlab.core.release import ratio_half_width

    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
    r = client.post("/protect/release", data={"csrf": csrf, "statistic": "mean",
                                              "column": "age", "epsilon": "1"})
    rid = re.search(r"/results/([0-9a-f]+)/", r.text).group(1)
    payload = json.loads(client.get(f"/results/{rid}/release.json").text)
    expected = ratio_half_width(payload["noise"], payload["details"], False)["mean"]
    assert payload["mean_half_width_95_approx"] == expected
    shown = html.unescape(re.search(r'id="release-half-width">(.*?)</p>', r.text, re.S)
                          .group(1))
    assert f"about {expected:.4g} (a ratio of a noisy sum and a noisy count" in shown
    assert "none in closed form" not in shown
    import io
    import zipfile

    package = zipfile.ZipFile(io.BytesIO(client.get(
        f"/results/{rid}/privlab-release-{rid}.zip").content))
    report = html.unescape(package.read(f"privlab-release-{rid}/report.html").decode())
    assert f"about {expected:.4g} (a ratio of a noisy sum and a noisy count" in report


def test_the_release_form_explains_clamping(workspace: Path) -> None:
    """Item 12: what the bounds do, in words, beside the release button."""
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
    page = html.unescape(client.get("/protect?statistic=mean&column=age&epsilon=1").text)
    clamping = re.search(r'id="clamping"[^>]*>(.*?)</p>', page, re.S).group(1)
    assert "too tight, the outliers' contributions are clipped" in clamping
    assert "too wide, there is more noise" in clamping
    page = client.get("/protect?statistic=histogram&column=sex&epsilon=1").text
    assert 'id="clamping"' not in page  # categories are not clamped


def test_every_page_links_a_favicon_served_from_static(workspace: Path) -> None:
    """Item 12: Chromium asked for /favicon.ico and logged a 404; every page now names the
    studio's own icon (the browser test checks Chromium fetches no missing resource)."""
    client = make_client(StudioConfig(workspace=workspace))
    for path in ("/", "/schema", "/protect", "/results", "/choose"):
        assert '<link rel="icon" href="/static/favicon.svg"' in client.get(path).text, path
    icon = client.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg")
    assert icon.text.startswith("<svg")


def test_a_studio_mst_table_keeps_the_spike_the_draft_declared(workspace: Path) -> None:
    """Item 11's symptom: with the point mass dropped at review, MST smeared a spike of
    exact zeros over its bin (0.000 of them in the synthetic table; real share 0.25). Kept,
    the zeros get their own code. Bound: at epsilon 4 on 3,000 rows the noise on that one
    marginal cell is a few counts, and 3,000 sampled rows put a binomial sd of
    sqrt(0.25 * 0.75 / 3000) = 0.008 on the share; 0.15 is more than 10 sd below 0.25."""
    import io

    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    x = np.where(rng.random(3000) < 0.25, 0.0, rng.uniform(0.01, 10, 3000)).round(3)
    frame = pd.DataFrame({"x": x, "g": rng.choice(["a", "b", "c"], 3000)})
    frame.to_csv(workspace / "spike.csv", index=False)
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "workspace", "path": "spike.csv"})
    review_all(client, client.post("/schema/draft", data={"csrf": csrf}).text)
    r = client.post("/synth", data={"csrf": csrf, "method": "mst", "epsilon": "4",
                                    "delta": "1e-6", "rows": "3000", "columns": ["x", "g"]})
    jid = str(r.url).rsplit("/", 1)[1]
    deadline = time.time() + 180
    while (status := client.get(f"/jobs/{jid}/status").json())["state"] in (
            "starting", "running"):
        assert time.time() < deadline, status
        time.sleep(0.3)
    assert status["state"] == "done", status
    synthetic = pd.read_csv(io.StringIO(client.get(f"/jobs/{jid}/synthetic.csv").text))
    assert (x == 0).mean() > 0.24 and (synthetic["x"] == 0).mean() > 0.15
