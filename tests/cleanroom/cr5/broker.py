#!/usr/bin/env python3
"""cr8 clean-room Service Broker model speaking the sbtck protocol over stdio.

Written from the source documents (/work/shared/spec) and the kit's docs only.
Standard library only.  SBTCK_CR8_NO_TRACE=1 leaves decision_trace out.
"""
import heapq
import json
import os
import sys
import traceback

TRACE = os.environ.get("SBTCK_CR8_NO_TRACE", "") not in ("1", "true", "yes")
CAPS = ["activation", "external_activation", "routing", "mirroring", "forwarding",
        "dynamic_routing", "periodic_tasks"] + (["decision_trace"] if TRACE else [])
PARAMS = {
    "activation_empty_window_s": float(os.environ.get("CR8_WINDOW", "3")),
    "external_activation_timeout_s": float(os.environ.get("CR8_EXT", "20")),
    "delayed_retry_s": float(os.environ.get("CR8_RETRY", "8")),
    "forward_hop_limit": int(os.environ.get("CR8_HOPS", "4")),
}
for _k in ("activation_empty_window_s", "external_activation_timeout_s", "delayed_retry_s"):
    if PARAMS[_k] == int(PARAMS[_k]):
        PARAMS[_k] = int(PARAMS[_k])

TRACE_KINDS = {"activation_necessary", "activation_withheld", "routes_matched", "route_chosen",
               "timer_notification", "transmitter_reclassified"}
TRACE_FIELDS = ("rule", "step", "trigger")
BCN_SERVICE = "http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice"
TIMER_MS = 5000
# A buffered message both stale and out of order: the periodic-tasks document gives no priority.
# Default: "stale" (checked first); CR8_OOO_FIRST=1 reports "out of order" (the reference's pick).
# A message waiting for a mirrored route's principal: matched again at each retry (default), or
# CR8_MIRROR_REMATCH=0: only the route's two addresses asked again.
MIRROR_REMATCH = os.environ.get("CR8_MIRROR_REMATCH", "1") != "0"
# On a route expiration the transmitter reclassifies the dialogs waiting in the transmission queue;
# CR8_EXPIRY_ALL=1 also those waiting in the forwarder (the reference's pick).
EXPIRY_ALL = os.environ.get("CR8_EXPIRY_ALL", "") == "1"
# Several sessions waiting on one queue: the one waiting longest is served first (default);
# CR8_WAITER_LAST=1 serves the latest first (evidence only).
WAITER_LAST = os.environ.get("CR8_WAITER_LAST", "") == "1"
OOO_FIRST = os.environ.get("CR8_OOO_FIRST", "") == "1"


class Refused(Exception):
    pass


def low(a):
    return a.lower() if isinstance(a, str) else a


def bi_eq(a, b):
    return a is not None and b is not None and a.lower() == b.lower()


class Route:
    def __init__(self, d, now, order):
        self.name = d.get("name")
        self.service = d.get("service_name")
        self.bi = d.get("broker_instance")
        self.address = d.get("address")
        self.mirror = d.get("mirror_address")
        lt = d.get("lifetime_s")
        self.expires = None if lt is None else now + int(round(lt * 1000))
        self.order = order
        self.principal = None  # learnt principal address (mirror routes)
        self.lost = False

    def kind(self):
        a = (self.address or "").upper()
        if a == "LOCAL":
            return "LOCAL"
        if a == "TRANSPORT":
            return "TRANSPORT"
        return "NET"


class Queue:
    def __init__(self, inst, db, d):
        self.inst, self.db, self.name = inst, db, d["name"]
        act = d.get("activation") or {}
        self.status = (act.get("status") or "OFF").upper()
        self.proc = act.get("procedure_name")
        self.max = act.get("max_queue_readers")
        if self.max is None:
            self.max = 1
        self.notifications = []
        self.messages = []  # ready (unread) messages: dicts
        self.locks = {}  # group -> session
        self.monitor = False
        self.state = "INACTIVE"
        self.last_empty = None
        self.last_activated = None
        self.task_counter = 0
        self.procs = {}  # task -> Proc
        self.notif_until = None
        self.waiting = []  # sessions waiting (in order)
        self.qid = 0

    def wants_monitor(self):
        return self.status == "ON" or bool(self.notifications)


class Session:
    def __init__(self, name, spid):
        self.name = name
        self.spid = spid
        self.tx = False
        self.held = []  # (queue, msg) received in tx
        self.locks = set()  # (queue, group)
        self.queues = set()
        self.wait = None  # dict describing waiting statement
        self.proc = None


class Proc:
    def __init__(self, q, task, sess, spec):
        self.q, self.task, self.sess, self.spec = q, task, sess, spec
        self.alive = True


class Dialog:
    def __init__(self, name, inst, db, frm, to, bi):
        self.name, self.inst, self.db = name, inst, db
        self.frm, self.to, self.to_bi = frm, to, bi
        self.acked_bi = None
        self.acked = False
        self.seq = {False: 0, True: 0}
        self.target = None  # (inst, db) once a message arrived
        self.expect = {False: 0, True: 0}  # next sequence the receiving end expects
        self.groups = {}


class Broker:
    def __init__(self):
        self.reset(0)

    # ------------------------------------------------------------ basics
    def reset(self, now):
        self.now = now
        self.t0 = now
        self.events = []
        self.heap = []
        self.hseq = 0
        self.looks = []
        self.instances = {}
        self.dialogs = {}
        self.sessions = {}
        self.spid = 50
        self.dbid = 4
        self.qid = 100
        self.route_order = 0
        self.pending_req = set()
        self.lost = {}
        self.msgid = 0

    def ev(self, kind, **f):
        if not TRACE:
            if kind in TRACE_KINDS:
                return
            for k in TRACE_FIELDS:
                f.pop(k, None)
        e = {"at_ms": self.now, "kind": kind}
        e.update(f)
        self.events.append(e)

    def at(self, t, fn):
        self.hseq += 1
        heapq.heappush(self.heap, (t, self.hseq, fn))

    def settle(self):
        while True:
            if self.heap and self.heap[0][0] <= self.now:
                _, _, fn = heapq.heappop(self.heap)
                fn()
                continue
            if self.looks:
                q, trig, extra = self.looks.pop(0)
                self.look(q, trig, extra)
                continue
            return

    def run_until(self, t):
        while True:
            self.settle()
            if self.heap and self.heap[0][0] <= t:
                self.now = self.heap[0][0]
                continue
            break
        self.now = max(self.now, t)

    # ------------------------------------------------------------ topology
    def inst(self, name):
        i = self.instances.get(name)
        if i is None:
            raise Refused("no instance %r" % name)
        return i

    def db(self, iname, dname):
        i = self.inst(iname)
        d = i["dbs"].get(dname)
        if d is None:
            raise Refused("no database %r on %r" % (dname, iname))
        return d

    def queue(self, qr):
        d = self.db(qr["instance"], qr["database"])
        q = d["queues"].get(qr["queue"])
        if q is None:
            raise Refused("no queue %r" % qr["queue"])
        return q

    def new_route(self, d):
        self.route_order += 1
        return Route(d, self.now, self.route_order)

    def start(self, c):
        self.reset(c["at_ms"])
        topo = c["topology"]
        for idef in topo.get("instances", []):
            inst = {"name": idef["name"], "address": idef.get("address") or "", "cpus": idef.get("cpus") or 1,
                    "forwarding": bool(idef.get("message_forwarding")), "dbs": {}, "reachable": True,
                    "conns": {}, "suppressed": {}, "timer": 0, "dispatch_mode": "running", "dispatch_delay": 0,
                    "buffers": [], "forwarder": [], "tq": [], "failed": set(), "touched": set(),
                    "expired_since": False}
            inst["msdb"] = [self.new_route(r) for r in idef.get("msdb_routes", [])]
            inst["handlers"] = 2 * inst["cpus"]
            inst["running_handlers"] = inst["handlers"]
            self.instances[inst["name"]] = inst
            for ddef in idef.get("databases", []):
                self.dbid += 1
                db = {"name": ddef["name"], "inst": inst, "bi": ddef.get("broker_instance"),
                      "master_key": ddef.get("master_key", True) is not False,
                      "role": ddef.get("mirroring_role"), "procs": {}, "queues": {}, "services": {},
                      "id": self.dbid, "ack_cleanup": True}
                db["started"] = db["master_key"]
                for p in ddef.get("procedures", []) or []:
                    db["procs"][p["name"]] = p
                for qd in ddef.get("queues", []) or []:
                    q = Queue(inst, db, qd)
                    self.qid += 1
                    q.qid = self.qid
                    db["queues"][q.name] = q
                for s in ddef.get("services", []) or []:
                    db["services"][s["name"]] = s.get("queue")
                for en in ddef.get("event_notifications", []) or []:
                    qn = en.get("queue")
                    if qn in db["queues"]:
                        db["queues"][qn].notifications.append(en.get("name"))
                db["routes"] = [self.new_route(r) for r in ddef.get("routes", []) or []]
                inst["dbs"][db["name"]] = db
        self.ev("broker_started")
        for inst in self.instances.values():
            self.ev("task_handlers_started", instance=inst["name"], count=inst["handlers"])
            for db in inst["dbs"].values():
                if db["started"]:
                    self.ev("database_broker_started", instance=inst["name"], database=db["name"])
                else:
                    self.ev("database_broker_start_failed", instance=inst["name"], database=db["name"],
                            reason="missing master key")
                for q in db["queues"].values():
                    if q.wants_monitor():
                        q.monitor = True
                        self.ev("monitor_created", instance=inst["name"], database=db["name"], queue=q.name)
        self.at(self.now + TIMER_MS, self.timer)
        return {}

    # ------------------------------------------------------------ sessions
    def session(self, name):
        s = self.sessions.get(name)
        if s is None:
            self.spid += 1
            s = Session(name, self.spid)
            self.sessions[name] = s
        return s

    def group_of(self, dialog, target_side):
        d = self.dialogs[dialog]
        g = d.groups.get(target_side)
        if g is None:
            g = "%s-%s-%s" % ("G", dialog, "t" if target_side else "i")
            d.groups[target_side] = g
        return g

    def qref(self, q):
        return {"instance": q.inst["name"], "database": q.db["name"], "queue": q.name}

    def available(self, q, sess, where_dialog=None, where_group=None):
        """Messages a RECEIVE by sess may take: first eligible group."""
        for m in q.messages:
            owner = q.locks.get(m["group"])
            if owner is not None and owner is not sess:
                continue
            if where_dialog is not None and m["dialog"] != where_dialog:
                continue
            if where_group is not None and m["group"] != where_group:
                continue
            return m["group"]
        return None

    def where_group_id(self, q, dialog):
        if dialog is None:
            return None
        for m in q.messages:
            if m["dialog"] == dialog:
                return m["group"]
        d = self.dialogs.get(dialog)
        if d is None:
            return "none"
        for side in (True, False):
            if side in d.groups:
                return d.groups[side]
        return "none"

    def take(self, q, sess, group, top, where_dialog, statement):
        if statement == "GET CONVERSATION GROUP":
            if sess.tx:
                q.locks[group] = sess
                sess.locks.add((q, group))
            return []
        rows = []
        for m in list(q.messages):
            if m["group"] != group:
                continue
            if where_dialog is not None and m["dialog"] != where_dialog:
                continue
            if top is not None and len(rows) >= top:
                break
            q.messages.remove(m)
            rows.append(m)
            if sess.tx:
                sess.held.append((q, m))
        if sess.tx:
            q.locks[group] = sess
            sess.locks.add((q, group))
        return rows

    def row(self, m):
        return {"dialog": m["dialog"], "message_sequence_number": m["seq"], "conversation_group": m["group"],
                "message_type_name": m.get("type") or "DEFAULT", "message_body": m.get("body")}

    def statement(self, sess, q, statement, top=None, where_dialog=None, where_group=None, waitfor_ms=None):
        has_where = where_dialog is not None or where_group is not None
        gid = self.where_group_id(q, where_group) if where_group is not None else None
        if sess.tx and statement == "RECEIVE":
            sess.queues.add(q)
        group = self.available(q, sess, where_dialog, gid)
        base = {"instance": q.inst["name"], "database": q.db["name"], "queue": q.name,
                "session": sess.name, "statement": statement, "has_where": has_where}
        if group is not None:
            rows = self.take(q, sess, group, top, where_dialog, statement)
            self.ev("rows_returned", rows=[self.row(m) for m in rows], conversation_group=group, **base)
            result = "rows"
        elif waitfor_ms:
            sess.wait = {"q": q, "statement": statement, "top": top, "where_dialog": where_dialog,
                         "where_group": gid, "has_where": has_where, "token": object()}
            q.waiting.append(sess)
            self.ev("reader_waiting", **base)
            tok = sess.wait["token"]
            self.at(self.now + waitfor_ms, lambda: self.wait_timeout(sess, tok))
            result = "wait"
        else:
            self.ev("empty_result", rows=[], conversation_group=None, **base)
            if not has_where:
                q.last_empty = self.now
            result = "empty"
        if statement == "RECEIVE":
            self.receive_happened(q, True)
        return result

    def receive_happened(self, q, called=False):
        if q.monitor:
            if q.state == "NOTIFIED":
                q.state = "RECEIVES_OCCURRING"
            if called and q.notif_until is not None:
                q.notif_until = None  # ACT-13: an application called RECEIVE
            self.trigger(q, "RECEIVE")

    def wait_timeout(self, sess, tok):
        w = sess.wait
        if w is None or w["token"] is not tok:
            return
        q = w["q"]
        sess.wait = None
        if sess in q.waiting:
            q.waiting.remove(sess)
        self.ev("empty_result", instance=q.inst["name"], database=q.db["name"], queue=q.name,
                session=sess.name, statement=w["statement"], has_where=w["has_where"], rows=[],
                conversation_group=None)
        if not w["has_where"]:
            q.last_empty = self.now
        if w["statement"] == "RECEIVE":
            self.receive_happened(q)
        if sess.proc is not None:
            self.proc_empty(sess.proc)

    def serve_waiters(self, q):
        progress = True
        while progress:
            progress = False
            for sess in (list(reversed(q.waiting)) if WAITER_LAST else list(q.waiting)):
                w = sess.wait
                group = self.available(q, sess, w["where_dialog"], w["where_group"])
                if group is None:
                    continue
                q.waiting.remove(sess)
                sess.wait = None
                rows = self.take(q, sess, group, w["top"], w["where_dialog"], w["statement"])
                self.ev("rows_returned", instance=q.inst["name"], database=q.db["name"], queue=q.name,
                        session=sess.name, statement=w["statement"], has_where=w["has_where"],
                        rows=[self.row(m) for m in rows], conversation_group=group)
                if w["statement"] == "RECEIVE":
                    self.receive_happened(q)
                if sess.proc is not None:
                    self.proc_got_rows(sess.proc)
                progress = True
                break

    def commit(self, sess, report=True):
        if not sess.tx:
            raise Refused("no transaction in session %r" % sess.name)
        sess.tx = False
        qs = set()
        for (q, g) in sess.locks:
            if q.locks.get(g) is sess:
                del q.locks[g]
            qs.add(q)
        sess.locks = set()
        sess.held = []
        sess.queues = set()
        if report:
            self.ev("transaction_committed", session=sess.name)
        for q in sorted(qs, key=lambda x: x.qid):
            self.serve_waiters(q)

    def rollback(self, sess):
        if not sess.tx:
            raise Refused("no transaction in session %r" % sess.name)
        sess.tx = False
        qs = set(sess.queues)
        n = 0
        for (q, m) in sess.held:
            q.messages.append(m)
            n += 1
            qs.add(q)
        for q in qs:
            q.messages.sort(key=lambda m: m["order"])
        for (q, g) in sess.locks:
            if q.locks.get(g) is sess:
                del q.locks[g]
            qs.add(q)
        sess.locks = set()
        sess.held = []
        self.ev("transaction_rolled_back", session=sess.name, returned=n)
        rq = set(sess.queues)
        sess.queues = set()
        for q in sorted(rq, key=lambda x: x.qid):
            self.trigger(q, "rollback")
        for q in sorted(qs, key=lambda x: x.qid):
            self.serve_waiters(q)

    # ------------------------------------------------------------ activation
    def trigger(self, q, trig, extra=None):
        if q.monitor:
            self.looks.append((q, trig, extra or {}))

    def unread(self, q):
        return len(q.messages)

    def waiting_readers(self, q):
        return sum(1 for s in q.waiting if s.wait and not s.wait["has_where"])

    def look(self, q, trig, extra):
        if not q.monitor:
            return
        rule = None
        if trig == "message arrived" and extra.get("was_empty") and not q.procs:
            rule = "ACT-06"
        elif self.unread(q) > 0 and self.waiting_readers(q) == 0 and (
                q.last_empty is None or self.now - q.last_empty >= PARAMS["activation_empty_window_s"] * 1000):
            rule = "ACT-07"
        if rule is None:
            if q.state != "INACTIVE" and self.unread(q) == 0 and not q.procs:
                q.state = "INACTIVE"
            return
        base = {"instance": q.inst["name"], "database": q.db["name"], "queue": q.name}
        self.ev("activation_necessary", rule=rule, trigger=trig, **base)
        if q.notifications:
            if q.notif_until is not None and self.now < q.notif_until:
                self.ev("activation_withheld", reason="notification time-out", **base)
            else:
                for n in q.notifications:
                    self.ev("event_notification", event_type="QUEUE_ACTIVATION", notification=n, **base)
                q.last_activated = self.now
                q.state = "NOTIFIED"
                until = self.now + int(round(PARAMS["external_activation_timeout_s"] * 1000))
                q.notif_until = until
                self.at(until, lambda: self.notif_timeout(q, until))
        if q.status == "ON" and q.proc:
            if len(q.procs) < q.max:
                self.start_proc(q)
            else:
                self.ev("activation_withheld", reason="MAX_QUEUE_READERS", **base)

    def notif_timeout(self, q, until):
        if q.notif_until != until:
            return
        q.notif_until = None
        self.ev("activation_time_out", instance=q.inst["name"], database=q.db["name"], queue=q.name)
        self.trigger(q, "external activation time-out")

    def start_proc(self, q):
        q.task_counter += 1
        task = q.task_counter
        name = "%s#%d" % (q.name, task)
        self.spid += 1
        sess = Session(name, self.spid)
        self.sessions[name] = sess
        spec = q.db["procs"].get(q.proc) or {"name": q.proc, "receives": True}
        p = Proc(q, task, sess, spec)
        sess.proc = p
        q.procs[task] = p
        q.last_activated = self.now
        q.state = "NOTIFIED"
        self.ev("procedure_started", instance=q.inst["name"], database=q.db["name"], queue=q.name,
                procedure_name=q.proc, spid=sess.spid, task=task)
        if spec.get("receives", True) is not False:
            self.proc_receive(p)

    def proc_receive(self, p):
        if not p.alive:
            return
        sess = p.sess
        if not sess.tx:
            sess.tx = True
            sess.queues = set()
        top = p.spec.get("receive_top", 1) if "receive_top" in p.spec else 1
        wf = p.spec.get("waitfor_ms")
        r = self.statement(sess, p.q, "RECEIVE", top=top, waitfor_ms=wf)
        if r == "rows":
            self.proc_got_rows(p)
        elif r == "empty":
            self.proc_empty(p)

    def proc_got_rows(self, p):
        work = p.spec.get("work_ms") or 0
        self.at(self.now + work, lambda: self.proc_step(p))

    def proc_step(self, p):
        if not p.alive:
            return
        if p.sess.tx:
            self.commit(p.sess)
        self.proc_receive(p)

    def proc_empty(self, p):
        if p.sess.tx:
            self.commit(p.sess)
        self.proc_exit(p, "empty RECEIVE")

    def proc_exit(self, p, reason):
        q = p.q
        p.alive = False
        sess = p.sess
        if sess.wait is not None:
            if sess in q.waiting:
                q.waiting.remove(sess)
            sess.wait = None
        if sess.tx:
            self.commit(sess)
        q.procs.pop(p.task, None)
        self.ev("procedure_exited", instance=q.inst["name"], database=q.db["name"], queue=q.name,
                reason=reason, spid=sess.spid, task=p.task)
        if not q.procs:
            self.trigger(q, "all procedures exited")

    def update_monitor(self, q):
        want = q.wants_monitor()
        base = {"instance": q.inst["name"], "database": q.db["name"], "queue": q.name}
        if want and not q.monitor:
            q.monitor = True
            q.state = "INACTIVE"
            self.ev("monitor_created", **base)
        elif not want and q.monitor:
            q.monitor = False
            q.notif_until = None
            self.ev("monitor_removed", **base)

    # ------------------------------------------------------------ routing helpers
    def db_has_service(self, db, svc):
        return db["started"] and db["role"] != "mirror" and svc in db["services"]

    def inst_has_service(self, inst, svc):
        return any(self.db_has_service(db, svc) for db in inst["dbs"].values())

    def inst_by_addr(self, addr):
        for i in self.instances.values():
            if low(i["address"]) == low(addr):
                return i
        return None

    def table(self, inst, dbname):
        if dbname is None:
            return inst["msdb"], "msdb.sys.routes"
        return inst["dbs"][dbname]["routes"], "%s.sys.routes" % dbname

    def live(self, routes):
        return [r for r in routes if r.expires is None or self.now < r.expires]

    def mbase(self, m):
        return {"dialog": m["dialog"], "from_target": m["from_target"], "message_sequence_number": m["seq"]}

    def conv_bi(self, m):
        d = self.dialogs[m["dialog"]]
        if m["from_target"]:
            idb = d.inst["dbs"][d.db]
            return idb["bi"]
        return d.acked_bi if d.acked_bi else d.to_bi

    def svc_of(self, m):
        d = self.dialogs[m["dialog"]]
        return d.frm if m["from_target"] else d.to

    def match(self, inst, dbname, m):
        routes, tname = self.table(inst, dbname)
        routes = self.live(routes)
        svc = self.svc_of(m)
        bi = self.conv_bi(m)
        b = dict(self.mbase(m), instance=inst["name"])
        found, step, pick = [], None, None
        if bi:
            found = [r for r in routes if r.service == svc and bi_eq(r.bi, bi)]
            step = "RTM-1"
        if not found:
            found = [r for r in routes if r.service == svc and r.bi is None]
            step = "RTM-2"
        if not found and not bi:
            c = [r for r in routes if r.service == svc and r.bi is not None]
            if c:
                pick = c[0].bi
                found = [r for r in c if bi_eq(r.bi, pick)]
                step = "RTM-3"
        if found:
            ev = dict(b, step=step, table=tname, routes=[r.name for r in found])
            if step == "RTM-3":
                ev["broker_instance"] = pick.upper()
            self.ev("routes_matched", **ev)
            return ("routes", found, tname)
        for r in routes:
            if r.service == BCN_SERVICE and (tname, r.name, svc) not in self.pending_req:
                self.pending_req.add((tname, r.name, svc))
                self.ev("routes_matched", step="RTM-4", table=tname, routes=[], **b)
                self.ev("routing_requested", route=r.name, service=svc, table=tname, **b)
                return ("delay", "RTM-4", tname)
        found = [r for r in routes if r.service is None and r.bi is None]
        if found:
            self.ev("routes_matched", step="RTM-5", table=tname, routes=[r.name for r in found], **b)
            return ("routes", found, tname)
        if bi and self.inst_has_service(inst, svc):
            self.ev("routes_matched", step="RTM-6", table=tname, routes=["(as if LOCAL)"], **b)
            r = Route({"name": "(as if LOCAL)", "service_name": svc, "address": "LOCAL"}, self.now, 0)
            return ("routes", [r], tname)
        self.ev("routes_matched", step="RTM-7", table=tname, routes=[], **b)
        return ("delay", "RTM-7", tname)

    def choose(self, inst, m, routes):
        svc = self.svc_of(m)
        distinct, seen = [], set()
        for r in routes:
            key = (low(r.bi), r.service, low(r.address))
            if key in seen:
                continue
            seen.add(key)
            distinct.append(r)
        b = dict(self.mbase(m), instance=inst["name"])
        steps = [("RTC-1", [r for r in distinct if r.mirror]),
                 ("RTC-2", [r for r in distinct if r.kind() == "LOCAL" and not r.mirror]),
                 ("RTC-3", [r for r in distinct if r.kind() == "NET" and not r.mirror]),
                 ("RTC-4", [r for r in distinct if r.kind() == "TRANSPORT" and not r.mirror])]
        for step, c in steps:
            if not c:
                continue
            if step == "RTC-2" and not self.inst_has_service(inst, svc):
                continue
            r = c[0]
            self.ev("route_chosen", step=step, route=r.name, candidates=[x.name for x in c], **b)
            return r
        return None

    # ------------------------------------------------------------ routing main
    def new_msg(self, d, from_target):
        seq = d.seq[from_target]
        d.seq[from_target] += 1
        self.msgid += 1
        return {"dialog": d.name, "seq": seq, "from_target": from_target, "hops": 0, "id": self.msgid}

    def waiting_for(self, inst, m):
        for w in inst["tq"]:
            if w["m"]["dialog"] == m["dialog"] and w["m"]["from_target"] == m["from_target"]:
                return w
        return None

    def route_out(self, inst, dbname, m, outside=False, retry=False):
        """Route a message at inst. dbname: the sending database (None for outside/msdb)."""
        if outside:
            tdb = None
        else:
            tdb = dbname
        res = self.match(inst, tdb, m)
        if res[0] == "delay":
            self.delay(inst, dbname, m, res[1], outside)
            return
        _, routes, tname = res
        r = self.choose(inst, m, routes)
        if r is None:
            self.delay(inst, dbname, m, "RTC-4", outside)
            return
        if outside and not inst["forwarding"] and r.kind() != "LOCAL":
            self.drop(inst, m, "RTC-5", "message forwarding is not active")
            return
        if r.kind() == "LOCAL":
            self.locate(inst, dbname, m, r, outside)
            return
        if outside:
            self.forward(inst, m, r)
            return
        self.send_by_route(inst, dbname, m, r, outside=False)

    def send_by_route(self, inst, dbname, m, r, outside):
        if r.mirror:
            self.mirror_send(inst, dbname, m, r, outside)
            return
        if r.kind() == "TRANSPORT":
            svc = self.svc_of(m)
            addr = None
            if isinstance(svc, str) and svc.upper().startswith("TCP://"):
                rest = svc[6:]
                hostport = rest.split("/", 1)[0]
                addr = "TCP://" + hostport
            if addr is None:
                self.delay(inst, dbname, m, "RTC-4", outside)
                return
        else:
            addr = r.address
        self.transmit(inst, dbname, m, addr, outside)

    def drop(self, inst, m, rule, reason):
        self.ev("message_dropped", instance=inst["name"], rule=rule, reason=reason, **self.mbase(m))
        self.release_line(inst, m)

    def delay(self, inst, dbname, m, step, outside):
        b = dict(self.mbase(m), instance=inst["name"])
        self.ev("conversation_delayed", step=step, **b)
        w = self.put_waiting(inst, dbname, m, outside, "delayed: no route matched (%s)" % step)
        w["kind"] = "delayed"
        tok = object()
        w["tok"] = tok
        self.at(self.now + int(round(PARAMS["delayed_retry_s"] * 1000)), lambda: self.retry(inst, w, tok))

    def put_waiting(self, inst, dbname, m, outside, status):
        w = None
        for x in inst["tq"]:
            if x["m"] is m:
                w = x
        if w is None:
            ws = m.setdefault("wait_since", {})
            if inst["name"] not in ws:
                ws[inst["name"]] = self.now
            w = {"m": m, "db": dbname, "outside": outside, "received": ws[inst["name"]], "behind": []}
            inst["tq"].append(w)
        w["status"] = status
        w["since"] = self.now
        self.ev("transmission_pending", instance=inst["name"], status=status, **self.mbase(m))
        return w

    def remove_waiting(self, inst, w):
        if w in inst["tq"]:
            inst["tq"].remove(w)

    def retry(self, inst, w, tok):
        if w.get("tok") is not tok or w not in inst["tq"]:
            return
        self.remove_waiting(inst, w)
        m = w["m"]
        inst["touched"].discard(m["dialog"])
        self.ev("routing_retried", instance=inst["name"], **self.mbase(m))
        behind = w["behind"]
        self.route_out(inst, w["db"], m, outside=w["outside"], retry=True)
        self.follow(inst, m, behind)

    def follow(self, inst, m, behind):
        """Messages that waited behind m go on if m no longer waits here."""
        if not behind:
            return
        w = None
        for x in inst["tq"]:
            if x["m"] is m:
                w = x
        if w is not None:
            w["behind"].extend(behind)
            return
        first = behind[0]
        rest = behind[1:]
        first[1].setdefault("wait_since", {}).setdefault(inst["name"], first[3])
        self.route_out(inst, first[0], first[1], outside=first[2])
        self.follow(inst, first[1], rest)

    def release_line(self, inst, m):
        for w in list(inst["tq"]):
            if w["m"] is m:
                inst["tq"].remove(w)
                self.follow(inst, m, w["behind"])
                return

    # ------------------------------------------------------------ delivery
    def locate(self, inst, dbname, m, r, outside):
        d = self.dialogs[m["dialog"]]
        svc = self.svc_of(m)
        bi = self.conv_bi(m) or r.bi
        target = None
        if bi:
            for db in inst["dbs"].values():
                if bi_eq(db["bi"], bi) and self.db_has_service(db, svc):
                    target = db
            if target is None:
                self.drop(inst, m, "RTL-2", "no database with the broker instance holds the service")
                return
        else:
            order = []
            if dbname is not None and dbname in inst["dbs"]:
                order.append(inst["dbs"][dbname])
            elif m["from_target"] and d.inst is inst:
                order.append(inst["dbs"][d.db])
            for db in inst["dbs"].values():
                if db not in order:
                    order.append(db)
            for db in order:
                if self.db_has_service(db, svc):
                    target = db
                    break
            if target is None:
                self.delay(inst, dbname, m, "RTC-4", outside)
                return
        if outside:
            self.dispatch(inst, target, m)
        else:
            self.deliver(inst, target, m)

    def deliver(self, inst, db, m):
        d = self.dialogs[m["dialog"]]
        svc = self.svc_of(m)
        q = db["queues"].get(db["services"].get(svc))
        if not m["from_target"] and d.target is None:
            d.target = (inst["name"], db["name"])
        g = self.group_of(m["dialog"], not m["from_target"])
        d.expect[m["from_target"]] = max(d.expect[m["from_target"]], m["seq"] + 1)
        if q is None:
            return
        was_empty = len(q.messages) == 0
        no_procs = len(q.procs) == 0
        self.msgid += 1
        qm = {"dialog": m["dialog"], "seq": m["seq"], "from_target": m["from_target"], "group": g,
              "order": self.msgid, "body": m.get("body"), "type": m.get("type")}
        q.messages.append(qm)
        self.ev("message_arrived", instance=inst["name"], database=db["name"], queue=q.name,
                service=svc, conversation_group=g, **self.mbase(m))
        if not m["from_target"] and not d.acked:
            d.acked = True
            d.acked_bi = db["bi"]
            self.ev("acknowledged", instance=d.inst["name"], dialog=d.name, broker_instance=db["bi"])
        self.release_line(inst, m)
        self.serve_waiters(q)
        self.trigger(q, "message arrived", {"was_empty": was_empty, "no_procs": no_procs})

    def dispatch(self, inst, db, m):
        d = self.dialogs[m["dialog"]]
        for b in inst["buffers"]:
            if b["m"]["dialog"] == m["dialog"] and b["m"]["from_target"] == m["from_target"] and \
                    b["m"]["seq"] == m["seq"]:
                return
        if m["seq"] < d.expect[m["from_target"]]:
            return
        b = {"m": m, "db": db, "arrived": self.now}
        inst["buffers"].append(b)
        self.ev("dispatcher_buffered", instance=inst["name"], database=db["name"], **self.mbase(m))
        self.release_line(inst, m)
        self.try_save(inst)

    def try_save(self, inst):
        if inst["dispatch_mode"] != "running":
            return
        progress = True
        while progress:
            progress = False
            for b in sorted(inst["buffers"], key=lambda x: (x["m"]["dialog"], x["m"]["seq"])):
                m = b["m"]
                d = self.dialogs[m["dialog"]]
                if m["seq"] != d.expect[m["from_target"]]:
                    continue
                due = b["arrived"] + int(round(inst["dispatch_delay"] * 1000))
                if due > self.now:
                    self.at(due, lambda i=inst: self.try_save(i))
                    continue
                inst["buffers"].remove(b)
                self.deliver(inst, b["db"], m)
                progress = True
                break

    # ------------------------------------------------------------ transport
    def transmit(self, inst, dbname, m, addr, outside):
        key = low(addr)
        if not outside and m["dialog"] in inst["failed"]:
            w = self.put_waiting(inst, dbname, m, False, "failed to %s" % addr)
            w["kind"] = "failed"
            w["tok"] = None
            return
        target = self.inst_by_addr(addr)
        if target is inst and not outside:
            # RTX-2: own address: treat as arriving from outside, without the network
            self.arrive(inst, m)
            return
        c = inst["conns"].get(key)
        if c is None:
            if self.suppressed(inst, key):
                self.wait_conn(inst, dbname, m, addr, outside)
                return
            if not self.connect(inst, addr):
                self.wait_conn(inst, dbname, m, addr, outside)
                return
        self.send_over(inst, m, addr, outside)

    def suppressed(self, inst, key):
        u = inst["suppressed"].get(key)
        return u is not None and self.now < u

    def connect(self, inst, addr):
        key = low(addr)
        target = self.inst_by_addr(addr)
        ok = target is not None and target["reachable"]
        self.ev("connection_attempt", instance=inst["name"], address=addr, result="connected" if ok else "refused")
        if ok:
            inst["conns"][key] = {"address": addr, "opened": self.now, "last": self.now}
            inst["suppressed"].pop(key, None)
        else:
            inst["suppressed"][key] = self.now + 60000
        return ok

    def wait_conn(self, inst, dbname, m, addr, outside):
        if outside:
            for f in inst["forwarder"]:
                if f["m"] is m:
                    f["addr"] = addr
                    return
            inst["forwarder"].append({"m": m, "addr": addr, "received": self.now})
            self.ev("transmission_pending", instance=inst["name"], status="waiting for connection to %s" % addr,
                    **self.mbase(m))
            return
        w = self.put_waiting(inst, dbname, m, outside, "waiting for connection to %s" % addr)
        w["kind"] = "conn"
        w["addr"] = addr
        w["tok"] = None

    def send_over(self, inst, m, addr, outside):
        key = low(addr)
        c = inst["conns"][key]
        c["last"] = self.now
        target = self.inst_by_addr(addr)
        self.ev("message_transmitted", instance=inst["name"], address=addr, to_instance=target["name"],
                **self.mbase(m))
        m.get("wait_since", {}).pop(inst["name"], None)
        for w in list(inst["tq"]):
            if w["m"] is m:
                inst["tq"].remove(w)
                behind = w["behind"]
                lk = (m["dialog"], m["seq"], m["from_target"])
                self.after_send(inst, m, target, lk)
                self.follow(inst, m, behind)
                return
        for f in list(inst["forwarder"]):
            if f["m"] is m:
                inst["forwarder"].remove(f)
        self.after_send(inst, m, target, (m["dialog"], m["seq"], m["from_target"]))

    def after_send(self, inst, m, target, lk):
        if lk in self.lost:
            every = self.lost[lk]
            if not every:
                del self.lost[lk]
            self.ev("message_lost_in_transit", instance=inst["name"], address=target["address"], **self.mbase(m))
            return
        self.arrive(target, dict(m))

    def arrive(self, inst, m):
        m.get("wait_since", {}).pop(inst["name"], None)
        d = self.dialogs[m["dialog"]]
        if m["from_target"]:
            idb = d.inst["dbs"][d.db]
            if d.inst is inst:
                self.ev("reply_recognised", instance=inst["name"], broker_instance=idb["bi"], **self.mbase(m))
                self.dispatch(inst, idb, m)
                return
        self.route_out(inst, None, m, outside=True)

    def forward(self, inst, m, r):
        hops = m.get("hops", 0) + 1
        if hops > PARAMS["forward_hop_limit"]:
            self.drop(inst, m, "RTX-1", "hop limit")
            return
        if r.mirror:
            addr = self.mirror_resolve(inst, m, r)
            if addr is None:
                self.wait_principal(inst, None, m, r, True)
                return
        elif r.kind() == "TRANSPORT":
            svc = self.svc_of(m)
            if not (isinstance(svc, str) and svc.upper().startswith("TCP://")):
                self.delay(inst, None, m, "RTC-4", True)
                return
            addr = "TCP://" + svc[6:].split("/", 1)[0]
        else:
            addr = r.address
        self.forward_to(inst, m, addr)

    def forward_to(self, inst, m, addr):
        behind = []
        for w in list(inst["tq"]):
            if w["m"] is m:
                inst["tq"].remove(w)
                behind = w["behind"]
        self.forward_to2(inst, m, addr)
        self.follow(inst, m, behind)

    def forward_to2(self, inst, m, addr):
        m["hops"] = m.get("hops", 0) + 1
        self.ev("message_forwarded", instance=inst["name"], address=addr, hops=m["hops"], **self.mbase(m))
        key = low(addr)
        target = self.inst_by_addr(addr)
        if target is inst:
            self.arrive(inst, m)
            return
        if key not in inst["conns"]:
            if self.suppressed(inst, key) or not self.connect(inst, addr):
                ws = m.setdefault("wait_since", {})
                rec = ws.setdefault(inst["name"], self.now)
                inst["forwarder"].append({"m": m, "addr": addr, "received": rec})
                self.ev("transmission_pending", instance=inst["name"], status="waiting for connection to %s" % addr,
                        **self.mbase(m))
                return
        self.send_over(inst, m, addr, True)

    # ------------------------------------------------------------ mirroring
    def probe_answer(self, addr, m, r=None):
        target = self.inst_by_addr(addr)
        if target is None or not target["reachable"]:
            return "unreachable"
        svc = self.svc_of(m)
        bi = self.conv_bi(m) or (r.bi if r is not None else None)
        if bi:
            for db in target["dbs"].values():
                if bi_eq(db["bi"], bi) and db["role"] != "mirror":
                    return "principal"
            return "not principal"
        for db in target["dbs"].values():
            if svc in db["services"] and db["role"] != "mirror":
                return "principal"
        return "not principal"

    def mirror_resolve(self, inst, m, r):
        b = dict(self.mbase(m), instance=inst["name"], route=r.name)
        if r.principal is not None:
            ans = self.probe_answer(r.principal, m, r)
            if ans == "principal":
                return r.principal
            self.ev("principal_lost", address=r.principal, answer=ans, **b)
            other = r.mirror if low(r.principal) == low(r.address) else r.address
            a2 = self.probe_answer(other, m, r)
            self.ev("principal_probe", address=other, answer=a2, **b)
            if a2 == "principal":
                r.principal = other
                return other
            r.principal = None
            return None
        found = None
        for a in (r.address, r.mirror):
            ans = self.probe_answer(a, m, r)
            self.ev("principal_probe", address=a, answer=ans, **b)
            if ans == "principal" and found is None:
                found = a
        if found is not None:
            r.principal = found
        return found

    def mirror_send(self, inst, dbname, m, r, outside):
        addr = self.mirror_resolve(inst, m, r)
        if addr is not None:
            self.transmit(inst, dbname, m, addr, outside)
            return
        self.wait_principal(inst, dbname, m, r, outside)

    def wait_principal(self, inst, dbname, m, r, outside):
        w = self.put_waiting(inst, dbname, m, outside, "waiting for the principal of route %s" % r.name)
        w["kind"] = "principal"
        w["route"] = r
        w["tok"] = None

    # ------------------------------------------------------------ periodic
    def timer(self):
        self.at(self.now + TIMER_MS, self.timer)
        insts = list(self.instances.values())
        for inst in insts:
            inst["timer"] += 1
            n = inst["timer"]
            tasks = ["queue monitors", "task handlers", "message dispatcher"]
            if n % 2 == 0:
                tasks += ["transport connections", "transmitter"]
            if n % 5 == 0:
                tasks += ["idle connections", "forwarder", "broker start", "broker configuration notification",
                          "acknowledged message clean-up"]
            self.ev("timer_notification", instance=inst["name"], number=n, tasks=tasks)
        for inst in insts:
            for db in inst["dbs"].values():
                for q in db["queues"].values():
                    self.trigger(q, "timer notification")
        for inst in insts:
            if inst["running_handlers"] < inst["handlers"]:
                k = inst["handlers"] - inst["running_handlers"]
                inst["running_handlers"] = inst["handlers"]
                self.ev("task_handlers_restarted", instance=inst["name"], count=k)
        for inst in insts:
            self.dispatcher_clean(inst)
        n = insts[0]["timer"] if insts else 0
        if n % 2 == 0:
            for inst in insts:
                self.transport_connect(inst)
            for inst in insts:
                self.reclassify(inst)
        if n % 5 == 0:
            for inst in insts:
                for key, c in list(inst["conns"].items()):
                    if self.now - c["last"] >= 90000:
                        del inst["conns"][key]
                        self.ev("connection_closed", instance=inst["name"], address=c["address"], reason="idle")
            for inst in insts:
                for f in list(inst["forwarder"]):
                    if self.now - f["received"] >= 60000:
                        inst["forwarder"].remove(f)
                        self.ev("forwarded_message_deleted", instance=inst["name"], **self.mbase(f["m"]))
                for w in list(inst["tq"]):
                    if w["outside"] and self.now - w["received"] >= 60000:
                        inst["tq"].remove(w)
                        w["tok"] = None
                        self.ev("forwarded_message_deleted", instance=inst["name"], **self.mbase(w["m"]))
                        if w["behind"]:
                            f = w["behind"][0]
                            inst["tq"].append({"m": f[1], "db": f[0], "outside": f[2], "received": f[3],
                                               "behind": w["behind"][1:], "kind": "held", "tok": None,
                                               "status": "behind an earlier message of the conversation",
                                               "since": self.now})
            for inst in insts:
                for db in inst["dbs"].values():
                    if not db["started"] and db["master_key"]:
                        db["started"] = True
                        self.ev("database_broker_started", instance=inst["name"], database=db["name"])
            for inst in insts:
                for db in inst["dbs"].values():
                    if not db["ack_cleanup"] and self.db_has_dialogs(inst, db):
                        db["ack_cleanup"] = True
                        self.ev("ack_cleanup_resumed", instance=inst["name"], database=db["name"])

    def db_has_dialogs(self, inst, db):
        for d in self.dialogs.values():
            if d.inst is inst and d.db == db["name"]:
                return True
            if d.target == (inst["name"], db["name"]):
                return True
        return False

    def dispatcher_clean(self, inst):
        have = {(b["m"]["dialog"], b["m"]["from_target"], b["m"]["seq"]) for b in inst["buffers"]}
        dele = []
        for b in inst["buffers"]:
            m = b["m"]
            d = self.dialogs[m["dialog"]]
            reason = None
            e = d.expect[m["from_target"]]
            ooo = any((m["dialog"], m["from_target"], k) not in have for k in range(e, m["seq"]))
            stale = self.now - b["arrived"] >= 10000
            if OOO_FIRST and ooo:
                reason = "out of order"
            elif stale:
                reason = "stale"
            elif ooo:
                reason = "out of order"
            if reason:
                dele.append((b, reason))
        for b, reason in dele:
            inst["buffers"].remove(b)
            self.ev("dispatcher_deleted", instance=inst["name"], database=b["db"]["name"], reason=reason,
                    **self.mbase(b["m"]))

    def transport_connect(self, inst):
        dests = []
        for w in inst["tq"]:
            if w.get("kind") == "conn" and low(w["addr"]) not in [low(x) for x in dests]:
                dests.append(w["addr"])
        for f in inst["forwarder"]:
            if low(f["addr"]) not in [low(x) for x in dests]:
                dests.append(f["addr"])
        for addr in dests:
            key = low(addr)
            if key in inst["conns"] or self.suppressed(inst, key):
                if key not in inst["conns"]:
                    continue
            elif not self.connect(inst, addr):
                continue
            for w in list(inst["tq"]):
                if w.get("kind") == "conn" and low(w["addr"]) == key and w in inst["tq"]:
                    self.send_over(inst, w["m"], w["addr"], w["outside"])
            for f in list(inst["forwarder"]):
                if low(f["addr"]) == key and f in inst["forwarder"]:
                    self.send_over(inst, f["m"], f["addr"], True)
        for w in list(inst["tq"]):
            if w.get("kind") == "principal" and w in inst["tq"]:
                self.remove_waiting(inst, w)
                behind = w["behind"]
                if MIRROR_REMATCH:
                    m = w["m"]
                    self.ev("routing_retried", instance=inst["name"], **self.mbase(m))
                    self.route_out(inst, w["db"], m, outside=w["outside"], retry=True)
                else:
                    self.mirror_retry(inst, w)
                self.follow(inst, w["m"], behind)

    def mirror_retry(self, inst, w):
        m, r = w["m"], w["route"]
        b = dict(self.mbase(m), instance=inst["name"], route=r.name)
        found = None
        for a in (r.address, r.mirror):
            ans = self.probe_answer(a, m, r)
            self.ev("principal_probe", address=a, answer=ans, **b)
            if ans == "principal" and found is None:
                found = a
        if found is not None:
            r.principal = found
            if w["outside"]:
                self.forward_to(inst, m, found)
            else:
                self.transmit(inst, w["db"], m, found, w["outside"])
        else:
            inst["tq"].append(w)
            w["behind"] = []

    def reclassify(self, inst):
        names = []
        last = inst.get("last_reclass", self.t0)
        expired = False
        tables = [inst["msdb"]] + [db["routes"] for db in inst["dbs"].values()]
        for rs in tables:
            for r in rs:
                if r.expires is not None and last < r.expires <= self.now:
                    expired = True
        inst["last_reclass"] = self.now
        if expired:
            for w in inst["tq"]:
                if w.get("kind") == "held":
                    continue
                if EXPIRY_ALL or not w["outside"]:
                    inst["touched"].add(w["m"]["dialog"])
        for w in list(inst["tq"]):
            dn = w["m"]["dialog"]
            if w.get("kind") == "held":
                continue
            if dn in inst["failed"] or dn in inst["touched"]:
                if dn not in names:
                    names.append(dn)
        self.ev("transmitter_reclassified", instance=inst["name"], dialogs=names)
        for dn in names:
            inst["failed"].discard(dn)
        inst["touched"] = set()
        for w in list(inst["tq"]):
            if w["m"]["dialog"] in names and w in inst["tq"] and w.get("kind") != "held":
                self.remove_waiting(inst, w)
                behind = w["behind"]
                self.route_out(inst, w["db"], w["m"], outside=w["outside"])
                self.follow(inst, w["m"], behind)

    # ------------------------------------------------------------ commands
    def cmd_advance_time(self, c):
        return {}

    def cmd_begin_dialog(self, c):
        name = c["dialog"]
        if name in self.dialogs:
            raise Refused("dialog %r exists" % name)
        db = self.db(c["instance"], c["database"])
        if c["from_service"] not in db["services"]:
            raise Refused("no service %r" % c["from_service"])
        d = Dialog(name, db["inst"], db["name"], c["from_service"], c["to_service"], c.get("to_broker_instance"))
        self.dialogs[name] = d
        self.ev("dialog_begun", instance=c["instance"], database=c["database"], dialog=name,
                from_service=c["from_service"], to_service=c["to_service"],
                to_broker_instance=c.get("to_broker_instance"))
        return {}

    def cmd_send(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refused("no dialog %r has been begun" % c["dialog"])
        ft = bool(c.get("from_target"))
        if ft:
            if d.target is None:
                raise Refused("the target has not received the dialog")
            inst = self.inst(d.target[0])
            dbname = d.target[1]
        else:
            inst = d.inst
            dbname = d.db
        m = self.new_msg(d, ft)
        m["body"] = c.get("body")
        m["type"] = c.get("message_type")
        self.ev("message_sent", instance=inst["name"], database=dbname, dialog=d.name, from_target=ft,
                message_sequence_number=m["seq"])
        ahead = self.waiting_for(inst, m)
        if ahead is not None:
            ahead["behind"].append((dbname, m, False, self.now))
            self.ev("transmission_pending", instance=inst["name"], status="behind an earlier message",
                    **self.mbase(m))
            return {"message_sequence_number": m["seq"]}
        self.route_out(inst, dbname, m)
        return {"message_sequence_number": m["seq"]}

    def cmd_begin_transaction(self, c):
        s = self.session(c["session"])
        if not s.tx:
            s.queues = set()
        s.tx = True
        return {}

    def cmd_commit(self, c):
        self.commit(self.session(c["session"]))
        return {}

    def cmd_rollback(self, c):
        self.rollback(self.session(c["session"]))
        return {}

    def cmd_receive(self, c):
        s = self.session(c["session"])
        q = self.queue(c["queue"])
        self.statement(s, q, "RECEIVE", top=c.get("top"), where_dialog=c.get("where_dialog"),
                       where_group=c.get("where_group"), waitfor_ms=c.get("waitfor_ms"))
        return {}

    def cmd_get_conversation_group(self, c):
        s = self.session(c["session"])
        q = self.queue(c["queue"])
        self.statement(s, q, "GET CONVERSATION GROUP", waitfor_ms=c.get("waitfor_ms"))
        return {}

    def cmd_alter_queue(self, c):
        q = self.queue(c["queue"])
        if c.get("status") is not None:
            q.status = c["status"].upper()
        if c.get("procedure_name") is not None:
            q.proc = c["procedure_name"]
        if c.get("max_queue_readers") is not None:
            q.max = c["max_queue_readers"]
        self.ev("queue_altered", instance=q.inst["name"], database=q.db["name"], queue=q.name)
        self.update_monitor(q)
        self.trigger(q, "ALTER QUEUE")
        return {}

    def cmd_create_event_notification(self, c):
        q = self.queue(c["queue"])
        if c["name"] in q.notifications:
            raise Refused("event notification exists")
        q.notifications.append(c["name"])
        self.update_monitor(q)
        return {}

    def cmd_drop_event_notification(self, c):
        q = self.queue(c["queue"])
        if c["name"] not in q.notifications:
            raise Refused("no such event notification")
        q.notifications.remove(c["name"])
        self.update_monitor(q)
        return {}

    def cmd_exit_procedure(self, c):
        q = self.queue(c["queue"])
        p = q.procs.get(c["task"])
        if p is None:
            raise Refused("no running task %r" % c["task"])
        self.proc_exit(p, "exited")
        return {}

    def route_table(self, c):
        inst = self.inst(c["instance"])
        if c.get("database") is None:
            return inst, inst["msdb"], None
        db = self.db(c["instance"], c["database"])
        return inst, db["routes"], db["name"]

    def check_addr(self, a):
        if a is None:
            return
        if a.upper() in ("LOCAL", "TRANSPORT"):
            return
        if not a.upper().startswith("TCP://"):
            raise Refused("malformed address %r" % a)

    def touch(self, inst, svcs):
        for w in inst["tq"]:
            s = self.svc_of(w["m"])
            if None in svcs or s in svcs:
                inst["touched"].add(w["m"]["dialog"])

    def cmd_create_route(self, c):
        inst, routes, dbn = self.route_table(c)
        rd = c["route"]
        if any(r.name == rd.get("name") for r in routes):
            raise Refused("route exists")
        self.check_addr(rd.get("address"))
        r = self.new_route(rd)
        routes.append(r)
        self.ev("route_created", instance=inst["name"], database=dbn if dbn else "msdb", route=r.name)
        self.touch(inst, {r.service})
        return {}

    def cmd_alter_route(self, c):
        inst, routes, dbn = self.route_table(c)
        rd = c["route"]
        r = next((x for x in routes if x.name == rd.get("name")), None)
        if r is None:
            raise Refused("no route %r" % rd.get("name"))
        before = r.service
        if rd.get("address") is not None:
            self.check_addr(rd["address"])
        if rd.get("service_name") is not None:
            r.service = rd["service_name"]
        if rd.get("broker_instance") is not None:
            r.bi = rd["broker_instance"]
        if rd.get("address") is not None:
            r.address = rd["address"]
        if rd.get("mirror_address") is not None:
            r.mirror = rd["mirror_address"]
        if rd.get("lifetime_s") is not None:
            r.expires = self.now + int(round(rd["lifetime_s"] * 1000))
        if r.principal is not None and low(r.principal) not in (low(r.address), low(r.mirror)):
            r.principal = None
        self.ev("route_altered", instance=inst["name"], database=dbn if dbn else "msdb", route=r.name)
        self.touch(inst, {before, r.service})
        return {}

    def cmd_drop_route(self, c):
        inst, routes, dbn = self.route_table(c)
        r = next((x for x in routes if x.name == c["name"]), None)
        if r is None:
            raise Refused("no route %r" % c["name"])
        routes.remove(r)
        self.ev("route_dropped", instance=inst["name"], database=dbn if dbn else "msdb", route=r.name)
        self.touch(inst, {r.service})
        return {}

    def cmd_answer_routing_request(self, c):
        inst, routes, dbn = self.route_table(c)
        rd = c["route"]
        tname = "msdb.sys.routes" if dbn is None else "%s.sys.routes" % dbn
        svc = rd.get("service_name")
        for k in list(self.pending_req):
            if k[0] == tname and k[2] == svc:
                self.pending_req.discard(k)
        existing = next((x for x in routes if x.name == rd.get("name")), None)
        if existing is not None:
            routes.remove(existing)
        r = self.new_route(rd)
        routes.append(r)
        self.ev("route_created", instance=inst["name"], database=dbn if dbn else "msdb", route=r.name)
        self.touch(inst, {r.service})
        return {}

    def cmd_set_message_forwarding(self, c):
        inst = self.inst(c["instance"])
        inst["forwarding"] = bool(c["active"])
        return {}

    def cmd_set_reachable(self, c):
        inst = self.inst(c["instance"])
        inst["reachable"] = bool(c["reachable"])
        if not inst["reachable"]:
            for other in self.instances.values():
                key = low(inst["address"])
                if key in other["conns"] and other is not inst:
                    c2 = other["conns"].pop(key)
                    self.ev("connection_closed", instance=other["name"], address=c2["address"],
                            reason="disconnected")
                    other["suppressed"][key] = self.now + 15000
        return {}

    def cmd_failover(self, c):
        db = self.db(c["instance"], c["database"])
        for inst in self.instances.values():
            o = inst["dbs"].get(c["database"])
            if o is not None and o is not db and o["role"] in ("principal", "mirror"):
                o["role"] = "mirror"
        db["role"] = "principal"
        return {}

    def cmd_fail_task_handlers(self, c):
        inst = self.inst(c["instance"])
        inst["running_handlers"] = max(0, inst["running_handlers"] - c["count"])
        return {}

    def cmd_set_dispatcher_saving(self, c):
        inst = self.inst(c["instance"])
        inst["dispatch_mode"] = c["mode"]
        inst["dispatch_delay"] = c.get("delay_s") or 0
        self.try_save(inst)
        return {}

    def cmd_lose_in_transit(self, c):
        self.lost[(c["dialog"], c["sequence"], bool(c.get("from_target")))] = bool(c.get("every"))
        return {}

    def cmd_drop_connection(self, c):
        inst = self.inst(c["instance"])
        key = low(c["address"])
        cn = inst["conns"].pop(key, None)
        if cn is not None:
            self.ev("connection_closed", instance=inst["name"], address=cn["address"], reason="disconnected")
            inst["suppressed"][key] = self.now + 15000
        return {}

    def cmd_fail_transmission(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refused("no dialog")
        d.inst["failed"].add(d.name)
        if d.target:
            self.instances[d.target[0]]["failed"].add(d.name)
        return {}

    def cmd_create_master_key(self, c):
        db = self.db(c["instance"], c["database"])
        db["master_key"] = True
        return {}

    def cmd_stop_ack_cleanup(self, c):
        db = self.db(c["instance"], c["database"])
        db["ack_cleanup"] = False
        return {}

    def cmd_query_view(self, c):
        v = c["view"]
        fi, fd = c.get("instance"), c.get("database")
        rows = []

        def keep(i, d=None):
            return (fi is None or fi == i) and (fd is None or d is None or fd == d)
        for inst in self.instances.values():
            iname = inst["name"]
            if v == "sys.routes":
                if fi is not None and fi != iname:
                    continue
                tables = [("msdb", inst["msdb"])] if fd is None else [(fd, inst["dbs"][fd]["routes"])] \
                    if fd in inst["dbs"] else []
                for dn, rs in tables:
                    for r in rs:
                        rows.append({"instance": iname, "database": dn, "name": r.name,
                                     "remote_service_name": r.service, "broker_instance": r.bi,
                                     "address": r.address, "mirror_address": r.mirror, "expires_ms": r.expires})
                continue
            if not keep(iname):
                continue
            if v == "sys.dm_broker_connections":
                for cn in inst["conns"].values():
                    rows.append({"instance": iname, "address": cn["address"], "state": "CONNECTED",
                                 "opened_ms": cn["opened"], "last_activity_ms": cn["last"]})
            elif v == "sys.transmission_queue":
                for w in sorted(inst["tq"], key=lambda x: (x["received"], x["m"]["dialog"], x["m"]["from_target"])):
                    items = [] if w["outside"] else [(w["m"], w["status"], w["received"])]
                    items += [(b[1], "behind an earlier message of the conversation", b[3]) for b in w["behind"]]
                    for m, st, rc in items:
                        rows.append({"instance": iname, "dialog": m["dialog"], "message_sequence_number": m["seq"],
                                     "from_target": m["from_target"], "to_service_name": self.svc_of(m),
                                     "transmission_status": st, "received_ms": rc})
            elif v == "sbtck.forwarder":
                for f in inst["forwarder"]:
                    m = f["m"]
                    rows.append({"instance": iname, "dialog": m["dialog"], "message_sequence_number": m["seq"],
                                 "from_target": m["from_target"], "to_service_name": self.svc_of(m),
                                 "transmission_status": "waiting for connection", "received_ms": f["received"]})
                for w in inst["tq"]:
                    if w["outside"]:
                        m = w["m"]
                        rows.append({"instance": iname, "dialog": m["dialog"], "message_sequence_number": m["seq"],
                                     "from_target": m["from_target"], "to_service_name": self.svc_of(m),
                                     "transmission_status": w["status"], "received_ms": w["received"]})
            elif v == "sbtck.dispatcher_buffers":
                for b in inst["buffers"]:
                    m = b["m"]
                    if fd is not None and fd != b["db"]["name"]:
                        continue
                    rows.append({"instance": iname, "database": b["db"]["name"], "dialog": m["dialog"],
                                 "message_sequence_number": m["seq"], "from_target": m["from_target"],
                                 "arrived_ms": b["arrived"]})
            elif v == "sbtck.periodic_state":
                for db in inst["dbs"].values():
                    if fd is not None and fd != db["name"]:
                        continue
                    rows.append({"instance": iname, "task_handlers": inst["handlers"],
                                 "running_task_handlers": inst["running_handlers"], "database": db["name"],
                                 "broker_started": db["started"], "ack_cleanup_running": db["ack_cleanup"]})
            elif v == "sys.conversation_endpoints":
                for d in self.dialogs.values():
                    if d.inst is inst and (fd is None or fd == d.db):
                        rows.append({"dialog": d.name, "instance": iname, "database": d.db, "far_service": d.to,
                                     "far_broker_instance": d.acked_bi or d.to_bi, "acknowledged": d.acked})
                    if d.target and d.target[0] == iname and (fd is None or fd == d.target[1]):
                        rows.append({"dialog": d.name, "instance": iname, "database": d.target[1],
                                     "far_service": d.frm, "far_broker_instance": d.inst["dbs"][d.db]["bi"],
                                     "acknowledged": True})
            else:
                for db in inst["dbs"].values():
                    if fd is not None and fd != db["name"]:
                        continue
                    for q in db["queues"].values():
                        if v == "sys.dm_broker_queue_monitors" and q.monitor:
                            rows.append({"database_id": db["id"], "queue_id": q.qid, "instance": iname,
                                         "database": db["name"], "queue": q.name, "state": q.state,
                                         "last_empty_rowset_time": q.last_empty,
                                         "last_activated_time": q.last_activated,
                                         "tasks_waiting": self.waiting_readers(q)})
                        elif v == "sys.dm_broker_activated_tasks":
                            for t in sorted(q.procs):
                                p = q.procs[t]
                                rows.append({"spid": p.sess.spid, "database_id": db["id"], "queue_id": q.qid,
                                             "instance": iname, "database": db["name"], "queue": q.name,
                                             "task": t, "procedure_name": p.spec.get("name") or q.proc})
        if v not in ("sys.routes", "sys.dm_broker_connections", "sys.transmission_queue", "sbtck.forwarder",
                     "sbtck.dispatcher_buffers", "sbtck.periodic_state", "sys.conversation_endpoints",
                     "sys.dm_broker_queue_monitors", "sys.dm_broker_activated_tasks"):
            raise Refused("no view %r" % v)
        return {"rows": rows}

    def execute(self, c):
        kind = c["kind"]
        if kind == "start":
            return self.start(c)
        self.run_until(c["at_ms"])
        fn = getattr(self, "cmd_" + kind, None)
        if fn is None:
            raise Refused("unknown command %r" % kind)
        r = fn(c)
        self.settle()
        return r


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
            resp = {"id": rid, "ok": True, "result": {"name": "cr8 clean-room broker", "version": "0.1",
                                                       "protocol": "2.2", "capabilities": CAPS,
                                                       "params": PARAMS}}
        elif op == "bye":
            out.write(json.dumps({"id": rid, "ok": True}) + "\n")
            out.flush()
            return
        elif op == "execute":
            b.events = []
            try:
                res = b.execute(req["command"])
                resp = {"id": rid, "ok": True, "result": res or {}, "events": b.events}
            except Refused as e:
                resp = {"id": rid, "ok": False, "error": str(e), "events": b.events}
            except Exception as e:  # a bug of ours
                traceback.print_exc(file=sys.stderr)
                resp = {"id": rid, "ok": False, "fault": True, "error": "%s: %s" % (type(e).__name__, e),
                        "events": b.events}
            b.events = []
        else:
            resp = {"id": rid, "ok": False, "error": "unknown op %r" % op}
        out.write(json.dumps(resp) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
