// The shared transcripts (Clients/conformance) under Node's test runner (conformance-runner.js;
// the same in headless Chromium: conformance.html), and the defaults against the shared table.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { makeClient } from "./support.js";
import { runTranscript } from "./conformance-runner.js";
import { MAX_JOIN_RETRIES, MAX_RESYNCS } from "../src/room-frames.js";
import { MAX_ROOMS } from "../src/room-machine.js";
import { MAX_AUTH_ATTEMPTS, MAX_ROOMS_PER_REQUEST, MINIMUM_AUTH_INTERVAL, TOKEN_MARGIN } from "../src/room-tokens.js";

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
    room_auth_batch_window_ms: config.roomAuthBatchWindow, room_minimum_auth_interval_ms: MINIMUM_AUTH_INTERVAL, room_token_margin_ms: TOKEN_MARGIN,
    room_max_per_auth_request: MAX_ROOMS_PER_REQUEST, room_max_auth_attempts: MAX_AUTH_ATTEMPTS, room_max_resyncs: MAX_RESYNCS,
    room_max_join_retries: MAX_JOIN_RETRIES, room_max_rooms: MAX_ROOMS,
  }, Object.fromEntries(Object.entries(constants).filter(([key]) => key !== "source")));
});

for (const file of files) {
  const transcript = JSON.parse(readFileSync(`${root}transcripts/${file}`, "utf8"));
  test(`${file}: ${transcript.title}`, () => runTranscript(file, transcript, assert));
}
