"""`image:NAME[:TAG]`: the implementation in a container, started with testcontainers.

The container runs with host networking and must serve the protocol on
127.0.0.1 at the port it is given in SBTCK_PORT, printing a line with
"listening" once ready (`sbtck serve --tcp 127.0.0.1:$SBTCK_PORT` does).
No image is pulled: it must exist in the local Docker engine.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Any

from sbtck.errors import CannotStart, ImplementationFault
from sbtck.iut.remote import RemoteImplementation, SocketChannel, request_timeout_s

READY_LINE = "listening"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ContainerImplementation(RemoteImplementation):
    def __init__(self, image: str, logs_dir: Path | None = None, timeout_s: float | None = None) -> None:
        # Ryuk's image cannot be pulled here; the kit stops its container itself
        os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
        os.environ.setdefault("DOCKER_HOST", "unix:///var/run/docker.sock")
        self.image = image
        self.logs_dir = logs_dir
        self.port = free_port()
        self.container = self._start()
        waits = request_timeout_s() if timeout_s is None else timeout_s
        super().__init__(lambda: SocketChannel("127.0.0.1", self.port, waits), waits)

    def _start(self) -> Any:
        try:
            from testcontainers.core.container import DockerContainer
            from testcontainers.core.wait_strategies import LogMessageWaitStrategy
        except ImportError as exc:
            raise CannotStart(
                f"image:{self.image} needs the testcontainers package (pip install 'sbtck[containers]'): {exc}"
            ) from None
        try:
            import docker

            docker.from_env().images.get(self.image)
        except Exception as exc:  # no engine, or no such image: either way nothing may be pulled
            raise CannotStart(
                f"image {self.image} is not in the local Docker engine ({exc.__class__.__name__}); the kit never "
                "pulls: build it first (scripts/build-image.sh builds the reference engine's)"
            ) from None
        ready = LogMessageWaitStrategy(READY_LINE).with_startup_timeout(60)
        container = (
            DockerContainer(self.image)
            .with_kwargs(network_mode="host")
            .with_env("SBTCK_PORT", str(self.port))
            .waiting_for(ready)
        )
        try:
            container.start()
        except Exception as exc:  # docker's and testcontainers' errors have no common base
            with contextlib.suppress(Exception):
                container.stop()
            raise ImplementationFault(f"cannot start image {self.image}: {exc}") from None
        return container

    def close(self) -> None:
        super().close()
        if self.logs_dir is not None:
            with contextlib.suppress(Exception):
                out, err = self.container.get_logs()
                self.logs_dir.mkdir(parents=True, exist_ok=True)
                (self.logs_dir / "container.log").write_bytes(out + err)
        with contextlib.suppress(Exception):
            self.container.stop()
