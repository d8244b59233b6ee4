"""Per-request cost of the JSON-lines protocol, beside the same requests in process.

    python -m bench.bench_protocol [--requests N]

Each mode answers the same cheap command (advance_time to the current time)
N times; the in-process reference engine is the baseline measured in the
same run, so the printed overheads hold on whatever machine runs this.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable

from sbtck import contract
from sbtck.fixtures import topology
from sbtck.iut.implementation import Implementation
from sbtck.iut.reference import reference
from sbtck.iut.remote import ProcessChannel, RemoteImplementation, SocketChannel

START_MS = 1_767_225_600_000


def per_request_us(implementation: Implementation, requests: int) -> float:
    implementation.handshake()
    implementation.execute(contract.Start(START_MS, topology.named("activation").plain))
    command = contract.AdvanceTime(START_MS)
    begin = time.perf_counter()
    for _ in range(requests):
        implementation.execute(command)
    elapsed = time.perf_counter() - begin
    implementation.close()
    return elapsed / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    args = parser.parse_args()
    if args.requests <= 0:
        parser.error("--requests must be positive")
    serve = [sys.executable, "-m", "sbtck.cli", "serve"]
    server = subprocess.Popen([*serve, "--tcp", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().strip().rsplit(":", 1)[1])
        modes: dict[str, Callable[[], Implementation]] = {
            "in process": reference,
            "cmd: (stdio)": lambda: RemoteImplementation(lambda: ProcessChannel([*serve, "--stdio"])),
            "tcp: (loopback)": lambda: RemoteImplementation(lambda: SocketChannel("127.0.0.1", port, 10)),
        }
        results = {name: per_request_us(make(), args.requests) for name, make in modes.items()}
    finally:
        server.kill()
    baseline = results["in process"]
    print(f"requests per mode: {args.requests}")
    for name, us in results.items():
        print(f"{name:<16} {us:9.1f} us/request   x{us / baseline:6.1f}   overhead {us - baseline:8.1f} us")


if __name__ == "__main__":
    main()
