"""What a new user hit: every case gives one line (error or warning) and a documented exit code."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from privlab.cli.main import EXIT_CODES, main


@pytest.fixture
def ages(tmp_path):
    path = tmp_path / "ages.csv"
    pd.DataFrame({"age": list(range(20, 80)) * 5}).to_csv(path, index=False)  # 300 rows
    return path


def _lines(text: str) -> list[str]:
    return [ln for ln in text.strip().splitlines() if ln.strip()]


def test_exit_codes_are_documented_in_help(capsys):
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Exit codes" in out
    for code in (1, 2, 3, 4, 5):
        assert code in EXIT_CODES
    assert "could not be reached" in out and "wrong API key" in out


@pytest.mark.parametrize("stat,extra,words", [
    ("mean", ["--bounds", "0:100"], "ratio of a noisy sum"),
    ("quantile", ["--bounds", "0:100"], "exponential mechanism"),
])
def test_half_width_is_explained_not_none(ages, capsys, stat, extra, words):
    assert main(["release", stat, str(ages), "-c", "age", "-e", "1", "--seed", "1", *extra]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "half-width: None" not in out and words in out


def test_huge_epsilon_warns_in_one_line(ages, capsys):
    assert main(["release", "count", str(ages), "-c", "age", "-e", "1e9", "--seed", "1"]) == 0
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("warning: --epsilon 1e+09 is weak")


@pytest.mark.parametrize("delta", ["0.5", "0.01", "0.004"])
def test_weak_gaussian_delta_is_refused_with_exit_4(ages, capsys, delta):
    # 0.5 and 0.01 are above 1e-3; 0.004 is also >= 1/n = 1/300 (the declared public size)
    code = main(["release", "count", str(ages), "-c", "age", "-e", "1", "-m", "gaussian",
                 "--delta", delta, "--public-size", "300"])
    assert code == 4 and "unsafe configuration" in EXIT_CODES[4]
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("error: --delta") and "--allow-weak" in err[0]


def test_allow_weak_accepts_the_delta_with_a_warning(ages, capsys):
    code = main(["release", "count", str(ages), "-c", "age", "-e", "1", "-m", "gaussian",
                 "--delta", "0.01", "--allow-weak", "--seed", "1", "--public-size", "300"])
    assert code == 0
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("warning: --delta 0.01 accepted")


def test_a_normal_delta_is_accepted_silently(ages, capsys):
    code = main(["release", "count", str(ages), "-c", "age", "-e", "1", "-m", "gaussian",
                 "--delta", "1e-6", "--seed", "1", "--public-size", "300"])
    assert code == 0 and capsys.readouterr().err == ""


@pytest.mark.parametrize("w", ["2", "-0.5"])
def test_w_risk_outside_unit_interval_is_refused(ages, capsys, w):
    code = main(["choose-epsilon", str(ages), "--target", "age", "--w-risk", w])
    assert code == 2
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and "--w-risk must be a weight in [0, 1]" in err[0]


def test_demo_out_pointing_at_a_file_is_a_one_line_error(tmp_path, capsys):
    f = tmp_path / "taken.txt"
    f.write_text("x")
    assert main(["demo", "--out", str(f), "--epsilons", "none"]) == 2
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("error: --out") and "is a file" in err[0]
    assert f.read_text() == "x"


def test_serve_without_the_server_extra_names_the_install_command(monkeypatch, capsys,
                                                                 tmp_path):
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert main(["serve", "--config", str(tmp_path / "g.yaml")]) == 5
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and "pip install 'privlab[server]'" in err[0]
    assert "internal error" not in err[0]


def test_reversed_bbox_is_refused(tmp_path, capsys):
    code = main(["trajectory", "experiment", "--bbox", "40.1,116.5,39.8,116.2",
                 "--windows", "2", "--epsilons", "1"])
    assert code == 2
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and "--bbox" in err[0]


def test_piped_progress_prints_plain_lines(capsys, monkeypatch):
    """A piped stderr gets plain lines when asked (PRIVLAB_PROGRESS=1, for logs): no clock in
    them (stderr is compared between neighbouring tables), nothing without it."""
    from privlab.cli import common
    from privlab.cli.progress import reporter

    monkeypatch.setattr(type(common.err_console), "is_terminal", property(lambda self: False))
    monkeypatch.setenv("PRIVLAB_PROGRESS", "1")
    with reporter("choose-epsilon", as_json=False) as progress:
        progress("training 8 DP model(s)", 1, 3)
    err = capsys.readouterr().err
    assert err == "progress: choose-epsilon: training 8 DP model(s) 1/3\n"
    monkeypatch.delenv("PRIVLAB_PROGRESS")
    with reporter("choose-epsilon", as_json=False) as progress:
        progress("training 8 DP model(s)", 1, 3)
    assert capsys.readouterr().err == ""
    with reporter("x", as_json=True) as quiet:
        quiet("nothing", 0, 1)
    assert capsys.readouterr().err == ""


def test_demo_shows_its_tables_before_the_epsilon_step(tmp_path, capsys, monkeypatch):
    from privlab.cli import demo

    seen = {}

    def fake_step(frame, epsilons, out, seed, show):
        seen["stdout"] = capsys.readouterr().out
        return {"skipped": "test"}

    monkeypatch.setattr(demo, "_choose_epsilon_step", fake_step)
    assert main(["demo", "--out", str(tmp_path / "d"), "--seed", "1"]) == 0
    before = " ".join(seen["stdout"].split())
    assert "DP releases on UCI Adult" in before and "budget left" in before
    assert "Which attributes identify people" in before


def test_unreachable_gateway_is_exit_1_in_one_line(capsys):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = main(["query", "--url", f"http://127.0.0.1:{port}", "--key", "k", "--budget"])
    assert code == 1 and "could not be reached" in EXIT_CODES[1]
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("error: gateway") and "unreachable" in err[0]


def test_pdf_needs_a_report_and_chromium(tmp_path, capsys, monkeypatch, ages):
    code = main(["choose-epsilon", str(ages), "--target", "age", "--pdf"])
    assert code == 2
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and "--pdf prints the HTML report: give --report" in err[0]
    from privlab.report import pdf

    monkeypatch.setattr(pdf, "find_browser", lambda: None)
    code = main(["demo", "--out", str(tmp_path / "d"), "--pdf", "--epsilons", "none"])
    assert code == 5 and "optional extra" in EXIT_CODES[5]
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and "apt-get install chromium" in err[0]
    assert not (tmp_path / "d").exists()  # refused before any work


@pytest.fixture
def mixed(tmp_path):
    """120 rows with a text column (city) next to a number and a 0/1 label."""
    path = tmp_path / "mixed.csv"
    pd.DataFrame({"age": [20 + i % 50 for i in range(120)],
                  "city": [("a", "b", "c")[i % 3] for i in range(120)],
                  "label": [i % 2 for i in range(120)]}).to_csv(path, index=False)
    return path


def test_text_feature_error_names_the_cli_option_not_the_python_parameter(mixed, capsys):
    code = main(["train", str(mixed), "--target", "label", "--unsafe-encoding", "-e", "1",
                 "--epochs", "1"])
    err = _lines(capsys.readouterr().err)
    assert code == 2 and len(err) == 1
    assert err[0].startswith("error: feature column 'city' is not numeric")
    assert "--one-hot" in err[0]
    assert "one_hot" not in err[0] and "TablePreprocessor" not in err[0]


def test_too_large_batch_names_the_cli_option(mixed, capsys):
    pytest.importorskip("torch", reason="needs the ml extra: pip install -e '.[ml]'")
    code = main(["audit", str(mixed), "-t", "label", "--unsafe-encoding", "--no-dp",
                 "--batch-size", "1000"])
    err = _lines(capsys.readouterr().err)
    assert code == 2 and len(err) == 1
    assert "--batch-size 1000 is larger than the training set" in err[0]
    assert "batch_size" not in err[0]


def test_max_risk_out_of_range_names_the_cli_option(mixed, capsys):
    code = main(["choose-epsilon", str(mixed), "--target", "label", "--max-risk", "2"])
    err = _lines(capsys.readouterr().err)
    assert code == 2 and len(err) == 1 and err[0].startswith("error: --max-risk: must be in [0, 1]")


def test_library_callers_keep_the_python_names():
    """Outside the CLI the same checks name the Python parameters a caller passed."""
    from privlab.errors import InvalidInputError
    from privlab.learn.data import TablePreprocessor, check_batch_size

    with pytest.raises(InvalidInputError, match=r"^batch_size=1000 is larger"):
        check_batch_size(1000, 24)
    frame = pd.DataFrame({"age": [30, 40], "city": ["a", "b"]})
    with pytest.raises(InvalidInputError, match=r"one_hot=True \(CLI: --one-hot\)"):
        TablePreprocessor().fit(frame)


def test_error_names_follow_the_caller():
    """`option_name` gives the CLI option inside `cli_context`, the parameter outside and
    inside `library_context` (what `privlab serve` runs its requests under)."""
    from privlab.errors import cli_context, library_context, option_name, setting

    assert option_name("batch_size", "--batch-size") == "batch_size"
    with cli_context():
        assert option_name("batch_size", "--batch-size") == "--batch-size"
        assert setting("batch_size", "--batch-size", 64) == "--batch-size 64"
        with library_context():
            assert setting("batch_size", "--batch-size", 64) == "batch_size=64"
        assert option_name("max_risk", "--max-risk") == "--max-risk"
    assert option_name("max_risk", "--max-risk") == "max_risk"
