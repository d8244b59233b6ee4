#!/usr/bin/env python3
"""A clean-room Service Broker model speaking the sbtck protocol (2.2) over stdio.

Written from the kit's user documentation and the source documents only.
Standard library only.
"""
import heapq
import json
import os
import sys
import traceback

PROTOCOL = "2.2"
TRACE = os.environ.get("SBTCK_CR10_NO_TRACE") != "1"

PARAMS = {
    "activation_empty_window_s": 5,
    "external_activation_timeout_s": 60,
    "delayed_retry_s": 10,
    "forward_hop_limit": 4,
}
CAPS = ["activation", "external_activation", "routing", "mirroring", "dynamic_routing",
        "forwarding", "periodic_tasks"]
if TRACE:
    CAPS.append("decision_trace")

DYN_SVC = "http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice"
TIMER_MS = 5000
STALE_DISPATCH_MS = 10000
SUPPRESS_DISC_MS = 15000
SUPPRESS_FAIL_MS = 60000
IDLE_MS = 90000
FWD_STALE_MS = 60000


class Refuse(Exception):
    pass


def up(s):
    return s.upper() if isinstance(s, str) else s


class Msg:
    __slots__ = ("routed_ms", "dialog", "seq", "from_target", "hops", "received_ms", "status", "where",
                 "body", "mtype", "arrived_ms", "wait_kind", "wait_addr", "route_key", "origin_inst")

    def __init__(self, dialog, seq, from_target, body, mtype):
        self.dialog = dialog
        self.seq = seq
        self.from_target = from_target
        self.hops = 0
        self.received_ms = None
        self.status = ""
        self.where = None
        self.body = body
        self.mtype = mtype
        self.arrived_ms = None
        self.wait_kind = None
        self.wait_addr = None
        self.route_key = None
        self.origin_inst = None
        self.routed_ms = None

    def key(self):
        return (self.dialog, self.seq, self.from_target)


class Broker:
    def __init__(self):
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self):
        self.now = 0
        self.t0 = 0
        self.events = []
        self.agenda = []
        self.seqno = 0
        self.looks = []
        self.instances = {}
        self.inst_order = []
        self.dialogs = {}
        self.sessions = {}
        self.spid_next = 51
        self.started = False
        self.expected_seq = {}
        self.releasing = set()

    def ev(self, kind, **f):
        e = {"at_ms": self.now, "kind": kind}
        e.update(f)
        self.events.append(e)

    def at(self, t, fn, *args):
        self.seqno += 1
        heapq.heappush(self.agenda, (t, self.seqno, fn, args))

    # ------------------------------------------------------------------ start
    def start(self, cmd):
        self.reset()
        self.started = True
        self.now = self.t0 = cmd["at_ms"]
        topo = cmd["topology"]
        for inst in topo.get("instances", []):
            name = inst["name"]
            I = {
                "name": name, "address": inst["address"], "cpus": inst.get("cpus") or 1,
                "forwarding": bool(inst.get("message_forwarding")),
                "msdb_routes": [self.mkroute(r, self.now) for r in inst.get("msdb_routes") or []],
                "dbs": {}, "db_order": [], "reachable": True,
                "conns": {}, "suppressed": {}, "timer_n": 0,
                "handlers": 0, "handlers_running": 0,
                "dispatcher": [], "disp_mode": "running", "disp_delay": 0,
                "forwarder": [], "tq": [], "failed": set(), "touched": set(),
                "expected_seq": {},
                "dyn_pending": set(),
            }
            self.instances[name] = I
            self.inst_order.append(name)
            dbid = 5
            for db in inst.get("databases", []):
                D = {
                    "name": db["name"], "id": dbid, "bi": db.get("broker_instance"),
                    "master_key": db.get("master_key", True) is not False,
                    "role": db.get("mirroring_role"),
                    "procs": {p["name"]: p for p in db.get("procedures") or []},
                    "queues": {}, "services": {}, "routes": [],
                    "started": False, "ack_cleanup": True, "inst": name,
                }
                dbid += 1
                qid = 1000 * D["id"]
                for q in db.get("queues", []):
                    qid += 1
                    act = q.get("activation") or {}
                    Q = {
                        "name": q["name"], "id": qid, "db": D["name"], "inst": name,
                        "status": (act.get("status") or "OFF").upper(),
                        "proc": act.get("procedure_name"),
                        "max": act.get("max_queue_readers") if act.get("max_queue_readers") is not None else 1,
                        "msgs": [], "ens": [], "monitor": False,
                        "last_empty": None, "last_act": None, "notified_until": None,
                        "tasks": {}, "task_n": 0,
                    }
                    D["queues"][Q["name"]] = Q
                for s in db.get("services", []):
                    D["services"][s["name"]] = s["queue"]
                for en in db.get("event_notifications") or []:
                    qn = en.get("queue")
                    if qn in D["queues"]:
                        D["queues"][qn]["ens"].append(en.get("name"))
                D["routes"] = [self.mkroute(r, self.now) for r in db.get("routes") or []]
                I["dbs"][D["name"]] = D
                I["db_order"].append(D["name"])
        self.ev("broker_started")
        for iname in self.inst_order:
            I = self.instances[iname]
            for dn in I["db_order"]:
                D = I["dbs"][dn]
                if D["master_key"]:
                    D["started"] = True
                    self.ev("database_broker_started", instance=iname, database=dn)
                else:
                    self.ev("database_broker_start_failed", instance=iname, database=dn,
                            reason="missing master key")
                for Q in D["queues"].values():
                    if Q["status"] == "ON" or Q["ens"]:
                        Q["monitor"] = True
                        self.ev("monitor_created", instance=iname, database=dn, queue=Q["name"])
            I["handlers"] = 2 * I["cpus"]
            I["handlers_running"] = I["handlers"]
            self.ev("task_handlers_started", instance=iname, count=I["handlers"])
            self.at(self.now + TIMER_MS, self.timer, iname)
        return {}

    def mkroute(self, r, now):
        lt = r.get("lifetime_s")
        return {
            "name": r["name"], "service_name": r.get("service_name"),
            "broker_instance": r.get("broker_instance"), "address": r.get("address") or "LOCAL",
            "mirror_address": r.get("mirror_address"),
            "expires_ms": None if lt is None else int(now + lt * 1000),
            "principal": None,
        }

    # ------------------------------------------------------------------ time
    def run_until(self, t):
        while True:
            self.settle()
            if self.agenda and self.agenda[0][0] <= t:
                tt = self.agenda[0][0]
                self.now = max(self.now, tt)
                while self.agenda and self.agenda[0][0] <= self.now:
                    _, _, fn, args = heapq.heappop(self.agenda)
                    fn(*args)
                    # keep working the instant: activation looks only after all due work
                continue
            break
        self.now = max(self.now, t)

    def settle(self):
        while True:
            if self.agenda and self.agenda[0][0] <= self.now:
                _, _, fn, args = heapq.heappop(self.agenda)
                fn(*args)
                continue
            if self.looks:
                qk, trig, extra = self.looks.pop(0)
                self.look(qk, trig, extra)
                continue
            break

    # ------------------------------------------------------------------ lookup
    def inst(self, name):
        I = self.instances.get(name)
        if I is None:
            raise Refuse("no instance %r" % name)
        return I

    def db(self, iname, dname):
        I = self.inst(iname)
        D = I["dbs"].get(dname)
        if D is None:
            raise Refuse("no database %r on %r" % (dname, iname))
        return D

    def queue(self, qref):
        D = self.db(qref["instance"], qref["database"])
        Q = D["queues"].get(qref["queue"])
        if Q is None:
            raise Refuse("no queue %r" % qref["queue"])
        return Q

    def qkey(self, Q):
        return (Q["inst"], Q["db"], Q["name"])

    def qbykey(self, k):
        return self.instances[k[0]]["dbs"][k[1]]["queues"][k[2]]

    def session(self, name):
        S = self.sessions.get(name)
        if S is None:
            S = {"name": name, "tx": False, "locks": set(), "received": [], "queues": set(),
                 "wait": None, "spid": self.spid_next, "proc": None}
            self.spid_next += 1
            self.sessions[name] = S
        return S

    # ------------------------------------------------------------------ queue reading
    def unread(self, Q):
        return [m for m in Q["msgs"] if m["state"] == "ready"]

    def locked_by_other(self, group, S):
        for other in self.sessions.values():
            if other is not S and group in other["locks"]:
                return True
        return False

    def pick_group(self, Q, S, where_dialog, where_group):
        ready = [m for m in Q["msgs"] if m["state"] == "ready" and not self.locked_by_other(m["group"], S)]
        if where_dialog is not None:
            ready = [m for m in ready if m["dialog"] == where_dialog]
        if where_group is not None:
            ready = [m for m in ready if m["group"] == where_group]
        if not ready:
            return None, []
        own = [m for m in ready if m["group"] in S["locks"]]
        g = (own or ready)[0]["group"]
        return g, [m for m in ready if m["group"] == g]

    def group_of_dialog(self, dialog, Q):
        for m in Q["msgs"]:
            if m["dialog"] == dialog:
                return m["group"]
        d = self.dialogs.get(dialog)
        if d is None:
            return None
        if d.get("target") and d["target"][0] == Q["inst"] and d["target"][1] == Q["db"] and d["target"][2] == Q["name"]:
            return "T:" + dialog
        return "I:" + dialog

    def try_receive(self, S, Q, stmt, top, where_dialog, where_group):
        g, msgs = self.pick_group(Q, S, where_dialog, where_group)
        if g is None:
            return None
        if stmt == "RECEIVE":
            if top is not None:
                msgs = msgs[:top]
            for m in msgs:
                if S["tx"]:
                    m["state"] = "received"
                    m["by"] = S["name"]
                    S["received"].append((self.qkey(Q), m))
                else:
                    Q["msgs"].remove(m)
            rows = [{"dialog": m["dialog"], "message_sequence_number": m["seq"], "conversation_group": g,
                     "message_type_name": m["mtype"], "message_body": m["body"]} for m in msgs]
        else:
            rows = []
        if S["tx"]:
            S["locks"].add(g)
        if S["tx"]:
            S["queues"].add(self.qkey(Q))
        return g, rows

    def do_receive(self, S, Q, stmt, top, where_dialog, where_group, waitfor_ms):
        has_where = where_dialog is not None or where_group is not None
        Qk = self.qkey(Q)
        if Q["notified_until"] is not None:
            # ACT-13: once an application calls RECEIVE the notification time-out ends
            Q["notified_until"] = None
        r = self.try_receive(S, Q, stmt, top, where_dialog, where_group)
        base = dict(instance=Q["inst"], database=Q["db"], queue=Q["name"], session=S["name"],
                    statement=stmt, has_where=has_where)
        if r is not None:
            g, rows = r
            self.ev("rows_returned", conversation_group=g, rows=rows, **base)
            S["last"] = ("rows", g, rows)
            self.trigger(Q, "RECEIVE")
            return True
        if waitfor_ms:
            S["wait"] = {"q": Qk, "stmt": stmt, "top": top, "wd": where_dialog, "wg": where_group,
                         "until": self.now + waitfor_ms, "has_where": has_where, "since": self.now}
            self.ev("reader_waiting", **base)
            S["last"] = ("waiting",)
            self.at(self.now + waitfor_ms, self.wait_timeout, S["name"], S["wait"])
            self.trigger(Q, "RECEIVE")
            return None
        self.empty(S, Q, stmt, has_where)
        return False

    def empty(self, S, Q, stmt, has_where):
        self.ev("empty_result", instance=Q["inst"], database=Q["db"], queue=Q["name"], session=S["name"],
                statement=stmt, has_where=has_where, rows=[], conversation_group=None)
        S["last"] = ("empty",)
        if S["tx"]:
            S["queues"].add(self.qkey(Q))
        if not has_where:
            Q["last_empty"] = self.now
        self.trigger(Q, "RECEIVE")

    def wait_timeout(self, sname, w):
        S = self.sessions.get(sname)
        if S is None or S["wait"] is not w:
            return
        S["wait"] = None
        Q = self.qbykey(w["q"])
        self.empty(S, Q, w["stmt"], w["has_where"])
        if S["proc"]:
            self.proc_empty(S)

    def serve_waiters(self, Q):
        Qk = self.qkey(Q)
        waiters = sorted([s for s in self.sessions.values() if s["wait"] and s["wait"]["q"] == Qk],
                         key=lambda s: (s["wait"]["since"], s["spid"]))
        for S in waiters:
            w = S["wait"]
            r = self.try_receive(S, Q, w["stmt"], w["top"], w["wd"], w["wg"])
            if r is None:
                continue
            S["wait"] = None
            g, rows = r
            self.ev("rows_returned", instance=Q["inst"], database=Q["db"], queue=Q["name"], session=S["name"],
                    statement=w["stmt"], has_where=w["has_where"], conversation_group=g, rows=rows)
            S["last"] = ("rows", g, rows)
            self.trigger(Q, "RECEIVE")
            if S["proc"]:
                self.proc_got(S)

    def end_tx(self, S, commit):
        returned = 0
        qs = set(S["queues"])
        if commit:
            for qk, m in S["received"]:
                Q = self.qbykey(qk)
                if m in Q["msgs"]:
                    Q["msgs"].remove(m)
            self.ev("transaction_committed", session=S["name"])
        else:
            for qk, m in S["received"]:
                m["state"] = "ready"
                m.pop("by", None)
                returned += 1
            self.ev("transaction_rolled_back", session=S["name"], returned=returned)
        S["received"] = []
        S["locks"] = set()
        S["tx"] = False
        S["queues"] = set()
        for qk in sorted(qs):
            Q = self.qbykey(qk)
            if not commit:
                self.trigger(Q, "rollback")
            self.serve_waiters(Q)

    # ------------------------------------------------------------------ activation
    def trigger(self, Q, trig, extra=None):
        if Q["monitor"]:
            self.looks.append((self.qkey(Q), trig, extra))

    def running(self, Q):
        return len(Q["tasks"])

    def look(self, qk, trig, extra):
        Q = self.qbykey(qk)
        if not Q["monitor"]:
            return
        unread = self.unread(Q)
        necessary = None
        if trig == "message arrived" and extra and extra.get("was_empty") and self.running(Q) == 0:
            necessary = "ACT-06"
        if necessary is None and unread:
            waiting = any(s["wait"] and s["wait"]["q"] == qk and not s["wait"]["has_where"]
                          for s in self.sessions.values())
            # a procedure started and not yet reading counts as a reader about to wait
            if not waiting:
                win = PARAMS["activation_empty_window_s"] * 1000
                if Q["last_empty"] is None or self.now - Q["last_empty"] >= win:
                    necessary = "ACT-07"
        if necessary is None:
            return
        if TRACE:
            self.ev("activation_necessary", instance=Q["inst"], database=Q["db"], queue=Q["name"],
                    rule=necessary, trigger=trig)
        started = None
        if Q["status"] == "ON" and Q["proc"]:
            if self.running(Q) < (Q["max"] or 0):
                started = self.start_proc(Q)
            else:
                if TRACE:
                    self.ev("activation_withheld", instance=Q["inst"], database=Q["db"], queue=Q["name"],
                            reason="MAX_QUEUE_READERS")
        if Q["ens"]:
            if Q["notified_until"] is not None:
                if TRACE:
                    self.ev("activation_withheld", instance=Q["inst"], database=Q["db"], queue=Q["name"],
                            reason="notification time-out")
            else:
                for en in Q["ens"]:
                    self.ev("event_notification", instance=Q["inst"], database=Q["db"], queue=Q["name"],
                            notification=en, event_type="QUEUE_ACTIVATION")
                Q["last_act"] = self.now
                until = self.now + int(PARAMS["external_activation_timeout_s"] * 1000)
                Q["notified_until"] = until
                self.at(until, self.notif_timeout, qk, until)
        if started is not None:
            # whatever the look started (a procedure and its first RECEIVE) runs once the look is done
            self.proc_receive(started)

    def notif_timeout(self, qk, until):
        Q = self.qbykey(qk)
        if Q["notified_until"] != until:
            return
        Q["notified_until"] = None
        self.ev("activation_time_out", instance=Q["inst"], database=Q["db"], queue=Q["name"])
        self.trigger(Q, "external activation time-out")

    def start_proc(self, Q):
        Q["task_n"] += 1
        n = Q["task_n"]
        sname = "%s#%d" % (Q["name"], n)
        D = self.instances[Q["inst"]]["dbs"][Q["db"]]
        beh = D["procs"].get(Q["proc"], {})
        self.sessions.pop(sname, None)
        S = self.session(sname)
        S["proc"] = {"q": self.qkey(Q), "task": n, "beh": beh, "name": Q["proc"]}
        Q["tasks"][n] = sname
        Q["last_act"] = self.now
        self.ev("procedure_started", instance=Q["inst"], database=Q["db"], queue=Q["name"],
                procedure_name=Q["proc"], spid=S["spid"], task=n)
        if beh.get("receives", True):
            return S
        return None

    def proc_receive(self, S):
        P = S["proc"]
        if P is None:
            return
        Q = self.qbykey(P["q"])
        beh = P["beh"]
        S["tx"] = True
        top = beh.get("receive_top", 1) if "receive_top" in beh else 1
        wf = beh.get("waitfor_ms")
        r = self.do_receive(S, Q, "RECEIVE", top, None, None, wf)
        if r is True:
            self.proc_got(S)
        elif r is False:
            self.proc_empty(S)

    def proc_got(self, S):
        P = S["proc"]
        work = P["beh"].get("work_ms") or 0
        self.at(self.now + work, self.proc_step, S["name"], P)

    def proc_step(self, sname, P):
        S = self.sessions.get(sname)
        if S is None or S["proc"] is not P:
            return
        self.end_tx(S, True)
        self.proc_receive(S)

    def proc_empty(self, S):
        P = S["proc"]
        self.end_tx(S, True)
        self.proc_exit(S, "empty RECEIVE")

    def proc_exit(self, S, reason):
        P = S["proc"]
        Q = self.qbykey(P["q"])
        if S["wait"]:
            S["wait"] = None
        if S["tx"]:
            self.end_tx(S, True)
        S["proc"] = None
        Q["tasks"].pop(P["task"], None)
        self.ev("procedure_exited", instance=Q["inst"], database=Q["db"], queue=Q["name"], reason=reason,
                spid=S["spid"], task=P["task"])
        if not Q["tasks"]:
            self.trigger(Q, "all procedures exited")

    def set_monitor(self, Q):
        want = Q["status"] == "ON" or bool(Q["ens"])
        if want and not Q["monitor"]:
            Q["monitor"] = True
            self.ev("monitor_created", instance=Q["inst"], database=Q["db"], queue=Q["name"])
        elif not want and Q["monitor"]:
            Q["monitor"] = False
            Q["notified_until"] = None
            self.ev("monitor_removed", instance=Q["inst"], database=Q["db"], queue=Q["name"])

    # ------------------------------------------------------------------ delivery into a queue
    def deliver(self, iname, D, svc, m, dlg):
        qn = D["services"][svc]
        Q = D["queues"][qn]
        if not m.from_target and (dlg.get("target") is None or
                                  (D["bi"] is not None and up(dlg.get("target_bi")) == up(D["bi"]))):
            dlg["target"] = (iname, D["name"], qn)
            dlg["target_bi"] = D["bi"]
        group = ("T:" if not m.from_target else "I:") + m.dialog
        k = (up(D["bi"]) or (iname, D["name"]), m.dialog, m.from_target)
        self.expected_seq[k] = max(self.expected_seq.get(k, 0), m.seq + 1)
        was_empty = not self.unread(Q)
        Q["msgs"].append({"dialog": m.dialog, "seq": m.seq, "group": group, "state": "ready",
                          "mtype": m.mtype, "body": m.body, "from_target": m.from_target})
        self.ev("message_arrived", instance=iname, database=D["name"], queue=qn, dialog=m.dialog,
                message_sequence_number=m.seq, from_target=m.from_target, service=svc,
                conversation_group=group)
        if not m.from_target:
            self.acknowledge(dlg, D)
        self.trigger(Q, "message arrived", {"was_empty": was_empty})
        self.serve_waiters(Q)

    def acknowledge(self, dlg, D):
        if dlg.get("acked"):
            return
        I = self.instances[dlg["instance"]]
        if not I["reachable"] and dlg["instance"] != D["inst"]:
            return
        dlg["acked"] = D["bi"]
        self.ev("acknowledged", instance=dlg["instance"], dialog=dlg["name"], broker_instance=D["bi"])

    # ------------------------------------------------------------------ dialogs and sends
    def begin_dialog(self, c):
        D = self.db(c["instance"], c["database"])
        if c["dialog"] in self.dialogs:
            raise Refuse("dialog %r already begun" % c["dialog"])
        if c["from_service"] not in D["services"]:
            raise Refuse("no service %r in %r" % (c["from_service"], D["name"]))
        self.dialogs[c["dialog"]] = {
            "name": c["dialog"], "instance": c["instance"], "database": c["database"],
            "from_service": c["from_service"], "to_service": c["to_service"],
            "to_bi": c.get("to_broker_instance"), "next": [0, 0], "target": None, "acked": None,
            "target_bi": None,
        }
        self.ev("dialog_begun", instance=c["instance"], database=c["database"], dialog=c["dialog"],
                from_service=c["from_service"], to_service=c["to_service"],
                to_broker_instance=c.get("to_broker_instance"))
        return {}

    def send(self, c):
        dlg = self.dialogs.get(c["dialog"])
        if dlg is None:
            raise Refuse("no dialog %r has been begun" % c["dialog"])
        ft = bool(c.get("from_target"))
        if ft:
            if dlg["target"] is None:
                raise Refuse("the dialog's target has not received a message yet")
            iname, dname = dlg["target"][0], dlg["target"][1]
        else:
            iname, dname = dlg["instance"], dlg["database"]
        D = self.db(iname, dname)
        if not D["started"]:
            raise Refuse("the broker of database %r has not started" % dname)
        seq = dlg["next"][1 if ft else 0]
        dlg["next"][1 if ft else 0] += 1
        m = Msg(c["dialog"], seq, ft, c.get("body"), c.get("message_type") or "DEFAULT")
        m.origin_inst = iname
        self.ev("message_sent", instance=iname, database=dname, dialog=m.dialog, from_target=ft,
                message_sequence_number=seq)
        I = self.instances[iname]
        m.where = "tq"
        m.received_ms = self.now
        if any(x.dialog == m.dialog and x.from_target == ft for x in I["tq"]):
            I["tq"].append(m)
            m.wait_kind = "behind"
            m.status = "waiting behind an earlier message of its conversation"
            self.ev("transmission_pending", instance=iname, dialog=m.dialog, from_target=ft,
                    message_sequence_number=seq, status=m.status)
            return {"message_sequence_number": seq}
        self.route(I, m, inside=True, dbname=dname)
        return {"message_sequence_number": seq}

    def msg_service_bi(self, m):
        dlg = self.dialogs[m.dialog]
        if m.from_target:
            I = self.instances[dlg["instance"]]
            return dlg["from_service"], I["dbs"][dlg["database"]]["bi"]
        return dlg["to_service"], (dlg["acked"] or dlg["to_bi"])

    def eligible_dbs(self, I):
        return [I["dbs"][d] for d in I["db_order"]
                if I["dbs"][d]["started"] and I["dbs"][d]["role"] != "mirror"]

    def has_service(self, I, svc):
        return any(svc in D["services"] for D in self.eligible_dbs(I))

    def route_live(self, r):
        return r["expires_ms"] is None or r["expires_ms"] > self.now

    # ------------------------------------------------------------------ routing
    def wait_msg(self, I, m, kind, status, addr=None):
        """The message waits at instance I (transmission queue or forwarder)."""
        m.wait_kind = kind
        m.wait_addr = addr
        m.status = status
        lst = I["tq"] if m.where == "tq" else I["forwarder"]
        if m not in lst:
            lst.append(m)
            if m.received_ms is None:
                m.received_ms = self.now
        self.ev("transmission_pending", instance=I["name"], dialog=m.dialog, from_target=m.from_target,
                message_sequence_number=m.seq, status=status)

    def unwait(self, I, m):
        for lst in (I["tq"], I["forwarder"]):
            if m in lst:
                lst.remove(m)

    def release_behind(self, I, m):
        """m went on: route the messages of its conversation that wait behind it here, in turn."""
        key = (I["name"], m.dialog, m.from_target)
        if key in self.releasing:
            return
        self.releasing.add(key)
        try:
            while True:
                progressed = False
                for lst in (I["tq"], I["forwarder"]):
                    same = [x for x in lst if x.dialog == m.dialog and x.from_target == m.from_target]
                    if same and all(x.wait_kind == "behind" for x in same):
                        x = same[0]
                        lst.remove(x)
                        x.wait_kind = None
                        inside = x.where == "tq"
                        self.route(I, x, inside=inside, dbname=self.origin_db(x) if inside else None)
                        progressed = True
                        break
                if not progressed:
                    break
        finally:
            self.releasing.discard(key)

    def origin_db(self, m):
        dlg = self.dialogs[m.dialog]
        return dlg["target"][1] if m.from_target else dlg["database"]

    def mfields(self, m):
        return dict(dialog=m.dialog, from_target=m.from_target, message_sequence_number=m.seq)

    def route(self, I, m, inside, dbname=None, retry=False):
        self._route(I, m, inside, dbname)
        if m.wait_kind in (None, "gone"):
            self.release_behind(I, m)

    def _route(self, I, m, inside, dbname=None):
        iname = I["name"]
        m.routed_ms = self.now
        if not inside and any(x is not m and x.dialog == m.dialog and x.from_target == m.from_target
                              and x.seq < m.seq and x.wait_kind not in (None, "gone")
                              for x in I["forwarder"]):
            m.where = "fwd"
            self.wait_msg(I, m, "behind", "waiting behind an earlier message of its conversation")
            return
        if m.where != "tq" and m.where != "fwd":
            m.where = "tq" if inside else "fwd"
        svc, bi = self.msg_service_bi(m)
        dlg = self.dialogs[m.dialog]
        # RTE-05: a reply from outside for a broker instance this instance holds
        if not inside and m.from_target:
            for D in self.eligible_dbs(I):
                if up(D["bi"]) == up(bi) and bi is not None:
                    self.ev("reply_recognised", instance=iname, broker_instance=D["bi"], **self.mfields(m))
                    self.local_deliver(I, m, svc, bi, None, inside)
                    return
        if inside:
            table = I["dbs"][dbname]["routes"]
            tname = "%s.sys.routes" % dbname
        else:
            table = I["msdb_routes"]
            tname = "msdb.sys.routes"
        live = [r for r in table if self.route_live(r)]
        step = None
        matched = []
        if bi is not None:
            matched = [r for r in live if r["service_name"] == svc and r["broker_instance"] is not None
                       and up(r["broker_instance"]) == up(bi)]
            step = "RTM-1"
        if not matched:
            matched = [r for r in live if r["service_name"] == svc and r["broker_instance"] is None]
            step = "RTM-2"
        picked_bi = None
        if not matched and bi is None:
            cands = [r for r in live if r["service_name"] == svc and r["broker_instance"] is not None]
            if cands:
                picked_bi = cands[0]["broker_instance"]
                matched = [r for r in cands if up(r["broker_instance"]) == up(picked_bi)]
                step = "RTM-3"
        if not matched:
            for r in live:
                if r["service_name"] == DYN_SVC:
                    pk = (tname, r["name"], svc)
                    if pk in I["dyn_pending"]:
                        continue
                    I["dyn_pending"].add(pk)
                    if TRACE:
                        self.ev("routes_matched", instance=iname, step="RTM-4", table=tname, routes=[],
                                broker_instance=None, **self.mfields(m))
                    self.ev("routing_requested", instance=iname, route=r["name"], service=svc, table=tname,
                            **self.mfields(m))
                    self.delay(I, m, "RTM-4", inside, dbname)
                    return
        if not matched:
            matched = [r for r in live if r["service_name"] is None and r["broker_instance"] is None]
            step = "RTM-5"
        as_local = False
        if not matched and bi is not None and self.has_service(I, svc):
            as_local = True
            step = "RTM-6"
        if not matched and not as_local:
            if TRACE:
                self.ev("routes_matched", instance=iname, step="RTM-7", table=tname, routes=[],
                        broker_instance=None, **self.mfields(m))
            self.delay(I, m, "RTM-7", inside, dbname)
            return
        if TRACE:
            self.ev("routes_matched", instance=iname, step=step, table=tname,
                    routes=["(as if LOCAL)"] if as_local else [r["name"] for r in matched],
                    broker_instance=up(picked_bi) if picked_bi else None, **self.mfields(m))
        if as_local:
            if TRACE:
                self.ev("route_chosen", instance=iname, step="RTC-2", route="(as if LOCAL)",
                        candidates=["(as if LOCAL)"], **self.mfields(m))
            self.local_deliver(I, m, svc, bi, None, inside)
            return
        # choosing: identical routes count as one
        groups = []
        seen = {}
        for r in matched:
            k = (up(r["broker_instance"]), r["service_name"], up(r["address"]))
            if k not in seen:
                seen[k] = r
                groups.append(r)
        chosen = None
        cstep = None
        mir = [r for r in groups if r["mirror_address"]]
        loc = [r for r in groups if up(r["address"]) == "LOCAL"]
        net = [r for r in groups if up(r["address"]).startswith("TCP://") and not r["mirror_address"]]
        tra = [r for r in groups if up(r["address"]) == "TRANSPORT"]
        if mir:
            chosen, cstep, cands = mir[0], "RTC-1", mir
        elif loc and self.has_service(I, svc):
            chosen, cstep, cands = loc[0], "RTC-2", loc
        elif net:
            chosen, cstep, cands = net[0], "RTC-3", net
        elif tra:
            chosen, cstep, cands = tra[0], "RTC-4", tra
        if chosen is None:
            self.delay(I, m, "RTC-4", inside, dbname)
            return
        if TRACE:
            self.ev("route_chosen", instance=iname, step=cstep, route=chosen["name"],
                    candidates=[r["name"] for r in cands], **self.mfields(m))
        addr = chosen["address"]
        if up(addr) == "LOCAL":
            self.local_deliver(I, m, svc, bi, chosen, inside)
            return
        if not inside and not I["forwarding"]:
            self.drop(I, m, "forwarding is not active and the route is not LOCAL", "RTC-5")
            return
        if chosen["mirror_address"]:
            self.mirror_send(I, m, chosen, inside)
            return
        if up(addr) == "TRANSPORT":
            a = self.transport_addr(svc)
            if a is None:
                self.delay(I, m, "RTC-4", inside, dbname)
                return
            addr = a
        self.net_send(I, m, addr, inside)

    def transport_addr(self, svc):
        if not isinstance(svc, str) or not svc.upper().startswith("TCP://"):
            return None
        rest = svc[6:]
        hp = rest.split("/", 1)[0]
        return "TCP://" + hp

    def inst_by_addr(self, addr):
        for n in self.inst_order:
            if up(self.instances[n]["address"]) == up(addr):
                return self.instances[n]
        return None

    def delay(self, I, m, step, inside, dbname):
        self.ev("conversation_delayed", instance=I["name"], step=step, **self.mfields(m))
        self.wait_msg(I, m, "delayed", "delayed: no route (%s)" % step)
        m.route_key = (inside, dbname)
        token = object()
        m.wait_addr = token
        self.at(self.now + int(PARAMS["delayed_retry_s"] * 1000), self.retry_delayed, I["name"], m, token)

    def retry_delayed(self, iname, m, token):
        I = self.instances[iname]
        if m.wait_kind != "delayed" or m.wait_addr is not token:
            return
        if m not in I["tq"] and m not in I["forwarder"]:
            return
        self.ev("routing_retried", instance=iname, **self.mfields(m))
        inside, dbname = m.route_key
        m.wait_kind = None
        self.reroute(I, m, inside, dbname)

    def reroute(self, I, m, inside, dbname):
        # leave it in its list while routing: route() decides whether it waits again
        self.unwait(I, m)
        self.route(I, m, inside, dbname)

    def drop(self, I, m, reason, rule):
        self.unwait(I, m)
        m.wait_kind = "gone"
        f = dict(instance=I["name"], reason=reason, **self.mfields(m))
        if TRACE:
            f["rule"] = rule
        self.ev("message_dropped", **f)

    def local_deliver(self, I, m, svc, bi, route, inside):
        target = None
        rbi = route["broker_instance"] if route else None
        use_bi = bi or rbi
        elig = self.eligible_dbs(I)
        if use_bi is not None:
            for D in elig:
                if up(D["bi"]) == up(use_bi) and svc in D["services"]:
                    target = D
                    break
            if target is None:
                # is it held by a database that cannot take it now (mirror, not started)?
                self.drop(I, m, "no database of this instance has the broker instance", "RTL-2")
                return
        else:
            dlg = self.dialogs[m.dialog]
            first = dlg["database"] if (inside and not m.from_target) else None
            order = [D for D in elig if D["name"] == first] + [D for D in elig if D["name"] != first]
            for D in order:
                if svc in D["services"]:
                    target = D
                    break
        if target is None:
            self.delay(I, m, "RTC-4", inside, None)
            return
        self.unwait(I, m)
        m.wait_kind = None
        if inside:
            self.deliver(I["name"], target, svc, m, self.dialogs[m.dialog])
        else:
            self.dispatch(I, target, svc, m)

    # ------------------------------------------------------------------ dispatcher (PER-1C)
    def dispatch(self, I, D, svc, m):
        ent = {"m": m, "db": D["name"], "svc": svc, "arrived": self.now}
        I["dispatcher"].append(ent)
        self.ev("dispatcher_buffered", instance=I["name"], database=D["name"], **self.mfields(m))
        self.dispatch_try(I)

    def dispatch_try(self, I):
        if I["disp_mode"] != "running":
            return
        for ent in list(I["dispatcher"]):
            if ent.get("scheduled"):
                continue
            due = ent["arrived"] + int(I["disp_delay"] * 1000)
            ent["scheduled"] = True
            self.at(max(due, self.now), self.dispatch_save, I["name"], ent)

    def dispatch_save(self, iname, ent):
        I = self.instances[iname]
        if ent not in I["dispatcher"]:
            return
        if I["disp_mode"] != "running":
            ent["scheduled"] = False
            return
        m = ent["m"]
        D0 = I["dbs"][ent["db"]]
        k = (up(D0["bi"]) or (iname, ent["db"]), m.dialog, m.from_target)
        exp = self.expected_seq.get(k, 0)
        if m.seq != exp:
            # out of order: stays buffered until the dispatcher deletes it
            ent["scheduled"] = "ooo"
            return
        I["dispatcher"].remove(ent)
        self.expected_seq[k] = exp + 1
        D = I["dbs"][ent["db"]]
        self.deliver(iname, D, ent["svc"], m, self.dialogs[m.dialog])
        # a later message buffered in order behind it may go now
        for e2 in list(I["dispatcher"]):
            if e2["m"].dialog == m.dialog and e2["m"].from_target == m.from_target and e2.get("scheduled") == "ooo" \
                    and e2["m"].seq == exp + 1:
                e2["scheduled"] = True
                self.at(self.now, self.dispatch_save, iname, e2)

    # ------------------------------------------------------------------ transport
    def conn_open(self, I, addr):
        return I["conns"].get(up(addr))

    def net_send(self, I, m, addr, inside, via_forward=False):
        J = self.inst_by_addr(addr)
        if J is not None and J is I:
            # RTX-2: the address resolves to this instance: treat as from outside
            self.unwait(I, m)
            m.wait_kind = None
            if inside or m.where != "fwd":
                # it begins to wait in the forwarder now, as from outside (received_ms counts from here)
                m.where = "fwd"
                m.received_ms = None
            self.route(I, m, inside=False)
            return
        if not inside:
            # forwarding
            if m.hops >= PARAMS["forward_hop_limit"]:
                self.drop(I, m, "forward hop limit reached", "RTX-1")
                return
            m.hops += 1
            self.ev("message_forwarded", instance=I["name"], address=addr, hops=m.hops, **self.mfields(m))
        if self.failed_here(I, m):
            self.wait_msg(I, m, "failed", "the transmitter cannot send the dialog (failed)", addr)
            return
        c = self.conn_open(I, addr)
        if c is None:
            if not self.connect(I, addr):
                self.wait_msg(I, m, "conn", "waiting for a connection to %s" % addr, addr)
                return
            c = self.conn_open(I, addr)
        self.unwait(I, m)
        m.wait_kind = None
        self.transmit(I, m, addr)

    def failed_here(self, I, m):
        return m.dialog in I["failed"]

    def connect(self, I, addr):
        sup = I["suppressed"].get(up(addr))
        if sup is not None and self.now < sup:
            return False
        J = self.inst_by_addr(addr)
        if J is None or not J["reachable"]:
            self.ev("connection_attempt", instance=I["name"], address=addr, result="refused")
            I["suppressed"][up(addr)] = self.now + SUPPRESS_FAIL_MS
            return False
        self.ev("connection_attempt", instance=I["name"], address=addr, result="connected")
        I["conns"][up(addr)] = {"address": addr, "opened": self.now, "last": self.now}
        I["suppressed"].pop(up(addr), None)
        return True

    def close_conn(self, I, key, reason):
        c = I["conns"].pop(key, None)
        if c is None:
            return
        self.ev("connection_closed", instance=I["name"], address=c["address"], reason=reason)
        if reason == "disconnected":
            I["suppressed"][key] = self.now + SUPPRESS_DISC_MS

    def transmit(self, I, m, addr):
        c = I["conns"][up(addr)]
        c["last"] = self.now
        J = self.inst_by_addr(addr)
        self.ev("message_transmitted", instance=I["name"], address=addr, to_instance=J["name"], **self.mfields(m))
        self.release_behind(I, m)
        lost = self.lose.get(m.key())
        if lost is not None:
            if not lost:
                del self.lose[m.key()]
            self.ev("message_lost_in_transit", instance=I["name"], address=addr, **self.mfields(m))
            return
        if not J["reachable"]:
            return
        m.where = "fwd"
        m.received_ms = None
        m.wait_kind = None
        self.route(J, m, inside=False)

    # ------------------------------------------------------------------ mirroring
    def probe_answer(self, addr, route):
        J = self.inst_by_addr(addr)
        if J is None or not J["reachable"]:
            return "unreachable"
        svc = route["service_name"]
        for D in J["dbs"].values():
            if D["role"] == "principal" and D["started"] and (svc is None or svc in D["services"]):
                return "principal"
        return "not principal"

    def mirror_send(self, I, m, r, inside):
        addrs = [r["address"], r["mirror_address"]]
        if r["principal"] is not None:
            ans = self.probe_answer(r["principal"], r)
            if ans == "principal":
                self.net_send(I, m, r["principal"], inside)
                return
            self.ev("principal_lost", instance=I["name"], address=r["principal"], answer=ans, route=r["name"],
                    **self.mfields(m))
            lost = r["principal"]
            r["principal"] = None
            other = addrs[1] if up(addrs[0]) == up(lost) else addrs[0]
            ans2 = self.probe_answer(other, r)
            self.ev("principal_probe", instance=I["name"], address=other, answer=ans2, route=r["name"],
                    **self.mfields(m))
            if ans2 == "principal":
                r["principal"] = other
                self.net_send(I, m, other, inside)
                return
            self.wait_msg(I, m, "principal", "waiting for the principal of route %s" % r["name"])
            m.route_key = (inside, r)
            return
        found = None
        for a in addrs:
            ans = self.probe_answer(a, r)
            self.ev("principal_probe", instance=I["name"], address=a, answer=ans, route=r["name"],
                    **self.mfields(m))
            if ans == "principal" and found is None:
                found = a
        if found:
            r["principal"] = found
            self.net_send(I, m, found, inside)
            return
        self.wait_msg(I, m, "principal", "waiting for the principal of route %s" % r["name"])
        m.route_key = (inside, r)

    # ------------------------------------------------------------------ timer (periodic tasks)
    def timer(self, iname):
        I = self.instances[iname]
        I["timer_n"] += 1
        n = I["timer_n"]
        tasks = ["queue monitors", "task handlers", "message dispatcher"]
        if n % 2 == 0:
            tasks += ["transport connections", "transmitter"]
        if n % 5 == 0:
            tasks += ["idle connections", "forwarder", "broker start", "broker configuration notification",
                      "acknowledged message clean-up"]
        if TRACE:
            self.ev("timer_notification", instance=iname, number=n, tasks=tasks)
        # queue monitors
        for dn in I["db_order"]:
            for Q in I["dbs"][dn]["queues"].values():
                self.trigger(Q, "timer notification")
        # task handlers
        if I["handlers_running"] < I["handlers"]:
            k = I["handlers"] - I["handlers_running"]
            I["handlers_running"] = I["handlers"]
            self.ev("task_handlers_restarted", instance=iname, count=k)
        # dispatcher
        snap = {}
        for e in I["dispatcher"]:
            snap.setdefault((e["db"], e["m"].dialog, e["m"].from_target), set()).add(e["m"].seq)
        for ent in list(I["dispatcher"]):
            m = ent["m"]
            D0 = I["dbs"][ent["db"]]
            exp = self.expected_seq.get((up(D0["bi"]) or (iname, ent["db"]), m.dialog, m.from_target), 0)
            reason = None
            held = snap.get((ent["db"], m.dialog, m.from_target), set())
            if m.seq < exp or any(k not in held for k in range(exp, m.seq)):
                reason = "out of order"
            elif self.now - ent["arrived"] >= STALE_DISPATCH_MS:
                reason = "stale"
            if reason:
                I["dispatcher"].remove(ent)
                self.ev("dispatcher_deleted", instance=iname, database=ent["db"], reason=reason,
                        **self.mfields(m))
        if n % 2 == 0:
            self.transport_task(I)
            self.transmitter_task(I)
        if n % 5 == 0:
            for key, c in list(I["conns"].items()):
                if self.now - c["last"] >= IDLE_MS:
                    self.close_conn(I, key, "idle")
            for m in list(I["forwarder"]):
                if self.now - m.received_ms >= FWD_STALE_MS:
                    I["forwarder"].remove(m)
                    m.wait_kind = "gone"
                    self.ev("forwarded_message_deleted", instance=iname, **self.mfields(m))
            for dn in I["db_order"]:
                D = I["dbs"][dn]
                if not D["started"]:
                    if D["master_key"]:
                        D["started"] = True
                        self.ev("database_broker_started", instance=iname, database=dn)
                    else:
                        self.ev("database_broker_start_failed", instance=iname, database=dn,
                                reason="missing master key")
            for dn in I["db_order"]:
                D = I["dbs"][dn]
                if not D["ack_cleanup"] and self.db_has_dialogs(iname, dn):
                    D["ack_cleanup"] = True
                    self.ev("ack_cleanup_resumed", instance=iname, database=dn)
        self.at(self.now + TIMER_MS, self.timer, iname)

    def db_has_dialogs(self, iname, dn):
        for d in self.dialogs.values():
            if d["instance"] == iname and d["database"] == dn:
                return True
            if d["target"] and d["target"][0] == iname and d["target"][1] == dn:
                return True
        return False

    def transport_task(self, I):
        addrs = []
        for m in I["tq"] + I["forwarder"]:
            if m.wait_kind == "conn" and up(m.wait_addr) not in [up(a) for a in addrs]:
                addrs.append(m.wait_addr)
        for a in addrs:
            if self.conn_open(I, a) is None:
                if not self.connect(I, a):
                    continue
            for m in list(I["tq"] + I["forwarder"]):
                if m.wait_kind == "conn" and up(m.wait_addr) == up(a):
                    self.unwait(I, m)
                    m.wait_kind = None
                    self.transmit(I, m, a)
        # mirrored routes waiting for a principal: ask both again
        for m in list(I["tq"] + I["forwarder"]):
            if m.wait_kind == "principal":
                inside, r = m.route_key
                self.unwait(I, m)
                m.wait_kind = None
                tables = [I["msdb_routes"]] + [I["dbs"][d]["routes"] for d in I["db_order"]]
                stands = any(x is r for t in tables for x in t) and r["mirror_address"] and self.route_live(r)
                if stands:
                    self.retry_principal(I, m, r, inside)
                else:
                    # the route no longer stands: match the message again
                    self.route(I, m, inside, self.origin_db(m) if inside else None)

    def retry_principal(self, I, m, r, inside):
        lst = I["tq"] if m.where == "tq" else I["forwarder"]
        lst.append(m)
        found = None
        for a in [r["address"], r["mirror_address"]]:
            ans = self.probe_answer(a, r)
            self.ev("principal_probe", instance=I["name"], address=a, answer=ans, route=r["name"],
                    **self.mfields(m))
            if ans == "principal" and found is None:
                found = a
        if found:
            r["principal"] = found
            lst.remove(m)
            self.net_send(I, m, found, inside)
        else:
            m.wait_kind = "principal"

    def transmitter_task(self, I):
        touched = I["touched"]
        I["touched"] = set()
        last = I.get("last_reclass", self.t0)
        I["last_reclass"] = self.now
        tables = [I["msdb_routes"]] + [I["dbs"][d]["routes"] for d in I["db_order"]]
        expired = [r["expires_ms"] for t in tables for r in t
                   if r["expires_ms"] is not None and last < r["expires_ms"] <= self.now]
        if expired:
            for m in I["tq"] + I["forwarder"]:
                # only a dialog that already waited when the route expired (one that began to wait
                # after the change is matched again by its own time-out)
                if m.wait_kind not in (None, "behind", "gone") and m.received_ms is not None \
                        and m.received_ms < max(expired):
                    touched.add(m.dialog)
        names = []
        for m in list(I["tq"] + I["forwarder"]):
            if m.wait_kind == "behind":
                continue
            if m.routed_ms == self.now:
                continue
            if m.dialog in touched or (m.wait_kind == "failed"):
                if m.dialog not in names:
                    names.append(m.dialog)
        for dn in list(touched):
            if dn in I["failed"] and dn not in names:
                pass
        if TRACE:
            self.ev("transmitter_reclassified", instance=I["name"], dialogs=list(names))
        for d in names:
            I["failed"].discard(d)
        for m in list(I["tq"] + I["forwarder"]):
            if m.dialog in names and m.wait_kind not in (None, "behind", "gone") and m.routed_ms != self.now:
                inside = m.where == "tq"
                dbname = self.origin_db(m) if inside else None
                m.wait_kind = None
                self.reroute(I, m, inside, dbname)

    # ------------------------------------------------------------------ commands
    def execute(self, c):
        kind = c["kind"]
        if kind == "start":
            return self.start(c)
        if not self.started:
            raise Refuse("no topology has been started")
        self.run_until(c["at_ms"])
        fn = getattr(self, "cmd_" + kind, None)
        if fn is None:
            raise Refuse("unknown command %r" % kind)
        res = fn(c)
        self.settle()
        return res if res is not None else {}

    def cmd_advance_time(self, c):
        return {}

    def cmd_begin_dialog(self, c):
        return self.begin_dialog(c)

    def cmd_send(self, c):
        return self.send(c)

    def cmd_begin_transaction(self, c):
        S = self.session(c["session"])
        if S["tx"]:
            raise Refuse("session %r already has a transaction" % c["session"])
        if S["wait"]:
            raise Refuse("session is waiting")
        S["tx"] = True
        S["queues"] = set()
        return {}

    def cmd_commit(self, c):
        S = self.session(c["session"])
        if not S["tx"]:
            raise Refuse("COMMIT without a transaction")
        if S["wait"]:
            raise Refuse("session is waiting")
        self.end_tx(S, True)
        return {}

    def cmd_rollback(self, c):
        S = self.session(c["session"])
        if not S["tx"]:
            raise Refuse("ROLLBACK without a transaction")
        if S["wait"]:
            raise Refuse("session is waiting")
        self.end_tx(S, False)
        return {}

    def cmd_receive(self, c):
        Q = self.queue(c["queue"])
        S = self.session(c["session"])
        if S["wait"]:
            raise Refuse("session %r is waiting" % c["session"])
        wg = None
        if c.get("where_group") is not None:
            wg = self.group_of_dialog(c["where_group"], Q)
        if c.get("where_dialog") is not None and c["where_dialog"] not in self.dialogs:
            raise Refuse("no dialog %r" % c["where_dialog"])
        r = self.do_receive(S, Q, "RECEIVE", c.get("top"), c.get("where_dialog"), wg
                            if c.get("where_group") is None else (wg or "?none"), c.get("waitfor_ms"))
        if S["tx"] is False and r is True:
            pass
        return {}

    def cmd_get_conversation_group(self, c):
        Q = self.queue(c["queue"])
        S = self.session(c["session"])
        if S["wait"]:
            raise Refuse("session %r is waiting" % c["session"])
        self.do_receive(S, Q, "GET CONVERSATION GROUP", None, None, None, c.get("waitfor_ms"))
        return {}

    def cmd_alter_queue(self, c):
        Q = self.queue(c["queue"])
        if c.get("status") is not None:
            Q["status"] = c["status"].upper()
        if c.get("procedure_name") is not None:
            Q["proc"] = c["procedure_name"]
        if c.get("max_queue_readers") is not None:
            Q["max"] = c["max_queue_readers"]
        self.ev("queue_altered", instance=Q["inst"], database=Q["db"], queue=Q["name"])
        self.set_monitor(Q)
        self.trigger(Q, "ALTER QUEUE")
        return {}

    def cmd_create_event_notification(self, c):
        Q = self.queue(c["queue"])
        if c["name"] in Q["ens"]:
            raise Refuse("event notification %r exists" % c["name"])
        Q["ens"].append(c["name"])
        self.set_monitor(Q)
        return {}

    def cmd_drop_event_notification(self, c):
        Q = self.queue(c["queue"])
        if c["name"] not in Q["ens"]:
            raise Refuse("no event notification %r" % c["name"])
        Q["ens"].remove(c["name"])
        self.set_monitor(Q)
        return {}

    def cmd_exit_procedure(self, c):
        Q = self.queue(c["queue"])
        sname = Q["tasks"].get(c["task"])
        if sname is None:
            raise Refuse("no running task %r" % c["task"])
        self.proc_exit(self.sessions[sname], "exited")
        return {}

    def route_table(self, c):
        I = self.inst(c["instance"])
        if c.get("database") is None:
            return I, I["msdb_routes"], "msdb"
        D = self.db(c["instance"], c["database"])
        return I, D["routes"], D["name"]

    def touch(self, I, names):
        for m in I["tq"] + I["forwarder"]:
            svc, _ = self.msg_service_bi(m)
            if None in names or svc in names:
                I["touched"].add(m.dialog)

    def check_addr(self, a):
        if a is None:
            return
        if up(a) in ("LOCAL", "TRANSPORT"):
            return
        if not up(a).startswith("TCP://"):
            raise Refuse("malformed address %r" % a)

    def cmd_create_route(self, c):
        I, table, dn = self.route_table(c)
        r = c["route"]
        if any(x["name"] == r["name"] for x in table):
            raise Refuse("route %r exists" % r["name"])
        self.check_addr(r.get("address"))
        self.check_addr(r.get("mirror_address"))
        table.append(self.mkroute(r, self.now))
        self.ev("route_created", instance=I["name"], database=dn, route=r["name"])
        self.touch(I, {r.get("service_name")})
        return {}

    def cmd_alter_route(self, c):
        I, table, dn = self.route_table(c)
        r = c["route"]
        x = next((x for x in table if x["name"] == r["name"]), None)
        if x is None:
            raise Refuse("no route %r" % r["name"])
        before = x["service_name"]
        self.check_addr(r.get("address"))
        self.check_addr(r.get("mirror_address"))
        for k in ("service_name", "broker_instance", "address", "mirror_address"):
            if r.get(k) is not None:
                x[k] = r[k]
        if r.get("lifetime_s") is not None:
            x["expires_ms"] = int(self.now + r["lifetime_s"] * 1000)
        if x["principal"] is not None and up(x["principal"]) not in (up(x["address"]), up(x["mirror_address"])):
            x["principal"] = None
        self.ev("route_altered", instance=I["name"], database=dn, route=r["name"])
        self.touch(I, {before, x["service_name"]})
        return {}

    def cmd_drop_route(self, c):
        I, table, dn = self.route_table(c)
        x = next((x for x in table if x["name"] == c["name"]), None)
        if x is None:
            raise Refuse("no route %r" % c["name"])
        table.remove(x)
        self.ev("route_dropped", instance=I["name"], database=dn, route=c["name"])
        self.touch(I, {x["service_name"]})
        return {}

    def cmd_answer_routing_request(self, c):
        I, table, dn = self.route_table(c)
        r = c["route"]
        tname = "msdb.sys.routes" if c.get("database") is None else "%s.sys.routes" % dn
        svc = r.get("service_name")
        I["dyn_pending"] = {p for p in I["dyn_pending"] if not (p[0] == tname and p[2] == svc)}
        if any(x["name"] == r["name"] for x in table):
            x = next(x for x in table if x["name"] == r["name"])
            table.remove(x)
        table.append(self.mkroute(r, self.now))
        self.ev("route_created", instance=I["name"], database=dn, route=r["name"])
        self.touch(I, {svc})
        return {}

    def cmd_set_message_forwarding(self, c):
        I = self.inst(c["instance"])
        I["forwarding"] = bool(c["active"])
        return {}

    def cmd_set_reachable(self, c):
        J = self.inst(c["instance"])
        J["reachable"] = bool(c["reachable"])
        if not J["reachable"]:
            for n in self.inst_order:
                I = self.instances[n]
                if I is J:
                    continue
                for key in list(I["conns"].keys()):
                    if key == up(J["address"]):
                        self.close_conn(I, key, "disconnected")
        return {}

    def cmd_failover(self, c):
        D = self.db(c["instance"], c["database"])
        for n in self.inst_order:
            for D2 in self.instances[n]["dbs"].values():
                if D2 is not D and D2["name"] == D["name"] and D2["role"] is not None and up(D2["bi"]) == up(D["bi"]):
                    D2["role"] = "mirror"
        D["role"] = "principal"
        return {}

    def cmd_fail_task_handlers(self, c):
        I = self.inst(c["instance"])
        k = min(c["count"], I["handlers_running"])
        I["handlers_running"] -= k
        return {}

    def cmd_set_dispatcher_saving(self, c):
        I = self.inst(c["instance"])
        I["disp_mode"] = c["mode"]
        I["disp_delay"] = c.get("delay_s") or 0
        if c["mode"] == "running":
            for ent in I["dispatcher"]:
                if ent.get("scheduled") is True:
                    pass
                elif ent.get("scheduled") != "ooo":
                    ent["scheduled"] = False
            self.dispatch_try(I)
        return {}

    def cmd_lose_in_transit(self, c):
        self.lose[(c["dialog"], c["sequence"], bool(c.get("from_target")))] = bool(c.get("every"))
        return {}

    def cmd_drop_connection(self, c):
        I = self.inst(c["instance"])
        key = up(c["address"])
        if key not in I["conns"]:
            raise Refuse("no connection to %r" % c["address"])
        self.close_conn(I, key, "disconnected")
        return {}

    def cmd_fail_transmission(self, c):
        dlg = self.dialogs.get(c["dialog"])
        if dlg is None:
            raise Refuse("no dialog %r" % c["dialog"])
        ends = {dlg["instance"]}
        if dlg["target"]:
            ends.add(dlg["target"][0])
        for n in ends:
            self.instances[n]["failed"].add(c["dialog"])
            self.instances[n]["touched"].add(c["dialog"])
        return {}

    def cmd_create_master_key(self, c):
        D = self.db(c["instance"], c["database"])
        D["master_key"] = True
        return {}

    def cmd_stop_ack_cleanup(self, c):
        D = self.db(c["instance"], c["database"])
        D["ack_cleanup"] = False
        return {}

    # ------------------------------------------------------------------ views
    def cmd_query_view(self, c):
        v = c["view"]
        fi = c.get("instance")
        fd = c.get("database")
        rows = []
        insts = [self.instances[n] for n in self.inst_order if fi is None or n == fi]
        if v == "sys.dm_broker_queue_monitors":
            for I in insts:
                for dn in I["db_order"]:
                    D = I["dbs"][dn]
                    if fd is not None and dn != fd:
                        continue
                    for Q in D["queues"].values():
                        if not Q["monitor"]:
                            continue
                        qk = self.qkey(Q)
                        waiting = [s for s in self.sessions.values() if s["wait"] and s["wait"]["q"] == qk]
                        tw = len([s for s in waiting if not s["wait"]["has_where"]])
                        rwait = [s for s in waiting if s["wait"]["stmt"] == "RECEIVE"]
                        if Q["notified_until"] is not None:
                            st = "NOTIFIED"
                        elif Q["tasks"] or rwait:
                            st = "RECEIVES_OCCURRING"
                        else:
                            st = "INACTIVE"
                        rows.append({"database_id": D["id"], "queue_id": Q["id"], "instance": I["name"],
                                     "database": dn, "queue": Q["name"], "state": st,
                                     "last_empty_rowset_time": Q["last_empty"],
                                     "last_activated_time": Q["last_act"], "tasks_waiting": tw})
        elif v == "sys.dm_broker_activated_tasks":
            for I in insts:
                for dn in I["db_order"]:
                    D = I["dbs"][dn]
                    if fd is not None and dn != fd:
                        continue
                    for Q in D["queues"].values():
                        for t in sorted(Q["tasks"]):
                            S = self.sessions[Q["tasks"][t]]
                            rows.append({"spid": S["spid"], "database_id": D["id"], "queue_id": Q["id"],
                                         "instance": I["name"], "database": dn, "queue": Q["name"],
                                         "task": t, "procedure_name": S["proc"]["name"]})
        elif v == "sys.routes":
            for I in insts:
                tables = []
                if fd is None:
                    tables.append(("msdb", I["msdb_routes"]))
                else:
                    D = I["dbs"].get(fd)
                    if D is None:
                        raise Refuse("no database %r" % fd)
                    tables.append((fd, D["routes"]))
                for dn, tab in tables:
                    for r in tab:
                        rows.append({"instance": I["name"], "database": dn, "name": r["name"],
                                     "remote_service_name": r["service_name"],
                                     "broker_instance": r["broker_instance"], "address": r["address"],
                                     "mirror_address": r["mirror_address"], "expires_ms": r["expires_ms"]})
        elif v in ("sys.transmission_queue", "sbtck.forwarder"):
            for I in insts:
                lst = I["tq"] if v == "sys.transmission_queue" else I["forwarder"]
                for m in lst:
                    svc, _ = self.msg_service_bi(m)
                    rows.append({"instance": I["name"], "dialog": m.dialog, "message_sequence_number": m.seq,
                                 "from_target": m.from_target, "to_service_name": svc,
                                 "transmission_status": m.status or "", "received_ms": m.received_ms})
        elif v == "sys.conversation_endpoints":
            for d in self.dialogs.values():
                if fi is None or d["instance"] == fi:
                    if fd is None or d["database"] == fd:
                        rows.append({"dialog": d["name"], "instance": d["instance"], "database": d["database"],
                                     "far_service": d["to_service"],
                                     "far_broker_instance": d["acked"] or d["to_bi"],
                                     "acknowledged": d["acked"] is not None})
                if d["target"]:
                    ti, td, _ = d["target"]
                    if (fi is None or ti == fi) and (fd is None or td == fd):
                        I = self.instances[d["instance"]]
                        rows.append({"dialog": d["name"], "instance": ti, "database": td,
                                     "far_service": d["from_service"],
                                     "far_broker_instance": I["dbs"][d["database"]]["bi"],
                                     "acknowledged": d["acked"] is not None})
        elif v == "sys.dm_broker_connections":
            for I in insts:
                for c2 in I["conns"].values():
                    rows.append({"instance": I["name"], "address": c2["address"], "state": "CONNECTED",
                                 "opened_ms": c2["opened"], "last_activity_ms": c2["last"]})
        elif v == "sbtck.dispatcher_buffers":
            for I in insts:
                for ent in I["dispatcher"]:
                    m = ent["m"]
                    rows.append({"instance": I["name"], "database": ent["db"], "dialog": m.dialog,
                                 "message_sequence_number": m.seq, "from_target": m.from_target,
                                 "arrived_ms": ent["arrived"]})
        elif v == "sbtck.periodic_state":
            for I in insts:
                for dn in I["db_order"]:
                    D = I["dbs"][dn]
                    if fd is not None and dn != fd:
                        continue
                    rows.append({"instance": I["name"], "task_handlers": I["handlers"],
                                 "running_task_handlers": I["handlers_running"], "database": dn,
                                 "broker_started": D["started"], "ack_cleanup_running": D["ack_cleanup"]})
        else:
            raise Refuse("unknown view %r" % v)
        return {"rows": rows}


def main():
    b = Broker()
    b.lose = {}
    inp = sys.stdin
    out = sys.stdout
    for line in inp:
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
                "name": "cr10 clean-room broker", "version": "0.1", "protocol": PROTOCOL,
                "capabilities": CAPS, "params": PARAMS}}
        elif op == "bye":
            out.write(json.dumps({"id": rid, "ok": True}) + "\n")
            out.flush()
            return
        elif op == "execute":
            cmd = req.get("command") or {}
            b.events = []
            try:
                if cmd.get("kind") == "start":
                    b.lose = {}
                res = b.execute(cmd)
                ans = {"id": rid, "ok": True, "result": res, "events": b.events}
            except Refuse as e:
                ans = {"id": rid, "ok": False, "error": str(e), "events": b.events}
            except Exception as e:
                traceback.print_exc(file=sys.stderr)
                ans = {"id": rid, "ok": False, "fault": True, "error": "%s: %s" % (type(e).__name__, e),
                       "events": b.events}
            b.events = []
        else:
            ans = {"id": rid, "ok": False, "error": "unknown op %r" % op}
        out.write(json.dumps(ans) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
