"""Long jobs (synthetic tables, DP models, choose-epsilon runs): a privlab CLI command in its
own process, with progress and cancel.

Why a process and not a thread: a synthesizer or a training loop is CPU-bound Python and
NumPy; in a thread it would hold the interpreter's lock and slow every other session's pages
(DP Wizard: 1.5 s -> 72.6 s). A child process at low priority (nice 10) leaves the server
responsive. The child is the real CLI command (`privlab synth`, `privlab train`, ...), so its
checks, per-person bounding, delta policy and guarantee are the CLI's, not a copy of them;
progress is read from its plain `progress: NAME: STAGE DONE/TOTAL` stderr lines
(PRIVLAB_PROGRESS=1); cancel terminates the child. The budget is charged before the child
starts: a cancelled job has still spent it (the ledger may over-count, never under-count)."""

from __future__ import annotations

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

#: The plain progress line of `privlab.cli.progress` (PRIVLAB_PROGRESS=1, set for the child).
_PROGRESS = re.compile(r"^progress: [^:]+: (?P<stage>.*) (?P<done>\d+)/(?P<total>\d+)$")


@dataclass
class CommandJob:
    """A privlab CLI command run as a job: progress from its stderr lines
    (`progress: synth mst: STAGE 1/3`), outputs in its folder. `result`: the JSON output
    (its stdout) whose `guarantee.headline` the job's page shows once done."""

    jid: str
    folder: Path
    title: str
    outputs: list[tuple[str, str]]
    result: str | None = None
    process: Any = None
    started: float = field(default_factory=time.time)
    cancelled: bool = False

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
            headline = self._headline()
            if headline:
                out["headline"] = headline
        else:
            errors = [x for x in lines if x.startswith(("error:", "internal error:"))]
            out.update(state="failed", error=(errors or [last or f"exit code {rc}"])[-1])
        return out

    def _headline(self) -> str | None:
        """The guarantee's headline from the command's JSON output (None without one)."""
        if self.result is None:
            return None
        try:
            payload = json.loads((self.folder / self.result).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        guarantee = payload.get("guarantee") if isinstance(payload, dict) else None
        headline = guarantee.get("headline") if isinstance(guarantee, dict) else None
        return headline if isinstance(headline, str) else None

    def file(self, name: str) -> Path | None:
        return self.folder / name if name in dict(self.outputs) else None

    def cancel(self) -> None:
        """Terminate the child (killed if it does not stop within 5 s); the charge stays."""
        if self.process is not None and self.process.poll() is None:
            self.cancelled = True
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_command(session_folder: Path, args: list[str], title: str,
                  outputs: list[tuple[str, str]], *, stdout_name: str = "out.txt",
                  files: dict[str, str] | None = None, result: str | None = None
                  ) -> CommandJob:
    """Run `privlab ARGS` in the job's folder (outputs named relative to it; `files` are
    written there first, e.g. the session's reviewed schema; `result`: see CommandJob)."""
    jid = secrets.token_hex(6)
    folder = session_folder / "jobs" / jid
    folder.mkdir(parents=True)
    for name, text in (files or {}).items():
        atomic_write_text(folder / name, text)
    job = CommandJob(jid, folder, title, outputs, result=result)
    env = _child_env()
    # A fresh interpreter (not fork: the server has threads), privlab found where this one
    # found it.
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
