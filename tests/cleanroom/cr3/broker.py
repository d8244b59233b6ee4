#!/usr/bin/env python3
"""cleanroom6: a Service Broker model speaking the sbtck protocol (2.2) on stdio.

Written from the source documents (shared/spec) and the kit's docs only.
"""
import heapq
import json
import os
import sys
import traceback

PARAMS = {
    "activation_empty_window_s": 3,
    "external_activation_timeout_s": 8,
    "delayed_retry_s": 7,
    "forward_hop_limit": 4,
}
TRACE = os.environ.get("SBTCK_CR6_NO_TRACE") != "1"
CAPS = ["activation", "external_activation", "routing", "mirroring", "forwarding",
        "dynamic_routing", "periodic_tasks"] + (["decision_trace"] if TRACE else [])
DYN_SVC = "http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice"
TIMER_MS = 5000
ARRIVAL_BEHIND = os.environ.get("SBTCK_CR6_ARRIVAL_BEHIND", "1") == "1"
# "origin": a SEND is held behind any waiting message of its conversation at the instance;
# "tq": only behind one waiting in the transmission queue (an RTX-2 loop then waits behind at arrival)
HOLD_MODE = os.environ.get("SBTCK_CR6_HOLD_MODE", "origin")
# a SEND is held at its origin while an earlier message of its conversation waits at another instance
HOLD_ELSEWHERE = os.environ.get("SBTCK_CR6_HOLD_ELSEWHERE", "1") == "1"
# experiment only (off): a message buffered before the saving resumed is saved delay_s after the resume
RESUME_DELAY = os.environ.get("SBTCK_CR6_RESUME_DELAY") == "1"
FIFO = os.environ.get("SBTCK_CR6_FIFO", "1") == "1"
RETRY_PRIO = int(os.environ.get("SBTCK_CR6_RETRY_PRIO", "2"))
# a WAITFOR that ends at the instant a procedure step or a save falls on is served first ("up to N seconds")
WAIT_PRIO = int(os.environ.get("SBTCK_CR6_WAIT_PRIO", "6"))
LOG = os.environ.get("SBTCK_CR6_LOG")


class Refused(Exception):
    pass


def up(s):
    return s.upper() if isinstance(s, str) else s


class Route:
    def __init__(self, d, now, order):
        self.name = d.get("name")
        self.service_name = d.get("service_name")
        self.broker_instance = d.get("broker_instance")
        self.address = d.get("address") or "LOCAL"
        self.mirror_address = d.get("mirror_address")
        lt = d.get("lifetime_s")
        self.expires = None if lt is None else now + int(round(lt * 1000))
        self.order = order
        # mirroring state
        self.principal = None  # address believed principal
        self.probing = False

    def kind(self):
        a = up(self.address)
        if a == "LOCAL":
            return "LOCAL"
        if a == "TRANSPORT":
            return "TRANSPORT"
        return "NET"


class Queue:
    def __init__(self, db, d, qid):
        self.db = db
        self.name = d["name"]
        act = d.get("activation") or {}
        self.status = (act.get("status") or "OFF").upper()
        self.procedure_name = act.get("procedure_name")
        self.max_readers = act.get("max_queue_readers")
        if self.max_readers is None:
            self.max_readers = 0
        self.notifications = []
        self.msgs = []  # QMsg, in arrival order
        self.last_empty = None
        self.last_activated = None
        self.tasks = []  # running Procs
        self.task_counter = 0
        self.waiters = []  # sessions waiting
        self.notify_until = None
        self.notify_handle = None
        self.monitor = False
        self.state = "INACTIVE"
        self.id = qid

    @property
    def inst(self):
        return self.db.inst

    def wants_monitor(self):
        return self.status == "ON" or bool(self.notifications)

    def key(self):
        return {"instance": self.inst.name, "database": self.db.name, "queue": self.name}


class QMsg:
    def __init__(self, dialog, seq, from_target, group, at):
        self.dialog = dialog
        self.seq = seq
        self.from_target = from_target
        self.group = group
        self.at = at
        self.taken_by = None  # session holding it in an open transaction


class DB:
    def __init__(self, inst, d, dbid):
        self.inst = inst
        self.name = d["name"]
        self.broker_instance = d.get("broker_instance")
        self.master_key = d.get("master_key", True) is not False
        self.started = self.master_key
        self.role = d.get("mirroring_role")
        self.procedures = {p["name"]: p for p in (d.get("procedures") or [])}
        self.queues = {}
        self.services = {}
        self.ack_cleanup = True
        self.id = dbid
        self.routes = []
        self.has_dialogs = False

    def usable(self):
        return self.started and self.role != "mirror"


class Inst:
    def __init__(self, d):
        self.name = d["name"]
        self.address = d.get("address")
        self.cpus = d.get("cpus") or 1
        self.forwarding = bool(d.get("message_forwarding"))
        self.dbs = {}
        self.msdb = []
        self.reachable = True
        self.conns = {}  # UPPER address -> dict(opened, last)
        self.suppressed = {}  # UPPER address -> until
        self.timer_n = 0
        self.handlers = 2 * self.cpus
        self.running_handlers = self.handlers
        self.saving = "running"
        self.saving_delay = 0
        self.buffers = []  # dispatcher buffer entries
        self.expected = {}  # (dialog, from_target) -> next seq to save
        self.waiting = []  # WMsg waiting here
        self.touched = set()
        self.route_change_at = None
        self.failed_dialogs = set()
        self.pending_requests = set()  # (table, route name, service)
        self.changes = []


class Dialog:
    def __init__(self, name, inst, db, from_service, to_service, to_bi):
        self.name = name
        self.inst = inst
        self.db = db
        self.from_service = from_service
        self.to_service = to_service
        self.to_bi = to_bi
        self.ack_bi = None
        self.target = None  # DB
        self.seq = {False: 0, True: 0}
        self.init_group = "G:%s:i" % name
        self.target_group = "G:%s:t" % name
        self.acknowledged = False


class Msg:
    """A message in flight (one copy)."""

    def __init__(self, dialog, seq, from_target, at):
        self.dialog = dialog
        self.seq = seq
        self.from_target = from_target
        self.hops = 0
        self.sent_at = at
        self.outside = False

    def service(self):
        d = self.dialog
        return d.from_service if self.from_target else d.to_service

    def bi(self):
        d = self.dialog
        if self.from_target:
            return d.db.broker_instance
        return d.to_bi or d.ack_bi


class Session:
    def __init__(self, name):
        self.name = name
        self.txn = False
        self.locks = set()  # (queue, group)
        self.taken = []  # (queue, QMsg)
        self.queues = []
        self.wait = None  # dict
        self.proc = None


class Proc:
    def __init__(self, queue, n, spid, spec):
        self.queue = queue
        self.n = n
        self.spid = spid
        self.spec = spec or {}
        self.session = Session("%s#%d" % (queue.name, n))
        self.session.proc = self
        self.alive = True


class Broker:
    def __init__(self):
        self.reset()

    def reset(self):
        self.now = 0
        self.agenda = []
        self.seqno = 0
        self.events = []
        self.insts = {}
        self.dialogs = {}
        self.sessions = {}
        self.spid = 51
        self.looks = []
        self.lost = []  # (dialog, seq, from_target, every)
        self.started = False
        self.route_order = 0
        self.expected = {}
        self.tick = 0

    # ------------------------------------------------------------------ basics
    def ev(self, kind, **f):
        f["at_ms"] = self.now
        f["kind"] = kind
        self.events.append(f)

    def at(self, t, fn, prio=5):
        if FIFO:
            prio = 0  # things due at one instant run in the order they were scheduled
        self.seqno += 1
        item = [t, prio, self.seqno, fn, True]
        heapq.heappush(self.agenda, item)
        return item

    def cancel(self, item):
        if item is not None:
            item[4] = False

    def run_until(self, t):
        while True:
            while self.agenda and not self.agenda[0][4]:
                heapq.heappop(self.agenda)
            if self.agenda and self.agenda[0][0] <= t:
                T = self.agenda[0][0]
                self.now = T
                self.settle()
                continue
            break
        self.now = max(self.now, t)

    def settle(self):
        """Run everything due at self.now, then the monitors' looks."""
        while True:
            progressed = False
            while True:
                while self.agenda and not self.agenda[0][4]:
                    heapq.heappop(self.agenda)
                if self.agenda and self.agenda[0][0] <= self.now:
                    item = heapq.heappop(self.agenda)
                    item[3]()
                    progressed = True
                else:
                    break
            if self.looks:
                q, trig, act06 = self.looks.pop(0)
                self.look(q, trig, act06)
                progressed = True
            if not progressed:
                break

    # ------------------------------------------------------------------ start
    def start(self, c):
        self.reset()
        self.now = c["at_ms"]
        self.t0 = self.now
        self.started = True
        topo = c["topology"]
        dbid = 5
        qid = 1000
        self.ev("broker_started")
        for di in topo.get("instances") or []:
            inst = Inst(di)
            self.insts[inst.name] = inst
            for r in di.get("msdb_routes") or []:
                inst.msdb.append(self.mk_route(r))
            for dd in di.get("databases") or []:
                db = DB(inst, dd, dbid)
                dbid += 1
                inst.dbs[db.name] = db
                for qd in dd.get("queues") or []:
                    q = Queue(db, qd, qid)
                    qid += 1
                    db.queues[q.name] = q
                for sd in dd.get("services") or []:
                    db.services[sd["name"]] = sd.get("queue")
                for en in dd.get("event_notifications") or []:
                    qn = en.get("queue")
                    if qn in db.queues:
                        db.queues[qn].notifications.append(en.get("name"))
                for r in dd.get("routes") or []:
                    db.routes.append(self.mk_route(r))
            self.ev("task_handlers_started", instance=inst.name, count=inst.handlers)
            for db in inst.dbs.values():
                if db.started:
                    self.ev("database_broker_started", instance=inst.name, database=db.name)
                else:
                    self.ev("database_broker_start_failed", instance=inst.name, database=db.name,
                            reason="missing master key")
                for q in db.queues.values():
                    self.update_monitor(q)
        self.at(self.now + TIMER_MS, self.timer_all, prio=3)
        return {}

    def timer_all(self):
        insts = list(self.insts.values())
        self.at(self.now + TIMER_MS, self.timer_all, prio=3)
        for i in insts:
            self.timer(i)
        n = insts[0].timer_n if insts else 0
        if n % 2 == 0:
            for i in insts:
                self.transport_connect(i)
                self.principal_retry(i)
            for i in insts:
                self.reclassify(i)
        if n % 5 == 0:
            for i in insts:
                self.timer5(i)

    def mk_route(self, r):
        self.route_order += 1
        return Route(r, self.now, self.route_order)

    # ------------------------------------------------------------------ lookup
    def inst(self, name):
        if name not in self.insts:
            raise Refused("no instance %r" % name)
        return self.insts[name]

    def db(self, iname, dname):
        i = self.inst(iname)
        if dname not in i.dbs:
            raise Refused("no database %r on %r" % (dname, iname))
        return i.dbs[dname]

    def queue(self, qd):
        db = self.db(qd["instance"], qd["database"])
        if qd["queue"] not in db.queues:
            raise Refused("no queue %r" % qd["queue"])
        return db.queues[qd["queue"]]

    def session(self, name):
        s = self.sessions.get(name)
        if s is None:
            s = Session(name)
            self.sessions[name] = s
            self.spid += 1
        return s

    def inst_by_address(self, addr):
        a = up(addr)
        for i in self.insts.values():
            if up(i.address) == a:
                return i
        return None

    # ------------------------------------------------------------------ monitors
    def update_monitor(self, q):
        want = q.wants_monitor()
        if want and not q.monitor:
            q.monitor = True
            self.ev("monitor_created", **q.key())
        elif not want and q.monitor:
            q.monitor = False
            self.ev("monitor_removed", **q.key())

    def trigger(self, q, trig, act06=False):
        if q.monitor:
            self.looks.append((q, trig, act06))

    def unread(self, q):
        return [m for m in q.msgs if m.taken_by is None]

    def waiting_readers(self, q):
        return [s for s in q.waiters if s.wait and s.wait.get("counts")]

    def look(self, q, trig, act06):
        if not q.monitor:
            return
        rule = None
        if act06 and not q.tasks:
            rule = "ACT-06"
        if rule is None:
            un = self.unread(q)
            if un and not self.waiting_readers(q):
                w = PARAMS["activation_empty_window_s"] * 1000
                if q.last_empty is None or self.now - q.last_empty >= w:
                    rule = "ACT-07"
        if rule is None:
            return
        if TRACE:
            self.ev("activation_necessary", rule=rule, trigger=trig, **q.key())
        withheld = None
        started = None
        if q.status == "ON":
            if len(q.tasks) < (q.max_readers or 0):
                started = self.start_proc(q, first_receive=False)
            else:
                withheld = "MAX_QUEUE_READERS"
        if q.notifications:
            if q.notify_until is not None:
                withheld = withheld or "notification time-out"
                if withheld == "MAX_QUEUE_READERS" and TRACE:
                    self.ev("activation_withheld", reason="notification time-out", **q.key())
            else:
                for n in q.notifications:
                    self.ev("event_notification", notification=n, event_type="QUEUE_ACTIVATION", **q.key())
                q.last_activated = self.now
                q.state = "NOTIFIED"
                q.notify_until = self.now + int(PARAMS["external_activation_timeout_s"] * 1000)
                q.notify_handle = self.at(q.notify_until, lambda qq=q: self.notify_timeout(qq), prio=4)
        if withheld and TRACE:
            self.ev("activation_withheld", reason=withheld, **q.key())
        if started is not None and started.spec.get("receives", True) is not False:
            self.proc_receive(started)

    def notify_timeout(self, q):
        q.notify_until = None
        q.notify_handle = None
        self.ev("activation_time_out", **q.key())
        self.trigger(q, "external activation time-out")

    def end_notify_by_receive(self, q):
        if q.notify_until is not None:
            self.cancel(q.notify_handle)
            q.notify_until = None
            q.notify_handle = None

    # ------------------------------------------------------------------ procedures
    def start_proc(self, q, first_receive=True):
        q.task_counter += 1
        spid = self.spid
        self.spid += 1
        p = Proc(q, q.task_counter, spid, q.db.procedures.get(q.procedure_name))
        p.name = q.procedure_name
        q.tasks.append(p)
        q.last_activated = self.now
        q.state = "NOTIFIED"
        self.ev("procedure_started", procedure_name=q.procedure_name, spid=spid, task=p.n, **q.key())
        if first_receive and p.spec.get("receives", True) is not False:
            self.proc_receive(p)
        return p

    def proc_receive(self, p):
        if not p.alive:
            return
        s = p.session
        s.txn = True
        top = p.spec.get("receive_top", 1) if "receive_top" in p.spec else 1
        wf = p.spec.get("waitfor_ms")
        self.do_receive(s, p.queue, top, None, None, wf, proc=p)

    def proc_got(self, p, rows):
        # called when the procedure's RECEIVE returned rows
        work = p.spec.get("work_ms") or 0
        self.at(self.now + int(work), lambda: self.proc_step(p), prio=5)

    def proc_step(self, p):
        if not p.alive:
            return
        self.commit_session(p.session)
        self.proc_receive(p)

    def proc_empty(self, p):
        # RECEIVE returned nothing: the procedure ends, committing
        self.commit_session(p.session, report=True)
        self.proc_exit(p, "empty RECEIVE")

    def proc_exit(self, p, reason):
        if not p.alive:
            return
        p.alive = False
        q = p.queue
        s = p.session
        if s.wait:
            self.cancel(s.wait.get("handle"))
            if s in q.waiters:
                q.waiters.remove(s)
            s.wait = None
        if s.txn:
            self.commit_session(s)
        if p in q.tasks:
            q.tasks.remove(p)
        self.ev("procedure_exited", reason=reason, spid=p.spid, task=p.n, **q.key())
        if not q.tasks:
            self.trigger(q, "all procedures exited")

    # ------------------------------------------------------------------ RECEIVE
    def group_of(self, q, dialog_name):
        d = self.dialogs.get(dialog_name)
        if d is None:
            raise Refused("no dialog %r" % dialog_name)
        if d.target is q.db and d.db is q.db:
            # both ends in one database: pick by where the messages are
            for m in q.msgs:
                if m.dialog == dialog_name:
                    return m.group
            return d.target_group
        if d.target is q.db:
            return d.target_group
        return d.init_group

    def locked_by_other(self, q, group, s):
        for o in self.sessions_all():
            if o is not s and (q, group) in o.locks:
                return True
        return False

    def sessions_all(self):
        out = list(self.sessions.values())
        for i in self.insts.values():
            for db in i.dbs.values():
                for q in db.queues.values():
                    for p in q.tasks:
                        out.append(p.session)
        return out

    def pick(self, s, q, top, where_dialog, where_group, gcg=False):
        """Return (group, [QMsg]) or (None, [])."""
        un = self.unread(q)
        if where_dialog is not None:
            cands = [m for m in un if m.dialog == where_dialog]
            if not cands:
                return None, []
            g = cands[0].group
            if self.locked_by_other(q, g, s):
                return None, []
        elif where_group is not None:
            g = self.group_of(q, where_group)
            if self.locked_by_other(q, g, s):
                return None, []
            cands = [m for m in un if m.group == g]
            if not cands:
                return None, []
        else:
            g = None
            for m in un:
                if not self.locked_by_other(q, m.group, s):
                    g = m.group
                    break
            if g is None:
                return None, []
            cands = [m for m in un if m.group == g]
        if gcg:
            return g, []
        # order: by dialog then sequence within the group, keep arrival order of dialogs
        if top is not None:
            cands = cands[:top]
        return g, cands

    def row(self, m):
        return {"dialog": m.dialog, "message_sequence_number": m.seq, "conversation_group": m.group,
                "from_target": m.from_target, "message_type_name": "DEFAULT", "message_body": None}

    def do_receive(self, s, q, top, where_dialog, where_group, waitfor_ms, proc=None, gcg=False):
        has_where = where_dialog is not None or where_group is not None
        stmt = "GET CONVERSATION GROUP" if gcg else "RECEIVE"
        if q not in s.queues and not gcg and s.txn:
            s.queues.append(q)
        g, ms = self.pick(s, q, top, where_dialog, where_group, gcg)
        if g is not None:
            self.deliver_rows(s, q, g, ms, has_where, stmt)
            if proc is not None:
                self.proc_got(proc, ms)
        elif waitfor_ms:
            self.ev("reader_waiting", session=s.name, statement=stmt, has_where=has_where, **q.key())
            w = {"queue": q, "top": top, "where_dialog": where_dialog, "where_group": where_group,
                 "gcg": gcg, "counts": not has_where, "proc": proc, "stmt": stmt}
            w["handle"] = self.at(self.now + int(waitfor_ms), lambda: self.wait_timeout(s), prio=WAIT_PRIO)
            s.wait = w
            q.waiters.append(s)
        else:
            self.empty(s, q, has_where, stmt)
            if proc is not None:
                self.proc_empty(proc)
        if not gcg:
            self.end_notify_by_receive(q)
            if q.monitor and q.state == "NOTIFIED":
                q.state = "RECEIVES_OCCURRING"
            self.trigger(q, "RECEIVE")

    def empty(self, s, q, has_where, stmt):
        self.ev("empty_result", session=s.name, statement=stmt, has_where=has_where, rows=[], **q.key())
        if not has_where:
            q.last_empty = self.now

    def deliver_rows(self, s, q, g, ms, has_where, stmt):
        rows = [self.row(m) for m in ms]
        self.ev("rows_returned", session=s.name, statement=stmt, has_where=has_where, rows=rows,
                conversation_group=g, **q.key())
        if s.txn:
            s.locks.add((q, g))
            for m in ms:
                m.taken_by = s
                s.taken.append((q, m))
        else:
            for m in ms:
                q.msgs.remove(m)
            # autocommit: lock released at once
            self.serve_waiters(q)

    def wait_timeout(self, s):
        w = s.wait
        if not w:
            return
        q = w["queue"]
        s.wait = None
        if s in q.waiters:
            q.waiters.remove(s)
        self.empty(s, q, not w["counts"], w["stmt"])
        if w["proc"] is not None:
            self.proc_empty(w["proc"])
        if not w["gcg"]:
            self.trigger(q, "RECEIVE")

    def serve_waiters(self, q):
        for s in list(q.waiters):
            w = s.wait
            if not w:
                continue
            g, ms = self.pick(s, q, w["top"], w["where_dialog"], w["where_group"], w["gcg"])
            if g is None:
                continue
            self.cancel(w["handle"])
            q.waiters.remove(s)
            s.wait = None
            self.deliver_rows(s, q, g, ms, not w["counts"], w["stmt"])
            if w["proc"] is not None:
                self.proc_got(w["proc"], ms)
            if not w["gcg"]:
                self.trigger(q, "RECEIVE")

    def commit_session(self, s, report=True):
        queues = set()
        for q, m in s.taken:
            if m in q.msgs:
                q.msgs.remove(m)
            queues.add(q)
        had = s.txn
        s.taken = []
        for q, g in s.locks:
            queues.add(q)
        s.locks = set()
        s.txn = False
        if had and report:
            self.ev("transaction_committed", session=s.name)
        for q in queues:
            self.serve_waiters(q)
        s.queues = []

    def rollback_session(self, s):
        n = 0
        queues = set(s.queues)
        look_queues = set(s.queues)
        for q, g in s.locks:
            queues.add(q)
        for q, m in s.taken:
            m.taken_by = None
            n += 1
            queues.add(q)
        s.taken = []
        s.locks = set()
        s.txn = False
        self.ev("transaction_rolled_back", session=s.name, returned=n)
        for q in queues:
            self.serve_waiters(q)
        for q in look_queues:
            self.trigger(q, "rollback")
        s.queues = []

    # ------------------------------------------------------------------ timer
    def timer(self, inst):
        inst.timer_n += 1
        n = inst.timer_n
        tasks = ["queue monitors", "task handlers", "message dispatcher"]
        if n % 2 == 0:
            tasks += ["transport connections", "transmitter"]
        if n % 5 == 0:
            tasks += ["idle connections", "forwarder", "broker start",
                      "broker configuration notification", "acknowledged message clean-up"]
        if TRACE:
            self.ev("timer_notification", instance=inst.name, number=n, tasks=tasks)
        # 1: queue monitors
        for db in inst.dbs.values():
            for q in db.queues.values():
                self.trigger(q, "timer notification")
        # 2: task handlers
        if inst.running_handlers < inst.handlers:
            k = inst.handlers - inst.running_handlers
            inst.running_handlers = inst.handlers
            self.ev("task_handlers_restarted", instance=inst.name, count=k)
        # 3: dispatcher
        self.dispatcher_clean(inst)

    def timer5(self, inst):
        if True:
            self.idle_close(inst)
            self.forwarder_clean(inst)
            self.broker_start_retry(inst)
            for db in inst.dbs.values():
                if db.has_dialogs and not db.ack_cleanup:
                    db.ack_cleanup = True
                    self.ev("ack_cleanup_resumed", instance=inst.name, database=db.name)

    def broker_start_retry(self, inst):
        for db in inst.dbs.values():
            if not db.started and db.master_key:
                db.started = True
                self.ev("database_broker_started", instance=inst.name, database=db.name)

    # ------------------------------------------------------------------ dialogs
    def begin_dialog(self, c):
        i = self.inst(c["instance"])
        db = self.db(c["instance"], c["database"])
        if c["dialog"] in self.dialogs:
            raise Refused("dialog %r exists" % c["dialog"])
        d = Dialog(c["dialog"], i, db, c["from_service"], c["to_service"], c.get("to_broker_instance"))
        self.dialogs[d.name] = d
        db.has_dialogs = True
        self.ev("dialog_begun", instance=i.name, database=db.name, dialog=d.name,
                from_service=d.from_service, to_service=d.to_service, to_broker_instance=d.to_bi)
        return {}

    def send(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refused("no dialog %r has been begun" % c["dialog"])
        ft = bool(c.get("from_target"))
        if ft:
            if d.target is None:
                raise Refused("the target of dialog %r has not received it" % d.name)
            db = self.principal_copy(d.target)
            inst = db.inst
        else:
            inst, db = d.inst, d.db
        seq = d.seq[ft]
        d.seq[ft] += 1
        self.ev("message_sent", instance=inst.name, database=db.name, dialog=d.name,
                from_target=ft, message_sequence_number=seq)
        m = Msg(d, seq, ft, self.now)
        m.origin = inst
        m.origin_db = db
        m.received = self.now
        # a message waits behind an earlier one of its conversation waiting here
        if any(w.msg.dialog is d and w.msg.from_target == ft and (HOLD_MODE in ("origin", "tq") or not w.outside)
               and (HOLD_MODE != "route-first" or w.why != "behind") for w in inst.waiting) or (
                HOLD_ELSEWHERE and self.waits_elsewhere(inst, d, ft)):
            self.add_wait(inst, m, "behind", "waiting behind an earlier message", place="tq")
            return {"message_sequence_number": seq}
        self.route(inst, m, outside=False)
        return {"message_sequence_number": seq}

    def principal_copy(self, db):
        if db.role != "mirror":
            return db
        for i in self.insts.values():
            for o in i.dbs.values():
                if o is not db and o.role == "principal" and up(o.broker_instance) == up(db.broker_instance):
                    return o
        return db

    # ------------------------------------------------------------------ routing
    def table_of(self, inst, m, outside):
        if outside:
            return inst.msdb, "msdb.sys.routes"
        db = m.origin_db
        return db.routes, "%s.sys.routes" % db.name

    def live(self, routes):
        return [r for r in routes if r.expires is None or self.now < r.expires]

    def has_service(self, inst, svc):
        for db in inst.dbs.values():
            if db.usable() and svc in db.services:
                return True
        return False

    def match(self, inst, m, routes, tname):
        svc = m.service()
        bi = m.bi()
        rs = self.live(routes)
        if bi:
            got = [r for r in rs if r.service_name == svc and up(r.broker_instance) == up(bi)]
            if got:
                return "RTM-1", got, None
        got = [r for r in rs if r.broker_instance is None and r.service_name == svc]
        if got:
            return "RTM-2", got, None
        if not bi:
            got = [r for r in rs if r.service_name == svc and r.broker_instance is not None]
            if got:
                pick = up(got[0].broker_instance)
                return "RTM-3", [r for r in got if up(r.broker_instance) == pick], pick
        for r in rs:
            if r.service_name == DYN_SVC and svc != DYN_SVC:
                key = (inst.name, tname, svc)
                if key not in inst.pending_requests:
                    return "RTM-4", [r], None
        got = [r for r in rs if r.service_name is None and r.broker_instance is None]
        if got:
            return "RTM-5", got, None
        if bi and self.has_service(inst, svc):
            return "RTM-6", [None], None
        return "RTM-7", [], None

    def choose(self, inst, m, matched):
        svc = m.service()
        # identical routes: same broker instance, service name, address
        groups = []
        seen = set()
        for r in matched:
            if r is None:
                k = ("(as if LOCAL)",)
            else:
                k = (up(r.broker_instance), r.service_name, up(r.address))
            if k in seen:
                continue
            seen.add(k)
            groups.append(r)
        if groups == [None]:
            return "RTC-2", None, ["(as if LOCAL)"]
        mir = [r for r in groups if r is not None and r.mirror_address]
        if mir:
            return "RTC-1", mir[0], [r.name for r in mir]
        loc = [r for r in groups if r is not None and r.kind() == "LOCAL"]
        if loc and self.has_service(inst, svc):
            return "RTC-2", loc[0], [r.name for r in loc]
        net = [r for r in groups if r is not None and r.kind() == "NET"]
        if net:
            return "RTC-3", net[0], [r.name for r in net]
        tr = [r for r in groups if r is not None and r.kind() == "TRANSPORT"]
        if tr:
            return "RTC-4", tr[0], [r.name for r in tr]
        return None, None, []

    def mf(self, m, inst):
        return {"dialog": m.dialog.name, "from_target": m.from_target, "instance": inst.name,
                "message_sequence_number": m.seq}

    def route(self, inst, m, outside):
        m.last_outside = outside
        d = m.dialog
        # RTE-05: a reply from outside naming a broker instance this instance holds
        if outside and m.from_target:
            bi = d.db.broker_instance
            db = self.db_by_bi(inst, bi)
            if db is not None:
                self.ev("reply_recognised", broker_instance=bi, **self.mf(m, inst))
                self.deliver_local(inst, m, db, outside)
                return
        routes, tname = self.table_of(inst, m, outside)
        step, matched, pick = self.match(inst, m, routes, tname)
        if TRACE:
            names = [("(as if LOCAL)" if r is None else r.name) for r in matched]
            if step in ("RTM-4", "RTM-7"):
                names = []
            e = dict(step=step, table=tname, routes=names, **self.mf(m, inst))
            e["broker_instance"] = pick
            self.ev("routes_matched", **e)
        if step == "RTM-4":
            r = matched[0]
            inst.pending_requests.add((inst.name, tname, m.service()))
            self.ev("routing_requested", route=r.name, service=m.service(), table=tname, **self.mf(m, inst))
            self.delay(inst, m, outside, "RTM-4")
            return
        if step == "RTM-7":
            self.delay(inst, m, outside, "RTM-7")
            return
        cstep, r, cands = self.choose(inst, m, matched)
        if cstep is None:
            self.delay(inst, m, outside, "RTC-4")
            return
        if TRACE:
            self.ev("route_chosen", step=cstep, route=("(as if LOCAL)" if r is None else r.name),
                    candidates=cands, **self.mf(m, inst))
        is_local = r is None or r.kind() == "LOCAL"
        if outside and not is_local and not inst.forwarding:
            self.drop(inst, m, "message forwarding is not active", "RTC-5")
            return
        if is_local:
            bi = m.bi() or (r.broker_instance if r is not None else None)
            if bi:
                db = self.db_by_bi(inst, bi)
                if db is None or m.service() not in db.services:
                    self.drop(inst, m, "no database of that broker instance here", "RTL-2")
                    return
            else:
                db = self.find_service_db(inst, m)
                if db is None:
                    self.drop(inst, m, "no service here", "RTL-3")
                    return
            self.deliver_local(inst, m, db, outside)
            return
        if r.mirror_address:
            self.send_mirrored(inst, m, r, outside)
            return
        if r.kind() == "TRANSPORT":
            addr = self.transport_address(m.service())
            if addr is None:
                self.delay(inst, m, outside, "RTC-4")
                return
        else:
            addr = r.address
        self.send_to(inst, m, addr, outside)

    def transport_address(self, svc):
        if not svc or not up(svc).startswith("TCP://"):
            return None
        rest = svc[6:]
        hp = rest.split("/", 1)[0]
        if not hp:
            return None
        return "TCP://" + hp

    def db_by_bi(self, inst, bi):
        for db in inst.dbs.values():
            if db.usable() and up(db.broker_instance) == up(bi):
                return db
        return None

    def find_service_db(self, inst, m):
        svc = m.service()
        first = None
        d = m.dialog
        if m.from_target:
            first = d.db if d.db.inst is inst else None
        else:
            first = d.db if d.db.inst is inst else None
        order = ([first] if first else []) + [db for db in inst.dbs.values() if db is not first]
        for db in order:
            if db.usable() and svc in db.services:
                return db
        return None

    def drop(self, inst, m, reason, rule):
        e = dict(reason=reason, **self.mf(m, inst))
        if TRACE:
            e["rule"] = rule
        self.ev("message_dropped", **e)

    def delay(self, inst, m, outside, step):
        e = self.mf(m, inst)
        if TRACE:
            e["step"] = step
        self.ev("conversation_delayed", **e)
        w = self.add_wait(inst, m, "delayed", "delayed: no route", place="fwd" if outside else "tq",
                          outside=outside)
        w.handle = self.at(self.now + int(PARAMS["delayed_retry_s"] * 1000), lambda: self.retry(inst, w), prio=RETRY_PRIO)

    def retry(self, inst, w):
        if w not in inst.waiting:
            return
        self.remove_wait(inst, w)
        self.ev("routing_retried", **self.mf(w.msg, inst))
        self.route(inst, w.msg, w.outside)
        self.release_behind(inst, w.msg, w.outside)

    # waiting messages ----------------------------------------------------
    def add_wait(self, inst, m, why, status, place="tq", outside=False, addr=None, route=None):
        w = WMsg(m, why, status, place, outside, addr, route, self.now)
        self.tick += 1
        w.tick = self.tick
        # keep received time if the message waited here already
        if getattr(m, "wait_since", None) is not None and getattr(m, "wait_inst", None) is inst:
            w.received = m.wait_since
        else:
            m.wait_since = self.now if place == "tq" else (m.arrived_at if hasattr(m, "arrived_at") else self.now)
            m.wait_inst = inst
            w.received = m.wait_since
        inst.waiting.append(w)
        e = self.mf(m, inst)
        self.ev("transmission_pending", status=status, **e)
        return w

    def remove_wait(self, inst, w):
        if w in inst.waiting:
            inst.waiting.remove(w)
        self.cancel(getattr(w, "handle", None))

    def waits_elsewhere(self, inst, d, ft, heads_only=False):
        for o in self.insts.values():
            if o is inst:
                continue
            for w in o.waiting:
                if w.msg.dialog is d and w.msg.from_target == ft and not (heads_only and w.why == "behind"):
                    return True
        return False

    def release_behind(self, inst, m, outside):
        self.release_local(inst, m, outside)
        if HOLD_ELSEWHERE:
            d, ft = m.dialog, m.from_target
            if not any(w.msg.dialog is d and w.msg.from_target == ft for o in self.insts.values()
                       for w in o.waiting if w.why != "behind"):
                for o in self.insts.values():
                    if o is not inst:
                        self.release_local(o, m, outside)

    def release_local(self, inst, m, outside):
        # messages waiting behind m at this instance go on if m no longer waits
        if any(w.msg is m for w in inst.waiting):
            return
        same = [w for w in inst.waiting if w.why == "behind" and w.msg.dialog is m.dialog
                and w.msg.from_target == m.from_target]
        for w in same:
            inst.waiting.remove(w)
        for w in same:
            if any(x.msg.dialog is m.dialog and x.msg.from_target == m.from_target for x in inst.waiting) or (
                    HOLD_ELSEWHERE and self.waits_elsewhere(inst, m.dialog, m.from_target, heads_only=True)):
                inst.waiting.append(w)
                continue
            self.route(inst, w.msg, w.outside)

    # transport -------------------------------------------------------------
    def send_to(self, inst, m, addr, outside, route=None):
        target = self.inst_by_address(addr)
        if target is inst and m.dialog.name in inst.failed_dialogs:
            self.add_wait(inst, m, "failed", "transmission failed, to " + addr, place="fwd" if outside else "tq",
                          outside=outside, addr=addr)
            return
        if target is inst and not outside and HOLD_MODE == "route-first" and any(
                w.msg.dialog is m.dialog and w.msg.from_target == m.from_target for w in inst.waiting):
            # routed to the own address while an earlier message of the conversation waits here
            self.add_wait(inst, m, "behind", "waiting behind an earlier message", place="tq")
            return
        if target is inst:
            # RTX-2: treated as arriving from outside
            if outside:
                if not self.forward_count(inst, m, addr):
                    return
            self.arrive(inst, m, via_self=True)
            return
        if outside:
            if not self.forward_count(inst, m, addr):
                return
        self.transmit(inst, m, addr, outside)

    def forward_count(self, inst, m, addr):
        if m.hops + 1 > PARAMS["forward_hop_limit"]:
            self.drop(inst, m, "forwarded too many times", "RTX-1")
            return False
        m.hops += 1
        self.ev("message_forwarded", address=addr, hops=m.hops, **self.mf(m, inst))
        return True

    def transmit(self, inst, m, addr, outside):
        if m.dialog.name in inst.failed_dialogs:
            self.add_wait(inst, m, "failed", "transmission failed, to " + addr, place="fwd" if outside else "tq",
                          outside=outside, addr=addr)
            return
        a = up(addr)
        conn = inst.conns.get(a)
        target = self.inst_by_address(addr)
        if conn is not None and (conn.get("broken") or (target is not None and not target.reachable)):
            del inst.conns[a]
            self.ev("connection_closed", instance=inst.name, address=addr, reason="disconnected")
            inst.suppressed[a] = self.now + 15000
            conn = None
        if conn is None:
            if inst.suppressed.get(a, -1) > self.now:
                self.add_wait(inst, m, "conn", "waiting for a connection to " + addr, place="fwd" if outside else "tq",
                              outside=outside, addr=addr)
                return
            if target is None or not target.reachable:
                self.ev("connection_attempt", instance=inst.name, address=addr, result="refused")
                inst.suppressed[a] = self.now + 60000
                self.add_wait(inst, m, "conn", "waiting for a connection to " + addr + " (refused)", place="fwd" if outside else "tq",
                              outside=outside, addr=addr)
                return
            self.ev("connection_attempt", instance=inst.name, address=addr, result="connected")
            conn = {"opened": self.now, "last": self.now, "address": addr}
            inst.conns[a] = conn
        conn["last"] = self.now
        self.ev("message_transmitted", address=addr, to_instance=target.name, **self.mf(m, inst))
        for L in list(self.lost):
            if L[0] == m.dialog.name and L[1] == m.seq and L[2] == m.from_target:
                if not L[3]:
                    self.lost.remove(L)
                self.ev("message_lost_in_transit", address=addr, **self.mf(m, inst))
                return
        self.arrive(target, m)

    def arrive(self, inst, m, via_self=False):
        m.arrived_at = self.now
        m.wait_since = None
        if ARRIVAL_BEHIND and (not via_self or HOLD_MODE == "tq") and any(w.msg.dialog is m.dialog and w.msg.from_target == m.from_target and w.outside
                                  for w in inst.waiting):
            self.add_wait(inst, m, "behind", "waiting behind an earlier message", place="fwd", outside=True)
            return
        self.route(inst, m, outside=True)

    def transport_connect(self, inst):
        addrs = []
        for w in inst.waiting:
            if w.why == "conn" and up(w.addr) not in addrs:
                addrs.append(up(w.addr))
        for a in addrs:
            if inst.suppressed.get(a, -1) > self.now:
                continue
            ws = [w for w in inst.waiting if w.why == "conn" and up(w.addr) == a]
            addr = ws[0].addr
            target = self.inst_by_address(addr)
            if target is None or not target.reachable:
                self.ev("connection_attempt", instance=inst.name, address=addr, result="refused")
                inst.suppressed[a] = self.now + 60000
                continue
            self.ev("connection_attempt", instance=inst.name, address=addr, result="connected")
            inst.conns[a] = {"opened": self.now, "last": self.now, "address": addr}
            for w in ws:
                if w in inst.waiting:
                    self.remove_wait(inst, w)
                    self.transmit(inst, w.msg, w.addr, w.outside)
                    self.release_behind(inst, w.msg, w.outside)

    def idle_close(self, inst):
        for a, c in list(inst.conns.items()):
            if self.now - c["last"] >= 90000:
                del inst.conns[a]
                self.ev("connection_closed", instance=inst.name, address=c["address"], reason="idle")

    def forwarder_clean(self, inst):
        for w in list(inst.waiting):
            if w.place == "fwd" and self.now - w.received >= 60000:
                self.remove_wait(inst, w)
                self.ev("forwarded_message_deleted", **self.mf(w.msg, inst))

    def reclassify(self, inst):
        last = getattr(inst, "last_reclass", self.t0)
        inst.last_reclass = self.now
        tables = [inst.msdb] + [db.routes for db in inst.dbs.values()]
        expiries = []
        for rs in tables:
            for r in rs:
                if r.expires is not None and last < r.expires <= self.now:
                    expiries.append(r.expires)
        if expiries:
            # a route expiry touches the dialogs that were already waiting when it expired
            for w in inst.waiting:
                if w.why != "behind" and any(w.since < e for e in expiries):
                    inst.touched.add(w.msg.dialog.name)
        for w in inst.waiting:
            if w.why == "behind":
                continue
            for tk, svcs in inst.changes:
                if tk > w.tick and (None in svcs or w.msg.service() in svcs):
                    inst.touched.add(w.msg.dialog.name)
        inst.changes = []
        names = []
        for w in list(inst.waiting):
            d = w.msg.dialog
            if w.why == "behind":
                continue
            if d.name in inst.touched or (w.why == "failed" and d.name in inst.failed_dialogs):
                if d.name not in names:
                    names.append(d.name)
        inst.failed_dialogs -= set(names)
        inst.touched = set()
        if TRACE:
            self.ev("transmitter_reclassified", instance=inst.name, dialogs=names)
        for n in names:
            for w in list(inst.waiting):
                if w.since == self.now and w.why != "failed":
                    continue  # its own time-out (or a retry) routed it at this instant already
                if w.msg.dialog.name == n and w in inst.waiting and w.why != "behind":
                    self.remove_wait(inst, w)
                    self.route(inst, w.msg, w.outside)
                    self.release_behind(inst, w.msg, w.outside)

    # mirroring -------------------------------------------------------------
    def probe(self, inst, m, r, addr):
        t = self.inst_by_address(addr)
        if t is None or not t.reachable:
            ans = "unreachable"
        else:
            ans = "not principal"
            bi = m.bi() or r.broker_instance
            for db in t.dbs.values():
                if db.role != "principal" or not db.started:
                    continue
                if bi:
                    if up(bi) == up(db.broker_instance):
                        ans = "principal"
                elif m.service() in db.services:
                    ans = "principal"
        return ans

    def pkey(self, m, r):
        # the principal a route has learnt is the route's, whatever the conversation
        return "route"

    def send_mirrored(self, inst, m, r, outside):
        if not isinstance(r.principal, dict):
            r.principal = {}
        key = self.pkey(m, r)
        cur = r.principal.get(key)
        if cur is not None:
            ans = self.probe(inst, m, r, cur)
            if ans == "principal":
                self.send_to(inst, m, cur, outside)
                return
            self.ev("principal_lost", address=cur, answer=ans, route=r.name, **self.mf(m, inst))
            other = r.mirror_address if up(cur) == up(r.address) else r.address
            a2 = self.probe(inst, m, r, other)
            self.ev("principal_probe", address=other, answer=a2, route=r.name, **self.mf(m, inst))
            if a2 == "principal":
                r.principal[key] = other
                self.send_to(inst, m, other, outside)
                return
        else:
            found = None
            for addr in (r.address, r.mirror_address):
                ans = self.probe(inst, m, r, addr)
                self.ev("principal_probe", address=addr, answer=ans, route=r.name, **self.mf(m, inst))
                if ans == "principal" and found is None:
                    found = addr
            if found is not None:
                r.principal[key] = found
                self.send_to(inst, m, found, outside)
                return
        self.add_wait(inst, m, "principal", "waiting for the principal of route " + r.name,
                      place="fwd" if outside else "tq", outside=outside, route=r)

    def principal_retry(self, inst):
        for w in list(inst.waiting):
            if w.why == "principal" and w in inst.waiting:
                self.remove_wait(inst, w)
                self.route(inst, w.msg, w.outside)
                self.release_behind(inst, w.msg, w.outside)

    # local delivery --------------------------------------------------------
    def deliver_local(self, inst, m, db, outside):
        if outside:
            self.dispatch(inst, m, db)
        else:
            self.save(inst, m, db)

    def dispatch(self, inst, m, db):
        exp = self.expected.get(self.ekey(db, m), 0)
        if m.seq < exp or any(b["m"].dialog is m.dialog and b["m"].seq == m.seq and
                              b["m"].from_target == m.from_target for b in inst.buffers):
            return  # a copy already held or saved
        b = {"m": m, "db": db, "arrived": self.now}
        inst.buffers.append(b)
        self.ev("dispatcher_buffered", database=db.name, **self.mf(m, inst))
        self.dispatcher_save(inst)

    def dispatcher_save(self, inst):
        if inst.saving != "running":
            return
        progress = True
        while progress:
            progress = False
            for b in list(inst.buffers):
                m = b["m"]
                if m.seq == self.expected.get(self.ekey(b["db"], m), 0):
                    due = max(b["arrived"], b.get("resumed", b["arrived"])) + int(inst.saving_delay * 1000)
                    if due > self.now:
                        if not b.get("sched"):
                            b["sched"] = True
                            self.at(due, lambda: self.dispatcher_save(inst), prio=5)
                        continue
                    inst.buffers.remove(b)
                    self.save(inst, m, b["db"])
                    progress = True

    def in_order(self, inst, b):
        m = b["m"]
        exp = self.expected.get(self.ekey(b["db"], m), 0)
        held = {x["m"].seq for x in inst.buffers if x["m"].dialog is m.dialog and x["m"].from_target == m.from_target}
        for k in range(exp, m.seq):
            if k not in held:
                return False
        return True

    def ekey(self, db, m):
        return (up(db.broker_instance) or db.name, m.dialog.name, m.from_target)

    def dispatcher_clean(self, inst):
        doomed = []
        for b in list(inst.buffers):
            if not self.in_order(inst, b):
                doomed.append((b, "out of order"))
            elif self.now - b["arrived"] >= 10000:
                doomed.append((b, "stale"))
        for b, why in doomed:
            inst.buffers.remove(b)
            self.ev("dispatcher_deleted", database=b["db"].name, reason=why, **self.mf(b["m"], inst))

    def save(self, inst, m, db):
        d = m.dialog
        key = self.ekey(db, m)
        self.expected[key] = max(self.expected.get(key, 0), m.seq + 1)
        svc = m.service()
        qn = db.services.get(svc)
        q = db.queues.get(qn)
        if q is None:
            self.drop(inst, m, "service has no queue", "RTL-3")
            return
        if m.from_target:
            group = d.init_group
        else:
            group = d.target_group
            if d.target is None:
                d.target = db
            db.has_dialogs = True
        act06 = not self.unread(q) and not q.tasks
        qm = QMsg(d.name, m.seq, m.from_target, group, self.now)
        q.msgs.append(qm)
        self.ev("message_arrived", database=db.name, queue=q.name, service=svc, conversation_group=group,
                **self.mf(m, inst))
        if not m.from_target and not d.acknowledged:
            d.acknowledged = True
            d.ack_bi = db.broker_instance
            self.ev("acknowledged", instance=d.inst.name, dialog=d.name, broker_instance=db.broker_instance)
        self.serve_waiters(q)
        self.trigger(q, "message arrived", act06)

    # ------------------------------------------------------------------ views
    def view(self, c):
        v = c["view"]
        iname = c.get("instance")
        dname = c.get("database")
        rows = []
        insts = [self.insts[iname]] if iname in self.insts else list(self.insts.values())
        if v == "sys.dm_broker_queue_monitors":
            for i in insts:
                for db in i.dbs.values():
                    if dname and db.name != dname:
                        continue
                    for q in db.queues.values():
                        if not q.monitor:
                            continue
                        rows.append({"database_id": db.id, "queue_id": q.id, "instance": i.name,
                                     "database": db.name, "queue": q.name, "state": self.mon_state(q),
                                     "last_empty_rowset_time": q.last_empty,
                                     "last_activated_time": q.last_activated,
                                     "tasks_waiting": len(self.waiting_readers(q))})
        elif v == "sys.dm_broker_activated_tasks":
            for i in insts:
                for db in i.dbs.values():
                    if dname and db.name != dname:
                        continue
                    for q in db.queues.values():
                        for p in q.tasks:
                            rows.append({"spid": p.spid, "database_id": db.id, "queue_id": q.id,
                                         "instance": i.name, "database": db.name, "queue": q.name,
                                         "task": p.n, "procedure_name": p.name})
        elif v == "sys.routes":
            for i in insts:
                if dname is None:
                    tables = [(None, i.msdb)]
                else:
                    tables = [(dname, self.db(i.name, dname).routes)]
                for dn, rs in tables:
                    for r in rs:
                        rows.append({"instance": i.name, "database": dn if dn else "msdb", "name": r.name,
                                     "remote_service_name": r.service_name, "broker_instance": r.broker_instance,
                                     "address": r.address, "mirror_address": r.mirror_address,
                                     "expires_ms": r.expires})
        elif v in ("sys.transmission_queue", "sbtck.forwarder"):
            place = "tq" if v == "sys.transmission_queue" else "fwd"
            order = {n: k for k, n in enumerate(self.dialogs)}
            for i in insts:
                for w in sorted(i.waiting, key=lambda w: (order.get(w.msg.dialog.name, 0), w.msg.from_target,
                                                          w.msg.seq)):
                    if w.place != place:
                        continue
                    rows.append({"instance": i.name, "dialog": w.msg.dialog.name,
                                 "message_sequence_number": w.msg.seq, "from_target": w.msg.from_target,
                                 "to_service_name": w.msg.service(), "transmission_status": w.status,
                                 "received_ms": w.received})
        elif v == "sys.conversation_endpoints":
            for d in self.dialogs.values():
                if d.inst in insts:
                    rows.append({"dialog": d.name, "instance": d.inst.name, "database": d.db.name,
                                 "far_service": d.to_service, "far_broker_instance": d.to_bi or d.ack_bi,
                                 "acknowledged": d.acknowledged})
                if d.target is not None and d.target.inst in insts:
                    rows.append({"dialog": d.name, "instance": d.target.inst.name, "database": d.target.name,
                                 "far_service": d.from_service, "far_broker_instance": d.db.broker_instance,
                                 "acknowledged": True})
        elif v == "sys.dm_broker_connections":
            for i in insts:
                for a, cn in i.conns.items():
                    rows.append({"instance": i.name, "address": cn["address"], "state": "CONNECTED",
                                 "opened_ms": cn["opened"], "last_activity_ms": cn["last"]})
        elif v == "sbtck.dispatcher_buffers":
            for i in insts:
                for b in i.buffers:
                    m = b["m"]
                    rows.append({"instance": i.name, "database": b["db"].name, "dialog": m.dialog.name,
                                 "message_sequence_number": m.seq, "from_target": m.from_target,
                                 "arrived_ms": b["arrived"]})
        elif v == "sbtck.periodic_state":
            for i in insts:
                for db in i.dbs.values():
                    rows.append({"instance": i.name, "task_handlers": i.handlers,
                                 "running_task_handlers": i.running_handlers, "database": db.name,
                                 "broker_started": db.started, "ack_cleanup_running": db.ack_cleanup})
        else:
            raise Refused("no view %r" % v)
        return {"rows": rows}

    def mon_state(self, q):
        if not self.unread(q) and not q.tasks and q.notify_until is None:
            return "INACTIVE"
        return q.state if q.state != "INACTIVE" else "NOTIFIED"

    # ------------------------------------------------------------------ commands
    def execute(self, c):
        k = c["kind"]
        if k == "start":
            return self.start(c)
        if not self.started:
            raise Refused("no topology started")
        self.run_until(c["at_ms"])
        fn = getattr(self, "cmd_" + k, None)
        if fn is None:
            raise Refused("unknown command %r" % k)
        r = fn(c)
        self.settle()
        return r or {}

    def cmd_advance_time(self, c):
        return {}

    def cmd_begin_dialog(self, c):
        return self.begin_dialog(c)

    def cmd_send(self, c):
        return self.send(c)

    def cmd_begin_transaction(self, c):
        s = self.session(c["session"])
        s.txn = True
        return {}

    def cmd_commit(self, c):
        s = self.session(c["session"])
        if not s.txn:
            raise Refused("no transaction is open in session %r" % s.name)
        self.commit_session(s)
        return {}

    def cmd_rollback(self, c):
        s = self.session(c["session"])
        if not s.txn:
            raise Refused("no transaction is open in session %r" % s.name)
        self.rollback_session(s)
        return {}

    def cmd_receive(self, c):
        s = self.session(c["session"])
        q = self.queue(c["queue"])
        if s.wait:
            raise Refused("session %r is waiting" % s.name)
        self.do_receive(s, q, c.get("top"), c.get("where_dialog"), c.get("where_group"), c.get("waitfor_ms"))
        return {}

    def cmd_get_conversation_group(self, c):
        s = self.session(c["session"])
        q = self.queue(c["queue"])
        if s.wait:
            raise Refused("session %r is waiting" % s.name)
        self.do_receive(s, q, None, None, None, c.get("waitfor_ms"), gcg=True)
        return {}

    def cmd_alter_queue(self, c):
        q = self.queue(c["queue"])
        if c.get("status") is not None:
            q.status = c["status"].upper()
        if c.get("procedure_name") is not None:
            q.procedure_name = c["procedure_name"]
        if c.get("max_queue_readers") is not None:
            q.max_readers = c["max_queue_readers"]
        self.ev("queue_altered", **q.key())
        self.update_monitor(q)
        self.trigger(q, "ALTER QUEUE")
        return {}

    def cmd_create_event_notification(self, c):
        q = self.queue(c["queue"])
        if c["name"] in q.notifications:
            raise Refused("event notification %r exists" % c["name"])
        q.notifications.append(c["name"])
        self.update_monitor(q)
        return {}

    def cmd_drop_event_notification(self, c):
        q = self.queue(c["queue"])
        if c["name"] not in q.notifications:
            raise Refused("no event notification %r" % c["name"])
        q.notifications.remove(c["name"])
        if not q.notifications:
            self.end_notify_by_receive(q)
        self.update_monitor(q)
        return {}

    def cmd_exit_procedure(self, c):
        q = self.queue(c["queue"])
        for p in q.tasks:
            if p.n == c["task"]:
                self.proc_exit(p, "exited")
                return {}
        raise Refused("no running task %r" % c["task"])

    def route_table(self, c):
        i = self.inst(c["instance"])
        if c.get("database") is None:
            return i, i.msdb
        return i, self.db(c["instance"], c["database"]).routes

    def touch(self, i, svcs):
        self.tick += 1
        i.changes.append((self.tick, set(svcs)))

    def check_addr(self, a):
        if a is None:
            return
        u = up(a)
        if u in ("LOCAL", "TRANSPORT"):
            return
        if not u.startswith("TCP://"):
            raise Refused("malformed address %r" % a)

    def cmd_create_route(self, c):
        i, rs = self.route_table(c)
        rd = c["route"]
        if any(r.name == rd.get("name") for r in rs):
            raise Refused("route %r exists" % rd.get("name"))
        self.check_addr(rd.get("address"))
        self.check_addr(rd.get("mirror_address"))
        r = self.mk_route(rd)
        rs.append(r)
        self.ev("route_created", instance=i.name, database=c.get("database") or "msdb", route=r.name)
        self.touch(i, {r.service_name})
        return {}

    def cmd_alter_route(self, c):
        i, rs = self.route_table(c)
        rd = c["route"]
        for r in rs:
            if r.name == rd.get("name"):
                old_svc = r.service_name
                old_addrs = {up(r.address), up(r.mirror_address)}
                self.check_addr(rd.get("address"))
                self.check_addr(rd.get("mirror_address"))
                for f in ("service_name", "broker_instance", "address", "mirror_address"):
                    if rd.get(f) is not None:
                        setattr(r, f, rd[f])
                if rd.get("lifetime_s") is not None:
                    r.expires = self.now + int(round(rd["lifetime_s"] * 1000))
                if isinstance(r.principal, dict):
                    for k, v in list(r.principal.items()):
                        if up(v) not in {up(r.address), up(r.mirror_address)}:
                            del r.principal[k]
                self.ev("route_altered", instance=i.name, database=c.get("database") or "msdb", route=r.name)
                self.touch(i, {old_svc, r.service_name})
                return {}
        raise Refused("no route %r" % rd.get("name"))

    def cmd_drop_route(self, c):
        i, rs = self.route_table(c)
        for r in rs:
            if r.name == c["name"]:
                rs.remove(r)
                self.ev("route_dropped", instance=i.name, database=c.get("database") or "msdb", route=r.name)
                self.touch(i, {r.service_name})
                return {}
        raise Refused("no route %r" % c["name"])

    def cmd_answer_routing_request(self, c):
        i, rs = self.route_table(c)
        rd = c["route"]
        tname = "msdb.sys.routes" if c.get("database") is None else "%s.sys.routes" % c["database"]
        i.pending_requests.discard((i.name, tname, rd.get("service_name")))
        r = self.mk_route(rd)
        rs.append(r)
        self.ev("route_created", instance=i.name, database=c.get("database") or "msdb", route=r.name)
        self.touch(i, {r.service_name})
        return {}

    def cmd_set_message_forwarding(self, c):
        i = self.inst(c["instance"])
        i.forwarding = bool(c["active"])
        return {}

    def cmd_set_reachable(self, c):
        i = self.inst(c["instance"])
        i.reachable = bool(c["reachable"])
        if not i.reachable:
            # connections of other instances to it break; found broken when next used
            for o in self.insts.values():
                if o is i:
                    continue
                for a, cn in o.conns.items():
                    if self.inst_by_address(cn["address"]) is i:
                        cn["broken"] = True
        return {}

    def cmd_failover(self, c):
        db = self.db(c["instance"], c["database"])
        db.role = "principal"
        for o in self.insts.values():
            if o is db.inst:
                continue
            od = o.dbs.get(db.name)
            if od is not None and od.role is not None:
                od.role = "mirror"
        return {}

    def cmd_fail_task_handlers(self, c):
        i = self.inst(c["instance"])
        i.running_handlers = max(0, i.running_handlers - c["count"])
        return {}

    def cmd_set_dispatcher_saving(self, c):
        i = self.inst(c["instance"])
        i.saving = c["mode"]
        i.saving_delay = c.get("delay_s") or 0
        if i.saving == "running":
            for b in i.buffers:
                b["sched"] = False
                if RESUME_DELAY:
                    b["resumed"] = self.now
            self.dispatcher_save(i)
        return {}

    def cmd_lose_in_transit(self, c):
        self.lost.append((c["dialog"], c["sequence"], bool(c.get("from_target")), bool(c.get("every"))))
        return {}

    def cmd_drop_connection(self, c):
        i = self.inst(c["instance"])
        a = up(c["address"])
        cn = i.conns.pop(a, None)
        if cn is not None:
            self.ev("connection_closed", instance=i.name, address=cn["address"], reason="disconnected")
            i.suppressed[a] = self.now + 15000
        return {}

    def cmd_fail_transmission(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refused("no dialog %r" % c["dialog"])
        d.inst.failed_dialogs.add(d.name)
        if d.target is not None:
            d.target.inst.failed_dialogs.add(d.name)
        return {}

    def cmd_create_master_key(self, c):
        db = self.db(c["instance"], c["database"])
        db.master_key = True
        return {}

    def cmd_stop_ack_cleanup(self, c):
        db = self.db(c["instance"], c["database"])
        db.ack_cleanup = False
        return {}

    def cmd_query_view(self, c):
        return self.view(c)


class WMsg:
    def __init__(self, msg, why, status, place, outside, addr, route, now):
        self.msg = msg
        self.why = why
        self.status = status
        self.place = place
        self.outside = outside
        self.addr = addr
        self.route = route
        self.since = now
        self.received = now
        self.handle = None


def main():
    b = Broker()
    out = sys.stdout
    logf = open(LOG, "a") if LOG else None
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        if logf:
            logf.write(line + "\n")
            logf.flush()
        rid = req.get("id")
        op = req.get("op")
        if op == "hello":
            resp = {"id": rid, "ok": True, "result": {"name": "cleanroom6", "version": "0.1", "protocol": "2.2",
                                                      "capabilities": CAPS, "params": PARAMS}}
        elif op == "bye":
            out.write(json.dumps({"id": rid, "ok": True}) + "\n")
            out.flush()
            return
        elif op == "execute":
            b.events = []
            try:
                r = b.execute(req["command"])
                resp = {"id": rid, "ok": True, "result": r, "events": b.events}
            except Refused as e:
                resp = {"id": rid, "ok": False, "error": str(e), "events": b.events}
            except Exception as e:  # noqa
                traceback.print_exc(file=sys.stderr)
                resp = {"id": rid, "ok": False, "fault": True, "error": "%s: %s" % (type(e).__name__, e),
                        "events": []}
        else:
            resp = {"id": rid, "ok": False, "error": "unknown op %r" % op}
        if logf:
            logf.write("=> " + json.dumps(resp) + "\n")
            logf.flush()
        out.write(json.dumps(resp) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
