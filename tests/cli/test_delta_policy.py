"""Issue 23, one delta policy in every command: each command that takes --delta refuses a
weak one (above 1e-3, or not below 1/public size) with exit 4 and one line, before any row is
read and without writing anything, unless --allow-weak."""

from __future__ import annotations

import pytest
from test_grammar import _commands, _options

from privlab.cli.main import main


def _with_delta() -> set[str]:
    return {name for name, cmd in _commands().items()
            if any("--delta" in p.opts for p in _options(cmd))}


def test_every_command_with_delta_takes_allow_weak() -> None:
    missing = [name for name, cmd in _commands().items()
               if any("--delta" in p.opts for p in _options(cmd))
               and not any("--allow-weak" in p.opts for p in _options(cmd))]
    assert missing == []


# the cheapest invocation of each command; {tmp}: the folder that must stay empty
WEAK = {
    "train": ["train", "classification", "--model", "logreg", "-e", "1", "--save",
              "{tmp}/m.pkl"],
    "audit": ["audit", "classification", "-e", "1", "--epochs", "1", "--report",
              "{tmp}/r.html"],
    "choose-epsilon": ["choose-epsilon", "classification", "--epochs", "1", "--report",
                       "{tmp}/r.html"],
    "query": ["query", "--url", "http://127.0.0.1:9", "-e", "1",
              "SELECT COUNT(*) FROM adult"],
    "release": ["release", "count", "{csv}", "-c", "age", "-e", "1", "--mechanism", "gaussian",
                "--ledger", "{tmp}/ledger.db", "--principal", "alice"],
    "synth": ["synth", "{csv}", "-m", "mst", "--schema", "adult", "-n", "20", "-e", "1",
              "--out", "{tmp}/s.csv"],
    "budget set": ["budget", "set", "--ledger", "{tmp}/ledger.db", "--principal", "alice",
                   "-e", "1"],
    "federated train": ["federated", "train", "-e", "1", "--rounds", "1"],
    "federated serve": ["federated", "serve", "-e", "1", "--rounds", "1",
                        "--connect-timeout", "1"],
}


def test_the_weak_delta_table_covers_every_command_with_delta() -> None:
    assert set(WEAK) == _with_delta()


@pytest.mark.parametrize("name", sorted(WEAK))
def test_weak_delta_is_refused_before_anything_is_read_or_written(
        name, tmp_path, adult_csv, monkeypatch, capsys, skip_without_ml) -> None:
    if name == "audit":
        skip_without_ml(name)  # a missing extra is refused first (exit 5)
    monkeypatch.chdir(tmp_path)  # a default output would land here too
    argv = [a.format(tmp=tmp_path, csv=adult_csv) for a in WEAK[name]] + ["--delta", "0.5"]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 4, err
    assert len(err) == 1 and err[0].startswith("error: --delta 0.5 is too weak"), err
    assert "--allow-weak" in err[0]
    assert list(tmp_path.iterdir()) == []  # no ledger, lock file, model, report or table


def test_allow_weak_accepts_it_with_one_warning(tmp_path, capsys) -> None:
    code = main(["budget", "set", "--ledger", str(tmp_path / "l.db"), "--principal", "a",
                 "-e", "1", "--delta", "0.01", "--allow-weak"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err.strip().splitlines() == [
        "warning: --delta 0.01 accepted with --allow-weak although it is above 0.001"]


def test_the_check_uses_the_declared_public_size_never_the_rows(tmp_path, capsys) -> None:
    """train with a schema declaring public_size 1000: 0.001 (not below 1/1000) is refused
    whatever DATA holds (here: a file that does not even exist: no row is read)."""
    import yaml

    from privlab.schema import bundled_schema

    doc = bundled_schema("classification").to_dict()
    doc["public_size"] = 1000

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = main(["train", str(tmp_path / "missing.csv"), "--schema", str(path), "-t", "target",
                 "--model", "logreg", "-e", "1", "--delta", "0.001"])
    err = capsys.readouterr().err
    assert code == 4 and "not below 1/n = 0.001 for the public size n = 1000" in err


@pytest.mark.parametrize("delta", ["1", "1.5", "-0.1", "nan"])
def test_a_delta_outside_0_1_is_invalid_input_not_weak(delta, tmp_path, capsys) -> None:
    code = main(["train", "classification", "--model", "logreg", "-e", "1", "--delta", delta,
                 "--save", str(tmp_path / "m.pkl")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: --delta must be"), err
    assert list(tmp_path.iterdir()) == []
