"""The Spark side of the stage: one session, bound to 127.0.0.1, and a master URL checked before it starts."""

from __future__ import annotations

import os
import re
import socket
import sys
from typing import Any

from sbtck.errors import MasterError

MASTER = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|spark://[^/\s]+|yarn|k8s://\S+|mesos://\S+)$")
# few large tasks: the driver JVM competes with the Python workers on a small machine
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def check_master(master: str, timeout_s: float = 5.0) -> None:
    """Refuse a master URL Spark would reject or wait on for a minute before giving up."""
    if not MASTER.match(master):
        raise MasterError(
            f"--master {master!r} is not a Spark master URL; use local[*], local[N], local[N,RETRIES], "
            "spark://HOST:PORT, yarn or k8s://URL"
        )
    if not master.startswith("spark://"):
        return
    for hostport in master[len("spark://") :].split(","):
        host, _, port = hostport.rpartition(":")
        if not host or not port.isdigit():
            raise MasterError(f"--master {master!r}: write spark://HOST:PORT, e.g. spark://127.0.0.1:7077")
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
        except OSError as exc:
            raise MasterError(
                f"--master {master!r}: nothing answers at {host}:{port} ({exc.strerror or exc})"
            ) from None


def session(master: str, app: str = "sbtck-workload", **conf: str) -> Any:
    """A SparkSession on MASTER whose executors run this interpreter (so they import this kit)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", JAVA_OPTIONS)
        .config("spark.executor.extraJavaOptions", JAVA_OPTIONS)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.executorEnv.PYSPARK_PYTHON", os.environ["PYSPARK_PYTHON"])
        .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
