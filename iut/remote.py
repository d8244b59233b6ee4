"""Implementations in another process: a program on stdin/stdout, or a server on 127.0.0.1.

Every request waits for its answer for at most ``timeout_s`` of real time
(the frozen clock of the scenario does not apply). A crash, a hang, a line
that is not JSON, an answer to another request or another protocol version
raises ``ImplementationFault`` with the cause and the end of the program's
stderr; the program is then restarted for the next scenario.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from sbtck.config import REQUEST_TIMEOUT
from sbtck.contract import Command, Handshake, Response, Start
from sbtck.errors import CannotStart, ImplementationFault, ProtocolError
from sbtck.iut import answers, protocol
from sbtck.visible import visible

DEFAULT_TIMEOUT_S = 10.0


def request_timeout_s() -> float:
    """How long a request waits for its answer: SBTCK_REQUEST_TIMEOUT (sbtck run --timeout) as it is when an
    implementation is made, since the command line sets it after this module was imported."""
    return float(os.environ.get(REQUEST_TIMEOUT, DEFAULT_TIMEOUT_S))


EOF_MARK = b""
TOO_LONG = b"\0too long"
# how often the reader looks up from a silent implementation to see whether it should stop
POLL_S = 0.2
# how long an implementation has to end after SIGTERM before its whole process group is killed
GRACE_S = 1.0
# how long the goodbye at the end may take, written and answered
BYE_S = 1.0
# how much of the end of a program's standard error the kit keeps, to show with a fault
STDERR_TAIL_BYTES = int(os.environ.get("SBTCK_STDERR_TAIL_BYTES", str(64 * 1024)))


class _Tail:
    """The last ``limit`` bytes a program wrote to a pipe, read by a thread: its memory is bounded however much
    the program writes, and it looks up every POLL_S so that it never outlives the channel."""

    def __init__(self, fd: int, limit: int = STDERR_TAIL_BYTES) -> None:
        self.limit = limit
        self.kept = bytearray()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(fd,), daemon=True)
        self.thread.start()

    def _read(self, fd: int) -> None:
        with contextlib.suppress(OSError, ValueError), selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not selector.select(POLL_S):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return
                with self._lock:
                    self.kept += chunk
                    del self.kept[: max(0, len(self.kept) - self.limit)]

    def text(self) -> str:
        # what a program wrote just before it ended may be in the pipe still: read to its end, or a moment more
        self.thread.join(timeout=0.5)
        with self._lock:
            return bytes(self.kept).decode(errors="replace")

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=POLL_S * 5)


class Channel:
    """Lines to and from an implementation, read by a thread so that waiting can time out.

    The thread reads the file descriptor itself, a chunk at a time, and never
    holds a line longer than ``max_line`` bytes; it looks up every POLL_S so
    that closing never waits on a read that an escaped grandchild keeps open.
    """

    description = "the implementation"

    def __init__(self, read_fd: int, write_fd: int, max_line: int = protocol.MAX_LINE_BYTES) -> None:
        # writes go to the descriptor itself, non-blocking: an implementation that stops reading its input
        # fills the pipe, and a blocking write would then wait for ever (and so would Ctrl-C's goodbye)
        self.write_fd = write_fd
        os.set_blocking(write_fd, False)
        self.max_line = max_line
        self.lines: queue.Queue[bytes] = queue.Queue()
        self._stop = threading.Event()
        self.reader = threading.Thread(target=self._read, args=(read_fd,), daemon=True)
        self.reader.start()

    def _read(self, fd: int) -> None:
        pending = bytearray()
        with contextlib.suppress(OSError, ValueError), selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not selector.select(POLL_S):
                    continue
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:  # a socket shares its descriptor's mode with the writer: nothing yet
                    continue
                if not chunk:
                    break
                pending += chunk
                while (end := pending.find(b"\n")) >= 0:
                    self.lines.put(bytes(pending[: end + 1]))
                    del pending[: end + 1]
                if len(pending) > self.max_line:
                    self.lines.put(TOO_LONG)
                    return
        self.lines.put(EOF_MARK)

    def send(self, line: bytes, timeout_s: float) -> bool:
        """Write LINE whole within TIMEOUT_S; False when the implementation would not take it in time."""
        deadline = time.monotonic() + timeout_s
        view = memoryview(line)
        with selectors.DefaultSelector() as selector:
            selector.register(self.write_fd, selectors.EVENT_WRITE)
            while view:
                try:
                    view = view[os.write(self.write_fd, view) :]
                    continue
                except BlockingIOError:
                    pass
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    return False
        return True

    def receive(self, timeout_s: float) -> bytes | None:
        """A line, EOF_MARK at the end of output, TOO_LONG, or None when nothing came in time."""
        try:
            return self.lines.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def ended(self) -> str:
        return "closed its output"

    def stderr_tail(self) -> str:
        return ""

    def stop_reading(self) -> None:
        self._stop.set()
        self.reader.join(timeout=POLL_S * 5)

    def close(self) -> None:
        self.stop_reading()


# The program is killed when the process that started it dies, however it dies: a Spark worker killed as its job
# is cancelled (SIGKILL) runs no clean-up, and would leave a hung implementation running for ever. Linux's
# parent-death signal, set by util-linux's setpriv before it runs the program; without setpriv, close() alone ends it
_SETPRIV = shutil.which("setpriv")
_ENDS_WITH_ITS_PARENT = [_SETPRIV, "--pdeathsig", "KILL", "--"] if _SETPRIV else []


# Every program the kit starts carries this variable, with a value of its own, in its environment: its descendants
# inherit it, daemons that left its process group with setsid included, and that is how close() finds them all
LINEAGE = "SBTCK_IMPLEMENTATION"


def _lineage(token: str) -> list[int]:
    """The processes whose environment holds LINEAGE=TOKEN (those of this user, or every one for root)."""
    mark = f"{LINEAGE}={token}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if mark in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
    return found


# prctl(2)'s option that makes a process the parent of every orphan below it, in place of init
PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> bool:
    """Make this process the subreaper of its tree: whatever is started below it and loses its parent (a Spark
    worker's implementation, the daemon it started) becomes its child, never init's, so ``end_descendants`` finds
    it. False where Linux's prctl is not there."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc."""
    below: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # the command's name, in parentheses, may hold spaces: the fields after its last parenthesis
            fields = stat.read_text().rpartition(")")[2].split()
            below.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return below


def descendants(pid: int | None = None) -> list[int]:
    """The processes below PID (this one by default)."""
    below, found, todo = _children(), [], [os.getpid() if pid is None else pid]
    while todo:
        for child in below.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def end_descendants(timeout_s: float = 10.0) -> list[int]:
    """Kill every process below this one and reap it, until none is left (orphans that come to this subreaper as
    their parents die included) or TIMEOUT_S has passed; returns those left."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = descendants()
        if not left or time.monotonic() > deadline:
            return left
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.05)


class ProcessChannel(Channel):
    """A program in a process group of its own: ending it ends every process it started."""

    def __init__(self, argv: list[str], cwd: Path | None = None) -> None:
        program = shutil.which(argv[0])
        if program is None and os.sep in argv[0] and Path(argv[0]).is_file():
            raise CannotStart(
                f"cannot start {argv[0]!r}: the file is not executable (chmod +x, or name its interpreter)"
            )
        if program is None:
            raise CannotStart(f"cannot start {argv[0]!r}: no such program on PATH")
        self.description = " ".join(argv)
        self.lineage = uuid.uuid4().hex
        try:
            self.process = subprocess.Popen(
                [*_ENDS_WITH_ITS_PARENT, program, *argv[1:]],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                start_new_session=True,
                env={**os.environ, LINEAGE: self.lineage},
            )
        except OSError as exc:
            raise CannotStart(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        assert self.process.stdin is not None and self.process.stdout is not None and self.process.stderr is not None
        self.stderr = _Tail(self.process.stderr.fileno())
        super().__init__(self.process.stdout.fileno(), self.process.stdin.fileno())

    def send(self, line: bytes, timeout_s: float) -> bool:
        try:
            return super().send(line, timeout_s)
        except (OSError, ValueError):  # a dead process: the missing answer will say so
            return True

    def receive(self, timeout_s: float) -> bytes | None:
        """As Channel.receive, but a program that exits is noticed at once, even while a process it started keeps
        its output open (so that the pipe never ends): EOF_MARK, and ``ended`` gives its status."""
        deadline = time.monotonic() + timeout_s
        while True:
            line = super().receive(max(0.0, min(POLL_S, deadline - time.monotonic())))
            if line is not None:
                return line
            if self.process.poll() is not None:
                return super().receive(POLL_S) or EOF_MARK  # a last line it wrote may still be on its way
            if time.monotonic() >= deadline:
                return None

    def ended(self) -> str:
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "closed its output"
        return f"exited with status {code}"

    def stderr_tail(self, lines: int = 15, width: int = 1000) -> str:
        """The last LINES lines of the program's stderr, each cut to WIDTH characters."""
        return "\n".join(
            line if len(line) <= width else line[:width] + " ..." for line in self.stderr.text().splitlines()[-lines:]
        )

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    def close(self) -> None:
        """End the whole process group, each wait bounded; then let go of the pipes."""
        self._signal_group(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=GRACE_S)
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        for pid in _lineage(self.lineage):  # what left the group (a daemon's setsid) goes too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.stop_reading()
        self.stderr.stop()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()


class SocketChannel(Channel):
    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        if host not in ("127.0.0.1", "localhost"):
            raise ImplementationFault(f"tcp:{host}:{port}: the kit talks to 127.0.0.1 only")
        self.description = f"tcp:{host}:{port}"
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise CannotStart(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        self.sock.settimeout(None)
        super().__init__(self.sock.fileno(), self.sock.fileno())

    def send(self, line: bytes, timeout_s: float) -> bool:
        try:
            return super().send(line, timeout_s)
        except (OSError, ValueError):  # a closed connection: the missing answer will say so
            return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.stop_reading()
        self.sock.close()


class RemoteImplementation:
    """The contract over a Channel, reopened after a fault when the next scenario starts."""

    def __init__(self, open_channel: Callable[[], Channel], timeout_s: float | None = None) -> None:
        self.open_channel = open_channel
        self.timeout_s = request_timeout_s() if timeout_s is None else timeout_s
        self.channel: Channel | None = None
        self.broken: str | None = None
        self._handshake: Handshake | None = None
        self._next_id = 0

    def stderr_tail(self) -> str:
        """The end of what the implementation wrote to stderr (a failed scenario's report carries it too)."""
        return visible(self.channel.stderr_tail()) if self.channel is not None else ""

    def _request(self, message: dict[str, Any], what: str) -> answers.Answer:
        channel = self._open()
        self._next_id += 1
        request_id = self._next_id
        request = protocol.encode({"id": request_id, **message})
        if not channel.send(request, self.timeout_s):
            self._fail(
                f"{channel.description} stopped reading its input: {what} ({len(request)} bytes) could not be written "
                f"within {self.timeout_s:g} seconds"
            )
        line = channel.receive(self.timeout_s)
        if line is None:
            self._fail(f"{channel.description} gave no answer to {what} within {self.timeout_s:g} seconds")
        if line == EOF_MARK:
            self._fail(f"{channel.description} {channel.ended()} while answering {what}")
        if line == TOO_LONG:
            self._fail(
                f"{channel.description} wrote a line longer than {channel.max_line} bytes while answering {what} "
                "(the limit is SBTCK_MAX_LINE_BYTES)"
            )
        assert line is not None
        try:
            answer = answers.decode_answer(line)
        except ProtocolError as exc:
            self._fail(f"{channel.description} wrote a line that is not an answer to {what}: {exc}")
        if answer.id != request_id:
            self._fail(
                f"{channel.description} answered request {answer.id!r}, but was asked request {request_id} ({what})"
            )
        return answer

    def _fail(self, cause: str) -> NoReturn:
        tail = self.channel.stderr_tail() if self.channel else ""
        self.broken = cause
        self._close_channel()
        # shown as seen: escape sequences in a program's words would clear or retitle the user's terminal
        raise ImplementationFault(visible(cause + (f"\nthe end of its stderr:\n{tail}" if tail else "")))

    def _open(self) -> Channel:
        if self.channel is None:
            self.channel = self.open_channel()
        return self.channel

    def _close_channel(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def handshake(self) -> Handshake:
        if self._handshake is None or self.channel is None:
            answer = self._request({"op": "hello", "protocol": protocol.PROTOCOL_VERSION}, "hello")
            try:
                self._handshake = answers.handshake_from(dict(answer.result or {}))
            except ProtocolError as exc:
                self._fail(str(exc))
        assert self._handshake is not None
        return self._handshake

    def execute(self, command: Command) -> Response:
        if isinstance(command, Start) and self.broken is not None:
            self.broken = None  # a new scenario: start afresh
        if self.broken is not None:
            raise ImplementationFault(f"not restarted within a scenario after: {self.broken}")
        self.handshake()
        answer = self._request({"op": "execute", "command": command.to_json()}, command.kind)
        if answer.fault and not answer.ok:
            # a crash inside the implementation is its fault, not a broker's refusal
            self._fail(f"{self._open().description} failed on {command.kind}: {answer.error}")
        try:
            return answers.response_from(answer)
        except ProtocolError as exc:
            self._fail(f"{self._open().description} answered {command.kind} wrongly: {exc}")

    def close(self) -> None:
        # a goodbye, never waited on for long: one that cannot be written or is not answered ends it all the same
        if (
            self.channel is not None
            and self.broken is None
            and self.channel.send(protocol.encode({"id": 0, "op": "bye"}), BYE_S)
        ):
            self.channel.receive(BYE_S)
        self._close_channel()
