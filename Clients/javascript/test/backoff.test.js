import { test } from "node:test";
import assert from "node:assert/strict";
import { backoffCeiling, fullJitterDelay, ReconnectSchedule } from "../src/backoff.js";
import { closeReaction } from "../src/close-codes.js";

test("the ceiling doubles from the 1 s base and stops at the 30 s cap", () => {
  const table = [[0, 1000], [1, 2000], [2, 4000], [3, 8000], [4, 16000], [5, 30000], [6, 30000], [100, 30000]];
  for (const [retry, ceiling] of table) assert.equal(backoffCeiling(retry), ceiling, `retry ${retry}`);
});

test("full jitter draws uniformly between 0 and the ceiling", () => {
  assert.equal(fullJitterDelay(3, () => 0), 0);
  assert.equal(fullJitterDelay(3, () => 0.5), 4000);
  assert.ok(fullJitterDelay(10, () => 0.999999) < 30000);
  assert.ok(fullJitterDelay(10, () => 0.999999) > 29999);
});

/** The schedule with no short connection allowance (the rule before issue 49), drawing each delay at its ceiling. */
const schedule = () => new ReconnectSchedule({ backoff: { base: 1000, cap: 30000 }, stableConnectionDuration: 5000, shortConnectionAllowance: 0,
  minimumAttemptInterval: 100, random: () => 1 });
/** The default schedule (5 short connections allowed), drawing with `random`. */
const allowing = (random) => new ReconnectSchedule({ backoff: { base: 1000, cap: 30000 }, stableConnectionDuration: 5000, minimumAttemptInterval: 100, random });

/**
 * Drops the connection made ready at `ready` after `lasted` ms (`immediate`: a 4200), and
 * makes the next attempt ready as it starts.
 * @returns {{ wait: number, ready: number }} the delay drawn, and when the next is ready.
 */
function flap(s, ready, lasted, immediate) {
  const wait = s.nextDelay(ready + lasted, immediate);
  const next = ready + lasted + wait;
  s.attemptStarted(next); s.ready(next);
  return { wait, ready: next };
}

test("a path that flaps five times 0.5 s after each handshake: every handshake resets the backoff, so the retry after the fifth is within the base (issue 49)", () => {
  const s = allowing(() => 1);
  s.attemptStarted(0); s.ready(0);
  let ready = 0;
  const waits = [];
  for (let i = 0; i < 5; i += 1) ({ ready, wait: waits[i] } = flap(s, ready, 500, false));
  assert.deepEqual(waits, [1000, 1000, 1000, 1000, 1000]);
  const old = schedule();
  old.attemptStarted(0); old.ready(0);
  ready = 0;
  for (let i = 0; i < 5; i += 1) ({ ready, wait: waits[i] } = flap(old, ready, 500, false));
  assert.deepEqual(waits, [1000, 2000, 4000, 8000, 16000], "without the allowance");
});

test("a 4200 0.3 s after the handshake is retried at once (issue 49)", () => {
  const s = allowing(() => 1);
  s.attemptStarted(0); s.ready(50);
  assert.equal(s.nextDelay(350, true), 0);
});

test("a peer that ends every connection 10 ms after its handshake with 4200: five retried at once, then the growing backoff, about a dozen connections in 10 s (issue 14's bound: at most 100)", () => {
  let seed = 7;
  const s = allowing(() => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; });
  s.attemptStarted(0); s.ready(0);
  let ready = 0;
  let connections = 1;
  let immediate = 0;
  while (ready < 10000) {
    const next = flap(s, ready, 10, true);
    if (next.wait <= 100) immediate += 1;
    ready = next.ready;
    if (ready < 10000) connections += 1;
  }
  assert.ok(connections <= 20, `${connections} connections`);
  assert.ok(immediate >= 5 && immediate <= 7, `${immediate} at once`);
});

test("failed attempts grow the backoff; a connection that stayed up 5 s resets it", () => {
  const s = schedule();
  let now = 0;
  const delays = [];
  for (let i = 0; i < 7; i += 1) { s.attemptStarted(now); delays.push(s.nextDelay(now, false)); now += 60000; }
  assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
  s.attemptStarted(now); s.ready(now);
  assert.equal(s.nextDelay(now + 5000, false), 1000, "reset after a healthy connection");
});

test("a connection dropped within 5 s of its handshake does not reset the backoff", () => {
  const s = schedule();
  s.attemptStarted(0); s.nextDelay(0, false); s.nextDelay(0, false);
  s.attemptStarted(100000); s.ready(100000);
  assert.equal(s.nextDelay(104999, false), 4000);
});

test("an immediate-retry close is honoured only for a healthy connection, and never sooner than 100 ms after the last attempt", () => {
  const s = schedule();
  s.attemptStarted(0); s.ready(0);
  assert.equal(s.nextDelay(6000, true), 0, "healthy: at once");
  s.attemptStarted(6000); s.ready(6050);
  assert.equal(s.nextDelay(6060, true), 1000, "unhealthy: on the backoff");
  const t = schedule();
  t.attemptStarted(0); t.ready(0);
  t.minimumAttemptInterval = 10000;
  assert.equal(t.nextDelay(6000, true), 4000, "floor of the minimum attempt interval");
});

test("close codes: 4000–4099 fail, 4200–4299 retry at once, anything else backs off", () => {
  const table = [[4000, "fail"], [4001, "fail"], [4009, "fail"], [4099, "fail"], [4100, "back_off"], [4199, "back_off"],
    [4200, "reconnect_now"], [4201, "reconnect_now"], [4299, "reconnect_now"], [4300, "back_off"], [4301, "back_off"],
    [1000, "back_off"], [1001, "back_off"], [1006, "back_off"], [3999, "back_off"]];
  for (const [code, reaction] of table) assert.equal(closeReaction(code), reaction, `code ${code}`);
});
