"""Renders the command and event reference of docs/protocol.md from the contract itself.

    python -m sbtck.iut.protocol_doc [PATH | -]     (default: the kit's docs/protocol.md; sbtck.generated)

The document's written part, up to the reference, stays as it is.

tests/contract/test_protocol_doc.py fails when the document and the contract differ.
"""

from __future__ import annotations

import dataclasses
import json

from sbtck import contract, generated, topology
from sbtck.observations import (
    CLASSES,
    DECISION_FIELDS,
    EFFECT,
    EXACT,
    FREE_TEXT,
    REASONING,
    RECORDS,
    RELATIVE,
    TIME,
    TRACE,
    Field,
    Record,
)
from sbtck.views import (
    COLUMN_CLASSES,
    COLUMN_MEANINGS,
    COLUMN_TYPES,
    COLUMN_VALUES,
    VIEW_COLUMN_TYPES,
    VIEW_COLUMNS,
    VIEW_ROWS,
    column_class,
)

Q = contract.QueueRef("sql1", "shop", "TargetQueue")
ROUTE = topology.Route("ToOrders", "Target", None, "TCP://sql2:4022", None, None)
T = 1767225600000
EXAMPLES: list[contract.Command] = [
    contract.Start(T, topology.Topology([topology.Instance("sql1", "TCP://sql1:4022", 1, False, [], [])])),
    contract.AdvanceTime(T + 12000),
    contract.BeginDialog(T, "D1", "sql1", "shop", "Initiator", "Target", None),
    contract.Send(T, "D1", "DEFAULT", "hello", False),
    contract.BeginTransaction(T, "S1"),
    contract.Commit(T, "S1"),
    contract.Rollback(T, "S1"),
    contract.Receive(T, "S1", Q, top=1, where_dialog=None, where_group=None, waitfor_ms=5000),
    contract.GetConversationGroup(T, "S1", Q, waitfor_ms=None),
    contract.AlterQueue(T, Q, status="ON", procedure_name="drain", max_queue_readers=2),
    contract.CreateEventNotification(T, "Activator", Q),
    contract.DropEventNotification(T, "Activator", Q),
    contract.ExitProcedure(T, Q, 1),
    contract.CreateRoute(T, "sql1", "shop", ROUTE),
    contract.AlterRoute(T, "sql1", "shop", topology.RouteChange("ToOrders", "Target", None, "LOCAL", None, None)),
    contract.DropRoute(T, "sql1", None, "AutoCreatedLocal"),
    contract.AnswerRoutingRequest(T, "sql1", "shop", ROUTE),
    contract.SetMessageForwarding(T, "sql5", True),
    contract.SetReachable(T, "sql2", False),
    contract.Failover(T, "sql4", "ledger"),
    contract.FailTaskHandlers(T, "sql1", 2),
    contract.SetDispatcherSaving(T, "sql2", "stopped", 0),
    contract.LoseInTransit(T, "D1", 0, False),
    contract.DropConnection(T, "sql1", "TCP://sql2:4022"),
    contract.FailTransmission(T, "D1", "resource"),
    contract.CreateMasterKey(T, "sql2", "vault"),
    contract.StopAckCleanup(T, "sql1", "shop"),
    contract.QueryView(T, "sys.dm_broker_queue_monitors", None, None),
]


def render_commands() -> str:
    parts = []
    for command in EXAMPLES:
        cls = type(command)
        doc = (
            " ".join((cls.__doc__ or "").split())
            if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "(")
            else ""
        )
        fields = ", ".join(f"`{f.name}`" for f in dataclasses.fields(cls))
        example = json.dumps({"id": 7, "op": "execute", "command": command.to_json()})
        result = " ".join((cls.result.__doc__ or "").split())
        parts.append(
            f"### `{cls.kind}`\n\n"
            + (f"{doc}\n\n" if doc else "")
            + f"Fields: {fields}.\n\n"
            + (
                f"The randomized stage writes it only for an implementation declaring `{cls.needs}`.\n\n"
                if cls.needs
                else ""
            )
            + f"Result (`result_{cls.kind}` of the schema): {result}\n\n```json\n{example}\n```\n"
        )
    columns = {
        view: ", ".join(f"`{col}` ({column_class(col)})" for col in VIEW_COLUMNS[view]) for view in contract.VIEWS
    }
    views = "\n".join(f"| `{view}` | {VIEW_ROWS[view]} | {columns[view]} |" for view in contract.VIEWS)
    own = "\n".join(f"- `{name}`: {text}." for name, text in sorted(COLUMN_MEANINGS.items()))
    by_type: dict[str, list[str]] = {}
    for column, json_type in sorted(COLUMN_TYPES.items()):
        by_type.setdefault(json_type, []).append(f"`{column}`")
    types = "\n".join(f"- {json_type}: {', '.join(columns)}." for json_type, columns in sorted(by_type.items()))
    types += "".join(
        f"\n- in `{view}`, `{column}`: {json_type}."
        for view, own in VIEW_COLUMN_TYPES.items()
        for column, json_type in own.items()
    )
    classes = "\n".join(f"- `{column}` ({c}): {why}." for column, (c, why) in sorted(COLUMN_CLASSES.items()))
    classes += "".join(
        f"\n- `{column}` (exact): one of " + ", ".join(f"`{v}`" for v in values) + "."
        for column, values in sorted(COLUMN_VALUES.items())
    )
    return (
        "\n".join(parts)
        + "\n### Views of `query_view`\n\nGenerated from `sbtck/views.py`. Times are epoch milliseconds; a column"
        + " named like an event field means what the field means (see [Fields](#fields)).\n\n"
        + "Each column is compared by its class, as an event's field is (see [Events](#events)): a time by its\n"
        + "name (`_ms`, `_time`), the classes below as they say, every other column exactly.\n\n"
        + f"| view | one row per | columns (comparison) |\n| --- | --- | --- |\n{views}\n\n{classes}\n\n{own}\n\n"
        + "The JSON type of each column, and of the fields of a row RECEIVE returns (`rows` of `rows_returned`),"
        + " declared in `sbtck/views.py` and checked in every answer (a boolean is not an integer):\n\n"
        + f"{types}\n"
    )


# what each comparison class means for an implementer, in the order of observations.CLASSES
CLASS_MEANINGS = {
    EXACT: "equal values; where the values are a closed set, every value is listed, and no other is right",
    RELATIVE: "an identity you pick (a GUID, a number): compared by what it refers to, never by its value",
    TIME: "an instant of the kit's clock (`at_ms`), compared where the documents order instants",
    FREE_TEXT: "say what you like: never compared",
    REASONING: f"only with `{TRACE}`; any rule that applies at that instant is accepted",
}


def render_events() -> str:
    """Every event kind: who reports it, whether it is an effect or a report and when, its fields and their
    comparison classes, then what each field says."""
    rows = []
    for kind, r in RECORDS.items():
        needs = ", ".join(f"`{cap}`" for cap in r.area) or "every implementation"
        fields = ", ".join(_field(f) for f in r.fields) or "-"
        rows.append(f"| `{kind}` | {needs} | {_when(r)} | {fields} |")
    meanings = "\n".join(
        f"- `{name}`: {meaning}." for name, meaning in sorted({f.name: f.meaning for f in _every_field()}.items())
    )
    why = "\n".join(
        f"- `{f.name}` ({f.compared}): {f.why}."
        for f in sorted({(f.name, f.compared): f for f in _every_field() if f.why}.values(), key=lambda f: f.name)
    )
    classes = "\n".join(f"- *{c}*: {CLASS_MEANINGS[c]}." for c in CLASSES)
    return (
        "\n## Events\n\nGenerated from `sbtck/observations.py`, one record per kind. Every event has `at_ms` and\n"
        "`kind`; an implementation reports the kinds its capabilities cover (a kind needing several, only with\n"
        "all of them), with the fields listed; a field it does not report reads as null. A feature's log table\n"
        "writes a kind with spaces (`procedure started`).\n\n"
        "Each field is compared by its class, written beside it, by the suite and the randomized stage alike\n"
        "(`sbtck/agreement.py`); an exact string field that lists no values holds a name the scenario\n"
        "gave (an instance, a dialog, a route), or the form it shows:\n\n"
        f"{classes}\n\n"
        "An *effect* is what a broker does that can be seen (a message delivered, dropped or forwarded, a\n"
        "procedure started, a connection attempted, a notification sent, a statement's result); it is\n"
        "always compared. A *report* tells of the broker's progress; it is compared only where the table says\n"
        "when it is reported, and otherwise its presence and moment are not held against you in the\n"
        "randomized stage; a scenario of the suite checks the reports its table names, at the moments it\n"
        "states. `at_ms` is a time and `kind` exact, on every event. A report whose table says several\n"
        "alike in one instant are one tells what the instant came to: it may be reported once or more at\n"
        "that queue and instant, naming any trigger of the instant, and is compared as one.\n\n"
        f"The kinds needing `{TRACE}` are the reference engine's reasoning, not what a real broker shows:\n"
        f"an implementation that does not declare `{TRACE}` never reports them, nor the fields\n"
        f"{', '.join(f'`{f}`' for f in sorted(DECISION_FIELDS))} of other kinds, and the scenarios leave out\n"
        "the rows and columns that ask for them (the report says which). Every scenario still checks what\n"
        "the broker shows: the events without that capability, RECEIVE results and views.\n\n"
        "The kinds marked *optional* echo a fault the kit itself made (handlers failing, the network cut, a\n"
        "clean-up stopped): the kit knows when it made it, so no scenario asks for them. The randomized stage\n"
        "compares neither a `reader_waiting` answered in the instant it began (a wait of no time shows in\n"
        "no view) nor whether a transaction that received nothing is reported as committed or rolled\n"
        "back; it compares a row RECEIVE returns by its declared fields, the rows of `query_view` by their\n"
        "declared columns, and no other command's result. A list compares as a set.\n\n"
        "| kind | reported with | effect or report, and when | fields (comparison) |\n| --- | --- | --- | --- |\n"
        + "\n".join(rows)
        + f"\n\n### Fields\n\n{meanings}\n\nWhy a field has its class, where that is a choice:\n\n{why}\n"
    )


def _every_field() -> list[Field]:
    return [f for r in RECORDS.values() for f in r.fields]


def _field(f: Field) -> str:
    """A field with its comparison class, and every value where they are a closed set."""
    if f.values:
        return f"`{f.name}` ({f.compared}: " + ", ".join(f"`{v}`" for v in f.values) + ")"
    if f.form:
        queue = ", QUEUE a queue's name" if "QUEUE" in f.form else ""
        return f"`{f.name}` ({f.compared}: `{f.form}`, NAME a name of the scenario{queue}, N a number)"
    if f.name in ("rule", "step"):
        return f"`{f.name}` ({f.compared}: a rule id of `spec/rules.yaml`)"
    return f"`{f.name}` ({f.compared})"


def _when(r: Record) -> str:
    """Effect or report; for a report when it is reported, or that its moment is not compared; what is optional."""
    if r.nature == EFFECT:
        said = "effect"
    elif r.moment is not None:
        said = f"report, {r.moment}"
    else:
        said = "report; its presence and moment are not compared"
    if r.echo:
        said += " (optional: an echo of the kit's own fault)"
    if r.may_omit:
        said += f" (optional: {r.may_omit})"
    if r.first_required:
        said += " (the first for each " + " and ".join(f"`{f}`" for f in r.first_required) + "; later ones optional)"
    if r.may_report_at_start:
        said += " (optional at `start`, for a database whose broker starts then)"
    if r.either_moment:
        said += f" (reported {r.either_moment})"
    if r.once_an_instant:
        said += f" ({r.once_an_instant})"
    return said


def render() -> str:
    return render_commands() + render_events()


def document(written: str) -> str:
    """docs/protocol.md: WRITTEN's part before the reference as it is, the reference anew."""
    reference = render()
    first = reference.split("\n", 1)[0]
    return (written[: written.index(first)] if first in written else written) + reference


if __name__ == "__main__":
    generated.main("protocol.md", document)
