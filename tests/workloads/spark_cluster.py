"""A standalone Spark cluster for the tests: a master and a worker from the PySpark installation, on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _daemon(env: dict[str, str], verb: str, cls: str, *args: str) -> None:
    script = SPARK_HOME / "sbin" / "spark-daemon.sh"
    subprocess.run(["bash", str(script), verb, cls, "1", *args], env=env, check=True, capture_output=True, timeout=60)


def _wait_for(what: str, ready: object, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.5)
    raise TimeoutError(f"the standalone cluster's {what} did not come up within {timeout_s:g} s")


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@contextmanager
def standalone(folder: Path) -> Iterator[str]:
    """Starts the cluster, yields its master URL, and stops both daemons whatever happens."""
    logs = folder / "logs"
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(logs),
        "SPARK_PID_DIR": str(folder / "pids"),
        "SPARK_WORKER_DIR": str(folder / "work"),
        "SPARK_IDENT_STRING": f"sbtck-{os.getpid()}",
    }
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    master_ui, worker_ui = str(free_port()), str(free_port())
    try:
        _daemon(env, "start", MASTER, "--host", "127.0.0.1", "--port", str(port), "--webui-port", master_ui)
        _wait_for("master", lambda: _answers(port))
        _daemon(env, "start", WORKER, "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
                "--webui-port", worker_ui, url)  # fmt: skip
        _wait_for(
            "worker",
            lambda: any("Registering worker" in p.read_text(errors="replace") for p in logs.glob("*Master*.out")),
        )
        yield url
    finally:
        for cls in (WORKER, MASTER):
            subprocess.run(
                ["bash", str(SPARK_HOME / "sbin" / "spark-daemon.sh"), "stop", cls, "1"],
                env=env,
                capture_output=True,
                timeout=60,
                check=False,
            )
