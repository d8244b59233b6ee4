#!/usr/bin/env python3
"""Clean-room Service Broker IUT for sbtck (activation + external activation).

Written from /work/main/README.md, docs/ and /work/shared/spec only.
Standard library only. Speaks JSON lines on stdin/stdout.
"""
import heapq
import json
import sys
import traceback

PARAMS = {
    "activation_empty_window_s": 5,
    "external_activation_timeout_s": 10,
}
CAPS = ["activation", "external_activation"]
TIMER_MS = 5000
import os
TRACE = os.environ.get("CR2_TRACE") == "1" or "--trace" in sys.argv
ROUTING = os.environ.get("CR2_ROUTING") == "1" or "--routing" in sys.argv
if ROUTING:
    CAPS = CAPS + ["routing"]
    PARAMS["delayed_retry_s"] = 10
if TRACE:
    CAPS = CAPS + ["decision_trace"]


class Refusal(Exception):
    pass


class Queue:
    def __init__(self, inst, db, name, act, qid):
        self.inst, self.db, self.name, self.qid = inst, db, name, qid
        act = act or {}
        self.status = act.get("status") or "OFF"
        self.proc = act.get("procedure_name")
        self.max_readers = act.get("max_queue_readers")
        if self.max_readers is None:
            self.max_readers = 1
        self.msgs = []          # unread messages (dicts), in arrival order
        self.notifications = []  # names of QUEUE_ACTIVATION notifications
        self.monitor = False
        self.state = "INACTIVE"
        self.last_empty = None
        self.last_activated = None
        self.task_count = 0
        self.tasks = {}          # task no -> Proc (running)
        self.ext_timeout_until = None  # external activation time-out end
        self.ext_timer_seq = 0

    def key(self):
        return (self.inst, self.db, self.name)


class Session:
    def __init__(self, name, spid):
        self.name = name
        self.spid = spid
        self.in_txn = False
        self.received = []   # (queue, msg) received in txn
        self.locks = set()   # (queue key, group)
        self.had_receive = False
        self.recv_queues = set()
        self.wait = None     # dict describing a waiting statement
        self.last = None


class Proc:
    def __init__(self, q, task, spec, session):
        self.q, self.task, self.spec, self.session = q, task, spec, session
        self.state = "starting"
        self.alive = True


class Broker:
    def __init__(self):
        self.reset()

    def reset(self):
        self.now = 0
        self.t0 = 0
        self.events = []
        self.heap = []
        self.seq = 0
        self.instances = {}
        self.dbs = {}        # (inst, db) -> dict
        self.queues = {}     # (inst, db, q) -> Queue
        self.dialogs = {}
        self.sessions = {}
        self.spid_next = 51
        self.waiters = []    # sessions waiting, FIFO
        self.pending_instant = []  # actions to run at end of instant
        self.next_tick = None
        self.qid = 100
        self.defer = []
        self.msdb = {}
        self.conns = {}
        self.reachable = {}
        self.tq = {}
        self.fw = {}
        self.conn_wait = {}
        self.suppressed = {}
        self.ticks = 0

    # ---------------------------------------------------------------- events
    def ev(self, kind, **f):
        e = {"at_ms": self.now, "kind": kind}
        e.update(f)
        self.events.append(e)

    def qf(self, q):
        return {"instance": q.inst, "database": q.db, "queue": q.name}

    def schedule(self, t, fn, *args):
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, fn, args))

    # ---------------------------------------------------------------- time
    def run_until(self, t):
        while True:
            cand = []
            if self.heap:
                cand.append(self.heap[0][0])
            if self.next_tick is not None:
                cand.append(self.next_tick)
            if not cand:
                break
            nt = min(cand)
            if nt > t:
                break
            if nt > self.now:
                self.settle()
                self.now = nt
            if self.next_tick is not None and self.next_tick == nt and (not self.heap or self.heap[0][0] >= nt):
                self.next_tick += TIMER_MS
                self.timer()
            else:
                _, _, fn, args = heapq.heappop(self.heap)
                fn(*args)
            self.settle()
        self.settle()
        if t > self.now:
            self.now = t

    def settle(self):
        while True:
            self.settle_work()
            if not self.defer:
                break
            q, trig, we = self.defer.pop(0)
            self._check(q, trig, we)

    def settle_work(self):
        # work that happens "after that instant's other work"
        guard = 0
        while self.pending_instant or (self.heap and self.heap[0][0] <= self.now):
            guard += 1
            if guard > 100000:
                raise RuntimeError("runaway instant")
            if self.heap and self.heap[0][0] <= self.now:
                _, _, fn, args = heapq.heappop(self.heap)
                fn(*args)
                continue
            fn, args = self.pending_instant.pop(0)
            fn(*args)

    def timer(self):
        self.ticks += 1
        if ROUTING and self.ticks % 2 == 0:
            self.transport_tick()
        if ROUTING and self.ticks % 5 == 0:
            # PER-5B: the forwarder deletes messages it could not forward within 60 seconds
            for inst, fw in self.fw.items():
                for x in list(fw):
                    if self.now - x[2] >= 60000:
                        fw.remove(x)
                        self.ev("forwarded_message_deleted", instance=inst, **self.msg_ident(x[1]))
        for q in list(self.queues.values()):
            if q.monitor:
                self.check(q, "timer notification")

    # ---------------------------------------------------------------- sessions
    def session(self, name):
        s = self.sessions.get(name)
        if s is None:
            s = Session(name, self.spid_next)
            self.spid_next += 1
            self.sessions[name] = s
        return s

    def queue_of(self, ref):
        if not ref:
            raise Refusal("no queue given")
        k = (ref.get("instance"), ref.get("database"), ref.get("queue"))
        q = self.queues.get(k)
        if q is None:
            raise Refusal("unknown queue %r" % (k,))
        return q

    def locked_groups(self, q, except_session=None):
        out = set()
        for s in self.sessions.values():
            if s is except_session:
                continue
            for (qk, g) in s.locks:
                if qk == q.key():
                    out.add(g)
        return out

    def ready_msgs(self, q, session):
        lk = self.locked_groups(q, session)
        return [m for m in q.msgs if m["group"] not in lk]

    def pick(self, q, session, top, where_dialog, where_group):
        ready = self.ready_msgs(q, session)
        if where_dialog is not None:
            ready = [m for m in ready if m["dialog"] == where_dialog]
        if where_group is not None:
            g = self.group_of_dialog_on(q, where_group)
            ready = [m for m in ready if m["group"] == g]
        if not ready:
            return None, []
        # a group this session already holds first, else the oldest message's group
        held = [g for (qk, g) in session.locks if qk == q.key()]
        grp = None
        for m in ready:
            if m["group"] in held:
                grp = m["group"]
                break
        if grp is None:
            grp = ready[0]["group"]
        rows = [m for m in ready if m["group"] == grp]
        if top is not None:
            rows = rows[:top]
        return grp, rows

    def group_of_dialog_on(self, q, dialog):
        d = self.dialogs.get(dialog)
        if d is None:
            return None
        if (d["t_inst"], d["t_db"], d["t_queue"]) == q.key():
            return d["t_group"]
        return d["i_group"]

    def row(self, m):
        return {"dialog": m["dialog"], "message_sequence_number": m["seq"],
                "from_target": m["from_target"], "message_type": m.get("message_type"),
                "body": m.get("body"), "conversation_group": m["group"]}

    def do_receive(self, s, q, top, where_dialog, where_group, waitfor_ms, gcg=False):
        """Execute RECEIVE / GET CONVERSATION GROUP now. Returns rows or None when waiting."""
        has_where = where_dialog is not None or where_group is not None
        stmt = "GET CONVERSATION GROUP" if gcg else "RECEIVE"
        if not gcg:
            s.had_receive = True
            if s.in_txn:
                s.recv_queues.add(q.key())
        grp, rows = self.pick(q, s, None if gcg else top, where_dialog, where_group)
        # a RECEIVE executing on the queue ends the external activation time-out
        if not gcg and q.ext_timeout_until is not None:
            q.ext_timeout_until = None
            q.ext_timer_seq += 1
        if grp is not None:
            self.deliver(s, q, grp, rows, gcg, has_where)
            if not gcg:
                self.check(q, "RECEIVE")
            return rows
        if waitfor_ms:
            s.wait = {"q": q, "top": top, "wd": where_dialog, "wg": where_group,
                      "gcg": gcg, "has_where": has_where, "until": self.now + waitfor_ms}
            self.waiters.append(s)
            self.ev("reader_waiting", session=s.name, statement=stmt, has_where=has_where, **self.qf(q))
            self.schedule(self.now + waitfor_ms, self.wait_timeout, s, s.wait)
            if not gcg:
                self.check(q, "RECEIVE")
            return None
        self.empty(s, q, gcg, has_where)
        if not gcg:
            self.check(q, "RECEIVE")
        return []

    def empty(self, s, q, gcg, has_where):
        stmt = "GET CONVERSATION GROUP" if gcg else "RECEIVE"
        if not has_where:
            q.last_empty = self.now
        self.ev("empty_result", session=s.name, statement=stmt, has_where=has_where,
                rows=[], conversation_group=None, **self.qf(q))
        s.last = []
        proc = getattr(s, "proc", None)
        if proc is not None and proc.alive:
            self.proc_empty(proc)

    def deliver(self, s, q, grp, rows, gcg, has_where):
        stmt = "GET CONVERSATION GROUP" if gcg else "RECEIVE"
        s.locks.add((q.key(), grp))
        if not gcg:
            for m in rows:
                q.msgs.remove(m)
                s.received.append((q, m))
        self.ev("rows_returned", session=s.name, statement=stmt, has_where=has_where,
                rows=[] if gcg else [self.row(m) for m in rows], conversation_group=grp, **self.qf(q))
        s.last = rows
        if not s.in_txn:
            self.autocommit(s)
        elif not gcg:
            s.had_receive = True
            s.recv_queues.add(q.key())
        proc = getattr(s, "proc", None)
        if proc is not None and proc.alive:
            self.proc_got(proc)

    def autocommit(self, s):
        s.received = []
        s.locks = set()
        s.had_receive = False
        s.recv_queues = set()

    def wait_timeout(self, s, w):
        if s.wait is not w:
            return
        s.wait = None
        if s in self.waiters:
            self.waiters.remove(s)
        self.empty(s, w["q"], w["gcg"], w["has_where"])
        if not w["gcg"]:
            self.check(w["q"], "RECEIVE")

    def serve_waiters(self, q):
        for s in list(self.waiters):
            w = s.wait
            if w is None or w["q"] is not q:
                continue
            grp, rows = self.pick(q, s, None if w["gcg"] else w["top"], w["wd"], w["wg"])
            if grp is None:
                continue
            s.wait = None
            self.waiters.remove(s)
            self.deliver(s, q, grp, rows, w["gcg"], w["has_where"])
            # a RECEIVE that ends its wait is a RECEIVE executing for the queue
            if not w["gcg"]:
                self.check(q, "RECEIVE")

    def release(self, s, rollback):
        returned = 0
        qs = set()
        if rollback:
            for (q, m) in s.received:
                q.msgs.append(m)
                returned += 1
                qs.add(q)
            for q in qs:
                q.msgs.sort(key=lambda m: m["order"])
        for (qk, g) in s.locks:
            qs.add(self.queues[qk])
        had = set(s.recv_queues)
        s.recv_queues = set()
        for k in had:
            if k in self.queues:
                qs.add(self.queues[k])
        s.received = []
        s.locks = set()
        s.had_receive = False
        s.in_txn = False
        return returned, qs, had

    # ---------------------------------------------------------------- monitor
    def waiting_count(self, q):
        n = 0
        for s in self.waiters:
            w = s.wait
            if w and w["q"] is q and not w["has_where"]:
                n += 1
        return n

    def starting_count(self, q):
        return sum(1 for p in q.tasks.values() if p.state == "starting")

    def set_monitor(self, q):
        want = q.status == "ON" or bool(q.notifications)
        if want and not q.monitor:
            q.monitor = True
            q.state = "INACTIVE"
            self.ev("monitor_created", **self.qf(q))
        elif not want and q.monitor:
            q.monitor = False
            self.ev("monitor_removed", **self.qf(q))

    def necessary(self, q, trigger, was_empty=False):
        if not q.monitor:
            return False
        if trigger == "message arrived" and was_empty and not q.tasks:
            return "ACT-06"
        if not q.msgs:
            return False
        if self.waiting_count(q) or self.starting_count(q):
            return False
        w = PARAMS["activation_empty_window_s"] * 1000
        if q.last_empty is not None and self.now - q.last_empty < w:
            return False
        return "ACT-07"

    def check(self, q, trigger, was_empty=False):
        if not q.monitor:
            return
        # every trigger is looked at once the instant's work has settled, in order
        self.defer.append((q, trigger, was_empty))

    def _check(self, q, trigger, was_empty=False):
        if not q.monitor:
            return
        rule = self.necessary(q, trigger, was_empty)
        if not rule:
            return
        if TRACE:
            self.ev("activation_necessary", rule=rule, trigger=trigger, **self.qf(q))
        if q.status == "ON" and q.proc:
            if len(q.tasks) < q.max_readers:
                self.start_proc(q)
            elif TRACE:
                self.ev("activation_withheld", reason="MAX_QUEUE_READERS", **self.qf(q))
        if q.notifications:
            if q.ext_timeout_until is None:
                for n in q.notifications:
                    self.ev("event_notification", notification=n, event_type="QUEUE_ACTIVATION", **self.qf(q))
                q.last_activated = self.now
                q.state = "NOTIFIED"
                q.ext_timeout_until = self.now + int(PARAMS["external_activation_timeout_s"] * 1000)
                q.ext_timer_seq += 1
                self.schedule(q.ext_timeout_until, self.ext_timeout, q, q.ext_timer_seq)
            elif TRACE:
                self.ev("activation_withheld", reason="notification time-out", **self.qf(q))

    def ext_timeout(self, q, seqno):
        if q.ext_timer_seq != seqno or q.ext_timeout_until is None:
            return
        q.ext_timeout_until = None
        self.ev("activation_time_out", **self.qf(q))
        self.check(q, "external activation time-out")

    # ---------------------------------------------------------------- procedures
    def proc_spec(self, q, name):
        d = self.dbs[(q.inst, q.db)]
        procs = d.get("procedures") or {}
        spec = None
        if isinstance(procs, dict):
            spec = procs.get(name)
        else:
            for p in procs:
                if p.get("name") == name:
                    spec = p
        return spec or {}

    def start_proc(self, q):
        q.task_count += 1
        n = q.task_count
        sname = "%s#%d" % (q.name, n)
        s = Session(sname, self.spid_next)
        self.spid_next += 1
        self.sessions[sname] = s
        p = Proc(q, n, self.proc_spec(q, q.proc), s)
        p.procedure_name = q.proc
        s.proc = p
        q.tasks[n] = p
        q.last_activated = self.now
        q.state = "NOTIFIED"
        self.ev("procedure_started", procedure_name=q.proc, task=n, spid=s.spid, **self.qf(q))
        if p.spec.get("receives", True) is not False:
            self.pending_instant.append((self.proc_step, (p,)))
        else:
            p.state = "running"

    def proc_step(self, p):
        if not p.alive:
            return
        p.state = "receiving"
        s = p.session
        s.in_txn = True
        q = p.q
        q.state = "RECEIVES_OCCURRING"
        # docs: "RECEIVEs TOP (receive_top) (default 1)"; the stage's topologies write
        # receive_top: null and the reference then reads the whole group (no TOP)
        if "receive_top" in p.spec:
            top = p.spec["receive_top"]
        else:
            top = 1
        self.do_receive(s, q, top, None, None, p.spec.get("waitfor_ms"))
        if p.alive and s.wait is not None:
            p.state = "waiting"

    def proc_got(self, p):
        p.state = "working"
        work = p.spec.get("work_ms") or 0
        self.schedule(self.now + work, self.proc_commit, p)

    def proc_commit(self, p):
        if not p.alive:
            return
        s = p.session
        # the commit, the reader it serves and the procedure's next RECEIVE are one step:
        # the monitor looks once the instant has settled (see check/flush)
        _, qs, _ = self.release(s, False)
        self.ev("transaction_committed", session=s.name)
        for q in qs:
            self.serve_waiters(q)
        self.proc_step(p)

    def proc_empty(self, p):
        s = p.session
        self.release(s, False)
        self.ev("transaction_committed", session=s.name)
        self.proc_exit(p, "empty RECEIVE")

    def proc_exit(self, p, reason):
        p.alive = False
        q = p.q
        s = p.session
        if s.wait is not None:
            s.wait = None
            if s in self.waiters:
                self.waiters.remove(s)
        if s.in_txn or s.locks:
            _, qs, _ = self.release(s, False)
            self.ev("transaction_committed", session=s.name)
            for qq in qs:
                self.serve_waiters(qq)
        q.tasks.pop(p.task, None)
        self.ev("procedure_exited", reason=reason, task=p.task, spid=s.spid, **self.qf(q))
        if not q.tasks:
            q.state = "INACTIVE"
            self.check(q, "all procedures exited")

    # ---------------------------------------------------------------- messages
    def find_service(self, inst, db, name):
        order = [db] + [d for (i, d) in self.dbs if i == inst and d != db]
        for dname in order:
            d = self.dbs.get((inst, dname))
            if not d:
                continue
            for sv in d.get("services") or []:
                if sv.get("name") == name:
                    return dname, sv
        return None, None

    def arrive(self, d, m, inst, db, svc):
        q = self.queues.get((inst, db, svc["queue"]))
        self.done(d, m)
        if q is None:
            return
        was_empty = not q.msgs
        self.seq += 1
        m["order"] = self.seq
        q.msgs.append(m)
        self.ev("message_arrived", dialog=m["dialog"], message_sequence_number=m["seq"],
                from_target=m["from_target"], service=svc["name"], conversation_group=m["group"],
                **self.qf(q))
        self.check(q, "message arrived", was_empty)
        self.serve_waiters(q)

    # ---------------------------------------------------------------- commands
    def cmd_start(self, c):
        self.reset()
        self.now = self.t0 = c["at_ms"]
        topo = c.get("topology") or {}
        self.ev("broker_started")
        for inst in topo.get("instances") or []:
            self.instances[inst["name"]] = inst
            self.msdb[inst["name"]] = list(inst.get("msdb_routes") or [])
            for r in self.msdb[inst["name"]]:
                self.init_route(r)
            for d in inst.get("databases") or []:
                self.dbs[(inst["name"], d["name"])] = d
                d["routes"] = list(d.get("routes") or [])
                for r in d["routes"]:
                    self.init_route(r)
                for qd in d.get("queues") or []:
                    self.qid += 1
                    q = Queue(inst["name"], d["name"], qd["name"], qd.get("activation"), self.qid)
                    self.queues[q.key()] = q
                for en in d.get("event_notifications") or []:
                    qn = en.get("queue")
                    if isinstance(qn, dict):
                        qn = qn.get("queue")
                    q = self.queues.get((inst["name"], d["name"], qn))
                    if q is not None:
                        q.notifications.append(en.get("name"))
        for q in self.queues.values():
            self.set_monitor(q)
        self.next_tick = self.t0 + TIMER_MS
        return {}

    def init_route(self, r):
        r["_expires"] = (self.now + int(r["lifetime_s"] * 1000)) if r.get("lifetime_s") else None

    def route_rows(self, inst, db):
        rows = []
        for r in self.rtable(inst, db):
            rows.append({"instance": inst, "database": db if db else "msdb", "name": r["name"],
                         "remote_service_name": r.get("service_name"), "broker_instance": r.get("broker_instance"),
                         "address": r.get("address"), "mirror_address": r.get("mirror_address"),
                         "expires_ms": r.get("_expires")})
        return rows

    def cmd_create_route(self, c):
        inst, db, r = c["instance"], c.get("database"), dict(c["route"])
        if inst not in self.instances or (db is not None and (inst, db) not in self.dbs):
            raise Refusal("unknown instance or database")
        t = self.rtable(inst, db)
        if any(x["name"] == r["name"] for x in t):
            raise Refusal("route exists")
        a = (r.get("address") or "")
        if not (a.upper() in ("LOCAL", "TRANSPORT") or a.upper().startswith("TCP://")):
            raise Refusal("malformed address")
        self.init_route(r)
        t.append(r)
        self.ev("route_created", instance=inst, database=db if db else "msdb", route=r["name"])
        return {}

    def cmd_alter_route(self, c):
        inst, db, r = c["instance"], c.get("database"), c["route"]
        t = self.rtable(inst, db)
        for x in t:
            if x["name"] == r["name"]:
                for k, v in r.items():
                    if v is not None:
                        x[k] = v
                if r.get("lifetime_s") is not None:
                    self.init_route(x)
                self.ev("route_altered", instance=inst, database=db if db else "msdb", route=x["name"])
                return {}
        raise Refusal("no such route")

    def cmd_drop_route(self, c):
        inst, db = c["instance"], c.get("database")
        t = self.rtable(inst, db)
        for x in t:
            if x["name"] == c["name"]:
                t.remove(x)
                self.ev("route_dropped", instance=inst, database=db if db else "msdb", route=x["name"])
                return {}
        raise Refusal("no such route")

    def cmd_set_reachable(self, c):
        self.reachable[c["instance"]] = bool(c["reachable"])
        self.ev("instance_reachable" if c["reachable"] else "instance_unreachable", instance=c["instance"])
        return {}

    def cmd_advance_time(self, c):
        return {}

    def cmd_begin_dialog(self, c):
        name = c["dialog"]
        inst, db = c["instance"], c["database"]
        if (inst, db) not in self.dbs:
            raise Refusal("unknown database")
        dname, sv = self.find_service(inst, db, c.get("from_service"))
        init_svc = None
        for s in self.dbs[(inst, db)].get("services") or []:
            if s.get("name") == c.get("from_service"):
                init_svc = s
        if init_svc is None:
            raise Refusal("unknown service %r" % c.get("from_service"))
        d = {"name": name, "inst": inst, "db": db, "from": c.get("from_service"), "to": c.get("to_service"),
             "tbi": c.get("to_broker_instance"), "seq": {False: 0, True: 0},
             "i_group": "G-%s-i" % name, "t_group": "G-%s-t" % name,
             "i_bi": self.dbs[(inst, db)].get("broker_instance"),
             "init_svc": init_svc, "t_inst": None, "t_db": None, "t_queue": None, "t_svc": None}
        self.dialogs[name] = d
        self.ev("dialog_begun", dialog=name, instance=inst, database=db, from_service=d["from"],
                to_service=d["to"], to_broker_instance=d["tbi"])
        return {}

    def target_db(self, d):
        if d["t_db"] is not None:
            return d["t_db"], d["t_svc"]
        inst = d["inst"]
        if d["tbi"]:
            for (i, dn), dd in self.dbs.items():
                if i == inst and (dd.get("broker_instance") or "").lower() == d["tbi"].lower():
                    for sv in dd.get("services") or []:
                        if sv.get("name") == d["to"]:
                            return dn, sv
            return None, None
        return self.find_service(inst, d["db"], d["to"])

    def cmd_send(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refusal("no dialog %r has been begun" % c["dialog"])
        ft = bool(c.get("from_target"))
        seq = d["seq"][ft]
        d["seq"][ft] = seq + 1
        sinst = d["inst"] if not ft else (d["t_inst"] or d["inst"])
        sdb = d["db"] if not ft else (d["t_db"] or d["db"])
        self.ev("message_sent", dialog=d["name"], from_target=ft, instance=sinst, database=sdb,
                message_sequence_number=seq)
        m = {"dialog": d["name"], "seq": seq, "from_target": ft, "message_type": c.get("message_type"),
             "body": c.get("body"), "hops": 0}
        if ROUTING:
            m["tq_ms"] = self.now
            pend = d.setdefault("pending", {False: [], True: []})[ft]
            if pend:
                # the conversation is delayed, not the message: it waits behind the first
                # (guess: also behind an earlier message still on its way, not yet delivered)
                m["status"] = "behind an earlier message of the conversation"
                pend.append((m, sinst, sdb))
                self.tq.setdefault(sinst, []).append((d, m))
                self.ev("transmission_pending", instance=sinst, status=m["status"], **self.msg_ident(m))
                return {"message_sequence_number": seq}
            pend.append((m, sinst, sdb))
            self.route(d, m, sinst, sdb, False)
            self.advance_conv(d, ft)
            return {"message_sequence_number": seq}
        if not ft:
            dn, sv = self.target_db(d)
            if sv is None:
                return {"message_sequence_number": seq}
            d["t_inst"], d["t_db"], d["t_svc"], d["t_queue"] = d["inst"], dn, sv, sv.get("queue")
            m["group"] = d["t_group"]
            self.arrive(d, m, d["inst"], dn, sv)
        else:
            m["group"] = d["i_group"]
            self.arrive(d, m, d["inst"], d["db"], d["init_svc"])
        return {"message_sequence_number": seq}

    # ---------------------------------------------------------------- routing
    def rtable(self, inst, db):
        if db is None:
            return self.msdb[inst]
        return self.dbs[(inst, db)].setdefault("routes", [])

    def live(self, routes):
        out = []
        for r in routes:
            exp = r.get("_expires")
            if exp is not None and exp <= self.now:
                continue
            out.append(r)
        return out

    def msg_ident(self, m):
        return {"dialog": m["dialog"], "from_target": m["from_target"], "message_sequence_number": m["seq"]}

    def has_service(self, inst, name):
        for (i, dn), dd in self.dbs.items():
            if i == inst:
                for sv in dd.get("services") or []:
                    if sv.get("name") == name:
                        return True
        return False

    def route(self, d, m, inst, db, outside):
        """Route message m at instance inst; db is the database holding the conversation (None: from outside)."""
        ft = m["from_target"]
        svc = d["from"] if ft else d["to"]
        if ft:
            bi = d["i_bi"]
        else:
            bi = d.get("bound_bi") or d["tbi"]
        # RTE-05: a reply arriving from outside naming a broker instance of this instance
        if outside and ft and bi:
            for (i, dn), dd in self.dbs.items():
                if i == inst and (dd.get("broker_instance") or "").lower() == bi.lower():
                    self.ev("reply_recognised", broker_instance=bi, instance=inst, **self.msg_ident(m))
                    self.deliver_local(d, m, inst, None, bi, None)
                    return True
        table_name = "msdb.sys.routes" if (outside or db is None) else "%s.sys.routes" % db
        routes = self.live(self.rtable(inst, None if outside else db))
        step, matched = None, []
        if bi:
            matched = [r for r in routes if r.get("service_name") == svc and (r.get("broker_instance") or "").lower() == bi.lower()]
            step = "RTM-1"
        if not matched:
            matched = [r for r in routes if r.get("service_name") == svc and not r.get("broker_instance")]
            step = "RTM-2"
        pick_bi = None
        if not matched and not bi:
            cands = [r for r in routes if r.get("service_name") == svc and r.get("broker_instance")]
            if cands:
                pick_bi = cands[0]["broker_instance"]
                matched = [r for r in cands if r["broker_instance"] == pick_bi]
                step = "RTM-3"
        if not matched:
            matched = [r for r in routes if not r.get("service_name") and not r.get("broker_instance")]
            step = "RTM-5"
        as_local = False
        if not matched and bi and self.has_service(inst, svc):
            as_local = True
            step = "RTM-6"
        if not matched and not as_local:
            if TRACE:
                self.ev("routes_matched", step="RTM-7", table=table_name, routes=[], broker_instance=None,
                        instance=inst, **self.msg_ident(m))
            return self.delay(d, m, inst, db, outside, "RTM-7")
        if TRACE:
            self.ev("routes_matched", step=step, table=table_name,
                    routes=["(as if LOCAL)"] if as_local else [r["name"] for r in matched],
                    broker_instance=(pick_bi.upper() if pick_bi else None), instance=inst, **self.msg_ident(m))
        if as_local:
            chosen, cstep, cands = {"name": "(as if LOCAL)", "address": "LOCAL", "service_name": svc,
                                    "broker_instance": None}, "RTC-2", ["(as if LOCAL)"]
        else:
            chosen = None
            groups = []
            for tag, pred in (("RTC-1", lambda r: bool(r.get("mirror_address"))),
                              ("RTC-2", lambda r: (r.get("address") or "").upper() == "LOCAL"),
                              ("RTC-3", lambda r: (r.get("address") or "").upper() not in ("LOCAL", "TRANSPORT")),
                              ("RTC-4", lambda r: (r.get("address") or "").upper() == "TRANSPORT")):
                cs = [r for r in matched if pred(r)]
                if tag == "RTC-2" and cs and not self.has_service(inst, svc):
                    continue
                if cs:
                    uniq = []
                    seen = set()
                    for r in cs:
                        k = ((r.get("broker_instance") or "").lower(), r.get("service_name"), (r.get("address") or "").lower())
                        if k not in seen:
                            seen.add(k)
                            uniq.append(r)
                    chosen, cstep, cands = cs[0], tag, [r["name"] for r in uniq]
                    break
            if chosen is None:
                return self.delay(d, m, inst, db, outside, "RTC-4")
        if TRACE:
            self.ev("route_chosen", step=cstep, route=chosen["name"], candidates=cands, instance=inst,
                    **self.msg_ident(m))
        addr = chosen.get("address") or ""
        if outside and addr.upper() != "LOCAL" and not self.forwarding(inst):
            self.done(d, m)
            self.ev("message_dropped", reason="message forwarding is not active", rule="RTC-5" if TRACE else None,
                    instance=inst, **self.msg_ident(m))
            return True
        if addr.upper() == "LOCAL":
            self.deliver_local(d, m, inst, None if outside else db, chosen.get("broker_instance") or bi, svc)
            return True
        if addr.upper() == "TRANSPORT":
            a = svc if svc.upper().startswith("TCP://") else None
            if a is None:
                self.done(d, m)
                self.ev("message_dropped", reason="TRANSPORT route without an address", instance=inst, **self.msg_ident(m))
                return True
            a = "/".join(a.split("/")[:3])
            addr = a
        self.transmit(d, m, inst, addr)
        return True

    def forwarding(self, inst):
        return bool(self.instances[inst].get("message_forwarding"))

    def delay(self, d, m, inst, db, outside, step):
        kw = {"step": step} if TRACE else {}
        self.ev("conversation_delayed", instance=inst, **kw, **self.msg_ident(m))
        # where the message waits: the stage follows a message by this report
        self.ev("transmission_pending", instance=inst, status="delayed", **self.msg_ident(m))
        if outside:
            # a message from outside: it waits at this instance (its own retry), held by the forwarder
            # (sbtck.forwarder), not in sys.transmission_queue
            fw = self.fw.setdefault(inst, [])
            if not any(mm is m for (dd, mm, t) in fw):
                fw.append((d, m, self.now))
            self.schedule(self.now + int(PARAMS.get("delayed_retry_s", 10) * 1000), self.retry_out, d, m, inst)
            return False
        self.tq.setdefault(inst, []).append((d, m))
        self.schedule(self.now + int(PARAMS.get("delayed_retry_s", 10) * 1000), self.retry, d, m["from_target"])
        return False

    def tq_remove(self, inst, m):
        lst = self.tq.get(inst, [])
        for i, (dd, mm) in enumerate(lst):
            if mm is m:
                del lst[i]
                return

    def retry_out(self, d, m, inst):
        fw = self.fw.get(inst, [])
        held = [x for x in fw if x[1] is m]
        if not held:
            return  # deleted by the forwarder meanwhile
        fw.remove(held[0])
        self.ev("routing_retried", instance=inst, **self.msg_ident(m))
        self.route(d, m, inst, None, True)
        for i, x in enumerate(fw):
            if x[1] is m:
                # still held: it keeps the instant the forwarder received it
                fw[i] = (x[0], x[1], held[0][2])

    def retry(self, d, ft):
        pend = d["pending"][ft]
        if not pend:
            return
        m, inst, db = pend[0]
        self.tq_remove(inst, m)
        self.ev("routing_retried", instance=inst, **self.msg_ident(m))
        self.route(d, m, inst, db, False)
        self.advance_conv(d, ft)

    def done(self, d, m):
        m["done"] = True
        if ROUTING:
            self.pending_instant.append((self.advance_conv, (d, m["from_target"])))

    def advance_conv(self, d, ft):
        pend = d.get("pending", {}).get(ft)
        while pend and pend[0][0].get("done"):
            pend.pop(0)
            if pend:
                m, inst, db = pend[0]
                self.tq_remove(inst, m)
                m.pop("status", None)
                self.route(d, m, inst, db, False)

    def inst_of_addr(self, addr):
        for n, i in self.instances.items():
            if (i.get("address") or "").lower() == addr.lower():
                return n
        return None

    def transmit(self, d, m, inst, addr):
        to = self.inst_of_addr(addr)
        if to == inst:
            # RTX-2: treated as arriving from outside
            self.route(d, m, inst, None, True)
            return
        key = (inst, addr.lower())
        if key in self.conns and not (self.reachable.get(to, True) and self.reachable.get(inst, True)):
            # the connection the network cut is found broken when next used
            del self.conns[key]
            self.ev("connection_closed", instance=inst, address=self.conn_addr(addr), reason="disconnected")
            self.suppressed[key] = self.now + 15000
        if key not in self.conns:
            waiting = self.conn_wait.setdefault(key, [])
            if waiting or self.suppressed.get(key, -1) > self.now:
                # behind earlier messages to this address, or the destination is suppressed
                m["status"] = "waiting for a connection"
                m["addr"] = addr
                waiting.append((d, m))
                self.tq.setdefault(inst, []).append((d, m))
                self.ev("transmission_pending", instance=inst, status=m["status"], **self.msg_ident(m))
                return
            if not self.connect(inst, addr):
                m["status"] = "connection refused"
                m["addr"] = addr
                waiting.append((d, m))
                self.tq.setdefault(inst, []).append((d, m))
                self.ev("transmission_pending", instance=inst, status=m["status"], **self.msg_ident(m))
                return
        self.send_over(d, m, inst, addr)

    def conn_addr(self, addr):
        return addr

    def connect(self, inst, addr):
        to = self.inst_of_addr(addr)
        key = (inst, addr.lower())
        ok = to is not None and self.reachable.get(to, True) and self.reachable.get(inst, True)
        self.ev("connection_attempt", instance=inst, address=addr, result="connected" if ok else "refused")
        if not ok:
            # PER-2A: suppressed for 60 seconds after each failed connection attempt
            self.suppressed[key] = self.now + 60000
            return False
        self.conns[key] = {"opened": self.now, "last": self.now, "address": addr}
        return True

    def send_over(self, d, m, inst, addr):
        to = self.inst_of_addr(addr)
        key = (inst, addr.lower())
        self.conns[key]["last"] = self.now
        self.ev("message_transmitted", instance=inst, address=addr, to_instance=to, **self.msg_ident(m))
        m["via"] = True
        self.arrive_remote(d, m, to)

    def transport_tick(self):
        # PER-2A: every 2nd notification, connect to destinations with pending messages, not suppressed
        for key, waiting in list(self.conn_wait.items()):
            if not waiting:
                continue
            inst, a = key
            if key not in self.conns:
                if self.suppressed.get(key, -1) > self.now:
                    continue
                if not self.connect(inst, waiting[0][1]["addr"]):
                    continue
            while waiting:
                d, m = waiting.pop(0)
                self.tq_remove(inst, m)
                self.send_over(d, m, inst, m["addr"])

    def arrive_remote(self, d, m, inst):
        self.route(d, m, inst, None, True)

    def deliver_local(self, d, m, inst, db, bi, svc):
        ft = m["from_target"]
        svc = svc or (d["from"] if ft else d["to"])
        target = None
        if bi:
            for (i, dn), dd in self.dbs.items():
                if i == inst and (dd.get("broker_instance") or "").lower() == bi.lower():
                    for sv in dd.get("services") or []:
                        if sv.get("name") == svc:
                            target = (dn, sv)
        else:
            order = ([db] if db else []) + [dn for (i, dn) in self.dbs if i == inst and dn != db]
            for dn in order:
                for sv in self.dbs[(inst, dn)].get("services") or []:
                    if sv.get("name") == svc and target is None:
                        target = (dn, sv)
        if target is None:
            self.done(d, m)
            self.ev("message_dropped", reason="service not found", instance=inst, **self.msg_ident(m))
            return
        dn, sv = target
        if m.pop("via", False):
            # a message that came over the transport reaches the dispatcher (PER-1C)
            self.ev("dispatcher_buffered", instance=inst, database=dn, **self.msg_ident(m))
        if not ft:
            d["t_inst"], d["t_db"], d["t_svc"], d["t_queue"] = inst, dn, sv, sv.get("queue")
            m["group"] = d["t_group"]
            tbi = self.dbs[(inst, dn)].get("broker_instance")
            self.arrive(d, m, inst, dn, sv)
            if not d.get("bound_bi"):
                d["bound_bi"] = tbi
                self.ev("acknowledged", instance=d["inst"], dialog=d["name"], broker_instance=tbi)
        else:
            m["group"] = d["i_group"]
            self.arrive(d, m, inst, dn, sv)

    def cmd_begin_transaction(self, c):
        s = self.session(c["session"])
        if s.in_txn:
            raise Refusal("session already in a transaction")
        s.in_txn = True
        return {}

    def cmd_commit(self, c):
        s = self.session(c["session"])
        if not s.in_txn:
            raise Refusal("COMMIT without a transaction")
        _, qs, _ = self.release(s, False)
        self.ev("transaction_committed", session=s.name)
        for q in qs:
            self.serve_waiters(q)
        return {}

    def cmd_rollback(self, c):
        s = self.session(c["session"])
        if not s.in_txn:
            raise Refusal("ROLLBACK without a transaction")
        returned, qs, had = self.release(s, True)
        self.ev("transaction_rolled_back", session=s.name, returned=returned)
        for q in qs:
            if q.key() in had:
                self.check(q, "rollback")
            self.serve_waiters(q)
        return {}

    def cmd_receive(self, c):
        s = self.session(c["session"])
        q = self.queue_of(c.get("queue"))
        if s.wait is not None:
            raise Refusal("session is waiting")
        rows = self.do_receive(s, q, c.get("top"), c.get("where_dialog"), c.get("where_group"),
                               c.get("waitfor_ms"))
        return {"rows": [self.row(m) for m in rows] if rows else [], "waiting": rows is None}

    def cmd_get_conversation_group(self, c):
        s = self.session(c["session"])
        q = self.queue_of(c.get("queue"))
        if s.wait is not None:
            raise Refusal("session is waiting")
        self.do_receive(s, q, None, None, None, c.get("waitfor_ms"), gcg=True)
        return {}

    def cmd_alter_queue(self, c):
        q = self.queue_of(c.get("queue"))
        if c.get("status") is not None:
            q.status = c["status"]
        if c.get("procedure_name") is not None:
            q.proc = c["procedure_name"]
        if c.get("max_queue_readers") is not None:
            q.max_readers = c["max_queue_readers"]
        self.ev("queue_altered", **self.qf(q))
        self.set_monitor(q)
        self.check(q, "ALTER QUEUE")
        return {}

    def cmd_create_event_notification(self, c):
        q = self.queue_of(c.get("queue"))
        if c["name"] in q.notifications:
            raise Refusal("event notification exists")
        q.notifications.append(c["name"])
        self.set_monitor(q)
        return {}

    def cmd_drop_event_notification(self, c):
        q = self.queue_of(c.get("queue"))
        if c["name"] not in q.notifications:
            raise Refusal("no such event notification")
        q.notifications.remove(c["name"])
        if not q.notifications:
            q.ext_timeout_until = None
            q.ext_timer_seq += 1
        self.set_monitor(q)
        return {}

    def cmd_exit_procedure(self, c):
        q = self.queue_of(c.get("queue"))
        p = q.tasks.get(c.get("task"))
        if p is None:
            raise Refusal("no running task %r" % c.get("task"))
        self.proc_exit(p, "exited")
        return {}

    def cmd_query_view(self, c):
        v = c.get("view")
        inst = c.get("instance")
        rows = []
        if v == "sys.dm_broker_queue_monitors":
            for q in self.queues.values():
                if q.monitor and (inst is None or q.inst == inst):
                    rows.append({"database_id": self.db_id(q), "queue_id": q.qid, "instance": q.inst,
                                 "database": q.db, "queue": q.name, "state": q.state,
                                 "last_empty_rowset_time": q.last_empty,
                                 "last_activated_time": q.last_activated,
                                 "tasks_waiting": self.waiting_count(q)})
        elif v == "sys.dm_broker_activated_tasks":
            for q in self.queues.values():
                if inst is not None and q.inst != inst:
                    continue
                for n in sorted(q.tasks):
                    p = q.tasks[n]
                    rows.append({"spid": p.session.spid, "database_id": self.db_id(q), "queue_id": q.qid,
                                 "instance": q.inst, "database": q.db, "queue": q.name, "task": n,
                                 "procedure_name": p.procedure_name})
        elif v == "sys.routes":
            if c.get("database") is None:
                rows = self.route_rows(inst, None)
            else:
                rows = self.route_rows(inst, c["database"])
        elif v == "sys.transmission_queue":
            for i, lst in self.tq.items():
                if inst is None or i == inst:
                    for (d, m) in lst:
                        rows.append({"instance": i, "dialog": m["dialog"], "message_sequence_number": m["seq"],
                                     "from_target": m["from_target"],
                                     "to_service_name": d["from"] if m["from_target"] else d["to"],
                                     "transmission_status": m.get("status", "delayed"),
                                     "received_ms": m.get("tq_ms", self.now)})
        elif v == "sbtck.forwarder":
            for i, lst in self.fw.items():
                if inst is None or i == inst:
                    for (d, m, t) in lst:
                        rows.append({"instance": i, "dialog": m["dialog"], "message_sequence_number": m["seq"],
                                     "from_target": m["from_target"],
                                     "to_service_name": d["from"] if m["from_target"] else d["to"],
                                     "transmission_status": "delayed", "received_ms": t})
        elif v == "sys.dm_broker_connections":
            for (i, a), cn in self.conns.items():
                if inst is None or i == inst:
                    rows.append({"instance": i, "address": cn["address"], "state": "CONNECTED",
                                 "opened_ms": cn["opened"], "last_activity_ms": cn["last"]})
        elif v == "sys.conversation_endpoints":
            for d in self.dialogs.values():
                rows.append({"dialog": d["name"], "instance": d["inst"], "database": d["db"],
                             "far_service": d["to"], "far_broker_instance": d["tbi"], "acknowledged": bool(d.get("bound_bi"))})
        return {"rows": rows}

    def db_id(self, q):
        keys = list(self.dbs.keys())
        return 5 + keys.index((q.inst, q.db))

    # ---------------------------------------------------------------- dispatch
    def execute(self, c):
        kind = c.get("kind")
        at = c.get("at_ms")
        if kind != "start":
            if at is not None and at >= self.now:
                self.run_until(at)
        fn = getattr(self, "cmd_" + str(kind), None)
        if fn is None:
            raise Refusal("unsupported command %r" % kind)
        r = fn(c)
        self.settle()
        return r


def main():
    b = Broker()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        rid = req.get("id")
        op = req.get("op")
        if op == "hello":
            out = {"id": rid, "ok": True, "result": {"name": "cleanroom2", "version": "0.1", "protocol": "2.1",
                                                     "capabilities": CAPS, "params": PARAMS}}
        elif op == "bye":
            sys.stdout.write(json.dumps({"id": rid, "ok": True}) + "\n")
            sys.stdout.flush()
            return
        elif op == "execute":
            b.events = []
            try:
                res = b.execute(req.get("command") or {})
                out = {"id": rid, "ok": True, "result": res or {}, "events": b.events}
            except Refusal as e:
                b.settle()
                out = {"id": rid, "ok": False, "error": str(e), "events": b.events}
            except Exception as e:
                traceback.print_exc(file=sys.stderr)
                out = {"id": rid, "ok": False, "fault": True, "error": repr(e), "events": b.events}
        else:
            out = {"id": rid, "ok": False, "error": "unknown op %r" % op}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
