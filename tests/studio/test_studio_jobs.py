"""Long jobs of privlab studio: a privlab CLI command (synth, train, choose-epsilon) in its own
process, progress, cancel (the charge stays), and jobs visible only to the session that
started them."""

from __future__ import annotations

import html
import json
import subprocess
import sys
import time
from pathlib import Path

from studio_helpers import csrf_of, make_client

from privlab.studio import StudioConfig
from privlab.studio.jobs import CommandJob


def test_a_synth_job_is_charged_first_cancellable_and_private(workspace: Path) -> None:
    config = StudioConfig(workspace=workspace)
    from privlab.studio import create_app

    app = create_app(config)
    alice = make_client(app)
    bob = make_client(app)
    csrf = csrf_of(alice)
    alice.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
    r = alice.post("/synth", data={"csrf": csrf, "method": "aim", "epsilon": "2",
                                   "delta": "1e-6", "rows": "100"})  # every column: slow
    jid = str(r.url).rsplit("/", 1)[1]
    assert "Cancel the job" in r.text
    assert app.state.ledger.remaining("bundled:adult")[0] == 8.0  # charged before it ran
    assert bob.get(f"/jobs/{jid}").status_code == 404
    assert bob.get(f"/jobs/{jid}/status").status_code == 404
    assert bob.post(f"/jobs/{jid}/cancel", data={"csrf": csrf_of(bob)}).status_code == 404
    job = next(iter(app.state.store.all()[0].jobs.values()))
    page = alice.post(f"/jobs/{jid}/cancel", data={"csrf": csrf})
    assert "job cancelled" in page.text and "its budget stays spent" in page.text
    assert alice.get(f"/jobs/{jid}/status").json()["state"] == "cancelled"
    assert job.process is None or job.process.poll() is not None  # the child is gone
    assert alice.get(f"/jobs/{jid}/synthetic.csv").status_code == 404
    assert app.state.ledger.remaining("bundled:adult")[0] == 8.0  # the charge stays


def test_bad_synth_and_choose_requests_start_nothing(workspace: Path) -> None:
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
    for data, message in (({"method": "dpgan"}, "method: choose mst or aim"),
                          ({"method": "mst", "delta": "0"}, "delta: the synthesizers need"),
                          ({"method": "mst", "rows": "0"}, "rows: between 1")):
        form = {"csrf": csrf, "epsilon": "1", "delta": "1e-6", "rows": "10", **data}
        assert message in client.post("/synth", data=form).text
    page = client.post("/choose", data={"csrf": csrf, "model": "svm", "epsilons": "1"}).text
    assert "model: choose logreg or mlp" in page
    page = client.post("/choose", data={"csrf": csrf, "epsilons": "1,-2"}).text
    assert "epsilon must be" in page and "Jobs of this session" not in page
    page = client.get("/synth").text
    assert "Jobs of this session" not in page
    assert "<strong>ε = 10</strong>" in page  # nothing was charged


def test_choose_epsilon_runs_as_a_cancellable_command(workspace: Path) -> None:
    client = make_client(StudioConfig(workspace=workspace))
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
    r = client.post("/choose", data={"csrf": csrf, "target": "salary", "model": "logreg",
                                     "policy": "finance", "epsilons": "1,4", "seeds": "1",
                                     "max_rows": "1000"})
    jid = str(r.url).rsplit("/", 1)[1]
    assert "Choose epsilon: logreg on UCI Adult" in r.text
    client.post(f"/jobs/{jid}/cancel", data={"csrf": csrf})
    assert client.get(f"/jobs/{jid}/status").json()["state"] == "cancelled"


def test_command_job_progress_and_failure_are_read_from_its_log(tmp_path: Path) -> None:
    job = CommandJob("j1", tmp_path, "t", [("report.html", "the report")])
    assert job.status()["state"] == "starting"
    (tmp_path / "progress.log").write_text(
        "progress: choose-epsilon: training the baseline 0/3\n"
        "progress: choose-epsilon: attacking the eps=4 model (loss) 2/3\nnote: at chance\n")
    job.state = "running"
    job.process = subprocess.Popen([sys.executable, "-c", "pass"])
    job.process.wait()
    status = job.status()
    assert status["state"] == "done" and status["done"] == status["total"] == 3
    job.process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(5)"])
    job.process.wait()
    with (tmp_path / "progress.log").open("a") as fh:
        fh.write("error: choose-epsilon needs the [ml] extra\n")
    status = job.status()
    assert status["state"] == "failed" and "needs the [ml] extra" in status["error"]
    assert job.file("report.html") == tmp_path / "report.html" and job.file("x.py") is None


def test_a_dp_model_is_charged_first_and_trains_from_the_reviewed_schema(workspace: Path
                                                                         ) -> None:
    from privlab.studio import create_app

    app = create_app(StudioConfig(workspace=workspace))
    client = make_client(app)
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
    page = html.unescape(client.post("/model", data={"csrf": csrf, "target": "age",
                                                     "model": "logreg", "epsilon": "1"}).text)
    assert "target: 'age' is integer; choose a categorical column" in page
    assert app.state.ledger.remaining("bundled:adult")[0] == 10.0  # refused: nothing charged
    r = client.post("/model", data={"csrf": csrf, "target": "salary", "model": "logreg",
                                    "epsilon": "2", "delta": "1e-5"})
    jid = str(r.url).rsplit("/", 1)[1]
    assert "DP model: logreg predicting salary, epsilon 2" in r.text
    assert app.state.ledger.remaining("bundled:adult") == (8.0, 1e-5 - 1e-5)
    job = app.state.store.all()[0].jobs[jid]
    args = job.args  # the privlab command (its process may still be queued)
    assert args[args.index("train") + 1:args.index("train") + 4] == ["adult", "--schema",
                                                                      "adult"]
    client.post(f"/jobs/{jid}/cancel", data={"csrf": csrf})
    assert client.get(f"/jobs/{jid}/status").json()["state"] == "cancelled"
    assert client.get(f"/jobs/{jid}/model.pkl").status_code == 404
    assert app.state.ledger.remaining("bundled:adult")[0] == 8.0  # the charge stays


def test_a_weak_delta_is_refused_before_the_charge(workspace: Path) -> None:
    """Issue 23, one delta policy: the studio's model and synth forms refuse a delta above 1e-3
    (the policy `train` and `synth` apply in the job) before the ledger is charged."""
    from privlab.studio import create_app

    app = create_app(StudioConfig(workspace=workspace))
    client = make_client(app)
    csrf = csrf_of(client)
    client.post("/data/select", data={"csrf": csrf, "kind": "bundled", "name": "adult"})
    for url, form in (("/model", {"target": "salary", "model": "logreg"}),
                      ("/synth", {"method": "mst", "rows": "10"})):
        page = html.unescape(client.post(url, data={"csrf": csrf, "epsilon": "1",
                                                    "delta": "0.5", **form}).text)
        assert "delta 0.5 is too weak" in page, url
        assert "--allow-weak" not in page  # the studio offers no such option
        assert app.state.ledger.remaining("bundled:adult")[0] == 10.0  # nothing charged
        assert app.state.store.all()[0].jobs == {}


VISITS_SCHEMA = """name: visits
privacy_unit: pid
max_rows_per_unit: 2
columns:
  pid: {type: identifier}
  sex: {type: categorical, categories: [F, M]}
  city: {type: categorical, categories: [Ankara, Izmir]}
  age: {type: integer, bounds: [0, 99]}
"""


def test_a_synth_job_on_a_person_schema_is_per_person(workspace: Path) -> None:
    """A synthetic table of a schema whose privacy unit is a person column is the CLI's
    `privlab synth` on that schema: the person column is not dropped with the unchosen
    columns (it was: the guarantee said one record while the ledger charged the data's
    per-person budget, and no per-person row limit applied)."""
    (workspace / "visits.csv").write_text("pid,sex,city,age\n" + "".join(
        f"p{i % 150},{'FM'[i % 2]},{['Ankara', 'Izmir'][i % 3 % 2]},{20 + i % 40}\n"
        for i in range(600)), encoding="utf-8")
    (workspace / "visits.schema.yaml").write_text(VISITS_SCHEMA, encoding="utf-8")

    from privlab.studio import create_app

    app = create_app(StudioConfig(workspace=workspace))
    client = make_client(app)
    csrf = csrf_of(client)
    r = client.post("/data/select", data={"csrf": csrf, "kind": "workspace",
                                          "path": "visits.csv"})
    assert str(r.url).endswith("/protect")  # the reviewed schema beside the file
    r = client.post("/synth", data={"csrf": csrf, "method": "mst", "epsilon": "2",
                                    "delta": "1e-6", "rows": "30",
                                    "columns": ["sex", "city"]})
    jid = str(r.url).rsplit("/", 1)[1]
    job = app.state.store.all()[0].jobs[jid]
    args = job.args  # the privlab command (its process may still be queued)
    assert args[args.index("synth"):args.index("synth") + 4] == [
        "synth", str((workspace / "visits.csv").resolve()), "--schema", "schema.yaml"]
    assert args[args.index("--exclude") + 1] == "age"
    deadline = time.time() + 120
    while client.get(f"/jobs/{jid}/status").json()["state"] in ("starting", "running"):
        assert time.time() < deadline, (job.folder / "progress.log").read_text()
        time.sleep(0.2)
    status = client.get(f"/jobs/{jid}/status").json()
    assert status["state"] == "done", status
    assert status["headline"] == "(2, delta=1e-06)-DP"
    guarantee = json.loads(client.get(f"/jobs/{jid}/result.json").text)["guarantee"]
    assert guarantee["neighbouring"] == "user"
    assert any("each person's rows are bounded to their first 2" in n
               for n in guarantee["notes"]), guarantee
    lines = client.get(f"/jobs/{jid}/synthetic.csv").text.splitlines()
    assert lines[0] == "sex,city" and len(lines) == 31
    assert "progress: synth mst: " in (job.folder / "progress.log").read_text()
