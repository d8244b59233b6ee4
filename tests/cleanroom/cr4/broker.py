#!/usr/bin/env python3
"""cleanroom7: a Service Broker model speaking the sbtck protocol (2.2) on stdio.

Written from the source documents (shared/spec) and the kit's docs only.
Standard library only.  Deterministic: time comes from the kit's at_ms.
"""
import sys
import json
import os
import heapq
import re

BCN = 'http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice'
TRACE = os.environ.get('SBTCK_CR7_NO_TRACE') != '1'
PARAMS = {
    'activation_empty_window_s': 3,
    'external_activation_timeout_s': 21,
    'delayed_retry_s': 7,
    'forward_hop_limit': 4,
}
if os.environ.get('SBTCK_CR7_PARAMS'):
    # for experiments only: other values of the open parameters, as JSON
    PARAMS.update(json.loads(os.environ['SBTCK_CR7_PARAMS']))
CAPS = ['activation', 'external_activation', 'routing', 'mirroring', 'forwarding',
        'dynamic_routing', 'periodic_tasks']
if TRACE:
    CAPS.append('decision_trace')

TRACE_KINDS = {'activation_necessary', 'activation_withheld', 'routes_matched', 'route_chosen',
               'timer_notification', 'transmitter_reclassified'}
PERIOD = 5000
PHASES = os.environ.get('SBTCK_CR7_TIMER_PHASES') == '1'
TASK_FNS = [(1, 't_monitors'), (1, 't_handlers'), (1, 'dispatcher_clean'), (2, 'transport_task'),
            (2, 'transmitter_task'), (5, 't_idle'), (5, 't_forwarder'), (5, 't_broker_start'),
            (5, 't_ack_cleanup')]


def U(s):
    return s.upper() if isinstance(s, str) else s


class Refuse(Exception):
    pass


class Route:
    def __init__(self, d, now, order):
        self.name = d.get('name')
        self.service = d.get('service_name')
        self.bi = d.get('broker_instance')
        self.address = d.get('address') or 'LOCAL'
        self.mirror = d.get('mirror_address')
        lt = d.get('lifetime_s')
        self.expires = None if lt is None else now + int(round(float(lt) * 1000))
        self.principal = None
        self.order = order

    def addr_kind(self):
        a = U(self.address)
        if a == 'LOCAL':
            return 'LOCAL'
        if a == 'TRANSPORT':
            return 'TRANSPORT'
        return 'NET'


class Queue:
    def __init__(self, db, d, qid):
        self.db = db
        self.name = d['name']
        act = d.get('activation') or {}
        self.status = act.get('status') or 'OFF'
        self.proc = act.get('procedure_name')
        self.maxr = act.get('max_queue_readers') or 0
        self.notes = []          # event notification names
        self.msgs = []           # QMsg
        self.monitor = False
        self.tasks = {}          # n -> Task
        self.counter = 0
        self.last_empty = None
        self.last_activated = None
        self.notify_until = None
        self.notify_token = 0
        self.waiters = []        # sessions waiting (FIFO)
        self.qid = qid

    def key(self):
        return (self.db.inst.name, self.db.name, self.name)

    def wants_monitor(self):
        return U(self.status) == 'ON' or bool(self.notes)


class DB:
    def __init__(self, inst, d, dbid):
        self.inst = inst
        self.name = d['name']
        self.bi = d.get('broker_instance')
        self.master_key = d.get('master_key', True)
        self.started = bool(self.master_key)
        self.role = d.get('mirroring_role')
        self.procs = {p['name']: p for p in (d.get('procedures') or [])}
        self.queues = {}
        self.services = {}
        self.routes = []
        self.ack_running = True
        self.has_dialogs = False
        self.dbid = dbid

    def eligible(self):
        return self.started and self.role != 'mirror'


class Instance:
    def __init__(self, d):
        self.name = d['name']
        self.address = d['address']
        self.cpus = d.get('cpus') or 1
        self.forwarding = bool(d.get('message_forwarding'))
        self.msdb = []
        self.dbs = []
        self.reachable = True
        self.handlers_total = 2 * self.cpus
        self.handlers_running = self.handlers_total
        self.conns = {}      # ADDR -> dict
        self.suppress = {}   # ADDR -> until ms
        self.disp_mode = 'running'
        self.disp_delay = 0
        self.disp_buf = []   # dicts
        self.timer_n = 0
        self.waits = []      # Wait entries in order
        self.touched = set()
        self.failed = set()  # dialog names failed at this transmitter
        self.last_reclass = None

    def db(self, name):
        for d in self.dbs:
            if d.name == name:
                return d
        raise Refuse('no database %r on %r' % (name, self.name))


class Dialog:
    def __init__(self, name, inst, db, frm, to, to_bi):
        self.name = name
        self.init_inst = inst
        self.init_db = db
        self.from_service = frm
        self.to_service = to
        self.to_bi = to_bi
        self.acked_bi = None
        self.target_bi = None
        self.next_seq = {False: 0, True: 0}
        self.expected = {False: 0, True: 0}
        self.delivered = {False: set(), True: set()}
        self.init_group = 'G-%s-i' % name
        self.target_group = 'G-%s-t' % name
        self.lost = {}   # (seq, ft) -> 'once' | 'every'


class Msg:
    def __init__(self, d, seq, ft):
        self.dialog = d
        self.seq = seq
        self.ft = ft
        self.hops = 0

    def svc(self):
        return self.dialog.from_service if self.ft else self.dialog.to_service

    def ev(self):
        return {'dialog': self.dialog.name, 'from_target': self.ft, 'message_sequence_number': self.seq}


class QMsg:
    def __init__(self, msg, group, order):
        self.msg = msg
        self.group = group
        self.taken = None   # session holding it in an open transaction
        self.order = order


class Session:
    def __init__(self, name, spid):
        self.name = name
        self.spid = spid
        self.tx = False
        self.locks = set()   # (queue key, group)
        self.taken = []      # (queue, QMsg)
        self.rx_queues = []  # queues RECEIVEd from in the transaction
        self.wait = None     # dict
        self.task = None


class Task:
    def __init__(self, queue, n, session, proc):
        self.queue = queue
        self.n = n
        self.session = session
        self.proc = proc
        self.alive = True
        self.step_token = 0


class Wait:
    def __init__(self, msg, inst, outside, origin_db, received):
        self.msg = msg
        self.inst = inst
        self.outside = outside
        self.origin_db = origin_db
        self.received = received
        self.kind = None
        self.addr = None
        self.route = None
        self.token = 0
        self.status = ''

    def key(self):
        return (self.msg.dialog.name, self.msg.ft, self.outside)


class Broker:
    def __init__(self):
        self.reset(0)

    # ------------------------------------------------------------------ basics
    def reset(self, now):
        self.now = now
        self.t0 = now
        self.heap = []
        self.hseq = 0
        self.looks = []
        self.ev = []
        self.insts = {}
        self.dialogs = {}
        self.sessions = {}
        self.spid = 51
        self.pending_req = set()   # (inst, table, route, service)
        self.qorder = 0
        self.route_order = 0

    def emit(self, kind, **f):
        if kind in TRACE_KINDS and not TRACE:
            return
        if not TRACE:
            for k in ('rule', 'step', 'trigger'):
                f.pop(k, None)
        e = {'at_ms': self.now, 'kind': kind}
        e.update(f)
        self.ev.append(e)

    def at(self, t, fn, *args):
        self.hseq += 1
        heapq.heappush(self.heap, (t, self.hseq, fn, args))

    def settle(self):
        while True:
            if self.heap and self.heap[0][0] <= self.now:
                t, _, fn, args = heapq.heappop(self.heap)
                fn(*args)
                continue
            if self.looks:
                q, trig, a6 = self.looks.pop(0)
                self.look(q, trig, a6)
                continue
            break

    def run_until(self, t):
        while True:
            self.settle()
            if self.heap and self.heap[0][0] <= t:
                self.now = max(self.now, self.heap[0][0])
                tt, _, fn, args = heapq.heappop(self.heap)
                fn(*args)
            else:
                break
        if t > self.now:
            self.now = t

    def session(self, name):
        s = self.sessions.get(name)
        if s is None:
            s = Session(name, self.spid)
            self.spid += 1
            self.sessions[name] = s
        return s

    def inst(self, name):
        i = self.insts.get(name)
        if i is None:
            raise Refuse('no instance %r' % name)
        return i

    def inst_by_addr(self, addr):
        for i in self.insts.values():
            if U(i.address) == U(addr):
                return i
        return None

    def queue(self, q):
        i = self.inst(q['instance'])
        db = i.db(q['database'])
        qq = db.queues.get(q['queue'])
        if qq is None:
            raise Refuse('no queue %r' % q['queue'])
        return qq

    def db_by_bi(self, inst, bi, eligible=True):
        for db in inst.dbs:
            if U(db.bi) == U(bi) and (not eligible or db.eligible()):
                return db
        return None

    def has_service(self, inst, svc):
        for db in inst.dbs:
            if db.eligible() and svc in db.services:
                return True
        return False

    # ------------------------------------------------------------------ start
    def cmd_start(self, c):
        self.reset(c['at_ms'])
        topo = c['topology']
        for idef in topo.get('instances', []):
            inst = Instance(idef)
            self.insts[inst.name] = inst
            for r in idef.get('msdb_routes') or []:
                inst.msdb.append(self.mkroute(r))
            dbid = 5
            for ddef in idef.get('databases') or []:
                db = DB(inst, ddef, dbid)
                dbid += 1
                inst.dbs.append(db)
                qid = 1000 * dbid
                for qd in ddef.get('queues') or []:
                    qid += 1
                    db.queues[qd['name']] = Queue(db, qd, qid)
                for s in ddef.get('services') or []:
                    db.services[s['name']] = s['queue']
                for n in ddef.get('event_notifications') or []:
                    q = db.queues.get(n['queue'])
                    if q is not None:
                        q.notes.append(n['name'])
                for r in ddef.get('routes') or []:
                    db.routes.append(self.mkroute(r))
        self.emit('broker_started')
        for inst in self.insts.values():
            for db in inst.dbs:
                for q in db.queues.values():
                    if q.wants_monitor():
                        q.monitor = True
                        self.emit('monitor_created', instance=inst.name, database=db.name, queue=q.name)
            self.emit('task_handlers_started', instance=inst.name, count=inst.handlers_total)
            for db in inst.dbs:
                if not db.started:
                    self.emit('database_broker_start_failed', instance=inst.name, database=db.name,
                              reason='missing master key')
        self.at(self.now + PERIOD, self.timer_all)
        return {}

    def mkroute(self, r):
        self.route_order += 1
        return Route(r, self.now, self.route_order)

    # ------------------------------------------------------------------ timer
    def timer_all(self):
        # each instance's timer notification of this instant; by default each instance runs all its tasks
        # in turn (the documents give no order between two instances' timers); with
        # SBTCK_CR7_TIMER_PHASES=1 every instance runs each task before any runs the next one
        insts = list(self.insts.values())
        if PHASES:
            for inst in insts:
                self.timer_begin(inst)
            for ph in range(len(TASK_FNS)):
                for inst in insts:
                    self.timer_task(inst, ph)
        else:
            for inst in insts:
                self.timer_begin(inst)
                for ph in range(len(TASK_FNS)):
                    self.timer_task(inst, ph)
        self.at(self.now + PERIOD, self.timer_all)

    def timer_begin(self, inst):
        inst.timer_n += 1
        n = inst.timer_n
        tasks = ['queue monitors', 'task handlers', 'message dispatcher']
        if n % 2 == 0:
            tasks += ['transport connections', 'transmitter']
        if n % 5 == 0:
            tasks += ['idle connections', 'forwarder', 'broker start',
                      'broker configuration notification', 'acknowledged message clean-up']
        self.emit('timer_notification', instance=inst.name, number=n, tasks=tasks)

    def timer_task(self, inst, ph):
        n = inst.timer_n
        every, name = TASK_FNS[ph]
        if n % every == 0:
            getattr(self, name)(inst)

    def t_monitors(self, inst):
        for db in inst.dbs:
            for q in db.queues.values():
                if q.monitor:
                    self.looks.append((q, 'timer notification', False))

    def t_handlers(self, inst):
        if inst.handlers_running < inst.handlers_total:
            k = inst.handlers_total - inst.handlers_running
            inst.handlers_running = inst.handlers_total
            self.emit('task_handlers_restarted', instance=inst.name, count=k)

    def t_idle(self, inst):
        for addr, c in list(inst.conns.items()):
            if self.now - c['last'] >= 90000:
                del inst.conns[addr]
                self.emit('connection_closed', instance=inst.name, address=c['address'], reason='idle')

    def t_forwarder(self, inst):
        for w in list(inst.waits):
            if w.outside and self.now - w.received >= 60000 and w in inst.waits:
                self.remove_wait(w, release=False)
                self.emit('forwarded_message_deleted', instance=inst.name, **w.msg.ev())

    def t_broker_start(self, inst):
        for db in inst.dbs:
            if not db.started and db.master_key:
                db.started = True
                self.emit('database_broker_started', instance=inst.name, database=db.name)

    def t_ack_cleanup(self, inst):
        for db in inst.dbs:
            if db.has_dialogs and not db.ack_running:
                db.ack_running = True
                self.emit('ack_cleanup_resumed', instance=inst.name, database=db.name)

    def kick_waits_all(self):
        pass

    # ------------------------------------------------------------------ activation: looks
    def unread(self, q):
        return sum(1 for m in q.msgs if m.taken is None)

    def waiting_readers(self, q):
        return sum(1 for s in q.waiters if not s.wait.get('where'))

    def look(self, q, trig, a6):
        if not q.monitor:
            return
        rule = None
        if a6 and not q.tasks:
            rule = 'ACT-06'
        elif self.unread(q) > 0 and self.waiting_readers(q) == 0 and not self.recent_empty(q):
            rule = 'ACT-07'
        if rule is None:
            return
        db = q.db
        inst = db.inst
        self.emit('activation_necessary', instance=inst.name, database=db.name, queue=q.name, rule=rule,
                  trigger=trig)
        started = None
        if U(q.status) == 'ON' and q.proc:
            if len(q.tasks) < (q.maxr or 0):
                started = self.start_task(q)
            else:
                self.emit('activation_withheld', instance=inst.name, database=db.name, queue=q.name,
                          reason='MAX_QUEUE_READERS')
        if q.notes:
            if q.notify_until is not None and self.now < q.notify_until:
                self.emit('activation_withheld', instance=inst.name, database=db.name, queue=q.name,
                          reason='notification time-out')
            else:
                for n in q.notes:
                    self.emit('event_notification', instance=inst.name, database=db.name, queue=q.name,
                              notification=n, event_type='QUEUE_ACTIVATION')
                q.last_activated = self.now
                q.notify_token += 1
                q.notify_until = self.now + int(round(PARAMS['external_activation_timeout_s'] * 1000))
                self.at(q.notify_until, self.notify_expired, q, q.notify_token)
        # what the look started (a procedure and its first RECEIVE) is done before the next look
        if started is not None and started.proc.get('receives', True):
            self.task_receive(started)

    def recent_empty(self, q):
        if q.last_empty is None:
            return False
        return self.now - q.last_empty < int(round(PARAMS['activation_empty_window_s'] * 1000))

    def notify_expired(self, q, token):
        if token != q.notify_token or q.notify_until is None:
            return
        q.notify_until = None
        db = q.db
        self.emit('activation_time_out', instance=db.inst.name, database=db.name, queue=q.name)
        if q.monitor:
            self.looks.append((q, 'external activation time-out', False))

    def end_notify_timeout(self, q):
        if q.notify_until is not None:
            q.notify_until = None
            q.notify_token += 1

    def update_monitor(self, q):
        want = q.wants_monitor()
        db = q.db
        if want and not q.monitor:
            q.monitor = True
            self.emit('monitor_created', instance=db.inst.name, database=db.name, queue=q.name)
        elif not want and q.monitor:
            q.monitor = False
            self.emit('monitor_removed', instance=db.inst.name, database=db.name, queue=q.name)

    # ------------------------------------------------------------------ activated tasks
    def start_task(self, q):
        db = q.db
        proc = db.procs.get(q.proc) or {'name': q.proc, 'receives': False}
        q.counter += 1
        n = q.counter
        sname = '%s#%d' % (q.name, n)
        s = Session(sname, self.spid)
        self.spid += 1
        self.sessions[sname] = s
        t = Task(q, n, s, proc)
        s.task = t
        q.tasks[n] = t
        q.last_activated = self.now
        self.emit('procedure_started', instance=db.inst.name, database=db.name, queue=q.name,
                  procedure_name=q.proc, spid=s.spid, task=n)
        return t

    def task_receive(self, t):
        if not t.alive:
            return
        s = t.session
        if not s.tx:
            s.tx = True
            s.rx_queues = []
        top = t.proc.get('receive_top', 1)
        w = t.proc.get('waitfor_ms')
        self.do_receive(s, t.queue, top, None, None, w)

    def task_got_rows(self, t):
        # the procedure works holding the group, then commits and RECEIVEs again
        work = t.proc.get('work_ms') or 0
        t.step_token += 1
        self.at(self.now + work, self.task_step, t, t.step_token)

    def task_step(self, t, token):
        if not t.alive or token != t.step_token:
            return
        self.commit(t.session)
        self.task_receive(t)

    def task_empty(self, t):
        # an empty RECEIVE ends the procedure, committing its transaction
        if not t.alive:
            return
        self.commit(t.session)
        self.end_task(t, 'empty RECEIVE')

    def end_task(self, t, reason):
        t.alive = False
        q = t.queue
        q.tasks.pop(t.n, None)
        s = t.session
        if s.wait is not None:
            self.cancel_wait(s)
        db = q.db
        self.emit('procedure_exited', instance=db.inst.name, database=db.name, queue=q.name,
                  reason=reason, spid=s.spid, task=t.n)
        if not q.tasks and q.monitor:
            self.looks.append((q, 'all procedures exited', False))

    def cmd_exit_procedure(self, c):
        q = self.queue(c['queue'])
        t = q.tasks.get(c['task'])
        if t is None:
            raise Refuse('no running task %r of queue %r' % (c['task'], q.name))
        s = t.session
        t.alive = False
        if s.wait is not None:
            self.cancel_wait(s)
        if s.tx:
            self.rollback(s, from_exit=True)
        t.alive = True
        self.end_task(t, 'exited')
        return {}

    # ------------------------------------------------------------------ RECEIVE
    def eligible_msgs(self, s, q, where_dialog, where_group):
        out = []
        for m in q.msgs:
            if m.taken is not None:
                continue
            lk = self.lock_holder(q, m.group)
            if lk is not None and lk is not s:
                continue
            if where_dialog is not None and m.msg.dialog.name != where_dialog:
                continue
            if where_group is not None and m.group != where_group:
                continue
            out.append(m)
        return out

    def lock_holder(self, q, group):
        for s in self.sessions.values():
            if (q.key(), group) in s.locks:
                return s
        return None

    def group_of_dialog(self, q, dname):
        d = self.dialogs.get(dname)
        if d is None:
            return None
        # the endpoint whose queue this is
        tq = self.target_queue(d)
        if tq is q:
            return d.target_group
        return d.init_group

    def target_queue(self, d):
        if d.target_bi is None:
            return None
        for inst in self.insts.values():
            db = self.db_by_bi(inst, d.target_bi)
            if db is not None:
                qn = db.services.get(d.to_service)
                return db.queues.get(qn)
        return None

    def pick(self, s, q, top, where_dialog, where_group):
        el = self.eligible_msgs(s, q, where_dialog, where_group)
        if not el:
            return None, []
        own = [m for m in el if (q.key(), m.group) in s.locks]
        first = own[0] if own else el[0]
        grp = first.group
        rows = [m for m in el if m.group == grp]
        if top is not None:
            rows = rows[:top]
        return grp, rows

    def cmd_receive(self, c):
        s = self.session(c['session'])
        q = self.queue(c['queue'])
        if s.wait is not None:
            raise Refuse('session %r is waiting' % s.name)
        wg = None
        if c.get('where_group') is not None:
            wg = self.group_of_dialog(q, c['where_group']) or ('G-none-%s' % c['where_group'])
        self.do_receive(s, q, c.get('top'), c.get('where_dialog'), wg, c.get('waitfor_ms'))
        return {}

    def do_receive(self, s, q, top, where_dialog, where_group, waitfor, statement='RECEIVE'):
        has_where = where_dialog is not None or where_group is not None
        db = q.db
        base = dict(instance=db.inst.name, database=db.name, queue=q.name, session=s.name,
                    statement=statement, has_where=has_where)
        if statement == 'RECEIVE':
            self.end_notify_timeout(q)
        if statement == 'RECEIVE' and s.tx and q not in s.rx_queues:
            s.rx_queues.append(q)
        grp, rows = self.pick(s, q, top, where_dialog, where_group)
        if rows or (statement == 'GET CONVERSATION GROUP' and grp is not None):
            self.give_rows(s, q, grp, rows, base, statement)
        elif waitfor:
            s.wait = {'queue': q, 'top': top, 'where': has_where, 'wd': where_dialog, 'wg': where_group,
                      'stmt': statement, 'base': base, 'token': self.hseq + 1}
            q.waiters.append(s)
            self.emit('reader_waiting', **base)
            self.at(self.now + waitfor, self.wait_timeout, s, s.wait['token'])
        else:
            self.empty(s, q, base, has_where)
        if statement == 'RECEIVE' and q.monitor:
            self.looks.append((q, 'RECEIVE', False))

    def empty(self, s, q, base, has_where):
        self.emit('empty_result', rows=[], conversation_group=None, **base)
        if not has_where:
            q.last_empty = self.now
        if s.task is not None:
            self.task_empty(s.task)

    def give_rows(self, s, q, grp, rows, base, statement):
        rr = []
        for m in rows:
            d = dict(m.msg.ev())
            d['conversation_group'] = grp
            d['message_type_name'] = 'DEFAULT'
            d['message_body'] = ''
            rr.append(d)
        if statement == 'GET CONVERSATION GROUP':
            rr = []
        self.emit('rows_returned', rows=rr, conversation_group=grp, **base)
        if s.tx:
            s.locks.add((q.key(), grp))
            for m in rows:
                if statement == 'RECEIVE':
                    m.taken = s
                    s.taken.append((q, m))
        else:
            if statement == 'RECEIVE':
                for m in rows:
                    q.msgs.remove(m)
        if s.task is not None and statement == 'RECEIVE':
            self.task_got_rows(s.task)

    def wait_timeout(self, s, token):
        w = s.wait
        if w is None or w['token'] != token:
            return
        q = w['queue']
        s.wait = None
        if s in q.waiters:
            q.waiters.remove(s)
        if w['stmt'] == 'RECEIVE':
            self.empty(s, q, w['base'], w['where'])
            if q.monitor:
                self.looks.append((q, 'RECEIVE', False))
        else:
            self.emit('empty_result', rows=[], conversation_group=None, **w['base'])
            q.last_empty = self.now

    def cancel_wait(self, s):
        w = s.wait
        if w is None:
            return
        q = w['queue']
        s.wait = None
        if s in q.waiters:
            q.waiters.remove(s)

    def serve_waiters(self, q):
        progress = True
        while progress:
            progress = False
            for s in list(q.waiters):
                w = s.wait
                if w is None:
                    continue
                grp, rows = self.pick(s, q, w['top'], w['wd'], w['wg'])
                if rows or (w['stmt'] == 'GET CONVERSATION GROUP' and grp is not None):
                    s.wait = None
                    q.waiters.remove(s)
                    self.give_rows(s, q, grp, rows, w['base'], w['stmt'])
                    if w['stmt'] == 'RECEIVE' and q.monitor:
                        self.looks.append((q, 'RECEIVE', False))
                    progress = True
                    break

    def cmd_gcg(self, c):
        s = self.session(c['session'])
        q = self.queue(c['queue'])
        if s.wait is not None:
            raise Refuse('session %r is waiting' % s.name)
        self.do_receive(s, q, None, None, None, c.get('waitfor_ms'), statement='GET CONVERSATION GROUP')
        return {}

    # ------------------------------------------------------------------ transactions
    def cmd_begin_tx(self, c):
        s = self.session(c['session'])
        if s.tx:
            raise Refuse('session %r already has a transaction' % s.name)
        s.tx = True
        s.rx_queues = []
        return {}

    def commit(self, s):
        queues = set()
        for q, m in s.taken:
            if m in q.msgs:
                q.msgs.remove(m)
            queues.add(q)
        for (qk, g) in s.locks:
            queues.add(self.queue({'instance': qk[0], 'database': qk[1], 'queue': qk[2]}))
        s.taken = []
        s.locks = set()
        s.tx = False
        s.rx_queues = []
        self.emit('transaction_committed', session=s.name)
        for q in sorted(queues, key=lambda x: x.qid):
            self.serve_waiters(q)

    def rollback(self, s, from_exit=False):
        queues = set()
        n = 0
        for q, m in s.taken:
            m.taken = None
            n += 1
            queues.add(q)
        for (qk, g) in s.locks:
            queues.add(self.queue({'instance': qk[0], 'database': qk[1], 'queue': qk[2]}))
        rxq = list(s.rx_queues)
        s.taken = []
        s.locks = set()
        s.tx = False
        s.rx_queues = []
        self.emit('transaction_rolled_back', session=s.name, returned=n)
        for q in sorted(queues, key=lambda x: x.qid):
            self.serve_waiters(q)
        for q in rxq:
            if q.monitor:
                self.looks.append((q, 'rollback', False))

    def cmd_commit(self, c):
        s = self.session(c['session'])
        if not s.tx:
            raise Refuse('session %r has no transaction' % s.name)
        self.commit(s)
        return {}

    def cmd_rollback(self, c):
        s = self.session(c['session'])
        if not s.tx:
            raise Refuse('session %r has no transaction' % s.name)
        self.rollback(s)
        return {}

    # ------------------------------------------------------------------ queue DDL
    def cmd_alter_queue(self, c):
        q = self.queue(c['queue'])
        if c.get('status') is not None:
            q.status = c['status']
        if c.get('procedure_name') is not None:
            q.proc = c['procedure_name']
        if c.get('max_queue_readers') is not None:
            q.maxr = c['max_queue_readers']
        db = q.db
        self.emit('queue_altered', instance=db.inst.name, database=db.name, queue=q.name)
        self.update_monitor(q)
        if q.monitor:
            self.looks.append((q, 'ALTER QUEUE', False))
        return {}

    def cmd_create_en(self, c):
        q = self.queue(c['queue'])
        if c['name'] in q.notes:
            raise Refuse('event notification %r exists' % c['name'])
        q.notes.append(c['name'])
        self.update_monitor(q)
        return {}

    def cmd_drop_en(self, c):
        q = self.queue(c['queue'])
        if c['name'] not in q.notes:
            raise Refuse('no event notification %r' % c['name'])
        q.notes.remove(c['name'])
        if not q.notes:
            # no one is left to be told: the time-out ends with nothing to report
            self.end_notify_timeout(q)
        self.update_monitor(q)
        return {}

    # ------------------------------------------------------------------ dialogs
    def cmd_begin_dialog(self, c):
        if c['dialog'] in self.dialogs:
            raise Refuse('dialog %r exists' % c['dialog'])
        inst = self.inst(c['instance'])
        db = inst.db(c['database'])
        if c['from_service'] not in db.services:
            raise Refuse('no service %r in %r' % (c['from_service'], db.name))
        d = Dialog(c['dialog'], inst, db, c['from_service'], c['to_service'], c.get('to_broker_instance'))
        self.dialogs[d.name] = d
        db.has_dialogs = True
        self.emit('dialog_begun', instance=inst.name, database=db.name, dialog=d.name,
                  from_service=d.from_service, to_service=d.to_service, to_broker_instance=d.to_bi)
        return {}

    def target_endpoint(self, d):
        if d.target_bi is None:
            return None, None
        for inst in self.insts.values():
            for db in inst.dbs:
                if U(db.bi) == U(d.target_bi) and db.role != 'mirror':
                    return inst, db
        for inst in self.insts.values():
            for db in inst.dbs:
                if U(db.bi) == U(d.target_bi):
                    return inst, db
        return None, None

    def cmd_send(self, c):
        d = self.dialogs.get(c['dialog'])
        if d is None:
            raise Refuse('no dialog %r has been begun' % c['dialog'])
        ft = bool(c.get('from_target'))
        if ft:
            inst, db = self.target_endpoint(d)
            if inst is None:
                raise Refuse('dialog %r has no target endpoint yet' % d.name)
        else:
            inst, db = d.init_inst, d.init_db
        seq = d.next_seq[ft]
        d.next_seq[ft] += 1
        m = Msg(d, seq, ft)
        self.emit('message_sent', instance=inst.name, database=db.name, **m.ev())
        head = self.line_head(inst, d.name, ft, False)
        if head is not None:
            w = Wait(m, inst, False, db, self.now)
            self.add_wait(w, 'behind', 'waiting behind an earlier message of its conversation')
        else:
            self.route(inst, m, False, db, None)
        return {'message_sequence_number': seq}

    # ------------------------------------------------------------------ waits
    def line_head(self, inst, dname, ft, outside, exclude=None):
        for w in inst.waits:
            if w is not exclude and w.msg.dialog.name == dname and w.msg.ft == ft and w.outside == outside:
                return w
        return None

    def add_wait(self, w, kind, status, addr=None, route=None):
        inst = w.inst
        if w not in inst.waits:
            inst.waits.append(w)
        w.kind = kind
        w.addr = addr
        w.route = route
        w.token += 1
        w.status = status
        self.emit('transmission_pending', instance=inst.name, status=status, **w.msg.ev())
        if kind == 'delayed':
            self.at(self.now + int(round(PARAMS['delayed_retry_s'] * 1000)), self.retry, w, w.token)

    def remove_wait(self, w, release=True):
        inst = w.inst
        if w in inst.waits:
            inst.waits.remove(w)
        w.token += 1
        if release:
            self.release_followers(inst, w.msg.dialog.name, w.msg.ft, w.outside)

    def release_followers(self, inst, dname, ft, outside=None):
        # the next message of the conversation waiting behind goes on now
        for w in list(inst.waits):
            if w.msg.dialog.name == dname and w.msg.ft == ft and (outside is None or w.outside == outside):
                if w.kind == 'behind':
                    self.route(inst, w.msg, w.outside, w.origin_db, w)
                return

    def retry(self, w, token):
        if token != w.token or w not in w.inst.waits:
            return
        self.emit('routing_retried', instance=w.inst.name, **w.msg.ev())
        self.route(w.inst, w.msg, w.outside, w.origin_db, w)

    # ------------------------------------------------------------------ routing
    def conv_bi(self, m):
        d = m.dialog
        if m.ft:
            return d.init_db.bi
        return d.to_bi or d.acked_bi

    def active(self, table):
        return [r for r in table if r.expires is None or self.now < r.expires]

    def match(self, inst, table, tname, m, wait):
        svc = m.svc()
        bi = self.conv_bi(m)
        routes = self.active(table)
        if bi:
            r1 = [r for r in routes if r.service == svc and r.bi and U(r.bi) == U(bi)]
            if r1:
                return 'RTM-1', r1, None
        r2 = [r for r in routes if r.service == svc and not r.bi]
        if r2:
            return 'RTM-2', r2, None
        if not bi:
            r3 = [r for r in routes if r.service == svc and r.bi]
            if r3:
                pick = U(r3[0].bi)
                return 'RTM-3', [r for r in r3 if U(r.bi) == pick], pick
        for r in routes:
            if r.service == BCN:
                k = (inst.name, tname, r.name, svc)
                if k not in self.pending_req:
                    self.pending_req.add(k)
                    return 'RTM-4', [], r
        r5 = [r for r in routes if not r.service and not r.bi]
        if r5:
            return 'RTM-5', r5, None
        if bi and self.has_service(inst, svc):
            v = Route({'name': '(as if LOCAL)', 'service_name': svc, 'address': 'LOCAL'}, self.now, 0)
            return 'RTM-6', [v], None
        return 'RTM-7', [], None

    def choose(self, inst, m, routes):
        groups = []
        seen = {}
        for r in routes:
            k = (U(r.bi), r.service, U(r.address))
            if k in seen:
                g = seen[k]
                if r.mirror and not g[0].mirror:
                    g[0] = r
                continue
            g = [r]
            seen[k] = g
            groups.append(g)
        reps = [g[0] for g in groups]
        svc = m.svc()
        c1 = [r for r in reps if r.mirror]
        if c1:
            return 'RTC-1', c1
        c2 = [r for r in reps if r.addr_kind() == 'LOCAL']
        if c2 and self.has_service(inst, svc):
            return 'RTC-2', c2
        c3 = [r for r in reps if r.addr_kind() == 'NET']
        if c3:
            return 'RTC-3', c3
        c4 = [r for r in reps if r.addr_kind() == 'TRANSPORT']
        if c4:
            return 'RTC-4', c4
        return None, []

    def route(self, inst, m, outside, origin_db, wait):
        d = m.dialog
        if wait is None:
            wait = Wait(m, inst, outside, origin_db, self.now)
        if outside and m.ft:
            db = self.db_by_bi(inst, d.init_db.bi)
            if db is not None:
                self.emit('reply_recognised', instance=inst.name, broker_instance=d.init_db.bi, **m.ev())
                self.remove_wait(wait, release=False)
                self.deliver(inst, m, db, True)
                self.release_followers(inst, d.name, m.ft, outside)
                return
        if outside:
            table, tname = inst.msdb, 'msdb.sys.routes'
        else:
            table, tname = origin_db.routes, '%s.sys.routes' % origin_db.name
        step, routes, extra = self.match(inst, table, tname, m, wait)
        f = dict(instance=inst.name, table=tname, step=step, routes=[r.name for r in routes], **m.ev())
        if step == 'RTM-3':
            f['broker_instance'] = extra
        else:
            f['broker_instance'] = None
        self.emit('routes_matched', **f)
        if step == 'RTM-4':
            self.emit('routing_requested', instance=inst.name, table=tname, route=extra.name, service=m.svc(),
                      **m.ev())
            self.emit('conversation_delayed', instance=inst.name, step='RTM-4', **m.ev())
            self.add_wait(wait, 'delayed', 'delayed: a routing request is pending')
            return
        if step == 'RTM-7':
            self.emit('conversation_delayed', instance=inst.name, step='RTM-7', **m.ev())
            self.add_wait(wait, 'delayed', 'delayed: no route matches')
            return
        cstep, cands = self.choose(inst, m, routes)
        if cstep is None:
            self.emit('conversation_delayed', instance=inst.name, step='RTC-4', **m.ev())
            self.add_wait(wait, 'delayed', 'delayed: no route could be chosen')
            return
        r = cands[0]
        self.emit('route_chosen', instance=inst.name, step=cstep, route=r.name,
                  candidates=[x.name for x in cands], **m.ev())
        if outside and not inst.forwarding and r.addr_kind() != 'LOCAL':
            self.remove_wait(wait, release=False)
            self.emit('message_dropped', instance=inst.name, reason='message forwarding is not active',
                      rule='RTC-5', **m.ev())
            self.release_followers(inst, m.dialog.name, m.ft, wait.outside)
            return
        if r.mirror:
            self.mirror_route(inst, m, r, outside, origin_db, wait)
            return
        k = r.addr_kind()
        if k == 'LOCAL':
            bi = self.conv_bi(m) or r.bi
            db = None
            if bi:
                db = self.db_by_bi(inst, bi)
                if db is not None and m.svc() not in db.services:
                    db = None
                if db is None:
                    self.remove_wait(wait, release=False)
                    self.emit('message_dropped', instance=inst.name,
                              reason='no database of this instance has broker instance %s' % bi,
                              rule='RTL-2', **m.ev())
                    self.release_followers(inst, m.dialog.name, m.ft, wait.outside)
                    return
            else:
                cand = []
                if origin_db is not None:
                    cand.append(origin_db)
                cand += [x for x in inst.dbs if x is not origin_db]
                for x in cand:
                    if x.eligible() and m.svc() in x.services:
                        db = x
                        break
                if db is None:
                    self.emit('conversation_delayed', instance=inst.name, step='RTC-4', **m.ev())
                    self.add_wait(wait, 'delayed', 'delayed: the service is not in this instance')
                    return
            self.remove_wait(wait, release=False)
            self.deliver(inst, m, db, outside)
            self.release_followers(inst, d.name, m.ft, outside)
            return
        if k == 'TRANSPORT':
            mm = re.match(r'^(TCP://[^/]+)/', m.svc() or '', re.I)
            if not mm:
                self.emit('conversation_delayed', instance=inst.name, step='RTC-4', **m.ev())
                self.add_wait(wait, 'delayed', 'delayed: TRANSPORT route gives no address')
                return
            addr = mm.group(1)
        else:
            addr = r.address
        self.send_to(inst, m, addr, outside, origin_db, wait)

    def send_to(self, inst, m, addr, outside, origin_db, wait):
        if m.dialog.name in inst.failed:
            self.add_wait(wait, 'failed', 'failed to %s' % addr, addr=addr)
            return
        if U(addr) == U(inst.address):
            # RTX-2: the conversation is treated as arriving from outside
            was_outside = wait.outside
            wait.outside = True
            wait.origin_db = None
            if not was_outside:
                # it now arrives in this instance's forwarder, received now
                wait.received = self.now
                if wait in inst.waits:
                    inst.waits.remove(wait)
                if self.line_head(inst, m.dialog.name, m.ft, True, exclude=wait) is not None:
                    self.add_wait(wait, 'behind', 'waiting behind an earlier message of its conversation')
                else:
                    self.route(inst, m, True, None, wait)
                # the messages held behind it at its origin follow it now
                self.release_followers(inst, m.dialog.name, m.ft, False)
                return
            self.route(inst, m, True, None, wait)
            return
        if outside and m.hops + 1 > PARAMS['forward_hop_limit']:
            self.remove_wait(wait, release=False)
            self.emit('message_dropped', instance=inst.name, reason='forwarded too many times', rule='RTX-1',
                      **m.ev())
            self.release_followers(inst, m.dialog.name, m.ft, wait.outside)
            return
        d = m.dialog
        if d.name in inst.failed:
            self.add_wait(wait, 'failed', 'failed to %s' % addr, addr=addr)
            return
        A = U(addr)
        c = inst.conns.get(A)
        if c is None:
            if inst.suppress.get(A) is not None and self.now < inst.suppress[A]:
                self.add_wait(wait, 'conn', 'waiting for a connection to %s' % addr, addr=addr)
                return
            dest = self.inst_by_addr(addr)
            if dest is not None and dest.reachable:
                c = {'address': addr, 'opened': self.now, 'last': self.now}
                inst.conns[A] = c
                self.emit('connection_attempt', instance=inst.name, address=addr, result='connected')
                self.transmit(inst, m, addr, outside, wait)
                self.flush_conn(inst, A)
                return
            self.emit('connection_attempt', instance=inst.name, address=addr, result='refused')
            inst.suppress[A] = self.now + 60000
            self.add_wait(wait, 'conn', 'waiting for a connection to %s' % addr, addr=addr)
            return
        self.transmit(inst, m, addr, outside, wait)

    def flush_conn(self, inst, A):
        for w in list(inst.waits):
            if w.kind == 'conn' and U(w.addr) == A and w in inst.waits and A in inst.conns:
                self.transmit(inst, w.msg, w.addr, w.outside, w)

    def transmit(self, inst, m, addr, outside, wait):
        A = U(addr)
        if m.dialog.name in inst.failed:
            # the transmitter of this instance cannot send the dialog until it reclassifies it
            self.add_wait(wait, 'failed', 'failed to %s' % addr, addr=addr)
            return
        c = inst.conns[A]
        c['last'] = self.now
        dest = self.inst_by_addr(addr)
        self.remove_wait(wait, release=False)
        if outside:
            m.hops += 1
            self.emit('message_forwarded', instance=inst.name, address=addr, hops=m.hops, **m.ev())
        self.emit('message_transmitted', instance=inst.name, address=addr,
                  to_instance=dest.name if dest else None, **m.ev())
        d = m.dialog
        lk = (m.seq, m.ft)
        lost = d.lost.get(lk)
        if lost:
            if lost == 'once':
                del d.lost[lk]
        elif dest is not None:
            self.route(dest, m, True, None, None)
        self.release_followers(inst, d.name, m.ft, outside)

    # ------------------------------------------------------------------ mirroring
    def probe_answer(self, addr, m):
        dest = self.inst_by_addr(addr)
        if dest is None or not dest.reachable:
            return 'unreachable'
        bi = self.conv_bi(m)
        for db in dest.dbs:
            if db.role == 'principal' and db.started:
                if bi:
                    if U(db.bi) == U(bi):
                        return 'principal'
                elif m.svc() in db.services:
                    return 'principal'
        return 'not principal'

    def mirror_route(self, inst, m, r, outside, origin_db, wait):
        if r.principal is not None:
            ans = self.probe_answer(r.principal, m)
            if ans == 'principal':
                self.send_to(inst, m, r.principal, outside, origin_db, wait)
                return
            self.emit('principal_lost', instance=inst.name, address=r.principal, answer=ans, route=r.name,
                      **m.ev())
            other = r.mirror if U(r.principal) == U(r.address) else r.address
            ans2 = self.probe_answer(other, m)
            self.emit('principal_probe', instance=inst.name, address=other, answer=ans2, route=r.name, **m.ev())
            if ans2 == 'principal':
                r.principal = other
                self.send_to(inst, m, other, outside, origin_db, wait)
                return
            # RTR-5: the principal stays the one known until it is reached again or the partner claims the
            # role; both are tried again later
            self.add_wait(wait, 'principal', 'waiting for the principal of route %s' % r.name, route=r)
            return
        found = None
        for a in (r.address, r.mirror):
            ans = self.probe_answer(a, m)
            self.emit('principal_probe', instance=inst.name, address=a, answer=ans, route=r.name, **m.ev())
            if ans == 'principal' and found is None:
                found = a
        if found is not None:
            r.principal = found
            self.send_to(inst, m, found, outside, origin_db, wait)
            return
        self.add_wait(wait, 'principal', 'waiting for the principal of route %s' % r.name, route=r)

    # ------------------------------------------------------------------ delivery
    def deliver(self, inst, m, db, outside):
        d = m.dialog
        if outside:
            self.emit('dispatcher_buffered', instance=inst.name, database=db.name, **m.ev())
            # a copy of a message held or saved is dropped
            if m.seq in d.delivered[m.ft] or any(b['msg'].dialog is d and b['msg'].seq == m.seq and
                                                 b['msg'].ft == m.ft for b in inst.disp_buf):
                return
            inst.disp_buf.append({'msg': m, 'db': db, 'arrived': self.now})
            self.pump(inst)
            if inst.disp_mode == 'running' and inst.disp_delay:
                self.at(self.now + int(round(inst.disp_delay * 1000)), self.pump, inst)
            return
        self.save(inst, m, db)

    def pump(self, inst):
        if inst.disp_mode != 'running':
            return
        delay = int(round((inst.disp_delay or 0) * 1000))
        progress = True
        while progress:
            progress = False
            for b in list(inst.disp_buf):
                m = b['msg']
                d = m.dialog
                if m.seq == d.expected[m.ft] and self.now >= b['arrived'] + delay:
                    inst.disp_buf.remove(b)
                    self.save(inst, m, b['db'])
                    progress = True
                    break

    def dispatcher_clean(self, inst):
        # both kinds are judged on the buffers as the notification finds them
        dels = []
        for b in inst.disp_buf:
            m = b['msg']
            d = m.dialog
            reason = None
            if m.seq > d.expected[m.ft]:
                # in order only if every message between the expected one and it is buffered too
                have = {x['msg'].seq for x in inst.disp_buf if x['msg'].dialog is d and x['msg'].ft == m.ft}
                if any(s not in have for s in range(d.expected[m.ft], m.seq)):
                    reason = 'out of order'
            if reason is None and self.now - b['arrived'] >= 10000:
                reason = 'stale'
            if reason:
                dels.append((b, reason))
        for b, reason in dels:
            m = b['msg']
            inst.disp_buf.remove(b)
            self.emit('dispatcher_deleted', instance=inst.name, database=b['db'].name, reason=reason,
                      **m.ev())

    def save(self, inst, m, db):
        d = m.dialog
        if m.seq in d.delivered[m.ft]:
            return
        d.delivered[m.ft].add(m.seq)
        if m.seq >= d.expected[m.ft]:
            d.expected[m.ft] = m.seq + 1
        svc = m.svc()
        qn = db.services.get(svc)
        q = db.queues.get(qn)
        if not m.ft:
            if d.target_bi is None:
                d.target_bi = db.bi
            grp = d.target_group
        else:
            grp = d.init_group
        db.has_dialogs = True
        prior = self.unread(q)
        running = len(q.tasks)
        self.qorder += 1
        q.msgs.append(QMsg(m, grp, self.qorder))
        self.emit('message_arrived', instance=inst.name, database=db.name, queue=q.name, service=svc,
                  conversation_group=grp, **m.ev())
        if not m.ft and d.acked_bi is None:
            d.acked_bi = db.bi
            self.emit('acknowledged', instance=d.init_inst.name, dialog=d.name, broker_instance=db.bi)
        self.serve_waiters(q)
        if q.monitor:
            self.looks.append((q, 'message arrived', prior == 0))

    # ------------------------------------------------------------------ periodic: transport & transmitter
    def transport_task(self, inst):
        addrs = []
        for w in inst.waits:
            if w.kind == 'conn' and U(w.addr) not in [U(a) for a in addrs]:
                addrs.append(w.addr)
        for addr in addrs:
            A = U(addr)
            if A in inst.conns:
                self.flush_conn(inst, A)
                continue
            if inst.suppress.get(A) is not None and self.now < inst.suppress[A]:
                continue
            dest = self.inst_by_addr(addr)
            if dest is not None and dest.reachable:
                inst.conns[A] = {'address': addr, 'opened': self.now, 'last': self.now}
                self.emit('connection_attempt', instance=inst.name, address=addr, result='connected')
                self.flush_conn(inst, A)
            else:
                self.emit('connection_attempt', instance=inst.name, address=addr, result='refused')
                inst.suppress[A] = self.now + 60000
        # RTR-5: the two addresses of a mirrored route are asked again
        for w in list(inst.waits):
            if w.kind == 'principal' and w in inst.waits:
                self.route(inst, w.msg, w.outside, w.origin_db, w)

    def transmitter_task(self, inst):
        last = inst.last_reclass
        # route expirations since the last reclassification touch the waiting dialogs
        tables = [inst.msdb] + [db.routes for db in inst.dbs]
        for t in tables:
            for r in t:
                if r.expires is not None and r.expires <= self.now and (last is None or r.expires > last):
                    self.touch(inst, r.service)
        inst.last_reclass = self.now
        heads = []
        seen = set()
        for w in inst.waits:
            k = w.key()
            if k in seen:
                continue
            seen.add(k)
            heads.append(w)
        chosen = []
        for w in heads:
            dn = w.msg.dialog.name
            if w.kind == 'failed' and dn in inst.failed:
                chosen.append(w)
            elif w.key() in inst.touched:
                chosen.append(w)
        inst.touched = set()
        names = []
        for w in chosen:
            if w.msg.dialog.name not in names:
                names.append(w.msg.dialog.name)
        self.emit('transmitter_reclassified', instance=inst.name, dialogs=names)
        for w in chosen:
            inst.failed.discard(w.msg.dialog.name)
        for w in chosen:
            if w in inst.waits:
                self.route(inst, w.msg, w.outside, w.origin_db, w)

    def touch(self, inst, service):
        for w in inst.waits:
            if service is None or w.msg.svc() == service:
                inst.touched.add(w.key())

    # ------------------------------------------------------------------ route DDL
    def table(self, inst, dbname):
        if dbname is None:
            return inst.msdb
        return inst.db(dbname).routes

    def cmd_create_route(self, c, answer=False):
        inst = self.inst(c['instance'])
        t = self.table(inst, c.get('database'))
        r = c['route']
        if any(x.name == r['name'] for x in t):
            raise Refuse('route %r exists' % r['name'])
        self.check_addr(r.get('address'), r.get('mirror_address'))
        nr = self.mkroute(r)
        t.append(nr)
        self.emit('route_created', instance=inst.name, database=c.get('database') or 'msdb', route=nr.name)
        self.touch(inst, nr.service)
        return {}

    def check_addr(self, a, mirror):
        if a is None:
            return
        if U(a) in ('LOCAL', 'TRANSPORT'):
            if mirror:
                raise Refuse('a mirror address needs a network address')
            return
        if not re.match(r'^TCP://[^:/]+:\d+$', a, re.I):
            raise Refuse('malformed address %r' % a)
        if mirror is not None and not re.match(r'^TCP://[^:/]+:\d+$', mirror, re.I):
            raise Refuse('malformed mirror address %r' % mirror)

    def cmd_alter_route(self, c):
        inst = self.inst(c['instance'])
        t = self.table(inst, c.get('database'))
        r = c['route']
        old = None
        for x in t:
            if x.name == r['name']:
                old = x
        if old is None:
            raise Refuse('no route %r' % r['name'])
        self.touch(inst, old.service)
        if r.get('service_name') is not None:
            old.service = r['service_name']
        if r.get('broker_instance') is not None:
            old.bi = r['broker_instance']
        if r.get('address') is not None:
            old.address = r['address']
        if r.get('mirror_address') is not None:
            old.mirror = r['mirror_address']
        if r.get('lifetime_s') is not None:
            old.expires = self.now + int(round(float(r['lifetime_s']) * 1000))
        if old.principal is not None and U(old.principal) not in (U(old.address), U(old.mirror)):
            old.principal = None
        self.emit('route_altered', instance=inst.name, database=c.get('database') or 'msdb', route=old.name)
        self.touch(inst, old.service)
        return {}

    def cmd_drop_route(self, c):
        inst = self.inst(c['instance'])
        t = self.table(inst, c.get('database'))
        for x in t:
            if x.name == c['name']:
                t.remove(x)
                self.emit('route_dropped', instance=inst.name, database=c.get('database') or 'msdb', route=x.name)
                self.touch(inst, x.service)
                return {}
        raise Refuse('no route %r' % c['name'])

    def cmd_answer(self, c):
        inst = self.inst(c['instance'])
        dbn = c.get('database')
        tname = 'msdb.sys.routes' if dbn is None else '%s.sys.routes' % dbn
        svc = c['route'].get('service_name')
        for k in list(self.pending_req):
            if k[0] == inst.name and k[1] == tname and k[3] == svc:
                self.pending_req.discard(k)
        return self.cmd_create_route(c, answer=True)

    # ------------------------------------------------------------------ faults
    def cmd_set_forwarding(self, c):
        self.inst(c['instance']).forwarding = bool(c['active'])
        return {}

    def cmd_set_reachable(self, c):
        inst = self.inst(c['instance'])
        inst.reachable = bool(c['reachable'])
        if not inst.reachable:
            for other in self.insts.values():
                if other is inst:
                    continue
                A = U(inst.address)
                cc = other.conns.pop(A, None)
                if cc is not None:
                    self.emit('connection_closed', instance=other.name, address=cc['address'], reason='disconnected')
                    other.suppress[A] = self.now + 15000
        return {}

    def cmd_failover(self, c):
        inst = self.inst(c['instance'])
        db = inst.db(c['database'])
        if db.role is None:
            raise Refuse('database %r is not mirrored' % db.name)
        for other in self.insts.values():
            for x in other.dbs:
                if x is not db and x.role is not None and U(x.bi) == U(db.bi):
                    x.role = 'mirror'
        db.role = 'principal'
        return {}

    def cmd_fail_handlers(self, c):
        inst = self.inst(c['instance'])
        inst.handlers_running = max(0, inst.handlers_running - int(c['count']))
        return {}

    def cmd_dispatcher(self, c):
        inst = self.inst(c['instance'])
        inst.disp_mode = c['mode']
        inst.disp_delay = float(c.get('delay_s') or 0)
        if inst.disp_mode == 'running':
            self.pump(inst)
            delay = int(round(inst.disp_delay * 1000))
            for b in inst.disp_buf:
                if b['arrived'] + delay > self.now:
                    self.at(b['arrived'] + delay, self.pump, inst)
        return {}

    def cmd_lose(self, c):
        d = self.dialogs.get(c['dialog'])
        if d is None:
            raise Refuse('no dialog %r' % c['dialog'])
        d.lost[(c['sequence'], bool(c.get('from_target')))] = 'every' if c.get('every') else 'once'
        return {}

    def cmd_drop_connection(self, c):
        inst = self.inst(c['instance'])
        A = U(c['address'])
        cc = inst.conns.pop(A, None)
        if cc is not None:
            self.emit('connection_closed', instance=inst.name, address=cc['address'], reason='disconnected')
            inst.suppress[A] = self.now + 15000
        return {}

    def cmd_fail_transmission(self, c):
        d = self.dialogs.get(c['dialog'])
        if d is None:
            raise Refuse('no dialog %r' % c['dialog'])
        d.init_inst.failed.add(d.name)
        ti, tdb = self.target_endpoint(d)
        if ti is not None:
            ti.failed.add(d.name)
        return {}

    def cmd_master_key(self, c):
        inst = self.inst(c['instance'])
        db = inst.db(c['database'])
        db.master_key = True
        return {}

    def cmd_stop_ack(self, c):
        inst = self.inst(c['instance'])
        db = inst.db(c['database'])
        db.ack_running = False
        return {}

    # ------------------------------------------------------------------ views
    def cmd_view(self, c):
        v = c['view']
        iname = c.get('instance')
        insts = [self.inst(iname)] if iname else list(self.insts.values())
        rows = []
        if v == 'sys.dm_broker_queue_monitors':
            for i in insts:
                for db in i.dbs:
                    for q in db.queues.values():
                        if not q.monitor:
                            continue
                        if q.tasks or q.waiters:
                            st = 'RECEIVES_OCCURRING'
                        elif q.notify_until is not None:
                            st = 'NOTIFIED'
                        else:
                            st = 'INACTIVE'
                        rows.append({'database_id': db.dbid, 'queue_id': q.qid, 'instance': i.name,
                                     'database': db.name, 'queue': q.name, 'state': st,
                                     'last_empty_rowset_time': q.last_empty,
                                     'last_activated_time': q.last_activated,
                                     'tasks_waiting': self.waiting_readers(q)})
        elif v == 'sys.dm_broker_activated_tasks':
            for i in insts:
                for db in i.dbs:
                    for q in db.queues.values():
                        for n in sorted(q.tasks):
                            t = q.tasks[n]
                            rows.append({'spid': t.session.spid, 'database_id': db.dbid, 'queue_id': q.qid,
                                         'instance': i.name, 'database': db.name, 'queue': q.name,
                                         'task': n, 'procedure_name': t.proc.get('name') or q.proc})
        elif v == 'sys.routes':
            for i in insts:
                if c.get('database') is None:
                    tabs = [('msdb', i.msdb)]
                else:
                    tabs = [(c['database'], i.db(c['database']).routes)]
                for dn, t in tabs:
                    for r in t:
                        rows.append({'instance': i.name, 'database': dn, 'name': r.name,
                                     'remote_service_name': r.service, 'broker_instance': r.bi,
                                     'address': r.address, 'mirror_address': r.mirror, 'expires_ms': r.expires})
        elif v in ('sys.transmission_queue', 'sbtck.forwarder'):
            fw = v == 'sbtck.forwarder'
            for i in insts:
                for w in i.waits:
                    if w.outside != fw:
                        continue
                    row = {'instance': i.name, 'dialog': w.msg.dialog.name,
                           'message_sequence_number': w.msg.seq, 'from_target': w.msg.ft,
                           'to_service_name': w.msg.svc(), 'transmission_status': w.status or '',
                           'received_ms': w.received}
                    rows.append(row)
        elif v == 'sys.conversation_endpoints':
            for d in self.dialogs.values():
                rows.append({'dialog': d.name, 'instance': d.init_inst.name, 'database': d.init_db.name,
                             'far_service': d.to_service, 'far_broker_instance': d.to_bi or d.acked_bi,
                             'acknowledged': d.acked_bi is not None})
                ti, tdb = self.target_endpoint(d)
                if ti is not None:
                    rows.append({'dialog': d.name, 'instance': ti.name, 'database': tdb.name,
                                 'far_service': d.from_service, 'far_broker_instance': d.init_db.bi,
                                 'acknowledged': True})
        elif v == 'sys.dm_broker_connections':
            for i in insts:
                for A, cc in i.conns.items():
                    rows.append({'instance': i.name, 'address': cc['address'], 'state': 'CONNECTED',
                                 'opened_ms': cc['opened'], 'last_activity_ms': cc['last']})
        elif v == 'sbtck.dispatcher_buffers':
            for i in insts:
                for b in i.disp_buf:
                    m = b['msg']
                    rows.append({'instance': i.name, 'database': b['db'].name, 'dialog': m.dialog.name,
                                 'message_sequence_number': m.seq, 'from_target': m.ft,
                                 'arrived_ms': b['arrived']})
        elif v == 'sbtck.periodic_state':
            for i in insts:
                for db in i.dbs:
                    rows.append({'instance': i.name, 'task_handlers': i.handlers_total,
                                 'running_task_handlers': i.handlers_running, 'database': db.name,
                                 'broker_started': db.started, 'ack_cleanup_running': db.ack_running})
        else:
            raise Refuse('no view %r' % v)
        return {'rows': rows}

    # ------------------------------------------------------------------ dispatch
    def execute(self, c):
        kind = c['kind']
        at_ms = c['at_ms']
        if kind == 'start':
            return self.cmd_start(c)
        self.run_until(at_ms)
        fn = {
            'advance_time': lambda c: {},
            'begin_dialog': self.cmd_begin_dialog,
            'send': self.cmd_send,
            'begin_transaction': self.cmd_begin_tx,
            'commit': self.cmd_commit,
            'rollback': self.cmd_rollback,
            'receive': self.cmd_receive,
            'get_conversation_group': self.cmd_gcg,
            'alter_queue': self.cmd_alter_queue,
            'create_event_notification': self.cmd_create_en,
            'drop_event_notification': self.cmd_drop_en,
            'exit_procedure': self.cmd_exit_procedure,
            'create_route': self.cmd_create_route,
            'alter_route': self.cmd_alter_route,
            'drop_route': self.cmd_drop_route,
            'answer_routing_request': self.cmd_answer,
            'set_message_forwarding': self.cmd_set_forwarding,
            'set_reachable': self.cmd_set_reachable,
            'failover': self.cmd_failover,
            'fail_task_handlers': self.cmd_fail_handlers,
            'set_dispatcher_saving': self.cmd_dispatcher,
            'lose_in_transit': self.cmd_lose,
            'drop_connection': self.cmd_drop_connection,
            'fail_transmission': self.cmd_fail_transmission,
            'create_master_key': self.cmd_master_key,
            'stop_ack_cleanup': self.cmd_stop_ack,
            'query_view': self.cmd_view,
        }.get(kind)
        if fn is None:
            raise Refuse('unknown command %r' % kind)
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
        rid = req.get('id')
        op = req.get('op')
        if op == 'hello':
            resp = {'id': rid, 'ok': True, 'result': {'name': 'cleanroom7', 'version': '0.1', 'protocol': '2.2',
                                                       'capabilities': CAPS, 'params': PARAMS}}
        elif op == 'bye':
            out.write(json.dumps({'id': rid, 'ok': True}) + '\n')
            out.flush()
            return
        elif op == 'execute':
            b.ev = []
            try:
                res = b.execute(req['command'])
                resp = {'id': rid, 'ok': True, 'result': res, 'events': b.ev}
            except Refuse as e:
                resp = {'id': rid, 'ok': False, 'error': str(e), 'events': b.ev}
            except Exception as e:  # a bug of ours
                import traceback
                traceback.print_exc(file=sys.stderr)
                resp = {'id': rid, 'ok': False, 'fault': True, 'error': '%s: %s' % (type(e).__name__, e),
                        'events': b.ev}
            b.ev = []
        else:
            resp = {'id': rid, 'ok': False, 'error': 'unknown op %r' % op}
        out.write(json.dumps(resp) + '\n')
        out.flush()


if __name__ == '__main__':
    main()
