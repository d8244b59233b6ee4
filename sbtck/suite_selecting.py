"""Which of the collected scenarios run, and how: ``--sbtck-tags``, the capabilities, the expected failures, a dry run.

A plugin of the session once the kit is woken (``sbtck.suite.start``). It
also says how a run's scenarios were chosen when they are not all of its
features', so that a part of the suite never reads as a verdict on the whole.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd.exceptions import StepDefinitionNotFoundError
from pytest_bdd.scenario import scenario_wrapper_template_registry

from sbtck import tags
from sbtck.contract import REQUIRES_TAG
from sbtck.iut.profile import load_expectations
from sbtck.reports import results
from sbtck.resources import features
from sbtck.suite_bdd import (
    EXAMPLE_PARAM,
    NOT_APPLICABLE_BECAUSE,
    SAID,
    feature_path,
    identities,
    identity,
    tags_of,
    template_of,
    unknown_step,
)
from sbtck.suite_iut import UnderTest


class Selector:
    """The scenarios of the run, chosen at collection; under a dry run, bound and loaded instead of run."""

    def __init__(self, config: pytest.Config, under_test: UnderTest) -> None:
        self.config = config
        self.under_test = under_test
        expectations = config.getoption("--sbtck-expectations")
        self.expectations_path: str | None = expectations
        self.expected_failures = load_expectations(Path(expectations)) if expectations else frozenset()
        self.dry_run = bool(config.getoption("--sbtck-dry-run"))
        self.dry: dict[str, int] = {"scenarios": 0, "bind": 0}  # of a dry run: how many were checked, how many bind
        self.tags: str | None = config.getoption("--sbtck-tags") or None
        self._tags = tags.expression(self.tags) if self.tags else None

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

    def selection(self, recorded: int, session: pytest.Session | None = None) -> dict[str, Any] | None:
        """How this run's RECORDED scenarios were chosen when they are not all of its features': how many, of how
        many, by what. None for a whole run."""
        total = self._total()
        if not total or recorded >= total:
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
        return {"scenarios": recorded, "of": total, "by": ", ".join(by) or "pytest's arguments"}

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
        return len(self._ids(templates))

    def _ids(self, templates: list[Any]) -> set[str]:
        return {
            results.scenario_id(feature_path(self.config, t.feature.filename), name)
            for t in templates
            for name, _, _ in identities(t)
        }

    def _check_listed(self) -> None:
        """Every scenario an expectations file or the profile lists as expected to fail exists: a renamed one
        would otherwise be dropped silently (only the kit's own features are known; --features runs others)."""
        if os.environ.get("SBTCK_FEATURES"):
            return
        known = self._ids(list(scenario_wrapper_template_registry.values()))
        if not known:
            return
        for where, listed in (
            (f"expectations {self.expectations_path}", self.expected_failures),
            (
                f"profile {self.under_test.profile_path or 'of the handshake'}",
                frozenset() if self.dry_run else None,
            ),
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

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.dry_run and report.when == "call":  # counted as reported: under xdist the workers check them
            self.dry["scenarios"] += 1
            self.dry["bind"] += int(report.passed)
