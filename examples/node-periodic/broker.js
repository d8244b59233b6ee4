#!/usr/bin/env node
// A partial implementation in another language: only the broker's periodic
// tasks that need no transport (the 5-second timer and its counting, task
// handlers, broker restart, BCN, the acknowledged-message clean-up). It
// declares just the capability "periodic_tasks", so every scenario that
// needs more is reported "not applicable". See docs/protocol.md.
"use strict";
const readline = require("readline");

const PERIOD_MS = 5000;
const SCHEDULE = [
  ["queue monitors", 1], ["task handlers", 1], ["message dispatcher", 1],
  ["transport connections", 2], ["transmitter", 2],
  ["idle connections", 5], ["forwarder", 5], ["broker start", 5],
  ["broker configuration notification", 5], ["acknowledged message clean-up", 5],
];

let state = null; // set by "start"

function emit(kind, fields) {
  state.events.push({ at_ms: state.now, kind, ...fields });
}

function start(cmd) {
  state = { start: cmd.at_ms, now: cmd.at_ms, number: 0, events: [], instances: {}, dialogs: [] };
  emit("broker_started", {});
  for (const inst of cmd.topology.instances || []) {
    const handlers = 2 * (inst.cpus || 1);
    const databases = {};
    state.instances[inst.name] = { handlers, failed: 0, databases };
    emit("task_handlers_started", { instance: inst.name, count: handlers });
    for (const db of inst.databases || []) {
      const keyed = db.master_key !== false;
      databases[db.name] = { masterKey: keyed, started: keyed, cleanup: true };
      if (!keyed) {
        emit("database_broker_start_failed", { instance: inst.name, database: db.name, reason: "missing master key" });
      }
    }
  }
  return {};
}

function notification() {
  state.number += 1;
  const tasks = SCHEDULE.filter(([, every]) => state.number % every === 0).map(([task]) => task);
  for (const name of Object.keys(state.instances)) {
    emit("timer_notification", { instance: name, number: state.number, tasks });
  }
  for (const task of tasks) {
    for (const [name, inst] of Object.entries(state.instances)) {
      if (task === "task handlers" && inst.failed > 0) {
        emit("task_handlers_restarted", { instance: name, count: inst.failed });
        inst.failed = 0;
      } else if (task === "broker start") {
        for (const [dbName, db] of Object.entries(inst.databases)) {
          if (db.started) continue;
          db.started = db.masterKey;
          if (db.started) emit("database_broker_started", { instance: name, database: dbName });
          else emit("database_broker_start_failed", { instance: name, database: dbName, reason: "missing master key" });
        }
      } else if (task === "broker configuration notification") {
        emit("broker_configuration_notification", { instance: name });
      } else if (task === "acknowledged message clean-up") {
        for (const [dbName, db] of Object.entries(inst.databases)) {
          const hasDialogs = state.dialogs.some((d) => d.instance === name && d.database === dbName);
          if (db.started && !db.cleanup && hasDialogs) {
            db.cleanup = true;
            emit("ack_cleanup_resumed", { instance: name, database: dbName });
          }
        }
      }
    }
  }
}

function advance(atMs) {
  if (atMs < state.now) throw new Error(`time cannot go back: now ${state.now} ms, asked ${atMs} ms`);
  while (state.start + (state.number + 1) * PERIOD_MS <= atMs) {
    state.now = state.start + (state.number + 1) * PERIOD_MS;
    notification();
  }
  state.now = atMs;
}

function database(instance, name) {
  const inst = state.instances[instance];
  if (!inst) throw new Error(`no instance '${instance}'`);
  if (!inst.databases[name]) throw new Error(`no database '${name}' in instance '${instance}'`);
  return inst.databases[name];
}

const COMMANDS = {
  advance_time: () => ({}),
  begin_dialog: (cmd) => {
    state.dialogs.push({ instance: cmd.instance, database: cmd.database });
    emit("dialog_begun", { dialog: cmd.dialog, instance: cmd.instance, database: cmd.database });
    return { dialog: cmd.dialog };
  },
  fail_task_handlers: (cmd) => {
    const inst = state.instances[cmd.instance];
    if (!inst) throw new Error(`no instance '${cmd.instance}'`);
    if (cmd.count > inst.handlers - inst.failed) throw new Error(`only ${inst.handlers - inst.failed} handlers run`);
    inst.failed += cmd.count;
    emit("task_handlers_failed", { instance: cmd.instance, count: cmd.count });
    return {};
  },
  create_master_key: (cmd) => {
    database(cmd.instance, cmd.database).masterKey = true;
    emit("master_key_created", { instance: cmd.instance, database: cmd.database });
    return {};
  },
  stop_ack_cleanup: (cmd) => {
    database(cmd.instance, cmd.database).cleanup = false;
    emit("ack_cleanup_stopped", { instance: cmd.instance, database: cmd.database });
    return {};
  },
  query_view: (cmd) => {
    if (cmd.view !== "sbtck.periodic_state") throw new Error(`this example has no view ${cmd.view}`);
    const rows = [];
    for (const [name, inst] of Object.entries(state.instances)) {
      if (cmd.instance && cmd.instance !== name) continue;
      for (const [dbName, db] of Object.entries(inst.databases)) {
        rows.push({ instance: name, task_handlers: inst.handlers, running_task_handlers: inst.handlers - inst.failed,
          database: dbName, broker_started: db.started, ack_cleanup_running: db.cleanup });
      }
      if (Object.keys(inst.databases).length === 0) {
        rows.push({ instance: name, task_handlers: inst.handlers, running_task_handlers: inst.handlers - inst.failed });
      }
    }
    return { rows };
  },
};

function execute(cmd) {
  if (cmd.kind === "start") return start(cmd);
  if (state === null) throw new Error(`${cmd.kind} before start`);
  advance(cmd.at_ms);
  const run = COMMANDS[cmd.kind];
  if (!run) throw new Error(`this example does not support ${cmd.kind}`);
  return run(cmd);
}

const HELLO = {
  name: "node periodic-tasks example", version: "0.1.0", protocol: "2.0", capabilities: ["periodic_tasks", "decision_trace"],
  params: { timer_period_s: 5, task_handlers_per_cpu: 2 },
};

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (!line.trim()) return;
  const request = JSON.parse(line);
  let answer;
  if (request.op === "hello") {
    answer = { id: request.id, ok: true, result: HELLO };
  } else if (request.op === "bye") {
    process.stdout.write(JSON.stringify({ id: request.id, ok: true }) + "\n");
    process.exit(0);
  } else {
    try {
      const result = execute(request.command);
      answer = { id: request.id, ok: true, result, events: state.events.splice(0) };
    } catch (err) {
      answer = { id: request.id, ok: false, error: err.message, events: state ? state.events.splice(0) : [] };
    }
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
