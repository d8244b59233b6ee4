#!/usr/bin/env python3
"""cleanroom13 broker: a Service Broker model speaking the sbtck protocol (2.3) over stdio.

Written from the kit's user documentation and the source documents only.
Standard library only.  Time belongs to the kit: every command carries at_ms.
"""
import heapq
import json
import os
import re
import sys
import traceback

PROTOCOL = "2.3"
TRACE = os.environ.get("SBTCK_CR13_NO_TRACE") != "1"

PARAMS = {
    "activation_empty_window_s": 5,
    "external_activation_timeout_s": 60,
    "delayed_retry_s": 10,
    "forward_hop_limit": 4,
}
if os.environ.get("SBTCK_CR13_PARAMS"):  # for trying other values of the open parameters
    PARAMS.update(json.loads(os.environ["SBTCK_CR13_PARAMS"]))
W_MS = int(PARAMS["activation_empty_window_s"] * 1000)
EXT_MS = int(PARAMS["external_activation_timeout_s"] * 1000)
RETRY_MS = int(PARAMS["delayed_retry_s"] * 1000)
HOP_LIMIT = PARAMS["forward_hop_limit"]
TIMER_MS = 5000
STALE_DISPATCH_MS = 10000
SUPPRESS_DISC_MS = 15000
SUPPRESS_FAIL_MS = 60000
IDLE_MS = 90000
FWD_STALE_MS = 60000
DYN_SERVICE = "http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice"

CAPS = ["activation", "external_activation", "routing", "mirroring", "dynamic_routing",
        "forwarding", "periodic_tasks"]
if TRACE:
    CAPS.append("decision_trace")

TRACE_KINDS = {"activation_necessary", "activation_withheld", "routes_matched", "route_chosen",
               "timer_notification", "transmitter_reclassified"}


class Refused(Exception):
    pass


def norm_addr(a):
    return a.lower() if isinstance(a, str) else a


def addr_hostport(a):
    m = re.match(r"^(tcp://[^/:]+:\d+)", a or "", re.I)
    return m.group(1) if m else None


# ----------------------------------------------------------------------------- model objects
class Route:
    def __init__(self, d, now):
        self.name = d["name"]
        self.service_name = d.get("service_name")
        self.broker_instance = d.get("broker_instance")
        self.address = d.get("address") or "LOCAL"
        self.mirror_address = d.get("mirror_address")
        lt = d.get("lifetime_s")
        self.expires_ms = None if lt is None else now + int(round(lt * 1000))
        self.principal = None      # learnt principal address (mirrored routes)
        self.seq = 0

    def expired(self, now):
        return self.expires_ms is not None and now >= self.expires_ms

    def kind(self):
        a = (self.address or "").upper()
        if a == "LOCAL":
            return "LOCAL"
        if a == "TRANSPORT":
            return "TRANSPORT"
        return "NET"

    def identity(self):
        return ((self.broker_instance or "").upper(), self.service_name, norm_addr(self.address))


class Queue:
    def __init__(self, inst, db, d):
        self.inst = inst
        self.db = db
        self.name = d["name"]
        act = d.get("activation") or {}
        self.status = (act.get("status") or "OFF").upper()
        self.procedure = act.get("procedure_name")
        self.max_readers = act.get("max_queue_readers") or 0
        self.notifications = []   # names
        self.monitor = False
        self.msgs = []            # QMsg
        self.last_empty = None
        self.last_activated = None
        self.task_counter = 0
        self.tasks = {}           # task number -> Task (running)
        self.ext_until = None
        self.ext_token = 0
        self.qid = 0

    def key(self):
        return (self.inst, self.db, self.name)


class QMsg:
    __slots__ = ("dialog", "seq", "from_target", "group", "taken_by", "order")

    def __init__(self, dialog, seq, from_target, group, order):
        self.dialog = dialog
        self.seq = seq
        self.from_target = from_target
        self.group = group
        self.taken_by = None
        self.order = order


class Database:
    def __init__(self, inst, d, now):
        self.inst = inst
        self.name = d["name"]
        self.broker_instance = d.get("broker_instance")
        self.master_key = d.get("master_key", True) is not False
        self.broker_started = False
        self.mirroring_role = d.get("mirroring_role")
        self.procedures = {p["name"]: p for p in (d.get("procedures") or [])}
        self.queues = {}
        for q in d.get("queues") or []:
            self.queues[q["name"]] = Queue(inst, self.name, q)
        self.services = {}
        for s in d.get("services") or []:
            self.services[s["name"]] = s["queue"]
        self.routes = [Route(r, now) for r in (d.get("routes") or [])]
        self.ack_cleanup = True
        self.has_dialogs = False
        self.dbid = 0

    def serves(self):
        """Whether this database holds services for routing (broker started, not a mirror copy)."""
        return self.broker_started and self.mirroring_role != "mirror"


class Instance:
    def __init__(self, d, now):
        self.name = d["name"]
        self.address = d.get("address") or ""
        self.cpus = d.get("cpus") or 1
        self.forwarding = bool(d.get("message_forwarding"))
        self.msdb_routes = [Route(r, now) for r in (d.get("msdb_routes") or [])]
        self.dbs = {}
        self.reachable = True
        self.handlers = 2 * self.cpus
        self.handlers_running = self.handlers
        self.timer_n = 0
        self.conns = {}           # addr(lower) -> {"address","opened","last"}
        self.suppressed = {}      # addr(lower) -> until ms
        self.disp_mode = "running"
        self.disp_delay_ms = 0
        self.buffers = []         # dispatcher buffers: dict entries
        self.forwarder = []       # dict entries
        self.txq = []             # transmission queue: Msg objects waiting here
        self.expected = {}        # (dialog, from_target) -> next seq expected by the dispatcher
        self.touched = set()      # dialogs touched since last reclassification
        self.expired_since = False
        self.failed_dialogs = set()
        self.pending_requests = set()  # (table, route name, service)


class Session:
    def __init__(self, name, spid):
        self.name = name
        self.spid = spid
        self.txn = False
        self.txn_queues = []
        self.taken = []        # QMsg taken in open txn
        self.locks = set()     # group ids
        self.wait = None       # dict describing the waiting statement
        self.task = None


class Task:
    def __init__(self, queue, number, proc, session):
        self.queue = queue
        self.number = number
        self.proc = proc
        self.session = session
        self.token = 0
        self.working = False


class Msg:
    """A message in flight (routing level)."""
    __slots__ = ("dialog", "seq", "from_target", "hops", "received", "state", "where", "addr",
                 "lost", "origin_outside", "bi", "status", "retry_token", "route", "ackd")

    def __init__(self, dialog, seq, from_target):
        self.dialog = dialog
        self.seq = seq
        self.from_target = from_target
        self.hops = 0
        self.received = None
        self.state = None
        self.where = None
        self.addr = None
        self.lost = False
        self.origin_outside = False
        self.bi = None
        self.status = ""
        self.retry_token = 0
        self.route = None
        self.ackd = False


class Dialog:
    def __init__(self, name, inst, db, from_service, to_service, to_bi):
        self.name = name
        self.inst = inst
        self.db = db
        self.from_service = from_service
        self.to_service = to_service
        self.to_bi = to_bi
        self.next_seq = {False: 0, True: 0}
        self.target = None        # (inst, db) where the first message arrived
        self.target_bi = None     # acknowledged broker instance
        self.acknowledged = False
        self.groups = {}          # side -> group id
        self.lost = {}            # (from_target, seq) -> every flag
        self.delivered = set()    # (from_target, seq)


# ----------------------------------------------------------------------------- the broker
class Broker:
    def __init__(self):
        self.started = False

    # ---------------------------------------------------------------- plumbing
    def emit(self, kind, **fields):
        if not TRACE and kind in TRACE_KINDS:
            return
        if not TRACE:
            for f in ("rule", "step", "trigger"):
                fields.pop(f, None)
        ev = {"at_ms": self.now, "kind": kind}
        ev.update(fields)
        self.events.append(ev)

    def sched(self, t, kind, data=None):
        self.seqno += 1
        heapq.heappush(self.agenda, (t, self.seqno, kind, data))

    def session(self, name):
        s = self.sessions.get(name)
        if s is None:
            s = Session(name, self.next_spid)
            self.next_spid += 1
            self.sessions[name] = s
        return s

    def queue_of(self, qd):
        try:
            return self.insts[qd["instance"]].dbs[qd["database"]].queues[qd["queue"]]
        except KeyError:
            raise Refused("no queue %r" % (qd,))

    def qfields(self, q):
        return {"instance": q.inst, "database": q.db, "queue": q.name}

    # ---------------------------------------------------------------- start
    def start(self, cmd):
        self.now = cmd["at_ms"]
        self.t0 = self.now
        self.events = []
        self.agenda = []
        self.seqno = 0
        self.looks = []
        self.sessions = {}
        self.next_spid = 51
        self.dialogs = {}
        self.expected = {}
        self.msg_order = 0
        self.group_n = 0
        self.insts = {}
        self.started = True
        topo = cmd["topology"]
        dbid = 5
        qid = 1000
        for idef in topo.get("instances") or []:
            inst = Instance(idef, self.now)
            self.insts[inst.name] = inst
            for ddef in idef.get("databases") or []:
                db = Database(inst.name, ddef, self.now)
                db.dbid = dbid
                dbid += 1
                inst.dbs[db.name] = db
                for q in db.queues.values():
                    qid += 1
                    q.qid = qid
                for en in ddef.get("event_notifications") or []:
                    q = db.queues.get(en.get("queue"))
                    if q is not None:
                        q.notifications.append(en["name"])
        self.emit("broker_started")
        for inst in self.insts.values():
            self.emit("task_handlers_started", instance=inst.name, count=inst.handlers)
            for db in inst.dbs.values():
                if db.master_key:
                    db.broker_started = True
                    self.emit("database_broker_started", instance=inst.name, database=db.name)
                else:
                    self.emit("database_broker_start_failed", instance=inst.name, database=db.name,
                              reason="missing master key")
                for q in db.queues.values():
                    self.update_monitor(q, quiet_look=True)
            self.sched(self.now + TIMER_MS, "timer", inst.name)
        return {}

    # ---------------------------------------------------------------- time
    def advance(self, t):
        while self.agenda and self.agenda[0][0] <= t:
            tt = self.agenda[0][0]
            self.now = max(self.now, tt)
            # run everything due at this instant, then the looks
            self.settle(tt)
        self.now = max(self.now, t)

    def settle(self, tt=None):
        if tt is None:
            tt = self.now
        while True:
            if self.agenda and self.agenda[0][0] <= tt:
                _, _, kind, data = heapq.heappop(self.agenda)
                getattr(self, "due_" + kind)(data)
                continue
            if self.looks:
                q, trig, info = self.looks.pop(0)
                self.look(q, trig, info)
                continue
            break

    # ---------------------------------------------------------------- queue monitors
    def update_monitor(self, q, quiet_look=False):
        want = (q.status == "ON") or bool(q.notifications)
        if want and not q.monitor:
            q.monitor = True
            self.emit("monitor_created", **self.qfields(q))
        elif not want and q.monitor:
            q.monitor = False
            q.ext_until = None
            q.ext_token += 1
            self.emit("monitor_removed", **self.qfields(q))

    def trigger(self, q, trig, info=None):
        if q.monitor:
            self.looks.append((q, trig, info or {}))

    def unread(self, q):
        return sum(1 for m in q.msgs if m.taken_by is None)

    def waiting_readers(self, q):
        n = 0
        for s in self.sessions.values():
            w = s.wait
            if w and w["queue"] is q and not w["has_where"]:
                n += 1
        return n

    def any_waiting(self, q):
        for s in self.sessions.values():
            w = s.wait
            if w and w["queue"] is q:
                return True
        return False

    def look(self, q, trig, info):
        if not q.monitor:
            return
        rule = None
        running = len(q.tasks)
        if trig == "message arrived" and info.get("was_empty") and running == 0:
            rule = "ACT-06"
        elif self.unread(q) > 0 and self.waiting_readers(q) == 0 and (
                q.last_empty is None or self.now - q.last_empty >= W_MS):
            rule = "ACT-07"
        if rule is None:
            return
        self.emit("activation_necessary", rule=rule, trigger=trig, **self.qfields(q))
        start_proc = False
        if q.status == "ON" and q.procedure:
            if running < q.max_readers:
                start_proc = True
            else:
                self.emit("activation_withheld", reason="MAX_QUEUE_READERS", **self.qfields(q))
        if q.notifications:
            if q.ext_until is not None:
                self.emit("activation_withheld", reason="notification time-out", **self.qfields(q))
            else:
                for n in list(q.notifications):
                    self.emit("event_notification", event_type="QUEUE_ACTIVATION", notification=n,
                              **self.qfields(q))
                q.ext_until = self.now + EXT_MS
                q.ext_token += 1
                self.sched(q.ext_until, "ext_timeout", (q, q.ext_token))
                q.last_activated = self.now
        if start_proc:
            self.start_procedure(q)

    def due_ext_timeout(self, data):
        q, token = data
        if q.ext_token != token or q.ext_until is None:
            return
        q.ext_until = None
        self.emit("activation_time_out", **self.qfields(q))
        self.trigger(q, "external activation time-out")

    def end_ext_timeout(self, q):
        if q.ext_until is not None:
            q.ext_until = None
            q.ext_token += 1

    # ---------------------------------------------------------------- activated procedures
    def start_procedure(self, q):
        q.task_counter += 1
        n = q.task_counter
        sname = "%s#%d" % (q.name, n)
        s = self.session(sname)
        db = self.insts[q.inst].dbs[q.db]
        proc = dict(db.procedures.get(q.procedure) or {"name": q.procedure, "receives": False})
        proc.setdefault("receives", True)
        t = Task(q, n, proc, s)
        s.task = t
        q.tasks[n] = t
        q.last_activated = self.now
        self.emit("procedure_started", procedure_name=q.procedure, spid=s.spid, task=n, **self.qfields(q))
        if proc.get("receives", True):
            self.proc_receive(t)

    def proc_receive(self, t):
        s = t.session
        if t.queue.tasks.get(t.number) is not t:
            return
        s.txn = True
        top = t.proc.get("receive_top", 1)
        wf = t.proc.get("waitfor_ms")
        self.do_receive(s, t.queue, top, None, None, wf)

    def proc_got_rows(self, t):
        work = t.proc.get("work_ms") or 0
        t.token += 1
        t.working = True
        self.sched(self.now + work, "proc_step", (t, t.token))

    def due_proc_step(self, data):
        t, token = data
        if t.token != token or t.queue.tasks.get(t.number) is not t:
            return
        t.working = False
        self.commit(t.session)
        self.proc_receive(t)

    def proc_empty(self, t):
        s = t.session
        self.end_txn(s, commit=True)
        self.exit_task(t, "empty RECEIVE")

    def exit_task(self, t, reason):
        q = t.queue
        if q.tasks.get(t.number) is not t:
            return
        s = t.session
        t.token += 1
        if s.wait:
            self.cancel_wait(s)
        if s.txn:
            self.end_txn(s, commit=True)
        del q.tasks[t.number]
        self.emit("procedure_exited", reason=reason, spid=s.spid, task=t.number, **self.qfields(q))
        if not q.tasks:
            self.trigger(q, "all procedures exited")

    # ---------------------------------------------------------------- sessions: RECEIVE etc.
    def group_of(self, q, dialog_name):
        d = self.dialogs.get(dialog_name)
        if d is None:
            return None
        for m in q.msgs:
            if m.dialog == dialog_name:
                return m.group
        for side, g in d.groups.items():
            if g[0] == q.key():
                return g[1]
        return None

    def pick(self, s, q, top, where_dialog, where_group, gcg=False):
        """Return (group, [QMsg]) available to session s."""
        def free(m):
            if m.taken_by is not None:
                return False
            for o in self.sessions.values():
                if o is not s and m.group in o.locks:
                    return False
            return True
        cands = [m for m in q.msgs if free(m)]
        if where_dialog is not None:
            cands = [m for m in cands if m.dialog == where_dialog]
        if where_group is not None:
            g = self.group_of(q, where_group)
            cands = [m for m in cands if m.group == g]
        if not cands:
            return None, []
        cands.sort(key=lambda m: m.order)
        g = cands[0].group
        if gcg:
            return g, []
        rows = [m for m in cands if m.group == g]
        if top is not None:
            rows = rows[:top]
        return g, rows

    def do_receive(self, s, q, top, where_dialog, where_group, waitfor, gcg=False):
        has_where = where_dialog is not None or where_group is not None
        statement = "GET CONVERSATION GROUP" if gcg else "RECEIVE"
        if s.txn and q not in s.txn_queues:
            s.txn_queues.append(q)
        # any RECEIVE on the queue ends the external activation time-out when it executes
        self.end_ext_timeout(q)
        g, rows = self.pick(s, q, top, where_dialog, where_group, gcg)
        base = dict(session=s.name, statement=statement, has_where=has_where, **self.qfields(q))
        if g is not None:
            self.deliver_rows(s, q, g, rows, base, gcg)
            return
        if waitfor:
            s.wait = {"queue": q, "top": top, "where_dialog": where_dialog, "where_group": where_group,
                      "gcg": gcg, "has_where": has_where, "base": base, "token": self.seqno + 1}
            self.emit("reader_waiting", **base)
            self.sched(self.now + waitfor, "wait_timeout", (s, s.wait["token"]))
            self.trigger(q, "RECEIVE")
            return
        self.empty(s, q, base, has_where)

    def empty(self, s, q, base, has_where):
        self.emit("empty_result", rows=[], **base)
        if not has_where:
            q.last_empty = self.now
        self.trigger(q, "RECEIVE")
        if s.task is not None and q.tasks.get(s.task.number) is s.task:
            self.proc_empty(s.task)

    def deliver_rows(self, s, q, g, rows, base, gcg):
        if s.txn:
            s.locks.add(g)
            for m in rows:
                m.taken_by = s.name
                s.taken.append(m)
        else:
            for m in rows:
                q.msgs.remove(m)
        rowl = [{"dialog": m.dialog, "message_sequence_number": m.seq, "conversation_group": g}
                for m in rows]
        self.emit("rows_returned", rows=rowl, conversation_group=g, **base)
        self.trigger(q, "RECEIVE")
        if s.task is not None and not gcg and q.tasks.get(s.task.number) is s.task:
            self.proc_got_rows(s.task)

    def due_wait_timeout(self, data):
        s, token = data
        w = s.wait
        if not w or w["token"] != token:
            return
        s.wait = None
        self.empty(s, w["queue"], w["base"], w["has_where"])

    def cancel_wait(self, s):
        s.wait = None

    def serve_waiters(self, q):
        waiters = [s for s in self.sessions.values() if s.wait and s.wait["queue"] is q]
        waiters.sort(key=lambda s: s.wait["token"])
        for s in waiters:
            w = s.wait
            if not w:
                continue
            g, rows = self.pick(s, q, w["top"], w["where_dialog"], w["where_group"], w["gcg"])
            if g is None:
                continue
            s.wait = None
            self.deliver_rows(s, q, g, rows, w["base"], w["gcg"])

    def commit(self, s):
        self.end_txn(s, commit=True)

    def end_txn(self, s, commit):
        queues = list(s.txn_queues)
        returned = 0
        if commit:
            for m in s.taken:
                q = self.find_queue_of_msg(m)
                if q is not None:
                    q.msgs.remove(m)
        else:
            for m in s.taken:
                m.taken_by = None
                returned += 1
        had_txn = s.txn
        s.taken = []
        s.locks = set()
        s.txn = False
        s.txn_queues = []
        if had_txn:
            if commit:
                self.emit("transaction_committed", session=s.name)
            else:
                self.emit("transaction_rolled_back", session=s.name, returned=returned)
        for q in queues:
            if not commit:
                self.trigger(q, "rollback")
            self.serve_waiters(q)

    def find_queue_of_msg(self, m):
        for inst in self.insts.values():
            for db in inst.dbs.values():
                for q in db.queues.values():
                    if m in q.msgs:
                        return q
        return None

    # ---------------------------------------------------------------- message arrival on a queue
    def arrive(self, d, inst, db, svc, seq, from_target):
        queue_name = self.insts[inst].dbs[db].services[svc]
        q = self.insts[inst].dbs[db].queues[queue_name]
        side = "T" if not from_target else "I"
        g = d.groups.get(side)
        if g is None:
            self.group_n += 1
            g = (q.key(), "%08X-0000-4000-8000-%012X" % (self.group_n, self.group_n))
            d.groups[side] = g
        was_empty = self.unread(q) == 0
        self.msg_order += 1
        q.msgs.append(QMsg(d.name, seq, from_target, g[1], self.msg_order))
        d.delivered.add((from_target, seq))
        # the receiving endpoint now expects the next message, whichever way this one came
        ek = ((self.insts[inst].dbs[db].broker_instance or "").upper(), d.name, from_target)
        self.expected[ek] = max(self.expected.get(ek, 0), seq + 1)
        self.insts[inst].dbs[db].has_dialogs = True
        self.emit("message_arrived", dialog=d.name, message_sequence_number=seq, from_target=from_target,
                  conversation_group=g[1], service=svc, **self.qfields(q))
        self.trigger(q, "message arrived", {"was_empty": was_empty})
        self.serve_waiters(q)
        if not from_target and d.target is None:
            d.target = (inst, db)
        if not from_target and not d.acknowledged:
            d.acknowledged = True
            d.target_bi = self.insts[inst].dbs[db].broker_instance
            self.emit("acknowledged", dialog=d.name, instance=d.inst,
                      broker_instance=d.target_bi)
        elif not from_target and d.target_bi is None:
            d.target_bi = self.insts[inst].dbs[db].broker_instance

    # ---------------------------------------------------------------- periodic tasks
    def due_timer(self, name):
        inst = self.insts[name]
        inst.timer_n += 1
        n = inst.timer_n
        self.sched(self.now + TIMER_MS, "timer", name)
        tasks = ["queue monitors", "task handlers", "message dispatcher"]
        if n % 2 == 0:
            tasks += ["transport connections", "transmitter"]
        if n % 5 == 0:
            tasks += ["idle connections", "forwarder", "broker start", "broker configuration notification",
                      "acknowledged message clean-up"]
        self.emit("timer_notification", instance=name, number=n, tasks=tasks)
        for db in inst.dbs.values():
            for q in db.queues.values():
                self.trigger(q, "timer notification")
        if inst.handlers_running < inst.handlers:
            c = inst.handlers - inst.handlers_running
            inst.handlers_running = inst.handlers
            self.emit("task_handlers_restarted", instance=name, count=c)
        self.dispatcher_cleanup(inst)
        if n % 2 == 0:
            self.transport_task(inst)
            self.retry_principals(inst)
            self.transmitter_task(inst)
        if n % 5 == 0:
            self.idle_task(inst)
            self.forwarder_task(inst)
            for db in inst.dbs.values():
                if not db.broker_started and db.master_key:
                    db.broker_started = True
                    self.emit("database_broker_started", instance=name, database=db.name)
                    self.after_broker_start(inst, db)
            for db in inst.dbs.values():
                if db.has_dialogs and not db.ack_cleanup:
                    db.ack_cleanup = True
                    self.emit("ack_cleanup_resumed", instance=name, database=db.name)

    def after_broker_start(self, inst, db):
        pass

    # ======================================================================== routing
    def route_table(self, inst, db):
        if db is None:
            return self.insts[inst].msdb_routes, "msdb.sys.routes"
        return self.insts[inst].dbs[db].routes, "%s.sys.routes" % db

    def inst_has_service(self, inst, svc):
        for db in self.insts[inst].dbs.values():
            if svc in db.services and db.serves():
                return True
        return False

    def match(self, inst, m, d, table, tname):
        """Matching RTM-1..7. Returns (step, routes) ; step RTM-4 means a routing request was made."""
        now = self.now
        routes = [r for r in table if not r.expired(now)]
        svc, bi = self.msg_service(d, m)
        if bi:
            r1 = [r for r in routes if r.service_name == svc and r.broker_instance
                  and r.broker_instance.upper() == bi.upper()]
            if r1:
                return "RTM-1", r1, None
        r2 = [r for r in routes if r.service_name == svc and not r.broker_instance]
        if r2:
            return "RTM-2", r2, None
        if not bi:
            r3 = [r for r in routes if r.service_name == svc and r.broker_instance]
            if r3:
                bis = []
                for r in r3:
                    if r.broker_instance.upper() not in bis:
                        bis.append(r.broker_instance.upper())
                pickbi = bis[0]
                return "RTM-3", [r for r in r3 if r.broker_instance.upper() == pickbi], pickbi
        i = self.insts[inst]
        for r in routes:
            if r.service_name == DYN_SERVICE:
                key = (tname, r.name, svc)
                if key not in i.pending_requests:
                    i.pending_requests.add(key)
                    self.emit("routing_requested", dialog=d.name, from_target=m.from_target, instance=inst,
                              message_sequence_number=m.seq, route=r.name, service=svc, table=tname)
                    return "RTM-4", [], None
        r5 = [r for r in routes if not r.service_name and not r.broker_instance]
        if r5:
            return "RTM-5", r5, None
        if bi:
            for db in self.insts[inst].dbs.values():
                if svc in db.services and db.serves():
                    return "RTM-6", [None], None
        return "RTM-7", [], None

    def msg_service(self, d, m):
        if m.from_target:
            return d.from_service, self.insts[d.inst].dbs[d.db].broker_instance
        bi = d.target_bi if d.acknowledged and d.target_bi else d.to_bi
        return d.to_service, bi

    def choose(self, inst, svc, routes):
        """RTC-1..4: returns (step, route or None for as-if-LOCAL, candidates)."""
        distinct = []
        seen = set()
        for r in routes:
            if r is None:
                return "RTC-2", None, [None]
            idn = r.identity()
            if idn not in seen:
                seen.add(idn)
                distinct.append(r)
        mir = [r for r in distinct if r.mirror_address]
        if mir:
            return "RTC-1", mir[0], mir
        loc = [r for r in distinct if r.kind() == "LOCAL"]
        if loc and self.inst_has_service(inst, svc):
            return "RTC-2", loc[0], loc
        net = [r for r in distinct if r.kind() == "NET"]
        if net:
            return "RTC-3", net[0], net
        tr = [r for r in distinct if r.kind() == "TRANSPORT"]
        if tr:
            return "RTC-4", tr[0], tr
        return None, None, []

    def rname(self, r):
        return "(as if LOCAL)" if r is None else r.name

    def mfields(self, m):
        return {"dialog": m.dialog, "from_target": m.from_target, "message_sequence_number": m.seq}

    def route_message(self, inst, m, outside):
        """Route message m at instance inst. outside: came from outside the instance."""
        d = self.dialogs[m.dialog]
        i = self.insts[inst]
        svc, bi = self.msg_service(d, m)
        # RTE-05: a reply from outside naming a broker instance held here is delivered here
        if outside and m.from_target:
            idb = self.db_by_bi(inst, d_bi := self.insts[d.inst].dbs[d.db].broker_instance)
            if idb is not None and idb.serves():
                self.emit("reply_recognised", broker_instance=d_bi, instance=inst, **self.mfields(m))
                self.to_dispatcher(inst, m, idb.name, svc)
                return
        if outside:
            table, tname = i.msdb_routes, "msdb.sys.routes"
        else:
            src_db = d.db if not m.from_target else d.target[1]
            table, tname = self.route_table(inst, src_db)
        step, routes, pickbi = self.match(inst, m, d, table, tname)
        ev = dict(step=step, table=tname, routes=[self.rname(r) for r in routes], instance=inst,
                  **self.mfields(m))
        if step == "RTM-3":
            ev["broker_instance"] = pickbi
        else:
            ev["broker_instance"] = None
        self.emit("routes_matched", **ev)
        if not routes:
            self.delay(inst, m, step, outside)
            return
        cstep, r, cands = self.choose(inst, svc, routes)
        if cstep is None:
            self.delay(inst, m, "RTC-4", outside)
            return
        self.emit("route_chosen", step=cstep, route=self.rname(r), candidates=[self.rname(c) for c in cands],
                  instance=inst, **self.mfields(m))
        kind = "LOCAL" if r is None else r.kind()
        if outside and kind != "LOCAL" and not i.forwarding:
            self.drop(inst, m, "message forwarding is not active", "RTC-5")
            return
        if kind == "LOCAL":
            target_bi = bi or (r.broker_instance if r is not None else None)
            db = self.locate(inst, d, m, svc, target_bi, outside)
            if db is None:
                self.drop(inst, m, "no database holds the broker instance", "RTL-2")
                return
            if outside:
                self.to_dispatcher(inst, m, db.name, svc)
            else:
                self.arrive(d, inst, db.name, svc, m.seq, m.from_target)
            return
        if r.mirror_address:
            self.send_mirrored(inst, m, r, outside)
            return
        if kind == "TRANSPORT":
            addr = addr_hostport(svc)
            if addr is None:
                self.delay(inst, m, "RTC-4", outside)
                return
        else:
            addr = r.address
        self.send_to(inst, m, addr, outside)

    def db_by_bi(self, inst, bi):
        if not bi:
            return None
        for db in self.insts[inst].dbs.values():
            if db.broker_instance and db.broker_instance.upper() == bi.upper():
                return db
        return None

    def locate(self, inst, d, m, svc, bi, outside):
        if bi:
            db = self.db_by_bi(inst, bi)
            if db is not None and svc in db.services and db.serves():
                return db
            return None
        order = []
        own = None
        if not outside:
            own = d.db if not m.from_target else (d.target[1] if d.target else None)
        if own and own in self.insts[inst].dbs:
            order.append(self.insts[inst].dbs[own])
        for db in self.insts[inst].dbs.values():
            if db not in order:
                order.append(db)
        for db in order:
            if svc in db.services and db.serves():
                return db
        return None

    def drop(self, inst, m, reason, rule):
        self.emit("message_dropped", instance=inst, reason=reason, rule=rule, **self.mfields(m))

    def delay(self, inst, m, step, outside):
        self.emit("conversation_delayed", instance=inst, step=step, **self.mfields(m))
        m.state = "delayed"
        self.wait_here(inst, m, outside, "delayed: no route", None)
        m.retry_token += 1
        self.sched(self.now + RETRY_MS, "retry", (inst, m, m.retry_token))

    def wait_here(self, inst, m, outside, status, addr):
        i = self.insts[inst]
        lst = i.forwarder if outside else i.txq
        if m not in lst:
            if m.received is None or m.where != (inst, outside):
                m.received = self.now
            m.where = (inst, outside)
            lst.append(m)
        m.status = status
        m.addr = addr
        self.emit("transmission_pending", instance=inst, status=status, address=addr, **self.mfields(m))

    def unwait(self, inst, m):
        i = self.insts[inst]
        if m in i.txq:
            i.txq.remove(m)
        if m in i.forwarder:
            i.forwarder.remove(m)

    def due_retry(self, data):
        inst, m, token = data
        if m.retry_token != token or m.state != "delayed":
            return
        outside = m.where[1] if m.where else False
        self.emit("routing_retried", instance=inst, **self.mfields(m))
        self.reroute(inst, m, outside)

    def reroute(self, inst, m, outside):
        i = self.insts[inst]
        lst = i.forwarder if outside else i.txq
        if m not in lst:
            return
        lst.remove(m)
        keep = m.received
        m.state = None
        self.route_message(inst, m, outside)
        if m in lst:
            m.received = keep
        else:
            if m not in i.txq and m not in i.forwarder:
                m.received = None
            if not outside:
                self.release_followers(inst, m)

    def release_followers(self, inst, m):
        """Messages of the same conversation held behind m at this instance go on."""
        i = self.insts[inst]
        for o in list(i.txq):
            if o.dialog == m.dialog and o.from_target == m.from_target and o.state == "behind":
                if self.head_waiting(inst, o) is None:
                    i.txq.remove(o)
                    o.state = None
                    self.route_message(inst, o, False)

    def head_waiting(self, inst, m):
        i = self.insts[inst]
        for o in i.txq:
            if o is not m and o.dialog == m.dialog and o.from_target == m.from_target and o.seq < m.seq:
                return o
        return None

    # ---------------------------------------------------------------- transport
    def inst_by_addr(self, addr):
        a = norm_addr(addr_hostport(addr) or addr)
        for inst in self.insts.values():
            if norm_addr(inst.address) == a:
                return inst
        return None

    def send_to(self, inst, m, addr, outside, hops_inc=False):
        i = self.insts[inst]
        dest = self.inst_by_addr(addr)
        if outside:
            # forwarding
            if m.hops + 1 > HOP_LIMIT:
                self.drop(inst, m, "hop limit reached", "RTX-1")
                return
        if dest is i:
            # RTX-2: a route to the instance's own address: arrives from outside
            if outside:
                m.hops += 1
                self.emit("message_forwarded", instance=inst, address=addr, hops=m.hops, **self.mfields(m))
            self.route_message(inst, m, True)
            return
        if not outside and m.dialog in i.failed_dialogs:
            self.wait_here(inst, m, outside, "failed to %s" % addr, addr)
            m.state = "failed"
            return
        key = norm_addr(addr)
        conn = i.conns.get(key)
        if conn is None:
            sup = i.suppressed.get(key)
            if sup is not None and self.now < sup:
                self.wait_here(inst, m, outside, "waiting for a connection to %s" % addr, addr)
                m.state = "conn"
                return
            if not self.connect(i, addr):
                self.wait_here(inst, m, outside, "waiting for a connection to %s" % addr, addr)
                m.state = "conn"
                return
            conn = i.conns.get(key)
        self.transmit(i, m, addr, outside)

    def connect(self, i, addr):
        key = norm_addr(addr)
        dest = self.inst_by_addr(addr)
        if dest is None or not dest.reachable:
            self.emit("connection_attempt", instance=i.name, address=addr, result="refused")
            i.suppressed[key] = self.now + SUPPRESS_FAIL_MS
            return False
        self.emit("connection_attempt", instance=i.name, address=addr, result="connected")
        i.conns[key] = {"address": addr, "opened": self.now, "last": self.now}
        i.suppressed.pop(key, None)
        return True

    def transmit(self, i, m, addr, outside):
        key = norm_addr(addr)
        conn = i.conns[key]
        conn["last"] = self.now
        if outside:
            m.hops += 1
            self.emit("message_forwarded", instance=i.name, address=addr, hops=m.hops, **self.mfields(m))
        dest = self.inst_by_addr(addr)
        self.emit("message_transmitted", instance=i.name, address=addr,
                  to_instance=dest.name if dest else None, **self.mfields(m))
        d = self.dialogs[m.dialog]
        lk = d.lost.get((m.from_target, m.seq))
        if lk is not None:
            if not lk:
                del d.lost[(m.from_target, m.seq)]
            self.emit("message_lost_in_transit", instance=i.name, address=addr, **self.mfields(m))
            return
        if dest is None:
            return
        m2 = Msg(m.dialog, m.seq, m.from_target)
        m2.hops = m.hops
        self.route_message(dest.name, m2, True)

    def to_dispatcher(self, inst, m, dbname, svc):
        i = self.insts[inst]
        d = self.dialogs[m.dialog]
        k = (m.dialog, m.from_target)
        if (m.from_target, m.seq) in d.delivered or any(
                b["dialog"] == m.dialog and b["from_target"] == m.from_target and b["seq"] == m.seq
                for b in i.buffers):
            return
        e = {"dialog": m.dialog, "from_target": m.from_target, "seq": m.seq, "db": dbname, "svc": svc,
             "arrived": self.now, "token": 0}
        i.buffers.append(e)
        self.emit("dispatcher_buffered", instance=inst, database=dbname, **self.mfields(m))
        if i.disp_mode == "running":
            self.schedule_save(i, e)

    def schedule_save(self, i, e):
        t = e["arrived"] + i.disp_delay_ms
        e["token"] += 1
        if t <= self.now:
            self.sched(self.now, "save", (i.name, e, e["token"]))
        else:
            self.sched(t, "save", (i.name, e, e["token"]))

    def due_save(self, data):
        name, e, token = data
        i = self.insts[name]
        if e not in i.buffers or e["token"] != token or i.disp_mode != "running":
            return
        self.try_save(i)

    def try_save(self, i):
        """Save the buffered messages that are due and in order."""
        progress = True
        while progress:
            progress = False
            for e in sorted(i.buffers, key=lambda e: (e["dialog"], e["from_target"], e["seq"])):
                if i.disp_mode != "running":
                    return
                if e["arrived"] + i.disp_delay_ms > self.now:
                    continue
                k = self.exp_key(i, e)
                exp = self.expected.get(k, 0)
                if e["seq"] != exp:
                    continue
                i.buffers.remove(e)
                d = self.dialogs[e["dialog"]]
                db = i.dbs.get(e["db"])
                if db is None or e["svc"] not in db.services:
                    continue
                self.arrive(d, i.name, e["db"], e["svc"], e["seq"], e["from_target"])
                progress = True
                break

    def exp_key(self, inst, e):
        db = inst.dbs.get(e["db"])
        bi = (db.broker_instance or "").upper() if db is not None else inst.name
        return (bi, e["dialog"], e["from_target"])

    def dispatcher_cleanup(self, inst):
        dels = []
        present = {(e["dialog"], e["from_target"], e["seq"]) for e in inst.buffers}
        for e in inst.buffers:
            exp = self.expected.get(self.exp_key(inst, e), 0)
            chain_ok = all((e["dialog"], e["from_target"], s) in present for s in range(exp, e["seq"]))
            if e["seq"] < exp or not chain_ok:
                dels.append((e, "out of order"))
            elif self.now - e["arrived"] >= STALE_DISPATCH_MS:
                dels.append((e, "stale"))
        for e, reason in dels:
            inst.buffers.remove(e)
            self.emit("dispatcher_deleted", instance=inst.name, database=e["db"], dialog=e["dialog"],
                      from_target=e["from_target"], message_sequence_number=e["seq"], reason=reason)

    def transport_task(self, inst):
        pend = {}
        for m in list(inst.txq) + list(inst.forwarder):
            if m.state == "conn" and m.addr:
                pend.setdefault(norm_addr(m.addr), m.addr)
        for key, addr in pend.items():
            if key in inst.conns:
                continue
            sup = inst.suppressed.get(key)
            if sup is not None and self.now < sup:
                continue
            if self.connect(inst, addr):
                for m in [x for x in list(inst.txq) + list(inst.forwarder)
                          if x.state == "conn" and norm_addr(x.addr) == key]:
                    outside = m in inst.forwarder
                    self.unwait(inst.name, m)
                    m.state = None
                    self.transmit(inst, m, m.addr, outside)
                    if not outside:
                        self.release_followers(inst.name, m)

    def transmitter_task(self, inst):
        last = getattr(inst, "last_reclass", self.t0)
        inst.last_reclass = self.now
        expired = False
        for t in [inst.msdb_routes] + [db.routes for db in inst.dbs.values()]:
            for r in t:
                if r.expires_ms is not None and last < r.expires_ms <= self.now:
                    expired = True
        waiting = list(inst.txq) + list(inst.forwarder)
        names = []
        for m in waiting:
            if m.dialog in inst.touched or m.dialog in inst.failed_dialogs or expired:
                if m.dialog not in names:
                    names.append(m.dialog)
        for dn in sorted(inst.failed_dialogs):
            if dn not in names:
                names.append(dn)
        inst.failed_dialogs = set()
        inst.touched = set()
        self.emit("transmitter_reclassified", instance=inst.name, dialogs=list(names))
        heads = []
        seen = set()
        for m in list(inst.txq) + list(inst.forwarder):
            k = (m.dialog, m.from_target, m in inst.forwarder)
            if m.dialog in names and k not in seen and m.state != "behind":
                seen.add(k)
                heads.append(m)
        for m in heads:
            outside = m in inst.forwarder
            self.reroute(inst.name, m, outside)

    def idle_task(self, inst):
        for key, c in list(inst.conns.items()):
            if self.now - c["last"] >= IDLE_MS:
                del inst.conns[key]
                self.emit("connection_closed", instance=inst.name, address=c["address"], reason="idle")

    def forwarder_task(self, inst):
        for m in list(inst.forwarder):
            if self.now - (m.received or self.now) >= FWD_STALE_MS:
                inst.forwarder.remove(m)
                m.state = "deleted"
                self.emit("forwarded_message_deleted", instance=inst.name, **self.mfields(m))

    def probe_answer(self, addr, ask, svc):
        dest = self.inst_by_addr(addr)
        if dest is None or not dest.reachable:
            return "unreachable"
        for db in dest.dbs.values():
            hit = (db.broker_instance and ask and db.broker_instance.upper() == ask.upper()) if ask \
                else (svc in db.services)
            if hit and db.mirroring_role != "mirror" and db.broker_started:
                return "principal"
        return "not principal"

    def send_mirrored(self, inst, m, r, outside):
        """RTR-2..5: a route with a mirror address."""
        d = self.dialogs[m.dialog]
        svc, bi = self.msg_service(d, m)
        ask = r.broker_instance or bi
        if r.principal is not None:
            ans = self.probe_answer(r.principal, ask, svc)
            if ans == "principal":
                self.send_to(inst, m, r.principal, outside)
                return
            self.emit("principal_lost", instance=inst, address=r.principal, answer=ans, route=r.name,
                      **self.mfields(m))
            lost = r.principal
            r.principal = None
            partner = r.mirror_address if norm_addr(lost) == norm_addr(r.address) else r.address
            addrs = [partner]
        else:
            addrs = [r.address, r.mirror_address]
        found = self.probe(inst, m, r, addrs, ask, svc)
        if found is None:
            self.wait_here(inst, m, outside, "waiting for the principal of route %s" % r.name, None)
            m.state = "principal"
            m.route = r
            return
        r.principal = found
        self.send_to(inst, m, found, outside)

    def probe(self, inst, m, r, addrs, ask, svc):
        found = None
        for a in addrs:
            ans = self.probe_answer(a, ask, svc)
            self.emit("principal_probe", instance=inst, address=a, answer=ans, route=r.name, **self.mfields(m))
            if ans == "principal" and found is None:
                found = a
        return found

    def retry_principals(self, inst):
        done = set()
        for m in list(inst.txq) + list(inst.forwarder):
            if m.state != "principal" or m.route is None:
                continue
            key = (m.dialog, m.from_target)
            if key in done:
                continue
            done.add(key)
            r = m.route
            tables = [inst.msdb_routes] + [db.routes for db in inst.dbs.values()]
            if not any(r in t for t in tables):
                continue
            outside = m in inst.forwarder
            self.unwait(inst.name, m)
            m.state = None
            # RTR-3: a principal the route has learnt meanwhile (for another conversation) is used
            # without contacting the mirror; otherwise both addresses are asked again (RTR-5)
            self.send_mirrored(inst.name, m, r, outside)
            if not outside and m not in inst.txq:
                self.release_followers(inst.name, m)

    # ---------------------------------------------------------------- commands
    def cmd_begin_dialog(self, c):
        inst = self.insts.get(c["instance"])
        if inst is None or c["database"] not in inst.dbs:
            raise Refused("no such database")
        db = inst.dbs[c["database"]]
        if c["from_service"] not in db.services:
            raise Refused("no service %r" % c["from_service"])
        if c["dialog"] in self.dialogs:
            raise Refused("dialog %r already begun" % c["dialog"])
        d = Dialog(c["dialog"], c["instance"], c["database"], c["from_service"], c["to_service"],
                   c.get("to_broker_instance"))
        self.dialogs[d.name] = d
        db.has_dialogs = True
        self.emit("dialog_begun", dialog=d.name, instance=d.inst, database=d.db, from_service=d.from_service,
                  to_service=d.to_service, to_broker_instance=d.to_bi)
        return {}

    def cmd_send(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refused("no dialog %r has been begun" % c["dialog"])
        ft = bool(c.get("from_target"))
        if ft and d.target is None:
            raise Refused("the dialog has no target yet")
        seq = d.next_seq[ft]
        d.next_seq[ft] = seq + 1
        inst, db = (d.inst, d.db) if not ft else d.target
        self.emit("message_sent", dialog=d.name, instance=inst, database=db, from_target=ft,
                  message_sequence_number=seq)
        m = Msg(d.name, seq, ft)
        i = self.insts[inst]
        ahead = self.head_waiting(inst, m)
        if ahead is not None:
            self.wait_here(inst, m, False, "behind an earlier message of the conversation", None)
            m.state = "behind"
            return {"message_sequence_number": seq}
        self.route_message(inst, m, False)
        return {"message_sequence_number": seq}

    def cmd_begin_transaction(self, c):
        s = self.session(c["session"])
        if s.txn:
            raise Refused("a transaction is already open")
        s.txn = True
        return {}

    def cmd_commit(self, c):
        s = self.session(c["session"])
        if not s.txn:
            raise Refused("COMMIT without a transaction")
        self.end_txn(s, commit=True)
        return {}

    def cmd_rollback(self, c):
        s = self.session(c["session"])
        if not s.txn:
            raise Refused("ROLLBACK without a transaction")
        self.end_txn(s, commit=False)
        return {}

    def cmd_receive(self, c):
        q = self.queue_of(c["queue"])
        s = self.session(c["session"])
        if s.wait:
            raise Refused("the session is waiting")
        self.do_receive(s, q, c.get("top"), c.get("where_dialog"), c.get("where_group"), c.get("waitfor_ms"))
        return {}

    def cmd_get_conversation_group(self, c):
        q = self.queue_of(c["queue"])
        s = self.session(c["session"])
        if s.wait:
            raise Refused("the session is waiting")
        self.do_receive(s, q, None, None, None, c.get("waitfor_ms"), gcg=True)
        return {}

    def cmd_alter_queue(self, c):
        q = self.queue_of(c["queue"])
        if c.get("status") is not None:
            q.status = c["status"].upper()
        if c.get("procedure_name") is not None:
            q.procedure = c["procedure_name"]
        if c.get("max_queue_readers") is not None:
            q.max_readers = c["max_queue_readers"]
        self.emit("queue_altered", **self.qfields(q))
        self.update_monitor(q)
        self.trigger(q, "ALTER QUEUE")
        return {}

    def cmd_create_event_notification(self, c):
        q = self.queue_of(c["queue"])
        if c["name"] in q.notifications:
            raise Refused("event notification exists")
        q.notifications.append(c["name"])
        self.update_monitor(q)
        return {}

    def cmd_drop_event_notification(self, c):
        q = self.queue_of(c["queue"])
        if c["name"] not in q.notifications:
            raise Refused("no such event notification")
        q.notifications.remove(c["name"])
        self.update_monitor(q)
        return {}

    def cmd_exit_procedure(self, c):
        q = self.queue_of(c["queue"])
        t = q.tasks.get(c["task"])
        if t is None:
            raise Refused("no activated task %r running" % c["task"])
        self.exit_task(t, "exited")
        return {}

    def routes_for(self, c):
        inst = self.insts.get(c["instance"])
        if inst is None:
            raise Refused("no instance")
        if c.get("database") is None:
            return inst, inst.msdb_routes, "msdb"
        db = inst.dbs.get(c["database"])
        if db is None:
            raise Refused("no database")
        return inst, db.routes, db.name

    def check_addr(self, a):
        if a is None:
            return
        if a.upper() in ("LOCAL", "TRANSPORT"):
            return
        if not re.match(r"^tcp://[^/:\s]+:\d+/?$", a, re.I):
            raise Refused("malformed address %r" % a)

    def touch_routes(self, inst, svcs):
        for m in list(inst.txq) + list(inst.forwarder):
            d = self.dialogs[m.dialog]
            svc, _ = self.msg_service(d, m)
            if None in svcs or svc in svcs:
                inst.touched.add(m.dialog)

    def cmd_create_route(self, c):
        inst, table, dbname = self.routes_for(c)
        rd = c["route"]
        if any(r.name == rd["name"] for r in table):
            raise Refused("route exists")
        self.check_addr(rd.get("address"))
        self.check_addr(rd.get("mirror_address"))
        r = Route(rd, self.now)
        table.append(r)
        self.emit("route_created", instance=inst.name, database=dbname, route=r.name)
        self.touch_routes(inst, {r.service_name})
        return {}

    def cmd_alter_route(self, c):
        inst, table, dbname = self.routes_for(c)
        rd = c["route"]
        r = next((x for x in table if x.name == rd["name"]), None)
        if r is None:
            raise Refused("no route %r" % rd["name"])
        self.check_addr(rd.get("address"))
        self.check_addr(rd.get("mirror_address"))
        before = r.service_name
        for f in ("service_name", "broker_instance", "address", "mirror_address"):
            if rd.get(f) is not None:
                setattr(r, f, rd[f])
        if rd.get("lifetime_s") is not None:
            r.expires_ms = self.now + int(round(rd["lifetime_s"] * 1000))
        if r.principal and norm_addr(r.principal) not in (norm_addr(r.address), norm_addr(r.mirror_address)):
            r.principal = None
        self.emit("route_altered", instance=inst.name, database=dbname, route=r.name)
        self.touch_routes(inst, {before, r.service_name})
        return {}

    def cmd_drop_route(self, c):
        inst, table, dbname = self.routes_for(c)
        r = next((x for x in table if x.name == c["name"]), None)
        if r is None:
            raise Refused("no route %r" % c["name"])
        table.remove(r)
        self.emit("route_dropped", instance=inst.name, database=dbname, route=r.name)
        self.touch_routes(inst, {r.service_name})
        return {}

    def cmd_answer_routing_request(self, c):
        inst, table, dbname = self.routes_for(c)
        rd = c["route"]
        tname = "msdb.sys.routes" if c.get("database") is None else "%s.sys.routes" % c["database"]
        for key in list(inst.pending_requests):
            if key[0] == tname and key[2] == rd.get("service_name"):
                inst.pending_requests.discard(key)
        existing = next((x for x in table if x.name == rd["name"]), None)
        if existing is not None:
            table.remove(existing)
        r = Route(rd, self.now)
        table.append(r)
        self.emit("route_created", instance=inst.name, database=dbname, route=r.name)
        self.touch_routes(inst, {r.service_name})
        return {}

    def cmd_set_message_forwarding(self, c):
        inst = self.insts[c["instance"]]
        inst.forwarding = bool(c["active"])
        return {}

    def cmd_set_reachable(self, c):
        inst = self.insts[c["instance"]]
        inst.reachable = bool(c["reachable"])
        if not inst.reachable:
            a = norm_addr(inst.address)
            for other in self.insts.values():
                if other is inst:
                    continue
                if a in other.conns:
                    cn = other.conns.pop(a)
                    other.suppressed[a] = self.now + SUPPRESS_DISC_MS
                    self.emit("connection_closed", instance=other.name, address=cn["address"],
                              reason="disconnected")
        return {}

    def cmd_failover(self, c):
        inst = self.insts[c["instance"]]
        db = inst.dbs.get(c["database"])
        if db is None:
            raise Refused("no database")
        for other in self.insts.values():
            for odb in other.dbs.values():
                if odb is not db and odb.name == db.name and odb.broker_instance == db.broker_instance \
                        and odb.mirroring_role:
                    odb.mirroring_role = "mirror"
        db.mirroring_role = "principal"
        return {}

    def cmd_fail_task_handlers(self, c):
        inst = self.insts[c["instance"]]
        inst.handlers_running = max(0, inst.handlers_running - c["count"])
        return {}

    def cmd_set_dispatcher_saving(self, c):
        inst = self.insts[c["instance"]]
        inst.disp_mode = c["mode"]
        inst.disp_delay_ms = int(round((c.get("delay_s") or 0) * 1000))
        if inst.disp_mode == "running":
            for e in inst.buffers:
                self.schedule_save(inst, e)
        return {}

    def cmd_lose_in_transit(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refused("no dialog")
        d.lost[(bool(c.get("from_target")), c["sequence"])] = bool(c.get("every"))
        return {}

    def cmd_drop_connection(self, c):
        inst = self.insts[c["instance"]]
        key = norm_addr(c["address"])
        cn = inst.conns.pop(key, None)
        if cn is not None:
            self.emit("connection_closed", instance=inst.name, address=cn["address"], reason="disconnected")
        inst.suppressed[key] = self.now + SUPPRESS_DISC_MS
        return {}

    def cmd_fail_transmission(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refused("no dialog")
        for name in {d.inst, (d.target or (d.inst,))[0]}:
            self.insts[name].failed_dialogs.add(d.name)
        return {}

    def cmd_create_master_key(self, c):
        inst = self.insts[c["instance"]]
        db = inst.dbs.get(c["database"])
        if db is None:
            raise Refused("no database")
        db.master_key = True
        return {}

    def cmd_stop_ack_cleanup(self, c):
        inst = self.insts[c["instance"]]
        db = inst.dbs.get(c["database"])
        if db is None:
            raise Refused("no database")
        db.ack_cleanup = False
        return {}

    def cmd_advance_time(self, c):
        return {}

    # ---------------------------------------------------------------- views
    def cmd_query_view(self, c):
        v = c["view"]
        rows = []
        only = c.get("instance")
        if v == "sys.dm_broker_queue_monitors":
            for inst in self.insts.values():
                for db in inst.dbs.values():
                    for q in db.queues.values():
                        if not q.monitor:
                            continue
                        if q.ext_until is not None:
                            st = "NOTIFIED"
                        elif q.tasks or self.any_waiting(q):
                            st = "RECEIVES_OCCURRING"
                        else:
                            st = "INACTIVE"
                        rows.append({"database_id": db.dbid, "queue_id": q.qid, "instance": inst.name,
                                     "database": db.name, "queue": q.name, "state": st,
                                     "last_empty_rowset_time": q.last_empty,
                                     "last_activated_time": q.last_activated,
                                     "tasks_waiting": self.waiting_readers(q)})
        elif v == "sys.dm_broker_activated_tasks":
            for inst in self.insts.values():
                for db in inst.dbs.values():
                    for q in db.queues.values():
                        for n in sorted(q.tasks):
                            t = q.tasks[n]
                            rows.append({"spid": t.session.spid, "database_id": db.dbid, "queue_id": q.qid,
                                         "instance": inst.name, "database": db.name, "queue": q.name,
                                         "task": n, "procedure_name": t.proc.get("name")})
        elif v == "sys.routes":
            inst = self.insts.get(only)
            if inst is None:
                raise Refused("sys.routes needs an instance")
            if c.get("database") is None:
                table, dbn = inst.msdb_routes, "msdb"
            else:
                if c["database"] not in inst.dbs:
                    raise Refused("no database")
                table, dbn = inst.dbs[c["database"]].routes, c["database"]
            for r in table:
                rows.append({"instance": inst.name, "database": dbn, "name": r.name,
                             "remote_service_name": r.service_name, "broker_instance": r.broker_instance,
                             "address": r.address, "mirror_address": r.mirror_address,
                             "expires_ms": r.expires_ms})
        elif v in ("sys.transmission_queue", "sbtck.forwarder"):
            for inst in self.insts.values():
                if only and inst.name != only:
                    continue
                lst = inst.txq if v == "sys.transmission_queue" else inst.forwarder
                for m in lst:
                    d = self.dialogs[m.dialog]
                    svc, _ = self.msg_service(d, m)
                    rows.append({"instance": inst.name, "dialog": m.dialog, "message_sequence_number": m.seq,
                                 "from_target": m.from_target, "to_service_name": svc,
                                 "transmission_status": m.status or "", "received_ms": m.received or self.now})
        elif v == "sys.conversation_endpoints":
            for d in self.dialogs.values():
                rows.append({"dialog": d.name, "instance": d.inst, "database": d.db, "far_service": d.to_service,
                             "far_broker_instance": d.target_bi if d.acknowledged else d.to_bi,
                             "acknowledged": d.acknowledged})
                if d.target:
                    rows.append({"dialog": d.name, "instance": d.target[0], "database": d.target[1],
                                 "far_service": d.from_service,
                                 "far_broker_instance": self.insts[d.inst].dbs[d.db].broker_instance,
                                 "acknowledged": True})
        elif v == "sys.dm_broker_connections":
            for inst in self.insts.values():
                if only and inst.name != only:
                    continue
                for cn in inst.conns.values():
                    rows.append({"instance": inst.name, "address": cn["address"], "state": "CONNECTED",
                                 "opened_ms": cn["opened"], "last_activity_ms": cn["last"]})
        elif v == "sbtck.dispatcher_buffers":
            for inst in self.insts.values():
                if only and inst.name != only:
                    continue
                for e in inst.buffers:
                    rows.append({"instance": inst.name, "database": e["db"], "dialog": e["dialog"],
                                 "message_sequence_number": e["seq"], "from_target": e["from_target"],
                                 "arrived_ms": e["arrived"]})
        elif v == "sbtck.periodic_state":
            for inst in self.insts.values():
                if only and inst.name != only:
                    continue
                for db in inst.dbs.values():
                    rows.append({"instance": inst.name, "task_handlers": inst.handlers,
                                 "running_task_handlers": inst.handlers_running, "database": db.name,
                                 "broker_started": db.broker_started, "ack_cleanup_running": db.ack_cleanup})
                if not inst.dbs:
                    rows.append({"instance": inst.name, "task_handlers": inst.handlers,
                                 "running_task_handlers": inst.handlers_running, "database": "msdb",
                                 "broker_started": True, "ack_cleanup_running": True})
        else:
            raise Refused("unknown view %r" % v)
        return {"rows": rows}

    # ---------------------------------------------------------------- dispatch
    def execute(self, cmd):
        kind = cmd.get("kind")
        if kind == "start":
            res = self.start(cmd)
            self.settle()
            return res
        if not self.started:
            raise Refused("not started")
        at = cmd.get("at_ms", self.now)
        self.advance(at)
        self.now = max(self.now, at)
        fn = getattr(self, "cmd_" + kind, None)
        if fn is None:
            raise Refused("unknown command %r" % kind)
        res = fn(cmd)
        self.settle()
        return res


def main():
    b = Broker()
    out = sys.stdout
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except Exception:
            continue
        rid = req.get("id")
        op = req.get("op")
        if op == "hello":
            ans = {"id": rid, "ok": True, "result": {"name": "cleanroom13", "version": "0.1", "protocol": PROTOCOL,
                                                     "capabilities": CAPS, "params": PARAMS}}
        elif op == "bye":
            out.write(json.dumps({"id": rid, "ok": True}) + "\n")
            out.flush()
            return
        elif op == "execute":
            b.events = getattr(b, "events", [])
            b.events = []
            try:
                res = b.execute(req["command"])
                ans = {"id": rid, "ok": True, "result": res or {}, "events": b.events}
            except Refused as e:
                ans = {"id": rid, "ok": False, "error": str(e), "events": b.events}
            except Exception as e:  # a bug of ours
                traceback.print_exc(file=sys.stderr)
                ans = {"id": rid, "ok": False, "fault": True, "error": "%s: %s" % (type(e).__name__, e),
                       "events": []}
        else:
            ans = {"id": rid, "ok": False, "error": "unknown op %r" % op}
        out.write(json.dumps(ans) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
