#!/usr/bin/env python3
"""cr11: a clean-room Service Broker model speaking the sbtck protocol (2.2) over stdio.

Written from the kit's user documentation and the source documents alone.
Standard library only.
"""
import heapq
import json
import os
import sys
import traceback

PROTOCOL = "2.2"
TRACE = os.environ.get("SBTCK_CR11_NO_TRACE") != "1"
PARAMS = {
    "activation_empty_window_s": 5,
    "external_activation_timeout_s": 60,
    "delayed_retry_s": 10,
    "forward_hop_limit": 4,
}
CAPS = ["activation", "external_activation", "routing", "mirroring", "dynamic_routing",
        "forwarding", "periodic_tasks"] + (["decision_trace"] if TRACE else [])
BCN = "http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice"
TIMER_MS = 5000
STALE_DISPATCH_MS = 10000
SUPPRESS_DISCONNECT_MS = 15000
SUPPRESS_FAILED_MS = 60000
IDLE_CLOSE_MS = 90000
FORWARD_STALE_MS = 60000


class Refused(Exception):
    pass


def up(a):
    return a.upper() if isinstance(a, str) else a


class Broker:
    def __init__(self):
        self.events = []
        self.reset(0)

    # ------------------------------------------------------------------ basics
    def reset(self, at):
        self.now = at
        self.start_ms = at
        self.agenda = []
        self.seq = 0
        self.instances = {}
        self.dialogs = {}
        self.sessions = {}
        self.spid = 50
        self.looks = []
        self.group_n = 0
        self.pending_dyn = set()
        self.started = False

    def ev(self, kind, **f):
        e = {"at_ms": self.now, "kind": kind}
        e.update(f)
        self.events.append(e)

    def tr(self, kind, **f):
        if TRACE:
            self.ev(kind, **f)

    def sched(self, t, kind, data=None):
        self.seq += 1
        heapq.heappush(self.agenda, (t, self.seq, kind, data))

    def run_until(self, t):
        while self.agenda and self.agenda[0][0] <= t:
            at = self.agenda[0][0]
            if at > self.now:
                self.now = at
            self.settle()
        if t > self.now:
            self.now = t

    def run_due_one(self):
        at, _, kind, data = heapq.heappop(self.agenda)
        getattr(self, "due_" + kind)(data)

    # --------------------------------------------------------------- topology
    def do_start(self, c):
        self.reset(c["at_ms"])
        self.started = True
        topo = c["topology"]
        for ins in topo.get("instances", []):
            I = {
                "name": ins["name"], "address": ins.get("address") or "", "cpus": ins.get("cpus") or 1,
                "forwarding": bool(ins.get("message_forwarding")), "reachable": True,
                "routes": [], "dbs": {}, "conns": {}, "suppressed": {}, "timer": 0,
                "handlers": 0, "running": 0, "dispatch_mode": "running", "dispatch_delay": 0,
                "buffers": [], "forwarder": [], "touched": set(), "failed_tx": set(),
                "expired_since": False, "changed_since": None,
            }
            I["handlers"] = 2 * I["cpus"]
            I["running"] = I["handlers"]
            for r in ins.get("msdb_routes", []) or []:
                I["routes"].append(self.mkroute(r))
            for d in ins.get("databases", []) or []:
                D = {
                    "name": d["name"], "bi": d.get("broker_instance"),
                    "master_key": d.get("master_key", True) is not False,
                    "role": d.get("mirroring_role"), "procs": {}, "queues": {}, "services": {},
                    "routes": [], "ack_cleanup": True, "instance": ins["name"],
                }
                D["started"] = D["master_key"]
                for p in d.get("procedures", []) or []:
                    D["procs"][p["name"]] = p
                for q in d.get("queues", []) or []:
                    act = q.get("activation") or {}
                    D["queues"][q["name"]] = {
                        "name": q["name"], "db": D, "inst": I,
                        "status": (act.get("status") or "OFF").upper(),
                        "proc": act.get("procedure_name"),
                        "max": act.get("max_queue_readers") if act.get("max_queue_readers") is not None else 1,
                        "msgs": [], "notifs": [], "monitor": False, "last_empty": None,
                        "last_act": None, "tasks": [], "task_n": 0, "notified_until": None,
                        "qid": 0,
                    }
                for s in d.get("services", []) or []:
                    D["services"][s["name"]] = s["queue"]
                for en in d.get("event_notifications", []) or []:
                    qn = en.get("queue")
                    if qn in D["queues"]:
                        D["queues"][qn]["notifs"].append(en.get("name"))
                for r in d.get("routes", []) or []:
                    D["routes"].append(self.mkroute(r))
                I["dbs"][d["name"]] = D
            self.instances[ins["name"]] = I
        # ids
        dbid = 5
        qid = 1000
        for I in self.instances.values():
            for D in I["dbs"].values():
                D["id"] = dbid
                dbid += 1
                for Q in D["queues"].values():
                    Q["qid"] = qid
                    qid += 1
        self.ev("broker_started")
        for I in self.instances.values():
            self.ev("task_handlers_started", instance=I["name"], count=I["handlers"])
            for D in I["dbs"].values():
                if D["started"]:
                    self.ev("database_broker_started", instance=I["name"], database=D["name"])
                else:
                    self.ev("database_broker_start_failed", instance=I["name"], database=D["name"],
                            reason="missing master key")
                for Q in D["queues"].values():
                    if self.should_monitor(Q):
                        Q["monitor"] = True
                        self.ev("monitor_created", instance=I["name"], database=D["name"], queue=Q["name"])
        self.sched(self.now + TIMER_MS, "timer", None)
        return {}

    def mkroute(self, r):
        life = r.get("lifetime_s")
        return {
            "name": r["name"], "service": r.get("service_name"), "bi": r.get("broker_instance"),
            "address": r.get("address") or "LOCAL", "mirror": r.get("mirror_address"),
            "expires": (self.now + int(life * 1000)) if life is not None else None,
            "principal": None, "probed": False, "created": self.now, "expired_seen": False,
        }

    def inst(self, name):
        I = self.instances.get(name)
        if I is None:
            raise Refused("no instance %r" % name)
        return I

    def db(self, iname, dname):
        I = self.inst(iname)
        D = I["dbs"].get(dname)
        if D is None:
            raise Refused("no database %r on %r" % (dname, iname))
        return D

    def queue(self, q):
        D = self.db(q["instance"], q["database"])
        Q = D["queues"].get(q["queue"])
        if Q is None:
            raise Refused("no queue %r" % q["queue"])
        return Q

    def qf(self, Q):
        return {"instance": Q["inst"]["name"], "database": Q["db"]["name"], "queue": Q["name"]}

    def should_monitor(self, Q):
        return Q["status"] == "ON" or bool(Q["notifs"])

    def update_monitor(self, Q):
        want = self.should_monitor(Q)
        if want and not Q["monitor"]:
            Q["monitor"] = True
            self.ev("monitor_created", **self.qf(Q))
        elif not want and Q["monitor"]:
            Q["monitor"] = False
            self.ev("monitor_removed", **self.qf(Q))

    # ------------------------------------------------------------- sessions
    def session(self, name):
        S = self.sessions.get(name)
        if S is None:
            self.spid += 1
            S = {"name": name, "spid": self.spid, "tx": False, "received": [], "locks": set(),
                 "queues": {}, "wait": None, "last": None, "task": None}
            self.sessions[name] = S
        return S

    def do_begin_transaction(self, c):
        S = self.session(c["session"])
        if S["wait"]:
            raise Refused("session is waiting")
        S["tx"] = True
        return {}

    def do_commit(self, c):
        S = self.session(c["session"])
        if not S["tx"]:
            raise Refused("COMMIT without a transaction")
        self.commit(S)
        return {}

    def commit(self, S):
        for m in S["received"]:
            Q = m["q"]
            if m in Q["msgs"]:
                Q["msgs"].remove(m)
        S["received"] = []
        S["tx"] = False
        released = S["locks"]
        S["locks"] = set()
        S["queues"] = {}
        self.ev("transaction_committed", session=S["name"])
        if released:
            self.serve_waiters()

    def do_rollback(self, c):
        S = self.session(c["session"])
        if not S["tx"]:
            raise Refused("ROLLBACK without a transaction")
        self.rollback(S)
        return {}

    def rollback(self, S):
        n = 0
        for m in S["received"]:
            m["by"] = None
            n += 1
        S["received"] = []
        S["tx"] = False
        S["locks"] = set()
        qs = list(S["queues"].values())
        S["queues"] = {}
        self.ev("transaction_rolled_back", session=S["name"], returned=n)
        for Q in qs:
            self.look(Q, "rollback")
        self.serve_waiters()

    def locked_by_other(self, gid, S):
        for o in self.sessions.values():
            if o is not S and gid in o["locks"]:
                return True
        return False

    def available(self, Q, S, where_dialog=None, where_group=None):
        """messages ready: not taken, group not locked by another session"""
        out = []
        for m in Q["msgs"]:
            if m["by"] is not None:
                continue
            if self.locked_by_other(m["group"], S):
                continue
            if where_dialog is not None and m["dialog"] != where_dialog:
                continue
            if where_group is not None and m["group"] != where_group:
                continue
            out.append(m)
        return out

    def group_of_dialog_in(self, Q, dialog):
        D = self.dialogs.get(dialog)
        if D is None:
            return None
        for end in ("i", "t"):
            if D.get(end + "_queue") is Q:
                return D[end + "_group"]
        return D.get("t_group")

    def try_receive(self, S, Q, top, wd, wg, gcg):
        wgid = self.group_of_dialog_in(Q, wg) if wg is not None else None
        if wg is not None and wgid is None:
            return None
        avail = self.available(Q, S, wd, wgid)
        if not avail:
            return None
        gid = avail[0]["group"]
        msgs = [m for m in avail if m["group"] == gid]
        msgs.sort(key=lambda m: (m["dialog_order"], m["seq"]))
        if gcg:
            taken = []
        else:
            taken = msgs if top is None else msgs[:top]
        S["locks"].add(gid)
        if not gcg:
            S["queues"][id(Q)] = Q
        for m in taken:
            m["by"] = S["name"]
            S["received"].append(m)
        rows = [{"dialog": m["dialog"], "message_sequence_number": m["seq"], "conversation_group": gid,
                 "message_body": m.get("body"), "message_type_name": m.get("mtype") or "DEFAULT"}
                for m in taken]
        return gid, rows

    def statement(self, S, Q, top, wd, wg, waitfor, gcg):
        """run RECEIVE / GET CONVERSATION GROUP for a session; returns 'rows', 'empty', or 'wait'"""
        has_where = wd is not None or wg is not None
        stmt = "GET CONVERSATION GROUP" if gcg else "RECEIVE"
        auto = not S["tx"]
        if auto:
            S["tx"] = True
        elif not gcg:
            S["queues"][id(Q)] = Q
        if not gcg and Q["notified_until"] is not None:
            # ACT-13: once an application calls RECEIVE on the queue the time-out is over
            Q["notified_until"] = None
        res = self.try_receive(S, Q, top, wd, wg, gcg)
        if res is not None:
            gid, rows = res
            self.ev("rows_returned", session=S["name"], statement=stmt, has_where=has_where, rows=rows,
                    conversation_group=gid, **self.qf(Q))
            S["last"] = ("rows", rows, gid)
            if auto:
                self.commit_silent(S)
            if not gcg:
                self.look(Q, "RECEIVE")
            return "rows"
        if auto:
            S["tx"] = False
            S["queues"] = {}
        if waitfor:
            S["wait"] = {"q": Q, "top": top, "wd": wd, "wg": wg, "gcg": gcg, "auto": auto,
                         "until": self.now + waitfor, "since": self.now}
            self.ev("reader_waiting", session=S["name"], statement=stmt, has_where=has_where, **self.qf(Q))
            S["last"] = ("wait",)
            self.sched(self.now + waitfor, "waitfor", S["name"])
            if not gcg:
                self.look(Q, "RECEIVE")
            return "wait"
        self.empty(S, Q, stmt, has_where)
        return "empty"

    def empty(self, S, Q, stmt, has_where):
        self.ev("empty_result", session=S["name"], statement=stmt, has_where=has_where, rows=[], **self.qf(Q))
        S["last"] = ("empty",)
        if not has_where:
            Q["last_empty"] = self.now
        if stmt == "RECEIVE":
            self.look(Q, "RECEIVE")

    def commit_silent(self, S):
        for m in S["received"]:
            if m in m["q"]["msgs"]:
                m["q"]["msgs"].remove(m)
        S["received"] = []
        S["tx"] = False
        S["locks"] = set()
        S["queues"] = {}

    def due_waitfor(self, name):
        S = self.sessions.get(name)
        if not S or not S["wait"] or S["wait"]["until"] != self.now:
            return
        w = S["wait"]
        S["wait"] = None
        stmt = "GET CONVERSATION GROUP" if w["gcg"] else "RECEIVE"
        self.empty(S, w["q"], stmt, w["wd"] is not None or w["wg"] is not None)
        if S["task"] is not None:
            self.proc_empty(S)

    def serve_waiters(self):
        progress = True
        while progress:
            progress = False
            waiting = sorted((s for s in self.sessions.values() if s["wait"]), key=lambda s: (s["wait"]["since"], s["spid"]))
            for S in waiting:
                w = S["wait"]
                auto = w["auto"]
                if auto:
                    S["tx"] = True
                res = self.try_receive(S, w["q"], w["top"], w["wd"], w["wg"], w["gcg"])
                if res is None:
                    if auto:
                        S["tx"] = False
                    continue
                gid, rows = res
                S["wait"] = None
                stmt = "GET CONVERSATION GROUP" if w["gcg"] else "RECEIVE"
                self.ev("rows_returned", session=S["name"], statement=stmt,
                        has_where=w["wd"] is not None or w["wg"] is not None, rows=rows,
                        conversation_group=gid, **self.qf(w["q"]))
                S["last"] = ("rows", rows, gid)
                if auto:
                    self.commit_silent(S)
                if not w["gcg"]:
                    self.look(w["q"], "RECEIVE")
                if S["task"] is not None:
                    self.proc_got(S)
                progress = True
                break

    def do_receive(self, c):
        Q = self.queue(c["queue"])
        S = self.session(c["session"])
        if S["wait"]:
            raise Refused("session is waiting")
        if c.get("where_dialog") is not None and c["where_dialog"] not in self.dialogs:
            raise Refused("no dialog %r" % c["where_dialog"])
        self.statement(S, Q, c.get("top"), c.get("where_dialog"), c.get("where_group"), c.get("waitfor_ms"), False)
        return {}

    def do_get_conversation_group(self, c):
        Q = self.queue(c["queue"])
        S = self.session(c["session"])
        if S["wait"]:
            raise Refused("session is waiting")
        self.statement(S, Q, None, None, None, c.get("waitfor_ms"), True)
        return {}

    # ------------------------------------------------------------ activation
    def look(self, Q, trigger):
        if Q["monitor"]:
            self.looks.append((Q, trigger, False))

    def settle(self):
        """every look waits until nothing else is due at its instant"""
        guard = 0
        while guard < 100000:
            guard += 1
            if self.agenda and self.agenda[0][0] <= self.now:
                self.run_due_one()
            elif self.looks:
                Q, trig, emp = self.looks.pop(0)
                self.do_look(Q, trig, emp)
            else:
                break

    def unread(self, Q):
        return [m for m in Q["msgs"] if m["by"] is None]

    def running_tasks(self, Q):
        return [t for t in Q["tasks"] if not t["exited"]]

    def waiting_readers(self, Q):
        return [s for s in self.sessions.values() if s["wait"] and s["wait"]["q"] is Q
                and s["wait"]["wd"] is None and s["wait"]["wg"] is None]

    def do_look(self, Q, trig, arrived_on_empty=False):
        if not Q["monitor"]:
            return
        necessary = None
        if arrived_on_empty and not self.running_tasks(Q):
            necessary = "ACT-06"
        elif self.unread(Q) and not self.waiting_readers(Q):
            win = PARAMS["activation_empty_window_s"] * 1000
            if Q["last_empty"] is None or self.now - Q["last_empty"] >= win:
                # a procedure started and not yet reading counts as a waiting reader
                if not any(t["state"] == "starting" for t in self.running_tasks(Q)):
                    necessary = "ACT-07"
        if necessary is None:
            return
        self.tr("activation_necessary", rule=necessary, trigger=trig, **self.qf(Q))
        started = None
        # internal
        if Q["status"] == "ON" and Q["proc"]:
            if len(self.running_tasks(Q)) < (Q["max"] or 0):
                started = self.start_proc(Q)
            else:
                self.tr("activation_withheld", reason="MAX_QUEUE_READERS", **self.qf(Q))
        # external
        if Q["notifs"]:
            if Q["notified_until"] is not None:
                self.tr("activation_withheld", reason="notification time-out", **self.qf(Q))
            else:
                for n in Q["notifs"]:
                    self.ev("event_notification", notification=n, event_type="QUEUE_ACTIVATION", **self.qf(Q))
                Q["last_act"] = self.now
                Q["notified_until"] = self.now + int(PARAMS["external_activation_timeout_s"] * 1000)
                self.sched(Q["notified_until"], "notify_timeout", Q)
        if started is not None:
            # the started procedure's first RECEIVE comes once the look is done
            self.proc_receive(started)

    def due_notify_timeout(self, Q):
        if Q["notified_until"] is not None and Q["notified_until"] == self.now:
            Q["notified_until"] = None
            self.ev("activation_time_out", **self.qf(Q))
            self.looks.append((Q, "external activation time-out", False))

    def start_proc(self, Q):
        Q["task_n"] += 1
        n = Q["task_n"]
        name = "%s#%d" % (Q["name"], n)
        S = self.session(name)
        spec = Q["db"]["procs"].get(Q["proc"], {})
        T = {"n": n, "q": Q, "session": S, "spec": spec, "exited": False, "state": "starting",
             "proc": Q["proc"]}
        S["task"] = T
        Q["tasks"].append(T)
        Q["last_act"] = self.now
        self.ev("procedure_started", procedure_name=Q["proc"], spid=S["spid"], task=n, **self.qf(Q))
        if spec.get("receives", True) is False:
            T["state"] = "idle"
            return None
        return T

    def proc_receive(self, T):
        S = T["session"]
        spec = T["spec"]
        T["state"] = "receiving"
        S["tx"] = True
        top = spec.get("receive_top", 1) if "receive_top" in spec else 1
        r = self.statement(S, T["q"], top, None, None, spec.get("waitfor_ms"), False)
        if r == "rows":
            self.proc_got(S)
        elif r == "empty":
            self.proc_empty(S)

    def proc_got(self, S):
        T = S["task"]
        T["state"] = "working"
        self.sched(self.now + int(T["spec"].get("work_ms") or 0), "proc_step", T)

    def due_proc_step(self, T):
        if T["exited"] or T["state"] != "working":
            return
        S = T["session"]
        self.commit(S)
        self.proc_receive(T)

    def proc_empty(self, S):
        T = S["task"]
        if S["tx"]:
            self.commit(S)
        self.exit_task(T, "empty RECEIVE")

    def exit_task(self, T, reason):
        T["exited"] = True
        T["state"] = "exited"
        S = T["session"]
        Q = T["q"]
        if S["wait"]:
            S["wait"] = None
        if S["tx"]:
            self.commit(S)
        self.ev("procedure_exited", reason=reason, spid=S["spid"], task=T["n"], **self.qf(Q))
        S["task"] = None
        if not self.running_tasks(Q):
            self.look(Q, "all procedures exited")

    def do_exit_procedure(self, c):
        Q = self.queue(c["queue"])
        for T in Q["tasks"]:
            if T["n"] == c["task"] and not T["exited"]:
                self.exit_task(T, "exited")
                return {}
        raise Refused("no running task %r" % c["task"])

    def do_alter_queue(self, c):
        Q = self.queue(c["queue"])
        if c.get("status") is not None:
            Q["status"] = c["status"].upper()
        if c.get("procedure_name") is not None:
            Q["proc"] = c["procedure_name"]
        if c.get("max_queue_readers") is not None:
            Q["max"] = c["max_queue_readers"]
        self.ev("queue_altered", **self.qf(Q))
        self.update_monitor(Q)
        self.look(Q, "ALTER QUEUE")
        return {}

    def do_create_event_notification(self, c):
        Q = self.queue(c["queue"])
        if c["name"] in Q["notifs"]:
            raise Refused("event notification exists")
        Q["notifs"].append(c["name"])
        self.update_monitor(Q)
        return {}

    def do_drop_event_notification(self, c):
        Q = self.queue(c["queue"])
        if c["name"] not in Q["notifs"]:
            raise Refused("no event notification %r" % c["name"])
        Q["notifs"].remove(c["name"])
        if not Q["notifs"]:
            Q["notified_until"] = None
        self.update_monitor(Q)
        return {}

    # ------------------------------------------------------------- dialogs
    def do_begin_dialog(self, c):
        if c["dialog"] in self.dialogs:
            raise Refused("dialog exists")
        D = self.db(c["instance"], c["database"])
        if c["from_service"] not in D["services"]:
            raise Refused("no service %r" % c["from_service"])
        bi = c.get("to_broker_instance")
        self.group_n += 1
        self.dialogs[c["dialog"]] = {
            "name": c["dialog"], "i_inst": c["instance"], "i_db": c["database"], "i_dbo": D,
            "from": c["from_service"], "to": c["to_service"], "to_bi": bi, "ack_bi": None,
            "next": {False: 0, True: 0}, "i_group": "G%d" % self.group_n, "t_group": None,
            "i_queue": D["queues"].get(D["services"][c["from_service"]]), "t_queue": None,
            "t_inst": None, "t_db": None, "order": len(self.dialogs), "expect": {False: 0, True: 0},
            "waiting": {False: [], True: []}, "acked": False,
        }
        self.ev("dialog_begun", dialog=c["dialog"], instance=c["instance"], database=c["database"],
                from_service=c["from_service"], to_service=c["to_service"], to_broker_instance=bi)
        return {}

    def do_send(self, c):
        Dg = self.dialogs.get(c["dialog"])
        if Dg is None:
            raise Refused("no dialog %r has been begun" % c["dialog"])
        ft = bool(c.get("from_target"))
        if ft and Dg["t_db"] is None:
            raise Refused("the target has not received the dialog")
        n = Dg["next"][ft]
        Dg["next"][ft] = n + 1
        iname = Dg["t_inst"] if ft else Dg["i_inst"]
        dname = Dg["t_db"] if ft else Dg["i_db"]
        self.ev("message_sent", dialog=Dg["name"], instance=iname, database=dname, from_target=ft,
                message_sequence_number=n)
        M = {"dialog": Dg["name"], "seq": n, "ft": ft, "body": c.get("body"), "mtype": c.get("message_type"),
             "origin": iname, "hops": 0, "received": self.now, "lost": 0, "lost_every": False,
             "where": None}
        if Dg["waiting"][ft]:
            Dg["waiting"][ft].append(M)
            M["where"] = ("tq", iname)
            M["wait_at"] = iname
            M["inside"] = True
            M["delayed"] = False
            M["received_wait"] = self.now
            M["status"] = "waiting behind an earlier message"
            self.ev("transmission_pending", dialog=Dg["name"], from_target=ft, instance=iname,
                    message_sequence_number=n, status=M["status"])
            return {"message_sequence_number": n}
        self.route(M, iname, inside=True)
        return {"message_sequence_number": n}

    def mfields(self, M):
        return {"dialog": M["dialog"], "from_target": M["ft"], "message_sequence_number": M["seq"]}

    # ------------------------------------------------------------- routing
    def alive_db_with_service(self, I, service):
        out = []
        for D in I["dbs"].values():
            if D["started"] and D["role"] != "mirror" and service in D["services"]:
                out.append(D)
        return out

    def target_service(self, Dg, ft):
        return Dg["from"] if ft else Dg["to"]

    def conv_bi(self, Dg, ft):
        if ft:
            return Dg["i_dbo"]["bi"]
        return Dg["ack_bi"] or Dg["to_bi"]

    def live(self, r):
        return r["expires"] is None or r["expires"] > self.now

    def route(self, M, iname, inside, retry=False):
        """route message M at instance iname. inside: originates in this instance"""
        I = self.instances[iname]
        Dg = self.dialogs[M["dialog"]]
        ft = M["ft"]
        service = self.target_service(Dg, ft)
        bi = self.conv_bi(Dg, ft)
        if not inside and ft and bi is not None:
            for D in I["dbs"].values():
                if D["bi"] is not None and up(D["bi"]) == up(bi) and D["role"] != "mirror":
                    self.ev("reply_recognised", broker_instance=bi, instance=iname, **self.mfields(M))
                    self.deliver_db(M, I, D)
                    return
        if inside:
            dbname = Dg["t_db"] if ft else Dg["i_db"]
            table = I["dbs"][dbname]["routes"]
            tname = "%s.sys.routes" % dbname
        else:
            table = I["routes"]
            tname = "msdb.sys.routes"
        routes = [r for r in table if self.live(r)]
        step, matched, picked_bi = self.match(routes, service, bi, I, iname, tname, M)
        if step in ("RTM-4", "RTM-7"):
            self.tr("routes_matched", step=step, table=tname, routes=[], broker_instance=None, instance=iname,
                    **self.mfields(M))
            self.delay(M, iname, inside, step)
            return
        self.tr("routes_matched", step=step, table=tname, routes=[r["name"] for r in matched],
                broker_instance=(up(picked_bi) if picked_bi else None), instance=iname, **self.mfields(M))
        self.choose_and_go(M, I, inside, matched, service, bi, tname)

    def match(self, routes, service, bi, I, iname, tname, M):
        if bi is not None:
            m = [r for r in routes if r["service"] == service and r["bi"] is not None and up(r["bi"]) == up(bi)]
            if m:
                return "RTM-1", m, None
        m = [r for r in routes if r["bi"] is None and r["service"] == service]
        if m:
            return "RTM-2", m, None
        if bi is None:
            m = [r for r in routes if r["service"] == service and r["bi"] is not None]
            if m:
                pick = m[0]["bi"]
                return "RTM-3", [r for r in m if up(r["bi"]) == up(pick)], pick
        for r in routes:
            if r["service"] == BCN:
                key = (iname, tname, r["name"], service)
                if key not in self.pending_dyn:
                    self.pending_dyn.add(key)
                    self.ev("routing_requested", instance=iname, table=tname, route=r["name"], service=service,
                            **self.mfields(M))
                    return "RTM-4", [], None
        m = [r for r in routes if r["service"] is None and r["bi"] is None]
        if m:
            return "RTM-5", m, None
        if bi is not None and self.alive_db_with_service(I, service):
            return "RTM-6", [{"name": "(as if LOCAL)", "service": service, "bi": None, "address": "LOCAL",
                               "mirror": None, "virtual": True}], None
        return "RTM-7", [], None

    def choose_and_go(self, M, I, inside, matched, service, bi, tname):
        iname = I["name"]
        groups = []
        seen = {}
        for r in matched:
            key = (up(r["bi"]), r["service"], up(r["address"]))
            if key in seen:
                continue
            seen[key] = r
            groups.append(r)
        steps = [
            ("RTC-1", [r for r in groups if r.get("mirror")]),
            ("RTC-2", [r for r in groups if up(r["address"]) == "LOCAL" and not r.get("mirror")]),
            ("RTC-3", [r for r in groups if up(r["address"]).startswith("TCP://") and not r.get("mirror")]),
            ("RTC-4", [r for r in groups if up(r["address"]) == "TRANSPORT" and not r.get("mirror")]),
        ]
        has_service = bool(self.alive_db_with_service(I, service))
        for step, cands in steps:
            if not cands:
                continue
            if step == "RTC-2" and not has_service:
                continue
            r = cands[0]
            self.tr("route_chosen", step=step, route=r["name"], candidates=[x["name"] for x in cands],
                    instance=iname, **self.mfields(M))
            self.go(M, I, inside, r, step, service, bi)
            return
        self.delay(M, iname, inside, "RTC-4")

    def go(self, M, I, inside, r, step, service, bi):
        iname = I["name"]
        addr = r["address"]
        if up(addr) == "LOCAL":
            rbi = r.get("bi") or bi
            if rbi is not None:
                D = None
                for d in I["dbs"].values():
                    if d["bi"] is not None and up(d["bi"]) == up(rbi) and d["started"] and d["role"] != "mirror" \
                            and service in d["services"]:
                        D = d
                if D is None:
                    self.drop(M, iname, "no database holds the broker instance", "RTL-2")
                    return
                self.deliver_db(M, I, D)
                return
            Dg = self.dialogs[M["dialog"]]
            cands = self.alive_db_with_service(I, service)
            home = Dg["t_db"] if M["ft"] else Dg["i_db"]
            cands.sort(key=lambda d: 0 if d["name"] == home and iname == (Dg["t_inst"] if M["ft"] else Dg["i_inst"]) else 1)
            if not cands:
                self.delay(M, iname, inside, "RTC-4")
                return
            self.deliver_db(M, I, cands[0])
            return
        if not inside and not I["forwarding"]:
            self.drop(M, iname, "message forwarding is not active", "RTC-5")
            return
        if r.get("mirror"):
            self.via_mirror(M, I, inside, r)
            return
        if up(addr) == "TRANSPORT":
            s = service or ""
            if up(s).startswith("TCP://"):
                rest = s[6:]
                hostport = rest.split("/", 1)[0]
                addr = "TCP://" + hostport
            else:
                self.delay(M, iname, inside, "RTC-4")
                return
        self.send_to(M, I, inside, addr)

    def instance_at(self, addr):
        for I in self.instances.values():
            if up(I["address"]) == up(addr):
                return I
        return None

    def send_to(self, M, I, inside, addr):
        iname = I["name"]
        dest = self.instance_at(addr)
        if dest is I:
            # RTX-2: treated as arriving from outside
            self.arrive_outside(M, I, via_self=True)
            return
        if not inside:
            lim = PARAMS["forward_hop_limit"]
            if M["hops"] >= lim:
                self.drop(M, iname, "hop limit", "RTX-1")
                return
        self.transmit_or_wait(M, I, inside, addr)

    def transmit_or_wait(self, M, I, inside, addr):
        iname = I["name"]
        if M["dialog"] in I["failed_tx"]:
            self.wait_msg(M, iname, inside, "failed: the transmitter cannot send the dialog", addr=addr)
            M["failed"] = True
            return
        key = up(addr)
        conn = I["conns"].get(key)
        if conn is None:
            sup = I["suppressed"].get(key)
            if sup is None or sup <= self.now:
                conn = self.connect(I, addr)
        if conn is None:
            self.wait_msg(M, iname, inside, "waiting for a connection to %s" % addr, addr=addr)
            return
        self.transmit(M, I, inside, addr)

    def connect(self, I, addr):
        key = up(addr)
        dest = self.instance_at(addr)
        if dest is None or not dest["reachable"]:
            self.ev("connection_attempt", instance=I["name"], address=addr, result="refused")
            I["suppressed"][key] = self.now + SUPPRESS_FAILED_MS
            return None
        self.ev("connection_attempt", instance=I["name"], address=addr, result="connected")
        conn = {"address": addr, "opened": self.now, "last": self.now}
        I["conns"][key] = conn
        I["suppressed"].pop(key, None)
        return conn

    def transmit(self, M, I, inside, addr):
        iname = I["name"]
        key = up(addr)
        conn = I["conns"][key]
        dest = self.instance_at(addr)
        if dest is None or not dest["reachable"]:
            del I["conns"][key]
            self.ev("connection_closed", instance=iname, address=conn["address"], reason="disconnected")
            I["suppressed"][key] = self.now + SUPPRESS_DISCONNECT_MS
            self.wait_msg(M, iname, inside, "waiting for a connection to %s" % addr, addr=addr)
            return
        conn["last"] = self.now
        if not inside:
            M["hops"] += 1
            self.ev("message_forwarded", instance=iname, address=addr, hops=M["hops"], **self.mfields(M))
        self.ev("message_transmitted", instance=iname, address=addr, to_instance=dest["name"], **self.mfields(M))
        Dg = self.dialogs[M["dialog"]]
        lk = (M["dialog"], M["seq"], M["ft"])
        if lk in Dg.get("lose", {}):
            ev = Dg["lose"][lk]
            if not ev:
                del Dg["lose"][lk]
            self.ev("message_lost_in_transit", instance=iname, address=addr, **self.mfields(M))
            return
        self.arrive_outside(M, dest, via_self=False)

    def arrive_outside(self, M, I, via_self):
        M = dict(M)
        M["where"] = None
        M["received"] = self.now
        self.route(M, I["name"], inside=False)

    def deliver_db(self, M, I, D):
        """a message reaches database D of instance I"""
        Dg = self.dialogs[M["dialog"]]
        local_origin = (M["origin"] == I["name"]) and M["hops"] == 0 and not M.get("remote")
        if M["origin"] != I["name"] or M.get("via_dispatch"):
            # came over the transport: through the dispatcher
            self.ev("dispatcher_buffered", instance=I["name"], database=D["name"], **self.mfields(M))
            B = {"m": M, "db": D, "arrived": self.now}
            I["buffers"].append(B)
            if I["dispatch_mode"] == "running":
                if I["dispatch_delay"]:
                    self.sched(self.now + int(I["dispatch_delay"] * 1000), "dispatch_save", (I["name"], B))
                else:
                    self.save_buffer(I, B)
            return
        self.enqueue(M, I, D)

    def due_dispatch_save(self, data):
        iname, B = data
        I = self.instances[iname]
        if B in I["buffers"] and I["dispatch_mode"] == "running":
            self.save_buffer(I, B)

    def save_buffer(self, I, B):
        M = B["m"]
        Dg = self.dialogs[M["dialog"]]
        exp = Dg["expect"][M["ft"]]
        if M["seq"] < exp:
            I["buffers"].remove(B)
            return
        if M["seq"] > exp:
            return  # out of order: stays until deleted
        I["buffers"].remove(B)
        self.enqueue(M, I, B["db"])
        # later ones now in order
        again = True
        while again:
            again = False
            for B2 in list(I["buffers"]):
                if B2["m"]["dialog"] == M["dialog"] and B2["m"]["ft"] == M["ft"] and \
                        B2["m"]["seq"] == Dg["expect"][M["ft"]] and I["dispatch_mode"] == "running" \
                        and B2["arrived"] + int(I["dispatch_delay"] * 1000) <= self.now:
                    I["buffers"].remove(B2)
                    self.enqueue(B2["m"], I, B2["db"])
                    again = True

    def enqueue(self, M, I, D):
        Dg = self.dialogs[M["dialog"]]
        ft = M["ft"]
        if Dg["expect"][ft] > M["seq"]:
            return  # duplicate
        Dg["expect"][ft] = M["seq"] + 1
        service = self.target_service(Dg, ft)
        qname = D["services"].get(service)
        Q = D["queues"].get(qname)
        if not ft:
            if Dg["t_db"] is None:
                self.group_n += 1
                Dg["t_group"] = "G%d" % self.group_n
                Dg["t_inst"] = I["name"]
                Dg["t_db"] = D["name"]
                Dg["t_queue"] = Q
                Dg["t_dbo"] = D
            group = Dg["t_group"]
        else:
            group = Dg["i_group"]
        if Q is None:
            return
        was_empty = not self.unread(Q)
        m = {"dialog": M["dialog"], "seq": M["seq"], "group": group, "by": None, "q": Q, "body": M.get("body"),
             "mtype": M.get("mtype"), "dialog_order": Dg["order"]}
        Q["msgs"].append(m)
        self.ev("message_arrived", instance=I["name"], database=D["name"], queue=Q["name"], dialog=M["dialog"],
                message_sequence_number=M["seq"], from_target=ft, conversation_group=group, service=service)
        if not ft and not Dg["acked"] and D["bi"] is not None:
            Dg["acked"] = True
            Dg["ack_bi"] = D["bi"]
            self.ev("acknowledged", dialog=M["dialog"], instance=Dg["i_inst"], broker_instance=D["bi"])
        self.serve_waiters()
        if Q["monitor"]:
            # ACT-06 is judged on the queue as the message found it
            self.looks.append((Q, "message arrived", was_empty))

    def drop(self, M, iname, reason, rule):
        f = self.mfields(M)
        if TRACE:
            self.ev("message_dropped", instance=iname, reason=reason, rule=rule, **f)
        else:
            self.ev("message_dropped", instance=iname, reason=reason, **f)

    def delay(self, M, iname, inside, step):
        if TRACE:
            self.ev("conversation_delayed", instance=iname, step=step, **self.mfields(M))
        else:
            self.ev("conversation_delayed", instance=iname, **self.mfields(M))
        self.wait_msg(M, iname, inside, "delayed: no route", delayed=True)
        self.sched(self.now + int(PARAMS["delayed_retry_s"] * 1000), "retry", (M["dialog"], M["ft"], M["seq"], iname))

    def wait_msg(self, M, iname, inside, status, delayed=False, addr=None):
        I = self.instances[iname]
        Dg = self.dialogs[M["dialog"]]
        M["status"] = status
        M["addr"] = addr
        M["inside"] = inside
        M["delayed"] = delayed
        M["wait_at"] = iname
        if M.get("where") is None:
            M["received_wait"] = self.now
        M["where"] = ("tq" if inside else "fw", iname)
        if inside:
            lst = Dg["waiting"][M["ft"]]
            if M not in lst:
                lst.insert(0, M) if lst and lst[0]["seq"] > M["seq"] else lst.append(M)
        else:
            if M not in I["forwarder"]:
                I["forwarder"].append(M)
        self.ev("transmission_pending", instance=iname, status=status, **self.mfields(M))

    def unwait(self, M):
        Dg = self.dialogs[M["dialog"]]
        iname = M["wait_at"]
        I = self.instances[iname]
        if M in Dg["waiting"][M["ft"]]:
            Dg["waiting"][M["ft"]].remove(M)
        if M in I["forwarder"]:
            I["forwarder"].remove(M)

    def reroute(self, M):
        """route a waiting message again; then the ones behind it"""
        iname = M["wait_at"]
        inside = M["inside"]
        self.unwait(M)
        M["where"] = "moving"
        if inside:
            self.route(M, iname, inside=True)
        else:
            self.route(M, iname, inside=False)
        self.release_behind(M)

    def release_behind(self, M):
        """messages SENT while M waited at its instance waited behind it: they go on now"""
        if not M.get("inside"):
            return
        iname = M.get("wait_at")
        Dg = self.dialogs[M["dialog"]]
        lst = Dg["waiting"][M["ft"]]
        if M in lst:
            return
        behind = "waiting behind an earlier message"
        while True:
            here = [m for m in lst if m.get("wait_at") == iname]
            if not here or here[0].get("status") != behind:
                return
            nxt = here[0]
            lst.remove(nxt)
            nxt["where"] = "moving"
            self.route(nxt, iname, inside=True)
            if nxt in lst:
                return

    def due_retry(self, key):
        dialog, ft, seq, iname = key
        Dg = self.dialogs.get(dialog)
        if not Dg:
            return
        I = self.instances[iname]
        cand = [m for m in Dg["waiting"][ft] if m["seq"] == seq and m.get("delayed") and m.get("wait_at") == iname]
        cand += [m for m in I["forwarder"] if m["dialog"] == dialog and m["ft"] == ft and m["seq"] == seq and m.get("delayed")]
        if not cand:
            return
        M = cand[0]
        self.ev("routing_retried", instance=iname, **self.mfields(M))
        self.reroute(M)

    # ----------------------------------------------------------- mirroring
    def probe(self, M, I, r, addr):
        dest = self.instance_at(addr)
        Dg = self.dialogs[M["dialog"]]
        service = self.target_service(Dg, M["ft"])
        if dest is None or not dest["reachable"]:
            ans = "unreachable"
        else:
            ans = "not principal"
            for D in dest["dbs"].values():
                if D["role"] == "principal" and service in D["services"]:
                    ans = "principal"
        return ans

    def via_mirror(self, M, I, inside, r):
        iname = I["name"]
        if r.get("principal") is not None:
            addr = r["principal"]
            ans = self.probe(M, I, r, addr)
            if ans == "principal":
                self.send_to(M, I, inside, addr)
                return
            self.ev("principal_lost", instance=iname, route=r["name"], address=addr, answer=ans, **self.mfields(M))
            r["principal"] = None
            other = r["mirror"] if up(addr) == up(r["address"]) else r["address"]
            ans2 = self.probe(M, I, r, other)
            self.ev("principal_probe", instance=iname, route=r["name"], address=other, answer=ans2, **self.mfields(M))
            if ans2 == "principal":
                r["principal"] = other
                self.send_to(M, I, inside, other)
                return
            self.wait_msg(M, iname, inside, "waiting for the principal", addr=None)
            M["mroute"] = r
            return
        found = None
        for addr in (r["address"], r["mirror"]):
            ans = self.probe(M, I, r, addr)
            self.ev("principal_probe", instance=iname, route=r["name"], address=addr, answer=ans, **self.mfields(M))
            if ans == "principal" and found is None:
                found = addr
        if found:
            r["principal"] = found
            self.send_to(M, I, inside, found)
            return
        self.wait_msg(M, iname, inside, "waiting for the principal", addr=None)
        M["mroute"] = r

    def do_failover(self, c):
        D = self.db(c["instance"], c["database"])
        D["role"] = "principal"
        for I in self.instances.values():
            if I["name"] == c["instance"]:
                continue
            o = I["dbs"].get(c["database"])
            if o is not None and o["role"] == "principal":
                o["role"] = "mirror"
        return {}

    # ----------------------------------------------------------- route cmds
    def table(self, iname, dname):
        I = self.inst(iname)
        if dname is None:
            return I["routes"]
        return self.db(iname, dname)["routes"]

    def check_addr(self, a):
        if a is None:
            return
        u = up(a)
        if u in ("LOCAL", "TRANSPORT"):
            return
        if not u.startswith("TCP://") or len(u) <= 6:
            raise Refused("malformed address %r" % a)

    def do_create_route(self, c):
        t = self.table(c["instance"], c.get("database"))
        r = c["route"]
        if any(x["name"] == r["name"] for x in t):
            raise Refused("route exists")
        self.check_addr(r.get("address"))
        self.check_addr(r.get("mirror_address"))
        t.append(self.mkroute(r))
        self.ev("route_created", instance=c["instance"], database=c.get("database") or "msdb", route=r["name"])
        self.route_changed(c["instance"], [r.get("service_name")])
        return {}

    def do_alter_route(self, c):
        t = self.table(c["instance"], c.get("database"))
        r = c["route"]
        for x in t:
            if x["name"] == r["name"]:
                old = x["service"]
                self.check_addr(r.get("address"))
                self.check_addr(r.get("mirror_address"))
                if r.get("service_name") is not None:
                    x["service"] = r["service_name"]
                if r.get("broker_instance") is not None:
                    x["bi"] = r["broker_instance"]
                if r.get("address") is not None:
                    x["address"] = r["address"]
                if r.get("mirror_address") is not None:
                    x["mirror"] = r["mirror_address"]
                if r.get("lifetime_s") is not None:
                    x["expires"] = self.now + int(r["lifetime_s"] * 1000)
                if x.get("principal") and up(x["principal"]) not in (up(x["address"]), up(x["mirror"])):
                    x["principal"] = None
                self.ev("route_altered", instance=c["instance"], database=c.get("database") or "msdb", route=r["name"])
                self.route_changed(c["instance"], [old, x["service"]])
                return {}
        raise Refused("no route %r" % r["name"])

    def do_drop_route(self, c):
        t = self.table(c["instance"], c.get("database"))
        for x in t:
            if x["name"] == c["name"]:
                t.remove(x)
                self.ev("route_dropped", instance=c["instance"], database=c.get("database") or "msdb", route=c["name"])
                self.route_changed(c["instance"], [x["service"]])
                return {}
        raise Refused("no route %r" % c["name"])

    def do_answer_routing_request(self, c):
        t = self.table(c["instance"], c.get("database"))
        r = c["route"]
        tname = "msdb.sys.routes" if c.get("database") is None else "%s.sys.routes" % c["database"]
        for k in list(self.pending_dyn):
            if k[0] == c["instance"] and k[1] == tname and k[3] == r.get("service_name"):
                self.pending_dyn.discard(k)
        t[:] = [x for x in t if x["name"] != r["name"]]
        t.append(self.mkroute(r))
        self.ev("route_created", instance=c["instance"], database=c.get("database") or "msdb", route=r["name"])
        self.route_changed(c["instance"], [r.get("service_name")])
        return {}

    def route_changed(self, iname, services):
        I = self.instances[iname]
        I["changed_since"] = self.now
        for Dg in self.dialogs.values():
            svc_i = Dg["to"]
            for ft in (False, True):
                for M in Dg["waiting"][ft]:
                    if M.get("wait_at") == iname and (None in services or self.target_service(Dg, ft) in services):
                        I["touched"].add(Dg["name"])
        for M in I["forwarder"]:
            Dg = self.dialogs[M["dialog"]]
            if None in services or self.target_service(Dg, M["ft"]) in services:
                I["touched"].add(M["dialog"])

    # ------------------------------------------------------------- faults
    def do_set_message_forwarding(self, c):
        I = self.inst(c["instance"])
        I["forwarding"] = bool(c["active"])
        return {}

    def do_set_reachable(self, c):
        I = self.inst(c["instance"])
        I["reachable"] = bool(c["reachable"])
        if not I["reachable"]:
            for J in self.instances.values():
                if J is I:
                    continue
                k = up(I["address"])
                if k in J["conns"]:
                    conn = J["conns"].pop(k)
                    self.ev("connection_closed", instance=J["name"], address=conn["address"], reason="disconnected")
                    J["suppressed"][k] = self.now + SUPPRESS_DISCONNECT_MS
        return {}

    def do_fail_task_handlers(self, c):
        I = self.inst(c["instance"])
        I["running"] = max(0, I["running"] - int(c["count"]))
        return {}

    def do_set_dispatcher_saving(self, c):
        I = self.inst(c["instance"])
        I["dispatch_mode"] = c["mode"]
        I["dispatch_delay"] = c.get("delay_s") or 0
        if c["mode"] == "running":
            for B in list(I["buffers"]):
                if B in I["buffers"]:
                    if B["arrived"] + int(I["dispatch_delay"] * 1000) <= self.now:
                        self.save_buffer(I, B)
                    else:
                        self.sched(B["arrived"] + int(I["dispatch_delay"] * 1000), "dispatch_save", (I["name"], B))
        return {}

    def do_lose_in_transit(self, c):
        Dg = self.dialogs.get(c["dialog"])
        if Dg is None:
            raise Refused("no dialog %r" % c["dialog"])
        Dg.setdefault("lose", {})[(c["dialog"], c["sequence"], bool(c.get("from_target")))] = bool(c.get("every"))
        return {}

    def do_drop_connection(self, c):
        I = self.inst(c["instance"])
        k = up(c["address"])
        conn = I["conns"].pop(k, None)
        if conn is None:
            raise Refused("no connection")
        self.ev("connection_closed", instance=I["name"], address=conn["address"], reason="disconnected")
        I["suppressed"][k] = self.now + SUPPRESS_DISCONNECT_MS
        return {}

    def do_fail_transmission(self, c):
        Dg = self.dialogs.get(c["dialog"])
        if Dg is None:
            raise Refused("no dialog %r" % c["dialog"])
        for iname in {Dg["i_inst"], Dg["t_inst"]}:
            if iname:
                self.instances[iname]["failed_tx"].add(Dg["name"])
        return {}

    def do_create_master_key(self, c):
        D = self.db(c["instance"], c["database"])
        D["master_key"] = True
        return {}

    def do_stop_ack_cleanup(self, c):
        D = self.db(c["instance"], c["database"])
        D["ack_cleanup"] = False
        return {}

    def do_advance_time(self, c):
        return {}

    # ------------------------------------------------------------- timer
    def due_timer(self, _):
        self.sched(self.now + TIMER_MS, "timer", None)
        for I in self.instances.values():
            I["timer"] += 1
        n = self.instances and next(iter(self.instances.values()))["timer"]
        tasks_for = {}
        for I in self.instances.values():
            n = I["timer"]
            tasks = ["queue monitors", "task handlers", "message dispatcher"]
            if n % 2 == 0:
                tasks += ["transport connections", "transmitter"]
            if n % 5 == 0:
                tasks += ["idle connections", "forwarder", "broker start", "broker configuration notification",
                          "acknowledged message clean-up"]
            tasks_for[I["name"]] = tasks
            self.tr("timer_notification", instance=I["name"], number=n, tasks=tasks)
        insts = list(self.instances.values())
        # every notification
        for I in insts:
            for D in I["dbs"].values():
                for Q in D["queues"].values():
                    if Q["monitor"]:
                        self.looks.append((Q, "timer notification", False))
        # the looks run once the instant has settled (after the other periodic tasks of this notification)
        for I in insts:
            if I["running"] < I["handlers"]:
                k = I["handlers"] - I["running"]
                I["running"] = I["handlers"]
                self.ev("task_handlers_restarted", instance=I["name"], count=k)
        for I in insts:
            self.dispatcher_clean(I)
        for I in insts:
            if I["timer"] % 2 == 0:
                self.transport_task(I)
        for I in insts:
            if I["timer"] % 2 == 0:
                self.transmitter_task(I)
        for I in insts:
            if I["timer"] % 5 == 0:
                self.idle_task(I)
        for I in insts:
            if I["timer"] % 5 == 0:
                self.forwarder_task(I)
        for I in insts:
            if I["timer"] % 5 == 0:
                for D in I["dbs"].values():
                    if not D["started"]:
                        if D["master_key"]:
                            D["started"] = True
                            self.ev("database_broker_started", instance=I["name"], database=D["name"])
        for I in insts:
            if I["timer"] % 5 == 0:
                for D in I["dbs"].values():
                    if not D["ack_cleanup"] and self.db_has_dialogs(I, D):
                        D["ack_cleanup"] = True
                        self.ev("ack_cleanup_resumed", instance=I["name"], database=D["name"])

    def db_has_dialogs(self, I, D):
        for Dg in self.dialogs.values():
            if (Dg["i_inst"] == I["name"] and Dg["i_db"] == D["name"]) or \
                    (Dg["t_inst"] == I["name"] and Dg["t_db"] == D["name"]):
                return True
        return False

    def dispatcher_clean(self, I):
        snapshot = list(I["buffers"])
        for B in snapshot:
            M = B["m"]
            Dg = self.dialogs[M["dialog"]]
            exp = Dg["expect"][M["ft"]]
            reason = None
            # out of order: a gap before it that is not buffered
            if M["seq"] > exp:
                have = {b["m"]["seq"] for b in snapshot if b["m"]["dialog"] == M["dialog"] and b["m"]["ft"] == M["ft"]}
                if any(s not in have for s in range(exp, M["seq"])):
                    reason = "out of order"
            if reason is None and self.now - B["arrived"] >= STALE_DISPATCH_MS:
                reason = "stale"
            if reason:
                I["buffers"].remove(B)
                self.ev("dispatcher_deleted", instance=I["name"], database=B["db"]["name"], reason=reason,
                        **self.mfields(M))

    def transport_task(self, I):
        addrs = []
        def for_conn(M):
            return M.get("addr") and not M.get("failed") and M.get("status", "").startswith("waiting for a connection")
        for M in self.waiting_at(I):
            if for_conn(M) and up(M["addr"]) not in [up(a) for a in addrs]:
                addrs.append(M["addr"])
        for addr in addrs:
            key = up(addr)
            if key in I["conns"]:
                continue
            sup = I["suppressed"].get(key)
            if sup is not None and sup > self.now:
                continue
            conn = self.connect(I, addr)
            if conn:
                for M in list(self.waiting_at(I)):
                    if for_conn(M) and up(M["addr"]) == key and M.get("where") is not None and M.get("wait_at") == I["name"]:
                        self.unwait(M)
                        M["where"] = "moving"
                        self.transmit(M, I, M["inside"], M["addr"])
                        self.release_behind(M)
        # mirrored routes waiting for principal
        for M in list(self.waiting_at(I)):
            if M.get("status") == "waiting for the principal" and M.get("wait_at") == I["name"]:
                self.reroute(M)

    def waiting_at(self, I):
        out = []
        for Dg in self.dialogs.values():
            for ft in (False, True):
                for M in Dg["waiting"][ft]:
                    if M.get("wait_at") == I["name"]:
                        out.append(M)
        out += list(I["forwarder"])
        return out

    def transmitter_task(self, I):
        names = set(I["touched"])
        I["touched"] = set()
        expired = False
        for tbl in [I["routes"]] + [D["routes"] for D in I["dbs"].values()]:
            for r in tbl:
                if r["expires"] is not None and r["expires"] <= self.now and not r["expired_seen"]:
                    r["expired_seen"] = True
                    expired = True
        firsts = []
        for Dg in self.dialogs.values():
            for ft in (False, True):
                lst = [m for m in Dg["waiting"][ft] if m.get("wait_at") == I["name"]]
                if lst:
                    firsts.append(lst[0])
        for M in I["forwarder"]:
            firsts.append(M)
        regs = []
        for M in firsts:
            if M["dialog"] in names or expired or (M.get("failed") and M["dialog"] in I["failed_tx"]):
                if M not in regs:
                    regs.append(M)
        for M in regs:
            I["failed_tx"].discard(M["dialog"])
        self.tr("transmitter_reclassified", instance=I["name"], dialogs=sorted({M["dialog"] for M in regs}))
        for M in regs:
            M["failed"] = False
            if M.get("wait_at") == I["name"] and M.get("where") is not None and M.get("where") != "moving":
                self.reroute(M)

    def idle_task(self, I):
        for k, conn in list(I["conns"].items()):
            if self.now - conn["last"] >= IDLE_CLOSE_MS:
                del I["conns"][k]
                self.ev("connection_closed", instance=I["name"], address=conn["address"], reason="idle")

    def forwarder_task(self, I):
        for M in list(I["forwarder"]):
            if self.now - M["received_wait"] >= FORWARD_STALE_MS:
                I["forwarder"].remove(M)
                self.ev("forwarded_message_deleted", instance=I["name"], **self.mfields(M))

    # ------------------------------------------------------------- views
    def do_query_view(self, c):
        v = c["view"]
        iname = c.get("instance")
        dname = c.get("database")
        rows = []
        if v == "sys.dm_broker_queue_monitors":
            for I in self.instances.values():
                for D in I["dbs"].values():
                    for Q in D["queues"].values():
                        if not Q["monitor"]:
                            continue
                        if Q["notified_until"] is not None:
                            st = "NOTIFIED"
                        elif self.running_tasks(Q) or any(s["wait"] and s["wait"]["q"] is Q and not s["wait"]["gcg"] for s in self.sessions.values()):
                            st = "RECEIVES_OCCURRING"
                        else:
                            st = "INACTIVE"
                        rows.append({"database_id": D["id"], "queue_id": Q["qid"], "instance": I["name"],
                                     "database": D["name"], "queue": Q["name"], "state": st,
                                     "last_empty_rowset_time": Q["last_empty"], "last_activated_time": Q["last_act"],
                                     "tasks_waiting": len(self.waiting_readers(Q))})
        elif v == "sys.dm_broker_activated_tasks":
            for I in self.instances.values():
                for D in I["dbs"].values():
                    for Q in D["queues"].values():
                        for T in self.running_tasks(Q):
                            rows.append({"spid": T["session"]["spid"], "database_id": D["id"], "queue_id": Q["qid"],
                                         "instance": I["name"], "database": D["name"], "queue": Q["name"],
                                         "task": T["n"], "procedure_name": T["proc"]})
        elif v == "sys.routes":
            for I in self.instances.values():
                if iname is not None and I["name"] != iname:
                    continue
                if dname is None:
                    tables = [("msdb", I["routes"])]
                else:
                    tables = [(dname, I["dbs"][dname]["routes"])] if dname in I["dbs"] else []
                for dn, t in tables:
                    for r in t:
                        rows.append({"instance": I["name"], "database": dn, "name": r["name"],
                                     "remote_service_name": r["service"], "broker_instance": r["bi"],
                                     "address": r["address"], "mirror_address": r["mirror"], "expires_ms": r["expires"]})
        elif v == "sys.transmission_queue":
            for Dg in self.dialogs.values():
                for ft in (False, True):
                    for M in Dg["waiting"][ft]:
                        if iname is not None and M.get("wait_at") != iname:
                            continue
                        rows.append({"instance": M.get("wait_at"), "dialog": M["dialog"],
                                     "message_sequence_number": M["seq"], "from_target": ft,
                                     "to_service_name": self.target_service(Dg, ft),
                                     "transmission_status": M.get("status") or "", "received_ms": M.get("received_wait", M["received"])})
        elif v == "sys.conversation_endpoints":
            for Dg in self.dialogs.values():
                ends = [(Dg["i_inst"], Dg["i_db"], Dg["to"], Dg["ack_bi"] or Dg["to_bi"], Dg["acked"])]
                if Dg["t_inst"]:
                    ends.append((Dg["t_inst"], Dg["t_db"], Dg["from"], Dg["i_dbo"]["bi"], True))
                for (i, d, far, fbi, ack) in ends:
                    if iname is not None and i != iname:
                        continue
                    if dname is not None and d != dname:
                        continue
                    rows.append({"dialog": Dg["name"], "instance": i, "database": d, "far_service": far,
                                 "far_broker_instance": fbi, "acknowledged": ack})
        elif v == "sys.dm_broker_connections":
            for I in self.instances.values():
                if iname is not None and I["name"] != iname:
                    continue
                for conn in I["conns"].values():
                    rows.append({"instance": I["name"], "address": conn["address"], "state": "CONNECTED",
                                 "opened_ms": conn["opened"], "last_activity_ms": conn["last"]})
        elif v == "sbtck.dispatcher_buffers":
            for I in self.instances.values():
                if iname is not None and I["name"] != iname:
                    continue
                for B in I["buffers"]:
                    M = B["m"]
                    rows.append({"instance": I["name"], "database": B["db"]["name"], "dialog": M["dialog"],
                                 "message_sequence_number": M["seq"], "from_target": M["ft"], "arrived_ms": B["arrived"]})
        elif v == "sbtck.forwarder":
            for I in self.instances.values():
                if iname is not None and I["name"] != iname:
                    continue
                for M in I["forwarder"]:
                    Dg = self.dialogs[M["dialog"]]
                    rows.append({"instance": I["name"], "dialog": M["dialog"], "message_sequence_number": M["seq"],
                                 "from_target": M["ft"], "to_service_name": self.target_service(Dg, M["ft"]),
                                 "transmission_status": M.get("status") or "", "received_ms": M["received_wait"]})
        elif v == "sbtck.periodic_state":
            for I in self.instances.values():
                if iname is not None and I["name"] != iname:
                    continue
                for D in I["dbs"].values():
                    rows.append({"instance": I["name"], "task_handlers": I["handlers"],
                                 "running_task_handlers": I["running"], "database": D["name"],
                                 "broker_started": D["started"], "ack_cleanup_running": D["ack_cleanup"]})
        else:
            raise Refused("no view %r" % v)
        return {"rows": rows}

    # ------------------------------------------------------------- dispatch
    def execute(self, c):
        kind = c["kind"]
        at = c["at_ms"]
        if kind != "start":
            self.run_until(at)
        fn = getattr(self, "do_" + kind, None)
        if fn is None:
            raise Refused("unknown command %r" % kind)
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
        req = json.loads(line)
        rid = req.get("id")
        op = req.get("op")
        if op == "hello":
            ans = {"id": rid, "ok": True, "result": {"name": "cr11", "version": "0.1", "protocol": PROTOCOL,
                                                    "capabilities": CAPS, "params": PARAMS}}
        elif op == "bye":
            out.write(json.dumps({"id": rid, "ok": True}) + "\n")
            out.flush()
            return
        elif op == "execute":
            b.events = []
            try:
                res = b.execute(req["command"])
                ans = {"id": rid, "ok": True, "result": res, "events": b.events}
            except Refused as e:
                ans = {"id": rid, "ok": False, "error": str(e), "events": b.events}
            except Exception as e:  # a bug of ours
                traceback.print_exc(file=sys.stderr)
                ans = {"id": rid, "ok": False, "fault": True, "error": "%s: %s" % (type(e).__name__, e),
                       "events": []}
            b.events = []
        else:
            ans = {"id": rid, "ok": False, "error": "unknown op %r" % op}
        out.write(json.dumps(ans) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
