"""Issue 30, "wrong or missing": choose-epsilon on a workspace file, the schema review (every
key of the CLI schema, categories one per line, only the columns an analysis uses, pages that
scale to thousands of columns), the upload errors, the mean's half-width, the clamping text
and the favicon."""

from __future__ import annotations

import time
from pathlib import Path

from studio_helpers import csrf_of, make_client

from privlab.studio import StudioConfig

SCHEMA_YAML = """name: people
columns:
  age: {type: integer, bounds: [0, 120]}
  sex: {type: categorical, categories: [F, M]}
  city: {type: categorical, categories: [Ankara, Izmir, Kyiv]}
  income: {type: integer, bounds: [0, 5000]}
"""


def people_rows(n: int) -> str:
    return "age,sex,city,income\n" + "".join(
        f"{20 + (i * 7) % 50},{['F', 'M'][i % 2]},{['Ankara', 'Izmir', 'Kyiv'][i % 3]},"
        f"{1000 + (i * 37) % 900}\n" for i in range(n))


def test_choose_epsilon_on_a_workspace_file_gets_its_reviewed_schema(workspace: Path) -> None:
    """Item 10: the job was started without --schema, so the CLI refused every workspace
    file ("choose-epsilon needs --schema"); it now gets the session's reviewed schema and
    runs to its report."""
    from privlab.schema import load_schema
    from privlab.studio.routes.choose import choose_command

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
    (workspace / "big.schema.yaml").write_text(SCHEMA_YAML, encoding="utf-8")
    app_client.post("/data/select", data={"csrf": csrf, "kind": "workspace",
                                          "path": "big.csv"})
    refused = app_client.post("/choose", data={**form, "target": "age"}).text
    assert "target: choose the label column, a categorical column" in refused
    r = app_client.post("/choose", data=form)
    jid = str(r.url).rsplit("/", 1)[1]
    assert "Choose epsilon: logreg on" in r.text
    deadline = time.time() + 180
    while (status := app_client.get(f"/jobs/{jid}/status").json())["state"] in (
            "starting", "running"):
        assert time.time() < deadline, status
        time.sleep(0.3)
    assert status["state"] == "done", status
    assert "Choosing epsilon" in app_client.get(f"/jobs/{jid}/choose_epsilon.html").text
    # the command line: the reviewed schema beside the data, coerced like the model job's
    schema = load_schema(workspace / "big.schema.yaml")
    source = app_client.app.state.store.all()[0].source
    args, files = choose_command(source, schema, {
        "target": "sex", "model": "logreg", "policy": "finance", "epsilons": "1",
        "seeds": "1", "max_rows": "200"})
    assert args[:6] == ["choose-epsilon", str((workspace / "big.csv").resolve()), "--schema",
                        "schema.yaml", "--on-invalid", "coerce"]
    assert args[-2:] == ["--target", "sex"] and files == {"schema.yaml": schema.to_yaml()}
