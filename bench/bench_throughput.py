"""Messages per second through SEND -> queue -> RECEIVE on the reference engine.

The baseline does the same moves with a dict of deques in the same run, so
the printed ratio says what the engine's bookkeeping (events, monitors,
group locks, the clockwork) costs, whatever the machine. Both are timed in
CPU time and take turns, best of each: on a shared virtual machine the wall
clock of one run varies by a quarter.

    python -m bench.bench_throughput [--messages N] [--dialogs D] [--repeat R]
"""

from __future__ import annotations

import argparse
import time
from collections import deque

from sbtck.contract import QueueRef
from sbtck.engine import Broker
from sbtck.engine.compiling import build
from sbtck.fixtures import topology

TOPOLOGY = """\
instances:
  sql1:
    databases:
      shop:
        queues: {InitiatorQueue: {}, TargetQueue: {}}
        services: {Initiator: {queue: InitiatorQueue}, Target: {queue: TargetQueue}}
"""


def engine_run(messages: int, dialogs: int) -> None:
    broker = Broker(topology.parse(TOPOLOGY, "bench").plain, 0)
    queue = QueueRef("sql1", "shop", "TargetQueue")
    names = [f"D{i}" for i in range(dialogs)]
    for name in names:
        broker.begin_dialog(0, name, "sql1", "shop", "Initiator", "Target")
    for i in range(messages):
        broker.send(i, names[i % dialogs], body="x")
        rows = broker.receive(i, "reader", queue, top=1)["rows"]
        assert len(rows) == 1
        broker.drain_events_json()  # as the workload stage takes them (ReferenceImplementation.execute_json)


def baseline_run(messages: int, dialogs: int) -> None:
    queues: dict[str, deque[tuple[str, int, str]]] = {f"D{i}": deque() for i in range(dialogs)}
    order: deque[str] = deque()
    sequence = dict.fromkeys(queues, 0)
    names = list(queues)
    for i in range(messages):
        name = names[i % dialogs]
        queues[name].append((name, sequence[name], "x"))
        sequence[name] += 1
        order.append(name)
        row = queues[order.popleft()].popleft()
        assert row


def best_rates(messages: int, dialogs: int, repeat: int) -> tuple[float, float]:
    """The best rate of each side; the two take turns, so that a machine busier for a while slows both alike."""
    best = {engine_run: float("inf"), baseline_run: float("inf")}
    for _ in range(repeat):
        for run in best:
            start = time.process_time()
            run(messages, dialogs)
            best[run] = min(best[run], time.process_time() - start)
    return messages / best[engine_run], messages / best[baseline_run]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--dialogs", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.messages <= 0 or args.dialogs <= 0 or args.repeat <= 0:
        parser.error("--messages, --dialogs and --repeat must be positive")
    engine, baseline = best_rates(args.messages, args.dialogs, args.repeat)
    print(f"messages: {args.messages}, dialogs: {args.dialogs}, best of {args.repeat}")
    print(f"engine: {build()}")
    print(f"reference engine : {engine:12,.0f} messages/s")
    print(f"dict+deque       : {baseline:12,.0f} messages/s")
    print(f"engine / baseline: {engine / baseline:.4f}  (baseline is {baseline / engine:.0f}x faster)")


if __name__ == "__main__":
    main()
