"""The kit's pytest plugin once it is woken: the implementation under test, the scenarios, the records, the report.

``sbtck.plugin`` (the ``pytest11`` entry point) loads in every pytest session
of an environment holding the kit and imports none of this until the kit is
used; then ``start`` registers the kit's markers, its steps, the ``world``
fixture and the ``Kit``'s plugins, one a concern, in the modules beside this
one: ``suite_iut`` (the implementation chosen, started, asked its handshake,
held to the budgets), ``suite_selecting`` (which scenarios run, the dry run),
``suite_recording`` (each scenario's record) and ``suite_writing`` (the
outputs, the exit status, the terminal's summary); ``suite_bdd`` holds what
they read of pytest-bdd's scenarios. Their names all start with ``suite``:
the frozen clock leaves modules so named on real time (sbtck/fixtures/clock.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest

from sbtck import catalogue
from sbtck.contract import REQUIRES_TAG
from sbtck.errors import ConfigError, DeclarationError, ImplementationFault, IUTSpecError, OutputError, ResultsError
from sbtck.fixtures.clock import ScenarioClock
from sbtck.iut.profile import CAPABILITIES
from sbtck.reports import results
from sbtck.steps.vocabulary import STEP_MODULES
from sbtck.steps.world import World
from sbtck.suite_bdd import STEP_AT, WORLD
from sbtck.suite_iut import UnderTest
from sbtck.suite_recording import Recorder
from sbtck.suite_selecting import Selector
from sbtck.suite_writing import Writer, taken


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
    for name, part in kit.plugins().items():
        manager.register(part, name)
    return kit


class Kit:
    """The woken kit: the implementation under test and the session's plugins that choose the scenarios, record
    them and write the run."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        out_lock = taken(config)  # first: nothing is started for a folder the kit may not write
        self.under_test = UnderTest(config)
        self.selector = Selector(config, self.under_test)
        self.recorder = Recorder(config, self.under_test)
        self.writer = Writer(config, out_lock, self.under_test, self.selector, self.recorder)

    def plugins(self) -> dict[str, object]:
        return {"sbtck-selecting": self.selector, "sbtck-recording": self.recorder, "sbtck-writing": self.writer}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """The selection of ITEMS, for sbtck.plugin: woken by the session's collection, the kit was registered
        after that hook had called its plugins."""
        self.selector.pytest_collection_modifyitems(items)


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
