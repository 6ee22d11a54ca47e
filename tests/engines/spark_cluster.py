"""A real Spark standalone cluster on this machine, for tests and benchmarks: a master and two
workers as separate JVM processes started with pyspark's own `bin/spark-class` (no download),
and on demand a Spark Connect server (`SparkConnectServer` through `bin/spark-submit`, what
`sbin/start-connect-server.sh` runs) whose driver uses the same cluster.

Everything listens on 127.0.0.1 on free ports; each process runs in a process group of its
own, so `stop()` (also run at interpreter exit) kills the daemons and the executors they
forked, whatever state a test left them in.

    with SparkCluster(tmp_dir) as cluster:
        spark = get_spark(cluster.master_url, conf=cluster.app_conf)

Sizes: each worker offers 2 cores and 1 GiB; an application asks for at most 2 cores, 1 per
executor, 512 MiB each. So the test driver and the Connect server each get one executor on
each worker (the master spreads them), and neither waits for the other's cores.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

#: Settings every application on the cluster uses (the test driver, the Connect server).
APP_CONF = {
    "spark.cores.max": "2",
    "spark.executor.cores": "1",
    "spark.executor.memory": "512m",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
}
WORKERS = 2
WORKER_CORES = 2
WORKER_MEMORY = "1g"


def spark_home() -> Path:
    """The installed pyspark package: it ships bin/spark-class and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SparkCluster:
    """Master + `WORKERS` workers (+ an optional Connect server), started and stopped here."""

    def __init__(self, root: Path, *, timeout_s: float = 300.0) -> None:
        self.root = Path(root)
        self.timeout_s = timeout_s
        self.procs: list[subprocess.Popen[bytes]] = []
        self.port = free_port()
        self.ui_port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.connect_url: str | None = None
        self.app_conf = dict(APP_CONF)
        conf_dir = self.root / "conf"  # empty: no spark-defaults.conf of the machine
        conf_dir.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_CONF_DIR": str(conf_dir),
                    "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "384m",
                    "PYSPARK_PYTHON": sys.executable,
                    "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}

    # -- processes ------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], **env: str) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                env={**self.env, **env}, cwd=self.root, start_new_session=True)
        log.close()  # the child holds its own descriptor
        self.procs.append(proc)
        return proc

    def start(self) -> SparkCluster:
        atexit.register(self.stop)
        bin_ = spark_home() / "bin"
        self._spawn("master", [str(bin_ / "spark-class"), "org.apache.spark.deploy.master.Master",
                               "--host", "127.0.0.1", "--port", str(self.port),
                               "--webui-port", str(self.ui_port)])
        for i in range(WORKERS):
            work = self.root / f"worker{i}"
            work.mkdir(exist_ok=True)
            self._spawn(f"worker{i}", [
                str(bin_ / "spark-class"), "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY,
                "--webui-port", str(free_port()), "--work-dir", str(work), self.master_url])
        self._wait(lambda: self.state().get("aliveworkers") == WORKERS,
                   f"{WORKERS} workers registered")
        return self

    def start_connect(self) -> str:
        """A Spark Connect server whose driver runs on this cluster; returns its sc:// URL."""
        if self.connect_url is not None:
            return self.connect_url
        port = free_port()
        conf = {**self.app_conf, "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(port), "spark.sql.session.timeZone": "UTC"}
        args = [str(spark_home() / "bin" / "spark-submit"), "--class",
                "org.apache.spark.sql.connect.service.SparkConnectServer", "--name",
                "privlab Spark Connect (tests)", "--master", self.master_url]
        for k, v in conf.items():
            args += ["--conf", f"{k}={v}"]
        # the launcher sizes this driver as a daemon (SPARK_DAEMON_MEMORY), not by
        # spark.driver.memory; a Spark 4 driver needs at least 450 MiB of heap
        proc = self._spawn("connect", args, SPARK_DAEMON_MEMORY="768m")

        def listening() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited:\n{self.log_tail('connect')}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return True
            return False

        self._wait(listening, "the Spark Connect server listening")
        self.connect_url = f"sc://127.0.0.1:{port}"
        return self.connect_url

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications), {} while it is not up."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
                return dict(json.load(r))
        except (OSError, ValueError):
            return {}

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not ready():
            dead = [p.args[1] for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(self.log_tail(n) for n in ("master", "worker0", "worker1"))
                self.stop()
                raise RuntimeError(f"Spark cluster: no {what} after {self.timeout_s:.0f} s "
                                   f"(exited: {dead}):\n{logs}")
            time.sleep(0.5)

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.root / f"{name}.log"
        if not path.exists():
            return f"[{name}: no log]"
        text = path.read_text(errors="replace").splitlines()
        first = next((t for t in text if "Exception" in t or " ERROR " in t), "")
        return f"[{name}] first error: {first}\n" + "\n".join(text[-lines:])

    def stop(self) -> None:
        """SIGTERM each process group (daemons and the executors they forked), then SIGKILL
        what is left after 10 s. Idempotent."""
        procs, self.procs = self.procs, []
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
        for p in procs:  # the group, not only its leader: executors too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5)
        self.connect_url = None

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
