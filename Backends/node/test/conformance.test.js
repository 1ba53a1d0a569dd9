// The conformance suite (Backends/conformance): this library's outputs for cases.json equal
// expected.json (written by Swift's RealtimeBackend) byte for byte.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createHmac } from "node:crypto";
import { canonicalJSON, ChannelError, isValidPattern, isValidRoomName, matchRoom, patternsOverlap, Realtime, RuleError, WebhookError } from "../src/index.js";

const read = (name) => JSON.parse(readFileSync(new URL(`../../conformance/${name}`, import.meta.url), "utf8"));
const cases = read("cases.json");
const expected = read("expected.json");
const app = cases.app;

/** A backend as the cases declare it: the app's key, secret and master key, the clock at now_ms. */
function backend(clock = () => cases.now_ms) {
  return new Realtime({ appId: app.id, appKey: app.key, appSecret: app.secret, encryptionMasterKey: app.master_key, clock });
}

/** Declares a case's rule; `deny` lists parameter values its authorizer refuses. */
function declare(realtime, { pattern, options, deny }) {
  const authorize = deny ? (user, params) => !Object.entries(deny).some(([key, values]) => values.includes(params[key])) : undefined;
  realtime.room(pattern, options, authorize);
}

const rooms = backend();
for (const rule of cases.backend.rules) declare(rooms, rule);

test("the expected file has every section this suite compares", () => {
  assert.deepEqual(Object.keys(expected).sort(), ["auth", "auth_over_limit", "canonical", "canonical_integers", "channels", "config", "declarations", "matches",
    "overlaps", "rest", "room_events", "rules", "signin", "webhooks"]);
  assert.equal(expected.overlaps.length, cases.overlaps.length);
  assert.equal(expected.declarations.length, cases.declarations.sequences.length);
});

test("names and patterns are valid or not as listed", () => {
  for (const name of cases.names.valid) assert.ok(isValidRoomName(name), name);
  for (const name of cases.names.invalid) assert.ok(!isValidRoomName(name), name);
  for (const pattern of cases.patterns.valid) assert.ok(isValidPattern(pattern), pattern);
  for (const pattern of cases.patterns.invalid) assert.ok(!isValidPattern(pattern), pattern);
});

test("matches: the parameters of each name against each pattern", () => {
  assert.deepEqual(cases.matches.map(({ pattern, name }) => ({ pattern, name, params: matchRoom(name, pattern) })), expected.matches);
});

test("rules: in range, the rule the token carries; out of range, refused when declared", () => {
  for (const [index, item] of cases.rules.valid.entries()) {
    const realtime = backend();
    realtime.room(item.pattern, item.options);
    assert.equal(canonicalJSON(realtime.rules[0].rule), expected.rules.valid[index].rule, item.pattern);
  }
  for (const [index, item] of cases.rules.invalid.entries()) {
    assert.throws(() => backend().room(item.pattern, item.options),
      (error) => error instanceof RuleError && error.code === expected.rules.invalid[index].error, JSON.stringify(item));
  }
});

test("overlaps: whether some name matches both patterns of each pair", () => {
  assert.deepEqual(cases.overlaps.map(({ a, b }) => ({ a, b, overlap: patternsOverlap(a, b) })), expected.overlaps);
});

test("declarations: each sequence on a fresh backend, each rule ok or refused with the same code (public rules)", () => {
  const outcomes = cases.declarations.sequences.map((sequence) => {
    const realtime = backend();
    return sequence.map((item) => {
      try {
        declare(realtime, item);
        return "ok";
      } catch (error) {
        if (!(error instanceof RuleError)) throw error;
        return error.code;
      }
    });
  });
  assert.deepEqual(outcomes, expected.declarations);
});

test("auth: every batched answer, tokens included, byte for byte", async () => {
  for (const [index, item] of cases.auth.entries()) {
    const answer = await rooms.authorizeRooms(item.rooms, item.user, item.info ?? undefined);
    assert.equal(canonicalJSON(answer), expected.auth[index].answer, JSON.stringify(item.rooms));
  }
  const { prefix, count, user } = cases.auth_over_limit;
  const names = Array.from({ length: count }, (_, i) => `${prefix}${i}`);
  const answer = await rooms.authorizeRooms(names, user);
  assert.deepEqual(names.filter((name) => answer.rooms[name].error === "bad_request"), expected.auth_over_limit.bad_request);
  assert.equal(Object.keys(answer.rooms).length, expected.auth_over_limit.answered);
  assert.equal(canonicalJSON(rooms.config()), expected.config);
});

test("channels and signin: Pusher's signatures, and the refusals' codes", () => {
  for (const [index, item] of cases.channels.entries()) {
    const want = expected.channels[index];
    if (want.error) {
      assert.throws(() => rooms.authorizeChannel(item.socket_id, item.channel, item.member), (e) => e instanceof ChannelError && e.code === want.error, item.channel);
    } else {
      assert.equal(canonicalJSON(rooms.authorizeChannel(item.socket_id, item.channel, item.member)), want.answer, item.channel);
    }
  }
  for (const [index, item] of cases.signin.entries()) {
    const want = expected.signin[index];
    if (want.error) {
      assert.throws(() => rooms.authenticateUser(item.socket_id, item.user_data), (e) => e instanceof ChannelError && e.code === want.error);
    } else {
      assert.equal(canonicalJSON(rooms.authenticateUser(item.socket_id, item.user_data)), want.answer);
    }
  }
});

test("the signed HTTP API: queries and room event bodies", () => {
  for (const [index, item] of cases.rest.entries()) {
    const signer = backend(() => item.timestamp * 1000);
    assert.equal(signer.signedQuery(item.method, item.path, item.body), expected.rest[index].query, item.path);
  }
  for (const [index, item] of cases.room_events.entries()) {
    assert.equal(rooms.roomEventBody(item.room, item.event, item.data), expected.room_events[index].body, item.room);
  }
});

test("webhooks: verified and parsed, or refused with the same code", () => {
  assert.equal(createHmac("sha256", app.secret).update(cases.webhooks[0].body).digest("hex"), expected.webhooks[0].signature);
  for (const want of expected.webhooks) {
    if (want.error) {
      assert.throws(() => rooms.verifyWebhook(want.key, want.signature, want.body), (e) => e instanceof WebhookError && e.code === want.error);
    } else {
      assert.equal(canonicalJSON(rooms.verifyWebhook(want.key, want.signature, want.body)), want.result);
    }
  }
});

test("canonical JSON: numbers in every range as Swift writes them, escapes, key order beyond ASCII", () => {
  assert.deepEqual(cases.canonical.map((value) => canonicalJSON(value)), expected.canonical);
});

test("canonical JSON integers: each as a bigint, written as its double, or refused when no double holds it", () => {
  const written = cases.canonical_integers.map((text) => {
    try {
      return canonicalJSON(BigInt(text));
    } catch (error) {
      if (!(error instanceof TypeError)) throw error;
      return "refused";
    }
  });
  assert.deepEqual(written, expected.canonical_integers);
});
