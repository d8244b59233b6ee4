"""In-process implementations that misbehave towards the kit itself.

``not_an_implementation``: a factory that returns something else.
``escapes``: refuses SEND in words holding terminal escape sequences.
``fails_once``: refuses every other START, so that each scenario fails on its
first attempt and passes on its rerun (pytest-rerunfailures).
"""

from __future__ import annotations

from sbtck import contract
from sbtck.iut.reference import ReferenceImplementation


def not_an_implementation() -> object:
    return {"name": "a dict, not a broker"}


class _FailsOnce(ReferenceImplementation):
    starts = 0

    def execute(self, command: contract.Command) -> contract.Response:
        if isinstance(command, contract.Start):
            self.starts += 1
            if self.starts % 2:
                return contract.Response(error="refused on the first attempt")
        return super().execute(command)


def fails_once() -> ReferenceImplementation:
    return _FailsOnce(name="fails once")


class _Escapes(ReferenceImplementation):
    """Refuses SEND with words that would clear the screen and set the terminal's title."""

    def execute(self, command: contract.Command) -> contract.Response:
        if isinstance(command, contract.Send):
            return contract.Response(error="\x1b[2J\x1b]0;pwned\x07 no sends today \u202e \ud800")
        return super().execute(command)


def escapes() -> ReferenceImplementation:
    return _Escapes(name="escapes")


class _WrongTypes(ReferenceImplementation):
    """Reports every rollback as returning "lots" of messages, and every event a second of 10**400 later."""

    def execute(self, command: contract.Command) -> contract.Response:
        response = super().execute(command)
        for event in response.events:
            if event.kind == "transaction_rolled_back":
                event.fields["returned"] = "lots"
            event.fields["spid"] = 10**400
        return response


def wrong_types() -> ReferenceImplementation:
    return _WrongTypes(name="wrong types")


# an OSC 52 sequence writes the terminal's clipboard; OSC 0 sets its title; U+202E reverses the line after it
OSC = "\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07\u202e"


class _Osc(ReferenceImplementation):
    """Tags every event with terminal sequences, and reports no message arriving, so that checks fail and print
    the event log."""

    def execute(self, command: contract.Command) -> contract.Response:
        response = super().execute(command)
        response.events = [e for e in response.events if e.kind not in ("message_arrived", "procedure_started")]
        for event in response.events:
            event.fields["note"] = OSC
        print(f"stdout of the implementation {OSC}")  # captured by pytest, shown for a failing scenario
        return response


def osc() -> ReferenceImplementation:
    return _Osc(name="osc")
