import { test } from "node:test";
import assert from "node:assert/strict";
import {
  CHARTED, KINDS, LogBuffer, Poller, RateTracker, Series, counterIncrease, describeEntry, formatDuration, formatRate,
  formatTime, logCursor, logQuery, matchesFilter, niceCeiling, publishOutcome, publishRequest,
} from "../model.js";

test("a counter's increase is the difference, and all of its value after a reset (never negative)", () => {
  const table = [[10, 15, 5], [10, 10, 0], [0, 7, 7], [100, 3, 3], [100, 0, 0], [5, Number.NaN, 0]];
  for (const [before, after, increase] of table) assert.equal(counterIncrease(before, after), increase, `${before} → ${after}`);
});

test("rates are per second of the server's clock between two snapshots", () => {
  const tracker = new RateTracker(CHARTED);
  assert.deepEqual(tracker.sample(1000, { events_in: 10, deliveries: 40, replays: 0, refusals: 1 }), { rates: null, reset: false });
  const { rates, reset } = tracker.sample(3000, { events_in: 30, deliveries: 140, replays: 0, refusals: 2 });
  assert.equal(reset, false);
  assert.deepEqual(rates, { events_in: 10, deliveries: 50, replays: 0, refusals: 0.5 });
  assert.deepEqual(tracker.sample(3500, { events_in: 31, deliveries: 141, replays: 0, refusals: 2 }).rates, { events_in: 2, deliveries: 2, replays: 0, refusals: 0 });
});

test("a counter that goes down is a restart: reported, and rated from zero, not negative", () => {
  const tracker = new RateTracker(CHARTED);
  tracker.sample(0, { events_in: 1000, deliveries: 5000, replays: 3, refusals: 9 });
  const { rates, reset } = tracker.sample(1000, { events_in: 4, deliveries: 8, replays: 0, refusals: 0 });
  assert.equal(reset, true);
  assert.deepEqual(rates, { events_in: 4, deliveries: 8, replays: 0, refusals: 0 });
  assert.ok(Object.values(rates ?? {}).every((rate) => rate >= 0));
});

test("a snapshot at the last one's instant is ignored; a missing counter reads 0", () => {
  const tracker = new RateTracker(["events_in"]);
  tracker.sample(1000, { events_in: 10 });
  assert.deepEqual(tracker.sample(1000, { events_in: 50 }), { rates: null, reset: false });
  assert.deepEqual(tracker.sample(2000, { events_in: 12 }).rates, { events_in: 2 });
  assert.deepEqual(tracker.sample(3000, {}), { rates: { events_in: 0 }, reset: true });
});

test("a snapshot from before the last (the server's clock stepped back) is not rated, and the next is rated against it", () => {
  const tracker = new RateTracker(["events_in"]);
  tracker.sample(60_000, { events_in: 10 });
  assert.deepEqual(tracker.sample(1000, { events_in: 20 }), { rates: null, reset: false });
  assert.deepEqual(tracker.sample(2000, { events_in: 25 }).rates, { events_in: 5 });
});

test("after a gap longer than the tracker's limit (a hidden tab), the next sample starts afresh, a reset still reported", () => {
  const tracker = new RateTracker(["events_in"], 10_000);
  tracker.sample(0, { events_in: 10 });
  assert.deepEqual(tracker.sample(60_000, { events_in: 6010 }), { rates: null, reset: false });
  assert.deepEqual(tracker.sample(61_000, { events_in: 6020 }).rates, { events_in: 10 });
  assert.deepEqual(tracker.sample(120_000, { events_in: 5 }), { rates: null, reset: true });
});

test("a series keeps at most 300 points at 1 per second, none older than 5 minutes before the newest", () => {
  const series = new Series();
  for (let second = 0; second < 1000; second += 1) series.push(second * 1000, second);
  assert.equal(series.points.length, 300);
  assert.deepEqual(series.points[0], { at: 700_000, value: 700 });
  assert.deepEqual(series.points[299], { at: 999_000, value: 999 });
  series.push(2_000_000, 1);
  assert.deepEqual(series.points, [{ at: 2_000_000, value: 1 }], "a gap longer than the window leaves only the newest");
});

test("a series keeps 300 points even when sampled faster than 1 per second", () => {
  const series = new Series();
  for (let i = 0; i < 400; i += 1) series.push(i * 500, i);
  assert.equal(series.points.length, 300);
  assert.equal(series.points[0].value, 100);
  series.push(199_500, -1);
  assert.equal(series.points.length, 300, "a point at the last one's instant is ignored");
  assert.equal(series.points[299].value, 399);
});

test("a point from before the last (the server's clock stepped back) starts the series again", () => {
  const series = new Series();
  for (let second = 0; second < 10; second += 1) series.push(100_000 + second * 1000, second);
  series.push(50_000, 7);
  assert.deepEqual(series.points, [{ at: 50_000, value: 7 }]);
});

/** A log entry of `kind` with `fields`. */
const entry = (seq, kind, fields = {}) => ({ seq, at: 0, kind, socket_id: "1.2", channel: null, room: null, user_id: null, event: null, detail: null, ...fields });

test("the log keeps the newest 1,000 entries, ids growing across batches", () => {
  const log = new LogBuffer();
  const first = log.append(Array.from({ length: 600 }, (_, i) => entry(i + 1, "event")));
  assert.equal(first.length, 600);
  assert.equal(first[0].id, 1);
  const second = log.append(Array.from({ length: 600 }, (_, i) => entry(i + 601, "event")));
  assert.equal(second[0].id, 601);
  assert.equal(log.records.length, 1000);
  assert.equal(log.firstId, 201);
  assert.equal(log.records[0].entry.seq, 201);
  assert.equal(log.records[999].entry.seq, 1200);
});

test("a batch larger than the log keeps only its newest entries; ids still count every entry", () => {
  const log = new LogBuffer(3);
  assert.equal(log.firstId, 1);
  const added = log.append([1, 2, 3, 4, 5].map((seq) => entry(seq, "connect")));
  assert.deepEqual(added.map((record) => [record.id, record.entry.seq]), [[3, 3], [4, 4], [5, 5]]);
  log.append([entry(1, "connect")]);
  assert.deepEqual(log.records.map((record) => record.id), [4, 5, 6], "a restarted server's seq 1 is still new");
});

test("the filter: kind exactly, channel, room and user id as case-sensitive substrings, empty fields match all", () => {
  const paid = entry(1, "event", { channel: "private-orders", event: "paid" });
  const join = entry(2, "join", { room: "chat:1", user_id: "alice" });
  const roomEvent = entry(3, "room_event", { room: "chat:12", user_id: "bob" });
  const all = [paid, join, roomEvent];
  const pass = (filter) => all.filter((item) => matchesFilter(item, filter)).map((item) => item.seq);
  assert.deepEqual(pass({}), [1, 2, 3]);
  assert.deepEqual(pass({ kind: "", channel: "", room: "", user: "" }), [1, 2, 3]);
  assert.deepEqual(pass({ kind: "event" }), [1], "not room_event");
  assert.deepEqual(pass({ channel: "orders" }), [1]);
  assert.deepEqual(pass({ channel: "Orders" }), [], "case-sensitive");
  assert.deepEqual(pass({ room: "chat:1" }), [2, 3]);
  assert.deepEqual(pass({ room: "chat:1", user: "bo" }), [3]);
  assert.deepEqual(pass({ kind: "join", user: "bob" }), []);
  assert.deepEqual(pass({ user: "ALICE" }), []);
  assert.equal(KINDS.length, 9);
});

test("the log cursor follows the answer's `next` and `epoch`; the query carries the epoch once the server named one", () => {
  const first = { after: 0, epoch: null };
  assert.equal(logQuery("a&b", first), "app=a%26b&after=0", "no epoch before the first answer");
  const cursor = logCursor(first, { next: 5, epoch: "9f" });
  assert.deepEqual(cursor, { after: 5, epoch: "9f" });
  assert.equal(logQuery("1", cursor), "app=1&after=5&epoch=9f");
  // A restart: the server answered the old epoch's cursor from the new log's start, with its
  // epoch; the cursor goes on from there.
  assert.deepEqual(logCursor(cursor, { next: 3, epoch: "a0" }), { after: 3, epoch: "a0" });
  assert.deepEqual(logCursor(cursor, { next: 500, epoch: "a0" }), { after: 500, epoch: "a0" });
  // An answer without them, or mistyped: the cursor stays.
  assert.deepEqual(logCursor(cursor, {}), cursor);
  assert.deepEqual(logCursor(cursor, { next: "9", epoch: 7 }), cursor);
  assert.equal(logQuery("1", { after: 1, epoch: "x&y=z" }), "app=1&after=1&epoch=x%26y%3Dz");
});

/** A manual clock: timers run when `advance` passes them. */
function manualClock() {
  let now = 0;
  /** @type {{ at: number, callback: () => void, handle: number }[]} */
  let timers = [];
  let handles = 0;
  return {
    now: () => now,
    setTimeout: (callback, delay) => { timers.push({ at: now + delay, callback, handle: ++handles }); return handles; },
    clearTimeout: (handle) => { timers = timers.filter((timer) => timer.handle !== handle); },
    pending: () => timers.map((timer) => timer.at - now),
    async advance(ms) {
      const end = now + ms;
      for (;;) {
        timers.sort((a, b) => a.at - b.at);
        const next = timers[0];
        if (!next || next.at > end) break;
        timers.shift();
        now = next.at;
        next.callback();
        await settle();
      }
      now = end;
      await settle();
    },
    set(value) { now = value; },
  };
}
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** A task whose runs end when the test says. */
function gatedTask() {
  const runs = [];
  return { runs, task: () => new Promise((resolve, reject) => runs.push({ resolve, reject })) };
}

test("the poller runs at once, then every interval timed from each start, never two at once", async () => {
  const clock = manualClock();
  const { runs, task } = gatedTask();
  const poller = new Poller(task, 500, clock);
  poller.start();
  assert.equal(runs.length, 1);
  await clock.advance(2000);
  assert.equal(runs.length, 1, "no second poll while the first is in flight");
  poller.start();
  assert.equal(runs.length, 1, "start while in flight does not start another");
  runs[0].resolve();
  await settle();
  assert.deepEqual(clock.pending(), [0], "the late one is followed at once");
  await clock.advance(0);
  assert.equal(runs.length, 2);
  await clock.advance(200);
  runs[1].resolve();
  await settle();
  assert.deepEqual(clock.pending(), [300], "500 ms after the start, not after the end");
  await clock.advance(300);
  assert.equal(runs.length, 3);
});

test("a stopped poller lets the poll in flight end and starts none; started again, it polls at once", async () => {
  const clock = manualClock();
  const { runs, task } = gatedTask();
  const poller = new Poller(task, 1000, clock);
  poller.start();
  runs[0].resolve();
  await settle();
  poller.stop();
  assert.deepEqual(clock.pending(), []);
  await clock.advance(5000);
  assert.equal(runs.length, 1);
  poller.start();
  assert.equal(runs.length, 2);
  poller.stop();
  runs[1].resolve();
  await settle();
  assert.deepEqual(clock.pending(), [], "the poll that was in flight when stopped schedules nothing");
  poller.start();
  poller.start();
  assert.equal(runs.length, 3, "two starts, one poll");
});

test("a hidden-then-visible tab while a poll is in flight: the poll's end schedules the next, once", async () => {
  const clock = manualClock();
  const { runs, task } = gatedTask();
  const poller = new Poller(task, 1000, clock);
  poller.start();
  poller.stop();
  poller.start();
  assert.equal(runs.length, 1);
  runs[0].resolve();
  await settle();
  assert.deepEqual(clock.pending(), [1000]);
});

test("after failures the poller waits twice as long each time, up to 30 s, and back to the interval after a success", async () => {
  const clock = manualClock();
  const { runs, task } = gatedTask();
  const poller = new Poller(task, 1000, clock);
  poller.start();
  const waits = [];
  for (let i = 0; i < 6; i += 1) {
    runs[i].reject(new Error("down"));
    await settle();
    waits.push(clock.pending()[0]);
    await clock.advance(clock.pending()[0]);
  }
  assert.deepEqual(waits, [2000, 4000, 8000, 16000, 30000, 30000]);
  runs[6].resolve();
  await settle();
  assert.deepEqual(clock.pending(), [1000]);
});

test("rates read with at most 3 figures, k and M above a thousand", () => {
  const table = [[0, "0"], [-3, "0"], [Number.NaN, "0"], [0.25, "0.25"], [0.5, "0.5"], [3, "3"], [3.46, "3.5"], [9.96, "10"], [42.4, "42"],
    [999.4, "999"], [999.7, "1k"], [1234, "1.2k"], [15_600, "16k"], [999_400, "999k"], [999_600, "1M"], [3_400_000, "3.4M"]];
  for (const [value, text] of table) assert.equal(formatRate(value), text, String(value));
});

test("a chart's axis tops at the next 1, 2 or 5 × 10ⁿ", () => {
  const table = [[0, 1], [-1, 1], [0.3, 0.5], [1, 1], [1.1, 2], [7, 10], [12, 20], [45, 50], [50, 50], [120, 200], [999, 1000], [2001, 5000]];
  for (const [max, top] of table) assert.equal(niceCeiling(max), top, String(max));
});

test("times read HH:MM:SS.mmm in the given zone; durations in their two largest units", () => {
  const at = Date.UTC(2025, 11, 1, 9, 5, 7, 42);
  assert.equal(formatTime(at, 0), "09:05:07.042");
  assert.equal(formatTime(at, 120), "11:05:07.042");
  assert.equal(formatTime(at, -600), "23:05:07.042");
  assert.match(formatTime(at), /^\d\d:\d\d:\d\d\.\d{3}$/);
  const table = [[0, "0s"], [42, "42s"], [60, "1m"], [303, "5m 3s"], [7830, "2h 10m"], [3600, "1h"], [273_600, "3d 4h"], [-5, "0s"], [12.9, "12s"]];
  for (const [seconds, text] of table) assert.equal(formatDuration(seconds), text, String(seconds));
});

test("an entry's line names its present fields and ends with the detail", () => {
  assert.equal(describeEntry(entry(1, "event", { channel: "orders", event: "paid", detail: "12 bytes" })), "socket 1.2 · channel orders · event paid · 12 bytes");
  assert.equal(describeEntry({ seq: 1, at: 0, kind: "error", socket_id: null, detail: "<img src=x onerror=alert(1)>" }), "<img src=x onerror=alert(1)>");
  assert.equal(describeEntry(entry(2, "join", { room: "chat:1", user_id: "alice", socket_id: "" })), "room chat:1 · user alice");
});

test("a publish goes to a channel or a room, its data the textarea's text as it is", () => {
  assert.deepEqual(publishRequest({ app: "1", target: "channel", name: "orders", event: "paid", data: "{\"id\":1}" }),
    { app: "1", channel: "orders", event: "paid", data: "{\"id\":1}" });
  assert.deepEqual(publishRequest({ app: "1", target: "room", name: "chat:1", event: "said", data: "hi" }),
    { app: "1", room: "chat:1", event: "said", data: "hi" });
});

test("a publish's outcome is the server's status and body, or the raw answer when it is not JSON", () => {
  assert.deepEqual(publishOutcome(200, JSON.stringify({ status: 200, body: "{}" })), { ok: true, text: "Sent (200): {}" });
  assert.deepEqual(publishOutcome(413, JSON.stringify({ status: 413, body: "Payload too large" })), { ok: false, text: "Failed (413): Payload too large" });
  assert.deepEqual(publishOutcome(200, JSON.stringify({ status: 400, body: "" })), { ok: false, text: "Failed (400)" });
  assert.deepEqual(publishOutcome(502, "<html>Bad gateway</html>"), { ok: false, text: "Failed (502): <html>Bad gateway</html>" });
  assert.equal(publishOutcome(500, "x".repeat(2000)).text.length, "Failed (500): ".length + 500);
});
