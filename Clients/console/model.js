// The console's decisions, without the DOM so that node tests them; console.js does the I/O.

/** The log's kinds, as the server names them. */
export const KINDS = Object.freeze(["connect", "disconnect", "subscribe", "unsubscribe", "join", "leave", "event", "room_event", "error"]);
/** The counters charted, as rates per second. */
export const CHARTED = Object.freeze(["events_in", "deliveries", "replays", "refusals"]);
/** A chart's window (5 minutes, in milliseconds) and its points at 1 sample a second. */
export const CHART_WINDOW_MS = 300_000;
export const CHART_POINTS = 300;

/**
 * How much a cumulative counter grew. A lower value than before is a reset (the server
 * restarted and counts from 0): all of it is new, as Prometheus' `rate()` reads a reset.
 * @param {number} before the earlier value.
 * @param {number} after the later value.
 * @returns {number} the increase, never negative.
 */
export function counterIncrease(before, after) {
  if (!(after > 0)) return 0;
  return after < before ? after : after - before;
}

/** Rates per second between successive snapshots of the node's counters. */
export class RateTracker {
  /**
   * @param {readonly string[]} names the counters rated.
   * @param {number} [maxGap] milliseconds past which two samples are not rated (10 s): an average over a hidden tab's minutes misleads.
   */
  constructor(names, maxGap = 10_000) {
    this.names = names;
    this.maxGap = maxGap;
    /** @type {{ at: number, counters: Record<string, number> } | null} */
    this.previous = null;
  }

  /**
   * Takes a sample; one at the last one's instant is ignored, an earlier one (the server's
   * clock stepped back) is not rated.
   * @param {number} at the snapshot's instant by the server's clock, in milliseconds.
   * @param {Record<string, number>} counters the cumulative counters.
   * @returns {{ rates: Record<string, number> | null, reset: boolean }} the rates (`null`: none to rate against), and whether a counter went down.
   */
  sample(at, counters) {
    const previous = this.previous;
    if (previous?.at === at) return { rates: null, reset: false };
    this.previous = { at, counters: { ...counters } };
    if (!previous) return { rates: null, reset: false };
    const reset = this.names.some((name) => (counters[name] ?? 0) < (previous.counters[name] ?? 0));
    if (at < previous.at || at - previous.at > this.maxGap) return { rates: null, reset };
    /** @type {Record<string, number>} */
    const rates = {};
    for (const name of this.names) rates[name] = counterIncrease(previous.counters[name] ?? 0, counters[name] ?? 0) * 1000 / (at - previous.at);
    return { rates, reset };
  }
}

/** A chart's points, oldest first: at most `capacity`, none older than `window` before the newest. */
export class Series {
  constructor(capacity = CHART_POINTS, window = CHART_WINDOW_MS) {
    this.capacity = capacity;
    this.window = window;
    /** @type {{ at: number, value: number }[]} */
    this.points = [];
  }

  /**
   * Adds a point; one at the last one's instant is ignored, an earlier one (the server's clock
   * stepped back) starts the series again.
   * @param {number} at its instant, in milliseconds.
   * @param {number} value its value.
   */
  push(at, value) {
    const last = this.points[this.points.length - 1];
    if (last?.at === at) return;
    if (last && at < last.at) this.points = [];
    this.points.push({ at, value });
    const stale = this.points.findIndex((point) => point.at >= at - this.window);
    this.points.splice(0, Math.max(stale, this.points.length - this.capacity));
  }
}

/**
 * A log entry as the server sends it.
 * @typedef {{ seq: number, at: number, kind: string, socket_id?: string | null, channel?: string | null, room?: string | null, user_id?: string | null, event?: string | null, detail?: string | null }} LogEntry
 */

/** The page's log: the newest `capacity` entries, each with an id that only grows (the server's seq restarts). */
export class LogBuffer {
  constructor(capacity = 1000) {
    this.capacity = capacity;
    /** @type {{ id: number, entry: LogEntry }[]} */
    this.records = [];
    this.nextId = 1;
  }

  /**
   * Appends entries, dropping the oldest past the capacity.
   * @param {LogEntry[]} entries the new entries, oldest first.
   * @returns {{ id: number, entry: LogEntry }[]} the records added (the newest `capacity` at most).
   */
  append(entries) {
    const added = entries.map((entry) => ({ id: this.nextId++, entry })).slice(-this.capacity);
    this.records.push(...added);
    this.records.splice(0, Math.max(0, this.records.length - this.capacity));
    return added;
  }

  /** @returns {number} the oldest record's id (`nextId` when empty). */
  get firstId() { return this.records.length ? this.records[0].id : this.nextId; }
}

/**
 * Whether an entry passes the log's filter: the kind exactly (a `KINDS` member), the channel,
 * room and user id as case-sensitive substrings. An empty field passes all; a non-empty one
 * fails an entry without the field.
 * @param {LogEntry} entry the entry.
 * @param {{ kind?: string, channel?: string, room?: string, user?: string }} filter the filter.
 * @returns {boolean} whether it passes.
 */
export function matchesFilter(entry, filter) {
  /** @param {unknown} value @param {string | undefined} part */
  const has = (value, part) => !part || (typeof value === "string" && value.includes(part));
  return (!filter.kind || entry.kind === filter.kind) && has(entry.channel, filter.channel) && has(entry.room, filter.room) && has(entry.user_id, filter.user);
}

/**
 * Where the next log request starts: the answer's `next`, of the answer's `epoch`. The server
 * answers a cursor of another epoch (its log started again: a restart, or a log freed while no
 * console looked) from the new log's start, counting what it no longer keeps in `lost`, so the
 * page never repeats an entry nor skips one uncounted.
 * @typedef {{ after: number, epoch: string | null }} LogCursor
 */

/**
 * The cursor after an answer; a field the answer lacks or mistypes keeps the cursor's.
 * @param {LogCursor} cursor the cursor just asked with.
 * @param {{ next?: unknown, epoch?: unknown }} answer the log's answer.
 * @returns {LogCursor} the next cursor.
 */
export function logCursor(cursor, answer) {
  const after = typeof answer.next === "number" && Number.isFinite(answer.next) ? answer.next : cursor.after;
  const epoch = typeof answer.epoch === "string" ? answer.epoch : cursor.epoch;
  return { after, epoch };
}

/**
 * The log request's query for `app` from `cursor` (the epoch only once the server named one).
 * @param {string} app the app id.
 * @param {LogCursor} cursor where to start.
 * @returns {string} the query, without `?`.
 */
export function logQuery(app, cursor) {
  const epoch = cursor.epoch === null ? "" : `&epoch=${encodeURIComponent(cursor.epoch)}`;
  return `app=${encodeURIComponent(app)}&after=${cursor.after}${epoch}`;
}

/** Runs `task` every `interval` ms from each start, never two at once; after failures the wait doubles, up to 30 s. */
export class Poller {
  /**
   * @param {() => Promise<unknown>} task one poll; a rejection is a failure.
   * @param {number} interval milliseconds between starts.
   * @param {{ now: () => number, setTimeout: (callback: () => void, delay: number) => any, clearTimeout: (handle: any) => void }} clock the clock and its timers.
   */
  constructor(task, interval, clock) {
    this.task = task;
    this.interval = interval;
    this.clock = clock;
    this.running = false;
    this.inFlight = false;
    this.failures = 0;
    /** @type {any} */
    this.timer = null;
  }

  /** Polls now, or when the poll in flight ends; nothing if running. */
  start() {
    if (this.running) return;
    this.running = true;
    if (!this.inFlight) this.run();
  }

  /** Polls no more; a poll in flight ends without a next. */
  stop() {
    this.running = false;
    this.clock.clearTimeout(this.timer);
    this.timer = null;
  }

  /** @private */
  async run() {
    this.timer = null;
    this.inFlight = true;
    const started = this.clock.now();
    try {
      await this.task();
      this.failures = 0;
    } catch {
      this.failures += 1;
    }
    this.inFlight = false;
    if (!this.running) return;
    const wait = this.failures ? Math.min(30_000, this.interval * 2 ** this.failures) : this.interval;
    this.timer = this.clock.setTimeout(() => this.run(), Math.max(0, started + wait - this.clock.now()));
  }
}

/**
 * A rate as a label: two decimals below 1, one below 10, then whole, `k` and `M` past 999.5.
 * @param {number} value per second.
 * @returns {string} e.g. `0`, `0.25`, `3.5`, `42`, `1.2k`, `3.4M`.
 */
export function formatRate(value) {
  if (!(value > 0)) return "0";
  const [scale, unit] = value >= 999_500 ? [1e6, "M"] : value >= 999.5 ? [1e3, "k"] : [1, ""];
  const scaled = value / scale;
  return `${scaled < 10 ? Number(scaled.toFixed(scaled < 1 ? 2 : 1)) : Math.round(scaled)}${unit}`;
}

/**
 * The top of a chart's axis: the least 1, 2 or 5 × 10ⁿ at or above `max` (1 when idle).
 * @param {number} max the largest value.
 * @returns {number} the axis maximum.
 */
export function niceCeiling(max) {
  if (!(max > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 5, 10].map((step) => step * power).find((top) => top >= max * (1 - 1e-12)) ?? 10 * power;
}

/**
 * A clock time, `HH:MM:SS.mmm`.
 * @param {number} at milliseconds since 1970.
 * @param {number} [offset] minutes east of UTC (the browser's zone by default).
 * @returns {string} the time.
 */
export function formatTime(at, offset = -new Date(at).getTimezoneOffset()) {
  return new Date(at + offset * 60_000).toISOString().slice(11, 23);
}

/**
 * A duration in its two largest units, a zero second one left out.
 * @param {number} seconds the duration.
 * @returns {string} e.g. `42s`, `5m 3s`, `1m`, `2h 10m`, `3d 4h`.
 */
export function formatDuration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const parts = [[Math.floor(s / 86400), "d"], [Math.floor(s / 3600) % 24, "h"], [Math.floor(s / 60) % 60, "m"], [s % 60, "s"]];
  const first = parts.findIndex(([value]) => value > 0);
  if (first < 0) return "0s";
  return parts.slice(first, first + 2).filter(([value], index) => index === 0 || value > 0).map((part) => part.join("")).join(" ");
}

/**
 * An entry's fields but its kind and time, for its line in the log.
 * @param {LogEntry} entry the entry.
 * @returns {string} e.g. `socket 1.2 · channel orders · event paid · detail`.
 */
export function describeEntry(entry) {
  const fields = { socket: entry.socket_id, channel: entry.channel, room: entry.room, user: entry.user_id, event: entry.event };
  const parts = Object.entries(fields).filter(([, value]) => value != null && value !== "").map((field) => field.join(" "));
  return [...parts, ...(entry.detail ? [entry.detail] : [])].join(" · ");
}

/**
 * A publish's body, `{app, channel | room, event, data}`.
 * @param {{ app: string, target: string, name: string, event: string, data: string }} form the form (`target`: `channel` or `room`).
 * @returns {Record<string, string>} the body.
 */
export function publishRequest({ app, target, name, event, data }) {
  return { app, [target === "room" ? "room" : "channel"]: name, event, data };
}

/**
 * What a publish's answer says: the server's `{status, body}` or `{error}`, else the raw text.
 * @param {number} httpStatus the HTTP status.
 * @param {string} text the answer's body.
 * @returns {{ ok: boolean, text: string }} success, and the line to show (500 characters of the body at most).
 */
export function publishOutcome(httpStatus, text) {
  let status = httpStatus;
  let body = text;
  try {
    const answer = JSON.parse(text);
    if (typeof answer?.status === "number") ({ status, body = "" } = answer);
    else if (typeof answer?.error === "string") body = answer.error;
  } catch { /* not JSON: shown as it is */ }
  const ok = status >= 200 && status < 300;
  const shown = String(body).slice(0, 500);
  return { ok, text: `${ok ? "Sent" : "Failed"} (${status})${shown ? `: ${shown}` : ""}` };
}
