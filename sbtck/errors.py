"""Every error the kit raises, under one base; each says what to do about it.

Grouped by whose mistake it is, because that decides a scenario's status:
what a user declares or names is theirs to change; a scenario's own mistake
is an *error* of the suite; an implementation that refuses what a scenario
expected is a *failure* (``Refused`` is therefore an ``AssertionError``); an
implementation that breaks the protocol or dies is an *error*. The reference
engine's refusals are answers of a broker, not faults of the kit.

This module imports nothing, so every layer may import it.
"""

from __future__ import annotations

# the words after which a failure's message repeats the scenario's log: a report that shows the log apart cuts there
LOG_FOLLOWS = "\nlog:\n"

__all__ = [
    "BrokerError",
    "BuildFailed",
    "CannotStart",
    "CheckFailed",
    "ConfigError",
    "ContractError",
    "DeclarationError",
    "FaultError",
    "IUTSpecError",
    "ImplementationFault",
    "KitDataMissing",
    "LogDiffers",
    "MasterError",
    "NoStepFor",
    "OutputError",
    "ProfileError",
    "ProtocolError",
    "ReceivingError",
    "Refused",
    "ReportImpossible",
    "ResultsError",
    "RouteAdminError",
    "RowsDiffer",
    "SbtckError",
    "ScenarioError",
    "TemplateError",
    "TimeExpressionError",
    "TopologyError",
    "TopologyRefused",
    "ViewDiffers",
    "ViewError",
    "WorkloadSummaryError",
]


class SbtckError(Exception):
    """Something the kit cannot go on with; the message names the thing and what is wrong with it."""


# ---------------------------------------------------------------- what a user declares or names


class DeclarationError(SbtckError, ValueError):
    """A declarative file (topology, profile, expectations) that cannot be used: mend the file at the place named."""


class TopologyError(DeclarationError):
    """A topology file that is not a topology: mend the key or line named (a "did you mean" names the near one)."""


class ProfileError(DeclarationError):
    """A profile or handshake value the catalogue does not allow: use a declared capability or parameter."""


class ConfigError(SbtckError, ValueError):
    """sbtck.toml or [tool.sbtck] has a key or value the kit does not know: mend or remove it."""


class IUTSpecError(SbtckError, ValueError):
    """An --iut that names no implementation: use reference, python:MOD:NAME, cmd:..., tcp:HOST:PORT or image:NAME."""


class MasterError(SbtckError, ValueError):
    """A Spark master that cannot be reached: start it, or run with --master local[N]."""


class OutputError(SbtckError, ValueError):
    """An --out folder the workload stage will not write into: name an empty folder or one it wrote before."""


class ResultsError(SbtckError, ValueError):
    """A results.json that cannot be read: name one that ``sbtck run`` wrote (under its --out)."""


class BuildFailed(SbtckError):
    """A builder of the report failed after results.json was written; the others were written: the line names it
    and the log of its traceback (OUT/sbtck-errors.log). A defect of the kit: please report it."""


class WorkloadSummaryError(SbtckError, ValueError):
    """A workload summary.json that cannot be read: name one that ``sbtck workload`` wrote."""


class KitDataMissing(SbtckError, RuntimeError):
    """The installed kit lacks its data: reinstall it with pip from the wheel or the checkout."""


# ---------------------------------------------------------------- what a scenario says


class ScenarioError(SbtckError, ValueError):
    """The scenario itself is wrong (an unknown name, a time that cannot be): mend the feature line reported."""


class TimeExpressionError(ScenarioError):
    """A time in a step that is not ``N seconds``, ``{param}`` or their sums and differences: write it so."""


class TemplateError(SbtckError, ValueError):
    """A step phrase in sbtck/steps/phrases.py that its notation cannot read or say: mend the phrase named."""


class NoStepFor(SbtckError, ValueError):
    """A workload operation the step vocabulary cannot say: add a phrase for it to sbtck/steps/phrases.py."""


# ---------------------------------------------------------------- what an implementation does


class Refused(SbtckError, AssertionError):
    """The implementation refused a command the scenario expected it to take: a failure of the implementation."""


class CheckFailed(SbtckError, AssertionError):
    """What the implementation showed is not what a scenario's check expected: a failure of the implementation.
    Raised, not asserted, so that its message is the kit's words alone, never pytest's explanation of an assert."""


class RowsDiffer(CheckFailed):
    """Rows the implementation showed are not the rows a scenario expected. It keeps both tables, so that a
    report can set them side by side; ``expected`` is None where a check asked for a number of rows only."""

    def __init__(
        self, message: str, columns: list[str], expected: list[list[str]] | None, got: list[list[str]]
    ) -> None:
        super().__init__(message)
        self.table = {"columns": columns, "expected": expected, "got": got}


class ReportImpossible(CheckFailed):
    """The implementation reported what cannot have happened in the world (a queue the topology lacks, a message
    never sent, events out of time order): a failure of the implementation, named by the invariant it breaks."""


class LogDiffers(RowsDiffer):
    """The events the implementation reported are not the rows of a scenario's log table."""


class ViewDiffers(RowsDiffer):
    """A view's rows (sys.dm_broker_activated_tasks, sys.routes, the kit's sbtck.forwarder, ...) are not what a
    scenario expected."""


class ImplementationFault(SbtckError):
    """The implementation broke the protocol or died: read the stderr tail shown and mend the implementation."""


class CannotStart(ImplementationFault):
    """The implementation could not be started or reached for a reason on the user's side (no such program, nothing
    listening on the port, no such image or a missing extra): mend the --iut or the machine, then run again."""


class ProtocolError(SbtckError, ValueError):
    """A line that breaks the JSON-lines protocol (docs/protocol.md): send what the protocol declares."""


class ContractError(SbtckError, ValueError):
    """Data that is not a valid command or response of the contract: send a kind and fields the contract declares."""


# ---------------------------------------------------------------- the reference engine's refusals


class BrokerError(SbtckError, ValueError):
    """A command the reference broker refuses, as Service Broker would; the message says why."""


class TopologyRefused(BrokerError):
    """A topology the engine cannot build (checked files never give one): declare the objects it names."""


class FaultError(BrokerError):
    """A fault or administration command naming what the topology lacks: name an existing instance or database."""


class RouteAdminError(BrokerError):
    """CREATE, ALTER or DROP ROUTE refused: the message names the route and the clause."""


class ReceivingError(BrokerError):
    """A RECEIVE or GET CONVERSATION GROUP refused: name a queue, session and conversation that exist."""


class ViewError(BrokerError):
    """A view the engine does not show, or a query of it that names nothing: name a declared view."""
