#!/usr/bin/env python3
"""cleanroom9: a Service Broker model speaking the sbtck protocol (2.2) over stdio.

Written from the kit's user documentation and the source documents only.
Standard library only.  SBTCK_CR9_NO_TRACE=1 leaves the decision trace out.
"""
import json
import os
import re
import sys
import traceback

TRACE = os.environ.get("SBTCK_CR9_NO_TRACE") != "1"
DEBUG = os.environ.get("SBTCK_CR9_DEBUG")

PARAMS = {
    "activation_empty_window_s": 5,
    "external_activation_timeout_s": 60,
    "delayed_retry_s": 10,
    "forward_hop_limit": 4,
}
TIMER_MS = 5000
STALE_MS = 10000
SUPPRESS_DISC_MS = 15000
SUPPRESS_FAIL_MS = 60000
IDLE_MS = 90000
FWD_STALE_MS = 60000
BCN_SERVICE = "http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice"
ADDR_RE = re.compile(r"^TCP://[^/:\s]+:\d+$", re.I)


class Refuse(Exception):
    pass


def low(a):
    return a.lower() if isinstance(a, str) else a


def same_bi(a, b):
    return a is not None and b is not None and a.lower() == b.lower()


class Route:
    def __init__(self, d, now):
        self.name = d.get("name")
        self.service_name = d.get("service_name")
        self.broker_instance = d.get("broker_instance")
        self.address = d.get("address") or "LOCAL"
        self.mirror_address = d.get("mirror_address")
        self.lifetime_s = d.get("lifetime_s")
        self.set_expiry(now)
        self.principal = None  # learnt principal address (mirrored routes)
        self.pending = set()  # services a dynamic routing request is pending for

    def set_expiry(self, now):
        self.expires_ms = None if self.lifetime_s is None else int(now + self.lifetime_s * 1000)

    def expired(self, now):
        return self.expires_ms is not None and now >= self.expires_ms

    def kind(self):
        a = self.address.upper()
        if a == "LOCAL":
            return "LOCAL"
        if a == "TRANSPORT":
            return "TRANSPORT"
        return "NET"


class Queue:
    def __init__(self, inst, db, d, qid):
        self.inst = inst
        self.db = db
        self.name = d["name"]
        self.qid = qid
        act = d.get("activation") or {}
        self.status = (act.get("status") or "OFF").upper()
        self.proc_name = act.get("procedure_name")
        mqr = act.get("max_queue_readers")
        self.max_readers = 0 if mqr is None else mqr
        self.notifications = []
        self.msgs = []  # unread messages, in arrival order
        self.monitor = False
        self.last_empty = None
        self.last_activated = None
        self.tasks = []  # running Task objects
        self.task_counter = 0
        self.notify_until = None
        self.received_since_notify = False

    def key(self):
        return (self.inst.name, self.db.name, self.name)

    def wants_monitor(self):
        return self.status == "ON" or bool(self.notifications)


class DB:
    def __init__(self, inst, d, did, broker):
        self.inst = inst
        self.name = d["name"]
        self.did = did
        self.bi = d.get("broker_instance")
        self.master_key = d.get("master_key", True) is not False
        self.started = self.master_key
        self.role = d.get("mirroring_role")
        self.procs = {p["name"]: p for p in (d.get("procedures") or [])}
        self.queues = {}
        for q in d.get("queues") or []:
            broker.qid += 1
            self.queues[q["name"]] = Queue(inst, self, q, broker.qid)
        self.services = {}
        for s in d.get("services") or []:
            self.services[s["name"]] = s.get("queue")
        self.routes = [Route(r, broker.now) for r in (d.get("routes") or [])]
        self.ack_cleanup = True
        self.has_dialogs = False
        for en in d.get("event_notifications") or []:
            q = self.queues.get(en.get("queue"))
            if q is not None:
                q.notifications.append(en.get("name"))

    def serves(self, svc):
        """Holds the service for routing (started, not a mirror copy)."""
        return self.started and self.role != "mirror" and svc in self.services


class Inst:
    def __init__(self, d, broker):
        self.name = d["name"]
        self.address = d.get("address")
        self.cpus = d.get("cpus") or 1
        self.forwarding = bool(d.get("message_forwarding"))
        self.msdb_routes = [Route(r, broker.now) for r in (d.get("msdb_routes") or [])]
        self.dbs = {}
        for db in d.get("databases") or []:
            broker.did += 1
            self.dbs[db["name"]] = DB(self, db, broker.did, broker)
        self.reachable = True
        self.th_total = 2 * self.cpus
        self.th_running = self.th_total
        self.conns = {}  # low(address) -> dict(address, opened, last)
        self.suppressed = {}  # low(address) -> until ms
        self.disp_mode = "running"
        self.disp_delay = 0
        self.disp = []  # buffered Msg (dispatcher)
        self.txq = []  # Msg waiting in the transmission queue (sent from here)
        self.fwd = []  # Msg waiting in the forwarder (came from outside)
        self.failed_dialogs = set()
        self.touched = set()
        self.expected = {}  # (db, dialog, from_target) -> next seq the dispatcher saves

    def table(self, db):
        return self.msdb_routes if db is None else self.dbs[db].routes


class Msg:
    def __init__(self, dialog, seq, from_target, body, mtype):
        self.dialog = dialog
        self.seq = seq
        self.from_target = from_target
        self.body = body
        self.mtype = mtype
        self.hops = 0
        self.received_ms = None
        self.where = None  # ('txq'|'fwd', inst) while waiting
        self.status = ""
        self.wait = None  # ('delay', retry_at) | ('conn', addr) | ('principal', route) | ('failed',) | ('line',)
        self.ctx = None  # routing context (inst, outside, db)
        self.group = None
        self.arrived_ms = None
        self.ooo = False
        self.save_at = None
        self.lost = False

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
        self.seq = [0, 0]
        self.acked_bi = None
        self.t_inst = None
        self.t_db = None
        self.init_group = "G-%s-i" % name
        self.target_group = "G-%s-t" % name
        self.lose = {}  # (seq, from_target) -> 'once'|'every'


class Session:
    def __init__(self, name, spid):
        self.name = name
        self.spid = spid
        self.in_tran = False
        self.taken = []  # (queue, msg)
        self.locks = set()  # (queue key, group)
        self.rq = []  # queues it RECEIVEd from in the transaction
        self.waiting = None
        self.task = None
        self.last = None


class Task:
    def __init__(self, q, n, session, proc):
        self.q = q
        self.n = n
        self.session = session
        self.proc = proc or {}
        self.work_until = None
        self.alive = True


class Broker:
    def __init__(self):
        self.reset()

    def reset(self):
        self.now = 0
        self.events = []
        self.insts = {}
        self.dialogs = {}
        self.sessions = {}
        self.spid = 50
        self.qid = 0
        self.did = 4
        self.looks = []
        self.started = False
        self.t0 = 0
        self.timer_n = 0
        self.delayed = []  # Msg delayed with retry time
        self.wait_seq = 0
        self.arrival = 0

    # ------------------------------------------------------------------ utils
    def ev(self, kind, **f):
        if not TRACE:
            if kind in ("activation_necessary", "activation_withheld", "routes_matched",
                        "route_chosen", "timer_notification", "transmitter_reclassified"):
                return
            for k in ("rule", "step", "trigger"):
                f.pop(k, None)
        e = {"at_ms": self.now, "kind": kind}
        e.update(f)
        self.events.append(e)

    def inst(self, name):
        i = self.insts.get(name)
        if i is None:
            raise Refuse("no instance %r" % name)
        return i

    def db(self, inst, name):
        i = self.inst(inst)
        d = i.dbs.get(name)
        if d is None:
            raise Refuse("no database %r on %r" % (name, inst))
        return d

    def queue(self, qd):
        if not qd:
            raise Refuse("no queue given")
        d = self.db(qd["instance"], qd["database"])
        q = d.queues.get(qd["queue"])
        if q is None:
            raise Refuse("no queue %r" % qd["queue"])
        return q

    def session(self, name):
        s = self.sessions.get(name)
        if s is None:
            self.spid += 1
            s = Session(name, self.spid)
            self.sessions[name] = s
        return s

    def dialog(self, name):
        d = self.dialogs.get(name)
        if d is None:
            raise Refuse("no dialog %r has been begun" % name)
        return d

    def inst_by_addr(self, addr):
        for i in self.insts.values():
            if low(i.address) == low(addr):
                return i
        return None

    # ------------------------------------------------------------------ time
    def due_times(self):
        ts = []
        if self.started:
            ts.append(self.t0 + (self.timer_n + 1) * TIMER_MS)
        for s in self.sessions.values():
            if s.waiting is not None and s.waiting["until"] is not None:
                ts.append(s.waiting["until"])
            if s.task is not None and s.task.work_until is not None:
                ts.append(s.task.work_until)
        for i in self.insts.values():
            for db in i.dbs.values():
                for q in db.queues.values():
                    if q.notify_until is not None:
                        ts.append(q.notify_until)
            for m in i.disp:
                if m.save_at is not None and m.save_at > self.now:
                    ts.append(m.save_at)
        for m in self.delayed:
            ts.append(m.wait[1])
        return ts

    def advance(self, to):
        while True:
            ts = [t for t in self.due_times() if t <= to]
            if not ts:
                break
            t = min(ts)
            self.now = max(self.now, t)
            self.run_due(t)
            self.settle()
        self.now = max(self.now, to)

    def run_due(self, t):
        # procedures' steps (end of work)
        for s in sorted(self.sessions.values(), key=lambda s: s.spid):
            if s.task is not None and s.task.work_until is not None and s.task.work_until <= t:
                s.task.work_until = None
                self.task_step(s.task)
        # WAITFOR time-outs
        for s in sorted(self.sessions.values(), key=lambda s: (s.waiting or {}).get("seq", 0)):
            w = s.waiting
            if w is not None and w["until"] is not None and w["until"] <= t:
                self.wait_timeout(s)
        # dispatcher saves
        for i in self.insts.values():
            for m in list(i.disp):
                if m.save_at is not None and m.save_at <= t and m in i.disp:
                    self.dispatcher_try_save(i)
        # delayed conversations
        for m in list(self.delayed):
            if m in self.delayed and m.wait[1] <= t:
                self.delayed.remove(m)
                self.retry(m)
        # external activation time-outs
        for i in self.insts.values():
            for db in i.dbs.values():
                for q in db.queues.values():
                    if q.notify_until is not None and q.notify_until <= t:
                        q.notify_until = None
                        self.ev("activation_time_out", instance=i.name, database=db.name, queue=q.name)
                        self.looks.append((q, "external activation time-out", None))
        # timer notification
        if self.started and self.t0 + (self.timer_n + 1) * TIMER_MS <= t:
            self.timer_n += 1
            self.timer(self.timer_n)

    # ------------------------------------------------------------------ start
    def cmd_start(self, c):
        self.reset()
        self.now = c["at_ms"]
        self.t0 = self.now
        topo = c["topology"]
        if DEBUG:
            sys.stderr.write("TOPOLOGY " + json.dumps(topo) + "\n")
        for idef in topo.get("instances") or []:
            i = Inst(idef, self)
            self.insts[i.name] = i
        self.started = True
        self.ev("broker_started")
        for i in self.insts.values():
            self.ev("task_handlers_started", instance=i.name, count=i.th_total)
            for db in i.dbs.values():
                if db.started:
                    self.ev("database_broker_started", instance=i.name, database=db.name)
                else:
                    self.ev("database_broker_start_failed", instance=i.name, database=db.name,
                            reason="missing master key")
                for q in db.queues.values():
                    if q.wants_monitor():
                        q.monitor = True
                        self.ev("monitor_created", instance=i.name, database=db.name, queue=q.name)
        return {}

    # ------------------------------------------------------------------ dialogs and sends
    def cmd_begin_dialog(self, c):
        name = c["dialog"]
        if name in self.dialogs:
            raise Refuse("dialog %r already begun" % name)
        db = self.db(c["instance"], c["database"])
        if c["from_service"] not in db.services:
            raise Refuse("no service %r in %s" % (c["from_service"], db.name))
        d = Dialog(name, db.inst, db, c["from_service"], c["to_service"], c.get("to_broker_instance"))
        self.dialogs[name] = d
        db.has_dialogs = True
        self.ev("dialog_begun", instance=db.inst.name, database=db.name, dialog=name,
                from_service=d.from_service, to_service=d.to_service, to_broker_instance=d.to_bi)
        return {}

    def cmd_send(self, c):
        d = self.dialog(c["dialog"])
        ft = bool(c.get("from_target"))
        if ft:
            if d.t_db is None:
                raise Refuse("the target of dialog %r has not received a message" % d.name)
            inst, db = d.t_inst, d.t_db
        else:
            inst, db = d.inst, d.db
        seq = d.seq[1 if ft else 0]
        d.seq[1 if ft else 0] += 1
        m = Msg(d, seq, ft, c.get("body"), c.get("message_type") or "DEFAULT")
        self.ev("message_sent", instance=inst.name, database=db.name, dialog=d.name,
                from_target=ft, message_sequence_number=seq)
        m.ctx = (inst, False, db)
        m.received_ms = self.now
        if self.waiting_ahead(inst, m, "txq"):
            self.hold(m, inst, "txq", ("line",), "waiting behind an earlier message of the conversation")
        else:
            self.route(m)
        return {"message_sequence_number": seq}

    def waiting_ahead(self, inst, m, where):
        lst = inst.txq if where == "txq" else inst.fwd
        for o in lst:
            if o.dialog is m.dialog and o.from_target == m.from_target and o.seq < m.seq:
                return True
        return False

    def hold(self, m, inst, where, wait, status):
        m.wait = wait
        m.status = status
        lst = inst.txq if where == "txq" else inst.fwd
        if m not in lst:
            lst.append(m)
            lst.sort(key=lambda x: (x.received_ms, x.dialog.name, x.seq))
        m.where = (where, inst)
        if wait[0] == "delay":
            if m not in self.delayed:
                self.delayed.append(m)
        self.ev("transmission_pending", instance=inst.name, dialog=m.dialog.name, from_target=m.from_target,
                message_sequence_number=m.seq, status=status)

    def unhold(self, m):
        if m.where is not None:
            where, inst = m.where
            lst = inst.txq if where == "txq" else inst.fwd
            if m in lst:
                lst.remove(m)
        if m in self.delayed:
            self.delayed.remove(m)
        m.where = None
        m.wait = None

    def release_line(self, inst, m, where):
        """The message m went on: those waiting behind it at inst go on too."""
        lst = inst.txq if where == "txq" else inst.fwd
        for o in sorted(lst, key=lambda x: x.seq):
            if o.dialog is m.dialog and o.from_target == m.from_target and o.wait == ("line",):
                # first still-waiting earlier message?
                if self.waiting_ahead_other(inst, o, where):
                    break
                self.unhold_keep(o)
                self.route(o, keep=True)
                if o.where is not None:
                    break

    def waiting_ahead_other(self, inst, m, where):
        lst = inst.txq if where == "txq" else inst.fwd
        for o in lst:
            if o is not m and o.dialog is m.dialog and o.from_target == m.from_target and o.seq < m.seq:
                return True
        return False

    def unhold_keep(self, m):
        # remove from waiting lists but remember nothing
        self.unhold(m)

    def retry(self, m):
        m.last_retry = self.now
        self.ev("routing_retried", instance=m.where[1].name if m.where else m.ctx[0].name, dialog=m.dialog.name,
                from_target=m.from_target, message_sequence_number=m.seq)
        self.reroute(m)

    def reroute(self, m):
        where = m.where
        self.unhold(m)
        m.where = None
        self.route(m, keep=True, prev=where)

    # ------------------------------------------------------------------ routing
    def target_of(self, m):
        d = m.dialog
        if m.from_target:
            return d.from_service, d.db.bi
        return d.to_service, (d.to_bi or d.acked_bi)

    def route(self, m, keep=False, prev=None):
        m.last_routed = self.now
        inst, outside, db = m.ctx
        where = "fwd" if outside else "txq"
        d = m.dialog
        svc, bi = self.target_of(m)
        # RTE-05: a reply from outside naming a broker instance this instance holds
        if outside and m.from_target:
            for tdb in inst.dbs.values():
                if same_bi(tdb.bi, bi) and tdb.started and tdb.role != "mirror":
                    self.ev("reply_recognised", instance=inst.name, dialog=d.name, from_target=True,
                            message_sequence_number=m.seq, broker_instance=tdb.bi)
                    self.deliver_local(inst, m, tdb, svc, outside, where)
                    return
        table = inst.msdb_routes if outside else db.routes
        tname = "msdb.sys.routes" if outside else "%s.sys.routes" % db.name
        step, matched = self.match(inst, m, table, tname, svc, bi)
        base = dict(instance=inst.name, dialog=d.name, from_target=m.from_target, message_sequence_number=m.seq)
        if step in ("RTM-4", "RTM-7"):
            self.ev("routes_matched", step=step, table=tname, routes=[], broker_instance=None, **base)
            self.delay(m, inst, where, step)
            return
        self.ev("routes_matched", step=step, table=tname,
                routes=[r.name if r is not None else "(as if LOCAL)" for r in matched],
                broker_instance=(matched[0].broker_instance.upper() if step == "RTM-3" and matched[0].broker_instance else None),
                **base)
        self.choose_and_go(inst, m, matched, svc, bi, outside, where, base)

    def choose_and_go(self, inst, m, matched, svc, bi, outside, where, base):
        # RTC-0: identical routes count as one
        groups = []
        seen = set()
        for r in matched:
            if r is None:
                k = ("(as if LOCAL)",)
            else:
                k = (low(r.broker_instance), r.service_name, low(r.address))
            if k in seen:
                continue
            seen.add(k)
            groups.append(r)
        has_local_svc = any(db.serves(svc) for db in inst.dbs.values())
        chosen = None
        cstep = None
        cands = []
        steps = [
            ("RTC-1", lambda r: r is not None and r.mirror_address),
            ("RTC-2", lambda r: r is None or r.kind() == "LOCAL"),
            ("RTC-3", lambda r: r is not None and r.kind() == "NET" and not r.mirror_address),
            ("RTC-4", lambda r: r is not None and r.kind() == "TRANSPORT"),
        ]
        for st, pred in steps:
            cs = [r for r in groups if pred(r)]
            if not cs:
                continue
            if st == "RTC-2" and not has_local_svc:
                continue
            chosen, cstep, cands = cs[0], st, cs
            break
        if cstep is None:
            self.delay(m, inst, where, "RTC-4")
            return
        rn = chosen.name if chosen is not None else "(as if LOCAL)"
        self.ev("route_chosen", step=cstep, route=rn,
                candidates=[r.name if r is not None else "(as if LOCAL)" for r in cands], **base)
        local = chosen is None or chosen.kind() == "LOCAL"
        if outside and not inst.forwarding and not local:
            self.drop(inst, m, "RTC-5", "message forwarding is not active")
            self.after_go(inst, m, where)
            return
        if local:
            rbi = bi or (chosen.broker_instance if chosen is not None else None)
            if rbi:
                tdb = None
                for x in inst.dbs.values():
                    if same_bi(x.bi, rbi):
                        tdb = x
                if tdb is None or not tdb.serves(svc):
                    self.drop(inst, m, "RTL-2", "no database of this instance holds the broker instance")
                    self.after_go(inst, m, where)
                    return
            else:
                tdb = None
                hold = m.ctx[2]
                if hold is not None and hold.serves(svc):
                    tdb = hold
                else:
                    for x in inst.dbs.values():
                        if x.serves(svc):
                            tdb = x
                            break
                if tdb is None:
                    self.delay(m, inst, where, "RTC-4")
                    return
            self.deliver_local(inst, m, tdb, svc, outside, where)
            return
        if chosen.mirror_address:
            self.go_mirrored(inst, m, chosen, where, outside)
            return
        if chosen.kind() == "TRANSPORT":
            mm = re.match(r"^(TCP://[^/]+)/", svc or "", re.I)
            if not mm:
                self.delay(m, inst, where, "RTC-4")
                return
            addr = mm.group(1)
        else:
            addr = chosen.address
        self.go_address(inst, m, addr, where, outside)

    def match(self, inst, m, table, tname, svc, bi):
        now = self.now
        live = [r for r in table if not r.expired(now)]
        if bi:
            s1 = [r for r in live if r.service_name == svc and same_bi(r.broker_instance, bi)]
            if s1:
                return "RTM-1", s1
        s2 = [r for r in live if r.service_name == svc and not r.broker_instance]
        if s2:
            return "RTM-2", s2
        if not bi:
            s3 = [r for r in live if r.service_name == svc and r.broker_instance]
            if s3:
                pick = s3[0].broker_instance
                return "RTM-3", [r for r in s3 if same_bi(r.broker_instance, pick)]
        for r in live:
            if r.service_name == BCN_SERVICE and svc not in r.pending:
                r.pending.add(svc)
                self.ev("routing_requested", instance=inst.name, dialog=m.dialog.name, from_target=m.from_target,
                        message_sequence_number=m.seq, route=r.name, service=svc, table=tname)
                return "RTM-4", []
        s5 = [r for r in live if not r.service_name and not r.broker_instance]
        if s5:
            return "RTM-5", s5
        if bi and any(db.serves(svc) for db in inst.dbs.values()):
            return "RTM-6", [None]
        return "RTM-7", []

    def delay(self, m, inst, where, step):
        self.ev("conversation_delayed", instance=inst.name, dialog=m.dialog.name, from_target=m.from_target,
                message_sequence_number=m.seq, step=step)
        self.hold(m, inst, where, ("delay", self.now + int(PARAMS["delayed_retry_s"] * 1000)),
                  "delayed: no route matched (%s)" % step)

    def drop(self, inst, m, rule, reason):
        self.ev("message_dropped", instance=inst.name, dialog=m.dialog.name, from_target=m.from_target,
                message_sequence_number=m.seq, reason=reason, rule=rule)

    def after_go(self, inst, m, where):
        self.unhold(m)
        self.release_line(inst, m, where)

    def deliver_local(self, inst, m, tdb, svc, outside, where):
        self.unhold(m)
        if outside:
            self.dispatcher_in(inst, m, tdb, svc)
        else:
            self.save(inst, tdb, m, svc)
        self.release_line(inst, m, where)

    # ------------------------------------------------------------------ mirroring
    def principal_answer(self, addr, m, svc):
        ti = self.inst_by_addr(addr)
        if ti is None or not ti.reachable:
            return "unreachable"
        _, bi = self.target_of(m)
        for db in ti.dbs.values():
            if svc in db.services and db.role == "principal" and (not bi or same_bi(db.bi, bi)):
                return "principal"
        return "not principal"

    def go_mirrored(self, inst, m, r, where, outside):
        svc, _ = self.target_of(m)
        base = dict(instance=inst.name, dialog=m.dialog.name, from_target=m.from_target,
                    message_sequence_number=m.seq, route=r.name)
        if r.principal is not None:
            ans = self.principal_answer(r.principal, m, svc)
            if ans == "principal":
                self.go_address(inst, m, r.principal, where, outside)
                return
            self.ev("principal_lost", address=r.principal, answer=ans, **base)
            other = r.mirror_address if low(r.principal) == low(r.address) else r.address
            a2 = self.principal_answer(other, m, svc)
            self.ev("principal_probe", address=other, answer=a2, **base)
            if a2 == "principal":
                r.principal = other
                self.go_address(inst, m, other, where, outside)
                return
            r.principal = None
            self.hold(m, inst, where, ("principal", r), "waiting for the principal of route %s" % r.name)
            return
        found = None
        for a in (r.address, r.mirror_address):
            ans = self.principal_answer(a, m, svc)
            self.ev("principal_probe", address=a, answer=ans, **base)
            if ans == "principal" and found is None:
                found = a
        if found is None:
            self.hold(m, inst, where, ("principal", r), "waiting for the principal of route %s" % r.name)
            return
        r.principal = found
        self.go_address(inst, m, found, where, outside)

    # ------------------------------------------------------------------ transport
    def go_address(self, inst, m, addr, where, outside):
        if low(addr) == low(inst.address):
            # RTX-2: treated as arriving from outside, without a round trip
            self.unhold(m)
            m.ctx = (inst, True, None)
            m.received_ms = self.now  # it now waits, if it waits, in the forwarder from this instant
            self.route(m)
            self.release_line(inst, m, where)
            return
        if outside:
            lim = PARAMS["forward_hop_limit"]
            if m.hops >= lim:
                self.drop(inst, m, "RTX-1", "hop limit reached")
                self.after_go(inst, m, where)
                return
        if m.dialog.name in inst.failed_dialogs:
            self.hold(m, inst, where, ("failed",), "the transmitter failed the dialog")
            return
        conn = inst.conns.get(low(addr))
        ti = self.inst_by_addr(addr)
        if conn is not None and (ti is None or not ti.reachable):
            self.close_conn(inst, addr, "disconnected")
            conn = None
        if conn is None:
            if self.is_suppressed(inst, addr):
                self.hold(m, inst, where, ("conn", addr), "waiting for a connection to %s" % addr)
                return
            if not self.connect(inst, addr):
                self.hold(m, inst, where, ("conn", addr), "waiting for a connection to %s" % addr)
                return
        self.unhold(m)
        self.transmit(inst, m, addr, outside)
        self.release_line(inst, m, where)

    def is_suppressed(self, inst, addr):
        u = inst.suppressed.get(low(addr))
        return u is not None and self.now < u

    def connect(self, inst, addr):
        ti = self.inst_by_addr(addr)
        if ti is not None and ti.reachable:
            self.ev("connection_attempt", instance=inst.name, address=addr, result="connected")
            inst.conns[low(addr)] = {"address": addr, "opened": self.now, "last": self.now}
            inst.suppressed.pop(low(addr), None)
            return True
        self.ev("connection_attempt", instance=inst.name, address=addr, result="refused")
        inst.suppressed[low(addr)] = self.now + SUPPRESS_FAIL_MS
        return False

    def close_conn(self, inst, addr, reason):
        c = inst.conns.pop(low(addr), None)
        if c is None:
            return
        self.ev("connection_closed", instance=inst.name, address=c["address"], reason=reason)
        if reason == "disconnected":
            inst.suppressed[low(addr)] = self.now + SUPPRESS_DISC_MS

    def transmit(self, inst, m, addr, outside):
        d = m.dialog
        if outside:
            m.hops += 1
            self.ev("message_forwarded", instance=inst.name, dialog=d.name, from_target=m.from_target,
                    message_sequence_number=m.seq, address=addr, hops=m.hops)
        conn = inst.conns.get(low(addr))
        if conn is not None:
            conn["last"] = self.now
        lk = (m.seq, m.from_target)
        mode = d.lose.get(lk)
        ti = self.inst_by_addr(addr)
        self.ev("message_transmitted", instance=inst.name, dialog=d.name, from_target=m.from_target,
                message_sequence_number=m.seq, address=addr, to_instance=ti.name if ti else None)
        if mode is not None:
            if mode == "once":
                del d.lose[lk]
            self.ev("message_lost_in_transit", instance=inst.name, dialog=d.name, from_target=m.from_target,
                    message_sequence_number=m.seq, address=addr)
            return
        if ti is None:
            return
        m.ctx = (ti, True, None)
        m.received_ms = self.now
        if self.waiting_ahead(ti, m, "fwd"):
            self.hold(m, ti, "fwd", ("line",), "waiting behind an earlier message of the conversation")
            return
        self.route(m)

    # ------------------------------------------------------------------ dispatcher and delivery
    def dispatcher_in(self, inst, m, tdb, svc):
        k = (tdb.name, m.dialog.name, m.from_target)
        exp = inst.expected.get(k, 0)
        buffered = [x for x in inst.disp if x.key() == m.key()]
        if m.seq < exp or buffered:
            return  # a copy it already has
        m.arrived_ms = self.now
        m.tdb = tdb
        m.svc = svc
        self.ev("dispatcher_buffered", instance=inst.name, database=tdb.name, dialog=m.dialog.name,
                from_target=m.from_target, message_sequence_number=m.seq)
        inst.disp.append(m)
        self.mark_ooo(inst)
        if inst.disp_mode == "running":
            m.save_at = self.now + int(inst.disp_delay * 1000)
        else:
            m.save_at = None
        self.dispatcher_try_save(inst)

    def mark_ooo(self, inst):
        for m in inst.disp:
            k = (m.tdb.name, m.dialog.name, m.from_target)
            exp = inst.expected.get(k, 0)
            # in order if every earlier sequence number is saved or buffered
            have = {x.seq for x in inst.disp if (x.tdb.name, x.dialog.name, x.from_target) == k}
            m.ooo = any(s not in have for s in range(exp, m.seq))

    def dispatcher_try_save(self, inst):
        progress = True
        while progress:
            progress = False
            for m in sorted(inst.disp, key=lambda x: (x.arrived_ms, x.seq)):
                if m.save_at is None or m.save_at > self.now:
                    continue
                k = (m.tdb.name, m.dialog.name, m.from_target)
                if inst.expected.get(k, 0) != m.seq:
                    continue
                inst.disp.remove(m)
                self.save(inst, m.tdb, m, m.svc)
                progress = True
                break

    def save(self, inst, tdb, m, svc):
        d = m.dialog
        k = (tdb.name, d.name, m.from_target)
        inst.expected[k] = max(inst.expected.get(k, 0), m.seq + 1)
        qname = tdb.services.get(svc)
        q = tdb.queues.get(qname)
        if not m.from_target and d.t_db is None:
            d.t_inst, d.t_db = inst, tdb
            tdb.has_dialogs = True
        grp = d.init_group if m.from_target else d.target_group
        m.group = grp
        if q is None:
            return
        was_empty = not q.msgs
        m.q = q
        self.arrival += 1
        m.arrival_order = self.arrival
        q.msgs.append(m)
        self.ev("message_arrived", instance=inst.name, database=tdb.name, queue=q.name, dialog=d.name,
                from_target=m.from_target, message_sequence_number=m.seq, service=svc,
                conversation_group=grp)
        if not m.from_target and d.acked_bi is None:
            d.acked_bi = tdb.bi
            self.ev("acknowledged", instance=d.inst.name, dialog=d.name, broker_instance=tdb.bi)
        self.serve_waiting(q)
        self.looks.append((q, "message arrived", was_empty))

    # ------------------------------------------------------------------ receive
    def group_locked_by_other(self, q, grp, s):
        for o in self.sessions.values():
            if o is not s and (q.key(), grp) in o.locks:
                return True
        return False

    def pick(self, q, s, top, where_dialog, where_group, gcg=False):
        cands = [m for m in q.msgs if not self.group_locked_by_other(q, m.group, s)]
        if where_dialog is not None:
            cands = [m for m in cands if m.dialog.name == where_dialog]
        if where_group is not None:
            gd = self.dialogs.get(where_group)
            grp = None
            if gd is not None:
                grp = gd.target_group if gd.t_db is not None and gd.t_db is q.db and q.db.services.get(gd.to_service) == q.name else gd.init_group
            cands = [m for m in cands if m.group == grp]
        if not cands:
            return None, []
        grp = cands[0].group
        if gcg:
            return grp, []
        rows = [m for m in cands if m.group == grp]
        if where_dialog is not None:
            rows = [m for m in rows if m.dialog.name == where_dialog]
        rows.sort(key=lambda m: (q.msgs.index(m)))
        # messages of a dialog in sequence order
        if top is not None:
            rows = rows[:top]
        return grp, rows

    def statement(self, s, q, kind, top=None, where_dialog=None, where_group=None, waitfor_ms=None):
        has_where = where_dialog is not None or where_group is not None
        s.last = None
        gcg = kind == "GET CONVERSATION GROUP"
        base = dict(instance=q.inst.name, database=q.db.name, queue=q.name, session=s.name,
                    statement=kind, has_where=has_where)
        if kind == "RECEIVE":
            q.notify_until = None  # ACT-13: a RECEIVE ends the notification time-out
            if q.notifications:
                q.received_since_notify = True
            if s.in_tran and q not in s.rq:
                s.rq.append(q)
        grp, rows = self.pick(q, s, top, where_dialog, where_group, gcg)
        if grp is not None:
            self.give(s, q, grp, rows, base, gcg)
        elif waitfor_ms:
            self.wait_seq += 1
            s.waiting = dict(q=q, kind=kind, top=top, where_dialog=where_dialog, where_group=where_group,
                             until=self.now + waitfor_ms, seq=self.wait_seq, has_where=has_where)
            self.ev("reader_waiting", **{k: v for k, v in base.items()})
            s.last = "waiting"
        else:
            self.ev("empty_result", rows=[], conversation_group=None, **base)
            if not has_where:
                q.last_empty = self.now
            s.last = "empty"
        if kind == "RECEIVE":
            self.looks.append((q, "RECEIVE", None))
        return s.last

    def give(self, s, q, grp, rows, base, gcg):
        for m in rows:
            q.msgs.remove(m)
            s.taken.append((q, m))
        if s.in_tran:
            s.locks.add((q.key(), grp))
        else:
            s.taken = []
        self.ev("rows_returned", conversation_group=grp,
                rows=[dict(dialog=m.dialog.name, message_sequence_number=m.seq, conversation_group=grp,
                           message_body=m.body, message_type_name=m.mtype) for m in rows], **base)
        s.last = "rows"
        s.waiting = None

    def serve_waiting(self, q):
        ws = sorted([s for s in self.sessions.values() if s.waiting is not None and s.waiting["q"] is q],
                    key=lambda s: s.waiting["seq"])
        for s in ws:
            w = s.waiting
            gcg = w["kind"] == "GET CONVERSATION GROUP"
            grp, rows = self.pick(q, s, w["top"], w["where_dialog"], w["where_group"], gcg)
            if grp is None:
                continue
            base = dict(instance=q.inst.name, database=q.db.name, queue=q.name, session=s.name,
                        statement=w["kind"], has_where=w["has_where"])
            self.give(s, q, grp, rows, base, gcg)
            if w["kind"] == "RECEIVE":
                self.looks.append((q, "RECEIVE", None))
            if s.task is not None:
                self.task_got(s.task)

    def wait_timeout(self, s):
        w = s.waiting
        s.waiting = None
        q = w["q"]
        base = dict(instance=q.inst.name, database=q.db.name, queue=q.name, session=s.name,
                    statement=w["kind"], has_where=w["has_where"])
        self.ev("empty_result", rows=[], conversation_group=None, **base)
        if not w["has_where"]:
            q.last_empty = self.now
        s.last = "empty"
        if w["kind"] == "RECEIVE":
            self.looks.append((q, "RECEIVE", None))
        if s.task is not None:
            self.task_empty(s.task)

    def commit(self, s):
        released = {qk for qk, g in s.locks}
        s.taken = []
        s.locks = set()
        s.rq = []
        s.in_tran = False
        self.ev("transaction_committed", session=s.name)
        self.serve_released(released)

    def rollback(self, s):
        released = {qk for qk, g in s.locks}
        n = 0
        for q, m in s.taken:
            q.msgs.append(m)
            n += 1
        for q in {id(q): q for q, m in s.taken}.values():
            q.msgs.sort(key=lambda m: m.arrival_order)
        rq = list(s.rq)
        s.taken = []
        s.locks = set()
        s.rq = []
        s.in_tran = False
        self.ev("transaction_rolled_back", session=s.name, returned=n)
        for q in rq:
            self.looks.append((q, "rollback", None))
        self.serve_released(released | {q.key() for q in rq})

    def serve_released(self, qkeys):
        for i in self.insts.values():
            for db in i.dbs.values():
                for q in db.queues.values():
                    if q.key() in qkeys:
                        self.serve_waiting(q)

    def cmd_begin_transaction(self, c):
        s = self.session(c["session"])
        if s.waiting is not None:
            raise Refuse("session is waiting")
        s.in_tran = True
        return {}

    def cmd_commit(self, c):
        s = self.session(c["session"])
        if not s.in_tran:
            raise Refuse("COMMIT without a transaction")
        self.commit(s)
        return {}

    def cmd_rollback(self, c):
        s = self.session(c["session"])
        if not s.in_tran:
            raise Refuse("ROLLBACK without a transaction")
        self.rollback(s)
        return {}

    def cmd_receive(self, c):
        s = self.session(c["session"])
        q = self.queue(c["queue"])
        if s.waiting is not None:
            raise Refuse("session %r is waiting" % s.name)
        wd = c.get("where_dialog")
        if wd is not None and wd not in self.dialogs:
            raise Refuse("no dialog %r" % wd)
        wg = c.get("where_group")
        if wg is not None and wg not in self.dialogs:
            raise Refuse("no dialog %r" % wg)
        self.statement(s, q, "RECEIVE", c.get("top"), wd, wg, c.get("waitfor_ms"))
        return {}

    def cmd_get_conversation_group(self, c):
        s = self.session(c["session"])
        q = self.queue(c["queue"])
        if s.waiting is not None:
            raise Refuse("session %r is waiting" % s.name)
        self.statement(s, q, "GET CONVERSATION GROUP", waitfor_ms=c.get("waitfor_ms"))
        return {}

    # ------------------------------------------------------------------ activation
    def unread(self, q):
        return len(q.msgs)

    def waiting_readers(self, q):
        return [s for s in self.sessions.values() if s.waiting is not None and s.waiting["q"] is q
                and not s.waiting["has_where"]]

    def settle(self):
        guard = 0
        while self.looks:
            guard += 1
            if guard > 100000:
                raise RuntimeError("look loop")
            q, trig, info = self.looks.pop(0)
            self.look(q, trig, info)

    def look(self, q, trig, info):
        if not q.monitor:
            return
        rule = None
        if trig == "message arrived" and info and not q.tasks:
            rule = "ACT-06"
        elif self.unread(q) > 0 and not self.waiting_readers(q) and (
                q.last_empty is None or self.now - q.last_empty >= PARAMS["activation_empty_window_s"] * 1000):
            rule = "ACT-07"
        if rule is None:
            return
        i, db = q.inst, q.db
        base = dict(instance=i.name, database=db.name, queue=q.name)
        self.ev("activation_necessary", rule=rule, trigger=trig, **base)
        started = None
        if q.status == "ON" and q.proc_name:
            if len(q.tasks) < q.max_readers:
                started = self.start_task(q, run=False)
            else:
                self.ev("activation_withheld", reason="MAX_QUEUE_READERS", **base)
        if q.notifications:
            if q.notify_until is not None:
                self.ev("activation_withheld", reason="notification time-out", **base)
            else:
                for n in q.notifications:
                    self.ev("event_notification", notification=n, event_type="QUEUE_ACTIVATION", **base)
                q.notify_until = self.now + int(PARAMS["external_activation_timeout_s"] * 1000)
                q.last_activated = self.now
                q.received_since_notify = False
        if started is not None and started.proc.get("receives", True) is not False:
            self.task_receive(started)

    def start_task(self, q, run=True):
        q.task_counter += 1
        n = q.task_counter
        sname = "%s#%d" % (q.name, n)
        self.spid += 1
        s = Session(sname, self.spid)
        self.sessions[sname] = s
        proc = q.db.procs.get(q.proc_name) or {}
        t = Task(q, n, s, proc)
        s.task = t
        q.tasks.append(t)
        q.last_activated = self.now
        self.ev("procedure_started", instance=q.inst.name, database=q.db.name, queue=q.name,
                procedure_name=q.proc_name, spid=s.spid, task=n)
        if run and proc.get("receives", True) is not False:
            self.task_receive(t)
        return t

    def task_receive(self, t):
        s = t.session
        p = t.proc
        s.in_tran = True
        top = p.get("receive_top", 1) if "receive_top" in p else 1
        self.statement(s, t.q, "RECEIVE", top, None, None, p.get("waitfor_ms"))
        if s.last == "rows":
            self.task_got(t)
        elif s.last == "empty":
            self.task_empty(t)

    def task_got(self, t):
        w = t.proc.get("work_ms") or 0
        if w > 0:
            t.work_until = self.now + w
        else:
            self.task_step(t)

    def task_step(self, t):
        if not t.alive:
            return
        s = t.session
        self.commit(s)
        s.in_tran = True
        self.task_receive(t)

    def task_empty(self, t):
        s = t.session
        if s.in_tran:
            self.commit(s)
        self.end_task(t, "empty RECEIVE")

    def end_task(self, t, reason):
        t.alive = False
        q = t.q
        s = t.session
        s.waiting = None
        t.work_until = None
        if t in q.tasks:
            q.tasks.remove(t)
        self.ev("procedure_exited", instance=q.inst.name, database=q.db.name, queue=q.name,
                spid=s.spid, task=t.n, reason=reason)
        s.task = None
        if not q.tasks:
            self.looks.append((q, "all procedures exited", None))

    def cmd_exit_procedure(self, c):
        q = self.queue(c["queue"])
        t = None
        for x in q.tasks:
            if x.n == c["task"]:
                t = x
        if t is None:
            raise Refuse("no running task %s of queue %s" % (c["task"], q.name))
        if t.session.in_tran:
            self.commit(t.session)
        self.end_task(t, "exited")
        return {}

    def set_monitor(self, q):
        w = q.wants_monitor()
        i, db = q.inst, q.db
        if w and not q.monitor:
            q.monitor = True
            self.ev("monitor_created", instance=i.name, database=db.name, queue=q.name)
        elif not w and q.monitor:
            q.monitor = False
            q.notify_until = None
            self.ev("monitor_removed", instance=i.name, database=db.name, queue=q.name)

    def cmd_alter_queue(self, c):
        q = self.queue(c["queue"])
        if c.get("status") is not None:
            q.status = c["status"].upper()
        if c.get("procedure_name") is not None:
            q.proc_name = c["procedure_name"]
        if c.get("max_queue_readers") is not None:
            q.max_readers = c["max_queue_readers"]
        self.ev("queue_altered", instance=q.inst.name, database=q.db.name, queue=q.name)
        self.set_monitor(q)
        self.looks.append((q, "ALTER QUEUE", None))
        return {}

    def cmd_create_event_notification(self, c):
        q = self.queue(c["queue"])
        if c["name"] in q.notifications:
            raise Refuse("event notification %r exists" % c["name"])
        q.notifications.append(c["name"])
        self.set_monitor(q)
        return {}

    def cmd_drop_event_notification(self, c):
        q = self.queue(c["queue"])
        if c["name"] not in q.notifications:
            raise Refuse("no event notification %r" % c["name"])
        q.notifications.remove(c["name"])
        if not q.notifications:
            q.notify_until = None
        self.set_monitor(q)
        return {}

    # ------------------------------------------------------------------ routes
    def table_of(self, c):
        i = self.inst(c["instance"])
        if c.get("database") is None:
            return i, None, i.msdb_routes
        db = self.db(c["instance"], c["database"])
        return i, db, db.routes

    def check_addr(self, a, field):
        if a is None:
            return
        if a.upper() in ("LOCAL", "TRANSPORT") and field == "address":
            return
        if not ADDR_RE.match(a):
            raise Refuse("malformed %s %r" % (field, a))

    def touch(self, i, svc_names):
        for m in i.txq:
            svc, _ = self.target_of(m)
            if None in svc_names or svc in svc_names:
                i.touched.add(m.dialog.name)

    def cmd_create_route(self, c, answer=False):
        i, db, table = self.table_of(c)
        r = c["route"]
        if not r.get("name"):
            raise Refuse("a route needs a name")
        self.check_addr(r.get("address") or "LOCAL", "address")
        self.check_addr(r.get("mirror_address"), "mirror_address")
        if any(x.name == r["name"] for x in table):
            if answer:
                table[:] = [x for x in table if x.name != r["name"]]
            else:
                raise Refuse("route %r exists" % r["name"])
        nr = Route(r, self.now)
        table.append(nr)
        self.ev("route_created", instance=i.name, database=db.name if db else "msdb", route=nr.name)
        self.touch(i, {nr.service_name})
        return nr

    def cmd_alter_route(self, c):
        i, db, table = self.table_of(c)
        r = c["route"]
        x = None
        for y in table:
            if y.name == r.get("name"):
                x = y
        if x is None:
            raise Refuse("no route %r" % r.get("name"))
        self.check_addr(r.get("address"), "address")
        self.check_addr(r.get("mirror_address"), "mirror_address")
        before = x.service_name
        if r.get("service_name") is not None:
            x.service_name = r["service_name"]
        if r.get("broker_instance") is not None:
            x.broker_instance = r["broker_instance"]
        if r.get("address") is not None:
            x.address = r["address"]
        if r.get("mirror_address") is not None:
            x.mirror_address = r["mirror_address"]
        if r.get("lifetime_s") is not None:
            x.lifetime_s = r["lifetime_s"]
            x.set_expiry(self.now)
        if x.principal is not None and low(x.principal) not in (low(x.address), low(x.mirror_address)):
            x.principal = None
        self.ev("route_altered", instance=i.name, database=db.name if db else "msdb", route=x.name)
        self.touch(i, {before, x.service_name})
        return {}

    def cmd_drop_route(self, c):
        i, db, table = self.table_of(c)
        x = None
        for y in table:
            if y.name == c.get("name"):
                x = y
        if x is None:
            raise Refuse("no route %r" % c.get("name"))
        table.remove(x)
        self.ev("route_dropped", instance=i.name, database=db.name if db else "msdb", route=x.name)
        self.touch(i, {x.service_name})
        return {}

    def cmd_answer_routing_request(self, c):
        i, db, table = self.table_of(c)
        nr = self.cmd_create_route(c, answer=True)
        for r in table:
            if r.service_name == BCN_SERVICE:
                r.pending.discard(nr.service_name)
        return {}

    # ------------------------------------------------------------------ faults
    def cmd_set_message_forwarding(self, c):
        i = self.inst(c["instance"])
        i.forwarding = bool(c["active"])
        return {}

    def cmd_set_reachable(self, c):
        i = self.inst(c["instance"])
        i.reachable = bool(c["reachable"])
        if not i.reachable:
            for o in self.insts.values():
                if o is not i and low(i.address) in o.conns:
                    self.close_conn(o, i.address, "disconnected")
        return {}

    def cmd_failover(self, c):
        db = self.db(c["instance"], c["database"])
        for i in self.insts.values():
            for x in i.dbs.values():
                if x is not db and x.name == db.name and x.role in ("principal", "mirror"):
                    x.role = "mirror"
                    # endpoint state is the database's: share sequence expectations
                    for k, v in i.expected.items():
                        if k[0] == x.name:
                            db.inst.expected[k] = max(db.inst.expected.get(k, 0), v)
        db.role = "principal"
        # conversations whose target endpoint was the other copy follow the principal
        for d in self.dialogs.values():
            if d.t_db is not None and d.t_db.name == db.name and d.t_db is not db and d.t_db.role == "mirror":
                d.t_inst, d.t_db = db.inst, db
            if d.db.name == db.name and d.db is not db and d.db.role == "mirror":
                d.inst, d.db = db.inst, db
        return {}

    def cmd_fail_task_handlers(self, c):
        i = self.inst(c["instance"])
        i.th_running = max(0, i.th_running - c["count"])
        return {}

    def cmd_set_dispatcher_saving(self, c):
        i = self.inst(c["instance"])
        i.disp_mode = c["mode"]
        i.disp_delay = c.get("delay_s") or 0
        for m in i.disp:
            if i.disp_mode == "running":
                m.save_at = max(self.now, m.arrived_ms + int(i.disp_delay * 1000))
            else:
                m.save_at = None
        self.dispatcher_try_save(i)
        return {}

    def cmd_lose_in_transit(self, c):
        d = self.dialog(c["dialog"])
        d.lose[(c["sequence"], bool(c.get("from_target")))] = "every" if c.get("every") else "once"
        return {}

    def cmd_drop_connection(self, c):
        i = self.inst(c["instance"])
        if low(c["address"]) not in i.conns:
            raise Refuse("no connection from %s to %s" % (i.name, c["address"]))
        self.close_conn(i, c["address"], "disconnected")
        return {}

    def cmd_fail_transmission(self, c):
        d = self.dialog(c["dialog"])
        ends = [d.inst]
        if d.t_inst is not None and d.t_inst is not d.inst:
            ends.append(d.t_inst)
        for i in ends:
            i.failed_dialogs.add(d.name)
            i.touched.add(d.name)
        return {}

    def cmd_create_master_key(self, c):
        db = self.db(c["instance"], c["database"])
        db.master_key = True
        return {}

    def cmd_stop_ack_cleanup(self, c):
        db = self.db(c["instance"], c["database"])
        db.ack_cleanup = False
        return {}

    # ------------------------------------------------------------------ periodic tasks
    def timer(self, n):
        for i in list(self.insts.values()):
            self.timer_instance(i, n)

    def timer_instance(self, i, n):
        """One instance's notification: its tasks in the document's order (every, every 2nd, every 5th)."""
        if True:
            tasks = ["queue monitors", "task handlers", "message dispatcher"]
            if n % 2 == 0:
                tasks += ["transport connections", "transmitter"]
            if n % 5 == 0:
                tasks += ["idle connections", "forwarder", "broker start", "broker configuration notification",
                          "acknowledged message clean-up"]
            self.ev("timer_notification", instance=i.name, number=n, tasks=tasks)
            for db in i.dbs.values():
                for q in db.queues.values():
                    if q.monitor:
                        self.looks.append((q, "timer notification", None))
            if i.th_running < i.th_total:
                self.ev("task_handlers_restarted", instance=i.name, count=i.th_total - i.th_running)
                i.th_running = i.th_total
            self.mark_ooo(i)
            for m in list(i.disp):
                if m.ooo:
                    reason = "out of order"
                elif self.now - m.arrived_ms >= STALE_MS:
                    reason = "stale"
                else:
                    continue
                i.disp.remove(m)
                self.ev("dispatcher_deleted", instance=i.name, database=m.tdb.name, dialog=m.dialog.name,
                        from_target=m.from_target, message_sequence_number=m.seq, reason=reason)
        if n % 2 == 0:
            self.transport_task(i)
            self.transmitter_task(i)
        if n % 5 == 0:
            if True:
                for k, cn in list(i.conns.items()):
                    if self.now - cn["last"] >= IDLE_MS:
                        self.close_conn(i, cn["address"], "idle")
                for m in list(i.fwd):
                    if self.now - m.received_ms >= FWD_STALE_MS:
                        self.unhold(m)
                        self.ev("forwarded_message_deleted", instance=i.name, dialog=m.dialog.name,
                                from_target=m.from_target, message_sequence_number=m.seq)
                for db in i.dbs.values():
                    if not db.started and db.master_key:
                        db.started = True
                        self.ev("database_broker_started", instance=i.name, database=db.name)
                for db in i.dbs.values():
                    if db.started and db.has_dialogs and not db.ack_cleanup:
                        db.ack_cleanup = True
                        self.ev("ack_cleanup_resumed", instance=i.name, database=db.name)

    def transport_task(self, i):
        # retry principals of mirrored routes
        for m in list(i.txq) + list(i.fwd):
            if m.wait and m.wait[0] == "principal" and m.where is not None \
                    and getattr(m, "last_routed", None) != self.now:
                self.reroute(m)
        addrs = []
        for m in list(i.txq) + list(i.fwd):
            if m.wait and m.wait[0] == "conn" and low(m.wait[1]) not in [low(a) for a in addrs]:
                addrs.append(m.wait[1])
        for a in addrs:
            if low(a) in i.conns or self.is_suppressed(i, a):
                if low(a) not in i.conns:
                    continue
            else:
                if not self.connect(i, a):
                    continue
            for m in sorted([m for m in list(i.txq) + list(i.fwd)
                             if m.wait and m.wait[0] == "conn" and low(m.wait[1]) == low(a)],
                            key=lambda x: (x.received_ms, x.seq)):
                if m.where is None:
                    continue
                where = m.where[0]
                outside = where == "fwd"
                self.unhold(m)
                self.go_address(i, m, a, where, outside)

    def transmitter_task(self, i):
        names = []
        # route expirations since the last reclassification touch the dialogs waiting here
        last = getattr(i, "last_reclass", None)
        tables = [i.msdb_routes] + [db.routes for db in i.dbs.values()]
        if any(r.expires_ms is not None and r.expires_ms <= self.now and (last is None or r.expires_ms > last)
               for t in tables for r in t):
            for m in list(i.txq) + list(i.fwd):
                i.touched.add(m.dialog.name)
        i.last_reclass = self.now
        touched = set(i.touched)
        for m in sorted(list(i.txq) + list(i.fwd), key=lambda x: (x.received_ms, x.seq)):
            if m.dialog.name in touched and m.wait and m.wait[0] != "line" and m.dialog.name not in names:
                names.append(m.dialog.name)
        # a failed dialog with nothing waiting here is resumed too (PER-2B allows either), and named
        for dn in sorted(touched):
            if dn in i.failed_dialogs and dn not in names:
                names.append(dn)
        i.touched = set()
        for dn in names:
            i.failed_dialogs.discard(dn)
        self.ev("transmitter_reclassified", instance=i.name, dialogs=names)
        for dn in names:
            for m in sorted(list(i.txq) + list(i.fwd), key=lambda x: x.seq):
                if m.dialog.name == dn and m.wait and m.wait[0] != "line" and m.where is not None:
                    # routed again even when the principal retry routed it at this instant: PER-2B only
                    # exempts a dialog that its own time-out routed then (time-outs run before the timer)
                    if not (getattr(m, "last_routed", None) == self.now and getattr(m, "last_retry", None) == self.now):
                        self.reroute(m)
                    break

    # ------------------------------------------------------------------ views
    def cmd_query_view(self, c):
        v = c["view"]
        iname = c.get("instance")
        insts = [self.inst(iname)] if iname else list(self.insts.values())
        rows = []
        if v == "sys.dm_broker_queue_monitors":
            for i in insts:
                for db in i.dbs.values():
                    for q in db.queues.values():
                        if not q.monitor:
                            continue
                        if q.notify_until is not None and not q.received_since_notify:
                            st = "NOTIFIED"
                        elif q.tasks or (q.notify_until is not None and q.received_since_notify):
                            st = "RECEIVES_OCCURRING"
                        else:
                            st = "INACTIVE"
                        rows.append(dict(database_id=db.did, queue_id=q.qid, instance=i.name, database=db.name,
                                         queue=q.name, state=st, last_empty_rowset_time=q.last_empty,
                                         last_activated_time=q.last_activated,
                                         tasks_waiting=len(self.waiting_readers(q))))
        elif v == "sys.dm_broker_activated_tasks":
            for i in insts:
                for db in i.dbs.values():
                    for q in db.queues.values():
                        for t in q.tasks:
                            rows.append(dict(spid=t.session.spid, database_id=db.did, queue_id=q.qid,
                                             instance=i.name, database=db.name, queue=q.name, task=t.n,
                                             procedure_name=q.proc_name))
        elif v == "sys.routes":
            for i in insts:
                if c.get("database") is None:
                    tabs = [("msdb", i.msdb_routes)]
                else:
                    tabs = [(c["database"], self.db(i.name, c["database"]).routes)]
                for dn, t in tabs:
                    for r in t:
                        rows.append(dict(instance=i.name, database=dn, name=r.name,
                                         remote_service_name=r.service_name, broker_instance=r.broker_instance,
                                         address=r.address, mirror_address=r.mirror_address,
                                         expires_ms=r.expires_ms))
        elif v in ("sys.transmission_queue", "sbtck.forwarder"):
            for i in insts:
                for m in (i.txq if v == "sys.transmission_queue" else i.fwd):
                    svc, _ = self.target_of(m)
                    rows.append(dict(instance=i.name, dialog=m.dialog.name, message_sequence_number=m.seq,
                                     from_target=m.from_target, to_service_name=svc,
                                     transmission_status=m.status or "", received_ms=m.received_ms))
        elif v == "sys.conversation_endpoints":
            for d in self.dialogs.values():
                if iname is None or d.inst.name == iname:
                    rows.append(dict(dialog=d.name, instance=d.inst.name, database=d.db.name,
                                     far_service=d.to_service, far_broker_instance=d.to_bi or d.acked_bi,
                                     acknowledged=d.acked_bi is not None))
                if d.t_db is not None and (iname is None or d.t_inst.name == iname):
                    rows.append(dict(dialog=d.name, instance=d.t_inst.name, database=d.t_db.name,
                                     far_service=d.from_service, far_broker_instance=d.db.bi,
                                     acknowledged=True))
        elif v == "sys.dm_broker_connections":
            for i in insts:
                for cn in i.conns.values():
                    rows.append(dict(instance=i.name, address=cn["address"], state="CONNECTED",
                                     opened_ms=cn["opened"], last_activity_ms=cn["last"]))
        elif v == "sbtck.dispatcher_buffers":
            for i in insts:
                for m in i.disp:
                    rows.append(dict(instance=i.name, database=m.tdb.name, dialog=m.dialog.name,
                                     message_sequence_number=m.seq, from_target=m.from_target,
                                     arrived_ms=m.arrived_ms))
        elif v == "sbtck.periodic_state":
            for i in insts:
                for db in i.dbs.values():
                    rows.append(dict(instance=i.name, task_handlers=i.th_total, running_task_handlers=i.th_running,
                                     database=db.name, broker_started=db.started, ack_cleanup_running=db.ack_cleanup))
        else:
            raise Refuse("no view %r" % v)
        return {"rows": rows}

    def cmd_advance_time(self, c):
        return {}

    # ------------------------------------------------------------------ dispatch
    def execute(self, c):
        kind = c.get("kind")
        at = c.get("at_ms")
        if kind != "start":
            if not self.started:
                raise Refuse("no topology has been started")
            if at is not None and at > self.now:
                self.advance(at)
        fn = getattr(self, "cmd_" + kind, None)
        if fn is None:
            raise Refuse("unknown command %r" % kind)
        res = fn(c)
        if not isinstance(res, dict):
            res = {}
        self.settle()
        return res


def main():
    b = Broker()
    caps = ["activation", "external_activation", "routing", "mirroring", "dynamic_routing", "forwarding",
            "periodic_tasks"]
    if TRACE:
        caps.append("decision_trace")
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
            resp = {"id": rid, "ok": True, "result": {"name": "cleanroom9", "version": "0.1", "protocol": "2.2",
                                                      "capabilities": caps, "params": dict(PARAMS)}}
        elif op == "bye":
            out.write(json.dumps({"id": rid, "ok": True}) + "\n")
            out.flush()
            return
        elif op == "execute":
            b.events = []
            try:
                res = b.execute(req["command"])
                resp = {"id": rid, "ok": True, "result": res, "events": b.events}
            except Refuse as e:
                try:
                    b.settle()
                except Exception:
                    pass
                resp = {"id": rid, "ok": False, "error": str(e), "events": b.events}
            except Exception as e:
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
