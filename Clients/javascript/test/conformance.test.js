// The shared transcripts (Clients/conformance, issue 49): the same scripted server and clock
// as the Swift and Kotlin clients run, against this client's fakes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { makeClient } from "./support.js";

const root = fileURLToPath(new URL("../../conformance/", import.meta.url));
const constants = JSON.parse(readFileSync(`${root}constants.json`, "utf8"));
const files = readdirSync(`${root}transcripts`).filter((name) => name.endsWith(".json")).sort();

test("the defaults are the shared table's (constants.json)", () => {
  const config = makeClient().bird.machine.config;
  assert.deepEqual({
    backoff_base_ms: config.backoff.base, backoff_cap_ms: config.backoff.cap,
    stable_connection_ms: config.stableConnectionDuration, short_connection_allowance: config.shortConnectionAllowance,
    minimum_attempt_interval_ms: config.minimumAttemptInterval, activity_timeout_ms: config.activityTimeout,
    pong_timeout_ms: config.pongTimeout, verify_pong_timeout_ms: config.verifyPongTimeout, connect_timeout_ms: config.connectTimeout,
  }, Object.fromEntries(Object.entries(constants).filter(([key]) => key !== "source")));
});

for (const file of files) {
  const transcript = JSON.parse(readFileSync(`${root}transcripts/${file}`, "utf8"));
  test(`${file}: ${transcript.title}`, () => {
    const c = makeClient();
    c.setRandom(transcript.draw);
    /** @type {Map<string, { event: string, data: any }[]>} */
    const delivered = new Map();
    transcript.steps.forEach((step, index) => {
      const where = `${file} step ${index + 1} (${step.step})`;
      switch (step.step) {
        case "connect": c.bird.connect(); break;
        case "disconnect": c.bird.disconnect(); break;
        case "handshake": c.socket.handshake(step.socket_id, step.activity_timeout ?? 120); break;
        case "close": c.socket.drop(step.code, step.reason ?? ""); break;
        case "drop": case "refuse": c.socket.drop(1006, ""); break;
        case "subscribe": {
          const seen = [];
          delivered.set(step.channel, seen);
          c.bird.subscribe(step.channel).bind_global((event, data) => { if (!event.startsWith("bird")) seen.push({ event, data }); });
          break;
        }
        case "confirm": c.socket.receive("bird_internal:subscription_succeeded", {}, step.channel); break;
        case "server_event": c.socket.receive(step.event, step.data, step.channel); break;
        case "expect_sent_count": assert.equal(c.socket.framesOf(step.event).length, step.count, where); break;
        case "expect_subscribes": assert.deepEqual(c.socket.framesOf("bird:subscribe").map((f) => f.data.channel), step.channels, where); break;
        case "expect_delivered": assert.deepEqual(delivered.get(step.channel) ?? [], step.events, where); break;
        case "advance": c.clock.advance(step.ms); break;
        case "expect_state": assert.equal(c.bird.connection.state, step.state, where); break;
        case "expect_sockets": assert.equal(c.sockets.length, step.count, where); break;
        case "expect_next_timer": {
          const next = c.clock.pending()[0];
          assert.ok(next !== undefined && next >= step.min_ms && next <= step.max_ms, `${where}: next timer in ${next} ms`);
          break;
        }
        case "expect_no_timer": assert.deepEqual(c.clock.pending(), [], where); break;
        case "expect_last_error": assert.equal(c.errors.at(-1)?.code ?? c.errors.at(-1)?.data?.code, step.code, `${where}: ${JSON.stringify(c.errors.at(-1))}`); break;
        default: assert.fail(`${where}: unknown step`);
      }
    });
  });
}
