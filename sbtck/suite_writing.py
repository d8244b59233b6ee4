"""The run's outputs under ``--sbtck-out``, its verdict in the session's exit status, and the terminal's summary.

A plugin of the session once the kit is woken (``sbtck.suite.start``). Only
the process that runs the session writes (under xdist the controller, never a
worker), and it holds the folder from the start (``taken``), so that two runs
never write one report.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from sbtck import __version__, config
from sbtck.contract import PROTOCOL_VERSION
from sbtck.errors import BuildFailed, OutputError
from sbtck.reports import baseline, outfolder, results
from sbtck.reports.publish import interrupted
from sbtck.suite_iut import UnderTest
from sbtck.suite_recording import Recorder
from sbtck.suite_selecting import Selector


def taken(config: pytest.Config) -> contextlib.ExitStack:
    """--sbtck-out, made the kit's to write and locked until the lock returned is closed (sbtck run has checked
    it and holds its lock already; plain pytest has not)."""
    lock = contextlib.ExitStack()
    given = config.getoption("--sbtck-out")
    if not given or hasattr(config, "workerinput"):
        return lock
    out = Path(given)
    foreign = outfolder.refused(out, outfolder.REPORT)
    if foreign:
        raise OutputError(f"--sbtck-out {out}: {foreign}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not lock.enter_context(outfolder.locked(out)):
            raise OutputError(f"--sbtck-out {out}: {outfolder.TAKEN}")
        outfolder.claim(out, outfolder.REPORT)
    except OSError as exc:
        raise OutputError(f"--sbtck-out {out}: cannot write there ({exc.strerror or exc})") from None
    return lock


class Writer:
    """What the run says at its end: results.json and the reports built from it, the exit status, the summary."""

    def __init__(
        self,
        config: pytest.Config,
        out_lock: contextlib.ExitStack,
        under_test: UnderTest,
        selector: Selector,
        recorder: Recorder,
    ) -> None:
        self.config = config
        self._out_lock = out_lock
        self.under_test = under_test
        self.selector = selector
        self.recorder = recorder
        given = config.getoption("--sbtck-baseline")
        self.baseline = Path(given) if given else None
        if self.baseline is not None:
            results.read(self.baseline)  # a wrong baseline is bad input, said before any scenario runs
        self.interrupted = False
        self.session: pytest.Session | None = None  # once it finished: whether it stopped early (-x)
        self.build_failed = False  # a builder of the report failed after results.json was written: exit 3
        self.build_interrupted = False  # a signal came while the report was built, after results.json: exit 2
        self.changes: baseline.Changes | None = None  # against --sbtck-baseline, once the session finished
        self.started = dt.datetime.now(dt.UTC)
        self.t0 = time.perf_counter()

    @pytest.hookimpl
    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None, None, None]:
        self.session = session
        self.interrupted = self.interrupted or exitstatus == pytest.ExitCode.INTERRUPTED
        if not hasattr(self.config, "workerinput"):
            records = self.recorder.records
            verdict = results.verdict({"interrupted": self.interrupted}, [rec.status for rec in records])
            # only a session that collected scenarios of the kit has the kit's verdict: the plugin loads in every
            # pytest session of its environment, and a project's own tests must keep their exit status
            if verdict == results.NOTHING_RAN and records and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
            if self.baseline is not None:
                self.changes = baseline.compare(results.read(self.baseline)[1], records)
                if self.changes.regressions and session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
            out = self.config.getoption("--sbtck-out")
            if out is not None and not self.selector.dry_run:
                self.write(Path(out))
                if self.build_failed:  # the run's verdict is printed; the report is not whole
                    session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
                if self.build_interrupted:
                    session.exitstatus = pytest.ExitCode.INTERRUPTED
        return (yield)

    def selection(self) -> dict[str, Any] | None:
        return self.selector.selection(len(self.recorder.records), self.session)

    def run_info(self) -> dict[str, Any]:
        profile = self.under_test.profile
        handshake = self.under_test.handshake_said()
        return {
            "kit": {"name": "sbtck", "version": __version__},
            "implementation": {
                "spec": self.under_test.spec,
                "name": profile.name,
                "version": profile.version,
                "protocol": handshake.protocol if handshake else PROTOCOL_VERSION,
            },
            "profile": {
                "source": profile.source,
                "params": profile.params,
                "capabilities": sorted(profile.capabilities),
            },
            "settings": os.environ.get(config.SETTINGS_FILE),
            "started": self.started.isoformat(timespec="seconds"),
            "wall_time_s": round(time.perf_counter() - self.t0, 3),
            "interrupted": self.interrupted,
            "selection": self.selection(),
        }

    def write(self, out: Path) -> None:
        from sbtck.reports import publish

        # in the order of the features, whatever order the scenarios finished in (under xdist it changes)
        records = sorted(self.recorder.records, key=lambda rec: (rec.feature_path, rec.line, rec.id))
        try:
            publish.publish(out, self.run_info(), records, self.baseline, self._say)
        except BuildFailed as exc:
            self.build_failed = True
            self._say(f"sbtck: {exc}")
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM while the files were built: results.json is there
            self.build_interrupted = True
            self._say(
                "sbtck: interrupted while the report was written; results.json and the files written so far "
                f"are in {out}"
            )

    def _say(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)
        else:
            print(line, file=sys.stderr)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        worker = hasattr(self.config, "workerinput")
        if self.selector.dry_run and not worker:
            checked, bound = self.selector.dry["scenarios"], self.selector.dry["bind"]
            terminalreporter.write_line(
                f"sbtck: dry run: {bound}{f' of {checked}' if bound < checked else ''} scenarios bind and their "
                "topologies load; nothing ran"
            )
            return
        out = self.config.getoption("--sbtck-out")
        records = self.recorder.records
        if out and records and not worker:
            counts: dict[str, int] = {}
            for rec in records:
                counts[rec.status] = counts.get(rec.status, 0) + 1
            # in the statuses' own order, whatever order the scenarios finished in (under xdist it changes)
            order = [s for s in results.STATUSES if s in counts] + sorted(set(counts) - set(results.STATUSES))
            summary = ", ".join(f"{counts[s]} {s}" for s in order)
            # an informative scenario's pass judges nothing (behaviour the documents leave open): say how many of
            # the passes are such, so that "264 passed" is not read as 264 rules' worth (cr13's G12)
            informative = sum(rec.status == results.PASSED and results.INFORMATIVE in rec.tags for rec in records)
            if informative:
                summary += f" ({informative} of the passes informative, judging nothing)"
            folder = interrupted(Path(out)) if self.interrupted else Path(out)
            verdict = results.verdict({"interrupted": self.interrupted}, [rec.status for rec in records])
            words = results.selection_words({"selection": self.selection()})
            # a page that could not be built is not pointed at: the folder, with results.json and the log, is
            page = folder / "index.html"
            shown = page if page.is_file() else folder
            terminalreporter.write_line(f"sbtck: {verdict}{' ' + words if words else ''}: {summary}; report: {shown}")
        if self.changes is not None:
            terminalreporter.write_line(f"sbtck: against the baseline {self.baseline}: {self.changes.summary()}")

    def pytest_unconfigure(self) -> None:
        # the implementation first: one that writes into the folder (a container's logs) is done before it is let go
        self.under_test.close()
        self._out_lock.close()
