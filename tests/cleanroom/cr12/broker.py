#!/usr/bin/env python3
"""A clean-room Service Broker model speaking the sbtck protocol (2.3) on stdio.

Written from the kit's user documentation and the source documents only.
Standard library only.
"""
import heapq
import json
import os
import sys
import traceback

TRACE = os.environ.get("SBTCK_CR15_NO_TRACE") != "1"

PARAMS = {
    "activation_empty_window_s": 5,
    "external_activation_timeout_s": 60,
    "delayed_retry_s": 10,
    "forward_hop_limit": 4,
}
TIMER_MS = 5000
DISPATCHER_STALE_MS = 10000
SUPPRESS_DISCONNECT_MS = 15000
SUPPRESS_FAILED_MS = 60000
IDLE_CLOSE_MS = 90000
FORWARD_STALE_MS = 60000
BCN = "http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice"

CAPS = ["activation", "external_activation", "routing", "mirroring", "dynamic_routing",
        "forwarding", "periodic_tasks"]
if TRACE:
    CAPS.append("decision_trace")


class Refuse(Exception):
    pass


def up(a):
    return (a or "").upper()


def tcp_base(addr):
    """TCP://host:port from TCP://host:port/rest, or None."""
    if not addr or not addr.upper().startswith("TCP://"):
        return None
    rest = addr[6:]
    if "/" not in rest:
        return None
    hp = rest.split("/", 1)[0]
    if not hp:
        return None
    return addr[:6] + hp


class Route:
    def __init__(self, d, now):
        self.name = d["name"]
        self.service_name = d.get("service_name")
        self.broker_instance = d.get("broker_instance")
        self.address = d.get("address") or "LOCAL"
        self.mirror_address = d.get("mirror_address")
        lt = d.get("lifetime_s")
        self.expires_ms = None if lt is None else now + int(round(lt * 1000))
        self.principal = None  # learnt principal address (mirrored route)

    def expired(self, now):
        return self.expires_ms is not None and now >= self.expires_ms

    def kind(self):
        a = up(self.address)
        if a == "LOCAL":
            return "LOCAL"
        if a == "TRANSPORT":
            return "TRANSPORT"
        return "NET"


class Queue:
    def __init__(self, inst, db, d):
        self.inst, self.db = inst, db
        self.name = d["name"]
        a = d.get("activation") or {}
        self.status = (a.get("status") or "OFF").upper()
        self.procedure_name = a.get("procedure_name")
        self.max_readers = a.get("max_queue_readers") or 0
        self.ens = []  # event notification names
        self.messages = []  # list of Msg entries on the queue (ready or held by a txn)
        self.last_empty = None
        self.last_activated = None
        self.notified_until = None
        self.procs = []  # running procedures
        self.started_count = 0
        self.waiters = []  # sessions waiting
        self.monitor = False
        self.qid = 0

    def has_monitor(self):
        return self.status == "ON" or bool(self.ens)


class Database:
    def __init__(self, inst, d, now, dbid):
        self.inst = inst
        self.name = d["name"]
        self.bi = d.get("broker_instance") or ""
        self.master_key = d.get("master_key", True)
        self.started = bool(self.master_key)
        self.role = d.get("mirroring_role")
        self.procedures = {p["name"]: p for p in d.get("procedures", [])}
        self.queues = {}
        for i, q in enumerate(d.get("queues", [])):
            qq = Queue(inst, self, q)
            qq.qid = 1000 * dbid + i + 1
            self.queues[q["name"]] = qq
        self.services = {s["name"]: s["queue"] for s in d.get("services", [])}
        for en in d.get("event_notifications", []):
            if en.get("event", "QUEUE_ACTIVATION") == "QUEUE_ACTIVATION" and en["queue"] in self.queues:
                self.queues[en["queue"]].ens.append(en["name"])
        self.routes = [Route(r, now) for r in d.get("routes", [])]
        self.dbid = dbid
        self.ack_cleanup = True
        self.has_dialogs = False

    def serving(self):
        return self.started and self.role != "mirror"


class Instance:
    def __init__(self, d, now):
        self.name = d["name"]
        self.address = d.get("address") or ""
        self.cpus = d.get("cpus") or 1
        self.forwarding = bool(d.get("message_forwarding"))
        self.msdb = [Route(r, now) for r in d.get("msdb_routes", [])]
        self.dbs = {}
        for i, db in enumerate(d.get("databases", [])):
            self.dbs[db["name"]] = Database(self, db, now, 5 + i)
        self.handlers = 2 * self.cpus
        self.running_handlers = self.handlers
        self.reachable = True
        self.conns = {}  # upper address -> dict(address, opened, last)
        self.suppressed = {}  # upper address -> until ms
        self.waiting = []  # Wait entries
        self.buffers = []  # dispatcher buffers: dict(db, msg, arrived, save_at)
        self.saving_mode = "running"
        self.saving_delay_ms = 0
        self.tick = 0
        self.route_changes = []  # (time, service or None)
        self.expired_seen = set()
        self.failed = set()  # dialogs failed at this transmitter
        self.pending_requests = set()  # (table, route name, service)

    def table(self, dbname):
        if dbname is None or dbname == "msdb":
            return self.msdb
        return self.dbs[dbname].routes


class Msg:
    def __init__(self, dialog, seq, from_target, bi):
        self.dialog = dialog
        self.seq = seq
        self.from_target = from_target
        self.bi = bi
        self.hops = 0
        self.group = None
        self.arrived = 0
        self.held_by = None  # session holding it in an open transaction
        self.qorder = 0
        self.origin = None

    def key(self):
        return (self.dialog.name, self.seq, self.from_target)


class Dialog:
    def __init__(self, name, inst, db, from_service, to_service, to_bi):
        self.name = name
        self.inst = inst
        self.db = db
        self.from_service = from_service
        self.to_service = to_service
        self.to_bi = to_bi
        self.far_bi = to_bi
        self.acknowledged = False
        self.next_seq = {False: 0, True: 0}
        self.target = None  # (inst, db)
        self.lost = {}  # (seq, from_target) -> every


class Session:
    def __init__(self, name, spid):
        self.name = name
        self.spid = spid
        self.txn = False
        self.held = []  # (queue, msg) received in the open transaction
        self.locks = set()  # groups locked
        self.txn_queues = set()
        self.waiting = None  # dict describing the wait
        self.proc = None


class Proc:
    def __init__(self, queue, task, session, behaviour):
        self.queue = queue
        self.task = task
        self.session = session
        self.b = behaviour
        self.alive = True


class Broker:
    def __init__(self):
        self.reset(0)

    def reset(self, now):
        self.now = now
        self.events = []
        self.agenda = []
        self.seqno = 0
        self.looks = []
        self.instances = {}
        self.dialogs = {}
        self.sessions = {}
        self.spid = 50
        self.endpoints = {}  # (bi, dialog, from_target) -> next expected seq
        self.groups = {}
        self.gcount = 0
        self.start_ms = now

    # ------------------------------------------------------------------ helpers
    def tick_order(self):
        self.order = getattr(self, "order", 0) + 1
        return self.order

    def emit(self, kind, **f):
        e = {"at_ms": self.now, "kind": kind}
        e.update(f)
        self.events.append(e)

    def trace(self, kind, **f):
        if TRACE:
            self.emit(kind, **f)

    def schedule(self, t, fn, *args):
        self.seqno += 1
        heapq.heappush(self.agenda, (t, self.seqno, fn, args))

    def session(self, name):
        s = self.sessions.get(name)
        if s is None:
            self.spid += 1
            s = Session(name, self.spid)
            self.sessions[name] = s
        return s

    def group_of(self, dialog, from_target):
        # the group of the receiving endpoint: target side gets initiator messages
        k = (dialog.name, not from_target)
        g = self.groups.get(k)
        if g is None:
            self.gcount += 1
            g = "%08X-0000-4000-8000-%012X" % (self.gcount, self.gcount)
            self.groups[k] = g
        return g

    def inst_by_addr(self, addr):
        for i in self.instances.values():
            if up(i.address) == up(addr):
                return i
        return None

    def find_queue(self, q):
        try:
            return self.instances[q["instance"]].dbs[q["database"]].queues[q["queue"]]
        except (KeyError, TypeError):
            raise Refuse("no queue %r" % (q,))

    def qfields(self, q):
        return {"instance": q.inst.name, "database": q.db.name, "queue": q.name}

    def mfields(self, m):
        return {"dialog": m.dialog.name, "from_target": m.from_target, "message_sequence_number": m.seq}

    # ------------------------------------------------------------------ time
    def run_until(self, t):
        while True:
            if self.agenda and self.agenda[0][0] <= self.now:
                _, _, fn, args = heapq.heappop(self.agenda)
                fn(*args)
                continue
            if self.looks:
                q, trig = self.looks.pop(0)
                self.look(q, trig)
                continue
            if self.agenda and self.agenda[0][0] <= t:
                self.now = self.agenda[0][0]
                continue
            break
        self.now = max(self.now, t)

    # ------------------------------------------------------------------ start
    def start(self, cmd):
        self.reset(cmd["at_ms"])
        topo = cmd["topology"]
        for i in topo.get("instances", []):
            inst = Instance(i, self.now)
            self.instances[inst.name] = inst
        self.emit("broker_started")
        for inst in self.instances.values():
            self.emit("task_handlers_started", instance=inst.name, count=inst.handlers)
            for db in inst.dbs.values():
                if db.started:
                    self.emit("database_broker_started", instance=inst.name, database=db.name)
                else:
                    self.emit("database_broker_start_failed", instance=inst.name, database=db.name,
                              reason="missing master key")
                for q in db.queues.values():
                    if q.has_monitor():
                        q.monitor = True
                        self.emit("monitor_created", **self.qfields(q))
            self.schedule(self.now + TIMER_MS, self.timer, inst)

    # ------------------------------------------------------------------ periodic
    def timer(self, inst):
        inst.tick += 1
        n = inst.tick
        tasks = ["queue monitors", "task handlers", "message dispatcher"]
        if n % 2 == 0:
            tasks += ["transport connections", "transmitter"]
        if n % 5 == 0:
            tasks += ["idle connections", "forwarder", "broker start",
                      "broker configuration notification", "acknowledged message clean-up"]
        self.trace("timer_notification", instance=inst.name, number=n, tasks=tasks)
        self.schedule(self.now + TIMER_MS, self.timer, inst)
        # 1: queue monitors
        for db in inst.dbs.values():
            for q in db.queues.values():
                if q.monitor:
                    self.looks.append((q, "timer notification"))
        # 2: task handlers
        if inst.running_handlers < inst.handlers:
            c = inst.handlers - inst.running_handlers
            inst.running_handlers = inst.handlers
            self.emit("task_handlers_restarted", instance=inst.name, count=c)
        # 3: dispatcher
        self.dispatcher_clean(inst)
        if n % 2 == 0:
            self.transport_connect(inst)
            self.reclassify(inst)
        if n % 5 == 0:
            for a, c in list(inst.conns.items()):
                if self.now - c["last"] >= IDLE_CLOSE_MS:
                    del inst.conns[a]
                    self.emit("connection_closed", instance=inst.name, address=c["address"], reason="idle")
            for w in list(inst.waiting):
                if w["fwd"] and self.now - w["received"] >= FORWARD_STALE_MS:
                    self.remove_wait(inst, w)
                    self.emit("forwarded_message_deleted", instance=inst.name, **self.mfields(w["msg"]))
            for db in inst.dbs.values():
                if not db.started and db.master_key:
                    db.started = True
                    self.emit("database_broker_started", instance=inst.name, database=db.name)
                    self.retry_all(inst)
            for db in inst.dbs.values():
                if not db.ack_cleanup and db.has_dialogs:
                    db.ack_cleanup = True
                    self.emit("ack_cleanup_resumed", instance=inst.name, database=db.name)

    def retry_all(self, inst):
        pass

    # ------------------------------------------------------------------ activation
    def unread(self, q):
        return [m for m in q.messages if m.held_by is None]

    def waiting_readers(self, q):
        n = 0
        for s in q.waiters:
            w = s.waiting
            if w["stmt"] == "GET CONVERSATION GROUP" or not w["where"]:
                n += 1
        return n

    def look(self, q, trig, was_empty=False):
        if not q.monitor:
            return
        necessary = None
        running = len(q.procs)
        if trig.startswith("arrival:"):
            was_empty = trig.endswith("1")
            trig = "message arrived"
            if was_empty and running == 0:
                necessary = "ACT-06"
        if necessary is None and self.unread(q) and self.waiting_readers(q) == 0:
            win = int(PARAMS["activation_empty_window_s"] * 1000)
            if q.last_empty is None or self.now - q.last_empty >= win:
                necessary = "ACT-07"
        if necessary is None:
            return
        self.trace("activation_necessary", rule=necessary, trigger=trig, **self.qfields(q))
        # internal
        start = False
        if q.status == "ON" and q.procedure_name:
            if len(q.procs) < q.max_readers:
                start = True
            else:
                self.trace("activation_withheld", reason="MAX_QUEUE_READERS", **self.qfields(q))
        # external (decided by the same look, with the time-out as it stood at the look)
        if q.ens:
            if q.notified_until is None:
                for en in q.ens:
                    self.emit("event_notification", notification=en, event_type="QUEUE_ACTIVATION",
                              **self.qfields(q))
                q.last_activated = self.now
                t = self.now + int(round(PARAMS["external_activation_timeout_s"] * 1000))
                q.notified_until = t
                self.schedule(t, self.ea_timeout, q, t)
            else:
                self.trace("activation_withheld", reason="notification time-out", **self.qfields(q))
        if start:
            self.start_proc(q)

    def ea_timeout(self, q, t):
        if q.notified_until != t:
            return
        q.notified_until = None
        self.emit("activation_time_out", **self.qfields(q))
        self.looks.append((q, "external activation time-out"))

    def end_ea(self, q):
        if q.notified_until is not None:
            q.notified_until = None

    def start_proc(self, q):
        q.started_count += 1
        n = q.started_count
        sname = "%s#%d" % (q.name, n)
        s = self.session(sname)
        b = q.db.procedures.get(q.procedure_name) or {"name": q.procedure_name, "receives": False}
        p = Proc(q, n, s, b)
        s.proc = p
        q.procs.append(p)
        q.last_activated = self.now
        self.emit("procedure_started", procedure_name=q.procedure_name, spid=s.spid, task=n, **self.qfields(q))
        if b.get("receives", True):
            self.proc_receive(p)

    def proc_receive(self, p):
        if not p.alive:
            return
        s = p.session
        s.txn = True
        top = p.b.get("receive_top", 1)
        self.do_receive(s, p.queue, top, None, None, p.b.get("waitfor_ms"))

    def proc_got(self, p, got):
        """Called when a procedure's RECEIVE finished: got rows or not."""
        if not p.alive:
            return
        if got:
            self.schedule(self.now + int(p.b.get("work_ms") or 0), self.proc_step, p)
        else:
            self.commit_session(p.session)
            self.proc_exit(p, "empty RECEIVE")

    def proc_step(self, p):
        if not p.alive:
            return
        self.commit_session(p.session)
        self.proc_receive(p)

    def proc_exit(self, p, reason):
        q = p.queue
        p.alive = False
        s = p.session
        if s.waiting:
            self.unwait(s)
        if s.txn:
            self.commit_session(s)
        if p in q.procs:
            q.procs.remove(p)
        self.emit("procedure_exited", reason=reason, spid=s.spid, task=p.task, **self.qfields(q))
        if not q.procs:
            self.looks.append((q, "all procedures exited"))

    # ------------------------------------------------------------------ receive
    def pick_group(self, s, q, where_dialog, where_group):
        cands = []
        for m in q.messages:
            if m.held_by is not None:
                continue
            owner = self.lock_owner(m.group)
            if owner is not None and owner is not s:
                continue
            if where_dialog is not None and m.dialog.name != where_dialog:
                continue
            if where_group is not None:
                d = self.dialogs.get(where_group)
                if d is None:
                    continue
                if m.group != self.group_of(d, m.from_target) and m.group not in self.dialog_groups(d):
                    continue
            cands.append(m)
        if not cands:
            return None
        cands.sort(key=lambda m: (m.arrived, m.qorder))
        return cands[0].group

    def dialog_groups(self, d):
        return [g for (dn, _), g in self.groups.items() if dn == d.name]

    def lock_owner(self, g):
        for s in self.sessions.values():
            if g in s.locks:
                return s
        return None

    def take(self, s, q, g, top, where_dialog):
        ms = [m for m in q.messages if m.group == g and m.held_by is None
              and (where_dialog is None or m.dialog.name == where_dialog)]
        ms.sort(key=lambda m: (m.arrived, m.qorder))
        if top is not None:
            ms = ms[:top]
        for m in ms:
            if s.txn:
                m.held_by = s
                s.held.append((q, m))
            else:
                q.messages.remove(m)
        if s.txn:
            s.locks.add(g)
            s.txn_queues.add(q)
        return ms

    def do_receive(self, s, q, top, where_dialog, where_group, waitfor, stmt="RECEIVE"):
        has_where = where_dialog is not None or where_group is not None
        if stmt == "RECEIVE":
            self.end_ea(q)
        if s.txn and stmt == "RECEIVE":
            s.txn_queues.add(q)
        g = self.pick_group(s, q, where_dialog, where_group)
        if g is not None:
            self.deliver_rows(s, q, g, top, where_dialog, has_where, stmt)
            return
        if waitfor is not None and waitfor > 0:
            s.waiting = {"queue": q, "top": top, "where": has_where, "wd": where_dialog, "wg": where_group,
                         "stmt": stmt, "since": self.now, "until": self.now + waitfor}
            q.waiters.append(s)
            self.emit("reader_waiting", session=s.name, statement=stmt, has_where=has_where, **self.qfields(q))
            self.schedule(self.now + waitfor, self.wait_timeout, s, s.waiting)
            if stmt == "RECEIVE":
                self.looks.append((q, "RECEIVE"))
            return
        self.empty(s, q, has_where, stmt)

    def empty(self, s, q, has_where, stmt):
        if not has_where:
            q.last_empty = self.now
        self.emit("empty_result", session=s.name, statement=stmt, has_where=has_where, rows=[],
                  conversation_group=None, **self.qfields(q))
        if stmt == "RECEIVE":
            self.looks.append((q, "RECEIVE"))
        if s.proc is not None:
            self.proc_got(s.proc, False)

    def deliver_rows(self, s, q, g, top, where_dialog, has_where, stmt):
        if stmt == "RECEIVE":
            ms = self.take(s, q, g, top, where_dialog)
            rows = [{"dialog": m.dialog.name, "message_sequence_number": m.seq, "conversation_group": g}
                    for m in ms]
        else:
            if s.txn:
                s.locks.add(g)
            rows = []
        self.emit("rows_returned", session=s.name, statement=stmt, has_where=has_where, rows=rows,
                  conversation_group=g, **self.qfields(q))
        if stmt == "RECEIVE":
            self.looks.append((q, "RECEIVE"))
        if s.proc is not None:
            self.proc_got(s.proc, True)

    def wait_timeout(self, s, w):
        if s.waiting is not w:
            return
        q = w["queue"]
        self.unwait(s)
        self.empty(s, q, w["where"], w["stmt"])

    def unwait(self, s):
        w = s.waiting
        if w and s in w["queue"].waiters:
            w["queue"].waiters.remove(s)
        s.waiting = None

    def serve_waiters(self, q):
        for s in list(q.waiters):
            w = s.waiting
            if w is None:
                continue
            g = self.pick_group(s, q, w["wd"], w["wg"])
            if g is None:
                continue
            self.unwait(s)
            self.deliver_rows(s, q, g, w["top"], w["wd"], w["where"], w["stmt"])

    def commit_session(self, s):
        if not s.txn:
            return False
        qs = set()
        for q, m in s.held:
            if m in q.messages:
                q.messages.remove(m)
            qs.add(q)
        s.held = []
        released = bool(s.locks)
        s.locks = set()
        s.txn = False
        s.txn_queues = set()
        self.emit("transaction_committed", session=s.name)
        if released:
            for inst in self.instances.values():
                for db in inst.dbs.values():
                    for q in db.queues.values():
                        if q.waiters:
                            self.serve_waiters(q)
        return True

    def rollback_session(self, s):
        qs = set(s.txn_queues)
        n = 0
        for q, m in s.held:
            m.held_by = None
            n += 1
            qs.add(q)
        s.held = []
        s.locks = set()
        s.txn = False
        s.txn_queues = set()
        self.emit("transaction_rolled_back", session=s.name, returned=n)
        for inst in self.instances.values():
            for db in inst.dbs.values():
                for q in db.queues.values():
                    if q.waiters:
                        self.serve_waiters(q)
        for q in qs:
            self.looks.append((q, "rollback"))

    # ------------------------------------------------------------------ delivery
    def enqueue(self, db, m):
        """A message reaches the target queue of its service in db."""
        svc = m.dialog.from_service if m.from_target else m.dialog.to_service
        qname = db.services.get(svc)
        q = db.queues.get(qname)
        inst = db.inst
        d = m.dialog
        k = (db.bi, d.name, m.from_target)
        self.endpoints[k] = max(self.endpoints.get(k, 0), m.seq + 1)
        db.has_dialogs = True
        if not m.from_target and d.target is None:
            d.target = (inst.name, db.name)
        was_empty = not self.unread(q)
        m.group = self.group_of(d, m.from_target)
        m.arrived = self.now
        m.qorder = self.seqno = self.seqno + 1
        q.messages.append(m)
        self.emit("message_arrived", instance=inst.name, database=db.name, queue=q.name, service=svc,
                  conversation_group=m.group, **self.mfields(m))
        if not m.from_target and not d.acknowledged:
            d.acknowledged = True
            d.far_bi = db.bi
            self.emit("acknowledged", instance=d.inst.name, dialog=d.name, broker_instance=db.bi)
        self.looks.append((q, "arrival:%d" % (1 if was_empty else 0)))
        self.serve_waiters(q)

    # ------------------------------------------------------------------ dialogs
    def begin_dialog(self, c):
        inst = self.instances.get(c["instance"])
        if inst is None or c["database"] not in inst.dbs:
            raise Refuse("no such database")
        db = inst.dbs[c["database"]]
        if c["from_service"] not in db.services:
            raise Refuse("no service %r" % c["from_service"])
        if c["dialog"] in self.dialogs:
            raise Refuse("dialog already begun")
        bi = c.get("to_broker_instance")
        d = Dialog(c["dialog"], inst, db, c["from_service"], c["to_service"], bi)
        self.dialogs[d.name] = d
        db.has_dialogs = True
        self.emit("dialog_begun", instance=inst.name, database=db.name, dialog=d.name,
                  from_service=d.from_service, to_service=d.to_service, to_broker_instance=bi)

    def send(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refuse("no dialog %r has been begun" % c["dialog"])
        ft = bool(c.get("from_target"))
        if ft:
            if d.target is None:
                raise Refuse("the target has not received the dialog")
            inst = self.instances[d.target[0]]
            db = inst.dbs[d.target[1]]
            bi = d.db.bi
        else:
            inst, db = d.inst, d.db
            bi = d.far_bi
        seq = d.next_seq[ft]
        d.next_seq[ft] += 1
        m = Msg(d, seq, ft, bi)
        m.origin = inst
        self.emit("message_sent", instance=inst.name, database=db.name, **self.mfields(m))
        self.route_new(inst, db, m)
        return {"message_sequence_number": seq}

    def svc_of(self, m):
        return m.dialog.from_service if m.from_target else m.dialog.to_service

    def conv_key(self, m):
        return (m.dialog.name, m.from_target)

    def route_new(self, inst, db, m, outside=False):
        # a conversation's messages in line
        for w in inst.waiting:
            if self.conv_key(w["msg"]) == self.conv_key(m):
                self.add_wait(inst, m, "behind", None, "waiting behind an earlier message of its conversation",
                              fwd=outside, db=db)
                return
        self.route(inst, db, m, outside)

    # ------------------------------------------------------------------ waiting
    def add_wait(self, inst, m, why, address, status, fwd=False, db=None, received=None, route=None):
        w = {"msg": m, "why": why, "address": address, "fwd": fwd, "db": db,
             "received": self.now if received is None else received, "since": self.tick_order(), "since_ms": self.now, "route": route}
        inst.waiting.append(w)
        self.emit("transmission_pending", instance=inst.name, status=status, address=address, **self.mfields(m))
        return w

    def remove_wait(self, inst, w):
        if w in inst.waiting:
            inst.waiting.remove(w)

    def release_behind(self, inst, m):
        """The message m went on: route messages waiting behind it."""
        while True:
            nxt = None
            for w in inst.waiting:
                if w["why"] == "behind" and self.conv_key(w["msg"]) == self.conv_key(m):
                    nxt = w
                    break
            if nxt is None:
                return
            # only if nothing else of the conversation waits ahead of it
            ahead = [w for w in inst.waiting if self.conv_key(w["msg"]) == self.conv_key(m)
                     and w["why"] != "behind"]
            if ahead:
                return
            inst.waiting.remove(nxt)
            self.route(inst, nxt["db"], nxt["msg"], nxt["fwd"], received=nxt["received"])
            m = nxt["msg"]

    # ------------------------------------------------------------------ routing
    def db_serving_service(self, inst, svc):
        return [db for db in inst.dbs.values() if db.serving() and svc in db.services]

    def match(self, inst, routes, m, outside):
        svc = self.svc_of(m)
        bi = m.bi
        live = [r for r in routes if not r.expired(self.now)]
        if bi:
            rs = [r for r in live if r.service_name == svc and r.broker_instance is not None
                  and up(r.broker_instance) == up(bi)]
            if rs:
                return "RTM-1", rs, None
        rs = [r for r in live if r.service_name == svc and r.broker_instance is None]
        if rs:
            return "RTM-2", rs, None
        if not bi:
            rs = [r for r in live if r.service_name == svc and r.broker_instance is not None]
            if rs:
                pick = up(rs[0].broker_instance)
                return "RTM-3", [r for r in rs if up(r.broker_instance) == pick], pick
        for r in live:
            if r.service_name == BCN:
                key = (id(routes), r.name, svc)
                if key not in inst.pending_requests:
                    return "RTM-4", [r], None
        rs = [r for r in live if r.service_name is None and r.broker_instance is None]
        if rs:
            return "RTM-5", rs, None
        if bi and self.db_serving_service(inst, svc):
            return "RTM-6", "LOCAL", None
        return "RTM-7", [], None

    def tname(self, inst, db, outside):
        if outside or db is None:
            return "msdb.sys.routes"
        return "%s.sys.routes" % db.name

    def route(self, inst, db, m, outside, received=None, retried=False):
        svc = self.svc_of(m)
        # RTE-05: a reply from outside naming a broker instance of this instance
        if outside and m.from_target and m.bi:
            for tdb in inst.dbs.values():
                if up(tdb.bi) == up(m.bi) and tdb.serving():
                    self.emit("reply_recognised", instance=inst.name, broker_instance=m.bi, **self.mfields(m))
                    self.dispatch(inst, tdb, m)
                    return
        routes = inst.msdb if outside else db.routes
        table = self.tname(inst, db, outside)
        step, rs, pick = self.match(inst, routes, m, outside)
        if step == "RTM-4":
            r = rs[0]
            inst.pending_requests.add((id(routes), r.name, svc))
            self.trace("routes_matched", instance=inst.name, step="RTM-4", table=table, routes=[],
                       broker_instance=None, **self.mfields(m))
            self.emit("routing_requested", instance=inst.name, route=r.name, service=svc, table=table,
                      **self.mfields(m))
            self.delay(inst, db, m, outside, "RTM-4", received)
            return
        if step == "RTM-7":
            self.trace("routes_matched", instance=inst.name, step="RTM-7", table=table, routes=[],
                       broker_instance=None, **self.mfields(m))
            self.delay(inst, db, m, outside, "RTM-7", received)
            return
        if step == "RTM-6":
            self.trace("routes_matched", instance=inst.name, step="RTM-6", table=table,
                       routes=["(as if LOCAL)"], broker_instance=None, **self.mfields(m))
            self.trace("route_chosen", instance=inst.name, step="RTC-2", route="(as if LOCAL)",
                       candidates=["(as if LOCAL)"], **self.mfields(m))
            self.local(inst, db, m, outside, None, received)
            return
        self.trace("routes_matched", instance=inst.name, step=step, table=table, routes=[r.name for r in rs],
                   broker_instance=pick, **self.mfields(m))
        # choose: distinct routes
        distinct = []
        seen = set()
        for r in rs:
            k = (up(r.broker_instance), r.service_name, up(r.address))
            if k in seen:
                continue
            seen.add(k)
            distinct.append(r)
        chosen = None
        c1 = [r for r in distinct if r.mirror_address]
        if c1:
            chosen, cstep, cands = c1[0], "RTC-1", c1
        else:
            c2 = [r for r in distinct if r.kind() == "LOCAL"]
            if c2 and self.db_serving_service(inst, svc):
                chosen, cstep, cands = c2[0], "RTC-2", c2
            else:
                c3 = [r for r in distinct if r.kind() == "NET"]
                if c3:
                    chosen, cstep, cands = c3[0], "RTC-3", c3
                else:
                    c4 = [r for r in distinct if r.kind() == "TRANSPORT"]
                    if c4:
                        chosen, cstep, cands = c4[0], "RTC-4", c4
        if chosen is None:
            self.delay(inst, db, m, outside, "RTC-4", received)
            return
        self.trace("route_chosen", instance=inst.name, step=cstep, route=chosen.name,
                   candidates=[r.name for r in cands], **self.mfields(m))
        if chosen.kind() == "LOCAL":
            self.local(inst, db, m, outside, chosen, received)
            return
        # not LOCAL
        if outside and not inst.forwarding:
            self.drop(inst, m, "RTC-5", "message forwarding is not active")
            return
        if chosen.kind() == "TRANSPORT":
            addr = tcp_base(svc)
            if addr is None:
                self.delay(inst, db, m, outside, "RTC-4", received)
                return
        elif chosen.mirror_address:
            self.mirrored(inst, db, m, outside, chosen, received)
            return
        else:
            addr = chosen.address
        self.to_address(inst, db, m, outside, addr, received)

    def to_address(self, inst, db, m, outside, addr, received=None, route=None):
        if up(addr) == up(inst.address):
            # RTX-2: treated as arriving from outside
            if outside:
                if m.hops >= PARAMS["forward_hop_limit"]:
                    self.drop(inst, m, "RTX-1", "hop limit")
                    return
                m.hops += 1
            self.route(inst, None, m, True)
            return
        if outside:
            if m.hops >= PARAMS["forward_hop_limit"]:
                self.drop(inst, m, "RTX-1", "hop limit")
                return
        self.transmit(inst, db, m, outside, addr, received, route)

    def drop(self, inst, m, rule, reason):
        f = self.mfields(m)
        if TRACE:
            f["rule"] = rule
        self.emit("message_dropped", instance=inst.name, reason=reason, **f)
        self.release_behind(inst, m)

    def delay(self, inst, db, m, outside, step, received=None):
        f = self.mfields(m)
        if TRACE:
            f["step"] = step
        self.emit("conversation_delayed", instance=inst.name, **f)
        w = self.add_wait(inst, m, "delayed", None, "delayed: no route (%s)" % step, fwd=outside, db=db,
                          received=received)
        t = self.now + int(round(PARAMS["delayed_retry_s"] * 1000))
        w["retry_at"] = t
        self.schedule(t, self.retry_delayed, inst, w)

    def retry_delayed(self, inst, w):
        if w not in inst.waiting or w["why"] != "delayed":
            return
        inst.waiting.remove(w)
        self.emit("routing_retried", instance=inst.name, **self.mfields(w["msg"]))
        self.route(inst, w["db"], w["msg"], w["fwd"], received=w["received"])
        self.after_go(inst, w["msg"])

    def after_go(self, inst, m):
        still = any(x["msg"] is m for x in inst.waiting)
        if not still:
            self.release_behind(inst, m)

    def local(self, inst, db, m, outside, route, received):
        svc = self.svc_of(m)
        bi = m.bi or (route.broker_instance if route is not None else None)
        target = None
        if bi:
            for tdb in inst.dbs.values():
                if up(tdb.bi) == up(bi) and tdb.serving() and svc in tdb.services:
                    target = tdb
            if target is None:
                self.drop(inst, m, "RTL-2", "no database of the broker instance holds the service")
                return
        else:
            order = []
            if db is not None and not outside:
                order.append(db)
            order += [x for x in inst.dbs.values() if x is not db]
            for tdb in order:
                if tdb.serving() and svc in tdb.services:
                    target = tdb
                    break
            if target is None:
                self.delay(inst, db, m, outside, "RTC-4", received)
                return
        if outside:
            self.dispatch(inst, target, m)
        else:
            self.enqueue(target, m)
        self.release_behind(inst, m)

    # ------------------------------------------------------------------ mirroring
    def probe_answer(self, addr, m, route):
        tinst = self.inst_by_addr(addr)
        if tinst is None or not tinst.reachable:
            return "unreachable"
        bi = route.broker_instance or m.bi
        svc = self.svc_of(m)
        for db in tinst.dbs.values():
            if (bi and up(db.bi) == up(bi)) or (not bi and svc in db.services):
                return "principal" if db.role != "mirror" else "not principal"
        return "not principal"

    def mirrored(self, inst, db, m, outside, route, received):
        if route.principal is not None and up(route.principal) not in (up(route.address), up(route.mirror_address)):
            route.principal = None
        if route.principal is not None:
            ans = self.probe_answer(route.principal, m, route)
            if ans == "principal":
                self.to_address(inst, db, m, outside, route.principal, received, route)
                return
            self.emit("principal_lost", instance=inst.name, address=route.principal, answer=ans,
                      route=route.name, **self.mfields(m))
            other = route.mirror_address if up(route.principal) == up(route.address) else route.address
            # the lost principal is kept, taken for the principal, until the partner claims the role
            a2 = self.probe_answer(other, m, route)
            self.emit("principal_probe", instance=inst.name, address=other, answer=a2, route=route.name,
                      **self.mfields(m))
            if a2 == "principal":
                route.principal = other
                self.to_address(inst, db, m, outside, other, received, route)
                return
            self.add_wait(inst, m, "principal", None, "waiting for the principal", fwd=outside, db=db,
                          received=received, route=route)
            return
        found = None
        for a in (route.address, route.mirror_address):
            ans = self.probe_answer(a, m, route)
            self.emit("principal_probe", instance=inst.name, address=a, answer=ans, route=route.name,
                      **self.mfields(m))
            if ans == "principal" and found is None:
                found = a
        if found:
            route.principal = found
            self.to_address(inst, db, m, outside, found, received, route)
            return
        self.add_wait(inst, m, "principal", None, "waiting for the principal", fwd=outside, db=db,
                      received=received, route=route)

    # ------------------------------------------------------------------ transport
    def transmit(self, inst, db, m, outside, addr, received=None, route=None):
        ua = up(addr)
        if m.dialog.name in inst.failed:
            self.add_wait(inst, m, "failed", addr, "transmission failed (%s)" % addr, fwd=outside, db=db,
                          received=received, route=route)
            return
        c = inst.conns.get(ua)
        if c is None:
            if inst.suppressed.get(ua, -1) > self.now:
                self.add_wait(inst, m, "connection", addr, "waiting for a connection to %s" % addr, fwd=outside,
                              db=db, received=received, route=route)
                return
            if not self.connect(inst, addr):
                self.add_wait(inst, m, "connection", addr, "waiting for a connection to %s" % addr, fwd=outside,
                              db=db, received=received, route=route)
                return
            c = inst.conns[ua]
        self.send_on(inst, m, c, outside)

    def connect(self, inst, addr):
        t = self.inst_by_addr(addr)
        ua = up(addr)
        if t is None or not t.reachable:
            self.emit("connection_attempt", instance=inst.name, address=addr, result="refused")
            inst.suppressed[ua] = self.now + SUPPRESS_FAILED_MS
            return False
        self.emit("connection_attempt", instance=inst.name, address=addr, result="connected")
        inst.conns[ua] = {"address": addr, "opened": self.now, "last": self.now}
        return True

    def send_on(self, inst, m, c, outside):
        addr = c["address"]
        c["last"] = self.now
        t = self.inst_by_addr(addr)
        if outside:
            m.hops += 1
            self.emit("message_forwarded", instance=inst.name, address=addr, hops=m.hops, **self.mfields(m))
        self.emit("message_transmitted", instance=inst.name, address=addr, to_instance=t.name, **self.mfields(m))
        d = m.dialog
        lk = (m.seq, m.from_target)
        if lk in d.lost:
            if not d.lost[lk]:
                del d.lost[lk]
            self.emit("message_lost_in_transit", instance=inst.name, address=addr, **self.mfields(m))
            self.release_behind(inst, m)
            return
        self.arrive_from_network(t, m)
        self.release_behind(inst, m)

    def arrive_from_network(self, t, m):
        # copy so each instance holds its own
        n = Msg(m.dialog, m.seq, m.from_target, m.bi)
        n.hops = m.hops
        n.origin = getattr(m, "origin", None)
        self.route_new(t, None, n, outside=True)

    def transport_connect(self, inst):
        addrs = []
        for w in inst.waiting:
            if w["why"] == "connection" and w["address"]:
                if up(w["address"]) not in [up(a) for a in addrs]:
                    addrs.append(w["address"])
        for a in addrs:
            ua = up(a)
            if ua in inst.conns:
                self.flush_conn(inst, a)
                continue
            if inst.suppressed.get(ua, -1) > self.now:
                continue
            if self.connect(inst, a):
                self.flush_conn(inst, a)
        # mirrored routes waiting for a principal: ask both again
        for w in list(inst.waiting):
            if w["why"] == "principal" and w in inst.waiting:
                inst.waiting.remove(w)
                self.emit("routing_retried", instance=inst.name, **self.mfields(w["msg"]))
                self.route(inst, w["db"], w["msg"], w["fwd"], received=w["received"])
                self.after_go(inst, w["msg"])

    def mirrored_retry(self, inst, w):
        m = w["msg"]
        route = w["route"]
        found = None
        for a in (route.address, route.mirror_address):
            ans = self.probe_answer(a, m, route)
            self.emit("principal_probe", instance=inst.name, address=a, answer=ans, route=route.name,
                      **self.mfields(m))
            if ans == "principal" and found is None:
                found = a
        if found:
            route.principal = found
            self.to_address(inst, w["db"], m, w["fwd"], found, w["received"], route)
            self.after_go(inst, m)
            return
        inst.waiting.insert(0, w)

    def flush_conn(self, inst, addr):
        ua = up(addr)
        for w in list(inst.waiting):
            if w not in inst.waiting:
                continue
            if w["why"] == "connection" and up(w["address"]) == ua and ua in inst.conns:
                if w["msg"].dialog.name in inst.failed:
                    # the transmitter holds a failed dialog's messages until it reclassifies it
                    w["why"] = "failed"
                    self.emit("transmission_pending", instance=inst.name, status="transmission failed (%s)" % w["address"],
                              address=w["address"], **self.mfields(w["msg"]))
                    continue
                inst.waiting.remove(w)
                self.send_on(inst, w["msg"], inst.conns[ua], w["fwd"])

    def reclassify(self, inst):
        touched = []
        changes = inst.route_changes
        expired = []
        for rt in [inst.msdb] + [db.routes for db in inst.dbs.values()]:
            for r in rt:
                if r.expires_ms is not None and r.expires_ms <= self.now and id(r) not in inst.expired_seen:
                    inst.expired_seen.add(id(r))
                    expired.append(r)
        firsts = []
        seen = set()
        for w in inst.waiting:
            if w["why"] == "behind":
                continue
            k = self.conv_key(w["msg"])
            if k in seen:
                continue
            seen.add(k)
            firsts.append(w)
        for w in firsts:
            m = w["msg"]
            if w["why"] == "behind":
                continue
            svc = self.svc_of(m)
            t = m.dialog.name in inst.failed and w["why"] == "failed"
            if not t:
                for (ct, s) in changes:
                    if ct > w["since"] and (s is None or s == svc):
                        t = True
                for r in expired:
                    if r.expires_ms > w["since_ms"] and (r.service_name is None or r.service_name == svc):
                        t = True
                fresh = w["since_ms"] == self.now  # routed at this instant already (its own time-out)
                if expired and w["why"] == "delayed" and not fresh:
                    t = True
                before = any(ct > w["since"] for (ct, _) in changes) or \
                    any(r.expires_ms > w["since_ms"] for r in expired)
                if w["fwd"] and not fresh and before:
                    # a forwarded message: among them, touched or not, where something changed,
                    # expired or failed at the instance ("No other dialog is: none where nothing changed")
                    t = True
            if t:
                touched.append(w)
        inst.route_changes = []
        names = []
        for w in touched:
            if m_name(w) not in names:
                names.append(m_name(w))
        self.trace("transmitter_reclassified", instance=inst.name, dialogs=names)
        for d in names:
            inst.failed.discard(d)
        for w in touched:
            if w not in inst.waiting:
                continue
            inst.waiting.remove(w)
            self.route(inst, w["db"], w["msg"], w["fwd"], received=w["received"])
            self.after_go(inst, w["msg"])

    def dispatcher_clean(self, inst):
        byconv = {}
        for b in inst.buffers:
            byconv.setdefault((b["db"].bi, b["msg"].dialog.name, b["msg"].from_target), []).append(b)
        dels = []
        for k, bs in byconv.items():
            exp = self.endpoints.get(k, 0)
            for b in sorted(bs, key=lambda b: b["msg"].seq):
                if b["msg"].seq == exp:
                    exp += 1
                    if self.now - b["arrived"] > DISPATCHER_STALE_MS:
                        dels.append((b, "stale"))
                else:
                    dels.append((b, "out of order"))
        for b, why in dels:
            inst.buffers.remove(b)
            self.emit("dispatcher_deleted", instance=inst.name, database=b["db"].name, reason=why,
                      **self.mfields(b["msg"]))

    def dispatch(self, inst, db, m):
        b = {"db": db, "msg": m, "arrived": self.now, "save_at": None}
        # a copy already held or saved is dropped
        k = (db.bi, m.dialog.name, m.from_target)
        if m.seq < self.endpoints.get(k, 0):
            return
        for x in inst.buffers:
            if x["msg"].key() == m.key():
                return
        inst.buffers.append(b)
        self.emit("dispatcher_buffered", instance=inst.name, database=db.name, **self.mfields(m))
        if inst.saving_mode == "running":
            if inst.saving_delay_ms <= 0:
                self.save_ready(inst)
            else:
                b["save_at"] = self.now + inst.saving_delay_ms
                self.schedule(b["save_at"], self.save_ready, inst)

    def save_ready(self, inst):
        if inst.saving_mode != "running":
            return
        progress = True
        while progress:
            progress = False
            for b in list(inst.buffers):
                if b["save_at"] is not None and b["save_at"] > self.now:
                    continue
                m = b["msg"]
                k = (b["db"].bi, m.dialog.name, m.from_target)
                if m.seq == self.endpoints.get(k, 0):
                    inst.buffers.remove(b)
                    self.enqueue(b["db"], m)
                    progress = True

    # ------------------------------------------------------------------ commands
    def execute(self, c):
        kind = c["kind"]
        at = c["at_ms"]
        if kind == "start":
            self.start(c)
            res = {}
        else:
            self.run_until(at)
            fn = getattr(self, "cmd_" + kind, None)
            if fn is None:
                raise Refuse("unknown command %r" % kind)
            res = fn(c) or {}
        self.run_until(at)
        ev = self.events
        self.events = []
        return res, ev

    def cmd_advance_time(self, c):
        return {}

    def cmd_begin_dialog(self, c):
        self.begin_dialog(c)

    def cmd_send(self, c):
        return self.send(c)

    def cmd_begin_transaction(self, c):
        s = self.session(c["session"])
        if s.txn:
            raise Refuse("a transaction is already open")
        s.txn = True

    def cmd_commit(self, c):
        s = self.session(c["session"])
        if not s.txn:
            raise Refuse("COMMIT without a transaction")
        self.commit_session(s)

    def cmd_rollback(self, c):
        s = self.session(c["session"])
        if not s.txn:
            raise Refuse("ROLLBACK without a transaction")
        self.rollback_session(s)

    def cmd_receive(self, c):
        q = self.find_queue(c["queue"])
        s = self.session(c["session"])
        if s.waiting:
            raise Refuse("the session is waiting")
        wd = c.get("where_dialog")
        wg = c.get("where_group")
        if wd is not None and wd not in self.dialogs:
            raise Refuse("no dialog %r" % wd)
        if wg is not None and wg not in self.dialogs:
            raise Refuse("no dialog %r" % wg)
        self.do_receive(s, q, c.get("top"), wd, wg, c.get("waitfor_ms"))

    def cmd_get_conversation_group(self, c):
        q = self.find_queue(c["queue"])
        s = self.session(c["session"])
        if s.waiting:
            raise Refuse("the session is waiting")
        self.do_receive(s, q, None, None, None, c.get("waitfor_ms"), stmt="GET CONVERSATION GROUP")

    def update_monitor(self, q):
        h = q.has_monitor()
        if h and not q.monitor:
            q.monitor = True
            self.emit("monitor_created", **self.qfields(q))
        elif not h and q.monitor:
            q.monitor = False
            q.notified_until = None
            self.emit("monitor_removed", **self.qfields(q))

    def cmd_alter_queue(self, c):
        q = self.find_queue(c["queue"])
        if c.get("status") is not None:
            if c["status"].upper() not in ("ON", "OFF"):
                raise Refuse("STATUS must be ON or OFF")
            q.status = c["status"].upper()
        if c.get("procedure_name") is not None:
            q.procedure_name = c["procedure_name"]
        if c.get("max_queue_readers") is not None:
            if c["max_queue_readers"] < 0:
                raise Refuse("MAX_QUEUE_READERS must not be negative")
            q.max_readers = c["max_queue_readers"]
        self.emit("queue_altered", **self.qfields(q))
        self.update_monitor(q)
        self.looks.append((q, "ALTER QUEUE"))

    def cmd_create_event_notification(self, c):
        q = self.find_queue(c["queue"])
        if c["name"] in q.ens:
            raise Refuse("event notification exists")
        q.ens.append(c["name"])
        self.update_monitor(q)

    def cmd_drop_event_notification(self, c):
        q = self.find_queue(c["queue"])
        if c["name"] not in q.ens:
            raise Refuse("no such event notification")
        q.ens.remove(c["name"])
        if not q.ens:
            q.notified_until = None
        self.update_monitor(q)

    def cmd_exit_procedure(self, c):
        q = self.find_queue(c["queue"])
        for p in q.procs:
            if p.task == c["task"]:
                self.proc_exit(p, "exited")
                return
        raise Refuse("no running task %r" % c["task"])

    def route_table(self, c):
        inst = self.instances.get(c["instance"])
        if inst is None:
            raise Refuse("no instance")
        dbn = c.get("database")
        if dbn is not None and dbn not in inst.dbs:
            raise Refuse("no database")
        return inst, inst.table(dbn), (dbn if dbn is not None else "msdb")

    def check_addr(self, a, local_ok=True):
        if a is None:
            return
        u = up(a)
        if u in ("LOCAL", "TRANSPORT"):
            if not local_ok:
                raise Refuse("malformed address")
            return
        if not u.startswith("TCP://") or len(u) <= 6:
            raise Refuse("malformed address %r" % a)

    def note_change(self, inst, names):
        for n in names:
            inst.route_changes.append((self.tick_order(), n))

    def cmd_create_route(self, c, event="route_created"):
        inst, table, dbn = self.route_table(c)
        r = c["route"]
        if any(x.name == r["name"] for x in table):
            raise Refuse("route exists")
        self.check_addr(r.get("address") or "LOCAL")
        self.check_addr(r.get("mirror_address"), local_ok=False)
        nr = Route(r, self.now)
        table.append(nr)
        self.emit(event, instance=inst.name, database=dbn, route=nr.name)
        self.note_change(inst, [nr.service_name])

    def cmd_answer_routing_request(self, c):
        inst, table, dbn = self.route_table(c)
        r = c["route"]
        svc = r.get("service_name")
        tid = id(table)
        inst.pending_requests = {k for k in inst.pending_requests if not (k[0] == tid and k[2] == svc)}
        if any(x.name == r["name"] for x in table):
            # replace
            table[:] = [x for x in table if x.name != r["name"]]
        nr = Route(r, self.now)
        table.append(nr)
        self.emit("route_created", instance=inst.name, database=dbn, route=nr.name)
        self.note_change(inst, [nr.service_name])

    def cmd_alter_route(self, c):
        inst, table, dbn = self.route_table(c)
        r = c["route"]
        for x in table:
            if x.name == r["name"]:
                break
        else:
            raise Refuse("no route %r" % r["name"])
        self.check_addr(r.get("address"))
        self.check_addr(r.get("mirror_address"), local_ok=False)
        old = x.service_name
        if r.get("service_name") is not None:
            x.service_name = r["service_name"]
        if r.get("broker_instance") is not None:
            x.broker_instance = r["broker_instance"]
        if r.get("address") is not None:
            x.address = r["address"]
        if r.get("mirror_address") is not None:
            x.mirror_address = r["mirror_address"]
        if r.get("lifetime_s") is not None:
            x.expires_ms = self.now + int(round(r["lifetime_s"] * 1000))
            inst.expired_seen.discard(id(x))
        if x.principal is not None and up(x.principal) not in (up(x.address), up(x.mirror_address)):
            x.principal = None
        self.emit("route_altered", instance=inst.name, database=dbn, route=x.name)
        self.note_change(inst, [old, x.service_name])

    def cmd_drop_route(self, c):
        inst, table, dbn = self.route_table(c)
        for x in table:
            if x.name == c["name"]:
                table.remove(x)
                self.emit("route_dropped", instance=inst.name, database=dbn, route=x.name)
                self.note_change(inst, [x.service_name])
                return
        raise Refuse("no route %r" % c["name"])

    def cmd_set_message_forwarding(self, c):
        inst = self.instances[c["instance"]]
        inst.forwarding = bool(c["active"])

    def cmd_set_reachable(self, c):
        inst = self.instances.get(c["instance"])
        if inst is None:
            raise Refuse("no instance")
        inst.reachable = bool(c["reachable"])
        if not inst.reachable:
            for o in self.instances.values():
                if o is inst:
                    continue
                ua = up(inst.address)
                if ua in o.conns:
                    cc = o.conns.pop(ua)
                    self.emit("connection_closed", instance=o.name, address=cc["address"], reason="disconnected")
                    o.suppressed[ua] = self.now + SUPPRESS_DISCONNECT_MS

    def cmd_failover(self, c):
        inst = self.instances.get(c["instance"])
        if inst is None or c["database"] not in inst.dbs:
            raise Refuse("no database")
        db = inst.dbs[c["database"]]
        for o in self.instances.values():
            for x in o.dbs.values():
                if x is not db and up(x.bi) == up(db.bi) and x.role is not None:
                    x.role = "mirror"
        db.role = "principal"

    def cmd_fail_task_handlers(self, c):
        inst = self.instances[c["instance"]]
        inst.running_handlers = max(0, inst.running_handlers - c["count"])

    def cmd_set_dispatcher_saving(self, c):
        inst = self.instances[c["instance"]]
        inst.saving_mode = c["mode"]
        inst.saving_delay_ms = int(round((c.get("delay_s") or 0) * 1000))
        if inst.saving_mode == "running":
            for b in inst.buffers:
                b["save_at"] = (b["arrived"] + inst.saving_delay_ms) if inst.saving_delay_ms > 0 else None
                if b["save_at"] is not None and b["save_at"] > self.now:
                    self.schedule(b["save_at"], self.save_ready, inst)
            self.save_ready(inst)

    def cmd_lose_in_transit(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refuse("no dialog")
        d.lost[(c["sequence"], bool(c.get("from_target")))] = bool(c.get("every"))

    def cmd_drop_connection(self, c):
        inst = self.instances[c["instance"]]
        ua = up(c["address"])
        if ua in inst.conns:
            cc = inst.conns.pop(ua)
            self.emit("connection_closed", instance=inst.name, address=cc["address"], reason="disconnected")
            inst.suppressed[ua] = self.now + SUPPRESS_DISCONNECT_MS

    def cmd_fail_transmission(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refuse("no dialog")
        d.inst.failed.add(d.name)
        if d.target is not None:
            self.instances[d.target[0]].failed.add(d.name)

    def cmd_create_master_key(self, c):
        inst = self.instances[c["instance"]]
        db = inst.dbs[c["database"]]
        db.master_key = True

    def cmd_stop_ack_cleanup(self, c):
        inst = self.instances[c["instance"]]
        inst.dbs[c["database"]].ack_cleanup = False

    # ------------------------------------------------------------------ views
    def cmd_query_view(self, c):
        v = c["view"]
        iname = c.get("instance")
        insts = [i for i in self.instances.values() if iname is None or i.name == iname]
        rows = []
        if v == "sys.dm_broker_queue_monitors":
            for inst in self.instances.values():
                for db in inst.dbs.values():
                    for q in db.queues.values():
                        if not q.monitor:
                            continue
                        if q.notified_until is not None:
                            st = "NOTIFIED"
                        elif q.procs or q.waiters:
                            st = "RECEIVES_OCCURRING"
                        else:
                            st = "INACTIVE"
                        rows.append({"database_id": db.dbid, "queue_id": q.qid, "instance": inst.name,
                                     "database": db.name, "queue": q.name, "state": st,
                                     "last_empty_rowset_time": q.last_empty,
                                     "last_activated_time": q.last_activated,
                                     "tasks_waiting": self.waiting_readers(q)})
        elif v == "sys.dm_broker_activated_tasks":
            for inst in self.instances.values():
                for db in inst.dbs.values():
                    for q in db.queues.values():
                        for p in sorted(q.procs, key=lambda p: p.task):
                            rows.append({"spid": p.session.spid, "database_id": db.dbid, "queue_id": q.qid,
                                         "instance": inst.name, "database": db.name, "queue": q.name,
                                         "task": p.task, "procedure_name": p.b.get("name") or q.procedure_name})
        elif v == "sys.routes":
            inst = self.instances.get(iname)
            if inst is None:
                raise Refuse("sys.routes needs an instance")
            dbn = c.get("database")
            table = inst.table(dbn)
            for r in table:
                rows.append({"instance": inst.name, "database": dbn if dbn is not None else "msdb",
                             "name": r.name, "remote_service_name": r.service_name,
                             "broker_instance": r.broker_instance, "address": r.address,
                             "mirror_address": r.mirror_address, "expires_ms": r.expires_ms})
        elif v == "sys.transmission_queue":
            for inst in insts:
                for w in inst.waiting:
                    if w["fwd"]:
                        continue
                    m = w["msg"]
                    rows.append({"instance": inst.name, "dialog": m.dialog.name, "message_sequence_number": m.seq,
                                 "from_target": m.from_target, "to_service_name": self.svc_of(m),
                                 "transmission_status": w["why"] + (" " + w["address"] if w["address"] else ""),
                                 "received_ms": w["received"]})
        elif v == "sbtck.forwarder":
            for inst in insts:
                for w in inst.waiting:
                    if not w["fwd"]:
                        continue
                    m = w["msg"]
                    rows.append({"instance": inst.name, "dialog": m.dialog.name, "message_sequence_number": m.seq,
                                 "from_target": m.from_target, "to_service_name": self.svc_of(m),
                                 "transmission_status": w["why"] + (" " + w["address"] if w["address"] else ""),
                                 "received_ms": w["received"]})
        elif v == "sys.conversation_endpoints":
            for d in self.dialogs.values():
                rows.append({"dialog": d.name, "instance": d.inst.name, "database": d.db.name,
                             "far_service": d.to_service, "far_broker_instance": d.far_bi,
                             "acknowledged": d.acknowledged})
        elif v == "sys.dm_broker_connections":
            for inst in insts:
                for cc in inst.conns.values():
                    rows.append({"instance": inst.name, "address": cc["address"], "state": "CONNECTED",
                                 "opened_ms": cc["opened"], "last_activity_ms": cc["last"]})
        elif v == "sbtck.dispatcher_buffers":
            for inst in insts:
                for b in inst.buffers:
                    m = b["msg"]
                    rows.append({"instance": inst.name, "database": b["db"].name, "dialog": m.dialog.name,
                                 "message_sequence_number": m.seq, "from_target": m.from_target,
                                 "arrived_ms": b["arrived"]})
        elif v == "sbtck.periodic_state":
            for inst in insts:
                for db in inst.dbs.values():
                    rows.append({"instance": inst.name, "task_handlers": inst.handlers,
                                 "running_task_handlers": inst.running_handlers, "database": db.name,
                                 "broker_started": db.started, "ack_cleanup_running": db.ack_cleanup})
        else:
            raise Refuse("no view %r" % v)
        return {"rows": rows}


def m_name(w):
    return w["msg"].dialog.name


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
            resp = {"id": rid, "ok": True, "result": {"name": "cr15 broker", "version": "1.0", "protocol": "2.3",
                                                      "capabilities": CAPS, "params": PARAMS}}
        elif op == "bye":
            out.write(json.dumps({"id": rid, "ok": True}) + "\n")
            out.flush()
            return
        elif op == "execute":
            try:
                res, ev = b.execute(req["command"])
                resp = {"id": rid, "ok": True, "result": res, "events": ev}
            except Refuse as e:
                ev = b.events
                b.events = []
                resp = {"id": rid, "ok": False, "error": str(e), "events": ev}
            except Exception as e:  # noqa
                traceback.print_exc(file=sys.stderr)
                ev = b.events
                b.events = []
                resp = {"id": rid, "ok": False, "fault": True, "error": "%s: %s" % (type(e).__name__, e),
                        "events": ev}
        else:
            resp = {"id": rid, "ok": False, "error": "unknown op %r" % op}
        out.write(json.dumps(resp) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
