"""A privlab command run as a studio job: `python -m privlab.cli.child --stdout OUT --exit
EXIT -- ARGS...` runs `privlab ARGS` in the job's folder (started by `privlab.studio.jobs`,
which names its files; this module imports nothing of the studio).

Why a wrapper and not the CLI directly:
- It dies with the studio. It asks the kernel for SIGKILL when its parent dies
  (PR_SET_PDEATHSIG, Linux) before anything else, then checks that the studio that started it
  (`PRIVLAB_STUDIO_PID`) is still its parent: a studio killed in between is seen too. Done here
  and not in a `preexec_fn`, which can deadlock in a process with threads (the studio has
  them).
- Its output is a file, written once. What the command prints through Python (its `--json`
  document, a summary) is kept in memory and written to NAME atomically when the command
  ends; the process's own stdout is not read, so nothing else writing to it (DuckDB's
  progress bar, written by C++) can end up inside `result.json`.
- Its end is recorded: EXIT holds the exit code as JSON, so a restarted studio can tell a job
  that finished from one that the studio's end interrupted.
- Its files are private (umask 077: 0600 files, 0700 folders) and it runs at low priority
  (nice 10), leaving the studio's pages responsive."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import traceback
from pathlib import Path

#: prctl(2) option: the signal the kernel sends this process when its parent thread dies.
PR_SET_PDEATHSIG = 1
USAGE = "usage: python -m privlab.cli.child --stdout OUT --exit EXIT -- ARGS..."


def die_with_parent() -> None:
    """SIGKILL this process when the studio dies (Linux; elsewhere the studio's shutdown and
    restart handle it), and exit now if it already has."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    expected = os.environ.get("PRIVLAB_STUDIO_PID")
    if expected and os.getppid() != int(expected):
        os._exit(1)  # the studio died before the signal was asked for


def exit_code(code: object) -> int:
    """The process exit code of a `SystemExit` argument (a message means failure, 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_command(args: list[str]) -> tuple[int, str]:
    """Run `privlab ARGS` in this process: (its exit code, what it printed through Python)."""
    captured, real = io.StringIO(), sys.stdout
    sys.stdout = captured
    code = 0
    try:
        sys.argv = ["privlab", *args]
        from privlab.cli.main import run

        run()
    except SystemExit as exc:
        code = exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - reported in the job's log, then a failed exit
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout = real
    return code, captured.getvalue()


def main(argv: list[str]) -> int:
    die_with_parent()
    os.umask(0o077)
    os.nice(10)
    if len(argv) < 5 or argv[0] != "--stdout" or argv[2] != "--exit" or argv[4] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    from privlab.utils.atomic import atomic_write_text

    code, output = run_command(argv[5:])
    atomic_write_text(Path(argv[1]), output)
    atomic_write_text(Path(argv[3]), json.dumps({"code": code}) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
