"""What the report costs: build time beside the suite's own time, and the file's size.

    python -m bench.bench_report

Runs the full suite against the reference engine (in process, no report),
then builds the report from its results with a workload summary, and prints
both times, their difference, and the size of index.html.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sbtck.reports import html

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        begin = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(ROOT / "steps"),
                "--sbtck-out",
                str(out / "run"),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        suite_s = time.perf_counter() - begin
        summary = out / "workload.json"
        summary.write_text(
            json.dumps(
                {
                    "kind": "sbtck-workload-summary",
                    "worlds": 10_000,
                    "conversations": 1_000_000,
                    "failed_worlds": 25,
                    "duration_s": 900.0,
                    "violations": {f"ACT-{n:02d}": n for n in range(1, 14)},
                    "reproducers": [
                        {"rule": "ACT-10", "seed": s, "path": f"reproducers/seed-{s}.feature"} for s in range(25)
                    ],
                }
            )
        )
        begin = time.perf_counter()
        page = html.build([out / "run" / "results.json"], out / "again" / "index.html", summary)
        build_s = time.perf_counter() - begin
        size_mb = page.stat().st_size / 1e6
    print(f"suite (pytest, in process, writing results and its own report): {suite_s:6.2f} s")
    print(f"report build from results.json + workload summary            : {build_s:6.2f} s")
    print(f"report build / suite                                          : {build_s / suite_s:6.2f}")
    print(f"index.html size                                               : {size_mb:6.2f} MB (limit 5 MB)")


if __name__ == "__main__":
    main()
