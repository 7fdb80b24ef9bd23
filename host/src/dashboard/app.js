"use strict";
// Every value is set as text, never as markup: errors and keys come from plugins.
function cell(text, cls, sub) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "–" : String(text);
  if (cls) td.className = cls;
  if (sub) { const s = document.createElement("span"); s.className = "sub"; s.textContent = sub; td.appendChild(s); }
  return td;
}
function fill(id, rows, draw, emptyText) {
  const body = document.querySelector("#" + id + " tbody");
  const next = document.createElement("tbody");
  for (const r of rows) { const tr = document.createElement("tr"); draw(r, tr); next.appendChild(tr); }
  if (!rows.length) {
    const tr = document.createElement("tr"), td = cell(emptyText, "empty");
    td.colSpan = document.querySelectorAll("#" + id + " th").length;
    tr.appendChild(td); next.appendChild(tr);
  }
  body.replaceWith(next);
}
const utc = t => t ? t.replace("T", " ").replace(/(\.\d+)?(Z|\+00:00)$/, " UTC") : null;
function age(seconds) {
  if (seconds === null || seconds === undefined) return null;
  const s = Math.round(seconds);
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  if (s < 172800) return Math.round(s / 3600) + " h";
  return Math.round(s / 86400) + " d";
}
// Who is signed in, what they may do, and the CSRF token actions send.
let session = {actions: [], csrf: null, via: "loopback"};
const may = action => session.actions.includes(action);
function notice(text, bad) {
  const n = document.getElementById("notice");
  n.textContent = text;
  n.className = "shown" + (bad ? " bad" : "");
}
async function act(action, body) {
  const response = await fetch("/api/actions/" + action, {
    method: "POST",
    headers: {"content-type": "application/json", "x-csrf-token": session.csrf || "-"},
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(text.trim() || response.status);
  return JSON.parse(text);
}
async function run(action, body, confirmText) {
  try {
    if (confirmText) {
      const preview = await act(action, Object.assign({}, body, {preview: true}));
      if (preview.changed === 0) { notice(preview.message); return; }
      if (!window.confirm(confirmText(preview))) return;
      // Done only if it still takes what the confirmation said (else 409, nothing done).
      body = Object.assign({}, body, {expect: preview.changed});
    }
    notice((await act(action, body)).message);
    refresh();
    loadChanges(false);
  } catch (e) {
    notice(action + " refused: " + e.message, true);
  }
}
function button(label, action, body, options) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.dataset.action = action;
  if (options && options.danger) b.className = "danger";
  b.addEventListener("click", () => {
    const request = Object.assign({}, body);
    if (options && options.reason) {
      const reason = window.prompt(options.reason);
      if (!reason) return;
      request.reason = reason;
    }
    run(action, request, options && options.confirm);
  });
  return b;
}
function actions(buttons) {
  const td = document.createElement("td");
  for (const b of buttons.filter(b => b && may(b.dataset.action))) td.appendChild(b);
  return td;
}
// What needs someone first: held tasks, failed jobs, open circuits, paused topics, dead
// messages, refused deploys, quiet hosts; each with its action beside it.
function incidents(o) {
  const out = [];
  for (const t of o.tasks) {
    if (t.held) out.push({what: "task held", where: t.task, detail: t.held_reason || "held", act: button("Release", "release", {task: t.task}), bad: true});
    if (t.failed > 0) out.push({what: "failed jobs", where: t.task, detail: t.failed + " failed: " + (t.last_error || ""),
      act: button("Retry failed", "retry", {task: t.task}, {confirm: p => "Retry " + p.changed + " failed job(s) of " + t.task + "?"}), bad: true});
  }
  for (const t of o.topics) {
    if (t.circuit_open) out.push({what: "circuit open", where: t.topic, detail: t.last_error || "", bad: true, act: button("Deliver now", "outbox-deliver-now", {topic: t.topic})});
    if (t.paused) out.push({what: "topic paused", where: t.topic, detail: "deliveries wait", act: button("Resume", "outbox-resume", {topic: t.topic})});
    if (t.dead > 0) out.push({what: "dead messages", where: t.topic, detail: t.dead + " dead", bad: true,
      act: button("Retry dead", "outbox-retry", {topic: t.topic}, {confirm: p => "Send " + p.changed + " dead message(s) of " + t.topic + " again?"})});
  }
  for (const d of o.refused_deploys.filter(d => !d.stale)) out.push({what: "deploy refused", where: d.host, detail: (d.file || "") + ": " + d.reason, bad: true});
  for (const h of o.hosts.filter(h => h.quiet)) out.push({what: "host quiet", where: h.id, detail: "last beat " + age(h.seen_seconds_ago) + " ago"});
  fill("incidents", out, (i, tr) => {
    tr.append(cell(i.what, i.bad ? "bad" : "warn"), cell(i.where, "mono"), cell(i.detail, "error"), actions(i.act ? [i.act] : []));
  }, "Nothing needs you.");
}
function outboxButtons(t) {
  const topic = {topic: t.topic};
  return [
    t.paused ? button("Resume", "outbox-resume", topic) : button("Pause", "outbox-pause", topic, {reason: "Why pause " + t.topic + "? (recorded)"}),
    t.circuit_open || t.pending > 0 ? button("Deliver now", "outbox-deliver-now", topic) : null,
    t.dead > 0 ? button("Retry dead", "outbox-retry", topic, {confirm: p => "Send " + p.changed + " dead message(s) of " + t.topic + " again?"}) : null,
    t.pending + t.dead > 0 ? button("Discard", "outbox-discard", topic, {danger: true, reason: "Why recall every undelivered message of " + t.topic + "? (recorded)",
      confirm: p => "Discard " + p.changed + " message(s) of " + t.topic + "? They are never delivered."}) : null,
  ];
}
function render(o) {
  incidents(o);
  tasksKnown(o.tasks.map(t => t.task));
  fill("schedules", o.tasks.filter(t => t.cron), (t, tr) => {
    tr.dataset.task = t.task;
    tr.append(cell(t.task), cell(t.cron, "mono"), cell(t.zone), cell(t.catch_up),
      cell(t.held ? "held" : t.paused ? "paused" : "active", t.held ? "bad" : t.paused ? "warn" : "ok"),
      cell(t.cursor_local, null, utc(t.cursor)), cell(t.next_slot_local, null, utc(t.next_slot)),
      actions([t.paused ? button("Resume", "resume", {task: t.task}) : button("Pause", "pause", {task: t.task})]));
  }, "No schedules yet.");
  fill("tasks", o.tasks, (t, tr) => {
    tr.dataset.task = t.task;
    if (t.held) tr.className = "held";
    tr.append(cell(t.task, t.held ? "bad" : null, t.held ? "held: no job of it starts" : null), cell(t.pending, "num"), cell(t.running, "num"), cell(t.done, "num"),
      cell(t.failed, t.failed > 0 ? "num bad" : "num"), cell(age(t.oldest_pending_seconds), "num"),
      cell(t.last_error, "error"),
      actions([
        t.held ? button("Release", "release", {task: t.task}) : button("Hold", "hold", {task: t.task}, {danger: true}),
        t.failed > 0 ? button("Retry failed", "retry", {task: t.task}, {confirm: p => "Retry " + p.changed + " failed job(s) of " + t.task + "?"}) : null,
      ]));
  }, "No jobs yet.");
  fill("failures", o.failures, (f, tr) => {
    tr.dataset.task = f.task;
    const now = {failed: "failed for good", pending: "will retry", done: "done since"}[f.job_status] || f.job_status;
    tr.append(cell(utc(f.failed_at)), cell(f.task), cell(utc(f.slot)), cell(f.key, "mono"), cell(f.failures, "num"),
      cell(now, f.job_status === "failed" ? "bad" : null), cell(f.error, "error"),
      actions([
        f.job_status === "failed" ? button("Retry", "retry", {task: f.task, slot: f.slot, key: f.key}) : null,
        f.job_status === "failed" || f.job_status === "pending"
          ? button("Discard", "discard", {task: f.task, slot: f.slot, key: f.key}, {danger: true, reason: "Why discard this job? (recorded)"}) : null,
      ]));
  }, "No failed attempts.");
  fill("hosts", o.hosts, (h, tr) => {
    tr.dataset.host = h.id;
    const plugins = (h.plugins || []).map(p => p.task + " " + p.version + " " + String(p.digest).slice(0, 12)).join(", ");
    tr.append(cell(h.id, "mono", "started " + utc(h.started_at)), cell(h.version),
      cell(h.quiet ? "quiet for " + age(h.seen_seconds_ago) : age(h.seen_seconds_ago) + " ago", h.quiet ? "bad" : "ok"),
      cell(h.busy + " of " + h.workers, "num"), cell(plugins || "none", "mono"));
  }, "No host on record.");
  topicsShown = o.topics.map(t => t.topic);
  topicsKnown(topicsShown);
  fill("outbox", o.topics, (t, tr) => {
    tr.dataset.topic = t.topic;
    const state = t.circuit_open ? "circuit open" : t.paused ? "paused" : "delivering";
    tr.append(cell(t.topic), cell(t.pending, "num"), cell(t.dead, t.dead > 0 ? "num bad" : "num"), cell(t.delivered, "num"),
      cell(state, t.circuit_open || t.paused ? "bad" : ""), cell(t.last_error, "error"), actions(outboxButtons(t)));
  }, "No outbox messages.");
  fill("dead", o.dead_messages, (m, tr) => {
    tr.append(cell("#" + m.id), cell(m.topic), cell(m.key, "mono"), cell(m.attempts, "num"), cell(m.last_error, "error"));
  }, "No dead messages.");
  fill("plugins", o.plugins, (p, tr) => {
    tr.dataset.task = p.task;
    const tables = p.tables.map(t => t.name + (t.write ? " (writes)" : " (reads)")).join(", ");
    const settings = Object.entries(p.settings).map(([k, v]) => k + " = " + v).join("; ");
    const calls = p.calls.concat(p.enqueues.map(e => "enqueue " + e)).join(", ");
    tr.append(cell(p.task, null, p.max_attempts + " attempts, " + p.timeout_seconds + " s each"), cell(p.version), cell(p.digest, "mono"), cell(p.file, "mono"),
      cell(tables || "none", "mono tables"), cell(settings || "none", "mono settings"), cell(calls || "built-ins only", "mono"));
  }, "No plugins loaded.");
  fill("refused", o.refused_deploys, (d, tr) => {
    tr.dataset.task = d.task || "";
    tr.append(cell(utc(d.refused_at), d.stale ? "warn" : "bad", d.stale ? "stale: host last seen " + utc(d.seen_at) : null),
      cell(d.host), cell(d.task), cell(d.file, "mono", d.digest.slice(0, 12)), cell(d.serving || "nothing"), cell(d.reason, "error"));
  }, "No refused deploys.");
  const hidden = o.refused_deploys_total - o.refused_deploys.length;
  document.getElementById("refused-more").textContent = hidden > 0 ? ": " + o.refused_deploys.length + " of " + o.refused_deploys_total + " shown (all in `almanac status`)" : "";
  document.getElementById("updated").textContent = "updated " + utc(o.generated_at);
}
async function refresh() {
  try {
    const response = await fetch("/api/overview", {cache: "no-store"});
    if (!response.ok) throw new Error(response.status + " " + await response.text());
    render(await response.json());
    calendar();
    document.body.dataset.state = "ready";
  } catch (e) {
    document.body.dataset.state = "stale";
    document.getElementById("banner").textContent = "Cannot reach the host's API (" + e.message + "); showing the last data received.";
  }
}
// The calendar: a task's month, each day coloured by what the ledger and the jobs say.
const cal = {task: null, month: null};
const select = document.getElementById("cal-task");
function tasksKnown(tasks) {
  if (select.options.length === tasks.length && tasks.every((t, i) => select.options[i].value === t)) return;
  const was = select.value;
  select.replaceChildren(...tasks.map(t => { const o = document.createElement("option"); o.value = t; o.textContent = t; return o; }));
  if (tasks.includes(cal.task || was)) select.value = cal.task || was;
  if (!cal.task && tasks.length) { cal.task = tasks[0]; calendar(); }
}
function shiftMonth(delta) {
  if (!cal.month) return;
  const [y, m] = cal.month.split("-").map(Number);
  const d = new Date(Date.UTC(y, m - 1 + delta, 1));
  cal.month = d.toISOString().slice(0, 7);
  calendar();
}
const said = {
  done: d => d.done + "/" + d.jobs + " done", partly: d => d.done + "/" + d.jobs + " done", pending: d => d.pending + " pending",
  held: d => "held: " + d.pending + " wait", failed: d => d.failed + " failed", missing: d => "MISSING " + d.missing,
  empty: () => "EMPTY: no keys", skipped: d => "skipped" + (d.reason ? ": " + d.reason : ""), "to-come": () => "to come", due: () => "due", before: () => "", none: () => "",
};
async function calendar() {
  if (!cal.task) return;
  const q = new URLSearchParams({task: cal.task});
  if (cal.month) q.set("month", cal.month);
  const response = await fetch("/api/calendar?" + q, {cache: "no-store"});
  if (!response.ok) return;
  const m = await response.json();
  if (m.task !== cal.task) return;
  cal.month = m.month;
  document.getElementById("cal-month").textContent = m.month;
  document.getElementById("cal-zone").textContent = m.zone + (m.on_demand ? " · on demand" : "") + (m.held ? " · HELD" : "") + (m.paused ? " · paused" : "");
  const grid = document.getElementById("cal-grid");
  const cells = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"].map(n => { const h = document.createElement("div"); h.className = "head"; h.textContent = n; return h; });
  for (let i = 0; m.days.length && i < m.days[0].weekday; i++) cells.push(document.createElement("div"));
  for (const d of m.days) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "day state-" + d.state;
    b.dataset.day = d.day;
    b.dataset.state = d.state;
    const n = document.createElement("b");
    n.textContent = d.day.slice(8);
    if (d.dst) { const t = document.createElement("span"); t.className = "dst"; t.textContent = "DST"; n.appendChild(t); }
    const what = document.createElement("span");
    what.textContent = said[d.state](d);
    b.append(n, what);
    b.title = d.day + ": " + d.state + (d.reason ? " (" + d.reason + ")" : "") + (d.jobs ? ", " + d.done + " of " + d.jobs + " jobs done" : "");
    b.addEventListener("click", () => listJobs({task: m.task, from: d.from, to: d.to}, d.day));
    cells.push(b);
  }
  grid.replaceChildren(...cells);
  charts(m.task);
  yearStrip(m.task, m.month);
}
// The year strip: each month coloured by the worst its days hold; a click opens it.
const monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
async function yearStrip(task, month) {
  const response = await fetch("/api/year?" + new URLSearchParams({task, year: month.slice(0, 4)}), {cache: "no-store"});
  if (!response.ok || cal.task !== task) return;
  const months = await response.json();
  document.getElementById("cal-year").replaceChildren(...months.map((s, i) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "day state-" + s.state;
    b.dataset.month = s.month;
    b.dataset.state = s.state;
    if (s.month === month) b.setAttribute("aria-current", "true");
    b.textContent = monthNames[i];
    b.title = s.month + ": " + s.state + (s.jobs ? ", " + s.done + " of " + s.jobs + " jobs done" : "") + (s.failed ? ", " + s.failed + " failed" : "")
      + (s.missing ? ", " + s.missing + " missing" : "") + (s.empty ? ", " + s.empty + " empty" : "");
    b.addEventListener("click", () => { cal.month = s.month; calendar(); });
    return b;
  }));
}
// Charts are SVG images the host draws from its per-minute counters; a new URL every
// ten seconds redraws them.
function chartUrl(kind, name) {
  const span = document.getElementById("chart-span").value;
  return "/api/chart.svg?" + new URLSearchParams({[kind]: name, span, at: String(Math.floor(Date.now() / 10000))});
}
function chartImage(img, kind, name) {
  const url = chartUrl(kind, name);
  if (img.getAttribute("src") !== url) img.src = url;
  img.alt = kind + " " + name + ": " + (kind === "task" ? "jobs done and failed" : "messages delivered and dead") + ", " + document.getElementById("chart-span").selectedOptions[0].textContent;
}
let topicsShown = [];
function charts(task) {
  chartImage(document.getElementById("task-chart"), "task", task);
  const box = document.getElementById("topic-charts");
  if (box.children.length !== topicsShown.length) box.replaceChildren(...topicsShown.map(() => document.createElement("img")));
  topicsShown.forEach((t, i) => chartImage(box.children[i], "topic", t));
}
document.getElementById("chart-span").addEventListener("change", () => { if (cal.task) charts(cal.task); });
select.addEventListener("change", () => { cal.task = select.value; cal.month = null; calendar(); });
document.getElementById("cal-prev").addEventListener("click", () => shiftMonth(-1));
document.getElementById("cal-next").addEventListener("click", () => shiftMonth(1));

// A backfill or a moved cursor: previewed first, the periods it would generate (or pass
// over) listed, done only when confirmed.
let pending = null;
async function previewRange(action) {
  const body = {task: cal.task, to: document.getElementById("range-to").value.trim(), reason: document.getElementById("range-reason").value.trim() || null};
  if (action === "backfill") body.from = document.getElementById("range-from").value.trim();
  try {
    const p = await act(action, Object.assign({preview: true}, body));
    pending = {action, body};
    document.getElementById("range-what").textContent = p.message;
    fill("range-periods", p.periods ? p.periods.periods : [], (r, tr) => {
      tr.dataset.period = r.period;
      tr.append(cell(r.period, "mono"), cell(utc(r.start)), cell(r.ledger ? "passed over (" + r.ledger + ")" : "new", r.ledger ? null : "ok"));
    }, "No period in the range.");
    document.getElementById("range-go").textContent = action === "backfill" ? "Backfill " + p.changed + " new period(s)" : "Move the cursor";
    document.getElementById("range-preview").hidden = false;
  } catch (e) {
    notice(action + " refused: " + e.message, true);
  }
}
document.getElementById("range-form").addEventListener("submit", e => { e.preventDefault(); previewRange("backfill"); });
document.getElementById("cursor-preview").addEventListener("click", () => previewRange("cursor"));
document.getElementById("range-cancel").addEventListener("click", () => { pending = null; document.getElementById("range-preview").hidden = true; });
document.getElementById("range-go").addEventListener("click", async () => {
  if (!pending) return;
  const {action, body} = pending;
  pending = null;
  document.getElementById("range-preview").hidden = true;
  await run(action, body);
  calendar();
});

// Outbox messages by topic and state, newest first, paged by the last id seen.
const topicSelect = document.getElementById("messages-topic");
function topicsKnown(topics) {
  const have = Array.from(topicSelect.options).slice(1).map(o => o.value);
  if (have.length === topics.length && have.every((t, i) => t === topics[i])) return;
  const was = topicSelect.value;
  topicSelect.replaceChildren(topicSelect.options[0], ...topics.map(t => { const o = document.createElement("option"); o.value = t; o.textContent = t; return o; }));
  topicSelect.value = topics.includes(was) ? was : "";
}
let messagesLast = null;
async function listMessages(more) {
  const q = new URLSearchParams({topic: topicSelect.value, status: document.getElementById("messages-status").value});
  if (more && messagesLast) q.set("before", messagesLast);
  const response = await fetch("/api/messages?" + q, {cache: "no-store"});
  if (!response.ok) { notice("cannot list messages: " + await response.text(), true); return; }
  const rows = await response.json();
  const body = document.querySelector("#messages tbody");
  if (!more) body.replaceChildren();
  for (const m of rows) {
    const tr = document.createElement("tr");
    tr.dataset.id = m.id;
    tr.append(cell("#" + m.id), cell(m.topic), cell(m.key, "mono"), cell(m.status, m.status === "dead" ? "bad" : m.status === "delivered" ? "ok" : null),
      cell(m.attempts, "num"), cell(utc(m.created_at)), cell(m.payload_preview, "mono", m.bytes + " bytes, " + m.content_type), cell(m.last_error, "error"));
    body.appendChild(tr);
  }
  if (!body.children.length) { const tr = document.createElement("tr"), td = cell("No messages.", "empty"); td.colSpan = 8; tr.appendChild(td); body.appendChild(tr); }
  if (rows.length) messagesLast = rows[rows.length - 1].id;
  document.getElementById("messages-more").hidden = rows.length < 50;
}
document.getElementById("messages-filter").addEventListener("submit", e => { e.preventDefault(); listMessages(false); });
document.getElementById("messages-more").addEventListener("click", () => listMessages(true));

// The jobs of a day, or of a task, filtered and paged by the last row seen.
let listing = null;
async function listJobs(base, what, more) {
  if (!more) {
    listing = {base, what, last: null};
    const status = document.getElementById("jobs-status").value, key = document.getElementById("jobs-key").value.trim();
    if (status) listing.base.status = status;
    if (key.endsWith("*")) listing.base.prefix = key.slice(0, -1); else if (key) listing.base.key = key;
    jobActions(listing.base, what);
  }
  const q = new URLSearchParams(listing.base);
  if (listing.last) { q.set("after_slot", listing.last.slot); q.set("after_key", listing.last.key); }
  const response = await fetch("/api/jobs?" + q, {cache: "no-store"});
  if (!response.ok) { notice("cannot list jobs: " + await response.text(), true); return; }
  const rows = await response.json();
  document.getElementById("jobs-what").textContent = listing.base.task + (what ? " · " + what : "");
  const body = document.querySelector("#jobs tbody");
  if (!more) body.replaceChildren();
  for (const j of rows) {
    const tr = document.createElement("tr");
    tr.dataset.key = j.key;
    tr.tabIndex = 0;
    tr.append(cell(utc(j.slot)), cell(j.period), cell(j.key, "mono"), cell(j.status, j.status === "failed" ? "bad" : j.status === "done" ? "ok" : null),
      cell(j.attempts, "num"), cell(utc(j.completed_at)), cell(j.last_error, "error"));
    const open = () => showJob(j);
    tr.addEventListener("click", open);
    tr.addEventListener("keydown", e => { if (e.key === "Enter") open(); });
    body.appendChild(tr);
  }
  if (!body.children.length) { const tr = document.createElement("tr"), td = cell("No jobs.", "empty"); td.colSpan = 7; tr.appendChild(td); body.appendChild(tr); }
  listing.last = rows.length ? rows[rows.length - 1] : listing.last;
  document.getElementById("jobs-more").hidden = rows.length < 50;
  document.getElementById("jobs-section").scrollIntoView({block: "nearest"});
}
// Retry and discard every job the list's filter names (its task, day and exact key; its
// status narrows nothing: a retry takes failed jobs, a discard pending and failed ones),
// each after a confirmation with the count its preview found.
function jobActions(base, what) {
  const scope = {task: base.task};
  if (base.from) { scope.from = base.from; scope.to = base.to; }
  if (base.key) scope.key = base.key;
  if (!base.from && !base.key) scope.all = true;
  const of = base.task + (what ? " on " + what : "") + (base.key ? " keyed " + base.key : "");
  const buttons = base.prefix ? [] : [
    button("Retry failed", "retry", scope, {confirm: p => "Retry " + p.changed + " failed job(s) of " + of + "?"}),
    button("Discard…", "discard", scope, {danger: true, reason: "Why discard the pending and failed jobs of " + of + "? (recorded)",
      confirm: p => "Discard " + p.changed + " pending or failed job(s) of " + of + "?"})];
  document.getElementById("jobs-act").replaceChildren(...buttons.filter(b => may(b.dataset.action)));
}
document.getElementById("jobs-more").addEventListener("click", () => listJobs(null, null, true));
document.getElementById("jobs-filter").addEventListener("submit", e => {
  e.preventDefault();
  if (cal.task) listJobs({task: cal.task}, null);
});

// A job's page: its row, payload and every recorded attempt.
async function showJob(j) {
  const q = new URLSearchParams({task: j.task, slot: j.slot, key: j.key});
  const response = await fetch("/api/job?" + q, {cache: "no-store"});
  if (!response.ok) { notice("cannot show the job: " + await response.text(), true); return; }
  const p = await response.json();
  document.getElementById("job-what").textContent = p.task + " · " + (p.period || utc(p.slot)) + " · " + p.key;
  const facts = [["status", p.status], ["attempts", p.attempts], ["crashes", p.crashes], ["interruptions", p.transients], ["run after", utc(p.run_after)],
    ["completed", utc(p.completed_at)], ["created", utc(p.created_at)], ["plugin digest", p.plugin_digest], ["payload", p.payload], ["last error", p.last_error]];
  fill("job-facts", facts, (f, tr) => tr.append(cell(f[0]), cell(f[1], "mono")), "");
  fill("attempts", p.attempts_recorded, (a, tr) => tr.append(cell(a.attempt, "num"), cell(a.kind, a.kind === "crash" ? "bad" : null), cell(utc(a.failed_at)),
    cell(a.host, "mono"), cell(a.plugin_digest && a.plugin_digest.slice(0, 12), "mono"), cell(a.error, "error")),
    "No failed attempt recorded.");
  const section = document.getElementById("job-section");
  section.hidden = false;
  section.scrollIntoView({block: "nearest"});
}

// The change history (almanac.changes), newest first, paged by id.
let changesLast = null;
async function loadChanges(more) {
  const q = new URLSearchParams({limit: "50"});
  if (more && changesLast) q.set("before", changesLast);
  const response = await fetch("/api/changes?" + q, {cache: "no-store"});
  if (!response.ok) return;
  const rows = await response.json();
  const body = document.querySelector("#changes tbody");
  if (!more) body.replaceChildren();
  const show = v => v === null || v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v);
  for (const c of rows) {
    const tr = document.createElement("tr");
    tr.dataset.action = c.action;
    const what = c.before !== null && c.before !== undefined ? show(c.before) + " → " + show(c.after) : show(c.after);
    tr.append(cell(utc(c.at)), cell(c.task || c.topic, "mono"), cell(c.action), cell(what, "mono"), cell(c.origin, null, c.by_role), cell(c.reason, "error"));
    body.appendChild(tr);
  }
  if (rows.length) changesLast = rows[rows.length - 1].id;
  document.getElementById("changes-more").hidden = rows.length < 50;
}
document.getElementById("changes-more").addEventListener("click", () => loadChanges(true));

// A link may name the calendar's task and month: #task=daily-points&month=2026-03.
function followHash() {
  const wanted = new URLSearchParams(window.location.hash.slice(1));
  if (wanted.get("task")) { cal.task = wanted.get("task"); cal.month = wanted.get("month"); select.value = cal.task; }
}
async function start() {
  followHash();
  window.addEventListener("hashchange", () => { followHash(); calendar(); });
  const response = await fetch("/api/session", {cache: "no-store"});
  if (response.status === 401) { window.location.href = "/login"; return; }
  if (response.ok) session = await response.json();
  const who = document.getElementById("who");
  who.textContent = session.via === "loopback" ? "not signed in (view only)"
    : session.name + " (" + session.role + ")" + (session.read_only ? " · read-only console" : "");
  document.getElementById("sign-in-link").hidden = session.via !== "loopback";
  document.getElementById("range-form").hidden = !may("backfill") && !may("cursor");
  document.getElementById("backfill-preview").hidden = !may("backfill");
  document.getElementById("cursor-preview").hidden = !may("cursor");
  const out = document.getElementById("sign-out");
  out.hidden = session.via !== "session";
  out.addEventListener("click", async () => {
    await fetch("/logout", {method: "POST", headers: {"x-csrf-token": session.csrf || "-"}});
    window.location.href = "/login";
  });
  refresh();
  loadChanges(false);
  setInterval(refresh, 3000);
}
start();
