"""The periodic and routing view checks fail in the kit's words, as the activation ones do (issue 46, F10/F11).

Each case is a wrong broker (the routes' check: a broker whose sys.routes shows nothing, as no wrong variant of
the engine fails it) that fails one view check of a Then step of steps/periodic_steps.py or
steps/routing_steps.py: results.json's failure message names the first difference and shows the rows as tables
(no assert, no Python repr, no copy of the log), the page sets the two tables side by side under that cause, and
the terminal's failure block is that message, with no frame of pytest's fixtures.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import pytest

from sbtck.errors import LOG_FOLLOWS
from tests.helpers import ROOT, sbtck

# the wrong broker, the feature it fails, the scenario, the failure's cause (its first line) and the table's
# columns, expected rows (None where the check counts rows) and reported rows
CASES = {
    "holds message (periodic)": (
        "tests.variants.periodic:forwarder_persists",
        "periodic/06_forwarder.feature",
        "[1] A message that cannot be forwarded yet is held in memory, in no queue",
        "sbtck.forwarder on sql5 differs: expected row 1 is missing (dialog D1, message_sequence_number 0,"
        " from_target False, received_ms by second 10)",
        (["dialog", "message_sequence_number", "from_target", "received_ms"], [["D1", "0", "False", "by second 10"]]),
        [],
    ),
    "running task handlers (periodic)": (
        "tests.variants.periodic:no_handler_restart",
        "periodic/02_task_handlers.feature",
        "[5] A second failure after a restart is restarted by the notification after it",
        "sbtck.periodic_state on sql1 differs: row 1, running_task_handlers: expected 4, got 2",
        (["instance", "task_handlers", "running_task_handlers"], [["sql1", "4", "4"]]),
        [["sql1", "4", "2"]],
    ),
    "has a connection (periodic)": (
        "tests.variants.periodic:unreachable_drops_every_connection",
        "periodic/04_transport.feature",
        "",
        "expected one row for address 'TCP://sql5.example:4022' in sys.dm_broker_connections on sql1, got 0",
        (["instance", "address", "state", "opened_ms", "last_activity_ms"], None),
        [],
    ),
    "holds a count (periodic)": (
        "tests.variants.periodic:stale_after_5_seconds",
        "periodic/03_message_dispatcher.feature",
        "",
        "expected one row in sbtck.dispatcher_buffers on sql2, got 0",
        (["instance", "database", "dialog", "message_sequence_number", "from_target", "arrived_ms"], None),
        [],
    ),
    "held since (routing)": (
        "tests.variants.routing:behind_a_delayed_message_forgotten",
        "routing/02_matching.feature",
        "",
        "sys.transmission_queue on sql1 differs: row 1, received_ms: expected second 2, got second 22",
        (["dialog", "message_sequence_number", "from_target", "received_ms"], [["D1", "0", "False", "second 2"]]),
        [["D1", "0", "False", "second 22"]],
    ),
    "the routes just set (routing)": (
        "tests.fakes.incomplete:empty_routes_view",
        "routing/01_route_tables.feature",
        "",
        "sys.routes of shop on sql1 (the routes just set) differs: expected row 1 is missing (name AutoCreatedLocal)",
        (["name"], [["AutoCreatedLocal"], ["ToOrders"]]),
        [],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_failing_periodic_or_routing_view_check_says_the_kits_words_and_shows_tables(
    case: str, tmp_path: Path
) -> None:
    variant, feature, scenario, cause, (columns, expected), got = CASES[case]
    run = sbtck("--iut", f"python:{variant}", "--features", str(ROOT / "features" / feature), out=tmp_path)
    assert run.code == 1, run.output[-3000:]
    failed = [s for s in run.results()["scenarios"] if s["status"] == "failed"]
    ours = [s for s in failed if s["failure"]["message"].splitlines()[0] == cause]
    assert ours, [s["failure"]["message"].splitlines()[0] for s in failed]
    if scenario:
        assert scenario in [s["name"] for s in ours]
    record = ours[0]
    failure = record["failure"]
    assert failure["table"] == {"columns": columns, "expected": expected, "got": got}
    # the rows as the feature writes them, no Python repr, no pytest words, and no copy of the scenario's log
    # (results.json keeps the events apart, and every report shows them once from there)
    message = failure["message"]
    for wrong in ("assert", "[{", "{'", "Use -v", LOG_FOLLOWS, "broker started"):
        assert wrong not in message, message
    for row in got:
        assert "|".join(["", *row, ""]).replace(" ", "") in message.replace(" ", ""), message
    assert record["events"], "the scenario's events are kept apart from the message"
    # the page: the cause, then the expected and the reported rows as two tables (a count, the reported alone)
    page = (tmp_path / "index.html").read_text()
    shown = page.index(f'<pre class="cause" tabindex="0">{escape(cause)}</pre>')
    pair = page[shown : page.index("<p>Rerun:", shown)]
    assert '<table class="vs reported">' in pair
    assert ('<table class="vs expected">' in pair) == (expected is not None)
    for row in [*(expected or []), *got]:
        for column, value in zip(columns, row, strict=True):
            assert f'data-col="{column}"' in pair and f">{escape(value)}</td>" in pair, (column, value)
    # the terminal: the failure block starts with the kit's message, and no frame of pytest's fixtures runs
    lines = run.output.splitlines()
    at = lines.index(f"ViewDiffers: {cause}")
    assert lines[at - 1].startswith("_") and lines[at - 1].endswith("_"), lines[at - 1]
    for frame in ("fixturefunc", "_pytest/fixtures.py", "call_fixture_func", "AssertionError", "Use -v"):
        assert frame not in run.output, frame


def test_a_failing_session_check_says_the_last_answer_in_the_features_words(tmp_path: Path) -> None:
    """A RECEIVE's answer as a feature writes it (DIALOG:SEQUENCE), not the event's Python dict, and no log."""
    run = sbtck(
        "--iut",
        "python:tests.variants.activation:rollback_serves_no_one",
        "--features",
        str(ROOT / "features" / "activation" / "04_conversation_group_locking.feature"),
        out=tmp_path,
    )
    assert run.code == 1, run.output[-3000:]
    failed = {s["name"]: s["failure"] for s in run.results()["scenarios"] if s["status"] == "failed"}
    cause = "session 'S2': expected rows returned P1:0, got reader waiting at second 0"
    assert failed["[8] A rollback hands the group it held to the reader waiting for it at once"]["message"] == cause
    lines = run.output.splitlines()
    at = lines.index(f"CheckFailed: {cause}")
    assert lines[at - 1].startswith("_") and lines[at - 1].endswith("_"), lines[at - 1]
    assert lines[at + 1].startswith("_") or lines[at + 1].startswith("sbtck:"), "the log follows the message"
