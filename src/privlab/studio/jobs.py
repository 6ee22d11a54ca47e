"""Long jobs (synthetic tables, DP models, choose-epsilon runs): a privlab CLI command in its
own process, queued, with progress, cancel and a record on disk.

Why a process and not a thread: a synthesizer or a training loop is CPU-bound Python and
NumPy; in a thread it would hold the interpreter's lock and slow every other session's pages
(DP Wizard: 1.5 s -> 72.6 s). A child process at low priority (nice 10) leaves the server
responsive. The child is the real CLI command (`privlab synth`, `privlab train`, ...) run by
`privlab.cli.child`, so its checks, per-person bounding, delta policy and guarantee are the
CLI's, not a copy of them; progress is read from its plain `progress: NAME: STAGE DONE/TOTAL`
stderr lines (PRIVLAB_PROGRESS=1).

A job's life (`JobRunner`): *prepared* (its folder, its input files and its record written;
nothing charged yet, so a full disk costs no budget), then charged by the route, *queued* (at
most one child per core runs at once; the page shows the queue position), *running*, and
ended: done, failed, cancelled (the charge stays: the ledger may over-count, never
under-count) or interrupted (the studio stopped). The record, `job.json` (0600, in the job's
0700 folder inside its session's folder), is rewritten at each step, so a restarted studio
shows how each job ended.

Jobs die with the studio: each child is its own process group, killed as a group on cancel and
at shutdown, and asks the kernel for SIGKILL when its parent dies (`privlab.cli.child`).
That signal follows the *thread* that started the child, so every child is started by the
runner's one launcher thread, which lives as long as a job is queued or running."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privlab.studio.workers import cpu_slots

#: The plain progress line of `privlab.cli.progress` (PRIVLAB_PROGRESS=1, set for the child).
_PROGRESS = re.compile(r"^progress: [^:]+: (?P<stage>.*) (?P<done>\d+)/(?P<total>\d+)$")
#: A job id (and the name of its folder): 12 hex digits.
JOB_ID = re.compile(r"^[0-9a-f]{12}$")
RECORD = "job.json"
#: The exit code a finished child leaves in its folder (absent: it did not finish).
EXIT_RECORD = "exit.json"
#: How a job the studio's end cut short is shown (on its page, after a restart too).
INTERRUPTED = "interrupted: the studio stopped"
#: The states a job's record ends in.
ENDED = ("ended", "cancelled", "interrupted")
#: How often the launcher thread looks for ended children (seconds).
POLL_S = 0.1


@dataclass(eq=False)  # a job is itself: compared by identity in the runner's lists
class CommandJob:
    """A privlab CLI command run as a job: progress from its stderr lines
    (`progress: synth mst: STAGE 1/3`), outputs in its folder. `stdout`: the file the
    command's printed output goes to; `result`: the JSON output whose `guarantee.headline`
    the job's page shows once done. `state` is the record's: prepared, queued, running,
    ended (`code` set), cancelled or interrupted."""

    jid: str
    folder: Path
    title: str
    outputs: list[tuple[str, str]]
    args: list[str] = field(default_factory=list)
    stdout: str = "out.txt"
    result: str | None = None
    state: str = "prepared"
    code: int | None = None
    error: str | None = None
    entry_id: int | None = None
    created: float = field(default_factory=time.time)
    started: float | None = None
    ended: float | None = None
    pid: int | None = None
    position: int = 0
    process: Any = None
    runner: Any = None  # the JobRunner that queued it (None: loaded from disk)

    @property
    def downloads(self) -> list[tuple[str, str]]:
        return self.outputs

    @property
    def cancelled(self) -> bool:
        return self.state == "cancelled"

    def record(self) -> dict[str, Any]:
        keys = ("jid", "title", "outputs", "args", "stdout", "result", "state", "code",
                "error", "entry_id", "created", "started", "ended", "pid")
        return {k: getattr(self, k) for k in keys}

    def save(self) -> None:
        """Rewrite the job's record (atomically, 0600)."""
        write_private(self.folder / RECORD, json.dumps(self.record(), indent=1) + "\n")

    @classmethod
    def load(cls, folder: Path) -> CommandJob:
        raw = json.loads((folder / RECORD).read_text(encoding="utf-8"))
        raw["outputs"] = [tuple(o) for o in raw["outputs"]]
        return cls(folder=folder, **raw)

    def status(self) -> dict[str, Any]:
        stage, done, total, lines = self._progress()
        started = self.started or self.created
        out: dict[str, Any] = {"stage": stage, "done": done, "total": total,
                               "elapsed_s": round((self.ended or time.time()) - started, 1)}
        state, code = self.state, self.code
        if state == "running" and self.process is not None:
            code = self.process.poll()  # ended, not yet reaped by the launcher
            state = "running" if code is None else "ended"
        if state in ("cancelled", "interrupted"):
            out["state"] = state
            if self.error:
                out["error"] = self.error
        elif state == "queued":
            out.update(state="queued", position=self.position,
                       stage=f"waiting: number {self.position} in the queue")
        elif state in ("prepared", "running"):
            out["state"] = "running" if lines else "starting"
        elif code == 0:
            out.update(state="done", stage="done", done=total)
            headline = self._headline()
            if headline:
                out["headline"] = headline
        else:
            errors = [x for x in lines if x.startswith(("error:", "internal error:"))]
            last = next((x.strip() for x in reversed(lines) if x.strip()), "")
            out.update(state="failed", error=self.error or (errors or [
                last or f"exit code {code}"])[-1])
        return out

    def _progress(self) -> tuple[str, int, int, list[str]]:
        """(stage, done, total, every line) of the child's progress log."""
        stage, done, total = "starting", 0, 1
        try:
            lines = (self.folder / "progress.log").read_text(encoding="utf-8",
                                                             errors="replace").splitlines()
        except OSError:
            lines = []
        for line in lines:
            m = _PROGRESS.match(line)
            if m:
                done, total, stage = (int(m["done"]), max(int(m["total"]), 1), m["stage"])
        return stage, done, total, lines

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
        """Take the job out of the queue, or end its child (its process group); the charge
        stays."""
        if self.runner is not None:
            self.runner.cancel(self)


class JobRunner:
    """Every job of one studio: at most `slots` children at once (default: the cores this
    process may use), the others queued in order; each child started by one launcher thread.
    `state_dir`: the studio's state folder, whose job records are checked when it starts."""

    def __init__(self, state_dir: Path | None = None, slots: int | None = None) -> None:
        self.slots = slots or cpu_slots()
        self._cond = threading.Condition()
        self._queue: list[CommandJob] = []
        self._running: list[CommandJob] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        if state_dir is not None:
            recover(state_dir)

    # -- the routes' side ----------------------------------------------------------------

    def prepare(self, session_folder: Path, args: list[str], title: str,
                outputs: list[tuple[str, str]], *, stdout: str = "out.txt",
                files: dict[str, str] | None = None, result: str | None = None
                ) -> CommandJob:
        """The job's folder with its input `files` (e.g. the reviewed schema) and its record;
        nothing runs and nothing is charged yet. Raises OSError (a full disk) with nothing
        left behind."""
        jid = secrets.token_hex(6)
        jobs = session_folder / "jobs"
        jobs.mkdir(mode=0o700, exist_ok=True)
        folder = jobs / jid
        folder.mkdir(mode=0o700)
        job = CommandJob(jid, folder, title, outputs, args=list(args), stdout=stdout,
                         result=result, runner=self)
        try:
            for name, text in (files or {}).items():
                write_private(folder / name, text)
            write_private(folder / "progress.log", "")
            job.save()
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return job

    def discard(self, job: CommandJob) -> None:
        """Forget a prepared job that will not run (its charge was refused)."""
        shutil.rmtree(job.folder, ignore_errors=True)

    def submit(self, job: CommandJob, entry_id: int | None = None) -> None:
        """Queue a prepared job (`entry_id`: the ledger entry that paid for it); it starts as
        soon as a slot is free."""
        with self._cond:
            job.entry_id = entry_id
            if self._closed:  # the studio is stopping: the job never starts
                self._end(job, "interrupted", error=INTERRUPTED)
                return
            job.state = "queued"
            self._queue.append(job)
            self._renumber()
            with contextlib.suppress(OSError):  # paid for: it runs even if its record lags
                job.save()
            if self._thread is None:
                self._thread = threading.Thread(target=self._launcher, daemon=True,
                                                name="privlab-studio-jobs")
                self._thread.start()
            self._cond.notify_all()

    def cancel(self, job: CommandJob) -> None:
        """A queued job leaves the queue; a running one's process group is terminated (killed
        if it has not stopped within 5 s)."""
        with self._cond:
            if job in self._queue:
                self._queue.remove(job)
                self._renumber()
                self._end(job, "cancelled")
                return
            if job not in self._running or job.process.poll() is not None:
                return
            job.state = "cancelled"
            signal_group(job.process, signal.SIGTERM)
        try:
            job.process.wait(5)
        except subprocess.TimeoutExpired:
            signal_group(job.process, signal.SIGKILL)
            job.process.wait(5)
        with self._cond:
            self._reap()

    def shutdown(self, reason: str = INTERRUPTED) -> None:
        """The studio stops: nothing more starts, every child's process group is killed and
        every job not yet ended is recorded as interrupted."""
        with self._cond:
            self._closed = True
            for job in self._queue:
                self._end(job, "interrupted", error=reason)
            self._queue.clear()
            running, self._running = self._running, []
            for job in running:
                signal_group(job.process, signal.SIGKILL)
            self._cond.notify_all()
        for job in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                job.process.wait(5)
            if job.state == "running":
                self._end(job, "interrupted", error=reason)
            else:
                self._end(job, job.state)

    def running(self) -> list[CommandJob]:
        with self._cond:
            return list(self._running)

    def find(self, session: Any, jid: str) -> CommandJob | None:
        """One of `session`'s jobs: in memory, else its record in the session's folder (a job
        of an earlier run of the studio); another session's id finds nothing."""
        job = session.jobs.get(jid)
        if job is None and JOB_ID.match(jid):
            folder = session.root / "jobs" / jid
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                job = CommandJob.load(folder)
                session.jobs[jid] = job
        return job

    def restore(self, session: Any) -> None:
        """Add to `session.jobs` the ended jobs recorded in its folder that it does not hold
        (those of an earlier run of the studio), so its job list shows how each ended."""
        folder = session.root / "jobs"
        if not folder.is_dir():
            return
        for path in folder.glob(f"*/{RECORD}"):
            jid = path.parent.name
            if jid in session.jobs or not JOB_ID.match(jid):
                continue
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                job = CommandJob.load(path.parent)
                if job.state in ENDED:  # a live job of this run is already in memory
                    session.jobs[jid] = job

    # -- the launcher thread -------------------------------------------------------------

    def _launcher(self) -> None:
        """Start queued jobs while slots are free, reap ended ones; return (the thread ends)
        once nothing is queued or running. Never raises: its end would kill every child."""
        with self._cond:
            while not self._closed and (self._queue or self._running):
                try:
                    self._reap()
                    while self._queue and len(self._running) < self.slots:
                        job = self._queue.pop(0)
                        self._renumber()
                        self._start(job)
                except Exception:  # noqa: BLE001 - reported; the thread must outlive it
                    traceback.print_exc()
                self._cond.wait(POLL_S)
            self._thread = None

    def _start(self, job: CommandJob) -> None:
        try:
            with open(job.folder / "progress.log", "ab") as err:
                job.process = subprocess.Popen(
                    [sys.executable, "-m", "privlab.cli.child", "--stdout", job.stdout,
                     "--exit", EXIT_RECORD, "--", *job.args],
                    cwd=job.folder, env=child_env(), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=err, process_group=0)
        except OSError as exc:
            self._end(job, "ended", code=-1, error=f"the job could not start ({exc}); its "
                                                   "charge stays")
            return
        job.state, job.pid, job.started = "running", job.process.pid, time.time()
        self._running.append(job)
        job.save()

    def _reap(self) -> None:
        for job in [j for j in self._running if j.process.poll() is not None]:
            self._running.remove(job)
            if job.state == "cancelled":
                self._end(job, "cancelled")
            else:
                self._end(job, "ended", code=job.process.returncode)

    def _renumber(self) -> None:
        for i, job in enumerate(self._queue, 1):
            job.position = i

    @staticmethod
    def _end(job: CommandJob, state: str, code: int | None = None,
             error: str | None = None) -> None:
        job.state, job.code, job.error = state, code, error or job.error
        job.ended = job.ended or time.time()
        with contextlib.suppress(OSError):
            job.save()


def recover(state_dir: Path) -> None:
    """At start: every job an earlier run of the studio left queued or running is recorded as
    it ended: finished (its child left its exit code) or interrupted. A child still alive (a
    studio on a system without PR_SET_PDEATHSIG) is killed first, recognised by its working
    folder, never by a reused pid alone."""
    for path in state_dir.glob(f"sessions/*/jobs/*/{RECORD}"):
        try:
            job = CommandJob.load(path.parent)
        except (OSError, ValueError, TypeError, KeyError):
            continue
        if job.state not in ("prepared", "queued", "running"):
            continue
        kill_stray(job)
        try:
            job.code = int(json.loads((job.folder / EXIT_RECORD).read_text())["code"])
            job.state = "ended"
        except (OSError, ValueError, KeyError, TypeError):
            job.state, job.error = "interrupted", INTERRUPTED
        job.ended = job.ended or time.time()
        with contextlib.suppress(OSError):
            job.save()


def kill_stray(job: CommandJob) -> None:
    """Kill the process group of a job's child that outlived its studio (Linux: its
    /proc entry's working folder must be the job's folder)."""
    if job.pid is None:
        return
    try:
        if Path(f"/proc/{job.pid}/cwd").resolve() != job.folder.resolve():
            return
        os.killpg(job.pid, signal.SIGKILL)
    except OSError:
        pass


def signal_group(process: Any, sig: int) -> None:
    """Send `sig` to a child's process group (it leads its own), the child alone if that
    fails."""
    try:
        os.killpg(process.pid, sig)
    except OSError:
        with contextlib.suppress(OSError):
            process.send_signal(sig)


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` atomically as a 0600 file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["COLUMNS"] = "200"  # one warning line per warning
    env["PRIVLAB_PROGRESS"] = "1"  # plain progress lines on the piped stderr (CommandJob)
    env["PRIVLAB_STUDIO_PID"] = str(os.getpid())  # the child checks it is still our child
    return env
