// Millrace dashboard: plain JavaScript over the REST API (its JSON endpoints accept the login cookie).
// Pages by URL hash: #/ (overview), #/jobs/<id>[/checkpoints|/exceptions|/subtasks], #/taskmanagers[/<id>].
"use strict";

const REFRESH_MS = 1500;
const main = document.getElementById("main");
let timer = null;
let page = null; // the current page's state (so a refresh updates it instead of redrawing it)

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  if (response.status === 401) {
    window.location = "/login";
    throw new Error("not signed in");
  }
  const type = response.headers.get("content-type") || "";
  const body = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) {
    throw new Error(body && body.errors ? body.errors.join("; ") : `${response.status} ${response.statusText}`);
  }
  return body;
}

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function state(s) { return `<span class="state ${esc(s)}">${esc(s)}</span>`; }
function ms(v) { return v == null || v < 0 ? "-" : v < 1000 ? `${v} ms` : v < 60000 ? `${(v / 1000).toFixed(1)} s` : `${(v / 60000).toFixed(1)} min`; }
function bytes(v) { return v == null ? "-" : v < 1024 ? `${v} B` : v < 1 << 20 ? `${(v / 1024).toFixed(1)} KB` : `${(v / (1 << 20)).toFixed(1)} MB`; }
function num(v) { return v == null ? "-" : Number(v).toLocaleString("en"); }
function when(t) { return t > 0 ? new Date(t).toLocaleTimeString() : "-"; }
function resource(r) { return r ? `${r.cpuCores} CPU, ${r.taskHeapMemory} MB heap, ${r.managedMemory} MB managed` : "default slot"; }

// colour from busy (blue) to backpressured (red), Flink's vertex colouring idea
function loadColour(busy, backpressured) {
  if (backpressured > 0.1) return `hsl(0, 80%, ${90 - 40 * Math.min(1, backpressured)}%)`;
  return `hsl(210, 80%, ${95 - 45 * Math.min(1, busy)}%)`;
}

function confirmDialog(text) {
  return new Promise((resolve) => {
    const dialog = document.getElementById("dialog");
    document.getElementById("dialog-text").textContent = text;
    dialog.classList.remove("hidden");
    const done = (answer) => { dialog.classList.add("hidden"); resolve(answer); };
    document.getElementById("dialog-ok").onclick = () => done(true);
    document.getElementById("dialog-cancel").onclick = () => done(false);
  });
}

// --- overview -------------------------------------------------------------------------------
async function overview() {
  const [o, jobs] = await Promise.all([api("/overview"), api("/jobs/overview")]);
  const rows = jobs.jobs.sort((a, b) => b["start-time"] - a["start-time"]).map((j) => `<tr>
      <td><a href="#/jobs/${esc(j.jid)}" class="job-link">${esc(j.name)}</a></td><td>${state(j.state)}</td>
      <td>${when(j["start-time"])}</td><td class="num">${ms(j.duration)}</td><td class="muted">${esc(j.jid)}</td></tr>`).join("");
  main.innerHTML = `<h1>Overview</h1>
    <div class="cards">
      <div class="card"><div class="value" id="tm-count">${o.taskmanagers}</div><div class="label">TaskManagers</div></div>
      <div class="card"><div class="value" id="slots">${o["slots-available"]} / ${o["slots-total"]}</div><div class="label">slots free / total</div></div>
      <div class="card"><div class="value" id="jobs-running">${o["jobs-running"]}</div><div class="label">jobs running</div></div>
      <div class="card"><div class="value" id="jobs-finished">${o["jobs-finished"]}</div><div class="label">finished</div></div>
      <div class="card"><div class="value" id="jobs-failed">${o["jobs-failed"]}</div><div class="label">failed</div></div>
      <div class="card"><div class="value">${o["jobs-cancelled"]}</div><div class="label">cancelled</div></div>
    </div>
    <h2>Jobs</h2>
    <table id="jobs"><tr><th>Name</th><th>State</th><th>Started</th><th class="num">Duration</th><th>Job id</th></tr>${rows}</table>`;
}

// --- a job ----------------------------------------------------------------------------------
async function job(id, tab) {
  if (!page || page.id !== id || page.tab !== tab) {
    page = { id, tab, svgLoaded: false, selected: null, last: {} };
    main.innerHTML = `<div id="job-head"></div>
      <div class="tabs">${["overview", "subtasks", "checkpoints", "exceptions"].map((t) =>
        `<a href="#/jobs/${esc(id)}${t === "overview" ? "" : "/" + t}" class="${t === tab ? "active" : ""}" id="tab-${t}">${t[0].toUpperCase() + t.slice(1)}</a>`).join("")}</div>
      <div id="job-body"></div>`;
  }
  const details = await api(`/jobs/${encodeURIComponent(id)}`);
  renderJobHead(details);
  if (tab === "overview") await renderGraph(details);
  else if (tab === "subtasks") renderSubtasks(details);
  else if (tab === "checkpoints") await renderCheckpoints(id);
  else if (tab === "exceptions") await renderExceptions(id);
}

function renderJobHead(d) {
  const head = document.getElementById("job-head");
  if (!head.dataset.ready) {
    head.dataset.ready = "1";
    head.innerHTML = `<h1><span id="job-name"></span> <span id="job-state"></span></h1>
      <div class="muted" id="job-meta"></div>
      <div class="actions" style="margin-top:8px">
        <button id="action-savepoint">Trigger savepoint</button>
        <button id="action-stop">Stop with savepoint</button>
        <button id="action-cancel" class="danger">Cancel job</button>
      </div><div id="action-result"></div>`;
    document.getElementById("action-savepoint").onclick = () => savepoint(d.jid, false);
    document.getElementById("action-stop").onclick = () => savepoint(d.jid, true);
    document.getElementById("action-cancel").onclick = () => cancelJob(d.jid);
  }
  document.getElementById("job-name").textContent = d.name;
  document.getElementById("job-state").innerHTML = state(d.state);
  const sched = d["scheduler-state"] ? `${d.scheduler} (${d["scheduler-state"]})` : d.scheduler;
  document.getElementById("job-meta").textContent = `${d.jid} · started ${when(d["start-time"])} · ${ms(d.duration)} · scheduler ${sched}`;
  const ended = ["FINISHED", "FAILED", "CANCELED"].includes(d.state);
  for (const b of ["action-savepoint", "action-stop", "action-cancel"]) document.getElementById(b).disabled = ended;
}

function showResult(text, error = false) {
  document.getElementById("action-result").innerHTML = `<div class="result ${error ? "error" : ""}" id="action-message">${esc(text)}</div>`;
}

async function savepoint(id, stop) {
  const what = stop ? "Stop the job with a savepoint?" : "Trigger a savepoint of the job?";
  if (!(await confirmDialog(what))) return;
  try {
    const path = stop ? `/jobs/${encodeURIComponent(id)}/stop` : `/jobs/${encodeURIComponent(id)}/savepoints`;
    const trigger = await api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    showResult(`savepoint ${trigger["request-id"]} triggered…`);
    for (;;) {
      const status = await api(`/jobs/${encodeURIComponent(id)}/savepoints/${encodeURIComponent(trigger["request-id"])}`);
      if (status.status.id === "COMPLETED") {
        const op = status.operation || {};
        if (op["failure-cause"]) showResult(`savepoint failed: ${(op["failure-cause"].errors || []).join("; ")}`, true);
        else showResult(`savepoint completed: ${op.location}`);
        return;
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  } catch (e) {
    showResult(`savepoint failed: ${e.message}`, true);
  }
}

async function cancelJob(id) {
  if (!(await confirmDialog("Cancel the job?"))) return;
  try {
    const r = await api(`/jobs/${encodeURIComponent(id)}?mode=cancel`, { method: "PATCH" });
    showResult(r.message || "cancelling");
  } catch (e) {
    showResult(`cancel failed: ${e.message}`, true);
  }
}

async function renderGraph(d) {
  const body = document.getElementById("job-body");
  if (!page.svgLoaded) {
    const svg = await api(`/jobs/${encodeURIComponent(d.jid)}/plan.svg`);
    body.innerHTML = `<div class="legend muted"><span style="background:${loadColour(1, 0)}"></span>busy
        <span style="background:${loadColour(0, 0)}"></span>idle <span style="background:${loadColour(0, 1)}"></span>backpressured</div>
      <div class="graph" id="graph">${svg}</div>
      <h2>Vertices</h2><table id="vertices"></table>
      <div id="vertex-subtasks"></div>
      <h2>Pipelined regions</h2><table id="regions"></table>
      <h2>Rescales and restarts</h2><div id="history"></div>`;
    page.svgLoaded = true;
    for (const node of body.querySelectorAll("g.node")) {
      node.addEventListener("click", () => { page.selected = node.dataset.vertex; renderVertexSubtasks(page.details); markSelected(); });
    }
  }
  page.details = d;
  const now = Date.now();
  const rows = [];
  for (const v of d.vertices) {
    const prev = page.last[v.id];
    const rin = v.metrics["read-records"], rout = v.metrics["write-records"];
    const dt = prev ? (now - prev.t) / 1000 : 0;
    const inRate = prev && dt > 0 ? Math.max(0, (rin - prev.rin) / dt) : 0;
    const outRate = prev && dt > 0 ? Math.max(0, (rout - prev.rout) / dt) : 0;
    page.last[v.id] = { t: now, rin, rout };
    const busy = (v.busyTimeMsPerSecond || 0) / 1000, bp = v["backpressure-ratio"] || 0;
    const node = document.querySelector(`g.node[data-vertex="${CSS.escape(v.id)}"]`);
    if (node) {
      node.querySelector("rect").setAttribute("fill", loadColour(busy, bp));
      const live = node.querySelector("text.live");
      if (live) live.textContent = `in ${num(rin)} (${num(Math.round(inRate))}/s) · out ${num(rout)} (${num(Math.round(outRate))}/s)`;
    }
    rows.push(`<tr data-vertex="${esc(v.id)}"><td>${esc(v.name)}</td><td>${state(v.status)}</td><td class="num">${v.parallelism}</td>
      <td class="num records-in">${num(rin)}</td><td class="num records-out">${num(rout)}</td>
      <td class="num">${num(Math.round(inRate))}</td><td class="num">${num(Math.round(outRate))}</td>
      <td class="num">${v.busyTimeMsPerSecond} ms/s</td><td class="num">${Math.round(bp * 100)} %</td>
      <td>${esc(v["slot-sharing-group"])}: ${esc(resource(v["slot-sharing-group-resource"]))}</td></tr>`);
  }
  document.getElementById("vertices").innerHTML = `<tr><th>Vertex</th><th>Status</th><th class="num">Parallelism</th>
    <th class="num">Records in</th><th class="num">Records out</th><th class="num">In /s</th><th class="num">Out /s</th>
    <th class="num">Busy</th><th class="num">Backpressured</th><th>Slot sharing group</th></tr>${rows.join("")}`;
  document.getElementById("regions").innerHTML = `<tr><th>Region</th><th>Status</th><th>Subtasks</th></tr>` + (d.regions || []).map((r) =>
    `<tr><td>${r.index}</td><td>${state(r.status)}</td><td>${esc(r.subtasks.join(", "))}</td></tr>`).join("");
  const rescales = (d.rescales || []).map((r) => `<li>${when(r.timestamp)}: ${esc(JSON.stringify(r.from))} → ${esc(JSON.stringify(r.to))} (${esc(r.cause || "")})</li>`);
  const restarts = Object.entries(d.timestamps || {}).filter(([s, t]) => t > 0).sort((a, b) => a[1] - b[1]).map(([s, t]) => `<li>${when(t)}: ${esc(s)}</li>`);
  document.getElementById("history").innerHTML = `<ul>${rescales.join("")}${restarts.join("")}</ul>`;
  renderVertexSubtasks(d);
}

function markSelected() {
  for (const node of document.querySelectorAll("g.node")) node.classList.toggle("selected", node.dataset.vertex === page.selected);
}

function subtaskTable(vertices) {
  const rows = [];
  for (const v of vertices) {
    for (const s of v.subtasks) {
      rows.push(`<tr><td>${esc(v.name)}</td><td class="num">${s.subtask}</td><td>${state(s.status)}</td><td class="num">${s.attempt}</td>
        <td class="num">${num(s.metrics["read-records"])}</td><td class="num">${num(s.metrics["write-records"])}</td>
        <td class="num">${s.busyTimeMsPerSecond} ms/s</td><td class="num">${Math.round((s["backpressure-ratio"] || 0) * 100)} %</td>
        <td><a href="#/taskmanagers/${encodeURIComponent(s["taskmanager-id"] || "")}">${esc(s["taskmanager-id"] || "-")}</a></td><td class="num">${ms(s.duration)}</td></tr>`);
    }
  }
  return `<table class="subtasks"><tr><th>Vertex</th><th class="num">Subtask</th><th>Status</th><th class="num">Attempt</th>
    <th class="num">Records in</th><th class="num">Records out</th><th class="num">Busy</th><th class="num">Backpressured</th>
    <th>TaskManager</th><th class="num">Duration</th></tr>${rows.join("")}</table>`;
}

function renderVertexSubtasks(d) {
  const box = document.getElementById("vertex-subtasks");
  if (!box) return;
  const v = d.vertices.find((x) => x.id === page.selected);
  box.innerHTML = v ? `<h2 id="selected-vertex">Subtasks of ${esc(v.name)}</h2>${subtaskTable([v])}` : `<p class="muted">Click a vertex for its subtasks.</p>`;
}

function renderSubtasks(d) {
  document.getElementById("job-body").innerHTML = subtaskTable(d.vertices);
}

async function renderCheckpoints(id) {
  const c = await api(`/jobs/${encodeURIComponent(id)}/checkpoints`);
  const sp = c.latest.savepoint;
  const rows = c.history.map((h) => `<tr><td class="num">${h.id}</td><td>${state(h.status)}</td><td>${h.is_savepoint ? "savepoint" : "checkpoint"}</td>
      <td>${when(h.trigger_timestamp)}</td><td class="num">${ms(h.end_to_end_duration)}</td><td class="num">${bytes(h.state_size)}</td>
      <td class="num">${h.num_acknowledged_subtasks}/${h.num_subtasks}</td><td class="muted">${esc(h.failure_message || h.external_path || "")}</td></tr>`);
  document.getElementById("job-body").innerHTML = `<div class="cards">
      <div class="card"><div class="value" id="cp-completed">${c.counts.completed}</div><div class="label">completed</div></div>
      <div class="card"><div class="value">${c.counts.failed}</div><div class="label">failed</div></div>
      <div class="card"><div class="value">${c.counts.in_progress}</div><div class="label">in progress</div></div>
      <div class="card"><div class="value">${c.checkpointing.enabled ? ms(c.checkpointing.interval) : "off"}</div><div class="label">interval</div></div></div>
    <h2>Latest savepoint</h2><p id="latest-savepoint">${sp ? `${sp.id}: ${esc(sp.external_path)} (${when(sp.trigger_timestamp)})` : "none"}</p>
    <h2>History</h2><table id="checkpoints"><tr><th class="num">Id</th><th>Status</th><th>Kind</th><th>Triggered</th>
      <th class="num">Duration</th><th class="num">Size</th><th class="num">Acknowledged</th><th>Path / failure</th></tr>${rows.join("")}</table>`;
}

async function renderExceptions(id) {
  const x = await api(`/jobs/${encodeURIComponent(id)}/exceptions`);
  const root = x["root-exception"];
  const history = (x.exceptionHistory.entries || []).map((e) => `<tr><td>${when(e.timestamp)}</td><td>${esc(e.exceptionName)}</td>
      <td>${esc(e.taskName || "")}</td><td>${esc(e.message)}</td></tr>`);
  document.getElementById("job-body").innerHTML = `<p>Restarts: <b id="restarts">${x.restarts}</b> · ${esc(x.restartStrategy || "")}</p>
    <h2>Root cause</h2>${root ? `<p id="root-exception"><b>${esc(root.exceptionName)}</b>: ${esc(root.message)}</p><pre>${esc(root.stacktrace)}</pre>` : "<p id='root-exception'>none</p>"}
    <h2>History</h2><table><tr><th>Time</th><th>Exception</th><th>Task</th><th>Message</th></tr>${history.join("")}</table>`;
}

// --- TaskManagers ---------------------------------------------------------------------------
function memoryBar(t) {
  if (t.memoryRssMb == null || !t.memoryBudgetMb) return "-";
  const share = t.memoryRssMb / t.memoryBudgetMb;
  return `<span class="bar"><span class="${share > 1 ? "over" : ""}" style="width:${Math.min(100, share * 100).toFixed(0)}%"></span></span>
    ${Math.round(t.memoryRssMb)} / ${t.memoryBudgetMb} MB`;
}

async function taskManagers() {
  const tms = await api("/taskmanagers");
  main.innerHTML = `<h1>TaskManagers</h1><table id="taskmanagers"><tr><th>Id</th><th>Host / pid</th><th>Slots free / total</th>
    <th>Total</th><th>Free</th><th>Memory (RSS / budget)</th><th>Heartbeat</th><th>Spark executor</th></tr>${tms.taskmanagers.map((t) => `<tr>
    <td><a href="#/taskmanagers/${encodeURIComponent(t.id)}">${esc(t.id)}</a></td><td>${esc(t.host)} / ${t.pid}</td><td>${t.freeSlots} / ${t.slotsNumber}</td>
    <td>${esc(resource(t.totalResource))}</td><td>${esc(resource(t.freeResource))}</td><td>${memoryBar(t)}</td>
    <td>${ms(t.timeSinceLastHeartbeat)} ago</td><td>${esc(t.sparkExecutorId || "-")}</td></tr>`).join("")}</table>`;
}

async function taskManager(id) {
  const path = `/taskmanagers/${encodeURIComponent(id)}`;
  const [t, stdout, logText] = await Promise.all([api(path), api(`${path}/stdout`), api(`${path}/log`)]);
  const slots = t.allocatedSlots.map((s) => `<tr><td class="num">${s.index}</td><td>${esc(resource(s.resource))}</td>
    <td><a href="#/jobs/${encodeURIComponent(s.jobId || "")}">${esc(s.jobId || "")}</a></td><td>${esc(s.state)}</td></tr>`);
  main.innerHTML = `<h1>TaskManager ${esc(t.id)}</h1>
    <p class="muted">${esc(t.host)}, pid ${t.pid}${t.sparkExecutorId ? ", Spark " + esc(t.sparkExecutorId) : ""}</p>
    <table><tr><th>Total</th><td>${esc(resource(t.totalResource))}</td></tr><tr><th>Free</th><td>${esc(resource(t.freeResource))}</td></tr>
      <tr><th>Slots</th><td>${t.freeSlots} free of ${t.slotsNumber}${t.dynamicSlots ? " (dynamic)" : ""}</td></tr>
      <tr><th>Memory</th><td id="tm-memory">${memoryBar(t)}</td></tr></table>
    <h2>Allocated slots</h2><table><tr><th class="num">Slot</th><th>Resources</th><th>Job</th><th>State</th></tr>${slots.join("")}</table>
    <h2>Stdout</h2><pre id="tm-stdout">${esc(stdout || "(nothing printed)")}</pre>
    <h2>Log</h2><pre id="tm-log">${esc(logText || "(no log records)")}</pre>`;
}

// --- routing --------------------------------------------------------------------------------
async function route() {
  const parts = (window.location.hash.replace(/^#\/?/, "") || "").split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "jobs" && parts[1]) await job(parts[1], parts[2] || "overview");
    else if (parts[0] === "taskmanagers" && parts[1]) { page = null; await taskManager(parts[1]); }
    else if (parts[0] === "taskmanagers") { page = null; await taskManagers(); }
    else { page = null; await overview(); }
    document.body.dataset.loaded = String(Date.now());
  } catch (e) {
    if (e.message !== "not signed in") main.insertAdjacentHTML("afterbegin", `<div class="result error">${esc(e.message)}</div>`);
  }
}

function start() {
  clearInterval(timer);
  page = null;
  route();
  // the job pages refresh in place; the others too, except a TaskManager's (its log would jump)
  timer = setInterval(() => { if (!/^#\/taskmanagers\/./.test(window.location.hash)) route(); }, REFRESH_MS);
}

window.addEventListener("hashchange", start);
start();
