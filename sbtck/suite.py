"""The kit's pytest plugin once it is woken: IUT selection, the profile, frozen time, and recording.

``sbtck.plugin`` (the ``pytest11`` entry point) loads in every pytest session
of an environment holding the kit and imports none of this until the kit is
used; then ``start`` registers the kit's markers, its steps, the ``world``
fixture and the ``Kit``, which records every scenario and writes the report.
The implementation under test is ``suite_iut``'s, and ``suite_bdd`` holds what
the Kit reads of pytest-bdd's scenarios: modules named so that the frozen
clock leaves them on real time, as it does this one (sbtck/fixtures/clock.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import os
import sys
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd.exceptions import StepDefinitionNotFoundError
from pytest_bdd.scenario import scenario_wrapper_template_registry

from sbtck import __version__, catalogue, config, tags
from sbtck.contract import PROTOCOL_VERSION, REQUIRES_TAG
from sbtck.errors import (
    BuildFailed,
    CheckFailed,
    ConfigError,
    DeclarationError,
    ImplementationFault,
    IUTSpecError,
    OutputError,
    Refused,
    ResultsError,
    RowsDiffer,
)
from sbtck.fixtures.clock import ScenarioClock
from sbtck.iut.profile import CAPABILITIES, load_expectations
from sbtck.reports import baseline, outfolder, results
from sbtck.reports.publish import interrupted
from sbtck.resources import features, kit_root
from sbtck.steps.vocabulary import STEP_MODULES
from sbtck.steps.world import World
from sbtck.suite_bdd import (
    EXAMPLE_PARAM,
    NOT_APPLICABLE_BECAUSE,
    RECORD,
    SAID,
    STEP_AT,
    STEP_STARTED,
    WORLD,
    feature_path,
    identities,
    identity,
    tags_of,
    template_of,
    unknown_step,
)
from sbtck.suite_iut import UnderTest
from sbtck.visible import visible


def start(config: pytest.Config) -> Kit:
    """Wakes the kit in CONFIG's session, once: its markers, steps and fixture, and the Kit that records."""
    found = config.stash.get(KIT, None)
    if found is not None:
        return found
    for rule in catalogue.load().rules:
        config.addinivalue_line("markers", f"{rule}: checks rule {rule} of spec/rules.yaml")
    config.addinivalue_line(
        "markers",
        f"{results.INFORMATIVE}: behaviour the documents leave open; failing it is {results.DIFFERS!r}, "
        "never a failure",
    )
    shrank = "a reproducer the workload stage shrank from a failing world"
    config.addinivalue_line("markers", f"{catalogue.WORKLOAD}: {shrank}")
    for rule, meaning in catalogue.KIT_RULES.items():
        config.addinivalue_line("markers", f"{rule}: {meaning}")
    for cap in CAPABILITIES:
        config.addinivalue_line(
            "markers", f"{REQUIRES_TAG}{cap.replace('_', '-')}: only for implementations with {cap}"
        )
    try:
        kit = Kit(config)
    except (IUTSpecError, DeclarationError, ResultsError, ConfigError, OutputError) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[KIT] = kit
    manager = config.pluginmanager
    if not manager.has_plugin(__name__):
        manager.register(sys.modules[__name__], __name__)  # the world fixture
    # the step definitions, registered with the kit so that they serve the kit's features and a user's own alike
    for module in STEP_MODULES:
        manager.import_plugin(module)
    manager.register(kit, "sbtck-kit")
    return kit


class Kit:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        out = config.getoption("--sbtck-out")
        self._out_lock = contextlib.ExitStack()
        if out and not hasattr(config, "workerinput"):
            self._take(Path(out))
        self.under_test = UnderTest(config)
        expectations = config.getoption("--sbtck-expectations")
        self.expected_failures = load_expectations(Path(expectations)) if expectations else frozenset()
        given = config.getoption("--sbtck-baseline")
        self.baseline = Path(given) if given else None
        if self.baseline is not None:
            results.read(self.baseline)  # a wrong baseline is bad input, said before any scenario runs
        self.dry_run = bool(config.getoption("--sbtck-dry-run"))
        self.dry: dict[str, int] = {"scenarios": 0, "bind": 0}  # of a dry run: how many were checked, how many bind
        self.tags: str | None = config.getoption("--sbtck-tags") or None
        self._tags = tags.expression(self.tags) if self.tags else None
        self.interrupted = False
        self.session: pytest.Session | None = None  # once it finished: whether it stopped early (-x)
        self.build_failed = False  # a builder of the report failed after results.json was written: exit 3
        self.build_interrupted = False  # a signal came while the report was built, after results.json: exit 2
        self.changes: baseline.Changes | None = None  # against --sbtck-baseline, once the session finished
        # what a rerun of one scenario needs of this run's settings
        self.settings: dict[str, str | None] = {
            "iut": self.under_test.spec,
            "profile": config.getoption("--sbtck-profile"),
            "expectations": expectations,
            "features": os.environ.get("SBTCK_FEATURES", "").replace(os.pathsep, ",") or None,
        }
        self.records: list[results.ScenarioRecord] = []
        self.started = dt.datetime.now(dt.UTC)
        self.t0 = time.perf_counter()

    def _take(self, out: Path) -> None:
        """OUT is the kit's to write (sbtck run has checked it and holds its lock already; plain pytest has not)."""
        foreign = outfolder.refused(out, outfolder.REPORT)
        if foreign:
            raise OutputError(f"--sbtck-out {out}: {foreign}")
        try:
            out.mkdir(parents=True, exist_ok=True)
            if not self._out_lock.enter_context(outfolder.locked(out)):
                raise OutputError(f"--sbtck-out {out}: {outfolder.TAKEN}")
            outfolder.claim(out, outfolder.REPORT)
        except OSError as exc:
            raise OutputError(f"--sbtck-out {out}: cannot write there ({exc.strerror or exc})") from None

    # ------------------------------------------------------------ collection
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self._check_listed()
        self._select(items)
        if self.dry_run:  # no handshake: nothing is started
            return
        for item in items:
            template = template_of(item)
            if template is None:
                continue
            # asked only of a session with scenarios: a project's own tests start no implementation
            profile = self.under_test.profile
            tags = template.tags | template.feature.tags
            missing = sorted(
                t[len(REQUIRES_TAG) :]
                for t in tags
                if t.startswith(REQUIRES_TAG)
                if t[len(REQUIRES_TAG) :].replace("-", "_") not in profile.capabilities
            )
            if missing:
                # skipped as the scenario starts (pytest_bdd_before_scenario), not at collection: the reporting
                # plugins of pytest-bdd (allure-pytest-bdd) record a scenario only once it has started
                why = f"{results.NOT_APPLICABLE_PREFIX}{profile.name} does not declare {', '.join(missing)}"
                item.stash[NOT_APPLICABLE_BECAUSE] = why
            sid = results.scenario_id(feature_path(self.config, template.feature.filename), identity(item, template)[0])
            # strict: an unexpected pass fails the run, as junit.xml and cucumber.json say it does
            if sid in profile.expected_failures:
                item.add_marker(pytest.mark.xfail(reason=results.LISTED_IN_PROFILE, strict=True))
            elif sid in self.expected_failures:
                item.add_marker(pytest.mark.xfail(reason=results.LISTED_IN_EXPECTATIONS, strict=True))

    def _select(self, items: list[pytest.Item]) -> None:
        """Only the scenarios --sbtck-tags picks; a tag no scenario carries is bad input, never an empty run."""
        if self._tags is None:
            return
        templates = [(item, template_of(item)) for item in items]
        known = {tag for _, t in templates if t is not None for tag in tags_of(t)}
        wrong = tags.unknown(str(self.tags), self._tags, known) if known else None
        if wrong:
            raise pytest.UsageError(wrong)
        kept = [item for item, t in templates if t is None or tags.matches(self._tags, tags_of(t, item))]
        if len(kept) < len(items):
            self.config.hook.pytest_deselected(items=[item for item in items if item not in kept])
            items[:] = kept

    def selection(self, session: pytest.Session | None = None) -> dict[str, Any] | None:
        """How this run's scenarios were chosen when they are not all of its features': how many, of how many, by
        what. None for a whole run."""
        total = self._total()
        if not total or len(self.records) >= total:
            return None
        option = self.config.option
        by = [f"--tags {self.tags!r}"] if self.tags else []
        by += [f"{flag} {value!r}" for flag, value in (("-m", option.markexpr), ("-k", option.keyword)) if value]
        deselected = getattr(option, "deselect", None) or []
        by += [f"--deselect of {len(deselected)}"] if deselected else []
        nodes = [arg for arg in self.config.args if "::" in arg]
        by += (
            [f"node id {nodes[0].rsplit('::', 1)[-1]}" if len(nodes) == 1 else f"{len(nodes)} node ids"]
            if nodes
            else []
        )
        by += ["--lf (what failed last time)"] if getattr(option, "lf", False) else []
        if getattr(option, "maxfail", 0) and session is not None and session.shouldfail:
            by.append(f"a stop after {option.maxfail} failure{'s' if option.maxfail > 1 else ''} (-x, --maxfail)")
        return {"scenarios": len(self.records), "of": total, "by": ", ".join(by) or "pytest's arguments"}

    def _total(self) -> int:
        """How many records the run's features make: the scenarios bound in this process (every example of an
        outline), or, in a process that bound none (xdist's controller), those of the features it runs."""
        templates = list(scenario_wrapper_template_registry.values())
        if not templates:
            from pytest_bdd.feature import get_features

            given = os.environ.get("SBTCK_FEATURES")
            paths = given.split(os.pathsep) if given else [str(features())]
            files = [str(f) for p in map(Path, paths) for f in ([p] if p.is_file() else sorted(p.rglob("*.feature")))]
            templates = [t for feature in get_features(files) for t in feature.scenarios.values()]
        return len(
            {
                results.scenario_id(feature_path(self.config, t.feature.filename), name)
                for t in templates
                for name, _, _ in identities(t)
            }
        )

    def _check_listed(self) -> None:
        """Every scenario an expectations file or the profile lists as expected to fail exists: a renamed one
        would otherwise be dropped silently (only the kit's own features are known; --features runs others)."""
        if os.environ.get("SBTCK_FEATURES"):
            return
        known = {
            results.scenario_id(feature_path(self.config, t.feature.filename), name)
            for t in scenario_wrapper_template_registry.values()
            for name, _, _ in identities(t)
        }
        if not known:
            return
        for where, listed in (
            (f"expectations {self.settings['expectations']}", self.expected_failures),
            (f"profile {self.under_test.profile_path or 'of the handshake'}", frozenset() if self.dry_run else None),
        ):
            listed = self.under_test.profile.expected_failures if listed is None else listed
            unknown = sorted(set(listed) - known)
            if unknown:
                near = difflib.get_close_matches(unknown[0], sorted(known), n=1)
                raise pytest.UsageError(
                    f"{where}: no scenario {unknown[0]!r}"
                    + (f" (did you mean {near[0]!r}?)" if near else "")
                    + (f" and {len(unknown) - 1} more" if len(unknown) > 1 else "")
                    + "; `sbtck expectations --from RUN/results.json` writes a list of today's ids"
                )

    # ------------------------------------------------------------- dry run
    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        """Under --sbtck-dry-run, a scenario instead of running: each step has a definition, each topology loads."""
        template = template_of(pyfuncitem) if self.dry_run else None
        if template is None:
            return None
        from pytest_bdd.scenario import get_step_function

        from sbtck.fixtures import topology
        from sbtck.steps.phrases import INLINE_TOPOLOGY, NAMED_TOPOLOGY

        callspec = getattr(pyfuncitem, "callspec", None)
        scenario = template.render(callspec.params.get(EXAMPLE_PARAM, {}) if callspec is not None else {})
        path = feature_path(self.config, template.feature.filename)
        for step in scenario.steps:
            if get_step_function(pyfuncitem._request, step) is None:
                said = unknown_step(f"{step.keyword} {step.name}", path, step.line_number)
                pyfuncitem.stash[SAID] = said
                raise StepDefinitionNotFoundError(said)
            named = NAMED_TOPOLOGY.template.match(step.name)
            if named is not None and named.get("name"):
                topology.named(str(named["name"]))
            elif INLINE_TOPOLOGY.template.match(step.name) is not None and step.docstring is not None:
                topology.parse(step.docstring, path, line_offset=step.line_number + 1)
        return True

    # ------------------------------------------------------------- recording
    @pytest.hookimpl(trylast=True)
    def pytest_bdd_before_scenario(self, request: pytest.FixtureRequest, feature: Any, scenario: Any) -> None:
        template = template_of(request.node)
        name, line, example = (
            identity(request.node, template) if template is not None else (scenario.name, scenario.line_number, None)
        )
        record = results.ScenarioRecord(
            id=results.scenario_id(feature_path(self.config, feature.filename), name),
            feature_path=feature_path(self.config, feature.filename),
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
        # real time: freezegun leaves this module alone (sbtck/fixtures/clock.py)
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
            template = template_of(item)
            if template is not None:
                self.pytest_bdd_before_scenario(_Request(item), template.feature, template)  # type: ignore[arg-type]
                record = item.stash.get(RECORD, None)
                if record is not None and report.failed and call.excinfo is not None:
                    fault = call.excinfo.value
                    message = str(fault) if isinstance(fault, ImplementationFault) else str(report.longrepr)[-4000:]
                    record.failure = {"step": "", "line": record.line, "kind": results.ERROR, "message": message}
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

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.dry_run and report.when == "call":  # counted as reported: under xdist the workers check them
            self.dry["scenarios"] += 1
            self.dry["bind"] += int(report.passed)
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

    @pytest.hookimpl
    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None, None, None]:
        self.session = session
        self.interrupted = self.interrupted or exitstatus == pytest.ExitCode.INTERRUPTED
        if not hasattr(self.config, "workerinput"):
            verdict = results.verdict({"interrupted": self.interrupted}, [rec.status for rec in self.records])
            # only a session that collected scenarios of the kit has the kit's verdict: the plugin loads in every
            # pytest session of its environment, and a project's own tests must keep their exit status
            if verdict == results.NOTHING_RAN and self.records and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED
            if self.baseline is not None:
                self.changes = baseline.compare(results.read(self.baseline)[1], self.records)
                if self.changes.regressions and session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
            out = self.config.getoption("--sbtck-out")
            if out is not None and not self.dry_run:
                self.write(Path(out))
                if self.build_failed:  # the run's verdict is printed; the report is not whole
                    session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
                if self.build_interrupted:
                    session.exitstatus = pytest.ExitCode.INTERRUPTED
        return (yield)

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
            "selection": self.selection(self.session),
        }

    def write(self, out: Path) -> None:
        from sbtck.reports import publish

        # in the order of the features, whatever order the scenarios finished in (under xdist it changes)
        records = sorted(self.records, key=lambda rec: (rec.feature_path, rec.line, rec.id))
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
        if self.dry_run and not hasattr(self.config, "workerinput"):
            checked, bound = self.dry["scenarios"], self.dry["bind"]
            terminalreporter.write_line(
                f"sbtck: dry run: {bound}{f' of {checked}' if bound < checked else ''} scenarios bind and their "
                "topologies load; nothing ran"
            )
            return
        out = self.config.getoption("--sbtck-out")
        if out and self.records and not hasattr(self.config, "workerinput"):
            counts: dict[str, int] = {}
            for rec in self.records:
                counts[rec.status] = counts.get(rec.status, 0) + 1
            # in the statuses' own order, whatever order the scenarios finished in (under xdist it changes)
            order = [s for s in results.STATUSES if s in counts] + sorted(set(counts) - set(results.STATUSES))
            summary = ", ".join(f"{counts[s]} {s}" for s in order)
            folder = interrupted(Path(out)) if self.interrupted else Path(out)
            verdict = results.verdict({"interrupted": self.interrupted}, [rec.status for rec in self.records])
            words = results.selection_words({"selection": self.selection(self.session)})
            # a page that could not be built is not pointed at: the folder, with results.json and the log, is
            page = folder / "index.html"
            shown = page if page.is_file() else folder
            terminalreporter.write_line(f"sbtck: {verdict}{' ' + words if words else ''}: {summary}; report: {shown}")
        if self.changes is not None:
            terminalreporter.write_line(f"sbtck: against the baseline {self.baseline}: {self.changes.summary()}")

    def pytest_unconfigure(self) -> None:
        self.under_test.close()
        self._out_lock.close()


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


INFORMATIVE_REASON = (
    "an @informative scenario: the documents leave this open and the implementation does otherwise "
    "than the reference engine"
)
# how pytest words a strict xfail that passed
XPASS_STRICT = "[XPASS(strict)]"
KIT = pytest.StashKey[Kit]()


@pytest.fixture
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    yield from world_of(request)


def world_of(request: pytest.FixtureRequest) -> Iterator[World]:
    """The world of one scenario or test: the implementation under test, the profile, a frozen clock, the log."""
    under_test = request.config.stash[KIT].under_test
    profile = under_test.profile  # tried once per run: a handshake fault is then every scenario's error
    if under_test.handshake_fault is not None:
        raise ImplementationFault(under_test.handshake_fault)
    begun = time.perf_counter()
    budgeted = under_test.budgeted()
    try:
        with ScenarioClock() as clock:
            w = World(budgeted, profile, clock, where=lambda: request.node.stash.get(STEP_AT, ("?", 0)))
            request.node.stash[WORLD] = w
            yield w
    finally:
        under_test.spent_s += time.perf_counter() - begun
