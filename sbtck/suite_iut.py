"""The implementation under test of a run: chosen by ``--sbtck-iut``, started once, asked its handshake once.

Nothing is started until a scenario needs it (a dry run starts nothing), and a
handshake that cannot be used is every scenario's error rather than the run's.
Each scenario gets the implementation behind the budgets of real time.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from sbtck.contract import Command, Handshake, Response
from sbtck.errors import CannotStart, ImplementationFault
from sbtck.iut import answers, protocol
from sbtck.iut.implementation import Implementation
from sbtck.iut.loader import factory_for, implementation_made
from sbtck.iut.profile import CAPABILITIES, Profile, from_handshake, load_file


class UnderTest:
    """The implementation the run's scenarios ask, and the profile they are timed with."""

    def __init__(self, config: pytest.Config) -> None:
        self.spec: str = config.getoption("--sbtck-iut") or "reference"
        out = config.getoption("--sbtck-out")
        self.factory = factory_for(self.spec, Path(out) if out else None)
        profile = config.getoption("--sbtck-profile")
        self.profile_path = Path(profile) if profile else None
        if self.profile_path is not None:
            load_file(self.profile_path)
        self.handshake: Handshake | None = None
        self.handshake_fault: str | None = None
        self._implementation: Implementation | None = None
        self._profile: Profile | None = None
        # real time spent in the kit's scenarios so far: what the run's budget holds, not the session's other tests
        self.spent_s = 0.0

    @property
    def implementation(self) -> Implementation:
        if self._implementation is None:
            try:
                made = self.factory()
            except ImplementationFault:
                raise
            except Exception as exc:  # the factory is the implementation's code: its failure is the IUT's error
                raise ImplementationFault(
                    f"--iut {self.spec}: the factory failed: {type(exc).__name__}: {exc}"
                ) from None
            # every answer is checked before a step reads it: a missing column is the implementation's named error
            self._implementation = answers.Checked(implementation_made(self.spec, made))
        return self._implementation

    @property
    def profile(self) -> Profile:
        """The profile file's, or the handshake's; a handshake that cannot be used makes every scenario an error."""
        if self._profile is None:
            if self.profile_path is not None:
                self._profile = load_file(self.profile_path)
                self.handshake_fault = self._disagreement(self._profile)
            else:
                try:
                    # an in-process handshake is held to the same declared shape as one over the protocol
                    said = protocol.handshake_json(self.implementation.handshake())
                    self.handshake = answers.handshake_from(said)
                    self._profile = from_handshake(self.handshake)
                except CannotStart as exc:  # the user's setup, not the implementation's conduct: no verdict at all
                    raise self._cannot_start(exc) from None
                except Exception as exc:  # the implementation's code or answer: every scenario's error, not the run's
                    cause = str(exc).removeprefix(f"--iut {self.spec}: ")
                    self.handshake_fault = f"--iut {self.spec}: no usable handshake: {cause}"
                    self._profile = Profile(self.spec, self.spec, "", {}, frozenset(CAPABILITIES), frozenset())
        return self._profile

    def _cannot_start(self, exc: CannotStart) -> pytest.UsageError:
        """The run's one line (exit status 2 under sbtck run): a scenario could not do better than err."""
        return pytest.UsageError(f"--iut {self.spec}: {str(exc).removeprefix(f'--iut {self.spec}: ')}")

    def _disagreement(self, profile: Profile) -> str | None:
        """A profile that gives an open value other than the one the implementation declares would time every
        scenario wrong: that is every scenario's error, naming both values (the handshake is not asked to agree
        with a value it does not declare)."""
        try:
            declared = answers.handshake_from(protocol.handshake_json(self.implementation.handshake())).params
        except CannotStart as exc:
            raise self._cannot_start(exc) from None
        except Exception:  # a broken handshake shows in the scenarios' own errors, not here
            return None
        differ = [
            f"{name} = {profile.params[name]:g} in the profile, {value!r} in the handshake"
            for name, value in declared.items()
            if name in profile.params and isinstance(value, int | float) and value != profile.params[name]
        ]
        if not differ:
            return None
        return (
            f"--sbtck-profile {profile.source} and the implementation's handshake disagree: {'; '.join(differ)}."
            " The scenarios would time the implementation with a value it does not run: make them agree"
        )

    def handshake_said(self) -> Handshake | None:
        """The handshake the report names: the one the profile came from, or, where a profile file was given, the
        started implementation's; none is started only to be asked."""
        if self.handshake is None and self._implementation is not None:
            try:
                return self._implementation.handshake()
            except ImplementationFault:
                return None
        return self.handshake

    def budgeted(self) -> Implementation:
        """The implementation for one scenario, held to the scenario's budget and what is left of the run's."""
        return _Budgeted(self.implementation, RUN_BUDGET_S - self.spent_s)

    def stderr_tail(self) -> str:
        """The end of the implementation's stderr, where it runs in a process of its own; "" in process."""
        inner: Any = getattr(self._implementation, "inner", self._implementation)
        tail = getattr(inner, "stderr_tail", None)
        return str(tail()) if callable(tail) else ""

    def close(self) -> None:
        if self._implementation is not None:
            self._implementation.close()


# Budgets of real time, in seconds (0: none): an implementation that answers every request just within its
# time-out (SBTCK_REQUEST_TIMEOUT) would otherwise hold a scenario for minutes and a run for hours. A scenario
# past its budget, or begun past the run's, is an error naming the limit; the command under way ends first. The
# run's budget counts the time spent in the kit's scenarios, so that other tests of a pytest session that also
# collects the suite (a project's own, the kit's CI) never spend it.
SCENARIO_BUDGET_S = float(os.environ.get("SBTCK_SCENARIO_BUDGET_S", "60"))
RUN_BUDGET_S = float(os.environ.get("SBTCK_RUN_BUDGET_S", "3600"))


class _Budgeted:
    """The implementation for one scenario: a command past the scenario's or the run's budget is not sent."""

    def __init__(self, inner: Implementation, run_left_s: float) -> None:
        self.inner = inner
        self.limits: list[tuple[float, str]] = []
        if SCENARIO_BUDGET_S > 0:
            limit = f"the scenario's budget of {SCENARIO_BUDGET_S:g} s of real time (SBTCK_SCENARIO_BUDGET_S)"
            self.limits.append((time.perf_counter() + SCENARIO_BUDGET_S, limit))
        if RUN_BUDGET_S > 0:
            limit = f"the run's budget of {RUN_BUDGET_S:g} s (SBTCK_RUN_BUDGET_S)"
            self.limits.append((time.perf_counter() + run_left_s, limit))
        self.check()

    def check(self) -> None:
        # real time, inside the scenario's frozen clock: freezegun leaves the modules named sbtck.suite* alone
        now = time.perf_counter()
        for deadline, limit in self.limits:
            if now > deadline:
                raise ImplementationFault(f"{limit} ran out: the implementation answers too slowly to be judged")

    def handshake(self) -> Handshake:
        return self.inner.handshake()

    def execute(self, command: Command) -> Response:
        self.check()
        return self.inner.execute(command)

    def close(self) -> None:
        self.inner.close()
