#!/usr/bin/env python3
"""cleanroom12: a Service Broker model speaking the sbtck protocol (2.3) over stdio.

Written from the kit's user documentation and the source documents only.
Standard library only.
"""
import heapq
import json
import os
import sys
import traceback

TRACE = os.environ.get("SBTCK_CR12_NO_TRACE") != "1"

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
DYNAMIC_SERVICE = "http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice"

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


def transport_address(service):
    """TRANSPORT: TCP://host:port/rest -> TCP://host:port."""
    if not isinstance(service, str) or not service.upper().startswith("TCP://"):
        return None
    rest = service[6:]
    host = rest.split("/", 1)[0]
    if not host:
        return None
    return "TCP://" + host


class Route:
    def __init__(self, d, now, owner):
        self.name = d.get("name")
        self.service_name = d.get("service_name")
        self.broker_instance = d.get("broker_instance")
        self.address = d.get("address")
        self.mirror_address = d.get("mirror_address")
        lt = d.get("lifetime_s")
        self.expires_ms = None if lt is None else int(now + lt * 1000)
        self.owner = owner  # (instance name, db name or None)
        self.principal = None  # learnt principal address (mirrored route)
        self.created = now

    def expired(self, now):
        return self.expires_ms is not None and now >= self.expires_ms

    def key(self):
        return (self.broker_instance, self.service_name, norm_addr(self.address))


class Queue:
    def __init__(self, inst, db, d, qid):
        self.inst = inst
        self.db = db
        self.name = d["name"]
        act = d.get("activation") or {}
        self.status = act.get("status") or "OFF"
        self.procedure_name = act.get("procedure_name")
        self.max_readers = act.get("max_queue_readers")
        if self.max_readers is None:
            self.max_readers = 0
        self.notifications = []
        self.monitor = False
        self.messages = []  # Msg objects in arrival order
        self.locks = {}  # group -> session
        self.last_empty = None
        self.last_activated = None
        self.notify_deadline = None
        self.task_counter = 0
        self.tasks = []  # running Task objects
        self.id = qid

    def needs_monitor(self):
        return self.status == "ON" or bool(self.notifications)


class Msg:
    _n = 0

    def __init__(self, dialog, seq, from_target, body, mtype, bi):
        Msg._n += 1
        self.uid = Msg._n
        self.dialog = dialog
        self.seq = seq
        self.from_target = from_target
        self.body = body
        self.mtype = mtype
        self.bi = bi
        self.hops = 0
        self.group = None
        self.taken_by = None
        self.origin_inst = None  # instance it was SENT from
        self.wait = None  # waiting record
        self.received_ms = None


class Session:
    def __init__(self, name, spid):
        self.name = name
        self.spid = spid
        self.in_tx = False
        self.received = []  # (queue, msg)
        self.locked = set()  # (queue, group)
        self.touched_queues = []
        self.waiting = None
        self.task = None


class Task:
    def __init__(self, queue, number, proc, session):
        self.queue = queue
        self.number = number
        self.proc = proc
        self.session = session
        self.exited = False


class Instance:
    def __init__(self, d):
        self.name = d["name"]
        self.address = d.get("address")
        self.cpus = d.get("cpus") or 1
        self.forwarding = bool(d.get("message_forwarding"))
        self.msdb = []
        self.dbs = []
        self.reachable = True
        self.handlers = 2 * self.cpus
        self.running_handlers = self.handlers
        self.timer_n = 0
        self.conns = {}  # addr(norm) -> {"address", "opened", "last"}
        self.suppressed = {}  # addr(norm) -> until ms
        self.waiting_conn = {}  # addr(norm) -> [Msg]
        self.addr_display = {}
        self.forwarder = []  # Msg waiting in forwarder
        self.txq = []  # Msg waiting in transmission queue
        self.dispatcher = []  # buffered Msg records (msg, db, arrived)
        self.saving_mode = "running"
        self.saving_delay = 0
        self.pending_requests = set()  # (table, service, route name)
        self.touched = set()  # dialogs (name, from_target) touched since last reclassification
        self.failing = {}  # dialog name -> reason: failed at this instance's transmitter
        self.route_changes = []  # (time, service names)
        self.expired_since = False


class Database:
    def __init__(self, inst, d, dbid):
        self.inst = inst
        self.name = d["name"]
        self.bi = d.get("broker_instance")
        self.master_key = d.get("master_key", True) is not False
        self.started = self.master_key
        self.role = d.get("mirroring_role")
        self.procedures = {p["name"]: p for p in (d.get("procedures") or [])}
        self.queues = {}
        self.services = {}
        self.routes = []
        self.id = dbid
        self.ack_cleanup = True

    def available(self):
        return self.started and self.role != "mirror"


class Dialog:
    def __init__(self, name, inst, db, from_service, to_service, to_bi, gid):
        self.name = name
        self.inst = inst
        self.db = db
        self.from_service = from_service
        self.to_service = to_service
        self.to_bi = to_bi
        self.acked_bi = None
        self.target_inst = None
        self.target_db = None
        self.seq = {False: 0, True: 0}
        self.expected = {False: 0, True: 0}
        self.groups = {False: "group-%d-i" % gid, True: "group-%d-t" % gid}
        self.lines = {}  # (instance name, from_target) -> [Msg] held in line
        self.lose = {}  # (seq, from_target) -> "once"/"every"


class Broker:
    def __init__(self):
        self.reset()

    def reset(self):
        self.now = 0
        self.t0 = 0
        self.events = []
        self.heap = []
        self.hseq = 0
        self.looks = []
        self.instances = {}
        self.by_addr = {}
        self.dialogs = {}
        self.sessions = {}
        self.spid = 51
        self.ids = 5
        self.started = False
        self.gid = 0
        self.order = 0

    # ------------------------------------------------------------ plumbing
    def emit(self, kind, **f):
        if not TRACE and kind in TRACE_KINDS:
            return
        e = {"at_ms": self.now, "kind": kind}
        if not TRACE:
            for k in ("rule", "step", "trigger"):
                f.pop(k, None)
        e.update(f)
        self.events.append(e)

    def at(self, t, fn, *args):
        self.hseq += 1
        heapq.heappush(self.heap, (t, self.hseq, fn, args))
        return self.hseq

    def look(self, queue, trigger, extra=None):
        self.looks.append((queue, trigger, extra))

    def settle(self):
        """Run everything due at self.now, then the looks one at a time."""
        while True:
            if self.heap and self.heap[0][0] <= self.now:
                t, _, fn, args = heapq.heappop(self.heap)
                fn(*args)
                continue
            if self.looks:
                q, trig, extra = self.looks.pop(0)
                self.do_look(q, trig, extra)
                continue
            break

    def run_until(self, t):
        self.settle()
        while self.heap and self.heap[0][0] <= t:
            self.now = self.heap[0][0]
            self.settle()
        self.now = t
        self.settle()

    def session(self, name):
        s = self.sessions.get(name)
        if s is None:
            s = Session(name, self.spid)
            self.spid += 1
            self.sessions[name] = s
        return s

    def inst(self, name):
        i = self.instances.get(name)
        if i is None:
            raise Refused("no instance %r" % name)
        return i

    def db(self, iname, dname):
        i = self.inst(iname)
        for d in i.dbs:
            if d.name == dname:
                return d
        raise Refused("no database %r on %r" % (dname, iname))

    def queue(self, qref):
        d = self.db(qref["instance"], qref["database"])
        q = d.queues.get(qref["queue"])
        if q is None:
            raise Refused("no queue %r" % qref["queue"])
        return q

    def dialog(self, name):
        d = self.dialogs.get(name)
        if d is None:
            raise Refused("no dialog %r has been begun" % name)
        return d

    def db_by_bi(self, inst, bi):
        if bi is None:
            return None
        for d in inst.dbs:
            if d.bi is not None and d.bi.lower() == str(bi).lower():
                return d
        return None

    # ------------------------------------------------------------ start
    def cmd_start(self, c):
        self.reset()
        self.now = self.t0 = c["at_ms"]
        topo = c["topology"]
        for idef in topo.get("instances", []):
            inst = Instance(idef)
            self.instances[inst.name] = inst
            if inst.address:
                self.by_addr[norm_addr(inst.address)] = inst
            for r in idef.get("msdb_routes") or []:
                inst.msdb.append(Route(r, self.now, (inst.name, None)))
            for ddef in idef.get("databases") or []:
                db = Database(inst, ddef, self.ids)
                self.ids += 1
                inst.dbs.append(db)
                for qd in ddef.get("queues") or []:
                    q = Queue(inst, db, qd, self.ids)
                    self.ids += 1
                    db.queues[q.name] = q
                for sd in ddef.get("services") or []:
                    db.services[sd["name"]] = sd.get("queue")
                for r in ddef.get("routes") or []:
                    db.routes.append(Route(r, self.now, (inst.name, db.name)))
                for en in ddef.get("event_notifications") or []:
                    qn = en.get("queue")
                    if qn in db.queues:
                        db.queues[qn].notifications.append(en.get("name"))
        self.emit("broker_started")
        for inst in self.instances.values():
            self.emit("task_handlers_started", instance=inst.name, count=inst.handlers)
            for db in inst.dbs:
                if db.started:
                    self.emit("database_broker_started", instance=inst.name, database=db.name)
                else:
                    self.emit("database_broker_start_failed", instance=inst.name, database=db.name,
                              reason="missing master key")
                for q in db.queues.values():
                    if q.needs_monitor():
                        q.monitor = True
                        self.emit("monitor_created", instance=inst.name, database=db.name, queue=q.name)
            self.at(self.now + TIMER_MS, self.timer, inst)
            for lst in [inst.msdb] + [d.routes for d in inst.dbs]:
                for r in lst:
                    if r.expires_ms is not None:
                        self.at(r.expires_ms, self.route_expired, inst, r, r.expires_ms)
        self.started = True
        return {}

    # ------------------------------------------------------------ dialogs
    def cmd_begin_dialog(self, c):
        if c["dialog"] in self.dialogs:
            raise Refused("dialog %r already begun" % c["dialog"])
        db = self.db(c["instance"], c["database"])
        if c["from_service"] not in db.services:
            raise Refused("no service %r in %s" % (c["from_service"], db.name))
        self.gid += 1
        d = Dialog(c["dialog"], db.inst, db, c["from_service"], c["to_service"],
                   c.get("to_broker_instance"), self.gid)
        self.dialogs[d.name] = d
        self.emit("dialog_begun", instance=db.inst.name, database=db.name, dialog=d.name,
                  from_service=d.from_service, to_service=d.to_service,
                  to_broker_instance=d.to_bi)
        return {}

    def cmd_send(self, c):
        d = self.dialog(c["dialog"])
        ft = bool(c.get("from_target"))
        if ft:
            if d.target_db is None:
                raise Refused("the target of dialog %r has not received a message yet" % d.name)
            inst, db = d.target_inst, d.target_db
            bi = d.db.bi
        else:
            inst, db = d.inst, d.db
            bi = d.to_bi if d.to_bi is not None else d.acked_bi
        seq = d.seq[ft]
        d.seq[ft] += 1
        m = Msg(d, seq, ft, c.get("body"), c.get("message_type"), bi)
        m.origin_inst = inst
        m.origin_db = db
        self.emit("message_sent", instance=inst.name, database=db.name, dialog=d.name,
                  from_target=ft, message_sequence_number=seq)
        line = d.lines.get((inst.name, ft))
        if line:
            line.append(m)
            m.received_ms = self.now
            inst.txq.append(m)
            self.pending(inst, m, "waiting behind an earlier message of its conversation", None)
        else:
            self.route(inst, m, db)
        return {"message_sequence_number": seq}

    # ------------------------------------------------------------ routing
    def route_table(self, inst, db):
        return db.routes if db is not None else inst.msdb

    def table_name(self, db):
        return "msdb.sys.routes" if db is None else "%s.sys.routes" % db.name

    def has_service(self, inst, service):
        return any(d.available() and service in d.services for d in inst.dbs)

    def msg_service(self, m):
        return m.dialog.from_service if m.from_target else m.dialog.to_service

    def mfields(self, m):
        return {"dialog": m.dialog.name, "from_target": m.from_target,
                "message_sequence_number": m.seq}

    def match(self, inst, m, db):
        """Returns (step, routes, dynamic_route)."""
        table = [r for r in self.route_table(inst, db) if not r.expired(self.now)]
        s = self.msg_service(m)
        bi = m.bi
        if bi is not None:
            rs = [r for r in table if r.service_name == s and r.broker_instance is not None
                  and r.broker_instance.lower() == str(bi).lower()]
            if rs:
                return "RTM-1", rs, None
        rs = [r for r in table if r.broker_instance is None and r.service_name == s]
        if rs:
            return "RTM-2", rs, None
        if bi is None:
            rs = [r for r in table if r.service_name == s and r.broker_instance is not None]
            if rs:
                pick = rs[0].broker_instance.lower()
                return "RTM-3", [r for r in rs if r.broker_instance.lower() == pick], None
        tname = self.table_name(db)
        for r in table:
            if r.service_name == DYNAMIC_SERVICE and (tname, s, r.name) not in inst.pending_requests:
                return "RTM-4", [], r
        rs = [r for r in table if r.service_name is None and r.broker_instance is None]
        if rs:
            return "RTM-5", rs, None
        if bi is not None and self.has_service(inst, s):
            return "RTM-6", ["LOCAL"], None
        return "RTM-7", [], None

    def choose(self, inst, m, routes):
        """Returns (step, route or 'LOCAL', candidates)."""
        distinct = []
        seen = set()
        for r in routes:
            if r == "LOCAL":
                return "RTC-2", "LOCAL", ["LOCAL"]
            k = r.key()
            if k in seen:
                continue
            seen.add(k)
            distinct.append(r)
        s = self.msg_service(m)
        c1 = [r for r in distinct if r.mirror_address]
        if c1:
            return "RTC-1", c1[0], c1
        c2 = [r for r in distinct if isinstance(r.address, str) and r.address.upper() == "LOCAL"]
        if c2 and self.has_service(inst, s):
            return "RTC-2", c2[0], c2
        c3 = [r for r in distinct if isinstance(r.address, str) and r.address.upper().startswith("TCP://")]
        if c3:
            return "RTC-3", c3[0], c3
        c4 = [r for r in distinct if isinstance(r.address, str) and r.address.upper() == "TRANSPORT"]
        if c4:
            return "RTC-4", c4[0], c4
        return None, None, []

    def rname(self, r):
        return "(as if LOCAL)" if r == "LOCAL" else r.name

    def route(self, inst, m, db, retry=False):
        """Route message m at instance inst. db: originating database (None: from outside)."""
        d = m.dialog
        # RTE-05: a reply from outside naming a broker instance this instance holds
        if db is None and m.from_target and m.bi is not None:
            tdb = self.db_by_bi(inst, m.bi)
            if tdb is not None:
                self.emit("reply_recognised", instance=inst.name, broker_instance=tdb.bi, **self.mfields(m))
                self.deliver_db(inst, m, tdb, from_outside=True)
                return
        step, routes, dyn = self.match(inst, m, db)
        tname = self.table_name(db)
        self.emit("routes_matched", instance=inst.name, step=step, table=tname,
                  routes=[self.rname(r) for r in routes],
                  broker_instance=(routes[0].broker_instance.upper() if step == "RTM-3" else None),
                  **self.mfields(m))
        if step == "RTM-4":
            s = self.msg_service(m)
            inst.pending_requests.add((tname, s, dyn.name))
            self.emit("routing_requested", instance=inst.name, route=dyn.name, service=s, table=tname,
                      **self.mfields(m))
            self.delay(inst, m, db, "RTM-4")
            return
        if step == "RTM-7":
            self.delay(inst, m, db, "RTM-7")
            return
        cstep, r, cands = self.choose(inst, m, routes)
        if r is None:
            self.delay(inst, m, db, "RTC-4")
            return
        self.emit("route_chosen", instance=inst.name, step=cstep, route=self.rname(r),
                  candidates=[self.rname(x) for x in cands], **self.mfields(m))
        addr = "LOCAL" if r == "LOCAL" else r.address
        if db is None and not inst.forwarding and not (isinstance(addr, str) and addr.upper() == "LOCAL"):
            self.drop(inst, m, "forwarding is not active", "RTC-5")
            return
        if isinstance(addr, str) and addr.upper() == "LOCAL":
            rbi = None if r == "LOCAL" else r.broker_instance
            bi = m.bi if m.bi is not None else rbi
            if bi is not None:
                tdb = self.db_by_bi(inst, bi)
                if tdb is None or not tdb.available() or self.msg_service(m) not in tdb.services:
                    self.drop(inst, m, "no database of the broker instance here", "RTL-2")
                    return
            else:
                tdb = None
                order = ([db] if db is not None else []) + [x for x in inst.dbs if x is not db]
                for x in order:
                    if x.available() and self.msg_service(m) in x.services:
                        tdb = x
                        break
                if tdb is None:
                    self.delay(inst, m, db, "RTC-4")
                    return
            self.deliver_db(inst, m, tdb, from_outside=(db is None))
            return
        if r.mirror_address:
            self.send_mirrored(inst, m, db, r)
            return
        if isinstance(addr, str) and addr.upper() == "TRANSPORT":
            addr = transport_address(self.msg_service(m))
            if addr is None:
                self.delay(inst, m, db, "RTC-4")
                return
        self.send_to(inst, m, db, addr)

    def send_to(self, inst, m, db, addr):
        if db is None:
            # forwarding
            if m.hops >= PARAMS["forward_hop_limit"]:
                self.drop(inst, m, "hop limit", "RTX-1")
                return
            m.hops += 1
            self.emit("message_forwarded", instance=inst.name, address=addr, hops=m.hops, **self.mfields(m))
        self.transmit(inst, m, db, addr)

    def drop(self, inst, m, reason, rule):
        self.unwait(inst, m)
        self.emit("message_dropped", instance=inst.name, reason=reason, rule=rule, **self.mfields(m))
        self.release_line(inst, m)

    def delay(self, inst, m, db, step):
        self.emit("conversation_delayed", instance=inst.name, step=step, **self.mfields(m))
        self.set_wait(inst, m, db, "delayed", None, "delayed: no route (%s)" % step)
        w = m.wait
        w["retry"] = self.at(self.now + int(PARAMS["delayed_retry_s"] * 1000), self.retry, inst, m, w)

    def retry(self, inst, m, w):
        if m.wait is not w:
            return
        db = m.wait["db"]
        self.emit("routing_retried", instance=inst.name, **self.mfields(m))
        self.reroute(inst, m, db)

    def reroute(self, inst, m, db):
        m.wait["retry"] = None
        self.route(inst, m, db, retry=True)

    def set_wait(self, inst, m, db, kind, addr, status):
        first = m.wait is None
        old = m.wait
        self.order += 1
        m.wait = {"kind": kind, "db": db, "addr": addr, "status": status, "inst": inst,
                  "since": self.order}
        if first or old.get("inst") is not inst:
            if m.received_ms is None:
                m.received_ms = self.now
            if db is None:
                if m not in inst.forwarder:
                    inst.forwarder.append(m)
            else:
                if m not in inst.txq:
                    inst.txq.append(m)
            line = m.dialog.lines.setdefault((inst.name, m.from_target), [])
            if m not in line:
                line.insert(0, m)
        self.pending(inst, m, status, addr)

    def pending(self, inst, m, status, addr):
        self.emit("transmission_pending", instance=inst.name, status=status, address=addr, **self.mfields(m))

    def unwait(self, inst, m):
        if m.wait is not None:
            w = m.wait
            winst = w["inst"]
            if m in winst.forwarder:
                winst.forwarder.remove(m)
            if m in winst.txq:
                winst.txq.remove(m)
            if w.get("addr") is not None:
                lst = winst.waiting_conn.get(norm_addr(w["addr"]))
                if lst and m in lst:
                    lst.remove(m)
            m.wait = None
        else:
            if m in inst.txq:
                inst.txq.remove(m)
            if m in inst.forwarder:
                inst.forwarder.remove(m)

    def release_line(self, inst, m):
        """m went on (or was dropped/deleted): route the messages held behind it."""
        key = (inst.name, m.from_target)
        line = m.dialog.lines.get(key)
        if not line:
            return
        if m in line:
            line.remove(m)
        while line:
            nxt = line[0]
            if nxt.wait is not None:
                break
            line.pop(0)
            if nxt in inst.txq:
                inst.txq.remove(nxt)
            if nxt in inst.forwarder:
                inst.forwarder.remove(nxt)
            self.route(inst, nxt, nxt.origin_db if nxt.origin_inst is inst else None)
            if line and line[0] is nxt:
                break
            if nxt.wait is not None:
                # it waits now; the rest stay behind it
                if nxt not in line:
                    line.insert(0, nxt)
                break

    def went_on(self, inst, m):
        self.unwait(inst, m)

    def after_went_on(self, inst, m):
        if m.dialog.lines.get((inst.name, m.from_target)):
            self.release_line(inst, m)

    # ------------------------------------------------------------ mirroring
    def probe_answer(self, addr, m, r):
        target = self.by_addr.get(norm_addr(addr))
        if target is None or not target.reachable:
            return "unreachable"
        bi = r.broker_instance or m.bi
        dbs = []
        if bi is not None:
            x = self.db_by_bi(target, bi)
            if x is not None:
                dbs = [x]
        else:
            s = self.msg_service(m)
            dbs = [x for x in target.dbs if s in x.services]
        for x in dbs:
            if x.role in (None, "principal"):
                return "principal"
        return "not principal"

    def send_mirrored(self, inst, m, db, r):
        pair = [r.address, r.mirror_address]
        if r.principal is not None:
            ans = self.probe_answer(r.principal, m, r)
            if ans == "principal":
                self.send_to(inst, m, db, r.principal)
                return
            self.emit("principal_lost", instance=inst.name, address=r.principal, answer=ans,
                      route=r.name, **self.mfields(m))
            other = pair[1] if norm_addr(pair[0]) == norm_addr(r.principal) else pair[0]
            a2 = self.probe_answer(other, m, r)
            self.emit("principal_probe", instance=inst.name, address=other, answer=a2, route=r.name,
                      **self.mfields(m))
            if a2 == "principal":
                r.principal = other
                self.send_to(inst, m, db, other)
                return
            r.principal = None
        else:
            found = None
            for a in pair:
                ans = self.probe_answer(a, m, r)
                self.emit("principal_probe", instance=inst.name, address=a, answer=ans, route=r.name,
                          **self.mfields(m))
                if ans == "principal" and found is None:
                    found = a
            if found is not None:
                r.principal = found
                self.send_to(inst, m, db, found)
                return
        self.set_wait(inst, m, db, "principal", None, "waiting for the principal of route %s" % r.name)
        m.wait["route"] = r

    # ------------------------------------------------------------ transport
    def suppressed(self, inst, a):
        u = inst.suppressed.get(norm_addr(a))
        return u is not None and self.now < u

    def close_conn(self, inst, a, reason):
        c = inst.conns.pop(norm_addr(a), None)
        if c is not None:
            self.emit("connection_closed", instance=inst.name, address=c["address"], reason=reason)
            if reason == "disconnected":
                inst.suppressed[norm_addr(a)] = self.now + SUPPRESS_DISCONNECT_MS

    def try_connect(self, inst, a):
        target = self.by_addr.get(norm_addr(a))
        if target is not None and target.reachable:
            self.emit("connection_attempt", instance=inst.name, address=a, result="connected")
            inst.conns[norm_addr(a)] = {"address": a, "opened": self.now, "last": self.now}
            return True
        self.emit("connection_attempt", instance=inst.name, address=a, result="refused")
        inst.suppressed[norm_addr(a)] = self.now + SUPPRESS_FAILED_MS
        return False

    def transmit(self, inst, m, db, addr):
        if m.dialog.name in inst.failing:
            self.set_wait(inst, m, db, "failed", addr,
                          "transmission to %s failed (%s)" % (addr, inst.failing[m.dialog.name]))
            return
        target = self.by_addr.get(norm_addr(addr))
        if target is inst:
            # RTX-2: a route to our own address: handled as from outside, no network
            self.went_on(inst, m)
            key = (inst.name, m.from_target)
            line = m.dialog.lines.get(key) or []
            if m in line:
                line.remove(m)
            rest = list(line)
            del line[:]
            self.arrive(inst, m, via_network=False)
            line = m.dialog.lines.setdefault(key, [])
            line.extend(x for x in rest if x not in line)
            if m.wait is None and line and line[0].wait is None:
                self.release_line(inst, m)
            return
        k = norm_addr(addr)
        conn = inst.conns.get(k)
        if conn is not None and (target is None or not target.reachable):
            self.close_conn(inst, addr, "disconnected")
            conn = None
        if conn is None:
            if not self.suppressed(inst, addr):
                if self.try_connect(inst, addr):
                    conn = inst.conns[k]
        if conn is None:
            self.set_wait(inst, m, db, "connection", addr, "waiting for a connection to %s" % addr)
            inst.waiting_conn.setdefault(k, [])
            if m not in inst.waiting_conn[k]:
                inst.waiting_conn[k].append(m)
            return
        self.went_on(inst, m)
        self.wire(inst, m, conn, target)
        self.after_went_on(inst, m)

    def wire(self, inst, m, conn, target):
        conn["last"] = self.now
        self.emit("message_transmitted", instance=inst.name, address=conn["address"],
                  to_instance=target.name if target else None, **self.mfields(m))
        lk = (m.seq, m.from_target)
        how = m.dialog.lose.get(lk)
        if how is not None or target is None:
            if how == "once":
                del m.dialog.lose[lk]
            self.emit("message_lost_in_transit", instance=inst.name, address=conn["address"], **self.mfields(m))
            return
        self.arrive(target, m, via_network=True)

    def flush_conn(self, inst, k):
        lst = inst.waiting_conn.get(k) or []
        conn = inst.conns.get(k)
        target = self.by_addr.get(k)
        while lst and conn is not None:
            m = lst.pop(0)
            if m.dialog.name in inst.failing and m.wait is not None:
                self.set_wait(inst, m, m.wait["db"], "failed", conn["address"],
                              "transmission to %s failed (%s)" % (conn["address"], inst.failing[m.dialog.name]))
                continue
            self.unwait(inst, m)
            self.release_line_hold(inst, m)
            self.wire(inst, m, conn, target)
            self.release_line(inst, m)

    def release_line_hold(self, inst, m):
        pass

    # ------------------------------------------------------------ arrival
    def arrive(self, inst, m, via_network):
        """A message reaches instance inst from outside."""
        m.received_ms = None
        line = m.dialog.lines.get((inst.name, m.from_target))
        if line:
            line.append(m)
            m.received_ms = self.now
            inst.forwarder.append(m)
            self.pending(inst, m, "waiting behind an earlier message of its conversation", None)
            return
        self.route(inst, m, None)

    def deliver_db(self, inst, m, tdb, from_outside):
        self.went_on(inst, m)
        if from_outside:
            self.emit("dispatcher_buffered", instance=inst.name, database=tdb.name, **self.mfields(m))
            rec = {"msg": m, "db": tdb, "arrived": self.now}
            inst.dispatcher.append(rec)
            self.dispatch(inst)
        else:
            self.enqueue(tdb, m)
        self.after_went_on(inst, m)

    def dispatch(self, inst):
        """Save what the dispatcher may save now."""
        if inst.saving_mode != "running":
            return
        progressed = True
        while progressed:
            progressed = False
            for rec in list(inst.dispatcher):
                m = rec["msg"]
                if rec["arrived"] + int(inst.saving_delay * 1000) > self.now:
                    if not rec.get("sched"):
                        rec["sched"] = True
                        self.at(rec["arrived"] + int(inst.saving_delay * 1000), self.dispatch, inst)
                    continue
                exp = m.dialog.expected[m.from_target]
                if m.seq < exp:
                    inst.dispatcher.remove(rec)
                    progressed = True
                    continue
                if m.seq > exp:
                    continue
                inst.dispatcher.remove(rec)
                self.enqueue(rec["db"], m)
                progressed = True

    def enqueue(self, tdb, m):
        d = m.dialog
        exp = d.expected[m.from_target]
        if m.seq < exp:
            return  # duplicate
        d.expected[m.from_target] = m.seq + 1
        svc = self.msg_service(m)
        qn = tdb.services.get(svc)
        q = tdb.queues.get(qn)
        inst = tdb.inst
        if not m.from_target:
            if d.target_db is None:
                d.target_db = tdb
                d.target_inst = inst
            group = d.groups[True]
        else:
            group = d.groups[False]
        m.group = group
        if q is None:
            return
        had_unread = any(x.taken_by is None for x in q.messages)
        q.messages.append(m)
        self.emit("message_arrived", instance=inst.name, database=tdb.name, queue=q.name,
                  dialog=d.name, from_target=m.from_target, message_sequence_number=m.seq,
                  conversation_group=group, service=svc)
        if not m.from_target and d.acked_bi is None:
            d.acked_bi = tdb.bi
            self.emit("acknowledged", instance=d.inst.name, dialog=d.name, broker_instance=tdb.bi)
        act06 = (not had_unread) and not self.running(q)
        served = self.serve_waiters(q)
        self.look(q, "message arrived", {"act06": act06, "msg": m})
        for s in served:
            pass

    # ------------------------------------------------------------ sessions
    def available(self, q, s, where_dialog=None, where_group=None):
        out = []
        for m in q.messages:
            if m.taken_by is not None:
                continue
            owner = q.locks.get(m.group)
            if owner is not None and owner is not s:
                continue
            if where_dialog is not None and m.dialog.name != where_dialog:
                continue
            if where_group is not None and m.group != where_group:
                continue
            out.append(m)
        return out

    def group_of(self, q, dname):
        d = self.dialogs.get(dname)
        if d is None:
            return None
        if d.target_db is q.db and q.db.services.get(d.to_service) == q.name:
            return d.groups[True]
        return d.groups[False]

    def try_receive(self, s, q, top, where_dialog, where_group, statement):
        """Returns (group, rows) or None when nothing is available."""
        wg = self.group_of(q, where_group) if where_group is not None else None
        if where_group is not None and wg is None:
            return None
        av = self.available(q, s, where_dialog, wg)
        if not av:
            return None
        g = av[0].group
        msgs = [m for m in av if m.group == g]
        if statement == "GET CONVERSATION GROUP":
            if s.in_tx:
                q.locks[g] = s
                s.locked.add((q, g))
            return g, []
        if top is not None:
            msgs = msgs[:top]
        for m in msgs:
            if s.in_tx:
                m.taken_by = s
                s.received.append((q, m))
            else:
                q.messages.remove(m)
        if s.in_tx:
            q.locks[g] = s
            s.locked.add((q, g))
        return g, msgs

    def qfields(self, q):
        return {"instance": q.inst.name, "database": q.db.name, "queue": q.name}

    def statement(self, s, q, top, where_dialog, where_group, waitfor_ms, stmt):
        has_where = where_dialog is not None or where_group is not None
        if s.waiting is not None:
            raise Refused("session %r is waiting" % s.name)
        if stmt == "RECEIVE" and s.in_tx and q not in s.touched_queues:
            s.touched_queues.append(q)
        res = self.try_receive(s, q, top, where_dialog, where_group, stmt)
        if res is not None:
            g, msgs = res
            self.emit("rows_returned", session=s.name, statement=stmt, has_where=has_where,
                      conversation_group=g, rows=[self.row(m) for m in msgs], **self.qfields(q))
            if stmt == "RECEIVE" and q.notify_deadline is not None:
                q.notify_deadline = None
            if stmt == "RECEIVE":
                self.look(q, "RECEIVE")
            return ("rows", g, msgs)
        if waitfor_ms:
            s.waiting = {"q": q, "top": top, "wd": where_dialog, "wg": where_group, "stmt": stmt,
                         "has_where": has_where}
            s.waiting["h"] = self.at(self.now + waitfor_ms, self.wait_timeout, s, s.waiting)
            self.emit("reader_waiting", session=s.name, statement=stmt, has_where=has_where, **self.qfields(q))
            if stmt == "RECEIVE" and q.notify_deadline is not None:
                q.notify_deadline = None
            if stmt == "RECEIVE":
                self.look(q, "RECEIVE")
            return ("waiting", None, None)
        if stmt == "RECEIVE" and q.notify_deadline is not None:
            q.notify_deadline = None
        self.empty(s, q, stmt, has_where)
        return ("empty", None, None)

    def empty(self, s, q, stmt, has_where):
        self.emit("empty_result", session=s.name, statement=stmt, has_where=has_where,
                  conversation_group=None, rows=[], **self.qfields(q))
        if not has_where:
            q.last_empty = self.now
        if stmt == "RECEIVE":
            self.look(q, "RECEIVE")

    def row(self, m):
        return {"dialog": m.dialog.name, "message_sequence_number": m.seq,
                "conversation_group": m.group, "message_body": m.body,
                "message_type_name": m.mtype}

    def wait_timeout(self, s, w):
        if s.waiting is not w:
            return
        s.waiting = None
        q = w["q"]
        self.empty(s, q, w["stmt"], w["has_where"])
        if s.task is not None:
            self.task_empty(s.task)

    def serve_waiters(self, q):
        served = []
        for s in list(self.sessions.values()):
            w = s.waiting
            if w is None or w["q"] is not q:
                continue
            res = self.try_receive(s, q, w["top"], w["wd"], w["wg"], w["stmt"])
            if res is None:
                continue
            g, msgs = res
            s.waiting = None
            self.emit("rows_returned", session=s.name, statement=w["stmt"], has_where=w["has_where"],
                      conversation_group=g, rows=[self.row(m) for m in msgs], **self.qfields(q))
            if w["stmt"] == "RECEIVE":
                self.look(q, "RECEIVE")
            served.append(s)
            if s.task is not None:
                self.task_got(s.task)
        return served

    def end_tx(self, s, commit):
        returned = 0
        queues = []
        if commit:
            for q, m in s.received:
                if m in q.messages:
                    q.messages.remove(m)
        else:
            for q, m in s.received:
                m.taken_by = None
                returned += 1
                if q not in queues:
                    queues.append(q)
        touched = list(s.touched_queues)
        lockq = []
        for q, g in s.locked:
            if q not in lockq:
                lockq.append(q)
        for q, m in s.received:
            if q not in lockq:
                lockq.append(q)
        for q, g in s.locked:
            if q.locks.get(g) is s:
                del q.locks[g]
        s.received = []
        s.locked = set()
        s.in_tx = False
        s.touched_queues = []
        if commit:
            self.emit("transaction_committed", session=s.name)
        else:
            self.emit("transaction_rolled_back", session=s.name, returned=returned)
            for q in touched:
                self.look(q, "rollback")
        for q in lockq:
            self.serve_waiters(q)
        return returned

    def cmd_begin_transaction(self, c):
        s = self.session(c["session"])
        if s.in_tx:
            raise Refused("session %r already has a transaction" % s.name)
        if s.waiting:
            raise Refused("session %r is waiting" % s.name)
        s.in_tx = True
        return {}

    def cmd_commit(self, c):
        s = self.session(c["session"])
        if not s.in_tx:
            raise Refused("COMMIT without a transaction")
        if s.waiting:
            raise Refused("session %r is waiting" % s.name)
        self.end_tx(s, True)
        return {}

    def cmd_rollback(self, c):
        s = self.session(c["session"])
        if not s.in_tx:
            raise Refused("ROLLBACK without a transaction")
        if s.waiting:
            raise Refused("session %r is waiting" % s.name)
        self.end_tx(s, False)
        return {}

    def cmd_receive(self, c):
        q = self.queue(c["queue"])
        s = self.session(c["session"])
        top = c.get("top")
        self.statement(s, q, top, c.get("where_dialog"), c.get("where_group"), c.get("waitfor_ms"), "RECEIVE")
        return {}

    def cmd_get_conversation_group(self, c):
        q = self.queue(c["queue"])
        s = self.session(c["session"])
        self.statement(s, q, None, None, None, c.get("waitfor_ms"), "GET CONVERSATION GROUP")
        return {}

    # ------------------------------------------------------------ activation
    def running(self, q):
        return [t for t in q.tasks if not t.exited]

    def waiting_readers(self, q):
        n = 0
        for s in self.sessions.values():
            w = s.waiting
            if w is not None and w["q"] is q and not w["has_where"]:
                n += 1
        return n

    def unread(self, q):
        return [m for m in q.messages if m.taken_by is None]

    def do_look(self, q, trigger, extra):
        if not q.monitor:
            return
        necessary = None
        if trigger == "message arrived" and extra and extra.get("act06"):
            if not self.running(q):
                necessary = "ACT-06"
        if necessary is None and self.unread(q) and self.waiting_readers(q) == 0:
            w = int(PARAMS["activation_empty_window_s"] * 1000)
            if q.last_empty is None or self.now - q.last_empty >= w:
                necessary = "ACT-07"
        if necessary is None:
            return
        self.emit("activation_necessary", trigger=trigger, rule=necessary, **self.qfields(q))
        withheld = []
        start_internal = False
        if q.status == "ON" and q.procedure_name:
            if len(self.running(q)) < (q.max_readers or 0):
                start_internal = True
            else:
                withheld.append("MAX_QUEUE_READERS")
        if q.notifications:
            if q.notify_deadline is not None and self.now < q.notify_deadline:
                withheld.append("notification time-out")
            else:
                for n in q.notifications:
                    self.emit("event_notification", notification=n, event_type="QUEUE_ACTIVATION",
                              **self.qfields(q))
                q.last_activated = self.now
                dl = self.now + int(PARAMS["external_activation_timeout_s"] * 1000)
                q.notify_deadline = dl
                self.at(dl, self.notify_timeout, q, dl)
        for reason in withheld:
            self.emit("activation_withheld", reason=reason, **self.qfields(q))
        if start_internal:
            self.start_proc(q)

    def notify_timeout(self, q, dl):
        if q.notify_deadline != dl:
            return
        q.notify_deadline = None
        self.emit("activation_time_out", **self.qfields(q))
        self.look(q, "external activation time-out")

    def start_proc(self, q):
        q.task_counter += 1
        n = q.task_counter
        proc = q.db.procedures.get(q.procedure_name) or {"name": q.procedure_name}
        s = self.session("%s#%d" % (q.name, n))
        t = Task(q, n, proc, s)
        s.task = t
        q.tasks.append(t)
        q.last_activated = self.now
        self.emit("procedure_started", procedure_name=q.procedure_name, spid=s.spid, task=n, **self.qfields(q))
        if proc.get("receives", True) is not False:
            self.task_receive(t)

    def task_receive(self, t):
        if t.exited:
            return
        s = t.session
        s.in_tx = True
        top = t.proc.get("receive_top", 1) if "receive_top" in t.proc else 1
        wf = t.proc.get("waitfor_ms")
        r, g, msgs = self.statement(s, t.queue, top, None, None, wf, "RECEIVE")
        if r == "rows":
            self.task_got(t)
        elif r == "empty":
            self.task_empty(t)

    def task_got(self, t):
        work = t.proc.get("work_ms") or 0
        self.at(self.now + work, self.task_step, t)

    def task_step(self, t):
        if t.exited:
            return
        if t.session.in_tx:
            self.end_tx(t.session, True)
        self.task_receive(t)

    def task_empty(self, t):
        if t.session.in_tx:
            self.end_tx(t.session, True)
        self.exit_task(t, "empty RECEIVE")

    def exit_task(self, t, reason):
        t.exited = True
        q = t.queue
        s = t.session
        if s.waiting is not None:
            s.waiting = None
        if s.in_tx:
            self.end_tx(s, True)
        self.emit("procedure_exited", reason=reason, spid=s.spid, task=t.number, **self.qfields(q))
        q.tasks.remove(t)
        if not q.tasks:
            self.look(q, "all procedures exited")

    def cmd_exit_procedure(self, c):
        q = self.queue(c["queue"])
        for t in q.tasks:
            if t.number == c["task"]:
                self.exit_task(t, "exited")
                return {}
        raise Refused("no running task %s of queue %r" % (c["task"], q.name))

    def update_monitor(self, q):
        need = q.needs_monitor()
        if need and not q.monitor:
            q.monitor = True
            self.emit("monitor_created", **self.qfields(q))
        elif not need and q.monitor:
            q.monitor = False
            q.notify_deadline = None
            self.emit("monitor_removed", **self.qfields(q))

    def cmd_alter_queue(self, c):
        q = self.queue(c["queue"])
        if c.get("status") is not None:
            st = str(c["status"]).upper()
            if st not in ("ON", "OFF"):
                raise Refused("STATUS must be ON or OFF")
            q.status = st
        if c.get("procedure_name") is not None:
            q.procedure_name = c["procedure_name"]
        if c.get("max_queue_readers") is not None:
            if c["max_queue_readers"] < 0:
                raise Refused("MAX_QUEUE_READERS must not be negative")
            q.max_readers = c["max_queue_readers"]
        self.emit("queue_altered", **self.qfields(q))
        self.update_monitor(q)
        self.look(q, "ALTER QUEUE")
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
            q.notify_deadline = None
        self.update_monitor(q)
        return {}

    # ------------------------------------------------------------ periodic
    def timer(self, inst):
        inst.timer_n += 1
        n = inst.timer_n
        self.at(self.now + TIMER_MS, self.timer, inst)
        tasks = ["queue monitors", "task handlers", "message dispatcher"]
        if n % 2 == 0:
            tasks += ["transport connections", "transmitter"]
        if n % 5 == 0:
            tasks += ["idle connections", "forwarder", "broker start",
                      "broker configuration notification", "acknowledged message clean-up"]
        self.emit("timer_notification", instance=inst.name, number=n, tasks=tasks)
        # 1: queue monitors
        for db in inst.dbs:
            for q in db.queues.values():
                if q.monitor:
                    self.look(q, "timer notification")
        # 2: task handlers
        down = inst.handlers - inst.running_handlers
        if down > 0:
            inst.running_handlers = inst.handlers
            self.emit("task_handlers_restarted", instance=inst.name, count=down)
        # 3: dispatcher
        snap = list(inst.dispatcher)
        dels = []
        for rec in snap:
            m = rec["msg"]
            exp = m.dialog.expected[m.from_target]
            have = {r2["msg"].seq for r2 in snap if r2["msg"].dialog is m.dialog
                    and r2["msg"].from_target == m.from_target}
            c = exp
            while c in have:
                c += 1
            reason = None
            if m.seq > c:
                reason = "out of order"
            elif self.now - rec["arrived"] >= DISPATCHER_STALE_MS:
                reason = "stale"
            dels.append((rec, reason))
        for rec, reason in dels:
            m = rec["msg"]
            if reason:
                inst.dispatcher.remove(rec)
                self.emit("dispatcher_deleted", instance=inst.name, database=rec["db"].name,
                          reason=reason, **self.mfields(m))
        if n % 2 == 0:
            # transport connections
            for k, lst in list(inst.waiting_conn.items()):
                if not lst:
                    continue
                if k in inst.conns:
                    self.flush_conn(inst, k)
                    continue
                if self.suppressed(inst, k):
                    continue
                addr = lst[0].wait["addr"] if lst[0].wait else k
                if self.try_connect(inst, addr):
                    self.flush_conn(inst, k)
            # mirrored routes waiting for a principal
            for m in list(inst.txq) + list(inst.forwarder):
                if m.wait is not None and m.wait["kind"] == "principal" and m.wait["inst"] is inst:
                    if m.dialog.lines.get((inst.name, m.from_target), [None])[0] is not m:
                        continue
                    r = m.wait["route"]
                    db = m.wait["db"]
                    if r not in self.route_table(inst, db):
                        self.route_keep(inst, m, m.wait)
                    else:
                        self.send_mirrored(inst, m, db, r)
            # transmitter
            self.reclassify(inst)
        if n % 5 == 0:
            for k, c in list(inst.conns.items()):
                if self.now - c["last"] >= IDLE_CLOSE_MS:
                    self.close_conn(inst, c["address"], "idle")
            for m in list(inst.forwarder):
                if m.received_ms is not None and self.now - m.received_ms >= FORWARD_STALE_MS:
                    self.unwait(inst, m)
                    self.emit("forwarded_message_deleted", instance=inst.name, **self.mfields(m))
                    line = m.dialog.lines.get((inst.name, m.from_target))
                    if line and m in line:
                        line.remove(m)
            for db in inst.dbs:
                if not db.started and db.master_key:
                    db.started = True
                    self.emit("database_broker_started", instance=inst.name, database=db.name)
            for db in inst.dbs:
                if not db.ack_cleanup and self.db_has_dialogs(db):
                    db.ack_cleanup = True
                    self.emit("ack_cleanup_resumed", instance=inst.name, database=db.name)

    def db_has_dialogs(self, db):
        for d in self.dialogs.values():
            if d.db is db or d.target_db is db:
                return True
        return False

    def reclassify(self, inst):
        names = []
        todo = []
        for m in list(inst.txq) + list(inst.forwarder):
            if m.wait is None or m.wait["inst"] is not inst:
                continue
            d = m.dialog
            line = d.lines.get((inst.name, m.from_target))
            if line and line[0] is not m:
                continue
            touched = d.name in inst.failing and m.wait["kind"] == "failed"
            if not touched:
                svc = self.msg_service(m)
                for (t, svcs) in inst.route_changes:
                    if t > m.wait["since"] and (None in svcs or svc in svcs):
                        touched = True
            if touched:
                todo.append(m)
                if d.name not in names:
                    names.append(d.name)
        inst.route_changes = []
        for m in todo:
            inst.failing.pop(m.dialog.name, None)
        self.emit("transmitter_reclassified", instance=inst.name, dialogs=names)
        for m in todo:
            if m.wait is None:
                continue
            if m.wait.get("retry"):
                pass
            w = m.wait
            if w["kind"] == "failed":
                self.unwait(inst, m)
                m.wait = None
                self.route_keep(inst, m, w)
            elif w["kind"] in ("delayed",):
                self.route_keep(inst, m, w)
            else:
                self.route_keep(inst, m, w)

    def route_keep(self, inst, m, w):
        db = w["db"]
        rec = m.received_ms
        if m.wait is not None:
            # stays in its row while routed again
            if w.get("addr") is not None:
                lst = inst.waiting_conn.get(norm_addr(w["addr"]))
                if lst and m in lst:
                    lst.remove(m)
        self.route(inst, m, db)
        if m.wait is not None and rec is not None and m.wait.get("inst") is inst \
                and (m.wait.get("db") is None) == (db is None):
            m.received_ms = rec

    def cmd_advance_time(self, c):
        return {}

    def cmd_fail_task_handlers(self, c):
        inst = self.inst(c["instance"])
        n = min(c["count"], inst.running_handlers)
        inst.running_handlers -= n
        self.emit("task_handlers_failed", instance=inst.name, count=n)
        return {}

    def cmd_set_dispatcher_saving(self, c):
        inst = self.inst(c["instance"])
        inst.saving_mode = c["mode"]
        inst.saving_delay = c.get("delay_s") or 0
        self.emit("dispatcher_saving", instance=inst.name, mode=inst.saving_mode, delay_s=inst.saving_delay)
        for rec in inst.dispatcher:
            rec["sched"] = False
        self.dispatch(inst)
        return {}

    def cmd_lose_in_transit(self, c):
        d = self.dialog(c["dialog"])
        d.lose[(c["sequence"], bool(c.get("from_target")))] = "every" if c.get("every") else "once"
        return {}

    def cmd_drop_connection(self, c):
        inst = self.inst(c["instance"])
        if norm_addr(c["address"]) not in inst.conns:
            raise Refused("no connection from %s to %s" % (inst.name, c["address"]))
        self.close_conn(inst, c["address"], "disconnected")
        return {}

    def cmd_fail_transmission(self, c):
        d = self.dialog(c["dialog"])
        for inst in {d.inst.name: d.inst, **({d.target_inst.name: d.target_inst} if d.target_inst else {})}.values():
            inst.failing[d.name] = c.get("reason") or "resource"
        return {}

    def cmd_create_master_key(self, c):
        db = self.db(c["instance"], c["database"])
        db.master_key = True
        self.emit("master_key_created", instance=db.inst.name, database=db.name)
        return {}

    def cmd_stop_ack_cleanup(self, c):
        db = self.db(c["instance"], c["database"])
        db.ack_cleanup = False
        self.emit("ack_cleanup_stopped", instance=db.inst.name, database=db.name)
        return {}

    # ------------------------------------------------------------ routes
    def route_list(self, c):
        inst = self.inst(c["instance"])
        if c.get("database") is None:
            return inst, inst.msdb
        return inst, self.db(c["instance"], c["database"]).routes

    def check_addr(self, a, field):
        if a is None:
            return
        if not isinstance(a, str):
            raise Refused("malformed %s" % field)
        u = a.upper()
        if u in ("LOCAL", "TRANSPORT"):
            return
        if not u.startswith("TCP://") or len(a) <= 6 or " " in a:
            raise Refused("malformed %s %r" % (field, a))

    def note_change(self, inst, services):
        self.order += 1
        inst.route_changes.append((self.order, set(services)))

    def cmd_create_route(self, c):
        inst, lst = self.route_list(c)
        r = c["route"]
        if any(x.name == r["name"] for x in lst):
            raise Refused("route %r exists" % r["name"])
        if r.get("address") is None:
            raise Refused("ADDRESS is required")
        self.check_addr(r.get("address"), "ADDRESS")
        self.check_addr(r.get("mirror_address"), "MIRROR_ADDRESS")
        ro = Route(r, self.now, (inst.name, c.get("database")))
        lst.append(ro)
        self.emit("route_created", instance=inst.name, database=c.get("database") or "msdb", route=ro.name)
        self.note_change(inst, [ro.service_name])
        if ro.expires_ms is not None:
            self.at(ro.expires_ms, self.route_expired, inst, ro, ro.expires_ms)
        return {}

    def route_expired(self, inst, ro, exp=None):
        if exp is not None and ro.expires_ms != exp:
            return
        if not any(ro in lst for lst in [inst.msdb] + [d.routes for d in inst.dbs]):
            return
        # a route expired: every waiting dialog of the instance is reclassified (PER-2B)
        self.note_change(inst, [None])

    def cmd_alter_route(self, c):
        inst, lst = self.route_list(c)
        r = c["route"]
        for x in lst:
            if x.name == r["name"]:
                self.check_addr(r.get("address"), "ADDRESS")
                self.check_addr(r.get("mirror_address"), "MIRROR_ADDRESS")
                before = x.service_name
                old_pair = {norm_addr(x.address), norm_addr(x.mirror_address)}
                for f in ("service_name", "broker_instance", "address", "mirror_address"):
                    if r.get(f) is not None:
                        setattr(x, f, r[f])
                if r.get("lifetime_s") is not None:
                    x.expires_ms = int(self.now + r["lifetime_s"] * 1000)
                    self.at(x.expires_ms, self.route_expired, inst, x, x.expires_ms)
                if x.principal is not None and norm_addr(x.principal) not in {norm_addr(x.address), norm_addr(x.mirror_address)}:
                    x.principal = None
                self.emit("route_altered", instance=inst.name, database=c.get("database") or "msdb", route=x.name)
                self.note_change(inst, [before, x.service_name])
                return {}
        raise Refused("no route %r" % r["name"])

    def cmd_drop_route(self, c):
        inst, lst = self.route_list(c)
        for x in lst:
            if x.name == c["name"]:
                lst.remove(x)
                self.emit("route_dropped", instance=inst.name, database=c.get("database") or "msdb", route=x.name)
                self.note_change(inst, [x.service_name])
                return {}
        raise Refused("no route %r" % c["name"])

    def cmd_answer_routing_request(self, c):
        inst, lst = self.route_list(c)
        r = c["route"]
        tname = self.table_name(None if c.get("database") is None else self.db(c["instance"], c["database"]))
        svc = r.get("service_name")
        for k in list(inst.pending_requests):
            if k[0] == tname and k[1] == svc:
                inst.pending_requests.discard(k)
        self.check_addr(r.get("address"), "ADDRESS")
        existing = [x for x in lst if x.name == r["name"]]
        for x in existing:
            lst.remove(x)
        ro = Route(r, self.now, (inst.name, c.get("database")))
        lst.append(ro)
        self.emit("route_created", instance=inst.name, database=c.get("database") or "msdb", route=ro.name)
        self.note_change(inst, [ro.service_name])
        if ro.expires_ms is not None:
            self.at(ro.expires_ms, self.route_expired, inst, ro, ro.expires_ms)
        return {}

    def cmd_set_message_forwarding(self, c):
        inst = self.inst(c["instance"])
        inst.forwarding = bool(c["active"])
        self.emit("message_forwarding", instance=inst.name, active=inst.forwarding)
        return {}

    def cmd_set_reachable(self, c):
        inst = self.inst(c["instance"])
        inst.reachable = bool(c["reachable"])
        self.emit("instance_reachable" if inst.reachable else "instance_unreachable", instance=inst.name)
        if not inst.reachable and inst.address:
            k = norm_addr(inst.address)
            for other in self.instances.values():
                if other is not inst and k in other.conns:
                    self.close_conn(other, inst.address, "disconnected")
        return {}

    def cmd_failover(self, c):
        db = self.db(c["instance"], c["database"])
        for inst in self.instances.values():
            for x in inst.dbs:
                if x is not db and x.name == db.name and x.role in ("principal", "mirror") and \
                        (x.bi == db.bi or x.bi is None or db.bi is None):
                    x.role = "mirror"
                    self.emit("mirroring_failover", instance=inst.name, database=x.name)
        db.role = "principal"
        self.emit("mirroring_failover", instance=db.inst.name, database=db.name)
        return {}

    # ------------------------------------------------------------ views
    def cmd_query_view(self, c):
        v = c["view"]
        iname = c.get("instance")
        insts = [self.inst(iname)] if iname is not None else list(self.instances.values())
        allinsts = list(self.instances.values())
        rows = []
        if v == "sys.dm_broker_queue_monitors":
            for i in allinsts:
                for db in i.dbs:
                    for q in db.queues.values():
                        if not q.monitor:
                            continue
                        tw = self.waiting_readers(q)
                        anyrecv = any(s.waiting and s.waiting["q"] is q for s in self.sessions.values())
                        if q.notify_deadline is not None and self.now < q.notify_deadline:
                            st = "NOTIFIED"
                        elif self.running(q) or anyrecv:
                            st = "RECEIVES_OCCURRING"
                        else:
                            st = "INACTIVE"
                        rows.append({"database_id": db.id, "queue_id": q.id, "instance": i.name,
                                     "database": db.name, "queue": q.name, "state": st,
                                     "last_empty_rowset_time": q.last_empty,
                                     "last_activated_time": q.last_activated, "tasks_waiting": tw})
        elif v == "sys.dm_broker_activated_tasks":
            for i in allinsts:
                for db in i.dbs:
                    for q in db.queues.values():
                        for t in q.tasks:
                            rows.append({"spid": t.session.spid, "database_id": db.id, "queue_id": q.id,
                                         "instance": i.name, "database": db.name, "queue": q.name,
                                         "task": t.number, "procedure_name": t.proc.get("name") or q.procedure_name})
        elif v == "sys.routes":
            inst = self.inst(iname)
            if c.get("database") is None:
                lst, dbn = inst.msdb, "msdb"
            else:
                lst, dbn = self.db(iname, c["database"]).routes, c["database"]
            for r in lst:
                rows.append({"instance": inst.name, "database": dbn, "name": r.name,
                             "remote_service_name": r.service_name, "broker_instance": r.broker_instance,
                             "address": r.address, "mirror_address": r.mirror_address,
                             "expires_ms": r.expires_ms})
        elif v == "sys.transmission_queue":
            for i in insts:
                for m in i.txq:
                    rows.append({"instance": i.name, "dialog": m.dialog.name,
                                 "message_sequence_number": m.seq, "from_target": m.from_target,
                                 "to_service_name": self.msg_service(m),
                                 "transmission_status": (m.wait or {}).get("status") or "waiting",
                                 "received_ms": m.received_ms if m.received_ms is not None else self.now})
        elif v == "sbtck.forwarder":
            for i in insts:
                for m in i.forwarder:
                    rows.append({"instance": i.name, "dialog": m.dialog.name,
                                 "message_sequence_number": m.seq, "from_target": m.from_target,
                                 "to_service_name": self.msg_service(m),
                                 "transmission_status": (m.wait or {}).get("status") or "waiting",
                                 "received_ms": m.received_ms if m.received_ms is not None else self.now})
        elif v == "sys.conversation_endpoints":
            for d in self.dialogs.values():
                rows.append({"dialog": d.name, "instance": d.inst.name, "database": d.db.name,
                             "far_service": d.to_service,
                             "far_broker_instance": d.to_bi if d.to_bi is not None else d.acked_bi,
                             "acknowledged": d.acked_bi is not None})
                if d.target_db is not None:
                    rows.append({"dialog": d.name, "instance": d.target_inst.name, "database": d.target_db.name,
                                 "far_service": d.from_service, "far_broker_instance": d.db.bi,
                                 "acknowledged": True})
        elif v == "sys.dm_broker_connections":
            for i in insts:
                for k, cn in i.conns.items():
                    rows.append({"instance": i.name, "address": cn["address"], "state": "CONNECTED",
                                 "opened_ms": cn["opened"], "last_activity_ms": cn["last"]})
        elif v == "sbtck.dispatcher_buffers":
            for i in insts:
                for rec in i.dispatcher:
                    m = rec["msg"]
                    rows.append({"instance": i.name, "database": rec["db"].name, "dialog": m.dialog.name,
                                 "message_sequence_number": m.seq, "from_target": m.from_target,
                                 "arrived_ms": rec["arrived"]})
        elif v == "sbtck.periodic_state":
            for i in insts:
                for db in i.dbs:
                    rows.append({"instance": i.name, "task_handlers": i.handlers,
                                 "running_task_handlers": i.running_handlers, "database": db.name,
                                 "broker_started": db.started, "ack_cleanup_running": db.ack_cleanup})
        else:
            raise Refused("no view %r" % v)
        return {"rows": rows}

    # ------------------------------------------------------------ dispatch
    def execute(self, c):
        kind = c.get("kind")
        fn = getattr(self, "cmd_" + str(kind), None)
        if fn is None:
            raise Refused("unknown command %r" % kind)
        at = c.get("at_ms", self.now)
        if kind != "start":
            if not self.started:
                raise Refused("no topology has been started")
            if at > self.now:
                self.run_until(at)
            self.now = max(self.now, at)
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
        except Exception:
            continue
        rid = req.get("id")
        op = req.get("op")
        if op == "hello":
            ans = {"id": rid, "ok": True, "result": {
                "name": "cleanroom12", "version": "0.1", "protocol": "2.3",
                "capabilities": CAPS, "params": PARAMS}}
        elif op == "bye":
            out.write(json.dumps({"id": rid, "ok": True}) + "\n")
            out.flush()
            return
        elif op == "execute":
            b.events = []
            try:
                res = b.execute(req.get("command") or {})
                ans = {"id": rid, "ok": True, "result": res, "events": b.events}
            except Refused as e:
                ans = {"id": rid, "ok": False, "error": str(e), "events": b.events}
            except Exception as e:
                traceback.print_exc(file=sys.stderr)
                ans = {"id": rid, "ok": False, "fault": True, "error": "%s: %s" % (type(e).__name__, e),
                       "events": b.events}
        else:
            ans = {"id": rid, "ok": False, "error": "unknown op %r" % op}
        out.write(json.dumps(ans) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
