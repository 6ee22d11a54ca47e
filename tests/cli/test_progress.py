"""Progress of long steps (issue 23): `privlab.cli.progress` on every long command.

PRIVLAB_PROGRESS=1 forces plain, deterministic `progress: NAME: STAGE DONE/TOTAL` lines on
stderr (with or without --json), PRIVLAB_PROGRESS=0 silences them; stdout stays one JSON
document either way, and the text is identical on neighbouring tables.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from privlab.cli.main import main

LINE = re.compile(r"^progress: (?P<name>[^:]+): (?P<stage>.*?)(?: (?P<done>\d+)/(?P<total>\d+))?$")


def _progress(err: str) -> list[re.Match[str]]:
    return [m for ln in err.splitlines() if (m := LINE.match(ln))]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         value: str) -> tuple[dict, str]:
    monkeypatch.setenv("PRIVLAB_PROGRESS", value)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err  # one valid JSON document, nothing else on stdout


# (argv, the progress name, a stage that must appear): the cheapest options of each command
COMMANDS = [
    (["train", "classification", "--model", "logreg", "--method", "dpsgd", "--epochs", "2",
      "--epsilon", "2", "--seed", "0", "--json"], "train", "logreg (dpsgd) epoch"),
    (["choose-epsilon", "classification", "--model", "logreg", "--epsilons", "1,4",
      "--seeds", "1", "--epochs", "1", "--shadow-models", "1", "--attacks", "loss",
      "--seed", "0", "--json"], "choose-epsilon", "attacking the eps=4 model"),
    (["federated", "train", "--rounds", "2", "--epsilon", "4", "--seed", "0", "--no-eval",
      "--json"], "federated train", "round"),
    (["trajectory", "experiment", "--windows", "2", "--epsilons", "1,2", "--settings",
      "planar", "--seed", "0", "--json"], "trajectory experiment", "RMSE table cell"),
    (["audit", "classification", "--epsilon", "2", "--epochs", "1", "--attacks", "loss",
      "--members", "100", "--model", "logreg", "--seed", "0", "--json"], "audit",
     "training the target, epoch"),
]


@pytest.mark.parametrize("argv,name,stage", COMMANDS, ids=[c[1] for c in COMMANDS])
def test_long_commands_report_progress_on_stderr_only(argv, name, stage, capsys, monkeypatch,
                                                      skip_without_ml):
    skip_without_ml(argv[0])
    _, err = _run(argv, capsys, monkeypatch, "1")
    lines = [m for m in _progress(err) if m["name"] == name]
    assert any(m["stage"].startswith(stage) for m in lines), err
    counted = [m for m in lines if m["total"]]
    assert counted and counted[-1]["done"] == counted[-1]["total"], err
    assert "\x1b" not in err  # plain lines: no ANSI codes in a log
    _, quiet = _run(argv, capsys, monkeypatch, "0")
    assert not _progress(quiet) and "progress:" not in quiet


def test_assess_reports_each_combination_size(tmp_path: Path, capsys, monkeypatch):
    from privlab.data.datasets import load_dataset

    data = tmp_path / "adult.csv"
    load_dataset("adult").head(300).to_csv(data, index=False)
    argv = ["assess", str(data), "--max-combination-size", "3", "--quasi-identifiers",
            "age,sex,race", "--json"]
    _, err = _run(argv, capsys, monkeypatch, "1")
    lines = [(m["stage"], m["done"], m["total"]) for m in _progress(err)]
    assert lines == [("encoding attributes", "0", "5"), ("domain richness", "1", "5"),
                     ("risky combinations of 2 attributes", "2", "5"),
                     ("risky combinations of 3 attributes", "3", "5"),
                     ("privacy models", "4", "5"), ("done", "5", "5")], err
    _, quiet = _run(argv, capsys, monkeypatch, "0")
    assert "progress:" not in quiet


def test_demo_reports_each_step(tmp_path: Path, capsys, monkeypatch):
    argv = ["demo", "--out", str(tmp_path / "demo"), "--epsilons", "none", "--seed", "0",
            "--json"]
    _, err = _run(argv, capsys, monkeypatch, "1")
    lines = [m for m in _progress(err) if m["name"] == "demo"]
    stages = [m["stage"] for m in lines]
    assert stages[0].startswith("DP release") and "assessment" in stages
    assert "writing the report" in stages
    # 7 releases (stddev since issue 31), the assessment, the report
    assert (lines[-1]["done"], lines[-1]["total"]) == ("9", "9"), err
    _, quiet = _run(argv, capsys, monkeypatch, "0")
    assert "progress:" not in quiet


def test_train_progress_is_identical_on_neighbouring_tables(tmp_path: Path, capsys,
                                                            monkeypatch, skip_without_ml):
    """Progress goes to stderr, which the neighbour fuzz compares byte for byte: it may show
    only what the options fix (epochs), never a batch or row count, and no timings."""
    skip_without_ml("train")
    from privlab.data.datasets import load_dataset

    frame = load_dataset("adult").head(200).reset_index(drop=True)
    other = frame.copy()
    other.loc[0, "age"] = 90 if frame.loc[0, "age"] != 90 else 17
    other.loc[0, "salary"] = ">50K" if frame.loc[0, "salary"] == "<=50K" else "<=50K"
    errs = []
    for i, table in enumerate((frame, other)):
        path = tmp_path / f"d{i}.csv"
        table.to_csv(path, index=False)
        _, err = _run(["train", str(path), "--schema", "adult", "--target", "salary",
                       "--model", "mlp", "--epochs", "3", "--epsilon", "2", "--seed", "0",
                       "--json"], capsys, monkeypatch, "1")
        errs.append(err)
    progress = [[m.group(0) for m in _progress(e)] for e in errs]
    assert progress[0] == [f"progress: train: mlp (dpsgd) epoch {e}/3" for e in (1, 2, 3)]
    assert progress[0] == progress[1]
    assert errs[0] == errs[1]


def test_mode_follows_the_environment_json_and_terminal(monkeypatch):
    from privlab.cli import common
    from privlab.cli.progress import progress_mode

    monkeypatch.setattr(type(common.err_console), "is_terminal", property(lambda self: False))
    monkeypatch.delenv("PRIVLAB_PROGRESS", raising=False)
    assert progress_mode(False) == "off"  # piped stderr: nothing unless asked
    monkeypatch.setattr(type(common.err_console), "is_terminal", property(lambda self: True))
    assert progress_mode(False) == "bar"
    assert progress_mode(True) == "off"  # --json
    monkeypatch.setenv("PRIVLAB_PROGRESS", "1")
    assert progress_mode(True) == "plain"
    monkeypatch.setenv("PRIVLAB_PROGRESS", "0")
    assert progress_mode(False) == "off"


def test_plain_lines_are_rate_limited_and_deterministic(capsys, monkeypatch):
    from privlab.cli.progress import reporter

    monkeypatch.setenv("PRIVLAB_PROGRESS", "1")
    with reporter("x", True) as report:
        for i in range(1001):
            report("step", i, 1000)
        report("next", 0, 0)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "progress: x: step 0/1000" and err[-2] == "progress: x: step 1000/1000"
    assert len(err) == 12 and err[-1] == "progress: x: next"


def test_synth_reports_its_stages(tmp_path: Path, capsys, monkeypatch):
    """synth uses the same module (it had a terminal-only spinner of its own): MST's stages
    arrive as plain lines under PRIVLAB_PROGRESS=1, and not at all under 0."""
    from privlab.data.datasets import load_dataset

    data = tmp_path / "adult.csv"
    load_dataset("adult").head(3000).to_csv(data, index=False)
    argv = ["synth", str(data), "--schema", "adult", "--on-invalid", "coerce", "-m", "mst",
            "-e", "8", "-n", "50", "-o", str(tmp_path / "s.csv"), "--seed", "0", "--json"]
    _, err = _run(argv, capsys, monkeypatch, "1")
    stages = {m["stage"] for m in _progress(err) if m["name"] == "synth mst"}
    assert {"domain", "1-way marginals", "2-way marginals"} <= stages, err
    _, quiet = _run(argv, capsys, monkeypatch, "0")
    assert "progress:" not in quiet
