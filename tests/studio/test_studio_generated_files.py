"""Every file a release package holds (reproduce.py, reproduce.sh, README.txt, report.html)
rendered for columns, categories, a person column and a data file whose names are hostile
(quotes, newlines, backslashes, `{}`, unicode, Python and shell), and the two scripts RUN:
the names can change values, never code (issue #30, item 1: a column named
`k'+str(__import__('pathlib').Path('PWNED').touch())+'` used to run that code)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from privlab.core.ledger import BudgetLedger
from privlab.schema import parse_schema
from privlab.studio import protect as prot
from privlab.studio.sources import Source

SRC = str(Path(__file__).resolve().parents[2] / "src")
#: The issue's column name: in the old reproduce.py it closed the string and ran Python.
PY = "k'+str(__import__('pathlib').Path('PWNED').touch())+'"
#: Broke the old script (a quote in the middle).
ZIP = "zip'code"
#: Shell: would run if a name reached reproduce.sh unquoted.
SH = "$(touch PWNED_SH)`touch PWNED_BT`;touch PWNED_SEMI"
#: Everything else: double quote, newline, backslash, braces (str.format), unicode.
ODD = 'say "hi"\n{column}{}\\n \\ ünï ☃ 名'
#: The person column and a data file name with quotes and shell syntax.
PERSON = "p'id\"\\"
FILE_NAME = "it's $(touch PWNED_F) `x` {}.parquet"
CATEGORIES = ["a'b", 'q"x{}', "two\nlines", "back\\slash", "ünï☃", "')+print('PWNED')+('"]


def hostile_table(folder: Path) -> Path:
    """Parquet: it keeps any column name (a CSV reader splits a header at its newline)."""
    import pandas as pd

    path = folder / FILE_NAME
    rows = range(80)
    pd.DataFrame({PERSON: [f"u{i % 30}" for i in rows], PY: [20 + (i * 7) % 60 for i in rows],
                  ZIP: [CATEGORIES[i % len(CATEGORIES)] for i in rows],
                  SH: [i % 5 for i in rows], ODD: [1000.0 + (i * 37) % 900 for i in rows]}
                 ).to_parquet(path, index=False)
    return path


def schema(per_person: bool) -> Any:
    spec: dict[str, Any] = {"name": "hostile", "columns": {
        PERSON: {"type": "identifier"},
        PY: {"type": "integer", "bounds": [0, 99]},
        ZIP: {"type": "categorical", "categories": CATEGORIES},
        SH: {"type": "integer", "bounds": [0, 10]},
        ODD: {"type": "numeric", "bounds": [0, 5000]}}}
    if per_person:
        spec |= {"privacy_unit": PERSON, "max_rows_per_unit": 2}
    return parse_schema(spec)


#: (statistic, column, by, per person): every branch of the script's code.
PLANS = [("mean", PY, None, True), ("histogram", ZIP, None, False), ("count", SH, None, True),
         ("sum", ODD, None, False), ("mean", PY, ZIP, True), ("variance", ODD, None, True),
         ("stddev", PY, ZIP, False)]


def no_marker(*folders: Path) -> None:
    for folder in folders:
        found = sorted(p.name for p in folder.rglob("PWNED*"))
        assert found == [], f"hostile names ran code: {found} in {folder}"


def render(tmp_path: Path) -> tuple[Path, list[tuple[prot.Result, Path]]]:
    """Each plan released (the studio's own `protect.release`) and its package written."""
    ws = tmp_path / "ws"
    ws.mkdir()
    data = hostile_table(ws)
    frame = Source("workspace", data.name, data).load()
    ledger = BudgetLedger(str(tmp_path / "ledger.db"))
    source = Source("workspace", data.name, data)
    ledger.set_budget(source.principal, 100.0, 1e-5)
    out = []
    for i, (stat, column, by, per_person) in enumerate(PLANS):
        plan = prot.Plan(stat, column, 1.0, by=by)
        result, _ = prot.release(frame, schema(per_person), plan, ledger=ledger,
                                 principal=source.principal, source=source)
        folder = tmp_path / f"package-{i}"
        folder.mkdir()
        for name, text in prot.package_files(result).items():
            (folder / name).write_text(text, encoding="utf-8")
        out.append((result, folder))
    ledger.close()
    return ws, out


def test_generated_files_keep_hostile_names_out_of_code(tmp_path: Path) -> None:
    ws, packages = render(tmp_path)
    for result, folder in packages:
        script = (folder / "reproduce.py").read_text(encoding="utf-8")
        compile(script, "reproduce.py", "exec")  # `zip'code` made it a syntax error
        # no name of the data appears in the code: only inside the one JSON literal
        code = "\n".join(line for line in script.splitlines() if not line.startswith("P = "))
        for name in (PY, ZIP, SH, PERSON, "ünï", FILE_NAME):
            assert name not in code, name
        report = (folder / "report.html").read_text(encoding="utf-8")
        assert "')+print('PWNED')" not in report or result.statistic != "histogram"
        assert "<script" not in report.replace('<script type="application/json"', "")
        readme = (folder / "README.txt").read_text(encoding="utf-8")
        assert readme.startswith("privlab studio release")
        shell = (folder / "reproduce.sh").read_text(encoding="utf-8")
        assert shell.startswith("#!/bin/sh\nset -e\n")
    # the scripts run: right output, no marker file anywhere
    env = {**os.environ, "PYTHONPATH": SRC}
    for result, folder in packages:
        run = subprocess.run([sys.executable, "reproduce.py"], cwd=folder, env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        again = json.loads(run.stdout)
        assert again["column"] == result.column and again["statistic"] == result.statistic
        assert again["guarantee"] == result.guarantee  # the studio's guarantee, rerun
        if result.statistic == "histogram":
            assert again["details"]["labels"] == CATEGORIES
        if "by" in again:
            assert again["by"] == ZIP and again["groups"][:len(CATEGORIES)] == CATEGORIES
        no_marker(folder, ws, tmp_path)


@pytest.mark.skipif(sys.platform == "win32", reason="reproduce.sh is a POSIX shell script")
def test_reproduce_sh_runs_with_hostile_names(tmp_path: Path) -> None:
    """reproduce.sh runs the privlab CLI (a shim on PATH runs this checkout's) with every
    name shell-quoted: the same release, and no marker file."""
    ws, packages = render(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "privlab"
    run_cli = "import sys; from privlab.cli.main import main; sys.exit(main(sys.argv[1:]))"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -c '{run_cli}' \"$@\"\n",
                    encoding="utf-8")
    shim.chmod(0o755)
    python = bin_dir / "python"  # a by-group reproduce.sh runs `python reproduce.py`
    python.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n", encoding="utf-8")
    python.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": SRC,
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    for result, folder in packages[:2] + packages[-1:]:  # mean, histogram, by group
        run = subprocess.run(["sh", "reproduce.sh"], cwd=folder, env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        again = json.loads(run.stdout)
        assert again["column"] == result.column and again["statistic"] == result.statistic
        no_marker(folder, ws, tmp_path)
