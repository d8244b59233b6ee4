#!/usr/bin/env python3
"""cr14 broker: a clean-room Service Broker model speaking the sbtck protocol (2.3) over stdio.

Standard library only. Written from the kit's user documentation and the source documents in
/work/shared/spec. SBTCK_CR14_NO_TRACE=1 leaves the decision trace out.
"""
from __future__ import annotations

import heapq
import json
import os
import sys
import traceback

PROTOCOL = "2.3"
NO_TRACE = os.environ.get("SBTCK_CR14_NO_TRACE") == "1"
CAPS = ["activation", "external_activation", "routing", "mirroring", "dynamic_routing",
        "forwarding", "periodic_tasks"] + ([] if NO_TRACE else ["decision_trace"])
PARAMS = {
    "activation_empty_window_s": 5,
    "external_activation_timeout_s": 30,
    "delayed_retry_s": 10,
    "forward_hop_limit": 4,
}
TIMER_MS = 5000
WINDOW_MS = int(PARAMS["activation_empty_window_s"] * 1000)
EXT_TIMEOUT_MS = int(PARAMS["external_activation_timeout_s"] * 1000)
RETRY_MS = int(PARAMS["delayed_retry_s"] * 1000)
HOP_LIMIT = PARAMS["forward_hop_limit"]
STALE_DISPATCH_MS = 10000
SUPPRESS_DISC_MS = 15000
SUPPRESS_FAIL_MS = 60000
IDLE_MS = 90000
FWD_STALE_MS = 60000
BCN_SERVICE = "http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice"


class Refusal(Exception):
    pass


def norm_addr(a):
    return a.upper() if isinstance(a, str) else a


def is_net(a):
    return isinstance(a, str) and a.upper().startswith("TCP://")


def transport_addr(service):
    if not isinstance(service, str) or not service.upper().startswith("TCP://"):
        return None
    rest = service[6:]
    hostport = rest.split("/", 1)[0]
    return "TCP://" + hostport


# --------------------------------------------------------------------------- model objects
class Route:
    def __init__(self, d, now):
        self.name = d["name"]
        self.service_name = d.get("service_name")
        self.broker_instance = d.get("broker_instance")
        self.address = d.get("address") or "LOCAL"
        self.mirror_address = d.get("mirror_address")
        lt = d.get("lifetime_s")
        self.expires_ms = None if lt is None else int(now + lt * 1000)
        self.principal = None  # mirrored route: the address known as principal

    def expired(self, now):
        return self.expires_ms is not None and now >= self.expires_ms

    def addr_kind(self):
        a = self.address.upper()
        if a == "LOCAL":
            return "LOCAL"
        if a == "TRANSPORT":
            return "TRANSPORT"
        return "NET"


class Queue:
    def __init__(self, inst, db, d):
        self.inst = inst
        self.db = db
        self.name = d["name"]
        act = d.get("activation") or {}
        self.status = act.get("status", "OFF")
        self.procedure_name = act.get("procedure_name")
        self.max_readers = act.get("max_queue_readers", 0) or 0
        self.messages = []  # Msg objects on the queue (taken ones stay, marked)
        self.ens = []  # event notification names
        self.monitor = False
        self.last_empty = None
        self.last_activated = None
        self.notified_until = None
        self.task_counter = 0
        self.procs = {}  # task -> Proc running
        self.started_any = False
        self.qid = 0

    def has_monitor_cond(self):
        return self.status == "ON" or bool(self.ens)


class Database:
    def __init__(self, inst, d, did):
        self.inst = inst
        self.name = d["name"]
        self.bi = d.get("broker_instance") or ""
        self.role = d.get("mirroring_role")
        self.master_key = d.get("master_key", True)
        self.broker_started = bool(self.master_key)
        self.procedures = {p["name"]: p for p in d.get("procedures", [])}
        self.queues = {}
        self.services = {}
        self.routes = []
        self.did = did
        self.ack_cleanup = True
        self.next_expected = {}  # (dialog, from_target) -> next seq expected (shared by mirrored copies)


class Instance:
    def __init__(self, d):
        self.name = d["name"]
        self.address = d.get("address") or ""
        self.cpus = d.get("cpus", 1)
        self.forwarding = d.get("message_forwarding", False)
        self.msdb_routes = []
        self.dbs = {}
        self.reachable = True
        self.handlers = 2 * self.cpus
        self.running_handlers = self.handlers
        self.connections = {}  # ADDR(upper) -> dict(address, opened, last)
        self.suppressed = {}  # ADDR -> until ms
        self.tq = []  # Pending objects waiting at this instance (sent from here)
        self.forwarder = []  # Pending objects from outside waiting here
        self.dispatcher = []  # buffered Msg entries
        self.saving_mode = "running"
        self.saving_delay = 0
        self.touched = set()  # dialog keys touched since last reclassification
        self.failed = set()  # dialog names failed at this transmitter
        self.pending_requests = set()  # (table, route name, service)


class Msg:
    def __init__(self, dialog, seq, from_target, body, mtype):
        self.dialog = dialog
        self.seq = seq
        self.from_target = from_target
        self.body = body
        self.mtype = mtype
        self.hops = 0
        self.group = None
        self.taken_by = None  # session name holding it in an open transaction
        self.arrived_at = None
        self.had_unread_before = False


class Pending:
    """A message waiting at an instance."""

    def __init__(self, msg, inside, db, received, why, address=None):
        self.msg = msg
        self.inside = inside  # conversation originated here (table of db) vs outside (msdb)
        self.db = db  # database name whose table is used when inside
        self.received = received
        self.why = why  # delayed / connection / principal / behind / failed
        self.address = address
        self.retry_at = None
        self.route_name = None
        self.route_table = None
        self.first_wait_since = received


class Session:
    def __init__(self, name):
        self.name = name
        self.in_tx = False
        self.taken = []  # (queue, msg)
        self.locks = set()  # (queue key, group)
        self.recv_queues = []  # queues whose groups it locks
        self.rb_queues = []  # queues a RECEIVE of its transaction read (rollback triggers a look there)
        self.waiting = None  # dict describing the wait
        self.proc = None


class Proc:
    def __init__(self, queue, task, spid, behaviour, session):
        self.queue = queue
        self.task = task
        self.spid = spid
        self.beh = behaviour
        self.session = session
        self.alive = True


class Dialog:
    def __init__(self, name, inst, db, frm, to, tbi):
        self.name = name
        self.inst = inst
        self.db = db
        self.frm = frm
        self.to = to
        self.tbi = tbi
        self.acked_bi = None
        self.target = None  # (instance, database) of target endpoint once delivered
        self.seq = {False: 0, True: 0}
        self.gid_i = None
        self.gid_t = None
        self.lose = {}  # (seq, from_target) -> 'once' | 'every'


# --------------------------------------------------------------------------- the broker
class Broker:
    def __init__(self):
        self.reset(0)

    def reset(self, now):
        self.now = now
        self.start_ms = now
        self.inst = {}
        self.events = []
        self.due = []
        self.dseq = 0
        self.looks = []
        self.sessions = {}
        self.spid = 51
        self.dialogs = {}
        self.tick_no = 0
        self.gid = 0
        self.qid = 0
        self.shared_ep = {}
        self.last_reclass = now

    # ---------------------------------------------------------------- plumbing
    def ev(self, kind, **f):
        e = {"at_ms": self.now, "kind": kind}
        e.update(f)
        self.events.append(e)

    def trace(self, kind, **f):
        if not NO_TRACE:
            self.ev(kind, **f)

    def schedule(self, t, fn, *args):
        self.dseq += 1
        heapq.heappush(self.due, (t, self.dseq, fn, args))

    def run_until(self, t):
        while True:
            self.settle()
            if self.due and self.due[0][0] <= t:
                tt, _, fn, args = heapq.heappop(self.due)
                if tt > self.now:
                    self.now = tt
                fn(*args)
                continue
            break
        self.now = max(self.now, t)

    def settle(self):
        """Run everything due at the current instant, then the queued looks one at a time."""
        while True:
            if self.due and self.due[0][0] <= self.now:
                _, _, fn, args = heapq.heappop(self.due)
                fn(*args)
                continue
            if self.looks:
                q, trig, extra = self.looks.pop(0)
                self.look(q, trig, extra)
                continue
            break

    def new_gid(self):
        self.gid += 1
        return "G%04d-0000-0000-0000-%012d" % (self.gid, self.gid)

    def session(self, name):
        s = self.sessions.get(name)
        if s is None:
            s = Session(name)
            s.spid = self.spid
            self.spid += 1
            self.sessions[name] = s
        return s

    def get_inst(self, name):
        i = self.inst.get(name)
        if i is None:
            raise Refusal("no instance %r" % name)
        return i

    def get_db(self, iname, dname):
        i = self.get_inst(iname)
        d = i.dbs.get(dname)
        if d is None:
            raise Refusal("no database %r on %r" % (dname, iname))
        return d

    def get_queue(self, qref):
        d = self.get_db(qref["instance"], qref["database"])
        q = d.queues.get(qref["queue"])
        if q is None:
            raise Refusal("no queue %r" % qref["queue"])
        return q

    def qkey(self, q):
        return (q.inst.name, q.db.name, q.name)

    def qfields(self, q):
        return {"instance": q.inst.name, "database": q.db.name, "queue": q.name}

    def inst_by_addr(self, addr):
        for i in self.inst.values():
            if norm_addr(i.address) == norm_addr(addr):
                return i
        return None

    # ---------------------------------------------------------------- start
    def cmd_start(self, c):
        self.reset(c["at_ms"])
        topo = c["topology"]
        did = 5
        for idef in topo.get("instances", []):
            inst = Instance(idef)
            self.inst[inst.name] = inst
            inst.msdb_routes = [Route(r, self.now) for r in idef.get("msdb_routes", [])]
            for ddef in idef.get("databases", []):
                db = Database(inst, ddef, did)
                did += 1
                inst.dbs[db.name] = db
                db.routes = [Route(r, self.now) for r in ddef.get("routes", [])]
                if db.role in ("principal", "mirror") and db.bi:
                    db.next_expected = self.shared_ep.setdefault(db.bi.lower(), {})
                for qd in ddef.get("queues", []):
                    q = Queue(inst, db, qd)
                    self.qid += 1
                    q.qid = 1000 + self.qid
                    db.queues[q.name] = q
                for sd in ddef.get("services", []):
                    db.services[sd["name"]] = sd["queue"]
                for en in ddef.get("event_notifications", []):
                    q = db.queues.get(en["queue"])
                    if q is not None:
                        q.ens.append(en["name"])
        self.ev("broker_started")
        for inst in self.inst.values():
            self.ev("task_handlers_started", instance=inst.name, count=inst.handlers)
            for db in inst.dbs.values():
                if not db.master_key:
                    self.ev("database_broker_start_failed", instance=inst.name, database=db.name,
                            reason="missing master key")
                for q in db.queues.values():
                    if q.has_monitor_cond():
                        q.monitor = True
                        self.ev("monitor_created", **self.qfields(q))
        self.schedule(self.now + TIMER_MS, self.tick)
        return {}

    # ---------------------------------------------------------------- timer
    def tick(self):
        self.tick_no += 1
        n = self.tick_no
        self.schedule(self.now + TIMER_MS, self.tick)
        insts = list(self.inst.values())
        for inst in insts:
            tasks = ["queue monitors", "task handlers", "message dispatcher"]
            if n % 2 == 0:
                tasks += ["transport connections", "transmitter"]
            if n % 5 == 0:
                tasks += ["idle connections", "forwarder", "broker start",
                          "broker configuration notification", "acknowledged message clean-up"]
            self.trace("timer_notification", instance=inst.name, number=n, tasks=tasks)
        # every notification
        for inst in insts:
            for db in inst.dbs.values():
                for q in db.queues.values():
                    if q.monitor:
                        self.looks.append((q, "timer notification", None))
        for inst in insts:
            if inst.running_handlers < inst.handlers:
                cnt = inst.handlers - inst.running_handlers
                inst.running_handlers = inst.handlers
                self.ev("task_handlers_restarted", instance=inst.name, count=cnt)
        for inst in insts:
            self.dispatcher_cleanup(inst)
        if n % 2 == 0:
            for inst in insts:
                self.transport_connect(inst)
            self.reclassify_all(insts)
        if n % 5 == 0:
            for inst in insts:
                for key, c in list(inst.connections.items()):
                    if self.now - c["last"] >= IDLE_MS:
                        del inst.connections[key]
                        self.ev("connection_closed", instance=inst.name, address=c["address"], reason="idle")
            for inst in insts:
                for p in list(inst.forwarder):
                    if self.now - p.received >= FWD_STALE_MS:
                        inst.forwarder.remove(p)
                        m = p.msg
                        self.ev("forwarded_message_deleted", instance=inst.name, dialog=m.dialog.name,
                                message_sequence_number=m.seq, from_target=m.from_target)
            for inst in insts:
                for db in inst.dbs.values():
                    if not db.broker_started:
                        if db.master_key:
                            db.broker_started = True
                            self.ev("database_broker_started", instance=inst.name, database=db.name)
                            self.redeliver_waiting(inst)
                        else:
                            self.ev("database_broker_start_failed", instance=inst.name, database=db.name,
                                    reason="missing master key")
            for inst in insts:
                for db in inst.dbs.values():
                    if not db.ack_cleanup and self.db_has_dialogs(inst, db):
                        db.ack_cleanup = True
                        self.ev("ack_cleanup_resumed", instance=inst.name, database=db.name)

    def db_has_dialogs(self, inst, db):
        for d in self.dialogs.values():
            if d.inst == inst.name and d.db == db.name:
                return True
            if d.target and d.target[0] == inst.name and d.target[1] == db.name:
                return True
        return False

    # ---------------------------------------------------------------- activation
    def unread(self, q):
        return [m for m in q.messages if m.taken_by is None]

    def waiting_readers(self, q):
        n = 0
        for s in self.sessions.values():
            w = s.waiting
            if w and w["queue"] is q and (w["stmt"] == "GET CONVERSATION GROUP" or not w["has_where"]):
                n += 1
        return n

    def any_waiters(self, q):
        for s in self.sessions.values():
            if s.waiting and s.waiting["queue"] is q:
                return True
        return False

    def trigger(self, q, trig, extra=None):
        if q.monitor:
            self.looks.append((q, trig, extra))

    def look(self, q, trig, extra):
        if not q.monitor:
            return
        necessary = None
        unread = self.unread(q)
        if trig == "message arrived" and extra is not None:
            m = extra
            if not m.had_unread_before and not q.procs:
                necessary = "ACT-06"
        if necessary is None and unread and self.waiting_readers(q) == 0:
            if q.last_empty is None or self.now - q.last_empty >= WINDOW_MS:
                necessary = "ACT-07"
        if necessary is None:
            return
        f = self.qfields(q)
        self.trace("activation_necessary", rule=necessary, trigger=trig, **f)
        # internal
        started = False
        notify = False
        if q.ens:
            if q.notified_until is not None and self.now < q.notified_until:
                self.trace("activation_withheld", reason="notification time-out", **f)
            else:
                notify = True
        if q.status == "ON" and q.procedure_name:
            if len(q.procs) < q.max_readers:
                started = True
            else:
                self.trace("activation_withheld", reason="MAX_QUEUE_READERS", **f)
        if notify:
            for en in q.ens:
                self.ev("event_notification", notification=en, event_type="QUEUE_ACTIVATION", **f)
            q.notified_until = self.now + EXT_TIMEOUT_MS
            q.last_activated = self.now
            self.schedule(q.notified_until, self.ext_timeout, q, q.notified_until)
        if started:
            self.start_proc(q)

    def ext_timeout(self, q, until):
        if q.notified_until != until:
            return
        q.notified_until = None
        self.ev("activation_time_out", **self.qfields(q))
        self.trigger(q, "external activation time-out")

    def end_notification(self, q):
        if q.notified_until is not None:
            q.notified_until = None

    def start_proc(self, q):
        q.task_counter += 1
        task = q.task_counter
        sname = "%s#%d" % (q.name, task)
        s = self.session(sname)
        beh = q.db.procedures.get(q.procedure_name) or {"name": q.procedure_name, "receives": True,
                                                         "receive_top": 1, "waitfor_ms": None,
                                                         "work_ms": 0}
        p = Proc(q, task, s.spid, beh, s)
        s.proc = p
        q.procs[task] = p
        q.last_activated = self.now
        self.ev("procedure_started", procedure_name=q.procedure_name, spid=s.spid, task=task, **self.qfields(q))
        if beh.get("receives", True):
            self.proc_receive(p)

    def proc_receive(self, p):
        if not p.alive:
            return
        s = p.session
        if not s.in_tx:
            s.in_tx = True
        rows = self.do_receive(s, p.queue, p.beh.get("receive_top", 1), None, None,
                               p.beh.get("waitfor_ms"), proc=p)
        if rows is None:
            return  # waiting or exited

    def proc_got_rows(self, p):
        work = p.beh.get("work_ms", 0) or 0
        self.schedule(self.now + work, self.proc_step, p)

    def proc_step(self, p):
        if not p.alive:
            return
        self.commit(p.session)
        self.proc_receive(p)

    def proc_exit(self, p, reason):
        if not p.alive:
            return
        p.alive = False
        s = p.session
        s.waiting = None
        if s.in_tx:
            self.commit(s)
        q = p.queue
        del q.procs[p.task]
        self.ev("procedure_exited", spid=p.spid, task=p.task, reason=reason, **self.qfields(q))
        if not q.procs:
            self.trigger(q, "all procedures exited")

    # ---------------------------------------------------------------- RECEIVE
    def ready(self, s, q, where_dialog=None, where_group=None):
        out = []
        for m in q.messages:
            if m.taken_by is not None:
                continue
            lk = self.lock_holder(q, m.group)
            if lk is not None and lk is not s:
                continue
            if where_dialog is not None and m.dialog.name != where_dialog:
                continue
            if where_group is not None and m.group != where_group:
                continue
            out.append(m)
        return out

    def lock_holder(self, q, g):
        key = (self.qkey(q), g)
        for s in self.sessions.values():
            if key in s.locks:
                return s
        return None

    def group_of_dialog(self, q, dname):
        d = self.dialogs.get(dname)
        if d is None:
            return None
        # the endpoint whose service's queue is q
        if d.inst == q.inst.name and d.db == q.db.name and q.db.services.get(d.frm) == q.name:
            return d.gid_i
        return d.gid_t

    def do_receive(self, s, q, top, where_dialog, where_group_dialog, waitfor_ms, proc=None, stmt="RECEIVE"):
        has_where = where_dialog is not None or where_group_dialog is not None
        where_group = None
        if where_group_dialog is not None:
            where_group = self.group_of_dialog(q, where_group_dialog) or ("none:" + where_group_dialog)
        if stmt == "RECEIVE":
            self.end_notification(q)
        if s.in_tx and stmt == "RECEIVE" and q not in s.rb_queues:
            s.rb_queues.append(q)
        got = self.try_take(s, q, top, where_dialog, where_group, stmt)
        f = self.qfields(q)
        if got is not None:
            self.report_rows(s, q, got, has_where, stmt)
            if stmt == "RECEIVE":
                self.trigger(q, "RECEIVE")
            if proc is not None:
                self.proc_got_rows(proc)
            return got
        if waitfor_ms:
            s.waiting = {"queue": q, "top": top, "where_dialog": where_dialog, "where_group": where_group,
                         "has_where": has_where, "stmt": stmt, "until": self.now + waitfor_ms, "proc": proc,
                         "token": object()}
            self.ev("reader_waiting", session=s.name, has_where=has_where, statement=stmt, **f)
            self.schedule(self.now + waitfor_ms, self.wait_timeout, s, s.waiting["token"])
            if stmt == "RECEIVE":
                self.trigger(q, "RECEIVE")
            return None
        self.report_empty(s, q, has_where, stmt)
        if stmt == "RECEIVE":
            self.trigger(q, "RECEIVE")
        if proc is not None:
            self.proc_exit(proc, "empty RECEIVE")
        return []

    def report_empty(self, s, q, has_where, stmt):
        if not has_where:
            q.last_empty = self.now
        self.ev("empty_result", session=s.name, has_where=has_where, statement=stmt, rows=[],
                conversation_group=None, **self.qfields(q))

    def report_rows(self, s, q, got, has_where, stmt):
        if stmt == "RECEIVE":
            rows = [{"dialog": m.dialog.name, "message_sequence_number": m.seq, "conversation_group": m.group,
                     "message_body": m.body, "message_type_name": m.mtype} for m in got]
            grp = got[0].group
        else:
            rows = []
            grp = got
        self.ev("rows_returned", session=s.name, has_where=has_where, statement=stmt, rows=rows,
                conversation_group=grp, **self.qfields(q))

    def try_take(self, s, q, top, where_dialog, where_group, stmt):
        cand = self.ready(s, q, where_dialog, where_group)
        if not cand:
            return None
        g = cand[0].group
        if stmt == "GET CONVERSATION GROUP":
            if s.in_tx:
                s.locks.add((self.qkey(q), g))
                if q not in s.recv_queues:
                    s.recv_queues.append(q)
            return g
        msgs = [m for m in cand if m.group == g]
        if top is not None:
            msgs = msgs[:top]
        for m in msgs:
            if s.in_tx:
                m.taken_by = s.name
                s.taken.append((q, m))
            else:
                q.messages.remove(m)
        if s.in_tx:
            s.locks.add((self.qkey(q), g))
            if q not in s.recv_queues:
                s.recv_queues.append(q)
        return msgs

    def wait_timeout(self, s, token):
        w = s.waiting
        if not w or w["token"] is not token:
            return
        s.waiting = None
        q = w["queue"]
        self.report_empty(s, q, w["has_where"], w["stmt"])
        if w["stmt"] == "RECEIVE":
            self.trigger(q, "RECEIVE")
        if w["proc"] is not None:
            self.proc_exit(w["proc"], "empty RECEIVE")

    def serve_waiters(self, q):
        """Messages became ready on q: hand them to sessions waiting there, oldest wait first."""
        for s in list(self.sessions.values()):
            w = s.waiting
            if not w or w["queue"] is not q:
                continue
            got = self.try_take(s, q, w["top"], w["where_dialog"], w["where_group"], w["stmt"])
            if got is None:
                continue
            s.waiting = None
            self.report_rows(s, q, got, w["has_where"], w["stmt"])
            if w["stmt"] == "RECEIVE":
                self.trigger(q, "RECEIVE")
            if w["proc"] is not None:
                self.proc_got_rows(w["proc"])

    def commit(self, s):
        released = []
        for q, m in s.taken:
            if m in q.messages:
                q.messages.remove(m)
        for q in s.recv_queues:
            released.append(q)
        s.taken = []
        s.locks = set()
        s.recv_queues = []
        s.rb_queues = []
        s.in_tx = False
        self.ev("transaction_committed", session=s.name)
        for q in released:
            self.serve_waiters(q)

    def rollback(self, s):
        n = 0
        qs = list(s.recv_queues)
        rbq = list(s.rb_queues)
        s.rb_queues = []
        for q, m in s.taken:
            if m in q.messages:
                m.taken_by = None
                n += 1
        s.taken = []
        s.locks = set()
        s.recv_queues = []
        s.in_tx = False
        self.ev("transaction_rolled_back", session=s.name, returned=n)
        for q in rbq:
            self.trigger(q, "rollback")
        for q in qs:
            self.serve_waiters(q)

    # ---------------------------------------------------------------- commands: sessions
    def cmd_begin_transaction(self, c):
        s = self.session(c["session"])
        if s.in_tx:
            raise Refusal("session already in a transaction")
        s.in_tx = True
        return {}

    def cmd_commit(self, c):
        s = self.session(c["session"])
        if not s.in_tx:
            raise Refusal("COMMIT without a transaction")
        self.commit(s)
        return {}

    def cmd_rollback(self, c):
        s = self.session(c["session"])
        if not s.in_tx:
            raise Refusal("ROLLBACK without a transaction")
        self.rollback(s)
        return {}

    def cmd_receive(self, c):
        q = self.get_queue(c["queue"])
        s = self.session(c["session"])
        if s.waiting:
            raise Refusal("session is waiting")
        got = self.do_receive(s, q, c.get("top"), c.get("where_dialog"), c.get("where_group"),
                              c.get("waitfor_ms"))
        return {"rows": len(got) if got else 0}

    def cmd_get_conversation_group(self, c):
        q = self.get_queue(c["queue"])
        s = self.session(c["session"])
        if s.waiting:
            raise Refusal("session is waiting")
        self.do_receive(s, q, None, None, None, c.get("waitfor_ms"), stmt="GET CONVERSATION GROUP")
        return {}

    def cmd_alter_queue(self, c):
        q = self.get_queue(c["queue"])
        if c.get("status") is not None:
            q.status = c["status"]
        if c.get("procedure_name") is not None:
            q.procedure_name = c["procedure_name"]
        if c.get("max_queue_readers") is not None:
            q.max_readers = c["max_queue_readers"]
        self.ev("queue_altered", **self.qfields(q))
        self.update_monitor(q)
        self.trigger(q, "ALTER QUEUE")
        return {}

    def update_monitor(self, q):
        want = q.has_monitor_cond()
        if want and not q.monitor:
            q.monitor = True
            self.ev("monitor_created", **self.qfields(q))
        elif not want and q.monitor:
            q.monitor = False
            q.notified_until = None
            self.ev("monitor_removed", **self.qfields(q))

    def cmd_create_event_notification(self, c):
        q = self.get_queue(c["queue"])
        if c["name"] in q.ens:
            raise Refusal("event notification exists")
        q.ens.append(c["name"])
        self.update_monitor(q)
        return {}

    def cmd_drop_event_notification(self, c):
        q = self.get_queue(c["queue"])
        if c["name"] not in q.ens:
            raise Refusal("no such event notification")
        q.ens.remove(c["name"])
        if not q.ens:
            q.notified_until = None
        self.update_monitor(q)
        return {}

    def cmd_exit_procedure(self, c):
        q = self.get_queue(c["queue"])
        p = q.procs.get(c["task"])
        if p is None:
            raise Refusal("no running task %s" % c["task"])
        self.proc_exit(p, "exited")
        return {}

    def cmd_advance_time(self, c):
        return {}

    # ---------------------------------------------------------------- dialogs
    def cmd_begin_dialog(self, c):
        if c["dialog"] in self.dialogs:
            raise Refusal("dialog exists")
        db = self.get_db(c["instance"], c["database"])
        if c["from_service"] not in db.services:
            raise Refusal("no service %r" % c["from_service"])
        d = Dialog(c["dialog"], c["instance"], c["database"], c["from_service"], c["to_service"],
                   c.get("to_broker_instance"))
        d.gid_i = self.new_gid()
        self.dialogs[d.name] = d
        self.ev("dialog_begun", instance=d.inst, database=d.db, dialog=d.name, from_service=d.frm,
                to_service=d.to, to_broker_instance=d.tbi)
        return {}

    def cmd_send(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refusal("no dialog %r has been begun" % c["dialog"])
        ft = bool(c.get("from_target"))
        if ft and d.target is None:
            raise Refusal("the target has not received the dialog")
        seq = d.seq[ft]
        d.seq[ft] += 1
        m = Msg(d, seq, ft, c.get("body"), c.get("message_type") or "DEFAULT")
        if ft:
            iname, dbname = d.target
        else:
            iname, dbname = d.inst, d.db
        self.ev("message_sent", instance=iname, database=dbname, dialog=d.name, from_target=ft,
                message_sequence_number=seq)
        inst = self.inst[iname]
        # a message behind an earlier waiting one of its conversation waits behind it
        ahead = self.waiting_ahead(inst, d, ft)
        if ahead is not None:
            p = Pending(m, True, dbname, self.now, "behind")
            inst.tq.append(p)
            self.ev("transmission_pending", instance=inst.name, dialog=d.name, from_target=ft,
                    message_sequence_number=seq, status="waiting behind an earlier message", address=None)
            return {"message_sequence_number": seq}
        self.route(inst, m, True, dbname, None)
        return {"message_sequence_number": seq}

    def waiting_ahead(self, inst, d, ft):
        for p in inst.tq:
            if p.msg.dialog is d and p.msg.from_target == ft:
                return p
        return None

    def msg_bi(self, m):
        d = m.dialog
        if m.from_target:
            return self.inst[d.inst].dbs[d.db].bi
        return d.acked_bi or d.tbi

    def msg_service(self, m):
        return m.dialog.frm if m.from_target else m.dialog.to

    def mfields(self, m):
        return {"dialog": m.dialog.name, "from_target": m.from_target, "message_sequence_number": m.seq}

    # ---------------------------------------------------------------- routing
    def serving_dbs(self, inst):
        return [db for db in inst.dbs.values() if db.broker_started and db.role != "mirror"]

    def inst_has_service(self, inst, svc):
        return any(svc in db.services for db in self.serving_dbs(inst))

    def match(self, inst, m, inside, dbname):
        """Returns (step, routes, table_name). routes: list of Route (or 'LOCAL*' marker)."""
        if inside:
            table = inst.dbs[dbname].routes
            tname = "%s.sys.routes" % dbname
        else:
            table = inst.msdb_routes
            tname = "msdb.sys.routes"
        live = [r for r in table if not r.expired(self.now)]
        svc = self.msg_service(m)
        bi = self.msg_bi(m)

        def bieq(a, b):
            return a is not None and b is not None and a.lower() == b.lower()

        if bi:
            rs = [r for r in live if r.service_name == svc and bieq(r.broker_instance, bi)]
            if rs:
                return "RTM-1", rs, tname, None
        rs = [r for r in live if r.broker_instance is None and r.service_name == svc]
        if rs:
            return "RTM-2", rs, tname, None
        if not bi:
            rs = [r for r in live if r.service_name == svc and r.broker_instance is not None]
            if rs:
                pick = rs[0].broker_instance
                rs = [r for r in rs if bieq(r.broker_instance, pick)]
                return "RTM-3", rs, tname, pick
        for r in live:
            if r.service_name == BCN_SERVICE:
                key = (inst.name, tname, r.name, svc)
                if key not in inst.pending_requests:
                    inst.pending_requests.add(key)
                    return "RTM-4", [r], tname, None
        rs = [r for r in live if r.service_name is None and r.broker_instance is None]
        if rs:
            return "RTM-5", rs, tname, None
        if bi and self.inst_has_service(inst, svc):
            return "RTM-6", ["(as if LOCAL)"], tname, None
        return "RTM-7", [], tname, None

    def route(self, inst, m, inside, dbname, pending):
        """Route message m at inst. inside: from a database of this instance (its table)."""
        if pending is not None:
            pending.retry_token = None  # a delayed time-out belongs to the wait it was set for
            pending.last_routed = self.now
        step, routes, tname, pickbi = self.match(inst, m, inside, dbname)
        mf = self.mfields(m)
        names = []
        for r in routes:
            names.append(r if isinstance(r, str) else r.name)
        tf = {"routes": [] if step in ("RTM-4", "RTM-7") else names, "step": step, "table": tname}
        if step == "RTM-3":
            tf["broker_instance"] = (pickbi or "").upper()
        else:
            tf["broker_instance"] = None
        self.trace("routes_matched", instance=inst.name, **tf, **mf)
        if step == "RTM-4":
            r = routes[0]
            self.ev("routing_requested", instance=inst.name, route=r.name, service=self.msg_service(m),
                    table=tname, **mf)
            self.delay(inst, m, inside, dbname, pending, "RTM-4")
            return
        if step == "RTM-7":
            self.delay(inst, m, inside, dbname, pending, "RTM-7")
            return
        if step == "RTM-6":
            self.trace("route_chosen", instance=inst.name, step="RTC-2", route="(as if LOCAL)",
                       candidates=["(as if LOCAL)"], **mf)
            self.deliver_local(inst, m, inside, dbname, None, pending)
            return
        # choosing
        distinct = []
        seen = set()
        for r in routes:
            k = ((r.broker_instance or "").lower(), r.service_name, norm_addr(r.address))
            if k in seen:
                continue
            seen.add(k)
            distinct.append(r)
        svc = self.msg_service(m)
        chosen = None
        cstep = None
        cands = []
        mir = [r for r in distinct if r.mirror_address]
        if mir:
            chosen, cstep, cands = mir[0], "RTC-1", mir
        else:
            loc = [r for r in distinct if r.addr_kind() == "LOCAL"]
            if loc and self.inst_has_service(inst, svc):
                chosen, cstep, cands = loc[0], "RTC-2", loc
            else:
                net = [r for r in distinct if r.addr_kind() == "NET"]
                if net:
                    chosen, cstep, cands = net[0], "RTC-3", net
                else:
                    tr = [r for r in distinct if r.addr_kind() == "TRANSPORT"]
                    if tr:
                        chosen, cstep, cands = tr[0], "RTC-4", tr
        if chosen is None:
            self.delay(inst, m, inside, dbname, pending, "RTC-4")
            return
        self.trace("route_chosen", instance=inst.name, step=cstep, route=chosen.name,
                   candidates=[r.name for r in cands], **mf)
        kind = chosen.addr_kind()
        if kind == "LOCAL" and not chosen.mirror_address:
            self.deliver_local(inst, m, inside, dbname, chosen, pending)
            return
        if not inside and not inst.forwarding:
            self.drop(inst, m, "forwarding not active", "RTC-5", pending)
            return
        if chosen.mirror_address:
            self.send_mirrored(inst, m, inside, dbname, chosen, tname, pending)
            return
        if kind == "TRANSPORT":
            addr = transport_addr(svc)
            if addr is None:
                self.delay(inst, m, inside, dbname, pending, "RTC-4")
                return
        else:
            addr = chosen.address
        self.send_or_forward(inst, m, inside, dbname, addr, pending)

    def drop(self, inst, m, reason, rule, pending):
        self.remove_pending(inst, pending)
        f = {"reason": reason}
        if not NO_TRACE:
            f["rule"] = rule
        self.ev("message_dropped", instance=inst.name, **f, **self.mfields(m))
        self.release_behind(inst, m)

    def remove_pending(self, inst, pending):
        if pending is not None:
            if pending in inst.tq:
                inst.tq.remove(pending)
            if pending in inst.forwarder:
                inst.forwarder.remove(pending)

    def wait_here(self, inst, m, inside, dbname, pending, why, status, address=None):
        if pending is None:
            pending = Pending(m, inside, dbname, self.now, why, address)
            (inst.tq if inside else inst.forwarder).append(pending)
        else:
            pending.why = why
            pending.address = address
        self.ev("transmission_pending", instance=inst.name, status=status, address=address,
                **self.mfields(m))
        return pending

    def delay(self, inst, m, inside, dbname, pending, step):
        p = self.wait_here(inst, m, inside, dbname, pending, "delayed", "delayed: no route")
        f = {}
        if not NO_TRACE:
            f["step"] = step
        self.ev("conversation_delayed", instance=inst.name, **f, **self.mfields(m))
        tok = object()
        p.retry_token = tok
        self.schedule(self.now + RETRY_MS, self.retry, inst, p, tok)

    def retry(self, inst, p, tok):
        if getattr(p, "retry_token", None) is not tok:
            return
        if p not in inst.tq and p not in inst.forwarder:
            return
        self.ev("routing_retried", instance=inst.name, **self.mfields(p.msg))
        p.retried_at = self.now
        self.reroute(inst, p)

    def reroute(self, inst, p):
        p.retry_token = None
        self.route(inst, p.msg, p.inside, p.db, p)

    def deliver_local(self, inst, m, inside, dbname, route, pending):
        svc = self.msg_service(m)
        bi = self.msg_bi(m) or (route.broker_instance if route is not None else None)
        target_db = None
        if bi:
            for db in self.serving_dbs(inst):
                if db.bi.lower() == bi.lower():
                    target_db = db
                    break
            if target_db is None or svc not in target_db.services:
                self.drop(inst, m, "no database of the broker instance here", "RTL-2", pending)
                return
        else:
            order = []
            if inside and dbname in inst.dbs:
                order.append(inst.dbs[dbname])
            order += [db for db in inst.dbs.values() if db not in order]
            for db in order:
                if db.broker_started and db.role != "mirror" and svc in db.services:
                    target_db = db
                    break
            if target_db is None:
                self.delay(inst, m, inside, dbname, pending, "RTC-4")
                return
        self.remove_pending(inst, pending)
        if inside:
            self.enqueue(inst, target_db, m)
        else:
            self.dispatch(inst, target_db, m)
        self.release_behind(inst, m)

    def enqueue(self, inst, db, m):
        d = m.dialog
        key = (d.name, m.from_target)
        db.next_expected[key] = max(db.next_expected.get(key, 0), m.seq + 1)
        svc = self.msg_service(m)
        qname = db.services[svc]
        q = db.queues[qname]
        if not m.from_target:
            if d.target is None:
                d.target = (inst.name, db.name)
                d.gid_t = self.new_gid()
            m.group = d.gid_t
        else:
            m.group = d.gid_i
        m.had_unread_before = bool(self.unread(q))
        m.arrived_at = self.now
        q.messages.append(m)
        self.ev("message_arrived", instance=inst.name, database=db.name, queue=q.name, service=svc,
                conversation_group=m.group, **self.mfields(m))
        if not m.from_target and d.acked_bi is None:
            d.acked_bi = db.bi
            self.ev("acknowledged", instance=d.inst, dialog=d.name, broker_instance=db.bi)
        had_waiter = self.any_waiters(q)
        if had_waiter:
            # the reference looks at the waiting reader's RECEIVE first, then at the arrival
            self.serve_waiters(q)
        self.trigger(q, "message arrived", m)

    # ---------------------------------------------------------------- dispatcher
    def dispatch(self, inst, db, m):
        key = (m.dialog.name, m.from_target)
        exp = db.next_expected.get(key, 0)
        # drop a copy it holds or has saved
        if m.seq < exp or any(b["msg"].dialog is m.dialog and b["msg"].seq == m.seq and
                              b["msg"].from_target == m.from_target for b in inst.dispatcher):
            return
        entry = {"msg": m, "db": db, "arrived": self.now}
        inst.dispatcher.append(entry)
        self.ev("dispatcher_buffered", instance=inst.name, database=db.name, **self.mfields(m))
        self.dispatcher_save(inst)

    def dispatcher_save(self, inst):
        if inst.saving_mode != "running":
            return
        if inst.saving_delay:
            for e in inst.dispatcher:
                if "save_at" not in e:
                    e["save_at"] = int(e["arrived"] + inst.saving_delay * 1000)
                    self.schedule(e["save_at"], self.dispatcher_save_due, inst)
        progress = True
        while progress:
            progress = False
            for e in list(inst.dispatcher):
                if inst.saving_delay and e.get("save_at", 0) > self.now:
                    continue
                m = e["msg"]
                db = e["db"]
                key = (m.dialog.name, m.from_target)
                if m.seq == db.next_expected.get(key, 0):
                    inst.dispatcher.remove(e)
                    self.enqueue(inst, db, m)
                    progress = True

    def dispatcher_save_due(self, inst):
        self.dispatcher_save(inst)

    def dispatcher_cleanup(self, inst):
        verdicts = []
        for e in list(inst.dispatcher):
            m = e["msg"]
            db = e["db"]
            key = (m.dialog.name, m.from_target)
            exp = db.next_expected.get(key, 0)
            # out of order: not next in line, with no earlier one buffered to fill the gap
            inline = m.seq == exp or all(
                any(x["msg"].dialog is m.dialog and x["msg"].from_target == m.from_target and x["msg"].seq == s
                    for x in inst.dispatcher) for s in range(exp, m.seq))
            if not inline:
                verdicts.append((e, "out of order"))
            elif self.now - e["arrived"] >= STALE_DISPATCH_MS:
                verdicts.append((e, "stale"))
        for e, why in verdicts:
            inst.dispatcher.remove(e)
            self.ev("dispatcher_deleted", instance=inst.name, database=e["db"].name, reason=why,
                    **self.mfields(e["msg"]))

    def cmd_set_dispatcher_saving(self, c):
        inst = self.get_inst(c["instance"])
        inst.saving_mode = c["mode"]
        inst.saving_delay = c.get("delay_s") or 0
        for e in inst.dispatcher:
            e.pop("save_at", None)
        self.dispatcher_save(inst)
        return {}

    # ---------------------------------------------------------------- transport
    def suppressed(self, inst, addr):
        u = inst.suppressed.get(norm_addr(addr))
        return u is not None and self.now < u

    def connect(self, inst, addr):
        """Try to open a connection; True when open."""
        key = norm_addr(addr)
        if key in inst.connections:
            dest = self.inst_by_addr(addr)
            if dest is not None and dest.reachable:
                return True
            # found broken when next used
            del inst.connections[key]
            self.ev("connection_closed", instance=inst.name, address=addr, reason="disconnected")
            inst.suppressed[key] = self.now + SUPPRESS_DISC_MS
            return False
        if self.suppressed(inst, addr):
            return False
        dest = self.inst_by_addr(addr)
        if dest is None or not dest.reachable:
            self.ev("connection_attempt", instance=inst.name, address=addr, result="refused")
            inst.suppressed[key] = self.now + SUPPRESS_FAIL_MS
            return False
        self.ev("connection_attempt", instance=inst.name, address=addr, result="connected")
        inst.connections[key] = {"address": addr, "opened": self.now, "last": self.now}
        return True

    def send_to(self, inst, m, inside, dbname, addr, pending, mirrored=None):
        dest = self.inst_by_addr(addr)
        if dest is inst:
            # RTX-2: the address resolves to this instance: treated as arriving from outside
            self.remove_pending(inst, pending)
            self.arrive_from_outside(inst, m, None)
            return
        if m.dialog.name in inst.failed:
            self.wait_here(inst, m, inside, dbname, pending, "failed",
                           "transmission failed, waiting for %s" % addr, addr)
            return
        if not self.connect(inst, addr):
            p = self.wait_here(inst, m, inside, dbname, pending, "connection",
                               "waiting for a connection to %s" % addr, addr)
            p.mirrored = mirrored
            return
        self.remove_pending(inst, pending)
        self.transmit(inst, m, addr, inside)

    def transmit(self, inst, m, addr, inside):
        key = norm_addr(addr)
        conn = inst.connections[key]
        conn["last"] = self.now
        dest = self.inst_by_addr(addr)
        if not inside:
            pass
        self.ev("message_transmitted", instance=inst.name, address=addr, to_instance=dest.name if dest else None,
                **self.mfields(m))
        lk = (m.seq, m.from_target)
        lose = m.dialog.lose.get(lk)
        if lose:
            if lose == "once":
                del m.dialog.lose[lk]
            self.ev("message_lost_in_transit", instance=inst.name, address=addr, **self.mfields(m))
            self.release_behind(inst, m)
            return
        self.release_behind(inst, m)
        if dest is not None:
            dest.connections.get(norm_addr(inst.address))
            self.arrive_from_outside(dest, m, inst)

    def release_behind(self, inst, m):
        """An earlier message went on: route the ones waiting behind it at once."""
        for p in list(inst.tq):
            if p.why == "behind" and p.msg.dialog is m.dialog and p.msg.from_target == m.from_target:
                if self.waiting_ahead_other(inst, p):
                    continue
                self.route(inst, p.msg, p.inside, p.db, p)
                return

    def waiting_ahead_other(self, inst, p):
        for o in inst.tq:
            if o is p:
                return False
            if o.msg.dialog is p.msg.dialog and o.msg.from_target == p.msg.from_target and o.why != "behind":
                return True
        return False

    def arrive_from_outside(self, inst, m, frm):
        m.hops_seen = m.hops
        if m.from_target:
            bi = self.msg_bi(m)
            for db in self.serving_dbs(inst):
                if bi and db.bi.lower() == bi.lower():
                    self.ev("reply_recognised", instance=inst.name, broker_instance=db.bi, **self.mfields(m))
                    self.dispatch(inst, db, m)
                    return
        self.route(inst, m, False, None, None)

    def transport_connect(self, inst):
        addrs = []
        for p in inst.tq + inst.forwarder:
            if p.why == "connection" and p.address and norm_addr(p.address) not in [norm_addr(a) for a in addrs]:
                addrs.append(p.address)
        for a in addrs:
            if self.suppressed(inst, a):
                continue
            if self.connect(inst, a):
                for p in list(inst.tq + inst.forwarder):
                    if p.why == "connection" and norm_addr(p.address) == norm_addr(a):
                        if p not in inst.tq and p not in inst.forwarder:
                            continue
                        self.remove_pending(inst, p)
                        if p.inside:
                            self.transmit(inst, p.msg, p.address, True)
                        else:
                            self.forward_out(inst, p.msg, p.address, None, already=True)
        # mirrored routes waiting for a principal: ask both addresses again
        for p in list(inst.tq + inst.forwarder):
            if p.why == "principal" and (p in inst.tq or p in inst.forwarder):
                self.route(inst, p.msg, p.inside, p.db, p)

    # ---------------------------------------------------------------- forwarding
    def forward_out(self, inst, m, addr, pending, already=False):
        if not already:
            m.hops += 1
            if m.hops > HOP_LIMIT:
                self.drop(inst, m, "hop limit", "RTX-1", pending)
                return
        if self.connect(inst, addr):
            self.remove_pending(inst, pending)
            if not already:
                self.ev("message_forwarded", instance=inst.name, address=addr, hops=m.hops, **self.mfields(m))
            self.transmit(inst, m, addr, False)
        else:
            p = self.wait_here(inst, m, False, None, pending, "connection",
                               "waiting for a connection to %s" % addr, addr)
            if not already:
                self.ev("message_forwarded", instance=inst.name, address=addr, hops=m.hops, **self.mfields(m))

    def cmd_set_message_forwarding(self, c):
        inst = self.get_inst(c["instance"])
        inst.forwarding = bool(c["active"])
        return {}

    # ---------------------------------------------------------------- mirroring
    def probe_db_bi(self, route, m):
        return route.broker_instance or self.msg_bi(m)

    def probe(self, inst, m, route, addr):
        dest = self.inst_by_addr(addr)
        if dest is None or not dest.reachable:
            return "unreachable"
        bi = self.probe_db_bi(route, m)
        svc = self.msg_service(m)
        for db in dest.dbs.values():
            if bi:
                if db.bi.lower() == bi.lower() and db.role != "mirror":
                    return "principal"
            elif svc in db.services and db.role != "mirror":
                return "principal"
        return "not principal"

    def send_mirrored(self, inst, m, inside, dbname, route, tname, pending):
        mf = self.mfields(m)
        pair = [route.address, route.mirror_address]
        if route.principal is not None:
            ans = self.probe(inst, m, route, route.principal)
            if ans == "principal":
                self.send_or_forward(inst, m, inside, dbname, route.principal, pending)
                return
            self.ev("principal_lost", instance=inst.name, route=route.name, address=route.principal,
                    answer=ans, **mf)
            other = pair[1] if norm_addr(route.principal) == norm_addr(pair[0]) else pair[0]
            ans2 = self.probe(inst, m, route, other)
            self.ev("principal_probe", instance=inst.name, route=route.name, address=other, answer=ans2, **mf)
            if ans2 == "principal":
                route.principal = other
                self.send_or_forward(inst, m, inside, dbname, other, pending)
                return
            route.principal = None
            self.wait_here(inst, m, inside, dbname, pending, "principal", "waiting for the principal")
            return
        found = None
        for a in pair:
            ans = self.probe(inst, m, route, a)
            self.ev("principal_probe", instance=inst.name, route=route.name, address=a, answer=ans, **mf)
            if ans == "principal" and found is None:
                found = a
        if found is None:
            self.wait_here(inst, m, inside, dbname, pending, "principal", "waiting for the principal")
            return
        route.principal = found
        self.send_or_forward(inst, m, inside, dbname, found, pending)

    def send_or_forward(self, inst, m, inside, dbname, addr, pending):
        if inside:
            self.send_to(inst, m, inside, dbname, addr, pending)
        else:
            dest = self.inst_by_addr(addr)
            if dest is inst:
                self.remove_pending(inst, pending)
                self.arrive_from_outside(inst, m, None)
                return
            self.forward_out(inst, m, addr, pending)

    def cmd_failover(self, c):
        db = self.get_db(c["instance"], c["database"])
        for inst in self.inst.values():
            for o in inst.dbs.values():
                if o is not db and o.bi and o.bi.lower() == db.bi.lower() and o.role in ("principal", "mirror"):
                    o.role = "mirror"
        db.role = "principal"
        for inst in self.inst.values():
            self.redeliver_waiting(inst)
        return {}

    def redeliver_waiting(self, inst):
        pass

    # ---------------------------------------------------------------- route commands
    def table_of(self, c):
        inst = self.get_inst(c["instance"])
        if c.get("database") is None:
            return inst, inst.msdb_routes, None
        db = inst.dbs.get(c["database"])
        if db is None:
            raise Refusal("no database %r" % c["database"])
        return inst, db.routes, db.name

    def check_addr(self, a):
        if a is None:
            return
        if a.upper() in ("LOCAL", "TRANSPORT"):
            return
        if not is_net(a):
            raise Refusal("malformed address %r" % a)

    def touch(self, inst, services):
        for p in inst.tq + inst.forwarder:
            svc = self.msg_service(p.msg)
            if None in services or svc in services:
                inst.touched.add(p.msg.dialog.name)

    def cmd_create_route(self, c):
        inst, table, dbn = self.table_of(c)
        r = c["route"]
        if any(x.name == r["name"] for x in table):
            raise Refusal("route exists")
        self.check_addr(r.get("address"))
        self.check_addr(r.get("mirror_address"))
        route = Route(r, self.now)
        table.append(route)
        self.ev("route_created", instance=inst.name, database=dbn or "msdb", route=route.name)
        self.touch(inst, {route.service_name})
        return {}

    def cmd_alter_route(self, c):
        inst, table, dbn = self.table_of(c)
        r = c["route"]
        route = next((x for x in table if x.name == r["name"]), None)
        if route is None:
            raise Refusal("no route %r" % r["name"])
        self.check_addr(r.get("address"))
        self.check_addr(r.get("mirror_address"))
        before = route.service_name
        for k in ("service_name", "broker_instance", "address", "mirror_address"):
            if r.get(k) is not None:
                setattr(route, k, r[k])
        if r.get("lifetime_s") is not None:
            route.expires_ms = int(self.now + r["lifetime_s"] * 1000)
        if route.principal is not None and norm_addr(route.principal) not in (
                norm_addr(route.address), norm_addr(route.mirror_address)):
            route.principal = None
        self.ev("route_altered", instance=inst.name, database=dbn or "msdb", route=route.name)
        self.touch(inst, {before, route.service_name})
        return {}

    def cmd_drop_route(self, c):
        inst, table, dbn = self.table_of(c)
        route = next((x for x in table if x.name == c["name"]), None)
        if route is None:
            raise Refusal("no route %r" % c["name"])
        table.remove(route)
        self.ev("route_dropped", instance=inst.name, database=dbn or "msdb", route=route.name)
        self.touch(inst, {route.service_name})
        return {}

    def cmd_answer_routing_request(self, c):
        inst, table, dbn = self.table_of(c)
        r = c["route"]
        tname = "msdb.sys.routes" if dbn is None else "%s.sys.routes" % dbn
        svc = r.get("service_name")
        for key in list(inst.pending_requests):
            if key[1] == tname and key[3] == svc:
                inst.pending_requests.discard(key)
        existing = next((x for x in table if x.name == r["name"]), None)
        if existing is not None:
            table.remove(existing)
        route = Route(r, self.now)
        table.append(route)
        self.ev("route_created", instance=inst.name, database=dbn or "msdb", route=route.name)
        self.touch(inst, {route.service_name})
        return {}

    # ---------------------------------------------------------------- transmitter
    def reclassify_all(self, insts):
        for inst in insts:
            self.reclassify(inst)
        self.last_reclass = self.now

    def reclassify(self, inst):
        names = []
        seen = set()
        firsts = []
        for p in inst.tq + inst.forwarder:
            k = (p.msg.dialog.name, p.msg.from_target)
            if k in seen:
                continue
            seen.add(k)
            firsts.append(p)
        any_expired = False
        for r in inst.msdb_routes + [r for db in inst.dbs.values() for r in db.routes]:
            if r.expires_ms is not None and self.last_reclass < r.expires_ms <= self.now:
                any_expired = True
        for p in firsts:
            dn = p.msg.dialog.name
            touched = dn in inst.touched or dn in inst.failed
            # a dialog a route expiry alone would reclassify, already routed again at this instant
            # (a principal retry), is left out: PER-2B lets the transmitter pick "all or selected dialogs"
            expired = any_expired and getattr(p, "last_routed", None) != self.now
            if touched or expired:
                if dn not in names:
                    names.append(dn)
        self.trace("transmitter_reclassified", instance=inst.name, dialogs=list(names))
        inst.touched = set()
        for dn in names:
            inst.failed.discard(dn)
        for p in firsts:
            if p.msg.dialog.name in names and (p in inst.tq or p in inst.forwarder):
                if p.why == "behind" or getattr(p, "retried_at", None) == self.now:
                    continue  # its own delayed time-out routed it at this instant already
                self.route(inst, p.msg, p.inside, p.db, p)

    def cmd_fail_transmission(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refusal("no dialog")
        self.inst[d.inst].failed.add(d.name)
        if d.target:
            self.inst[d.target[0]].failed.add(d.name)
        return {}

    # ---------------------------------------------------------------- faults
    def cmd_set_reachable(self, c):
        inst = self.get_inst(c["instance"])
        inst.reachable = bool(c["reachable"])
        return {}

    def cmd_fail_task_handlers(self, c):
        inst = self.get_inst(c["instance"])
        inst.running_handlers = max(0, inst.running_handlers - c["count"])
        return {}

    def cmd_lose_in_transit(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refusal("no dialog")
        d.lose[(c["sequence"], bool(c.get("from_target")))] = "every" if c.get("every") else "once"
        return {}

    def cmd_drop_connection(self, c):
        inst = self.get_inst(c["instance"])
        key = norm_addr(c["address"])
        conn = inst.connections.pop(key, None)
        if conn is not None:
            self.ev("connection_closed", instance=inst.name, address=conn["address"], reason="disconnected")
            inst.suppressed[key] = self.now + SUPPRESS_DISC_MS
        return {}

    def cmd_create_master_key(self, c):
        db = self.get_db(c["instance"], c["database"])
        db.master_key = True
        return {}

    def cmd_stop_ack_cleanup(self, c):
        db = self.get_db(c["instance"], c["database"])
        db.ack_cleanup = False
        return {}

    # ---------------------------------------------------------------- views
    def cmd_query_view(self, c):
        v = c["view"]
        iname = c.get("instance")
        rows = []
        insts = list(self.inst.values())
        if v == "sys.dm_broker_queue_monitors":
            for inst in insts:
                for db in inst.dbs.values():
                    for q in db.queues.values():
                        if not q.monitor:
                            continue
                        if q.notified_until is not None:
                            st = "NOTIFIED"
                        elif q.procs or self.any_waiters(q):
                            st = "RECEIVES_OCCURRING"
                        else:
                            st = "INACTIVE"
                        rows.append({"database_id": db.did, "queue_id": q.qid, "instance": inst.name,
                                     "database": db.name, "queue": q.name, "state": st,
                                     "last_empty_rowset_time": q.last_empty,
                                     "last_activated_time": q.last_activated,
                                     "tasks_waiting": self.waiting_readers(q)})
        elif v == "sys.dm_broker_activated_tasks":
            for inst in insts:
                for db in inst.dbs.values():
                    for q in db.queues.values():
                        for t, p in sorted(q.procs.items()):
                            rows.append({"spid": p.spid, "database_id": db.did, "queue_id": q.qid,
                                         "instance": inst.name, "database": db.name, "queue": q.name,
                                         "task": t, "procedure_name": p.beh.get("name") or q.procedure_name})
        elif v == "sys.routes":
            inst = self.get_inst(iname)
            if c.get("database") is None:
                table, dbn = inst.msdb_routes, "msdb"
            else:
                table, dbn = self.get_db(iname, c["database"]).routes, c["database"]
            for r in table:
                rows.append({"instance": inst.name, "database": dbn, "name": r.name,
                             "remote_service_name": r.service_name, "broker_instance": r.broker_instance,
                             "address": r.address, "mirror_address": r.mirror_address,
                             "expires_ms": r.expires_ms})
        elif v == "sys.transmission_queue":
            for inst in insts:
                if iname and inst.name != iname:
                    continue
                for p in inst.tq:
                    m = p.msg
                    rows.append({"instance": inst.name, "dialog": m.dialog.name,
                                 "message_sequence_number": m.seq, "from_target": m.from_target,
                                 "to_service_name": self.msg_service(m),
                                 "transmission_status": self.status_text(p), "received_ms": p.received})
        elif v == "sbtck.forwarder":
            for inst in insts:
                if iname and inst.name != iname:
                    continue
                for p in inst.forwarder:
                    m = p.msg
                    rows.append({"instance": inst.name, "dialog": m.dialog.name,
                                 "message_sequence_number": m.seq, "from_target": m.from_target,
                                 "to_service_name": self.msg_service(m),
                                 "transmission_status": self.status_text(p), "received_ms": p.received})
        elif v == "sys.conversation_endpoints":
            for d in self.dialogs.values():
                rows.append({"dialog": d.name, "instance": d.inst, "database": d.db, "far_service": d.to,
                             "far_broker_instance": d.acked_bi or d.tbi, "acknowledged": d.acked_bi is not None})
        elif v == "sys.dm_broker_connections":
            for inst in insts:
                if iname and inst.name != iname:
                    continue
                for conn in inst.connections.values():
                    rows.append({"instance": inst.name, "address": conn["address"], "state": "CONNECTED",
                                 "opened_ms": conn["opened"], "last_activity_ms": conn["last"]})
        elif v == "sbtck.dispatcher_buffers":
            for inst in insts:
                if iname and inst.name != iname:
                    continue
                for e in inst.dispatcher:
                    m = e["msg"]
                    rows.append({"instance": inst.name, "database": e["db"].name, "dialog": m.dialog.name,
                                 "message_sequence_number": m.seq, "from_target": m.from_target,
                                 "arrived_ms": e["arrived"]})
        elif v == "sbtck.periodic_state":
            for inst in insts:
                if iname and inst.name != iname:
                    continue
                for db in inst.dbs.values():
                    rows.append({"instance": inst.name, "task_handlers": inst.handlers,
                                 "running_task_handlers": inst.running_handlers, "database": db.name,
                                 "broker_started": db.broker_started, "ack_cleanup_running": db.ack_cleanup})
        else:
            raise Refusal("unknown view %r" % v)
        return {"rows": rows}

    def status_text(self, p):
        if p.why == "connection":
            return "waiting for a connection to %s" % p.address
        if p.why == "failed":
            return "transmission failed (%s)" % (p.address or "")
        if p.why == "principal":
            return "waiting for the mirroring principal"
        if p.why == "behind":
            return "waiting behind an earlier message of the conversation"
        return "delayed: no route"

    # ---------------------------------------------------------------- dispatch
    def execute(self, c):
        kind = c["kind"]
        at = c["at_ms"]
        fn = getattr(self, "cmd_" + kind, None)
        if fn is None:
            raise Refusal("unknown command %r" % kind)
        if kind == "start":
            self.events = []
            res = fn(c)
            self.settle()
            return res
        self.run_until(at)
        res = fn(c)
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
        except ValueError:
            continue
        rid = req.get("id")
        op = req.get("op")
        if op == "hello":
            resp = {"id": rid, "ok": True, "result": {"name": "cr14 broker", "version": "0.1", "protocol": PROTOCOL,
                                                      "capabilities": CAPS, "params": PARAMS}}
        elif op == "bye":
            out.write(json.dumps({"id": rid, "ok": True}) + "\n")
            out.flush()
            return
        elif op == "execute":
            b.events = []
            try:
                res = b.execute(req["command"])
                resp = {"id": rid, "ok": True, "result": res or {}, "events": b.events}
            except Refusal as e:
                resp = {"id": rid, "ok": False, "error": str(e), "events": b.events}
            except Exception as e:  # a bug of ours
                traceback.print_exc(file=sys.stderr)
                resp = {"id": rid, "ok": False, "fault": True, "error": "%s: %s" % (type(e).__name__, e),
                        "events": []}
            b.events = []
        else:
            resp = {"id": rid, "ok": False, "error": "unknown op %r" % op}
        out.write(json.dumps(resp) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
