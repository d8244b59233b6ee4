"""The Spark side of the stage: one session, bound to 127.0.0.1, and a master URL checked before it starts."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import re
import shutil
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from sbtck.errors import MasterError

MASTER = re.compile(r"^(local(\[(\*|[1-9]\d*)(,\d+)?\])?|spark://[^/\s]+|yarn|k8s://\S+|mesos://\S+)$")
# few large tasks: the driver JVM competes with the Python workers on a small machine
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# a local master's threads, per core of this machine: each runs a Python worker with its own implementation, so
# more only share the cores; Spark itself takes any number and spends its first minute on a huge one
LOCAL_THREADS_PER_CORE = 8


def check_master(master: str, timeout_s: float = 5.0) -> None:
    """Refuse a master URL Spark would reject or wait on for a minute before giving up."""
    if not MASTER.match(master):
        raise MasterError(
            f"--master {master!r} is not a Spark master URL; use local[*], local[N] (N at least 1), local[N,RETRIES], "
            "spark://HOST:PORT, yarn or k8s://URL"
        )
    threads = re.match(r"^local\[(\d+)", master)
    most = LOCAL_THREADS_PER_CORE * (os.cpu_count() or 1)
    if threads is not None and int(threads.group(1)) > most:
        raise MasterError(
            f"--master {master[:60]!r}: at most {most} threads on this machine ({LOCAL_THREADS_PER_CORE} per core); "
            "use local[*] for one per core"
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


# how often a task is tried on a local master before the job fails: Spark's own local[N] tries once, so a Python
# worker that dies (killed, out of memory) would fail the whole job; a cluster master has spark.task.maxFailures
LOCAL_ATTEMPTS = 4
_LOCAL_WITHOUT_RETRIES = re.compile(r"^local(\[(\*|\d+)\])?$")


def with_retries(master: str) -> str:
    """MASTER, a local one given LOCAL_ATTEMPTS tries per task unless it names its own (local[N,RETRIES])."""
    found = _LOCAL_WITHOUT_RETRIES.match(master)
    if found is None:
        return master
    return f"local[{found.group(2) or 1},{LOCAL_ATTEMPTS}]"


# why the job was stopped, once a signal has come (sbtck.workload_cli)
stopped: list[str] = []
# prctl(2)'s option that sends its process a signal when the thread that started it ends
PR_SET_PDEATHSIG = 1


def _dies_with_its_parent() -> None:
    """In the child, before it runs the JVM: SIGKILL when the kit ends, however it ends (kept across exec)."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the kit ended before the signal was asked for
        os._exit(1)


def _jvm_ends_with_the_kit() -> None:
    """PySpark starts the driver's JVM (spark-submit, which execs java) with a function of its own run before;
    ours runs first. Without it, a kit ended while Spark starts left the JVM running for good: the JVM watches its
    standard input for the kit's end only once it is up."""
    from pyspark import java_gateway

    popen = getattr(java_gateway, "Popen")  # noqa: B009 - an import of the module's, not declared by it
    if getattr(popen, "ends_with_the_kit", False):
        return

    def started(*args: Any, **kwargs: Any) -> Any:
        if stopped:  # a signal came while Spark was getting ready: no JVM is started after it
            raise KeyboardInterrupt(stopped[0])
        theirs = kwargs.get("preexec_fn")

        def before() -> None:
            _dies_with_its_parent()
            if theirs is not None:
                theirs()

        kwargs["preexec_fn"] = before
        return popen(*args, **kwargs)

    started.ends_with_the_kit = True  # type: ignore[attr-defined]
    setattr(java_gateway, "Popen", started)  # noqa: B010 - as above


def _quiet_once_stopped() -> None:
    """The driver's accumulator server (a socketserver thread of PySpark's) prints a traceback for each update
    its connection cuts short, as the executors' ends do once a signal stopped the job: then, it says nothing."""
    from pyspark import accumulators

    for server in (accumulators.AccumulatorTCPServer, getattr(accumulators, "AccumulatorUnixServer", None)):
        if server is None or getattr(server.handle_error, "quiet_once_stopped", False):
            continue
        theirs = server.handle_error

        def handle_error(self: Any, request: Any, address: Any, theirs: Any = theirs) -> None:
            if not stopped:
                theirs(self, request, address)

        handle_error.quiet_once_stopped = True  # type: ignore[attr-defined]
        setattr(server, "handle_error", handle_error)  # noqa: B010 - a class of PySpark's, patched once


def session(master: str, app: str = "sbtck-workload", classes: ClassArchive | None = None, **conf: str) -> Any:
    """A SparkSession on MASTER whose executors run this interpreter (so they import this kit).

    With CLASSES, the driver's JVM maps the classes an earlier driver loaded,
    or records the ones it loads for the next (``ClassArchive``).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    _jvm_ends_with_the_kit()
    _quiet_once_stopped()
    driver = JAVA_OPTIONS if classes is None else f"{JAVA_OPTIONS} {classes.java_options()}"
    builder = (
        SparkSession.builder.master(with_retries(master))
        .appName(app)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", driver)
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
    # the kit says what failed in one line, and INCOMPLETE holds Spark's account: the executors' own ERROR lines
    # were hundreds of lines of Java traces for one full disk
    spark.sparkContext.setLogLevel("FATAL")
    return spark


# ------------------------------------------------------------------ the driver's classes, kept between runs

CLASSES_SETTING = "SBTCK_SPARK_CLASSES"  # "off": no archive is used or made
CACHE_SETTING = "SBTCK_CACHE_DIR"  # where the archive lives (default: the platform's cache folder, cache_folder)
# what hides the JVM's own word on an archive it cannot use (another JVM, another class path): it then runs without
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


@dataclass
class ClassArchive:
    """The classes a driver JVM loaded, archived (class data sharing) for the next driver to map.

    Starting Spark's driver is reading some ten thousand classes out of two
    hundred jars: about six seconds of one core before the first task, and
    the same again on every run. Mapped from an archive they take half. The
    first run records them as its JVM exits (``-XX:ArchiveClassesAtExit``),
    into a file of its own that ``keep`` moves into place once the JVM has
    gone, so that no run ever maps half an archive; later runs map it
    (``-XX:SharedArchiveFile``). The archive belongs to one JVM, one PySpark
    and one set of options, and its name says which (``class_archive``); a
    JVM that cannot use it runs as it would have without it.
    """

    path: Path
    # while this run records the archive: where its JVM writes it, and the lock that makes this run the only one
    making: Path | None = None
    lock: IO[str] | None = None

    def java_options(self) -> str:
        if self.making is not None:
            return f"-XX:ArchiveClassesAtExit={self.making} {QUIET}"
        return f"-XX:SharedArchiveFile={self.path} {QUIET}"

    def keep(self, timeout_s: float = 300.0) -> bool:
        """After ``spark.stop()``: end the driver's JVM, and move the archive it wrote into place.

        The JVM writes the archive as it exits, and exits when the Python
        driver closes its standard input; an archive not written whole is
        not kept. True when this run kept one.
        """
        if self.making is None:
            return False
        try:
            from pyspark import SparkContext

            proc = getattr(SparkContext._gateway, "proc", None)
            if proc is None or proc.stdin is None:  # a JVM this process did not start (spark-submit) is not ours
                return False
            proc.stdin.close()
            if proc.wait(timeout_s) != 0 or not self.making.is_file() or self.making.stat().st_size == 0:
                return False
            os.replace(self.making, self.path)
            return True
        except Exception:  # a run whose results are written is not failed by its cache
            return False
        finally:
            self.release()

    def release(self) -> None:
        if self.making is not None:
            with contextlib.suppress(OSError):
                self.making.unlink()
        if self.lock is not None:
            self.lock.close()
            self.lock = None


def cache_folder() -> Path:
    """SBTCK_CACHE_DIR, or the platform's cache folder for the kit (platformdirs: $XDG_CACHE_HOME/sbtck on Linux,
    ~/Library/Caches/sbtck on macOS, %LOCALAPPDATA%\\sbtck\\Cache on Windows)."""
    if os.environ.get(CACHE_SETTING):
        return Path(os.environ[CACHE_SETTING])
    import platformdirs

    return platformdirs.user_cache_path("sbtck", appauthor=False)


def class_archive(options: str = JAVA_OPTIONS) -> ClassArchive | None:
    """The driver's class archive for this JVM, PySpark and OPTIONS: the one kept, or one to make now.

    None when it is turned off (``SBTCK_SPARK_CLASSES=off``), when no ``java``
    or no writable cache folder is found, when the driver's JVM is not this
    process's to start (``spark-submit``), or when another run is making it.
    """
    if os.environ.get(CLASSES_SETTING, "").lower() in ("off", "0", "no", "false"):
        return None
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return None
    key = _archive_key(options)
    if key is None:
        return None
    folder = cache_folder() / "spark-classes"
    path = folder / f"driver-{key}.jsa"
    if path.is_file():
        return ClassArchive(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = (folder / f"driver-{key}.lock").open("w")
    except OSError:
        return None
    try:
        import fcntl  # here, not with the module: the command line imports this module, on every platform

        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return None
    if path.is_file():  # made while this run waited for the lock
        lock.close()
        return ClassArchive(path)
    for stale in folder.glob(f"driver-{key}.*.making"):  # left by a run that ended before its JVM did
        with contextlib.suppress(OSError):
            stale.unlink()
    return ClassArchive(path, folder / f"driver-{key}.{os.getpid()}.making", lock)


def _archive_key(options: str) -> str | None:
    """What an archive belongs to, as a short digest: the JVM (as spark-class finds it), Spark's jars, OPTIONS."""
    java_home = os.environ.get("JAVA_HOME")
    found = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not found or not os.path.isfile(found):
        return None
    java = Path(found).resolve()
    try:
        import pyspark

        # the jars spark-submit puts on the class path: SPARK_HOME's when it is set, else the ones PySpark brings
        home = os.environ.get("SPARK_HOME") or pyspark.__path__[0]
        names = sorted(p.name for p in (Path(home) / "jars").glob("*.jar"))
        version = pyspark.__version__
    except Exception:
        return None
    parts = [str(java), *(_stamp(p) for p in (java, *java.parent.parent.glob("lib/server/libjvm.so")))]
    parts += [version, *names, options]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"
