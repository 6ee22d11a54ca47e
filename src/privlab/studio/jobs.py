"""Long jobs (synthetic tables) in their own process, with progress and cancel.

Why a process and not a thread: a synthesizer is CPU-bound Python and NumPy; in a thread it
would hold the interpreter's lock and slow every other session's pages (DP Wizard: 1.5 s ->
72.6 s). A child process at low priority (nice 10) leaves the server responsive; progress is
a small JSON file the child rewrites atomically; cancel terminates the child. The budget is
charged before the child starts: a cancelled job has still spent it (the ledger may
over-count, never under-count)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privlab.utils.atomic import atomic_write_text


@dataclass
class Job:
    """A synthesis job of one session; `folder` holds status.json, synthetic.csv, guarantee."""

    jid: str
    folder: Path
    method: str
    epsilon: float
    delta: float
    rows: int
    columns: list[str]
    source_label: str
    process: Any = None
    started: float = field(default_factory=time.time)
    cancelled: bool = False

    def status(self) -> dict[str, Any]:
        path = self.folder / "status.json"
        try:
            status = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            status = {"state": "starting", "stage": "starting", "done": 0, "total": 1}
        if self.cancelled:
            status["state"] = "cancelled"
        elif status.get("state") in ("starting", "running") and self.process is not None \
                and self.process.poll() not in (None, 0):
            status = {**status, "state": "failed",
                      "error": status.get("error") or "the job stopped unexpectedly"}
        status["elapsed_s"] = round(time.time() - self.started, 1)
        return status

    kind = "synth"

    @property
    def title(self) -> str:
        return (f"Synthetic table: {self.method.upper()}, epsilon {self.epsilon:g}, "
                f"delta {self.delta:g}, {self.rows} rows")

    @property
    def downloads(self) -> list[tuple[str, str]]:
        return [("synthetic.csv", f"the synthetic table (CSV, {self.rows} rows)"),
                ("guarantee.json", "its guarantee (JSON)")]

    @property
    def output(self) -> Path:
        return self.folder / "synthetic.csv"

    @property
    def guarantee_file(self) -> Path:
        return self.folder / "guarantee.json"

    def file(self, name: str) -> Path | None:
        return self.folder / name if name in dict(self.downloads) else None

    def cancel(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.cancelled = True
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
            _write(self.folder, {"state": "cancelled", "stage": "cancelled", "done": 0,
                                 "total": 1})


#: The plain progress line of `privlab.cli.progress` (PRIVLAB_PROGRESS=1, set for the child).
_PROGRESS = re.compile(r"^progress: [^:]+: (?P<stage>.*) (?P<done>\d+)/(?P<total>\d+)$")


@dataclass
class CommandJob:
    """A privlab CLI command run as a job (choose-epsilon): progress from its stderr lines
    (`progress: choose-epsilon: STAGE 1/3`), outputs in its folder."""

    jid: str
    folder: Path
    title: str
    outputs: list[tuple[str, str]]
    process: Any = None
    started: float = field(default_factory=time.time)
    cancelled: bool = False
    kind = "command"

    @property
    def downloads(self) -> list[tuple[str, str]]:
        return self.outputs

    def status(self) -> dict[str, Any]:
        stage, done, total, last = "starting", 0, 1, ""
        try:
            lines = (self.folder / "progress.log").read_text(encoding="utf-8").splitlines()
        except OSError:
            lines = []
        for line in lines:
            m = _PROGRESS.match(line)
            if m:
                done, total, stage = (int(m["done"]), max(int(m["total"]), 1), m["stage"])
            if line.strip():
                last = line.strip()
        rc = None if self.process is None else self.process.poll()
        out: dict[str, Any] = {"stage": stage, "done": done, "total": total,
                               "elapsed_s": round(time.time() - self.started, 1)}
        if self.cancelled:
            out["state"] = "cancelled"
        elif rc is None:
            out["state"] = "running" if lines else "starting"
        elif rc == 0:
            out.update(state="done", stage="done", done=total)
        else:
            errors = [x for x in lines if x.startswith(("error:", "internal error:"))]
            out.update(state="failed", error=(errors or [last or f"exit code {rc}"])[-1])
        return out

    def file(self, name: str) -> Path | None:
        return self.folder / name if name in dict(self.outputs) else None

    cancel = Job.cancel


def start_command(session_folder: Path, args: list[str], title: str,
                  outputs: list[tuple[str, str]], *, stdout_name: str = "out.txt",
                  files: dict[str, str] | None = None) -> CommandJob:
    """Run `privlab ARGS` in the job's folder (outputs named relative to it; `files` are
    written there first, e.g. the session's reviewed schema)."""
    jid = secrets.token_hex(6)
    folder = session_folder / "jobs" / jid
    folder.mkdir(parents=True)
    for name, text in (files or {}).items():
        atomic_write_text(folder / name, text)
    job = CommandJob(jid, folder, title, outputs)
    env = _child_env()
    with open(folder / "progress.log", "wb") as err, open(folder / stdout_name, "wb") as out:
        job.process = subprocess.Popen(
            [sys.executable, "-c", "import os, sys; os.nice(10); sys.argv[0] = 'privlab'; "
             "from privlab.cli.main import run; run()", *args],
            cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    return job


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["COLUMNS"] = "200"  # one warning line per warning
    env["PRIVLAB_PROGRESS"] = "1"  # plain progress lines on the piped stderr (CommandJob)
    return env


def _write(folder: Path, status: dict[str, Any]) -> None:
    atomic_write_text(folder / "status.json", json.dumps(status))


def start_synth(session_folder: Path, *, source: Any, schema_dict: dict[str, Any], method: str,
                epsilon: float, delta: float, rows: int, columns: list[str],
                seed: int | None = None) -> Job:
    """Start a job (the caller has charged the ledger already)."""
    jid = secrets.token_hex(6)
    folder = session_folder / "jobs" / jid
    folder.mkdir(parents=True)
    job = Job(jid, folder, method, epsilon, delta, rows, columns, source.label)
    _write(folder, {"state": "starting", "stage": "starting", "done": 0, "total": 1})
    spec = {"kind": source.kind, "name": source.name,
            "path": None if source.path is None else str(source.path),
            "schema": schema_dict, "method": method, "epsilon": epsilon, "delta": delta,
            "rows": rows, "columns": columns, "seed": seed}
    atomic_write_text(folder / "spec.json", json.dumps(spec))
    # A fresh interpreter (not fork: the server has threads; not multiprocessing's spawn:
    # it would re-import the caller's __main__), privlab found where this one found it.
    job.process = subprocess.Popen([sys.executable, "-m", "privlab.studio.jobs", str(folder)],
                                   env=_child_env(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return job


def _run_synth(folder: str) -> None:
    """The child: load the rows, fit, sample, write the table and its guarantee."""
    out = Path(folder)
    spec = json.loads((out / "spec.json").read_text(encoding="utf-8"))
    schema_dict, method, columns = spec["schema"], spec["method"], spec["columns"]
    epsilon, delta, rows, seed = spec["epsilon"], spec["delta"], spec["rows"], spec["seed"]
    with contextlib.suppress(OSError):
        os.nice(10)  # below the server: pages stay fast while a job runs
    try:
        from privlab.schema import parse_schema
        from privlab.studio.sources import Source
        from privlab.synth import make_synthesizer
        from privlab.utils.atomic import atomic_write_frame

        _write(out, {"state": "running", "stage": "reading the data", "done": 0, "total": 1})
        source = Source(spec["kind"], spec["name"],
                        None if spec["path"] is None else Path(spec["path"]))
        schema = parse_schema(schema_dict, name=schema_dict.get("name", "declared"))
        schema = schema.select(columns)
        frame = source.load()
        frame = frame[[c for c in columns if c in frame.columns]]
        synth = make_synthesizer(method, schema=schema, on_invalid="coerce", rng=seed)

        def progress(stage: str, done: int, total: int) -> None:
            _write(out, {"state": "running", "stage": stage, "done": done,
                         "total": max(total, 1)})

        synth.progress = progress
        frame = synth.conform(frame)
        synth.fit(frame, epsilon, delta)
        progress("sampling", 0, 1)
        table = synth.sample(rows)
        atomic_write_frame(table, out / "synthetic.csv")
        atomic_write_text(out / "guarantee.json",
                          json.dumps(synth.guarantee.to_dict(), indent=2, default=str))
        _write(out, {"state": "done", "stage": "done", "done": 1, "total": 1,
                     "headline": synth.guarantee.headline()})
    except Exception as exc:  # reported on the job's page, one line
        first = (str(exc).splitlines() or [""])[0]
        _write(out, {"state": "failed", "stage": "failed", "done": 0, "total": 1,
                     "error": f"{type(exc).__name__}: {first}"})


if __name__ == "__main__":
    _run_synth(sys.argv[1])
