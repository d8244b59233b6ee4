#!/usr/bin/env python3
"""A clean-room Service Broker model speaking the sbtck protocol (2.x) over stdio.

Standard library only. Written from the kit's docs and spec/seeds alone.
Set SBTCK_CR1_NO_TRACE=1 to leave out decision_trace.
"""
import heapq
import json
import os
import sys

TRACE = os.environ.get("SBTCK_CR1_NO_TRACE", "") not in ("1", "true", "yes")
PARAMS = {
    "activation_empty_window_s": 5,
    "external_activation_timeout_s": 60,
    "delayed_retry_s": 10,
    "forward_hop_limit": 4,
}
TRACE_KINDS = {"activation_necessary", "activation_withheld", "routes_matched", "route_chosen",
               "timer_notification", "transmitter_reclassified"}
BCN = "http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice"
TIMER_MS = 5000
STALE_MS = 10000
SUPP_DISC_MS = 15000
SUPP_FAIL_MS = 60000
IDLE_MS = 90000
FWD_STALE_MS = 60000


class Fault(Exception):
    pass


class Refuse(Exception):
    pass


class Route:
    def __init__(self, d, now):
        self.name = d["name"]
        self.service_name = d.get("service_name") or None
        self.broker_instance = d.get("broker_instance") or None
        self.address = d.get("address")
        self.mirror_address = d.get("mirror_address") or None
        lt = d.get("lifetime_s")
        self.expires_ms = None if lt is None else int(round(now + float(lt) * 1000))

    def expired(self, now):
        return self.expires_ms is not None and now >= self.expires_ms


class Broker:
    def __init__(self):
        self.events = []
        self.now = 0

    # ------------------------------------------------------------------ utils
    def ev(self, kind, at=None, **f):
        if not TRACE:
            if kind in TRACE_KINDS:
                return
            f.pop("rule", None)
            f.pop("step", None)
        e = {"at_ms": self.now if at is None else at, "kind": kind}
        e.update(f)
        self.events.append(e)

    def sched(self, t, kind, *args):
        self.seq += 1
        heapq.heappush(self.agenda, (t, self.seq, kind, args))

    # ------------------------------------------------------------------ start
    def start(self, c):
        self.now = c["at_ms"]
        self.t0 = self.now
        self.agenda = []
        self.seq = 0
        self.msgseq = 0
        self.spid = 50
        self.instances = {}
        self.addr = {}
        self.dialogs = {}
        self.sessions = {}
        self.conns = {}        # (inst, addr_lower) -> dict
        self.suppress = {}     # (inst, addr_lower) -> until
        self.lose = {}         # (dialog, msn, from_target) -> every
        self.mirror = {}       # (inst, table, route) -> principal address or None
        self.dyn_pending = set()
        self.qid = 1000
        topo = c["topology"]
        for i in topo.get("instances", []):
            inst = {
                "name": i["name"], "address": i["address"], "cpus": i.get("cpus", 1) or 1,
                "forwarding": bool(i.get("message_forwarding")),
                "msdb": [Route(r, self.now) for r in i.get("msdb_routes", [])],
                "dbs": {}, "dborder": [], "reachable": True,
                "tq": [],        # outgoing messages waiting (transmission queue)
                "fwd": [],       # forwarder held messages
                "dispatch": [],  # dispatcher buffered
                "saving": "running", "save_delay": 0,
                "metadata_changed": False,
                "handlers": 2 * (i.get("cpus", 1) or 1),
            }
            inst["running_handlers"] = inst["handlers"]
            self.instances[i["name"]] = inst
            self.addr[i["address"].lower()] = i["name"]
            for n, d in enumerate(i.get("databases", [])):
                db = {
                    "name": d["name"], "inst": i["name"], "bi": d.get("broker_instance"),
                    "id": 5 + n, "master_key": d.get("master_key", True) is not False,
                    "role": d.get("mirroring_role"),
                    "procs": {p["name"]: p for p in d.get("procedures", [])},
                    "queues": {}, "services": {}, "routes": [Route(r, self.now) for r in d.get("routes", [])],
                    "has_dialogs": False, "ack_cleanup": True,
                }
                db["started"] = db["master_key"]
                inst["dbs"][d["name"]] = db
                inst["dborder"].append(d["name"])
                for q in d.get("queues", []):
                    a = q.get("activation") or {}
                    self.qid += 1
                    db["queues"][q["name"]] = {
                        "name": q["name"], "db": d["name"], "inst": i["name"], "id": self.qid,
                        "status": a.get("status", "OFF"), "proc": a.get("procedure_name"),
                        "max": a.get("max_queue_readers") or 0,
                        "msgs": [], "notifs": [], "monitor": False,
                        "last_empty": None, "last_activated": None, "tasks": {}, "taskno": 0,
                        "ext_until": None, "ext_gen": 0,
                    }
                for s in d.get("services", []):
                    db["services"][s["name"]] = s["queue"]
                for en in d.get("event_notifications", []):
                    q = db["queues"].get(en["queue"])
                    if q is not None:
                        q["notifs"].append(en["name"])
        self.ev("broker_started")
        for inst in self.instances.values():
            self.ev("task_handlers_started", instance=inst["name"], count=inst["handlers"])
            for db in self.dbs(inst):
                if not db["master_key"]:
                    self.ev("database_broker_start_failed", instance=inst["name"], database=db["name"],
                            reason="missing master key")
                for q in db["queues"].values():
                    self.update_monitor(q)
        self.sched(self.now + TIMER_MS, "timer", 1)
        return {}

    def dbs(self, inst):
        return [inst["dbs"][n] for n in inst["dborder"]]

    def queue(self, qref):
        try:
            return self.instances[qref["instance"]]["dbs"][qref["database"]]["queues"][qref["queue"]]
        except (KeyError, TypeError):
            raise Refuse("no queue %r" % (qref,))

    # ---------------------------------------------------------------- agenda
    def run_until(self, t):
        while self.agenda and self.agenda[0][0] <= t:
            at, _, kind, args = heapq.heappop(self.agenda)
            self.now = max(self.now, at)
            # third round: the queue monitors look once the instant has settled, after
            # every item due at this instant has run (implementing.md 6: "when a queue
            # monitor looks after a trigger, once the instant has settled or at the
            # trigger itself"); each trigger is still its own check
            getattr(self, "due_" + kind)(*args)
            if not (self.agenda and self.agenda[0][0] == at):
                self.flush_checks()
        self.now = max(self.now, t)

    # ============================================================ activation
    def has_monitor(self, q):
        return q["status"] == "ON" or bool(q["notifs"])

    def update_monitor(self, q):
        m = self.has_monitor(q)
        if m and not q["monitor"]:
            q["monitor"] = True
            self.ev("monitor_created", instance=q["inst"], database=q["db"], queue=q["name"])
        elif not m and q["monitor"]:
            q["monitor"] = False
            q["ext_until"] = None
            q["ext_gen"] += 1
            self.ev("monitor_removed", instance=q["inst"], database=q["db"], queue=q["name"])

    def trigger(self, q, trig, **kw):
        # second round: every statement is its own event (implementing.md forbids
        # "one activation check for several statements that fall on one instant"),
        # so two RECEIVEs of one instant make two checks.
        self.pending_checks.append((q, trig, kw))

    def flush_checks(self):
        while self.pending_checks:
            q, trig, kw = self.pending_checks.pop(0)
            self.check(q, trig, **kw)

    def waiting_sessions(self, q):
        out = []
        for s in self.sessions.values():
            w = s.get("wait")
            if w and w["q"] is q and not w["has_where"]:
                out.append(s)
        return out

    def check(self, q, trig, was_empty=False):
        if not q["monitor"]:
            return
        running = len(q["tasks"])
        rule = None
        if trig == "message arrived" and was_empty and running == 0:
            rule = "ACT-06"
        elif q["msgs"] and not self.waiting_sessions(q):
            win = int(round(float(PARAMS["activation_empty_window_s"]) * 1000))
            if q["last_empty"] is None or self.now - q["last_empty"] >= win:
                rule = "ACT-07"
        if rule is None:
            return
        base = dict(instance=q["inst"], database=q["db"], queue=q["name"])
        self.ev("activation_necessary", rule=rule, trigger=trig, **base)
        started = None
        if q["status"] == "ON" and q["proc"]:
            if running < (q["max"] or 0):
                started = self.start_proc(q)
            else:
                self.ev("activation_withheld", reason="MAX_QUEUE_READERS", **base)
        if q["notifs"]:
            if q["ext_until"] is not None:
                self.ev("activation_withheld", reason="notification time-out", **base)
            else:
                for n in q["notifs"]:
                    self.ev("event_notification", event_type="QUEUE_ACTIVATION", notification=n, **base)
                q["last_activated"] = self.now
                q["ext_gen"] += 1
                t = int(round(float(PARAMS["external_activation_timeout_s"]) * 1000))
                q["ext_until"] = self.now + t
                self.sched(self.now + t, "ext_timeout", q, q["ext_gen"])
        if started is not None and started["proc"].get("receives"):
            self.proc_receive(q, started)
            # second round: the procedure's first RECEIVE is a RECEIVE on the
            # queue like any other (ACT-05: "a RECEIVE executes for the queue")
            self.trigger(q, "RECEIVE")

    def due_ext_timeout(self, q, gen):
        if q["ext_gen"] != gen:
            return
        q["ext_until"] = None
        self.ev("activation_time_out", instance=q["inst"], database=q["db"], queue=q["name"])
        self.trigger(q, "external activation time-out")

    def end_ext_timeout(self, q):
        if q["ext_until"] is not None:
            q["ext_until"] = None
            q["ext_gen"] += 1

    def start_proc(self, q):
        q["taskno"] += 1
        n = q["taskno"]
        sess = "%s#%d" % (q["name"], n)
        self.session(sess)
        db = self.instances[q["inst"]]["dbs"][q["db"]]
        proc = db["procs"].get(q["proc"], {"name": q["proc"], "receives": False})
        task = {"n": n, "spid": self.sessions[sess]["spid"], "session": sess, "proc": proc, "pname": q["proc"], "gen": 0}
        q["tasks"][n] = task
        q["last_activated"] = self.now
        self.ev("procedure_started", instance=q["inst"], database=q["db"], queue=q["name"],
                procedure_name=q["proc"], spid=self.spid, task=n)
        s = self.session(sess)
        s["task"] = (q, n)
        return task

    def proc_receive(self, q, task):
        s = self.session(task["session"])
        s["tx"] = True
        s["tx_recv"] = False
        s["recv_qs"] = []
        proc = task["proc"]
        out = self.do_receive(s, q, proc.get("receive_top"), None, None, proc.get("waitfor_ms"), trig=False)
        if out == "rows":
            self.proc_after_rows(q, task)
        elif out == "empty":
            self.commit(s)
            self.proc_exit(q, task["n"], "empty RECEIVE")

    def proc_after_rows(self, q, task):
        """the procedure got rows: work, then commit and RECEIVE again"""
        work = int(task["proc"].get("work_ms") or 0)
        task["gen"] += 1
        if work > 0:
            self.sched(self.now + work, "work_done", q, task["n"], task["gen"])
        else:
            self.work_done(q, task)

    def due_work_done(self, q, n, gen):
        task = q["tasks"].get(n)
        if task is None or task["gen"] != gen:
            return
        self.work_done(q, task)

    def work_done(self, q, task):
        s = self.session(task["session"])
        self.commit(s)
        if q["tasks"].get(task["n"]) is task:
            self.proc_receive(q, task)
            self.trigger(q, "RECEIVE")

    def proc_exit(self, q, n, reason):
        task = q["tasks"].get(n)
        if task is None:
            raise Refuse("no activated task %d on %s" % (n, q["name"]))
        s = self.session(task["session"])
        s["wait"] = None
        del q["tasks"][n]
        task["gen"] += 1
        self.ev("procedure_exited", instance=q["inst"], database=q["db"], queue=q["name"],
                reason=reason, spid=task["spid"], task=n)
        if s.get("tx"):
            self.rollback(s)
        if not q["tasks"]:
            self.trigger(q, "all procedures exited")

    # --------------------------------------------------------------- sessions
    def session(self, name):
        s = self.sessions.get(name)
        if s is None:
            self.spid += 1
            s = {"name": name, "tx": False, "tx_recv": False, "held": [], "locks": set(), "wait": None,
                 "task": None, "spid": self.spid}
            self.sessions[name] = s
        return s

    def group_of(self, m):
        return m["group"]

    def locked_by_other(self, q, group, s):
        for o in self.sessions.values():
            if o is not s and (q["inst"], q["db"], q["name"], group) in o["locks"]:
                return True
        return False

    def pick(self, s, q, where_dialog, where_group, gcg=False):
        for m in q["msgs"]:
            if where_dialog is not None and m["dialog"] != where_dialog:
                continue
            if where_group is not None and m["group"] != self.dialog_group(where_group, m):
                continue
            if self.locked_by_other(q, m["group"], s):
                continue
            return m["group"]
        return None

    def dialog_group(self, dname, m):
        d = self.dialogs.get(dname)
        if d is None:
            return None
        return d["tgroup"] if not m["from_target"] else d["igroup"]

    def base_q(self, q, s, stmt, has_where):
        return dict(instance=q["inst"], database=q["db"], queue=q["name"], session=s["name"],
                    statement=stmt, has_where=has_where)

    def do_receive(self, s, q, top, where_dialog, where_group, waitfor, trig=True, gcg=False):
        has_where = (where_dialog is not None or where_group is not None)
        stmt = "GET CONVERSATION GROUP" if gcg else "RECEIVE"
        if not gcg:
            self.end_ext_timeout(q)
            if s["tx"]:
                # third round: a transaction "that contains a RECEIVE statement" (ACT-05),
                # whatever the RECEIVE returned, checks its queue when it rolls back
                s["tx_recv"] = True
                s.setdefault("recv_qs", [])
                if q not in s["recv_qs"]:
                    s["recv_qs"].append(q)
        g = self.pick(s, q, where_dialog, where_group)
        out = "rows"
        if g is not None:
            self.take(s, q, g, top, where_dialog, gcg, has_where)
        elif waitfor:
            out = "wait"
            s["wait"] = {"q": q, "top": top, "wd": where_dialog, "wg": where_group, "has_where": has_where,
                         "gcg": gcg, "gen": self.seq + 1}
            self.ev("reader_waiting", **self.base_q(q, s, stmt, has_where))
            self.sched(self.now + int(waitfor), "wait_timeout", s["name"], s["wait"]["gen"])
        else:
            out = "empty"
            self.empty(s, q, stmt, has_where)
        if trig and not gcg:
            self.trigger(q, "RECEIVE")
        return out

    def empty(self, s, q, stmt, has_where):
        if not has_where:
            q["last_empty"] = self.now
        self.ev("empty_result", conversation_group=None, rows=[], **self.base_q(q, s, stmt, has_where))

    def take(self, s, q, g, top, where_dialog, gcg, has_where):
        stmt = "GET CONVERSATION GROUP" if gcg else "RECEIVE"
        key = (q["inst"], q["db"], q["name"], g)
        if gcg:
            if s["tx"]:
                s["locks"].add(key)
            self.ev("rows_returned", conversation_group=g, rows=[], **self.base_q(q, s, stmt, has_where))
            return
        rows = []
        taken = []
        for m in list(q["msgs"]):
            if m["group"] != g:
                continue
            if where_dialog is not None and m["dialog"] != where_dialog:
                continue
            if top is not None and len(taken) >= top:
                break
            taken.append(m)
        for m in taken:
            q["msgs"].remove(m)
            rows.append({"dialog": m["dialog"], "message_sequence_number": m["msn"],
                         "from_target": m["from_target"], "conversation_group": g,
                         "message_type": m.get("message_type"), "body": m.get("body")})
        if s["tx"]:
            s["locks"].add(key)
            s["held"].extend((q, m) for m in taken)
            s["tx_recv"] = True
        self.ev("rows_returned", conversation_group=g, rows=rows,
                **self.base_q(q, s, stmt, has_where))

    def due_wait_timeout(self, sname, gen):
        s = self.sessions.get(sname)
        if not s or not s["wait"] or s["wait"]["gen"] != gen:
            return
        w = s["wait"]
        s["wait"] = None
        q = w["q"]
        self.empty(s, q, "GET CONVERSATION GROUP" if w["gcg"] else "RECEIVE", w["has_where"])
        if s.get("task"):
            tq, n = s["task"]
            if tq["tasks"].get(n) is not None:
                if s.get("tx"):
                    self.commit(s)
                self.proc_exit(tq, n, "empty RECEIVE")
                return
        if not w["gcg"]:
            self.trigger(q, "RECEIVE")

    def serve_waiters(self, q):
        """hand messages to sessions waiting on q, in the order they began waiting"""
        progress = True
        while progress:
            progress = False
            ws = [s for s in self.sessions.values() if s["wait"] and s["wait"]["q"] is q]
            ws.sort(key=lambda s: s["wait"]["gen"])
            for s in ws:
                w = s["wait"]
                g = self.pick(s, q, w["wd"], w["wg"])
                if g is None:
                    continue
                self.take(s, q, g, w["top"], w["wd"], w["gcg"], w["has_where"])
                s["wait"] = None
                progress = True
                if s.get("task"):
                    tq, n = s["task"]
                    task = tq["tasks"].get(n)
                    if task is not None and not w["gcg"]:
                        self.proc_after_rows(tq, task)
                if not w["gcg"]:
                    self.trigger(q, "RECEIVE")
                break

    def release(self, s):
        qs = set()
        for key in s["locks"]:
            qs.add(key[:3])
        s["locks"] = set()
        for k in qs:
            try:
                q = self.instances[k[0]]["dbs"][k[1]]["queues"][k[2]]
            except KeyError:
                continue
            self.serve_waiters(q)

    def commit(self, s):
        if not s["tx"]:
            raise Refuse("COMMIT without a transaction")
        s["tx"] = False
        s["held"] = []
        s["tx_recv"] = False
        s["recv_qs"] = []
        self.ev("transaction_committed", session=s["name"])
        self.release(s)

    def rollback(self, s):
        if not s["tx"]:
            raise Refuse("ROLLBACK without a transaction")
        s["tx"] = False
        held = s["held"]
        s["held"] = []
        had = s["tx_recv"]
        s["tx_recv"] = False
        rqs = s.get("recv_qs") or []
        s["recv_qs"] = []
        qs = []
        for q, m in held:
            q["msgs"].append(m)
            q["msgs"].sort(key=lambda x: x["seq"])
            if q not in qs:
                qs.append(q)
        self.ev("transaction_rolled_back", session=s["name"], returned=len(held))
        self.release(s)
        if had:
            for q in rqs + [q for q in qs if q not in rqs]:
                self.trigger(q, "rollback")
        for q in qs:
            self.serve_waiters(q)

    # ====================================================== message arrival
    def enqueue(self, inst, db, m):
        svc = m["service"]
        qname = db["services"].get(svc)
        if qname is None:
            self.ev("message_dropped", instance=inst["name"], dialog=m["dialog"], from_target=m["from_target"],
                    message_sequence_number=m["msn"], reason="no such service in the database", rule="RTL-3")
            return
        q = db["queues"][qname]
        d = self.dialogs[m["dialog"]]
        # second round: every message saved to its queue, by the dispatcher or
        # delivered in the instance, moves the dialog's next expected number
        # (PER-1C: out of order is judged against what the dialog has received)
        sk = "saved_t" if m["from_target"] else "saved_i"
        d[sk] = max(d[sk], m["msn"] + 1)
        if m["from_target"]:
            group = d["igroup"]
        else:
            group = d["tgroup"]
            if d.get("tinst") is None:
                d["tinst"], d["tdb"] = inst["name"], db["name"]
            db["has_dialogs"] = True
        self.msgseq += 1
        was_empty = not q["msgs"]
        qm = {"dialog": m["dialog"], "msn": m["msn"], "from_target": m["from_target"], "group": group,
              "seq": self.msgseq, "message_type": m.get("message_type"), "body": m.get("body")}
        q["msgs"].append(qm)
        self.ev("message_arrived", instance=inst["name"], database=db["name"], queue=qname, dialog=m["dialog"],
                message_sequence_number=m["msn"], from_target=m["from_target"], conversation_group=group,
                service=svc)
        # acknowledgement back to the initiator
        if not m["from_target"]:
            if not d.get("acked"):
                d["acked"] = True
                d["far_bi"] = db["bi"]
                d["pin_bi"] = db["bi"]
                self.ev("acknowledged", instance=d["inst"], dialog=m["dialog"], broker_instance=db["bi"],
                        at=self.now)
        # third round: the arrival's check looks once the instant has settled, like
        # every other (the second round's "sees the waiter" reading is dropped)
        self.serve_waiters(q)
        self.trigger(q, "message arrived", was_empty=was_empty)

    # =============================================================== routing
    def tname(self, db):
        return "msdb.sys.routes" if db is None else "%s.sys.routes" % db["name"]

    def table(self, inst, db):
        return inst["msdb"] if db is None else db["routes"]

    def online(self, db):
        # a database whose broker has not started, or that is a mirroring partner's
        # mirror copy (second round: "the mirror" is not the principal, RTR-4), holds
        # no service the router can see
        return db["started"] and db.get("role") != "mirror"

    def holds_service(self, inst, svc):
        return any(svc in db["services"] and self.online(db) for db in self.dbs(inst))

    def mfields(self, m):
        return dict(dialog=m["dialog"], from_target=m["from_target"], message_sequence_number=m["msn"])

    def match(self, inst, db, m):
        """returns ('routes', step, [routes], picked_bi) or ('delayed', step)"""
        routes = [r for r in self.table(inst, db) if not r.expired(self.now)]
        svc, bi = m["service"], m.get("bi")
        tn = self.tname(db)
        def found(step, rs, pbi=None):
            self.ev("routes_matched", instance=inst["name"], table=tn, step=step,
                    routes=[r.name for r in rs], broker_instance=pbi, **self.mfields(m))
            return ("routes", step, rs)
        if bi:
            rs = [r for r in routes if r.service_name == svc and r.broker_instance and
                  r.broker_instance.lower() == bi.lower()]
            if rs:
                return found("RTM-1", rs)
        rs = [r for r in routes if r.service_name == svc and not r.broker_instance]
        if rs:
            return found("RTM-2", rs)
        if not bi:
            rs = [r for r in routes if r.service_name == svc and r.broker_instance]
            if rs:
                pbi = rs[0].broker_instance
                rs = [r for r in rs if r.broker_instance.lower() == pbi.lower()]
                return found("RTM-3", rs, pbi)
        dyn = [r for r in routes if r.service_name == BCN]
        for r in dyn:
            key = (inst["name"], tn, r.name, svc)
            if key not in self.dyn_pending:
                self.dyn_pending.add(key)
                self.ev("routes_matched", instance=inst["name"], table=tn, step="RTM-4", routes=[],
                        broker_instance=None, **self.mfields(m))
                self.ev("routing_requested", instance=inst["name"], route=r.name, service=svc, table=tn,
                        **self.mfields(m))
                return ("delayed", "RTM-4")
        rs = [r for r in routes if not r.service_name and not r.broker_instance]
        if rs:
            return found("RTM-5", rs)
        if bi and self.holds_service(inst, svc):
            # second round: implementing.md 5 "at RTM-6 the one name `(as if LOCAL)`"
            fake = Route({"name": "(as if LOCAL)", "service_name": svc, "address": "LOCAL"}, self.now)
            self.ev("routes_matched", instance=inst["name"], table=tn, step="RTM-6", routes=["(as if LOCAL)"],
                    broker_instance=None, **self.mfields(m))
            return ("routes", "RTM-6", [fake])
        self.ev("routes_matched", instance=inst["name"], table=tn, step="RTM-7", routes=[],
                broker_instance=None, **self.mfields(m))
        return ("delayed", "RTM-7")

    def choose(self, inst, m, rs, step_m):
        uniq = []
        seen = set()
        for r in rs:
            k = ((r.broker_instance or "").lower(), r.service_name, (r.address or "").lower())
            if k in seen:
                continue
            seen.add(k)
            uniq.append(r)
        groups = [
            ("RTC-1", [r for r in uniq if r.mirror_address]),
            ("RTC-2", [r for r in uniq if not r.mirror_address and (r.address or "").upper() == "LOCAL"]
             if self.holds_service(inst, m["service"]) else []),
            ("RTC-3", [r for r in uniq if not r.mirror_address and (r.address or "").upper().startswith("TCP://")]),
            ("RTC-4", [r for r in uniq if not r.mirror_address and (r.address or "").upper() == "TRANSPORT"]),
        ]
        for step, cand in groups:
            if cand:
                r = cand[0]
                self.ev("route_chosen", instance=inst["name"], step=step, candidates=[c.name for c in cand],
                        route=r.name, **self.mfields(m))
                return step, r
        return None, None

    def route(self, inst, db, m, outside):
        """route message m at instance inst; db is the originating database (None: from outside)."""
        if outside and m["from_target"]:
            for tdb in self.dbs(inst):
                if tdb["bi"] and m.get("bi") and tdb["bi"].lower() == m["bi"].lower():
                    self.ev("reply_recognised", instance=inst["name"], broker_instance=m["bi"], **self.mfields(m))
                    self.deliver_local(inst, tdb, m, outside)
                    return "done"
        res = self.match(inst, None if outside else db, m)
        if res[0] == "delayed":
            return ("delayed", res[1])
        step, r = self.choose(inst, m, res[2], res[1])
        if r is None:
            return ("delayed", "RTC-4")
        addr = (r.address or "")
        if addr.upper() == "LOCAL":
            bi = m.get("bi") or r.broker_instance
            if bi:
                tdb = None
                for x in self.dbs(inst):
                    if x["bi"] and x["bi"].lower() == bi.lower():
                        tdb = x
                        break
                if tdb is None:
                    self.drop(inst, m, "no service %s in the database of broker instance %s" % (m["service"], bi),
                              "RTL-2")
                    return "done"
                if m["service"] not in tdb["services"]:
                    self.drop(inst, m, "no service %s in the database of broker instance %s" % (m["service"], bi),
                              "RTL-2")
                    return "done"
            else:
                cands = []
                if db is not None and m["service"] in db["services"] and not outside:
                    cands.append(db)
                cands += [x for x in self.dbs(inst) if m["service"] in x["services"] and x not in cands
                          and self.online(x)]
                if not cands:
                    self.drop(inst, m, "no such service", "RTL-3")
                    return "done"
                tdb = cands[0]
            self.deliver_local(inst, tdb, m, outside)
            return "done"
        if r.mirror_address:
            dest = ("mirror", r)
        elif addr.upper() == "TRANSPORT":
            svc = m["service"]
            if svc.upper().startswith("TCP://") and "/" in svc[6:]:
                dest = svc[:6 + svc[6:].index("/")]
            else:
                dest = ""
        else:
            dest = addr
        if isinstance(dest, str) and dest.lower() == inst["address"].lower() and not outside:
            # RTX-2: treated as arriving from outside (a delay then holds it in the forwarder)
            self.arrive(inst, m)
            return "done"
        if outside:
            if not inst["forwarding"]:
                self.drop(inst, m, "message forwarding is not active", "RTC-5")
                return "done"
            m["hops"] = m.get("hops", 0) + 1
            if m["hops"] > int(PARAMS["forward_hop_limit"]):
                self.drop(inst, m, "forwarded too many times", "RTX-1")
                return "done"
        return ("remote", dest, r, outside)

    def drop(self, inst, m, reason, rule):
        self.ev("message_dropped", instance=inst["name"], reason=reason, rule=rule, **self.mfields(m))

    def deliver_local(self, inst, db, m, outside):
        if not self.online(db):
            self.drop(inst, m, "no service %s in the database of broker instance %s" % (m["service"], db["bi"]),
                      "RTL-2")
            return
        if outside:
            self.dispatch(inst, db, m)
        else:
            self.enqueue(inst, db, m)

    # ------------------------------------------------------------ dispatcher
    def dispatch(self, inst, db, m):
        self.msgseq += 1
        b = {"m": m, "db": db, "arrived": self.now, "seq": self.msgseq}
        for x in inst["dispatch"]:
            xm = x["m"]
            if xm["dialog"] == m["dialog"] and xm["msn"] == m["msn"] and xm["from_target"] == m["from_target"]:
                return
        inst["dispatch"].append(b)
        self.ev("dispatcher_buffered", instance=inst["name"], database=db["name"], **self.mfields(m))
        if inst["saving"] == "running":
            if inst["save_delay"] > 0:
                self.sched(self.now + inst["save_delay"], "save", inst["name"], self.msgseq)
            else:
                self.save_ready(inst)

    def expected(self, m):
        d = self.dialogs[m["dialog"]]
        return d["saved_t" if m["from_target"] else "saved_i"]

    def save_ready(self, inst, only=None):
        progress = True
        while progress:
            progress = False
            for b in sorted(inst["dispatch"], key=lambda b: b["seq"]):
                if only is not None and b["seq"] not in only:
                    continue
                m = b["m"]
                if m["msn"] != self.expected(m):
                    continue
                inst["dispatch"].remove(b)
                self.enqueue(inst, b["db"], m)
                progress = True
                # the next of the same dialog that is ready too
                if only is not None:
                    nxt = [x for x in inst["dispatch"] if x["m"]["dialog"] == m["dialog"]
                           and x["m"]["from_target"] == m["from_target"] and
                           (inst["save_delay"] == 0 or self.now - x["arrived"] >= inst["save_delay"])]
                    only |= {x["seq"] for x in nxt}
                break

    def due_save(self, iname, seq):
        inst = self.instances[iname]
        if inst["saving"] != "running":
            return
        self.save_ready(inst, only={seq})

    def dispatcher_sweep(self, inst):
        # second round: out-of-order messages are judged against the buffer as the
        # sweep finds it, before the stale ones go; implementing.md 6 forbids
        # "deleting as out of order a message that arrived in order behind one still
        # buffered", which the stale-first order did in one sweep
        self.dispatcher_sweep_order(inst)
        for b in list(inst["dispatch"]):
            m = b["m"]
            if self.now - b["arrived"] >= STALE_MS:
                inst["dispatch"].remove(b)
                self.ev("dispatcher_deleted", instance=inst["name"], database=b["db"]["name"], reason="stale",
                        **self.mfields(m))

    def dispatcher_sweep_order(self, inst):
        # out of order: not in the chain that starts at the next expected number
        for b in list(inst["dispatch"]):
            m = b["m"]
            exp = self.expected(m)
            have = {x["m"]["msn"] for x in inst["dispatch"] if x["m"]["dialog"] == m["dialog"]
                    and x["m"]["from_target"] == m["from_target"]}
            k = exp
            while k in have:
                k += 1
            if m["msn"] >= k or m["msn"] < exp:
                inst["dispatch"].remove(b)
                self.ev("dispatcher_deleted", instance=inst["name"], database=b["db"]["name"],
                        reason="out of order", **self.mfields(m))

    # ------------------------------------------------------------- transport
    def suppressed(self, iname, addr):
        u = self.suppress.get((iname, addr.lower()))
        return u is not None and self.now < u

    def target_of(self, addr):
        n = self.addr.get(addr.lower())
        return self.instances.get(n) if n else None

    def ensure_conn(self, inst, addr):
        key = (inst["name"], addr.lower())
        if key in self.conns:
            return True
        if self.suppressed(inst["name"], addr):
            return False
        t = self.target_of(addr)
        if t is None or not t["reachable"]:
            self.ev("connection_attempt", instance=inst["name"], address=addr, result="refused")
            self.suppress[key] = self.now + SUPP_FAIL_MS
            return False
        self.ev("connection_attempt", instance=inst["name"], address=addr, result="connected")
        self.conns[key] = {"instance": inst["name"], "address": addr, "opened": self.now, "last": self.now}
        return True

    def close_conn(self, key, reason):
        c = self.conns.pop(key, None)
        if c is None:
            return
        self.ev("connection_closed", instance=c["instance"], address=c["address"], reason=reason)
        if reason == "disconnected":
            self.suppress[key] = self.now + SUPP_DISC_MS

    def send_remote(self, inst, m, dest, r, table_key, forwarded):
        """m has been routed at inst to dest (an address, or ('mirror', route))."""
        entry = {"m": m, "dest": dest, "route": r.name if r else None, "table": table_key,
                 "received": m.get("fwd_received", self.now) if forwarded else m["received"],
                 "pending_reported": False, "forwarded": forwarded}
        if forwarded:
            inst["fwd"].append(entry)
        else:
            inst["tq"].append(entry)
        self.try_transmit(inst, entry)

    def mirror_answer(self, addr, m):
        t = self.target_of(addr)
        if t is None or not t["reachable"]:
            return "unreachable"
        for db in self.dbs(t):
            if m["service"] in db["services"]:
                if m.get("bi") and (not db["bi"] or db["bi"].lower() != m["bi"].lower()):
                    continue
                if db["role"] == "principal":
                    return "principal"
        return "not principal"

    def resolve_mirror(self, inst, entry):
        m = entry["m"]
        _, r = entry["dest"]
        key = (inst["name"], entry["table"], r.name)
        p = self.mirror.get(key)
        pf = dict(instance=inst["name"], route=r.name, **self.mfields(m))
        if p is not None:
            ans = self.mirror_answer(p, m)
            if ans == "principal":
                return p
            self.ev("principal_lost", address=p, answer=ans, **pf)
            other = r.mirror_address if p.lower() == r.address.lower() else r.address
            a2 = self.mirror_answer(other, m)
            self.ev("principal_probe", address=other, answer=a2, **pf)
            # second round: RTR-5 "both addresses are retried until the principal
            # answers or the partner says it is now the principal": the lost one stays
            # the principal the route knows until the partner claims the role
            if a2 == "principal":
                self.mirror[key] = other
                return other
            return None
        found = None
        for a in (r.address, r.mirror_address):
            ans = self.mirror_answer(a, m)
            self.ev("principal_probe", address=a, answer=ans, **pf)
            if ans == "principal" and found is None:
                found = a
        self.mirror[key] = found
        return found

    def try_transmit(self, inst, entry):
        m = entry["m"]
        d = self.dialogs.get(m["dialog"])
        lst = inst["fwd"] if entry["forwarded"] else inst["tq"]
        # order per dialog direction: an earlier one still waiting holds this one
        for e in lst:
            if e is entry:
                break
            if e["m"]["dialog"] == m["dialog"] and e["m"]["from_target"] == m["from_target"]:
                self.pending(inst, entry, "behind an earlier message of the conversation")
                return False
        if d and d.get("failed") and not entry["forwarded"]:
            self.pending(inst, entry, "failed to %s" % (entry["dest"] if isinstance(entry["dest"], str)
                                                         else entry["dest"][1].address))
            return False
        dest = entry["dest"]
        if isinstance(dest, tuple):
            addr = self.resolve_mirror(inst, entry)
            if addr is None:
                self.pending(inst, entry, "no partner claims to be principal")
                return False
        else:
            addr = dest
        if not addr:
            # TRANSPORT with a service name that is no address: the reference tries "NONE" when notified
            if getattr(self, "in_tick", False):
                self.ensure_conn(inst, "NONE")
            self.pending(inst, entry, "waiting for a connection")
            return False
        if not self.ensure_conn(inst, addr):
            self.pending(inst, entry, "waiting for a connection to %s" % addr)
            return False
        lst.remove(entry)
        conn = self.conns[(inst["name"], addr.lower())]
        conn["last"] = self.now
        t = self.target_of(addr)
        if entry["forwarded"]:
            self.ev("message_forwarded", instance=inst["name"], address=addr, hops=m.get("hops", 1),
                    **self.mfields(m))
        self.ev("message_transmitted", instance=inst["name"], address=addr, to_instance=t["name"],
                **self.mfields(m))
        lk = (m["dialog"], m["msn"], m["from_target"])
        if lk in self.lose:
            every = self.lose[lk]
            if not every:
                del self.lose[lk]
            self.ev("message_lost_in_transit", instance=inst["name"], address=addr, **self.mfields(m))
        else:
            self.arrive(t, dict(m))
        # the messages behind it
        for e in list(lst):
            if e["m"]["dialog"] == m["dialog"] and e["m"]["from_target"] == m["from_target"]:
                self.try_transmit(inst, e)
                break
        else:
            if not entry["forwarded"]:
                self.release_behind(inst, m["dialog"], m["from_target"])
            else:
                self.release_origin(m["dialog"], m["from_target"])
        return True

    def delayed_elsewhere(self, dialog, ft):
        """the conversation is delayed at a forwarder or at the instance it reached (it is the
        conversation that is delayed, not the message)"""
        for i in self.instances.values():
            for e in i["fwd"]:
                if e["m"]["dialog"] == dialog and e["m"]["from_target"] == ft:
                    return True
        return False

    def release_origin(self, dialog, ft):
        d = self.dialogs.get(dialog)
        if d is None:
            return
        iname = d["tinst"] if ft else d["inst"]
        if iname and not self.delayed_elsewhere(dialog, ft):
            self.release_behind(self.instances[iname], dialog, ft)

    def release_behind(self, inst, dialog, ft):
        beh = inst.setdefault("behind", {})
        key = (dialog, ft)
        while beh.get(key):
            if self.delayed_elsewhere(dialog, ft):
                return
            if any(e["m"]["dialog"] == dialog and e["m"]["from_target"] == ft for e in inst["tq"]):
                return
            if key in self.delayed_q(inst):
                self.delayed_q(inst)[key].extend(beh.pop(key))
                return
            m = beh[key].pop(0)
            if not beh[key]:
                del beh[key]
            db = inst["dbs"][m["_db"]]
            self.ev("routing_retried", instance=inst["name"], **self.mfields(m))
            self.refresh_bi(m)
            res = self.route(inst, db, m, False)
            self.after_route(inst, db, m, res, False)

    def pending(self, inst, entry, status):
        entry["status"] = status
        if entry["m"].get("_pstatus") != status:
            entry["m"]["_pstatus"] = status
            self.ev("transmission_pending", instance=inst["name"], status=status, **self.mfields(entry["m"]))

    def arrive(self, t, m):
        """message m arrives over the network at instance t"""
        m["fwd_received"] = self.now
        res = self.route(t, None, m, True)
        self.after_route(t, None, m, res, True)

    def after_route(self, inst, db, m, res, outside):
        if res == "done":
            return
        if res[0] in ("delayed", "delayed_noev"):
            if res[0] == "delayed":
                self.ev("conversation_delayed", instance=inst["name"], step=res[1], **self.mfields(m))
            self.pend_m(inst, m, "delayed", True)
            if outside:
                entry = {"m": m, "dest": None, "route": None, "table": "msdb.sys.routes",
                         "received": m["fwd_received"], "pending_reported": False, "forwarded": True,
                         "status": "delayed", "delayed": True}
                inst["fwd"].append(entry)
            else:
                key = (m["dialog"], m["from_target"])
                self.delayed_q(inst)[key] = [m]
                m["_db"] = db["name"]
            self.sched_retry(inst, m, outside)
            return
        _, dest, r, fwd = res
        if fwd and not outside:
            m["fwd_received"] = self.now
        self.send_remote(inst, m, dest, r, "msdb.sys.routes" if fwd else self.tname(db), fwd)

    def view_status(self, st):
        st = st or ""
        if st.startswith("failed to "):
            return "failed"
        if st.startswith("waiting for a connection"):
            return "waiting for a connection"
        return st

    def pend_m(self, inst, m, status, always=False):
        if always or m.get("_pstatus") != status:
            m["_pstatus"] = status
            self.ev("transmission_pending", instance=inst["name"], status=status, **self.mfields(m))

    def delayed_q(self, inst):
        return inst.setdefault("delayed", {})

    def bump_mseq(self):
        self.mseq_counter = getattr(self, "mseq_counter", 0) + 1
        return self.mseq_counter

    def sched_retry(self, inst, m, outside):
        m["_dseq"] = self.bump_mseq()
        self.rgen = getattr(self, "rgen", 0) + 1
        m["_rgen"] = self.rgen
        self.sched(self.now + int(round(float(PARAMS["delayed_retry_s"]) * 1000)), "retry", inst["name"],
                   m["dialog"], m["from_target"], m["msn"], outside, self.rgen)

    def due_retry(self, iname, dialog, from_target, msn, outside, gen=None):
        inst = self.instances[iname]
        if outside:
            ent = None
            for e in inst["fwd"]:
                if e.get("delayed") and e["m"]["dialog"] == dialog and e["m"]["msn"] == msn \
                        and e["m"]["from_target"] == from_target:
                    ent = e
            if ent is None:
                return
            inst["fwd"].remove(ent)
            m = ent["m"]
            m["hops"] = m.get("hops", 0)
            self.ev("routing_retried", instance=iname, **self.mfields(m))
            res = self.route(inst, None, m, True)
            self.after_route(inst, None, m, res, True)
            self.release_origin(dialog, from_target)
            return
        dq = self.delayed_q(inst)
        key = (dialog, from_target)
        msgs = dq.get(key)
        if not msgs or msgs[0]["msn"] != msn:
            return
        if gen is not None and msgs[0].get("_rgen") != gen:
            return
        del dq[key]
        head = msgs[0]
        db = inst["dbs"][head["_db"]]
        for i, m in enumerate(msgs):
            if i > 0 and self.delayed_elsewhere(dialog, from_target):
                beh = inst.setdefault("behind", {})
                beh[key] = msgs[i:] + beh.get(key, [])
                return
            if i > 0 and any(x["m"]["dialog"] == dialog and x["m"]["from_target"] == from_target
                             for x in inst["tq"]):
                # third round: the head waits here (for its connection, or failed), so
                # the later messages wait behind it, unrouted, as at a SEND
                beh = inst.setdefault("behind", {})
                beh[key] = msgs[i:] + beh.get(key, [])
                for r in msgs[i:]:
                    self.pend_m(inst, r, "behind an earlier message of the conversation")
                return
            self.ev("routing_retried", instance=iname, **self.mfields(m))
            self.refresh_bi(m)
            res = self.route(inst, db, m, False)
            if res != "done" and res[0] in ("delayed", "delayed_noev"):
                if res[0] == "delayed":
                    self.ev("conversation_delayed", instance=iname, step=res[1], **self.mfields(m))
                self.pend_m(inst, m, "delayed", True)
                dq[key] = msgs[i:]
                self.sched_retry(inst, m, False)
                return
            self.after_route(inst, db, m, res, False)

    def refresh_bi(self, m):
        d = self.dialogs[m["dialog"]]
        if not m["from_target"]:
            m["bi"] = d.get("pin_bi") or d.get("to_bi")

    # ------------------------------------------------------------ periodic
    def due_timer(self, number):
        self.sched(self.t0 + (number + 1) * TIMER_MS, "timer", number + 1)
        tasks = ["queue monitors", "task handlers", "message dispatcher"]
        if number % 2 == 0:
            tasks += ["transport connections", "transmitter"]
        if number % 5 == 0:
            tasks += ["idle connections", "forwarder", "broker start", "broker configuration notification",
                      "acknowledged message clean-up"]
        for inst in self.instances.values():
            self.ev("timer_notification", instance=inst["name"], number=number, tasks=list(tasks))
        for inst in self.instances.values():
            for db in self.dbs(inst):
                for q in db["queues"].values():
                    if q["monitor"]:
                        # third round: the timer's look waits for the instant to settle too
                        self.trigger(q, "timer notification")
        for inst in self.instances.values():
            if inst["running_handlers"] < inst["handlers"]:
                n = inst["handlers"] - inst["running_handlers"]
                inst["running_handlers"] = inst["handlers"]
                self.ev("task_handlers_restarted", instance=inst["name"], count=n)
            self.dispatcher_sweep(inst)
        if number % 2 == 0:
            self.in_tick = True
            for inst in self.instances.values():
                self.transport_tick(inst)
            self.in_tick = False
            # second round: a dialog's failed transmission is reclassified at every
            # instance where its messages wait (PER-2B), not only at the first
            failed_now = frozenset(n for n, d in self.dialogs.items() if d.get("failed"))
            for inst in self.instances.values():
                self.transmitter_tick(inst, failed_now)
        if number % 5 == 0:
            for key, c in list(self.conns.items()):
                if self.now - c["last"] >= IDLE_MS:
                    self.close_conn(key, "idle")
            for inst in self.instances.values():
                for e in list(inst["fwd"]):
                    if self.now - e["received"] >= FWD_STALE_MS:
                        inst["fwd"].remove(e)
                        self.ev("forwarded_message_deleted", instance=inst["name"], **self.mfields(e["m"]))
                self.ev("broker_configuration_notification", instance=inst["name"])
                for db in self.dbs(inst):
                    if not db["started"] and not db["master_key"]:
                        self.ev("database_broker_start_failed", instance=inst["name"], database=db["name"],
                                reason="missing master key")
                    if not db["started"] and db["master_key"]:
                        db["started"] = True
                        self.ev("database_broker_started", instance=inst["name"], database=db["name"])
                    if not db["ack_cleanup"] and db["has_dialogs"]:
                        db["ack_cleanup"] = True
                        self.ev("ack_cleanup_resumed", instance=inst["name"], database=db["name"])

    def transport_tick(self, inst):
        for lst in (inst["tq"], inst["fwd"]):
            heads = []
            seen = set()
            for e in lst:
                k = (e["m"]["dialog"], e["m"]["from_target"])
                if k in seen or e.get("delayed"):
                    continue
                seen.add(k)
                heads.append(e)
            for e in heads:
                if e not in lst:
                    continue
                d = self.dialogs.get(e["m"]["dialog"])
                if d and d.get("failed") and not e["forwarded"]:
                    continue
                # second round: a message routed by a route since dropped is left to the
                # transmitter, which reclassifies it (PER-2B "touched by metadata changes");
                # the transport does not ask the addresses of a route that no longer exists
                if e.get("route") and e.get("table") and not e["forwarded"] \
                        and self.find_route(inst, e["table"], e["route"]) is None:
                    continue
                self.try_transmit(inst, e)

    def transmitter_tick(self, inst, failed_now=frozenset()):
        touched = []
        for e in inst["tq"]:
            d = self.dialogs.get(e["m"]["dialog"])
            name = e["m"]["dialog"]
            hit = False
            if inst["metadata_changed"]:
                hit = True
            if name in failed_now or (d and d.get("failed")):
                hit = True
            if e.get("route") and e.get("table"):
                r = self.find_route(inst, e["table"], e["route"])
                if r is not None and r.expired(self.now) and not e.get("expired_seen"):
                    hit = True
                    e["expired_seen"] = True
            if hit and name not in touched:
                touched.append(name)
        # second round: a delayed conversation waits in the transmission queue too,
        # so a metadata change touches it (PER-2B: "reclassifies dialogs touched by
        # metadata changes"): it is matched again now.
        redelay = []
        if inst["metadata_changed"]:
            for (dname, ft), msgs in list(self.delayed_q(inst).items()):
                if msgs and inst.get("meta_seq", 0) > msgs[0].get("_dseq", 0):
                    redelay.append((dname, ft, msgs[0]["msn"], msgs[0].get("_rgen")))
                    if dname not in touched:
                        touched.append(dname)
        inst["metadata_changed"] = False
        self.ev("transmitter_reclassified", instance=inst["name"], dialogs=list(touched))
        for name in touched:
            d = self.dialogs.get(name)
            if d:
                d["failed"] = None
            ents = [e for e in inst["tq"] if e["m"]["dialog"] == name]
            for e in ents:
                inst["tq"].remove(e)
            if ents:
                self.ev("routing_retried", instance=inst["name"], **self.mfields(ents[0]["m"]))
            for idx, e in enumerate(ents):
                m = e["m"]
                db = inst["dbs"].get(m.get("_db")) if m.get("_db") else None
                if db is None:
                    db = inst["dbs"][d["db"]] if not m["from_target"] else inst["dbs"][d["tdb"]]
                key = (m["dialog"], m["from_target"])
                if idx > 0 and (key in self.delayed_q(inst) or any(
                        x["m"]["dialog"] == m["dialog"] and x["m"]["from_target"] == m["from_target"]
                        for x in inst["tq"])):
                    # third round: an earlier message of the conversation still waits
                    # here, so the later ones wait behind it, unrouted (as at a SEND)
                    rest = [x["m"] for x in ents[idx:]]
                    for r in rest:
                        r.setdefault("_db", db["name"])
                    if key in self.delayed_q(inst):
                        self.delayed_q(inst)[key].extend(rest)
                    else:
                        beh = inst.setdefault("behind", {})
                        beh[key] = rest + beh.get(key, [])
                    for r in rest:
                        self.pend_m(inst, r, "behind an earlier message of the conversation")
                    break
                self.refresh_bi(m)
                res = self.route(inst, db, m, False)
                self.after_route(inst, db, m, res, False)
        for dname, ft, msn, gen in redelay:
            self.due_retry(inst["name"], dname, ft, msn, False, gen)

    def find_route(self, inst, table, name):
        if table == "msdb.sys.routes":
            rs = inst["msdb"]
        else:
            dbn = table.split(".")[0]
            db = inst["dbs"].get(dbn)
            rs = db["routes"] if db else []
        for r in rs:
            if r.name == name:
                return r
        return None

    # ============================================================== commands
    def cmd_begin_dialog(self, c):
        inst = self.instances.get(c["instance"])
        if inst is None or c["database"] not in inst["dbs"]:
            raise Refuse("no database %s on %s" % (c.get("database"), c.get("instance")))
        db = inst["dbs"][c["database"]]
        self.dialogs[c["dialog"]] = {
            "name": c["dialog"], "inst": inst["name"], "db": db["name"], "from_service": c["from_service"],
            "to_service": c["to_service"], "to_bi": c.get("to_broker_instance"), "pin_bi": None,
            "next_i": 0, "next_t": 0, "saved_i": 0, "saved_t": 0, "tinst": None, "tdb": None,
            "tgroup": "%s@target" % c["dialog"], "igroup": "%s@initiator" % c["dialog"],
            "failed": None, "far_bi": c.get("to_broker_instance"),
        }
        db["has_dialogs"] = True
        self.ev("dialog_begun", instance=inst["name"], database=db["name"], dialog=c["dialog"],
                from_service=c["from_service"], to_service=c["to_service"],
                to_broker_instance=c.get("to_broker_instance"))
        return {}

    def cmd_send(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refuse("no dialog %r has been begun" % c["dialog"])
        ft = bool(c.get("from_target"))
        if ft:
            if d["tinst"] is None:
                raise Refuse("the target of %r has not received a message yet" % c["dialog"])
            inst = self.instances[d["tinst"]]
            db = inst["dbs"][d["tdb"]]
            msn = d["next_t"]
            d["next_t"] += 1
            svc = d["from_service"]
            origin_db = self.instances[d["inst"]]["dbs"][d["db"]]
            bi = origin_db["bi"]
        else:
            inst = self.instances[d["inst"]]
            db = inst["dbs"][d["db"]]
            msn = d["next_i"]
            d["next_i"] += 1
            svc = d["to_service"]
            bi = d.get("pin_bi") or d.get("to_bi")
        m = {"dialog": d["name"], "msn": msn, "from_target": ft, "service": svc, "bi": bi, "hops": 0,
             "received": self.now, "message_type": c.get("message_type"), "body": c.get("body"), "_db": db["name"]}
        self.ev("message_sent", instance=inst["name"], database=db["name"], dialog=d["name"], from_target=ft,
                message_sequence_number=msn)
        dq = self.delayed_q(inst)
        key = (d["name"], ft)
        beh = inst.setdefault("behind", {})
        if key in dq:
            dq[key].append(m)
            self.pend_m(inst, m, "behind an earlier message of the conversation")
        elif beh.get(key) or any(e["m"]["dialog"] == d["name"] and e["m"]["from_target"] == ft for e in inst["tq"]) \
                or self.delayed_elsewhere(d["name"], ft):
            beh.setdefault(key, []).append(m)
            self.pend_m(inst, m, "behind an earlier message of the conversation")
        else:
            res = self.route(inst, db, m, False)
            self.after_route(inst, db, m, res, False)
        return {"message_sequence_number": msn}

    def cmd_begin_transaction(self, c):
        s = self.session(c["session"])
        s["tx"] = True
        s["tx_recv"] = False
        s["recv_qs"] = []
        s["held"] = []
        return {}

    def cmd_commit(self, c):
        self.commit(self.session(c["session"]))
        return {}

    def cmd_rollback(self, c):
        self.rollback(self.session(c["session"]))
        return {}

    def cmd_receive(self, c):
        q = self.queue(c["queue"])
        s = self.session(c["session"])
        wg = c.get("where_group")
        self.do_receive(s, q, c.get("top"), c.get("where_dialog"), wg, c.get("waitfor_ms"))
        return {}

    def cmd_get_conversation_group(self, c):
        q = self.queue(c["queue"])
        s = self.session(c["session"])
        self.do_receive(s, q, None, None, None, c.get("waitfor_ms"), gcg=True)
        return {}

    def cmd_alter_queue(self, c):
        q = self.queue(c["queue"])
        if c.get("status") is not None:
            q["status"] = c["status"]
        if c.get("procedure_name") is not None:
            q["proc"] = c["procedure_name"]
        if c.get("max_queue_readers") is not None:
            q["max"] = c["max_queue_readers"]
        self.ev("queue_altered", instance=q["inst"], database=q["db"], queue=q["name"])
        self.update_monitor(q)
        self.trigger(q, "ALTER QUEUE")
        return {}

    def cmd_create_event_notification(self, c):
        q = self.queue(c["queue"])
        if c["name"] in q["notifs"]:
            raise Refuse("event notification %r exists" % c["name"])
        q["notifs"].append(c["name"])
        self.update_monitor(q)
        return {}

    def cmd_drop_event_notification(self, c):
        q = self.queue(c["queue"])
        if c["name"] not in q["notifs"]:
            raise Refuse("no event notification %r on the queue" % c["name"])
        q["notifs"].remove(c["name"])
        self.update_monitor(q)
        return {}

    def cmd_exit_procedure(self, c):
        q = self.queue(c["queue"])
        self.proc_exit(q, c["task"], "exited")
        return {}

    def route_table(self, c):
        inst = self.instances.get(c["instance"])
        if inst is None:
            raise Refuse("no instance %r" % c.get("instance"))
        if c.get("database") is None:
            return inst, None, inst["msdb"]
        db = inst["dbs"].get(c["database"])
        if db is None:
            raise Refuse("no database %r" % c["database"])
        return inst, db, db["routes"]

    def check_addr(self, a):
        if a is None:
            return
        u = a.upper()
        if u in ("LOCAL", "TRANSPORT"):
            return
        if not u.startswith("TCP://") or ":" not in a[6:]:
            raise Refuse("malformed address %r" % a)

    def cmd_create_route(self, c):
        inst, db, rs = self.route_table(c)
        r = c["route"]
        if any(x.name == r["name"] for x in rs):
            raise Refuse("route %r exists" % r["name"])
        self.check_addr(r.get("address"))
        self.check_addr(r.get("mirror_address"))
        rs.append(Route(r, self.now))
        inst["metadata_changed"] = True
        inst["meta_seq"] = self.bump_mseq()
        self.ev("route_created", instance=inst["name"], database=db["name"] if db else None, route=r["name"])
        return {}

    def cmd_alter_route(self, c):
        inst, db, rs = self.route_table(c)
        r = c["route"]
        for x in rs:
            if x.name == r["name"]:
                break
        else:
            raise Refuse("no route %r" % r["name"])
        self.check_addr(r.get("address"))
        self.check_addr(r.get("mirror_address"))
        if r.get("service_name") is not None:
            x.service_name = r["service_name"] or None
        if r.get("broker_instance") is not None:
            x.broker_instance = r["broker_instance"] or None
        if r.get("address") is not None:
            x.address = r["address"]
        if r.get("mirror_address") is not None:
            x.mirror_address = r["mirror_address"] or None
        if r.get("lifetime_s") is not None:
            x.expires_ms = int(round(self.now + float(r["lifetime_s"]) * 1000))
        inst["metadata_changed"] = True
        inst["meta_seq"] = self.bump_mseq()
        for k in list(self.mirror):
            if k[0] == inst["name"] and k[2] == x.name:
                del self.mirror[k]
        self.ev("route_altered", instance=inst["name"], database=db["name"] if db else None, route=r["name"])
        return {}

    def cmd_drop_route(self, c):
        inst, db, rs = self.route_table(c)
        for x in rs:
            if x.name == c["name"]:
                rs.remove(x)
                break
        else:
            raise Refuse("no route %r" % c["name"])
        inst["metadata_changed"] = True
        inst["meta_seq"] = self.bump_mseq()
        self.ev("route_dropped", instance=inst["name"], database=db["name"] if db else None, route=c["name"])
        return {}

    def cmd_answer_routing_request(self, c):
        inst, db, rs = self.route_table(c)
        r = c["route"]
        # second round: the answer creates a route, so a name already in the table is
        # refused as CREATE ROUTE refuses it
        if any(x.name == r["name"] for x in rs):
            raise Refuse("route %r exists" % r["name"])
        self.check_addr(r.get("address"))
        tn = self.tname(db)
        for k in list(self.dyn_pending):
            if k[0] == inst["name"] and k[1] == tn and k[3] == r.get("service_name"):
                self.dyn_pending.discard(k)
        rs.append(Route(r, self.now))
        inst["metadata_changed"] = True
        inst["meta_seq"] = self.bump_mseq()
        self.ev("route_created", instance=inst["name"], database=db["name"] if db else None, route=r["name"])
        return {}

    def cmd_set_message_forwarding(self, c):
        inst = self.instances[c["instance"]]
        inst["forwarding"] = bool(c["active"])
        self.ev("message_forwarding", instance=inst["name"], active=inst["forwarding"])
        return {}

    def cmd_set_reachable(self, c):
        inst = self.instances.get(c["instance"])
        if inst is None:
            raise Refuse("no instance")
        inst["reachable"] = bool(c["reachable"])
        if not inst["reachable"]:
            self.ev("instance_unreachable", instance=inst["name"])
            a = inst["address"].lower()
            for key in list(self.conns):
                if key[1] == a:
                    self.close_conn(key, "disconnected")
        else:
            self.ev("instance_reachable", instance=inst["name"])
        return {}

    def cmd_failover(self, c):
        inst = self.instances[c["instance"]]
        db = inst["dbs"].get(c["database"])
        if db is None:
            raise Refuse("no database")
        for other in self.instances.values():
            for x in self.dbs(other):
                if x is not db and x["name"] == db["name"] and x["bi"] == db["bi"] and x["role"]:
                    x["role"] = "mirror"
                    self.ev("mirroring_failover", instance=other["name"], database=x["name"])
        db["role"] = "principal"
        self.ev("mirroring_failover", instance=inst["name"], database=db["name"])
        return {}

    def cmd_fail_task_handlers(self, c):
        inst = self.instances[c["instance"]]
        n = min(int(c["count"]), inst["running_handlers"])
        inst["running_handlers"] -= n
        self.ev("task_handlers_failed", instance=inst["name"], count=n)
        return {}

    def cmd_set_dispatcher_saving(self, c):
        inst = self.instances[c["instance"]]
        inst["saving"] = c["mode"]
        inst["save_delay"] = int(round(float(c.get("delay_s") or 0) * 1000))
        self.ev("dispatcher_saving", instance=inst["name"], mode=c["mode"], delay_s=c.get("delay_s"))
        if inst["saving"] == "running":
            if inst["save_delay"] == 0:
                self.save_ready(inst)
            else:
                for b in inst["dispatch"]:
                    self.sched(max(self.now, b["arrived"] + inst["save_delay"]), "save", inst["name"], b["seq"])
        return {}

    def cmd_lose_in_transit(self, c):
        self.lose[(c["dialog"], c["sequence"], bool(c.get("from_target")))] = bool(c.get("every"))
        return {}

    def cmd_drop_connection(self, c):
        if (c["instance"], c["address"].lower()) not in self.conns:
            raise Refuse("no connection from %s to %s" % (c["instance"], c["address"]))
        self.close_conn((c["instance"], c["address"].lower()), "disconnected")
        return {}

    def cmd_fail_transmission(self, c):
        d = self.dialogs.get(c["dialog"])
        if d is None:
            raise Refuse("no dialog")
        d["failed"] = "lack of memory" if c.get("reason") == "resource" else "security validation"
        return {}

    def cmd_create_master_key(self, c):
        db = self.instances[c["instance"]]["dbs"][c["database"]]
        db["master_key"] = True
        self.ev("master_key_created", instance=c["instance"], database=c["database"])
        return {}

    def cmd_stop_ack_cleanup(self, c):
        db = self.instances[c["instance"]]["dbs"][c["database"]]
        db["ack_cleanup"] = False
        self.ev("ack_cleanup_stopped", instance=c["instance"], database=c["database"])
        return {}

    def cmd_advance_time(self, c):
        return {}

    # ----------------------------------------------------------------- views
    def cmd_query_view(self, c):
        v = c["view"]
        fi, fd = c.get("instance"), c.get("database")
        rows = []
        insts = [i for i in self.instances.values() if fi is None or i["name"] == fi]
        for inst in insts:
            dbs = [db for db in self.dbs(inst) if fd is None or db["name"] == fd]
            if v == "sys.dm_broker_queue_monitors":
                for db in dbs:
                    for q in db["queues"].values():
                        if not q["monitor"]:
                            continue
                        state = "RECEIVES_OCCURRING" if q["tasks"] else (
                            "NOTIFIED" if q["ext_until"] is not None else "INACTIVE")
                        rows.append({"database_id": db["id"], "queue_id": q["id"], "instance": inst["name"],
                                     "database": db["name"], "queue": q["name"], "state": state,
                                     "last_empty_rowset_time": q["last_empty"],
                                     "last_activated_time": q["last_activated"],
                                     "tasks_waiting": len(self.waiting_sessions(q))})
            elif v == "sys.dm_broker_activated_tasks":
                for db in dbs:
                    for q in db["queues"].values():
                        for n in sorted(q["tasks"]):
                            t = q["tasks"][n]
                            rows.append({"spid": t["spid"], "database_id": db["id"], "queue_id": q["id"],
                                         "instance": inst["name"], "database": db["name"], "queue": q["name"],
                                         "task": n, "procedure_name": t["pname"]})
            elif v == "sys.routes":
                # a null database names msdb (the step "in msdb of ..." queries it so)
                tables = [(None, inst["msdb"])] if fd is None else [(db["name"], db["routes"]) for db in dbs]
                for dn, rs in tables:
                    for r in rs:
                        rows.append({"instance": inst["name"], "database": dn, "name": r.name,
                                     "remote_service_name": r.service_name, "broker_instance": r.broker_instance,
                                     "address": r.address, "mirror_address": r.mirror_address,
                                     "expires_ms": r.expires_ms})
            elif v == "sys.transmission_queue":
                ents = list(inst["tq"])
                for msgs in self.delayed_q(inst).values():
                    for i, m in enumerate(msgs):
                        ents.append({"m": m, "status": "delayed" if i == 0 else
                                     "behind an earlier message of the conversation"})
                for msgs in inst.get("behind", {}).values():
                    for m in msgs:
                        ents.append({"m": m, "status": "behind an earlier message of the conversation"})
                for e in ents:
                    m = e["m"]
                    rows.append({"instance": inst["name"], "dialog": m["dialog"], "message_sequence_number": m["msn"],
                                 "from_target": m["from_target"], "to_service_name": m["service"],
                                 "transmission_status": self.view_status(e.get("status")), "received_ms": m["received"]})
            elif v == "sys.conversation_endpoints":
                for d in self.dialogs.values():
                    if d["inst"] == inst["name"] and (fd is None or d["db"] == fd):
                        rows.append({"dialog": d["name"], "instance": inst["name"], "database": d["db"],
                                     "far_service": d["to_service"], "far_broker_instance": d.get("far_bi"),
                                     "acknowledged": bool(d.get("acked"))})
                    if d.get("tinst") == inst["name"] and (fd is None or d["tdb"] == fd):
                        odb = self.instances[d["inst"]]["dbs"][d["db"]]
                        rows.append({"dialog": d["name"], "instance": inst["name"], "database": d["tdb"],
                                     "far_service": d["from_service"], "far_broker_instance": odb["bi"],
                                     "acknowledged": True})
            elif v == "sys.dm_broker_connections":
                for key, cn in self.conns.items():
                    if key[0] == inst["name"]:
                        rows.append({"instance": inst["name"], "address": cn["address"], "state": "CONNECTED",
                                     "opened_ms": cn["opened"], "last_activity_ms": cn["last"]})
            elif v == "sbtck.dispatcher_buffers":
                for b in inst["dispatch"]:
                    m = b["m"]
                    rows.append({"instance": inst["name"], "database": b["db"]["name"], "dialog": m["dialog"],
                                 "message_sequence_number": m["msn"], "from_target": m["from_target"],
                                 "arrived_ms": b["arrived"]})
            elif v == "sbtck.forwarder":
                for e in inst["fwd"]:
                    m = e["m"]
                    rows.append({"instance": inst["name"], "dialog": m["dialog"], "message_sequence_number": m["msn"],
                                 "from_target": m["from_target"], "to_service_name": m["service"],
                                 "transmission_status": self.view_status(e.get("status")),
                                 "received_ms": e["received"]})
            elif v == "sbtck.periodic_state":
                base = {"instance": inst["name"], "task_handlers": inst["handlers"],
                        "running_task_handlers": inst["running_handlers"]}
                if not dbs and fd is None:
                    rows.append(dict(base, database="msdb", broker_started=True, ack_cleanup_running=True))
                for db in dbs:
                    rows.append(dict(base, database=db["name"], broker_started=db["started"],
                                     ack_cleanup_running=db["ack_cleanup"]))
            else:
                raise Refuse("unknown view %r" % v)
        return {"rows": rows}

    # -------------------------------------------------------------- dispatch
    def execute(self, c):
        kind = c["kind"]
        self.events = []
        if kind == "start":
            res = self.start(c)
            self.pending_checks = []
            self.flush_checks()
            return res, self.events
        at = c["at_ms"]
        self.run_until(at)
        self.now = at
        self.pending_checks = []
        fn = getattr(self, "cmd_" + kind, None)
        if fn is None:
            raise Refuse("unknown command %r" % kind)
        try:
            res = fn(c)
        finally:
            self.flush_checks()
        return res, self.events


def main():
    b = Broker()
    started = False
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        r = json.loads(line)
        rid = r.get("id")
        op = r.get("op")
        if op == "hello":
            caps = ["activation", "external_activation", "routing", "mirroring", "forwarding",
                    "dynamic_routing", "periodic_tasks"]
            if TRACE:
                caps.append("decision_trace")
            out = {"id": rid, "ok": True, "result": {"name": "cleanroom1", "version": "0.1", "protocol": "2.1",
                                                      "capabilities": caps, "params": PARAMS}}
        elif op == "bye":
            sys.stdout.write(json.dumps({"id": rid, "ok": True}) + "\n")
            sys.stdout.flush()
            return
        elif op == "execute":
            c = r["command"]
            try:
                if c["kind"] != "start" and not started:
                    raise Refuse("no topology has been started")
                res, evs = b.execute(c)
                if c["kind"] == "start":
                    started = True
                out = {"id": rid, "ok": True, "result": res, "events": evs}
            except Refuse as e:
                out = {"id": rid, "ok": False, "error": str(e), "events": b.events}
            except Exception as e:  # a bug of ours
                import traceback
                traceback.print_exc(file=sys.stderr)
                out = {"id": rid, "ok": False, "fault": True, "error": "%s: %s" % (type(e).__name__, e),
                       "events": b.events}
        else:
            out = {"id": rid, "ok": False, "error": "unknown op %r" % op}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
