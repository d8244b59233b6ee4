"""Renders the command and event reference of docs/protocol.md from the contract itself.

    python -m sbtck.iut.protocol_doc [PATH | -]     (default: the kit's docs/protocol.md; sbtck.generated)

The document's written part, up to the reference, stays as it is.

tests/contract/test_protocol_doc.py fails when the document and the contract differ.
"""

from __future__ import annotations

import dataclasses
import json

from sbtck import contract, generated
from sbtck.observations import (
    AREA,
    DECISION_FIELDS,
    ECHOES,
    EITHER_MOMENT,
    FIELD_MEANINGS,
    FIELDS,
    FIRST_REQUIRED,
    KINDS,
    MAY_OMIT,
    MAY_REPORT_AT_START,
    REASONS,
    RULE_FIELDS,
    TRACE,
    VALUES,
)
from sbtck.views import COLUMN_MEANINGS, COLUMN_TYPES, VIEW_COLUMN_TYPES, VIEW_COLUMNS

Q = contract.QueueRef("sql1", "shop", "TargetQueue")
ROUTE = {
    "name": "ToOrders",
    "service_name": "Target",
    "broker_instance": None,
    "address": "TCP://sql2:4022",
    "mirror_address": None,
    "lifetime_s": None,
}
T = 1767225600000
EXAMPLES: list[contract.Command] = [
    contract.Start(
        T,
        {
            "instances": [
                {
                    "name": "sql1",
                    "address": "TCP://sql1:4022",
                    "cpus": 1,
                    "message_forwarding": False,
                    "msdb_routes": [],
                    "databases": [],
                }
            ]
        },
    ),
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
    contract.AlterRoute(T, "sql1", "shop", {**ROUTE, "address": "LOCAL"}),
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
    views = "\n".join(
        f"| `{view}` | {', '.join(f'`{col}`' for col in VIEW_COLUMNS[view])} |" for view in contract.VIEWS
    )
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
    return (
        "\n".join(parts)
        + "\n### Views of `query_view`\n\nGenerated from `sbtck/views.py`. Times are epoch milliseconds; a column"
        + " named like an event field means what the field means (see [Fields](#fields)).\n\n"
        + f"| view | columns |\n| --- | --- |\n{views}\n\n{own}\n\n"
        + "The JSON type of each column, and of the fields of a row RECEIVE returns (`rows` of `rows_returned`),"
        + " declared in `sbtck/views.py` and checked in every answer (a boolean is not an integer):\n\n"
        + f"{types}\n"
    )


def render_events() -> str:
    """Every event kind: who reports it and the fields it carries, then what each field says."""
    rows = []
    for kind in KINDS:
        needs = ", ".join(f"`{cap}`" for cap in AREA[kind]) or "every implementation"
        if kind in ECHOES:
            needs += " (optional: an echo of the kit's own fault)"
        elif kind in MAY_OMIT:
            needs += " (optional: the topologies name no BCN clients)"
        elif kind in FIRST_REQUIRED:
            needs += (
                " (the first for each "
                + " and ".join(f"`{f}`" for f in FIRST_REQUIRED[kind])
                + "; later ones optional)"
            )
        elif kind in MAY_REPORT_AT_START:
            needs += " (optional at `start`, for a database whose broker starts then)"
        elif kind in EITHER_MOMENT:
            needs += f" (reported {EITHER_MOMENT[kind]})"
        fields = ", ".join(f"`{f}`" for f in FIELDS[kind]) or "-"
        rows.append(f"| `{kind}` | {needs} | {fields} |")
    meanings = "\n".join(f"- `{name}`: {text}.{_values(name)}" for name, text in FIELD_MEANINGS.items())
    return (
        "\n## Events\n\nGenerated from `sbtck/observations.py`. Every event has `at_ms` and `kind`; an\n"
        "implementation reports the kinds its capabilities cover (a kind needing several, only with all of\n"
        "them), with the fields listed; a field it does not report reads as null. A feature's log table\n"
        "writes a kind with spaces (`procedure started`).\n\n"
        f"The kinds needing `{TRACE}` are the reference engine's reasoning, not what a real broker shows:\n"
        f"an implementation that does not declare `{TRACE}` never reports them, nor the fields\n"
        f"{', '.join(f'`{f}`' for f in sorted(DECISION_FIELDS))} of other kinds, and the scenarios leave out\n"
        "the rows and columns that ask for them (the report says which). Every scenario still checks what\n"
        "the broker shows: the events without that capability, RECEIVE results and views.\n\n"
        "The kinds marked *optional* echo a fault the kit itself made (handlers failing, the network cut, a\n"
        "clean-up stopped): the kit knows when it made it, so no scenario asks for them. Three more reports\n"
        "are left to you where the documents ask nothing (each marked in the table). The randomized stage\n"
        "compares neither a `reader_waiting` answered in the instant it began (a wait of no time shows in\n"
        "no view) nor whether a transaction that received nothing is reported as committed or rolled\n"
        "back; it compares conversation groups by the messages they hold, never by their names, addresses\n"
        "without case, a row RECEIVE returns by its declared fields, the rows of `query_view` by their\n"
        "declared columns, and no other command's result.\n\n"
        "| kind | reported with | fields |\n| --- | --- | --- |\n" + "\n".join(rows) + f"\n\n### Fields\n\n{meanings}\n"
    )


def _values(field: str) -> str:
    if field in RULE_FIELDS:
        return " A rule id of `spec/rules.yaml`."
    if field in VALUES:
        return " One of " + ", ".join(f"`{v}`" for v in VALUES[field]) + "."
    if field == "reason":
        return "".join(f" `{kind}`: " + ", ".join(f"`{v}`" for v in values) + "." for kind, values in REASONS.items())
    return ""


def render() -> str:
    return render_commands() + render_events()


def document(written: str) -> str:
    """docs/protocol.md: WRITTEN's part before the reference as it is, the reference anew."""
    reference = render()
    first = reference.split("\n", 1)[0]
    return (written[: written.index(first)] if first in written else written) + reference


if __name__ == "__main__":
    generated.main("protocol.md", document)
