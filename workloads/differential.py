"""The differential check: one step of an implementation against the same step of the reference engine.

Design note
-----------
The question is not "does the implementation behave like the reference?"
but "is there an allowed behaviour that explains what it did?".
``sbtck/workloads/search.py`` answers it by searching the reference's allowed
picks; this module says when one step agrees, and guides the search. What
it keeps true, so that a difference it reports is the implementation's:

1. **Open choices are searched, guided by the implementation.** Where the
   documents leave a choice open (RTC-1..4 route, RTM-3 broker instance,
   RTL-3 database order, RTR-4 asking the lost principal again, ACT-09 who
   gets a group a commit releases, which waiting session is served first)
   ``FollowingChooser`` reads the pick the
   implementation reported for the same routing attempt, or where its
   message went; the search tries that pick first and the others after it,
   so a wrong guess costs time, never a verdict. A dialog acknowledged
   again with the broker instance it was acknowledged with is a repeat, not
   a difference (``_repeats_left_out``); which member names a group of
   identical routes is the chooser's too, so a route_chosen's candidates
   compare by number (``agreement.BY_NUMBER``).
2. **Open values are the implementation's.** The reference runs with the
   parameter values the implementation declared (``reference_params``).
3. **Only what the contract declares, as the documents leave it.** What is
   asked and how values compare is ``sbtck/agreement.py``'s, which the
   suite's steps ask too: kinds and fields of the implementation's
   capabilities; no echo of the kit's own faults; what the contract lets an
   implementation leave out is not asked
   for (``observations.MAY_OMIT``, ...); no report whose moment the contract
   does not state (``agreement.held``); each field by its class (free text
   never, reasoning only with a trace and coinciding triggers either way,
   ``agreement.reconciled``); conversation groups by the messages they hold,
   spids and object ids by what they name, addresses without case, rows by
   their declared fields, and no command's result but a view's rows
   (``_relative``, ``_declared_rows``).
4. **Compared where the documents give an order, and no further.** Within a
   step only events of the same kind and instant can pair up, one for one,
   regardless of their order in the answer; fields one side does not report
   are unknown, never a difference, and lists compare as sets
   (``agreement.agree``).
5. **Refusals count.** A command one side takes and the other refuses is a
   difference by itself, before any event is looked at.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any

from sbtck.agreement import (
    CASE_FREE,
    agree,
    asked,
    held,
    once_an_instant,
    reconciled,
    relative_name,
    row_as_compared,
    traced,
    without_reasoning,
)
from sbtck.contract import LOCAL
from sbtck.engine import EngineParams
from sbtck.engine.choosing import (
    A_WAITING_READER,
    AHEAD_GOES_ON,
    ARRIVES_BEHIND,
    AS_ANY_MIRRORED_MEMBER,
    AS_ITS_FIRST_MEMBER,
    BEHIND_A_DELETED,
    BROKER_INSTANCE,
    CHOSEN_AGAIN,
    DATABASE_ORDER,
    DELETED_AS,
    DROPPED,
    FOLLOWS_AT_ONCE,
    HELD_ELSEWHERE,
    HELD_ELSEWHERE_MOSTLY,
    LOCAL_MISS,
    LOCAL_PASSED_OVER,
    LOST_PRINCIPAL_TOO,
    MATCHED_ON_ITS_OWN,
    MIXED_GROUP,
    NEXT_READER,
    NOT_REPORTED,
    NOTIFICATION_FIRST,
    PARTNER_ALONE,
    PENDING_ON_OPEN,
    PROBES,
    RECLASSIFIED,
    RECLASSIFIED_NEXT,
    REGISTERS_AGAIN,
    REPLY,
    REPORTED_FIRST,
    RETRIED_BEHIND,
    ROUTE,
    SENT_ON,
    STAYS_REGISTERED,
    TASK_HANDLERS,
    THE_COMMITTER,
    TIME_OUT_AND_NOTIFICATION,
    TIME_OUT_FIRST,
    TIMER_ORDER,
    WAITER,
    WAITS_FOR_ITS_TIME_OUT,
    Addresses,
    FirstChooser,
)
from sbtck.iut.answers import RECEIVED_ROW
from sbtck.observations import (
    DECISION_FIELDS,
    EVIDENCES,
    FIRST_REQUIRED,
    MAY_OMIT,
    MAY_REPORT_AT_START,
    Kind,
)
from sbtck.views import VIEW_COLUMNS
from sbtck.workloads.invariants import Violation
from sbtck.workloads.landscape import ALL

RULE_ID = re.compile(r"^(ACT|RTE|RTM|RTC|RTL|RTX|RTR|PER)-[0-9A-Z]+$")
DIFFERENCE = "DIFF"  # one of sbtck.catalogue.KIT_RULES
WENT_TO = "went to"  # where a message went, for an implementation that does not trace its choices


Instant = tuple[tuple[str, str, int, bool], object]  # a message where it is (_key), and an at_ms


def _key(instance: object, message: dict[str, Any]) -> tuple[str, str, int, bool]:
    return (
        str(instance),
        str(message.get("dialog")),
        int(message.get("message_sequence_number", -1)),
        bool(message.get("from_target")),
    )


class FollowingChooser:
    """Takes, at each open choice, the pick the implementation reported in the same routing attempt, if allowed.

    Every routing attempt of a message starts with routes_matched; the
    route_chosen, the RTM-3 broker instance and the database the message
    went to that follow it, for the same instance and message, are its picks.
    An implementation without a decision trace reports no attempts. Then a
    SEND and each retry (message_sent, routing_retried) begin one where the
    message waits, which leads to the first place the message reaches
    before the next begins (the address it is transmitted to or waits for a
    connection to, LOCAL when it arrives there, the database), or to the
    route its principal probes name: the option that sends it there is the
    pick, and the probes after a loss at the attempt's instant pick RTR-4's.
    An attempt that leads nowhere shown takes the reference's own pick.
    Where no attempt began (the message came from another instance), where
    it went at that instant picks, else where it went last. The picks about
    sessions are ``ReadersFollowed``'s.
    """

    def __init__(self, events: list[dict[str, Any]] | None = None) -> None:
        self.attempts: dict[tuple[str, str, int, bool], list[dict[str, str]]] = {}
        self.went: dict[tuple[str, str, int, bool], dict[str, str]] = {}
        # An implementation without a decision trace, by message and instant: where the message went then, and
        # RTR-4's pick; a message's attempts at other instants went elsewhere or asked other addresses (RTR-2 asks
        # both on first contact), which says nothing about this attempt. Where the message waits, a SEND and each
        # retry (message_sent, routing_retried) begin an attempt, which leads to the first place the message
        # reaches before the next begins (a message waiting for its connection is sent later); the reference asks
        # about its attempts of one instant in the same order.
        self.at_instant: dict[Instant, dict[str, str]] = {}
        self.tries: dict[Instant, list[dict[str, str]]] = {}
        self.latest: dict[tuple[str, str, int, bool], dict[str, str]] = {}
        self.asked: dict[Instant, int] = {}
        # PER-2B's pick: a waiting message registers again when the implementation began more routing attempts of
        # it at that instant than the reference has so far
        self.begun: dict[Instant, int] = {}
        # and the order it took them in, by instance and instant: the dialogs routed again then, in turn
        self.retried: dict[tuple[str, object], list[str]] = {}
        self.reclassifying: tuple[str, object] = ("", None)
        # the dialogs each transmitter said it reclassified, by instance and instant (with the periodic tasks)
        self.listed: dict[tuple[str, object], set[str]] = {}
        self.handlers: dict[str, str] = {}  # PER-1B: how many task handlers each instance reported it started
        self.seen: dict[tuple[str, str, int, bool], int] = {}
        self.current: dict[str, str] = {}
        self.fallback = FirstChooser()
        self.readers = ReadersFollowed()
        # _ROUTED_THEN's choices: the instants each message was routed at (matched, chosen, sent,
        # waiting for a connection or delayed), by message and instance: routed then is sent on, or follows
        self.routed: set[Instant] = set()
        # ARRIVES_BEHIND's: the instants a message's first event at an instance said it waits behind an earlier one
        # (a transmission_pending naming no address): it waited behind it, though it may go on later in that instant
        self.waited_first: set[Instant] = set()
        self.began: set[Instant] = set()  # the instants some event of the message there came at, its first seen
        # LOCAL_PASSED_OVER's pick: the routes reported chosen, by message, instance and instant
        self.chosen: set[tuple[Instant, str]] = set()
        # LOCAL_MISS's: the messages dropped, by instance and instant
        self.dropped: set[Instant] = set()
        # DELETED_AS's: the reason the dispatcher gave for each message it deleted, by instance and instant
        self.deleted_as: dict[Instant, str] = {}
        self.feed(events or [])

    def feed(self, events: list[dict[str, Any]]) -> None:
        """More of the implementation's events, in order: a run in step with it feeds each step's before its own."""
        for e in events:
            kind = e["kind"]
            if kind not in _FOLLOWED:  # most of a world's events (the timer's, the reasoning about activation)
                continue
            if kind in _READING:
                if e.get("session") or kind == _EXITED:
                    self.readers.feed(e)
                continue
            if kind == _HANDLERS:
                self.handlers[str(e.get("instance"))] = str(e.get("count"))
                continue
            if kind == _RECLASSIFIED:
                self.listed[(str(e.get("instance")), e.get("at_ms"))] = {str(d) for d in e.get("dialogs") or ()}
                continue
            if "dialog" not in e or "instance" not in e:
                continue
            key = _key(e["instance"], e)
            instant = (key, e.get("at_ms"))
            pending_to = _pending_address(e) if kind == _PENDING else None
            if instant not in self.began:
                self.began.add(instant)
                if kind == _PENDING and pending_to is None:
                    self.waited_first.add(instant)
            if kind in _ROUTED or pending_to is not None:
                self.routed.add(instant)
            if kind == Kind.MESSAGE_DROPPED:
                self.dropped.add(instant)
            if kind == _DELETED:
                self.deleted_as[instant] = str(e.get("reason"))
            if kind == _TRANSMITTED and e.get("address"):
                self.went.setdefault(key, {})[WENT_TO] = self._went_then(instant, str(e["address"]).upper())
            elif kind in _HERE and e.get("database"):
                went = self.went.setdefault(key, {})
                went.setdefault(WENT_TO, LOCAL)
                went.setdefault(DATABASE_ORDER, str(e["database"]))
                self._went_then(instant, LOCAL)
            elif kind == _PENDING:
                # waiting for a connection to the address it was routed to: where it went, though not sent yet
                if pending_to is not None:
                    self._went_then(instant, pending_to)
            elif kind in _BEGUN:
                if kind == _RETRIED:
                    label = str(e["dialog"]) + (REPLY if e.get("from_target") else "")
                    self.retried.setdefault((str(e["instance"]), e.get("at_ms")), []).append(label)
                begun: dict[str, str] = {}
                self.latest[key] = begun
                self.tries.setdefault(instant, []).append(begun)
            attempts = self.attempts.get(key)
            if kind in _PROBED_KINDS:
                # observable: without a decision trace they count for the message's attempt at their instant, and
                # name the mirrored route it chose
                _probes(attempts[-1] if attempts else self._then(instant), e)
                latest = None if attempts or not e.get("route") else self.latest.get(key)
                if latest is not None:
                    latest.setdefault(ROUTE, str(e["route"]))
            elif kind == _MATCHED:
                picks = {BROKER_INSTANCE: str(e["broker_instance"])} if e.get("broker_instance") else {}
                self.attempts.setdefault(key, []).append(picks)
            elif not attempts:
                continue
            elif kind == _CHOSEN:
                attempts[-1][ROUTE] = str(e.get("route"))
                # a group of identical routes of mixed mirror addresses: taken as specifying one where the
                # implementation chose at RTC-1 (a guess where another mirrored route was chosen: the search tries both)
                if e.get("step"):
                    mirrored = e["step"] == "RTC-1"
                    attempts[-1][MIXED_GROUP] = AS_ANY_MIRRORED_MEMBER if mirrored else AS_ITS_FIRST_MEMBER
                self.chosen.add((instant, str(e.get("route"))))
            elif kind in _HERE and e.get("database"):
                attempts[-1].setdefault(DATABASE_ORDER, str(e["database"]))

    def _then(self, instant: Instant) -> dict[str, str]:
        return self.at_instant.setdefault(instant, {})

    def _went_then(self, instant: Instant, destination: str) -> str:
        """Where the message went at INSTANT and in its latest attempt: the first place each reached."""
        self._then(instant).setdefault(WENT_TO, destination)
        attempt = self.latest.get(instant[0])
        if attempt is not None:
            attempt.setdefault(WENT_TO, destination)
        return destination

    def about(self, instance: str, message: dict[str, object]) -> None:
        if message.get(RECLASSIFIED_NEXT):  # the order of a reclassification: read in choose, from the options
            self.reclassifying = (instance, message.get("at_ms"))
            self.current = {}
            return
        if message.get(TASK_HANDLERS):  # how many task handlers the instance starts: as many as it reported
            count = self.handlers.get(instance)
            self.current = {} if count is None else {TASK_HANDLERS: count}
            return
        if message.get(RECLASSIFIED):  # whether a waiting message registers again: no routing attempt of its own
            instant = (_key(instance, message), message.get("at_ms"))
            listed = self.listed.get((instance, message.get("at_ms")))
            if listed is not None:
                again = str(message.get("dialog")) in listed
            else:
                again = len(self.tries.get(instant, ())) > self.begun.get(instant, 0)
            self.current = {RECLASSIFIED: REGISTERS_AGAIN if again else STAYS_REGISTERED}
            return
        if message.get(LOCAL_MISS):  # a LOCAL route that found no service: dropped there then, or chosen again
            instant = (_key(instance, message), message.get("at_ms"))
            self.current = {LOCAL_MISS: DROPPED if instant in self.dropped else CHOSEN_AGAIN}
            return
        if message.get(DELETED_AS):  # out of order and stale: the reason the implementation gave then
            reason = self.deleted_as.get((_key(instance, message), message.get("at_ms")))
            self.current = {DELETED_AS: reason} if reason else {}
            return
        if message.get(LOCAL_PASSED_OVER):  # the LOCAL route chosen again past: reported if the implementation did
            instant = (_key(instance, message), message.get("at_ms"))
            reported = (instant, str(message.get("route"))) in self.chosen
            self.current = {LOCAL_PASSED_OVER: REPORTED_FIRST if reported else NOT_REPORTED}
            return
        if message.get(TIME_OUT_AND_NOTIFICATION):  # the notification first, if its reclassification named it
            listed = self.listed.get((instance, message.get("at_ms")), set())
            first = NOTIFICATION_FIRST if str(message.get("dialog")) in listed else TIME_OUT_FIRST
            self.current = {TIME_OUT_AND_NOTIFICATION: first}
            return
        asked = next((kind for kind in _ROUTED_THEN if kind in message), None)
        if asked is not None:  # a message behind an earlier one of its conversation: routed then, or left waiting
            instant = (_key(instance, message), message.get("at_ms"))
            routed = instant in self.routed and not (asked == ARRIVES_BEHIND and instant in self.waited_first)
            picked = _ROUTED_THEN[asked] if routed else _LEFT_THEN.get(asked)
            self.current = {asked: picked} if picked else {}
            if asked == HELD_ELSEWHERE and routed:  # and the run's reading, where it is asked first, as it shows
                self.current[HELD_ELSEWHERE_MOSTLY] = SENT_ON
            return
        # a pick no event names (which of two things of an instant came first; whether what waits goes on a
        # connection a SEND opened): the reference's leads and the search tries the other
        if any(k in message for k in _NAMED_BY_NO_EVENT):
            self.current = {}
            return
        if not ReadersFollowed.ASKED.isdisjoint(message):  # about a session, not a routing attempt
            picks = self.readers.about(message)
            if picks is not None:  # a served session only tells the readers; the pick asked before stands
                self.current = picks
            return
        key = _key(instance, message)
        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        begun = (key, message.get("at_ms"))
        self.begun[begun] = self.begun.get(begun, 0) + 1
        attempts = self.attempts.get(key, [])
        if attempts:
            self.current = attempts[n] if n < len(attempts) else {}
            return
        instant = (key, message.get("at_ms"))
        then = self.at_instant.get(instant, {})
        nth = self.asked.get(instant, 0)
        self.asked[instant] = nth + 1
        tries = self.tries.get(instant)
        went = self.went.get(key, {})
        if not tries:  # no attempt begun here then (the message came from another instance): where it went
            self.current = {**went, **{k: then[k] for k in (WENT_TO, PROBES) if k in then}}
            return
        # where this attempt led, or nowhere shown: not where a later attempt went, nor an earlier one's status
        self.current = {k: v for k, v in went.items() if k != WENT_TO}
        if PROBES in then:
            self.current[PROBES] = then[PROBES]
        if nth < len(tries):
            self.current.update(tries[nth])

    def _pick(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str | None:
        allowed = {o.upper(): o for o in options}
        named = allowed.get(self.current.get(kind, "").upper())
        went = self.current.get(WENT_TO)
        if named is None and went is not None and addresses:
            return next((o for o in options if went in addresses.get(o, ())), None)
        return named

    def choose(self, kind: str, options: list[str], addresses: Addresses | None = None) -> str:
        if kind in (RECLASSIFIED_NEXT, WAITER):
            shown = self.retried.get(self.reclassifying, []) if kind == RECLASSIFIED_NEXT else self.readers.shown()
            return min(options, key=lambda o: shown.index(o) if o in shown else len(shown) + options.index(o))
        return self._pick(kind, options, addresses) or self.fallback.choose(kind, options)

    def reported(self, kind: str, options: list[str]) -> str | None:
        """The option the implementation's events show it took, if they show one."""
        return self._pick(kind, options)

    def order(self, kind: str, options: list[str]) -> list[str]:
        first = self._pick(kind, options)
        rest = self.fallback.order(kind, [o for o in options if o != first])
        return [first, *rest] if first else rest


class ReadersFollowed:
    """The picks about sessions, read from the sessions' results (FollowingChooser asks it).

    Who gets the conversation group a procedure's commit releases (ACT-09)
    is, at a commit while other sessions wait on its queue, the first to get
    rows there at that instant; which of several waiting sessions is served
    first when messages come (WAITER) is the order they got results in; and
    which group a RECEIVE takes (GROUP), the one holding the dialog it got.
    """

    # the keys of the chooser's question that make it one about a session
    ASKED = frozenset({"waiter", "served", "receive", "session"})

    def __init__(self) -> None:
        # ACT-09: the queue each session reads, the sessions waiting on each queue; by commit (session and
        # instant), each of its choices in turn (a procedure may commit several times in one instant): who got
        # rows first after it; the choice each queue's latest commit left open
        self.queue_of: dict[str, tuple[str, str, str]] = {}
        self.waiting: dict[tuple[str, str, str], set[str]] = {}
        self.commits: dict[tuple[str, object], list[dict[str, str]]] = {}
        self.commits_asked: dict[tuple[str, object], int] = {}
        self.undecided: dict[tuple[str, str, str], tuple[object, dict[str, str]]] = {}
        # which group each session's RECEIVEs took, by instant: the dialog of the first row of each, in turn
        self.received: dict[tuple[str, object], list[str]] = {}
        self.receives_asked: dict[tuple[str, object], int] = {}
        # which waiting session was served first (WAITER): the sessions that got a result on each queue, by
        # instant, in the order the implementation reported them, less those the run has served since; the queue
        # of the latest question
        self.served: dict[tuple[str, object], list[str]] = {}
        self.serving: tuple[str, object] = ("", None)

    def feed(self, e: dict[str, Any]) -> None:
        """ACT-09's pick, from the sessions' results: with readers waiting, a procedure's commit lets them be served
        before it RECEIVEs again, or RECEIVEs first; the first to get rows on its queue then shows which."""
        kind, at = e["kind"], e.get("at_ms")
        queue = (str(e.get("instance")), str(e.get("database")), str(e.get("queue")))
        if kind == Kind.PROCEDURE_EXITED:  # its wait, if any, ends with it
            self.waiting.get(queue, set()).discard(f"{e.get('queue')}#{e.get('task')}")
            return
        session = str(e["session"])
        if kind == Kind.TRANSACTION_COMMITTED:
            read = self.queue_of.get(session)
            if read is not None and self.waiting.get(read, set()) - {session}:
                choice: dict[str, str] = {}
                self.commits.setdefault((session, at), []).append(choice)
                self.undecided[read] = (at, choice)
            return
        self.queue_of[session] = queue
        waiting = self.waiting.setdefault(queue, set())
        if kind == Kind.READER_WAITING:
            waiting.add(session)
            return
        if kind == Kind.ROWS_RETURNED and session in waiting:
            self.served.setdefault(("/".join(queue), at), []).append(session)
        waiting.discard(session)
        if kind == Kind.ROWS_RETURNED and e.get("statement") == "RECEIVE":
            rows = e.get("rows")
            if isinstance(rows, list) and rows and isinstance(rows[0], dict):
                self.received.setdefault((session, at), []).append(str(rows[0].get("dialog")))
        undecided = self.undecided.pop(queue, None) if kind == Kind.ROWS_RETURNED else None
        if undecided is not None and undecided[0] == at:  # rows at a later instant answer another RECEIVE
            undecided[1][NEXT_READER] = session

    def about(self, message: dict[str, object]) -> dict[str, str] | None:
        """The picks for the question MESSAGE asks (see ASKED); None where it asks none and only tells."""
        if "waiter" in message:  # which waiting session is served first: read in shown, from the options
            self.serving = (str(message["waiter"]), message.get("at_ms"))
            return {}
        if "served" in message:  # a waiting session the run served: not one to pick at a later step of the instant
            served = self.served.get((str(message["queue"]), message.get("at_ms")), [])
            if message["served"] in served:
                served.remove(str(message["served"]))
            return None
        if "receive" in message:  # which group a RECEIVE takes: the one holding the dialog the implementation got
            receive = (str(message["receive"]), message.get("at_ms"))
            turn = self.receives_asked.get(receive, 0)
            self.receives_asked[receive] = turn + 1
            got = self.received.get(receive, [])
            return {WENT_TO: got[turn]} if turn < len(got) else {}
        # a procedure's commit (ACT-09)
        session = str(message["session"])
        commit = (session, message.get("at_ms"))
        turn = self.commits_asked.get(commit, 0)
        self.commits_asked[commit] = turn + 1
        choices = self.commits.get(commit, [])
        who = choices[turn].get(NEXT_READER) if turn < len(choices) else None
        return {} if who is None else {NEXT_READER: THE_COMMITTER if who == session else A_WAITING_READER}

    def shown(self) -> list[str]:
        """The sessions the implementation served on the latest question's queue and instant, in its order."""
        return self.served.get(self.serving, [])


def _probes(attempt: dict[str, str], e: dict[str, Any]) -> None:
    """RTR-4's pick: the lost principal asked again, or not. The events of one instant come in any order."""
    address = str(e.get("address")).upper()
    if e["kind"] == Kind.PRINCIPAL_LOST:
        attempt[_LOST] = address
    else:
        attempt[_PROBED] = attempt.get(_PROBED, "") + address + "\n"
    if _LOST in attempt:
        asked_again = attempt[_LOST] in attempt.get(_PROBED, "").splitlines()
        attempt[PROBES] = LOST_PRINCIPAL_TOO if asked_again else PARTNER_ALONE


_LOST, _PROBED = "lost principal", "probed"
# The kinds FollowingChooser reads, as the plain strings events carry (a world's chooser is built for each
# connecting choice tried, and reads every event of the trace): ACT-09's picks from the sessions' results
_READING = frozenset(
    k
    for k in (
        Kind.TRANSACTION_COMMITTED,
        Kind.ROWS_RETURNED,
        Kind.READER_WAITING,
        Kind.EMPTY_RESULT,
        Kind.PROCEDURE_EXITED,
    )
)
_EXITED = Kind.PROCEDURE_EXITED
# and the routing picks from where each message went and what its routing attempts showed
_TRANSMITTED, _PENDING = Kind.MESSAGE_TRANSMITTED, Kind.TRANSMISSION_PENDING
_HERE = frozenset({Kind.DISPATCHER_BUFFERED, Kind.MESSAGE_ARRIVED})
_RETRIED = Kind.ROUTING_RETRIED
_BEGUN = frozenset({Kind.MESSAGE_SENT, _RETRIED})
_PROBED_KINDS = frozenset({Kind.PRINCIPAL_LOST, Kind.PRINCIPAL_PROBE})
_MATCHED, _CHOSEN = Kind.ROUTES_MATCHED, Kind.ROUTE_CHOSEN
_RECLASSIFIED = Kind.TRANSMITTER_RECLASSIFIED
_HANDLERS = Kind.TASK_HANDLERS_STARTED
_FOLLOWED = _READING | {_TRANSMITTED, _PENDING, _MATCHED, _CHOSEN, _RECLASSIFIED, _HANDLERS}
# the choices about a message waiting behind an earlier one of its conversation, and the pick that routing it at
# that instant shows: sent on at its SEND, matched on its own as it arrives or at its own time-out, following a
# deleted one, or the one ahead that went on, at once
# the choices no event names the pick of: which of two things of an instant came first, and PENDING_ON_OPEN (about a
# connection, not a message, so never to be counted as a routing attempt)
_NAMED_BY_NO_EVENT = ("timer_and_step", "arrival_look", "step_order", TIMER_ORDER, PENDING_ON_OPEN)
_ROUTED_THEN = {
    HELD_ELSEWHERE: SENT_ON,
    ARRIVES_BEHIND: MATCHED_ON_ITS_OWN,
    BEHIND_A_DELETED: FOLLOWS_AT_ONCE,
    RETRIED_BEHIND: MATCHED_ON_ITS_OWN,
    AHEAD_GOES_ON: FOLLOWS_AT_ONCE,
}
# and the pick that leaving it waiting then shows, where that is not the reference's first
_LEFT_THEN = {AHEAD_GOES_ON: WAITS_FOR_ITS_TIME_OUT}
# (delivered or dropped there then: routed, LOCAL or to a drop)
_ROUTED = frozenset({_MATCHED, _CHOSEN, _TRANSMITTED, Kind.CONVERSATION_DELAYED, Kind.MESSAGE_DROPPED, *_HERE})
_DELETED = Kind.DISPATCHER_DELETED
_FOLLOWED |= _HERE | _BEGUN | _PROBED_KINDS | _ROUTED | {_DELETED}


def _pending_address(event: dict[str, Any]) -> str | None:
    """The address a transmission_pending says its message waits for: its ``address`` (protocol 2.3), else, from a
    broker of 2.2 that leaves it out, the first ``TCP://host:port`` its free-text status names."""
    if "address" in event:
        return None if event["address"] is None else str(event["address"]).upper()
    found = _AN_ADDRESS.search(str(event.get("status")))
    return found.group(0).rstrip(".").upper() if found is not None else None


# a network address as routes name them (docs/protocol.md, ``address``), found anywhere in free text
_AN_ADDRESS = re.compile(r"TCP://[\w.-]+(?::\d+)?", re.IGNORECASE)


def reference_params(declared: dict[str, Any]) -> EngineParams:
    """The reference's values, with each open one the implementation declares."""
    base = EngineParams.reference()
    # a time may be any number of seconds, a half included: a float field keeps its fraction
    kinds = {f.name: float if f.type in (float, "float") else int for f in dataclass_fields(EngineParams)}
    open_values = {k: kinds[k](v) for k, v in declared.items() if k in kinds and v is not None}
    return EngineParams(**{**{f: getattr(base, f) for f in kinds}, **open_values})


def _unmatched(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MINE's events that no event of THEIRS matches, one for one; only same kind and time can match."""
    left: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for other in theirs:
        left.setdefault((other["kind"], other.get("at_ms")), []).append(other)
    out = []
    for event in mine:
        bucket = left.get((event["kind"], event.get("at_ms")), [])
        for i, other in enumerate(bucket):
            if agree(event, other):
                del bucket[i]
                break
        else:
            out.append(event)
    return out


def _evidence(kind: str) -> str:
    try:
        return EVIDENCES.get(kind, DIFFERENCE)
    except ValueError:
        return DIFFERENCE


def rules_of(events: list[dict[str, Any]]) -> list[str]:
    """The rule ids that speak for these events: named in their fields, else by their kind."""
    found: list[str] = []
    for event in events:
        named = [str(v) for k, v in event.items() if k in ("rule", "step") and RULE_ID.match(str(v))]
        for rule in named or [_evidence(event["kind"])]:
            if rule not in found:
                found.append(rule)
    return found


@dataclass
class Carried:
    """What the comparison of one step leaves for the next: the broker instance each dialog's acknowledgement
    named in the reference, and the databases whose broker failing to start was reported once."""

    acknowledged: dict[str, object] = field(default_factory=dict)
    start_failures: set[tuple[object, ...]] = field(default_factory=set)
    # the sessions whose transaction holds messages it received, in the reference
    holding: set[object] = field(default_factory=set)
    # each side's conversation-group identifiers, by the name the comparison gives them (``_relative``)
    groups: tuple[dict[object, str], dict[object, str]] = field(default_factory=lambda: ({}, {}))
    # the messages either side transmitted from an instance, and those that arrived (``_unacknowledged_left_out``)
    transmitted: set[tuple[object, ...]] = field(default_factory=set)
    arrived: set[tuple[object, ...]] = field(default_factory=set)
    # and their relative identities (spids, object ids), by what each first referred to (``agreement.relative_name``)
    identities: tuple[dict[object, str], dict[object, str]] = field(default_factory=lambda: ({}, {}))


def difference(
    index: int,
    got: dict[str, Any],
    want: dict[str, Any],
    capabilities: frozenset[str],
    carried: Carried | None = None,
) -> tuple[list[Violation], list[dict[str, Any]] | None]:
    """What one step of the implementation shows that the reference's same step does not (nothing when alike).

    Only events of the kinds the implementation's capabilities cover are
    compared: one that does not route is not asked how the reference routed,
    and one without ``decision_trace`` is not asked which rule or step
    decided. Echoes of the kit's own faults are never compared, and what
    the contract leaves to the implementation to report (``MAY_OMIT``,
    ``FIRST_REQUIRED``, ``MAY_REPORT_AT_START``) is not asked for. With
    ``carried`` from step to step, an implementation may acknowledge a
    dialog again (``_repeats_left_out``). With the violations come the
    events that differ (the implementation's unexpected ones and the
    reference's missing ones), or None when the command's answer itself
    differs (a refusal, a view's rows).
    """
    if carried is not None:
        _note_transmissions(carried, got["events"] + want["events"])
    # reconciled against every event of the reference's step (a timer notification is a trigger even where the
    # implementation is not asked for it), and against its reports kept once
    happened = once_an_instant(want["events"])
    want = {**want, "events": _shown(happened, capabilities)}
    got = {**got, "events": once_an_instant(reconciled(_shown(got["events"], capabilities), happened))}
    identities = carried.identities if carried is not None else ({}, {})
    if carried is not None:
        got = {**got, "events": _relative(got["events"], carried.groups[0], identities[0])}
        want = {**want, "events": _relative(want["events"], carried.groups[1], identities[1])}
        got = {**got, "events": _repeats_left_out(got["events"], want["events"], carried.acknowledged)}
    if (got["error"] is None) != (want["error"] is None):
        said = f"refused: {got['error']}" if got["error"] else "accepted"
        refused = "refused" if want["error"] else "accepted"
        return [Violation(DIFFERENCE, index, f"{got['kind']} {said}; the reference {refused} it")], None
    # the same events in the same order pair up one for one: the matching would find nothing left over
    alike = got["events"] == want["events"]
    extra = [] if alike else _unmatched(got["events"], want["events"])
    missing = [] if alike else _unmatched(want["events"], got["events"])
    if carried is not None:
        missing = _required(missing, carried, want["events"])
    if extra and got["kind"] == "start":
        extra = _started_at_start(extra, want["events"])
    if extra or missing:
        detail = f"{got['kind']}: unexpected {_brief(extra)}; missing {_brief(missing)}"
        return [Violation(rule, index, detail) for rule in rules_of(missing + extra)], missing + extra
    if got["kind"] != "query_view":  # the contract declares no other command's result (docs/protocol.md)
        return [], None
    rows = (
        _declared_rows(_unacknowledged_left_out(got["result"] or {}, carried), identities[0]),
        _declared_rows(_unacknowledged_left_out(want["result"] or {}, carried), identities[1]),
    )
    if rows[0] != rows[1]:
        return [
            Violation(DIFFERENCE, index, f"{got['kind']} returned {got['result']}; expected {want['result']}")
        ], None
    return [], None


def differ(
    index: int,
    got: dict[str, Any],
    want: dict[str, Any],
    capabilities: frozenset[str],
    carried: Carried | None = None,
) -> list[Violation]:
    """What one step of the implementation shows that the reference's same step does not (``difference``'s)."""
    return difference(index, got, want, capabilities, carried)[0]


def _shown(events: list[dict[str, Any]], capabilities: frozenset[str]) -> list[dict[str, Any]]:
    """The events an implementation with these capabilities is asked for, as it is asked for them."""
    if capabilities == ALL:  # the kit's own brokers: every kind, every field
        return _momentary_waits_left_out([e for e in events if asked(e["kind"], ALL) and held(e["kind"])])
    kept = _momentary_waits_left_out([e for e in events if asked(e["kind"], capabilities) and held(e["kind"])])
    if traced(capabilities):
        return kept
    return [without_reasoning(e) if DECISION_FIELDS & e.keys() else e for e in kept]


def _momentary_waits_left_out(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """EVENTS without the waits that end in the instant they began: a RECEIVE that waits no time at all shows
    in no view (``tasks_waiting`` is read between commands), so whether a broker reports it shows nothing."""
    if not any(e["kind"] == _WAITING for e in events):
        return events
    kept, answered = [], set()
    for e in reversed(events):  # a wait is answered by its session's next result, if that comes in its instant
        key = (e.get("session"), e["at_ms"])
        if e["kind"] in _ANSWERED:
            answered.add(key)
        elif e["kind"] == _WAITING and key in answered:
            answered.discard(key)
            continue
        kept.append(e)
    kept.reverse()
    return kept


_WAITING = Kind.READER_WAITING
_ANSWERED = frozenset({Kind.ROWS_RETURNED, Kind.EMPTY_RESULT})


def as_compared(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """EVENTS of one step as the stage compares them, by themselves (``_relative`` with names of their own): what
    a failed world's record marks as differing."""
    return _relative(events, {}, {})


def _relative(
    events: list[dict[str, Any]], names: dict[object, str], identities: dict[object, str]
) -> list[dict[str, Any]]:
    """EVENTS as the contract lets them be compared: groups by what they hold, addresses in one case, rows by
    their declared fields.

    A broker names its conversation groups as it likes (a GUID, the
    dialog's name): only which messages share a group is shown, so a group
    is named after the message it first held (its instance, queue, dialog
    and end), or, first seen with no message, by its order of appearance.
    A RECEIVE's rows share one group, which counts as the event's own when
    it names none. Addresses name hosts, whose case does not matter. A row
    RECEIVE returns is compared by the fields the contract declares for it
    (``RECEIVED_ROW``); further columns are the implementation's own. A spid is named after the activated
    task it belongs to (``agreement.relative_name``).
    """
    out = []
    for e in events:
        if _GROUPED.isdisjoint(e.keys()):
            out.append(e)
            continue
        e = dict(e)
        if "spid" in e:
            e["spid"] = relative_name("spid", e["spid"], e, identities)
        for key in CASE_FREE & e.keys():
            if isinstance(e[key], str):
                e[key] = e[key].upper()
        where = e
        rows = e.get("rows")
        if isinstance(rows, list):
            first = rows[0] if rows and isinstance(rows[0], dict) else {}
            if e.get("conversation_group") is None and first.get("conversation_group") is not None:
                e["conversation_group"] = first["conversation_group"]
            where = {**first, **e}  # the message the group is first seen with, if it is new
            e["rows"] = [_declared(row) for row in rows]
        if "conversation_group" in e:
            e["conversation_group"] = _group_name(e["conversation_group"], where, names)
        out.append(e)
    return out


def _declared(row: object) -> object:
    return {k: row[k] for k in RECEIVED_ROW if k in row} if isinstance(row, dict) else row


def _group_name(group: object, where: dict[str, Any], names: dict[object, str]) -> object:
    """A group belongs to the queue of the service it holds conversations of; the reference names the groups of
    a dialog's two ends alike, so a name means one group only within one queue."""
    if group is None:
        return None
    place = "/".join(str(where.get(k)) for k in ("instance", "database", "queue"))
    key = (place, str(group))
    name = names.get(key)
    if name is None:
        if "dialog" in where:
            end = "initiator" if where.get("from_target") else "target"
            name = f"group of {where['dialog']} at the {end}, {place}"
        else:
            name = f"group {len(names) + 1}, {place}"
        names[key] = name
    return name


_GROUPED = CASE_FREE | {"conversation_group", "rows", "spid"}


def _required(missing: list[dict[str, Any]], carried: Carried, want: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MISSING without what an implementation may leave unreported; CARRIED learns what this step reported.

    The reference's events are read in order, since what may be left out depends on what came before it: a
    transaction that received nothing changes nothing, so whether it is reported as committed or rolled back
    (or only ended) shows nowhere; the procedures' transactions are the kit's own model (docs/implementing.md).
    """
    absent = {id(e) for e in missing}
    required = []
    for e in want:
        kind = e["kind"]
        if id(e) in absent and not (
            kind in _MAY_OMIT
            or (kind in _FIRST_REQUIRED and _again(e, carried))
            or (kind in _ENDED and e.get("session") not in carried.holding)
        ):
            required.append(e)
        about = _FIRST_REQUIRED.get(kind)
        if about is not None:
            carried.start_failures.add((kind, *(e.get(f) for f in about)))
        elif kind == _RETURNED and e.get("statement") == "RECEIVE":
            carried.holding.add(e.get("session"))
        elif kind in _ENDED:
            carried.holding.discard(e.get("session"))
    return required


def _again(event: dict[str, Any], carried: Carried) -> bool:
    return (event["kind"], *(event.get(f) for f in _FIRST_REQUIRED[event["kind"]])) in carried.start_failures


_ENDED = frozenset({Kind.TRANSACTION_COMMITTED, Kind.TRANSACTION_ROLLED_BACK})
_RETURNED = Kind.ROWS_RETURNED


def _started_at_start(extra: list[dict[str, Any]], want: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """EXTRA without the databases said to start with the instance, where the reference did not see them fail."""
    failed = {(e.get("instance"), e.get("database")) for e in want if e["kind"] == _START_FAILED}
    return [e for e in extra if e["kind"] not in _AT_START or (e.get("instance"), e.get("database")) in failed]


_MAY_OMIT = frozenset(MAY_OMIT)
_FIRST_REQUIRED = dict(FIRST_REQUIRED)
_AT_START = frozenset(MAY_REPORT_AT_START)
_START_FAILED = Kind.DATABASE_BROKER_START_FAILED


def _note_transmissions(carried: Carried, events: list[dict[str, Any]]) -> None:
    for e in events:
        message = (e.get("dialog"), e.get("message_sequence_number"), e.get("from_target"))
        if e["kind"] == Kind.MESSAGE_TRANSMITTED:
            carried.transmitted.add((e.get("instance"), *message))
        elif e["kind"] == Kind.MESSAGE_ARRIVED:
            carried.arrived.add(message)


def _unacknowledged_left_out(result: dict[str, Any], carried: Carried | None) -> dict[str, Any]:
    """RESULT without the transmission-queue rows of messages that left their instance and never arrived.

    The periodic document cleans up acknowledged messages (PER-5E); whether one that went out and was dropped or
    lost further on stays at its sender until it is acknowledged, or leaves when it is transmitted (the reference,
    unless it sends again what has not arrived), no document says.
    """
    rows = result.get("rows")
    if carried is None or not carried.transmitted or not isinstance(rows, list):
        return result

    def held(row: object) -> bool:
        if not isinstance(row, dict) or "transmission_status" not in row:
            return False
        message = (row.get("dialog"), row.get("message_sequence_number"), row.get("from_target"))
        return (row.get("instance"), *message) in carried.transmitted and message not in carried.arrived

    return {**result, "rows": [row for row in rows if not held(row)]}


def _declared_rows(result: dict[str, Any], identities: dict[object, str]) -> list[str]:
    """A view's rows as a multiset of their declared columns, each as its class compares it (free text left out,
    relative ids by what they name): a view has no order, and further fields are the implementation's own."""
    rows = result.get("rows", [])
    if not isinstance(rows, list):
        return [json.dumps(rows, sort_keys=True, default=str)]
    declared = []
    for row in rows:
        if isinstance(row, dict):
            row = row_as_compared(row, _COLUMNS, identities)
        declared.append(json.dumps(row, sort_keys=True, default=str))
    return sorted(declared)


_COLUMNS = frozenset(column for columns in VIEW_COLUMNS.values() for column in columns)


def _repeats_left_out(
    got: list[dict[str, Any]], want: list[dict[str, Any]], acknowledged: dict[str, object]
) -> list[dict[str, Any]]:
    """GOT without the acknowledgements that repeat one the reference made, naming the same broker instance.

    RTE-04 says the acknowledgement names the target's broker instance and later messages carry it; nothing says
    a dialog is acknowledged once only. An acknowledgement before the reference's first, or naming another broker
    instance, stays and differs.
    """
    now = set()
    for e in want:
        if e["kind"] == _ACKNOWLEDGED:
            dialog = str(e.get("dialog"))
            now.add(dialog)
            acknowledged.setdefault(dialog, e.get("broker_instance"))
    if not any(e["kind"] == _ACKNOWLEDGED for e in got):  # most steps: nothing to leave out
        return got
    kept, matched = [], set()
    for e in got:
        if e["kind"] != _ACKNOWLEDGED:
            kept.append(e)
            continue
        dialog = str(e.get("dialog"))
        if dialog in now and dialog not in matched:
            matched.add(dialog)
        elif dialog in acknowledged and acknowledged[dialog] == e.get("broker_instance"):
            continue
        kept.append(e)
    return kept


_ACKNOWLEDGED = Kind.ACKNOWLEDGED


def _brief(events: list[dict[str, Any]]) -> str:
    if not events:
        return "nothing"
    shown = ", ".join(f"{e['kind']}@{e['at_ms']}" for e in events[:3])
    return shown + (f" and {len(events) - 3} more" if len(events) > 3 else "")
