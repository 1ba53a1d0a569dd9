// The console page: polls the console API (the snapshot and the log every 500 ms, the
// apps every 10 s; one poll of each at a time, none while the tab is hidden) and shows the
// answers. Names, user ids and payloads come from apps and are hostile: they reach the page
// as textContent only.

import { drawChart } from "./chart.js";
import {
  CHARTED, CHART_WINDOW_MS, LogBuffer, Poller, RateTracker, Series, describeEntry, formatDuration, formatRate,
  formatTime, logCursor, logQuery, matchesFilter, publishOutcome, publishRequest,
} from "./model.js";

/** A 401: the session cookie expired or was cleared. */
class SessionEnded extends Error {}

/** @param {string} id one of index.html's ids. @returns {any} its element. */
const $ = (id) => document.getElementById(id);
const clock = { now: () => Date.now(), setTimeout: (/** @type {() => void} */ f, /** @type {number} */ ms) => setTimeout(f, ms), clearTimeout: (/** @type {any} */ handle) => clearTimeout(handle) };
const charts = /** @type {HTMLCanvasElement[]} */ (Array.from(document.querySelectorAll("canvas[data-counter]")));

/**
 * One app on screen. A switch makes a new one, so an answer for the last app that arrives
 * late is dropped (`view !== current`).
 * @typedef {{ app: string, cursor: import("./model.js").LogCursor, skipped: number, lost: number, log: LogBuffer, tracker: RateTracker, series: Record<string, Series>, pollers: Poller[] }} View
 */
/** @type {View | null} */
let current = null;
let ended = false;
let paused = false;
let unseen = 0;
const appsPoller = new Poller(loadApps, 10_000, clock);
const pollers = () => [appsPoller, ...(current?.pollers ?? [])];

/**
 * Fetches from the console API with the session cookie.
 * @param {string} path the path and query.
 * @param {RequestInit} [init] the request.
 * @returns {Promise<Response>} the answer.
 * @throws {SessionEnded} on a 401, after showing that the session ended.
 */
async function api(path, init) {
  const response = await fetch(path, { credentials: "same-origin", cache: "no-store", ...init });
  if (response.status !== 401) return response;
  ended = true;
  pollers().forEach((poller) => poller.stop());
  $("session-ended").hidden = false;
  $("publish-send").disabled = true;
  document.body.dataset.session = "ended";
  throw new SessionEnded("the session has ended");
}

/**
 * GETs JSON; a failure shows on the status line.
 * @param {string} path the path and query.
 * @returns {Promise<any>} the body.
 */
async function getJSON(path) {
  try {
    const response = await api(path);
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(typeof body.error === "string" ? body.error : `HTTP ${response.status}`);
    $("status").textContent = "";
    return body;
  } catch (error) {
    if (!ended) $("status").textContent = `${path.split("?")[0]}: ${error instanceof Error ? error.message : error}`;
    throw error;
  }
}

async function loadApps() {
  const { node, apps = [] } = await getJSON("/console/api/apps");
  $("node-info").textContent = node ? `node ${node.id ?? "(unnamed)"} · up ${formatDuration(node.uptime_seconds)}` : "";
  const select = $("app-select");
  const label = (/** @type {any} */ app) => `${app.id} (${app.key}) · ${app.connections} conn.`;
  const options = [...select.options];
  // Rebuilt only when the apps changed, so that an open drop-down stays open.
  if (options.length === apps.length && options.every((option, i) => option.value === String(apps[i].id))) {
    options.forEach((option, i) => { option.textContent = label(apps[i]); });
  } else {
    const chosen = select.value;
    select.replaceChildren(...apps.map((/** @type {any} */ app) => new Option(label(app), String(app.id), false, String(app.id) === chosen)));
  }
  if (!apps.length) $("status").textContent = "No app is open to this console.";
  if (select.value && select.value !== current?.app) selectApp(select.value);
}

/** @param {string} app the app shown from now on. */
function selectApp(app) {
  current?.pollers.forEach((poller) => poller.stop());
  /** @type {View} */
  const view = { app, cursor: { after: 0, epoch: null }, skipped: 0, lost: 0, log: new LogBuffer(), tracker: new RateTracker(CHARTED), series: {}, pollers: [] };
  for (const name of CHARTED) view.series[name] = new Series();
  view.pollers = [new Poller(() => pollSnapshot(view), 500, clock), new Poller(() => pollLog(view), 500, clock)];
  current = view;
  unseen = 0;
  $("log").replaceChildren();
  $("log-skipped").hidden = true;
  drawCharts(view, Date.now());
  if (!ended && document.visibilityState !== "hidden") view.pollers.forEach((poller) => poller.start());
}

/** @param {View} view */
async function pollSnapshot(view) {
  const snapshot = await getJSON(`/console/api/app?app=${encodeURIComponent(view.app)}`);
  if (view !== current) return;
  const { rates } = view.tracker.sample(snapshot.at, snapshot.counters ?? {});
  if (rates) for (const name of CHARTED) view.series[name].push(snapshot.at, rates[name]);
  drawCharts(view, snapshot.at);
  const { connections = {}, channels = {}, rooms = {}, presence = {} } = snapshot;
  const dash = (/** @type {unknown} */ value) => value ?? "–";
  $("connections-count").textContent = String(connections.count ?? 0);
  fill("connections", connections, (c) => [c.socket_id, dash(c.user_id), c.channels, c.rooms]);
  fill("channels", channels, (c) => [c.name, c.subscribers]);
  fill("rooms", rooms, (r) => [r.name, r.members, (r.users ?? []).join(", "), dash(r.epoch), dash(r.last_id),
    r.kept_at_most == null ? "–" : `${r.kept_at_most} (${r.span_seconds} s)`]);
  fill("presence", presence, (p) => [p.channel, (p.members ?? []).length, (p.members ?? []).join(", ")]);
}

/** @param {View} view @param {number} now the newest instant, by the server's clock. */
function drawCharts(view, now) {
  for (const canvas of charts) {
    const { points } = view.series[canvas.dataset.counter ?? ""];
    drawChart(canvas, points, now, CHART_WINDOW_MS);
    $(`${canvas.id}-value`).textContent = points.length ? formatRate(points[points.length - 1].value) : "";
  }
}

/**
 * Replaces a table's rows, and shows its note when the server cut the list.
 * @param {string} id the tbody's id; its note's is `${id}-truncated`.
 * @param {{ list?: any[], truncated?: boolean }} part the snapshot's part.
 * @param {(item: any) => unknown[]} cells an item's cells.
 */
function fill(id, part, cells) {
  $(id).replaceChildren(...(part.list ?? []).map((item) => {
    const row = document.createElement("tr");
    for (const cell of cells(item)) row.insertCell().textContent = String(cell);
    return row;
  }));
  $(`${id}-truncated`).hidden = !part.truncated;
}

/** @param {View} view */
async function pollLog(view) {
  const answer = await getJSON(`/console/api/log?${logQuery(view.app, view.cursor)}`);
  if (view !== current) return;
  view.cursor = logCursor(view.cursor, answer);
  // `skipped`: left out by the server's per-second limit; `lost`: gone from its ring before
  // this page asked (a hidden tab, a slow poll). Each is counted once by the server.
  const skipped = Number(answer.skipped) || 0, lost = Number(answer.lost) || 0;
  if (skipped > 0 || lost > 0) {
    view.skipped += skipped;
    view.lost += lost;
    $("log-skipped").hidden = false;
    $("log-skipped").textContent = `sampled: ${view.skipped} entries skipped (over ${answer.limit_per_second}/s)`
      + (view.lost > 0 ? `, ${view.lost} no longer kept when asked for` : "");
  }
  const added = view.log.append(Array.isArray(answer.entries) ? answer.entries : []);
  if (paused) {
    unseen += added.length;
    if (unseen) $("log-pause").textContent = `Resume (${unseen} new)`;
    return;
  }
  const list = $("log");
  const filter = logFilter();
  list.append(...added.filter(({ entry }) => matchesFilter(entry, filter)).map(logLine));
  while (list.firstElementChild && Number(list.firstElementChild.dataset.id) < view.log.firstId) list.firstElementChild.remove();
  if (added.length) scrollLog();
}

/** @param {{ id: number, entry: import("./model.js").LogEntry }} record @returns {HTMLLIElement} its line. */
function logLine({ id, entry }) {
  const line = document.createElement("li");
  line.dataset.id = String(id);
  line.dataset.kind = String(entry.kind);
  for (const [name, text] of [["time", formatTime(entry.at)], ["kind", entry.kind], ["text", describeEntry(entry)]]) {
    const span = line.appendChild(document.createElement("span"));
    span.className = name;
    span.textContent = String(text);
  }
  return line;
}

const logFilter = () => ({ kind: $("log-kind").value, channel: $("log-channel").value, room: $("log-room").value, user: $("log-user").value });

function renderLog() {
  const filter = logFilter();
  $("log").replaceChildren(...(current?.log.records ?? []).filter(({ entry }) => matchesFilter(entry, filter)).map(logLine));
  scrollLog();
}

function scrollLog() {
  if ($("log-autoscroll").checked) $("log").scrollTop = $("log").scrollHeight;
}

/** @param {SubmitEvent} event */
async function publish(event) {
  event.preventDefault();
  if (!current || ended) return;
  const result = $("publish-result");
  const body = publishRequest({ app: current.app, target: $("publish-target-room").checked ? "room" : "channel",
    name: $("publish-name").value, event: $("publish-event").value, data: $("publish-data").value });
  $("publish-send").disabled = true;
  result.textContent = "Sending…";
  result.dataset.outcome = "";
  try {
    const response = await api("/console/api/publish", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const outcome = publishOutcome(response.status, await response.text());
    result.textContent = outcome.text;
    result.dataset.outcome = outcome.ok ? "ok" : "error";
  } catch (error) {
    result.textContent = `Not sent: ${error instanceof Error ? error.message : error}`;
    result.dataset.outcome = "error";
  } finally {
    $("publish-send").disabled = ended;
  }
}

$("app-select").addEventListener("change", () => selectApp($("app-select").value));
for (const id of ["log-kind", "log-channel", "log-room", "log-user"]) $(id).addEventListener("input", renderLog);
$("log-autoscroll").addEventListener("change", scrollLog);
$("log-pause").addEventListener("click", () => {
  paused = !paused;
  unseen = 0;
  $("log-pause").textContent = paused ? "Resume" : "Pause";
  $("log-pause").setAttribute("aria-pressed", String(paused));
  if (!paused) renderLog();
});
$("publish-form").addEventListener("submit", publish);
document.addEventListener("visibilitychange", () => {
  if (!ended) pollers().forEach((poller) => (document.visibilityState === "hidden" ? poller.stop() : poller.start()));
});
if (document.visibilityState !== "hidden") appsPoller.start();
