"""Issue 31: the studio's analysis-plan page over HTTP (no browser): the preview reads no row,
only the plan's columns are reviewed, "Run and download" is `privlab release plan`'s package
charged once, and on D and D' (one row changed, same seed) only the noisy values differ."""

from __future__ import annotations

import dataclasses
import functools
import html
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from studio_helpers import PEOPLE_CSV, PEOPLE_SCHEMA, csrf_of, make_client

from privlab.studio import StudioConfig

#: count + mean of age + histogram of city, epsilon 1 in total (weights 1, 2, 1).
PLAN = {"stat0": "count", "stat1": "mean", "col1": "age", "weight1": "2",
        "stat2": "histogram", "col2": "city", "epsilon": "1"}
#: The same plus the mean of income per declared sex, and a count per declared city.
PLAN_BY = {**PLAN, "stat3": "mean", "col3": "income", "by3": "sex", "stat4": "count",
           "by4": "city"}


def people_client(workspace: Path) -> tuple[Any, str]:
    (workspace / "people.schema.yaml").write_text(PEOPLE_SCHEMA, encoding="utf-8")
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    r = client.post("/data/select", data={"csrf": csrf, "kind": "workspace",
                                          "path": "people.csv", "next": "plan"})
    assert r.status_code == 200 and r.url.path == "/plan", r.text
    return client, csrf


def package_of(response: Any) -> dict[str, str]:
    assert response.status_code == 200, response.text[:500]
    assert response.headers["content-disposition"].startswith("attachment")
    with zipfile.ZipFile(io.BytesIO(response.content)) as zf:
        return {Path(n).name: zf.read(n).decode() for n in zf.namelist()}


def test_the_preview_reads_no_row(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The data file is gone and every row reader raises: the preview still states each
    share, half-width and the total; the run is refused with nothing charged."""
    from privlab.studio.sources import Source

    client, csrf = people_client(workspace)
    (workspace / "people.csv").unlink()

    def no_rows(*a: Any, **k: Any) -> Any:
        raise AssertionError("the plan preview read rows")

    monkeypatch.setattr(Source, "load", no_rows)
    monkeypatch.setattr("privlab.data.io.read_table", no_rows)
    monkeypatch.setattr("privlab.schema.read.read_declared", no_rows)
    page = client.get("/plan", params=PLAN).text
    assert "Total: (1)-DP" in page and "sequential composition" in page
    # weights 1, 2, 1 of epsilon 1: 0.25, 0.5, 0.25; a count's half-width at 0.25 is
    # ln(20)/0.25 rounded up on the geometric grid
    shares = re.findall(r"<td>(0\.\d+)</td><td>geometric|<td>(0\.\d+)</td><td>laplace", page)
    assert [a or b for a, b in shares] == ["0.25", "0.5", "0.25"], shares
    assert "± 12" in page  # ceil(ln(20) / 0.25) = 12 for the count and each cell
    assert "All 3 released values together are (1)-DP" in page
    monkeypatch.undo()
    refused = client.post("/plan/run", data={"csrf": csrf, **PLAN})
    assert refused.url.path == "/plan" and "cannot be read" in refused.text
    budget = refused.text
    assert "ε = 10</strong> of 10" in budget  # nothing charged: the run could not read rows


def test_run_and_download_is_the_cli_package_charged_once(workspace: Path) -> None:
    from typer.testing import CliRunner

    from privlab.cli.main import app as cli
    from privlab.core.ledger import BudgetLedger

    client, csrf = people_client(workspace)
    files = package_of(client.post("/plan/run", data={"csrf": csrf, **PLAN}))
    assert {"release.json", "plan.yaml", "schema.yaml", "reproduce.sh", "reproduce.py",
            "README.txt"} <= set(files)
    package = json.loads(files["release.json"])
    assert [(r["statistic"], r["column"]) for r in package["releases"]] == [
        ("count", None), ("mean", "age"), ("histogram", "city")]
    assert [r["guarantee"]["epsilon"] for r in package["releases"]] == [0.25, 0.5, 0.25]
    assert package["guarantee"]["epsilon"] == 1.0
    assert len(package["releases"][2]["value"]) == 3  # the declared cities
    with BudgetLedger(str(workspace / ".privlab-studio" / "ledger.db")) as book:
        spent = [e.epsilon for e in book.history("workspace:people.csv")]
    assert spent == [1.0]  # one charge for the whole plan
    # the CLI reruns the downloaded plan into the same package (fresh noise)
    folder = workspace / "pkg"
    folder.mkdir()
    for name in ("plan.yaml", "schema.yaml"):
        (folder / name).write_text(files[name], encoding="utf-8")
    out = CliRunner().invoke(cli, ["release", "plan", str(workspace / "people.csv"), "--plan",
                                   str(folder / "plan.yaml"), "--schema",
                                   str(folder / "schema.yaml"), "-o", str(folder / "rerun")])
    assert out.exit_code == 0, out.output
    rerun = json.loads((folder / "rerun" / "release.json").read_text())
    assert rerun["plan"].pop("schema").endswith("schema.yaml")  # named as the CLI got it
    assert package["plan"].pop("schema") == "schema.yaml"  # as the package ships it
    assert strip_values(rerun) == strip_values({k: v for k, v in package.items()
                                                if k != "ledger"})
    # downloadable again from this session only
    rid = re.search(r"/plans/([0-9a-f]+)/", client.get("/plan").text).group(1)
    again = client.get(f"/plans/{rid}/release.json")
    assert again.status_code == 200 and again.text == files["release.json"]
    other = make_client(client.app)
    assert other.get(f"/plans/{rid}/release.json").status_code == 404


def test_only_the_plans_columns_are_reviewed(workspace: Path) -> None:
    """With a draft schema the plan names its columns; the review then covers those two and
    returns to the plan, whose preview needs nothing else."""
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "workspace", "path": "people.csv",
                                      "next": "plan"})
    assert "Draft a schema for this plan" in client.get("/plan").text
    drafted = client.post("/schema/draft", data={"csrf": csrf, "next": "plan"})
    assert drafted.url.path == "/plan" and 'id="stat0"' in drafted.text
    page = client.get("/plan", params=PLAN).text
    assert "Review the 2 columns this plan uses" in page
    r = client.post("/plan/review", data={"csrf": csrf, **PLAN})
    assert r.url.path == "/schema"
    schema_page = r.text
    assert "Type of age" in schema_page and "Type of city" in schema_page
    assert "Type of income" not in schema_page and "Type of sex" not in schema_page
    assert "0 of 2 columns reviewed" in schema_page
    form = {"csrf": csrf, "page": "1", "c0_type": "integer", "c0_lo": "0", "c0_hi": "100",
            "c0_reviewed": "on", "c2_type": "categorical",
            "c2_categories": "Ankara\nIzmir\nKyiv", "c2_reviewed": "on"}
    done = client.post("/schema/save", data=form)
    assert done.url.path == "/plan", done.text[:2000]
    assert "Total: (1)-DP" in done.text


def strip_values(package: dict[str, Any]) -> dict[str, Any]:
    """A package without what the noise decides (the values, noisy sums and counts, a
    by-group release's per group too) and without the seed's testing note."""
    out = json.loads(json.dumps(package))
    for r in out["releases"]:
        for part in [r, *r.get("per_group", [])]:
            part["value"] = "NOISY"
            for key in ("noisy_sum", "noisy_count"):
                if key in (part.get("details") or {}):
                    part["details"][key] = "NOISY"
    return out


@pytest.mark.parametrize("plan", [PLAN, PLAN_BY], ids=["plan", "by-group plan"])
def test_plan_pages_on_neighbours_differ_only_in_noisy_values(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plan: dict[str, str]) -> None:
    """The same workspace path holding D, then D' (one person's row changed), the same seed:
    every page and every file of the package is the same but for the noisy values (the
    results page included; a by-group plan's groups are the declared ones)."""
    from privlab.studio import plan as sp

    monkeypatch.setattr(sp, "run", functools.partial(sp.run, rng=7))
    lines = PEOPLE_CSV.splitlines(keepends=True)
    neighbour = "".join(lines[:5] + ["99,F,Kyiv,4999\n"] + lines[6:])
    seen, values = [], []
    for n, text in enumerate((PEOPLE_CSV, neighbour)):
        ws = tmp_path / "ws"
        if n:
            import shutil

            shutil.rmtree(ws)
        ws.mkdir()
        (ws / "people.csv").write_text(text, encoding="utf-8")
        client, csrf = people_client(ws)
        pages = [client.get("/plan", params=plan).text]
        files = package_of(client.post("/plan/run", data={"csrf": csrf, **plan}))
        pages += [client.get("/plan").text, client.get("/results").text]
        rid = re.search(r"/plans/([0-9a-f]+)/", pages[1]).group(1)
        package = json.loads(files["release.json"])
        values.append([r["value"] for r in package["releases"]])
        files["release.json"] = json.dumps(strip_values(package))
        # the session's CSRF token and the package's id are random, not data
        seen.append(json.loads(json.dumps([pages, files]).replace(csrf, "CSRF")
                               .replace(rid, "RID")))
    assert values[0] != values[1]  # the changed row moved the mean and a city's count
    assert seen[0] == seen[1]


VISITS = {"name": "visits", "privacy_unit": "pid", "max_rows_per_unit": 3, "columns": {
    "pid": {"type": "identifier"}, "age": {"type": "integer", "bounds": [0, 99], "bins": 4},
    "score": {"type": "numeric", "bounds": [-1, 1]},
    "sex": {"type": "categorical", "categories": ["F", "M"], "other": True}}}


def test_the_single_release_uses_the_measurements_domain(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31, item 2: `protect.domain_of` is the measurement layer's domain and relation
    (it re-derived them: the two could drift), for every released column and statistic."""
    import importlib

    from privlab.schema import bundled_schema, parse_schema
    from privlab.studio import protect as prot

    mm = importlib.import_module("privlab.measure.measurement")  # the module, not the function
    for schema in (bundled_schema("adult"), parse_schema(VISITS)):
        for col in schema.released_columns():
            for stat in ("count", "mean", "histogram"):
                plan = prot.Plan(stat, col.name, 2.0)
                try:
                    m = mm.measurement(schema, stat, col.name, epsilon=2.0)
                except Exception as exc:  # refused by both, in the measurement's words
                    with pytest.raises(type(exc), match=re.escape(str(exc))):
                        prot.domain_of(schema, plan)
                    continue
                d = prot.domain_of(schema, plan)
                cats = list(m.domain.categories) if m.domain.categories else None
                assert (d.bounds, d.categories, d.bins, d.integer) == (
                    m.domain.bounds, cats, m.domain.bins, m.domain.integer), (stat, col.name)
                assert (d.unit, d.per_unit) == ((m.relation.unit, m.relation.steps)
                                                if m.relation.unit else (None, 1))
    # one definition: what the measurement layer states is what the studio uses
    real = mm._domain
    monkeypatch.setattr(mm, "_domain", lambda *a: dataclasses.replace(real(*a),
                                                                     bounds=(3.0, 7.0)))
    assert prot.domain_of(parse_schema(VISITS), prot.Plan("mean", "age", 1.0)).bounds == \
        (3.0, 7.0)


def test_a_plan_package_keeps_hostile_names_out_of_code(tmp_path: Path) -> None:
    """Column, category, person and file names that are Python or shell: the plan's
    reproduce.py and reproduce.sh run (this checkout's CLI through a shim), rerun the same
    statistics, and no marker file appears."""
    import os
    import subprocess
    import sys

    from test_studio_generated_files import (
        CATEGORIES,
        ODD,
        PY,
        SH,
        SRC,
        ZIP,
        hostile_table,
        no_marker,
        schema,
    )

    from privlab.core.ledger import BudgetLedger
    from privlab.studio import plan as sp
    from privlab.studio.sources import Source

    ws = tmp_path / "ws"
    ws.mkdir()
    source = Source("workspace", "data.parquet", hostile_table(ws))
    q = {"stat0": "count", "stat1": "mean", "col1": PY, "by1": ZIP, "stat2": "histogram",
         "col2": ZIP,
         "stat3": "sum", "col3": ODD, "stat4": "variance", "col4": SH, "epsilon": "2"}
    analysis = sp.analysis_of(schema(per_person=True), q)
    with BudgetLedger(str(tmp_path / "ledger.db")) as ledger:
        ledger.set_budget(source.principal, 100.0, 0.0)
        result = sp.run(analysis, source, bundled=False, ledger=ledger,
                        principal=source.principal)
    folder = tmp_path / "package"
    folder.mkdir()
    for name, text in result.files.items():
        (folder / name).write_text(text, encoding="utf-8")
    script = result.files["reproduce.py"]
    code = "\n".join(line for line in script.splitlines() if not line.startswith("P = "))
    for name in (PY, ZIP, SH, ODD, str(source.path)):
        assert name not in code, name
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    run_cli = "import sys; from privlab.cli.main import main; sys.exit(main(sys.argv[1:]))"
    (bin_dir / "privlab").write_text(f"#!/bin/sh\nexec {sys.executable} -c '{run_cli}' "
                                     "\"$@\"\n", encoding="utf-8")
    (bin_dir / "privlab").chmod(0o755)
    env = {**os.environ, "PYTHONPATH": SRC, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    columns = [(s, c) for s, c, _ in result.summary]
    for command in ([sys.executable, "reproduce.py"], ["sh", "reproduce.sh"]):
        run = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                             timeout=180)
        assert run.returncode == 0, run.stderr
        again = json.loads((folder / "rerun" / "release.json").read_text(encoding="utf-8"))
        assert [(r["statistic"], (r["column"] or "rows") + (f" by {r['by']}" if r.get("by")
                                                            else "")) for r in
                again["releases"]] == columns
        assert again["releases"][1]["groups"][:len(CATEGORIES)] == CATEGORIES  # by ZIP
        assert again["guarantee"]["epsilon"] == 2.0
        no_marker(folder, ws, tmp_path)
        (folder / "rerun" / "release.json").unlink()


def test_a_plan_past_the_budget_is_refused_and_charges_nothing(workspace: Path) -> None:
    from privlab.core.ledger import BudgetLedger

    client, csrf = people_client(workspace)
    refused = client.post("/plan/run", data={"csrf": csrf, **PLAN, "epsilon": "11"})
    assert refused.url.path == "/plan" and "budget exceeded: nothing was released" in \
        refused.text  # the studio's budget is 10
    bad = client.post("/plan/run", data={"csrf": csrf, **PLAN, "col1": "sex"})
    assert html.unescape(bad.text).count("statistic 2: column 'sex' is declared categorical")\
        == 1  # said once, in the page's own words
    no_token = client.post("/plan/run", data={**PLAN})
    assert no_token.status_code == 403
    with BudgetLedger(str(workspace / ".privlab-studio" / "ledger.db")) as book:
        assert book.history("workspace:people.csv") == []
