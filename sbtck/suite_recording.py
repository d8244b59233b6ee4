"""Each scenario of the run as a record of ``sbtck.reports.results``: its steps, status, failure and events.

A plugin of the session once the kit is woken (``sbtck.suite.start``): it
reads pytest-bdd's hooks for the steps and pytest's reports for the
scenario's status. A record travels in the report's ``user_properties``, so
that under xdist the controller, which writes the outputs, has every worker's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd.exceptions import StepDefinitionNotFoundError

from sbtck.errors import CheckFailed, DeclarationError, ImplementationFault, Refused, RowsDiffer
from sbtck.reports import results
from sbtck.resources import kit_root
from sbtck.steps.world import World
from sbtck.suite_bdd import (
    NOT_APPLICABLE_BECAUSE,
    RECORD,
    SAID,
    STEP_AT,
    STEP_STARTED,
    WORLD,
    feature_path,
    identity,
    template_of,
    unknown_step,
)
from sbtck.suite_iut import UnderTest
from sbtck.visible import visible

INFORMATIVE_REASON = (
    "an @informative scenario: the documents leave this open and the implementation does otherwise "
    "than the reference engine"
)
# how pytest words a strict xfail that passed
XPASS_STRICT = "[XPASS(strict)]"


class Recorder:
    """The run's records, one per scenario, in the order the scenarios finished."""

    def __init__(self, config: pytest.Config, under_test: UnderTest) -> None:
        self.config = config
        self.under_test = under_test
        # what a rerun of one scenario needs of this run's settings
        self.settings: dict[str, str | None] = {
            "iut": under_test.spec,
            "profile": config.getoption("--sbtck-profile"),
            "expectations": config.getoption("--sbtck-expectations"),
            "features": os.environ.get("SBTCK_FEATURES", "").replace(os.pathsep, ",") or None,
        }
        self.records: list[results.ScenarioRecord] = []

    @pytest.hookimpl(trylast=True)
    def pytest_bdd_before_scenario(self, request: pytest.FixtureRequest, feature: Any, scenario: Any) -> None:
        template = template_of(request.node)
        name, line, example = (
            identity(request.node, template) if template is not None else (scenario.name, scenario.line_number, None)
        )
        path = feature_path(self.config, feature.filename)
        record = results.ScenarioRecord(
            id=results.scenario_id(path, name),
            feature_path=path,
            feature_name=feature.name,
            name=name,
            line=line,
            example=example,
            tags=sorted(scenario.tags | feature.tags),
            feature_tags=sorted(feature.tags),
            steps=[
                results.StepRecord(
                    s.keyword,
                    s.name,
                    s.line_number,
                    docstring=s.docstring,
                    datatable=s.datatable.raw() if s.datatable else None,
                )
                for s in scenario.steps
            ],
            rerun=results.rerun_command(self._node_id(request.node), {**self.settings, "out": self._rerun_out(name)}),
        )
        request.node.stash[RECORD] = record
        why = request.node.stash.get(NOT_APPLICABLE_BECAUSE, None)
        if why is not None:
            pytest.skip(why)

    def _node_id(self, node: Any) -> str:
        """The node id sbtck run takes back: relative to the kit, or, where the session's rootdir is a project's
        own (--features under its pytest configuration), by the test module's whole path."""
        if self.config.rootpath.resolve() == kit_root().resolve():
            return str(node.nodeid)
        return f"{node.path}::{node.name}"

    def _rerun_out(self, name: str) -> str:
        out = self.config.getoption("--sbtck-out")
        slug = "".join(ch if ch.isalnum() else "-" for ch in name).strip("-")[:60]
        return str(Path(out or "out").resolve() / "reruns" / slug)

    @pytest.hookimpl
    def pytest_bdd_before_step(self, request: pytest.FixtureRequest, feature: Any, step: Any) -> None:
        request.node.stash[STEP_AT] = (feature_path(self.config, feature.filename), step.line_number)
        # real time: freezegun leaves the suite's modules alone (sbtck/fixtures/clock.py ignores sbtck.suite*)
        request.node.stash[STEP_STARTED] = time.perf_counter()

    def _step(self, request: pytest.FixtureRequest, step: Any, status: str) -> None:
        record = request.node.stash.get(RECORD, None)
        if record is None:
            return
        started = request.node.stash.get(STEP_STARTED, None)
        world = request.node.stash.get(WORLD, None)
        left_out, everything = world.left_out.get(step.line_number, ("", False)) if world else ("", False)
        for s in record.steps:
            if s.line == step.line_number and s.status == "not run":
                s.status = results.LEFT_OUT if everything and status == "passed" else status
                s.left_out = left_out
                if started is not None:
                    s.duration_s = round(time.perf_counter() - started, 6)
                break

    @pytest.hookimpl
    def pytest_bdd_after_step(self, request: pytest.FixtureRequest, step: Any) -> None:
        self._step(request, step, "passed")

    @pytest.hookimpl
    def pytest_bdd_step_error(self, request: pytest.FixtureRequest, step: Any, exception: Exception) -> None:
        kind = results.FAILED if isinstance(exception, AssertionError) else results.ERROR
        self._step(request, step, kind)  # the step that erred says error, as its scenario does
        record = request.node.stash.get(RECORD, None)
        if record is not None:
            record.failure = {
                "step": f"{step.keyword} {step.name}",
                "line": step.line_number,
                "kind": kind,
                "message": str(exception) or type(exception).__name__,
            }
            if isinstance(exception, RowsDiffer):  # the expected and the reported table, side by side in the page
                record.failure["table"] = exception.table

    @pytest.hookimpl
    def pytest_bdd_step_func_lookup_error(
        self, request: pytest.FixtureRequest, step: Any, exception: Exception
    ) -> None:
        feature = request.node.stash.get(STEP_AT, ("?", 0))[0]
        said = StepDefinitionNotFoundError(unknown_step(f"{step.keyword} {step.name}", feature, step.line_number))
        request.node.stash[SAID] = str(said)
        self.pytest_bdd_step_error(request, step, said)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.excinfo is not None and report.failed:
            # the kit's own words first and alone, not after pytest's frames of the fixture or step that raised
            if isinstance(call.excinfo.value, StepDefinitionNotFoundError) and SAID in item.stash:
                report.longrepr = item.stash[SAID]
            elif isinstance(call.excinfo.value, ImplementationFault | DeclarationError | CheckFailed | Refused):
                report.longrepr = f"{type(call.excinfo.value).__name__}: {call.excinfo.value}"
        record: results.ScenarioRecord | None = item.stash.get(RECORD, None)
        if record is None and (report.skipped or report.failed) and call.when == "setup":
            record = self._never_started(item, report, call)
        if record is None or (call.when != "call" and not (report.skipped or report.failed)):
            return _shown(report) if template_of(item) is not None else report
        record.status, record.reason = _status(report, record)
        if record.status == results.FAILED and results.INFORMATIVE in record.tags:
            record.status, record.reason = results.DIFFERS, INFORMATIVE_REASON
            # pytest's own exit status and summary then agree with the verdict, which a difference leaves alone
            report.outcome, report.longrepr = "passed", None
        if record.status == results.FAILED and record.failure is not None:
            # a wrong answer is as much a reason to read what the implementation said as a fault (whose message has it)
            tail = self.under_test.stderr_tail()
            if tail:
                record.failure["stderr"] = tail
        record.duration_s = round(report.duration, 4)
        world: World | None = item.stash.get(WORLD, None)
        if world is not None:
            events, record.events_not_kept = results.kept(world.log)
            record.events = [results.reportable({**e.to_json(), "second": world.second_of(e)}) for e in events]
        if report.failed and record.failure is None and record.status != results.UNEXPECTED_PASS:
            record.failure = {
                "step": "",
                "line": record.line,
                "kind": results.ERROR,
                "message": str(report.longrepr)[-4000:],
            }
        report.user_properties.append(("sbtck", record.to_json()))
        del item.stash[RECORD]
        # The scenario's world (every command, answer and event) is done with. pytest keeps the item, and the
        # traceback of a failed step keeps the world, to the end of the run: let go of what it holds.
        if world is not None:
            world.forget()
            del item.stash[WORLD]
        return _shown(report)

    def _never_started(
        self, item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo[None]
    ) -> results.ScenarioRecord | None:
        """The record of a scenario skipped or failed in its set-up, before pytest-bdd started it (a handshake
        fault is every scenario's error there), so that it is counted as the others are."""
        template = template_of(item)
        if template is None:
            return None
        self.pytest_bdd_before_scenario(_Request(item), template.feature, template)  # type: ignore[arg-type]
        record = item.stash.get(RECORD, None)
        if record is not None and report.failed and call.excinfo is not None:
            fault = call.excinfo.value
            message = str(fault) if isinstance(fault, ImplementationFault) else str(report.longrepr)[-4000:]
            record.failure = {"step": "", "line": record.line, "kind": results.ERROR, "message": message}
        return record

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == "sbtck":
                self._record(results.ScenarioRecord.from_json(dict(value)))  # type: ignore[call-overload]

    def _record(self, record: results.ScenarioRecord) -> None:
        """One row per scenario: a rerun (pytest-rerunfailures) replaces the attempt before it, marked flaky
        when an earlier attempt did not pass."""
        for i, earlier in enumerate(self.records):
            if earlier.id == record.id:
                record.flaky = earlier.flaky or earlier.status in results.AGAINST
                record.earlier_failures = earlier.earlier_failures + (
                    [{**(earlier.failure or {}), "status": earlier.status}] if earlier.status in results.AGAINST else []
                )
                self.records[i] = record
                return
        self.records.append(record)


def _shown(report: pytest.TestReport) -> pytest.TestReport:
    """REPORT as the terminal may show it: what pytest prints of a scenario (the failure with its event log, a
    skip's reason, the output captured) carries an implementation's words, and a terminal would obey their
    control sequences (OSC 52 writes the user's clipboard); shown as the page shows them."""
    if isinstance(report.longrepr, tuple):
        path, line, reason = report.longrepr
        report.longrepr = (path, line, visible(reason))
    elif report.longrepr is not None:
        report.longrepr = visible(str(report.longrepr))
    report.sections = [(title, visible(content)) for title, content in report.sections]
    return report


class _Request:
    """Enough of a FixtureRequest to record a scenario that never started."""

    def __init__(self, item: pytest.Item) -> None:
        self.node = item


def _status(report: pytest.TestReport, record: results.ScenarioRecord) -> tuple[str, str]:
    """The scenario's status and, for the statuses that need one, the reason in words."""
    if hasattr(report, "wasxfail"):
        return (results.EXPECTED_FAILURE if report.skipped else results.UNEXPECTED_PASS), str(report.wasxfail)
    if report.failed and str(report.longrepr).startswith(XPASS_STRICT):
        return results.UNEXPECTED_PASS, str(report.longrepr)[len(XPASS_STRICT) :].strip()
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if results.NOT_APPLICABLE_PREFIX in reason:
            return results.NOT_APPLICABLE, reason.split(results.NOT_APPLICABLE_PREFIX, 1)[1]
        return "skipped", reason
    if report.failed:
        return (record.failure["kind"] if record.failure else results.ERROR), ""
    return results.PASSED, ""
