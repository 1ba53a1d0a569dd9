// Encrypted channels (Pusher's `private-encrypted-`) and sealed rooms (docs/rooms-protocol.md,
// "Sealed rooms"): payloads made by libsodium (fixtures/secretbox.json) open to their text;
// anything that does not open is told and never delivered; a sealed room's sends are sealed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
// Loaded once here, so the client's `import("./secretbox.js")` resolves within settle().
import { fromBase64, openPayload } from "../src/secretbox.js";
import { makeClient, roomAuthAnswer, settle } from "./support.js";

const { payloads } = JSON.parse(readFileSync(new URL("./fixtures/secretbox.json", import.meta.url), "utf8"));
const [price, unicode, plain] = payloads;

/** A client subscribed to `private-encrypted-prices`, its authorisation answered with `answer`. */
async function subscribed(answer = { shared_secret: price.key }) {
  const c = makeClient({}, (url, body) => ({ status: 200, body: { auth: `key:${body.socket_id}`, ...answer } }));
  const channel = c.bird.subscribe("private-encrypted-prices");
  const events = [], errors = [];
  channel.bind("price", (data) => events.push(data));
  channel.bind("bird:subscription_error", (error) => errors.push(error));
  c.connectNow();
  await settle();
  return { c, channel, events, errors };
}

test("an encrypted channel: authorised with its shared secret, each event opened before its handler runs", async () => {
  const { c, channel, events, errors } = await subscribed();
  assert.deepEqual(errors, []);
  assert.deepEqual(c.socket.framesOf("bird:subscribe").map((f) => f.data), [{ channel: "private-encrypted-prices", auth: "key:1.1" }],
    "the shared secret stays in the page: only auth is sent");
  c.socket.receive("bird_internal:subscription_succeeded", {}, "private-encrypted-prices");
  assert.equal(channel.subscribed, true);
  c.socket.receive("price", price.payload, "private-encrypted-prices");
  assert.deepEqual(events, [{ price: 42 }]);
  assert.equal(channel.trigger("client-x", { a: 1 }), false, "no client events on encrypted channels (Pusher's rule)");
});

test("an encrypted event that does not open is reported as a decryption error and never delivered", async () => {
  const { c, events } = await subscribed();
  c.socket.receive("bird_internal:subscription_succeeded", {}, "private-encrypted-prices");
  const altered = { ...price.payload, ciphertext: unicode.payload.ciphertext };
  c.socket.receive("price", altered, "private-encrypted-prices");
  c.socket.receive("price", { price: 42 }, "private-encrypted-prices");
  c.socket.receive("price", "plain text", "private-encrypted-prices");
  assert.deepEqual(events, []);
  assert.deepEqual(c.errors.map((e) => e.type), ["decryption", "decryption", "decryption"]);
  assert.match(c.errors[0].message, /price on private-encrypted-prices not delivered/);
  c.socket.receive("price", price.payload, "private-encrypted-prices");
  assert.deepEqual(events, [{ price: 42 }], "the next good one is delivered");
});

test("an encrypted channel's authorisation without a 32-byte shared secret fails the subscription", async () => {
  for (const answer of [{}, { shared_secret: "c2hvcnQ=" }, { shared_secret: "not base64!" }]) {
    const { c, channel, errors } = await subscribed(answer);
    assert.equal(errors.length, 1, JSON.stringify(answer));
    assert.match(errors[0].error, /32-byte base64 shared_secret/);
    assert.deepEqual(c.socket.framesOf("bird:subscribe"), []);
    assert.equal(channel.subscribed, false);
  }
});

/** A client with `secret:1` joined, its auth entry carrying `key` (`keyFor(n)` for the n-th answer; `undefined`: no key). */
async function sealedRoom(key = unicode.key, { keyFor = () => key, life = 3_600_000 } = {}) {
  let answers = 0;
  const c = makeClient({}, (url, body) => {
    const answer = roomAuthAnswer(body, { life });
    const given = keyFor(answers++);
    for (const name of body.rooms) if (given !== undefined) answer.body.rooms[name].key = given;
    return answer;
  });
  const socket = c.connectNow();
  const room = c.bird.join("secret:1");
  const events = [], own = [];
  room.on("updated", (data, meta) => events.push({ data, id: meta.id }));
  room.on("error", (error) => own.push(error));
  c.clock.advance(10);
  await settle();
  socket.receive("bird:room_event", { event: "joined", data: { epoch: "e1", id: 0, count: 1 } }, "secret:1");
  return { c, socket, room, events, own };
}

const keptEvent = (socket, id, data) =>
  socket.receive("bird:room_event", { event: "updated", data, meta: { id, at: 1700000000000 + id, from: null } }, "secret:1");

test("a sealed room: its events opened with the auth answer's key, its sends sealed, its history opened", async () => {
  const { c, socket, room, events, own } = await sealedRoom();
  assert.equal(room.state, "joined");
  assert.ok(!JSON.stringify(socket.framesOf("bird:room_join")).includes(unicode.key), "the key never reaches the server");
  keptEvent(socket, 1, unicode.payload);
  assert.deepEqual(events, [{ data: { note: "ünïcödé ✓", n: [1, 2, 3] }, id: 1 }]);
  room.send("updated", { note: "from the page" });
  const sent = socket.framesOf("bird:room_send").at(-1).data;
  const sealed = JSON.parse(sent.data);
  assert.deepEqual(Object.keys(sealed).sort(), ["ciphertext", "nonce"], "the server sees only {nonce, ciphertext}");
  assert.equal(openPayload(sealed, fromBase64(unicode.key)), JSON.stringify({ note: "from the page" }));
  const page = room.history({ limit: 2 });
  await settle();
  const request = socket.framesOf("bird:room_history").at(-1).data.request;
  socket.receive("bird:room_history", { request, more: false, events: [{ event: "updated", data: unicode.payload, meta: { id: 1, at: 1, from: null } }] }, "secret:1");
  assert.deepEqual((await page).events.map((e) => e.data), [{ note: "ünïcödé ✓", n: [1, 2, 3] }]);
  assert.deepEqual(own, []);
  assert.equal(c.errors.length, 0);
});

test("a sealed room's event that does not open is told on the room as bad_data, and the position still moves", async () => {
  const { socket, room, events, own } = await sealedRoom();
  keptEvent(socket, 1, price.payload); // another key's box
  keptEvent(socket, 2, plain.payload);
  keptEvent(socket, 3, unicode.payload);
  assert.deepEqual(own.map((e) => e.code), ["bad_data", "bad_data"]);
  assert.match(own[0].message, /event 1 of a sealed room does not open/);
  assert.deepEqual(events.map((e) => e.id), [3], "no rejoin for a hole: the ids were consecutive");
  assert.equal(room.position.id, 3);
  assert.equal(socket.framesOf("bird:room_join").length, 1);
});

test("a sealed room's entry without a 32-byte key fails the room with auth_failed", async () => {
  const { room, socket } = await sealedRoom("c2hvcnQ=");
  assert.equal(room.state, "failed");
  assert.equal(room.error.code, "auth_failed");
  assert.deepEqual(socket.framesOf("bird:room_join"), []);
});

test("a refreshed token's entry without a key keeps the room sealed: events still opened, sends still sealed", async () => {
  const { c, socket, room, events } = await sealedRoom(unicode.key, { keyFor: (n) => (n === 0 ? unicode.key : undefined), life: 120_000 });
  c.clock.advance(120_000); // the token is due: the auth route is asked again, and forgets the key
  await settle();
  assert.ok(socket.framesOf("bird:room_refresh").length >= 1, "the token was refreshed");
  keptEvent(socket, 1, unicode.payload);
  assert.deepEqual(events.map((e) => e.data), [{ note: "ünïcödé ✓", n: [1, 2, 3] }]);
  room.send("updated", { secret: "s" });
  assert.deepEqual(Object.keys(JSON.parse(socket.framesOf("bird:room_send").at(-1).data.data)).sort(), ["ciphertext", "nonce"]);
});

test("a token whose rule says sealed, answered without a key, fails the room instead of reading it as plaintext", async () => {
  const claims = Buffer.from(JSON.stringify({ exp: 9e9, room: "secret:1", rule: { sealed: true } })).toString("base64url");
  const c = makeClient({}, (url, body) => {
    const answer = roomAuthAnswer(body);
    for (const name of body.rooms) answer.body.rooms[name].token = `e30.${claims}.sig`;
    return answer;
  });
  c.connectNow();
  const room = c.bird.join("secret:1");
  c.clock.advance(10);
  await settle();
  assert.equal(room.state, "failed");
  assert.equal(room.error.code, "auth_failed");
  assert.deepEqual(c.socket.framesOf("bird:room_join"), []);
});

test('"key": null in an entry means no key (as the Swift client reads it): the room joins unsealed', async () => {
  const c = makeClient({}, (url, body) => {
    const answer = roomAuthAnswer(body);
    for (const name of body.rooms) answer.body.rooms[name].key = null;
    return answer;
  });
  c.connectNow();
  const room = c.bird.join("plain:1");
  c.clock.advance(10);
  await settle();
  assert.equal(room.state, "joining");
  assert.equal(c.socket.framesOf("bird:room_join").length, 1);
});

test("hostile payloads are refused by shape before any work: a nonce not of 24 bytes, a ciphertext over the cap, loose base64", () => {
  const key = fromBase64(unicode.key);
  assert.equal(openPayload({ nonce: "A".repeat(4 << 20), ciphertext: unicode.payload.ciphertext }, key), null);
  assert.equal(openPayload({ nonce: unicode.payload.nonce, ciphertext: "A".repeat(3 << 20) }, key), null);
  assert.deepEqual(fromBase64("QUI="), new Uint8Array([0x41, 0x42]));
  for (const loose of ["QUJ=", "QU I=", "QUI", "QUI==", "Q=UI", "QUI\n"]) assert.equal(fromBase64(loose), null, JSON.stringify(loose));
});

test("a send too large once sealed is refused before sealing", async () => {
  const { room } = await sealedRoom();
  assert.throws(() => room.send("updated", "x".repeat(7700)), (error) => error.code === "bad_request" && /once sealed/.test(error.message));
  room.send("updated", "x".repeat(7000)); // fits sealed
});

test("an event nested past the engine's stack is told as a protocol error, never thrown out of the socket's event; the next one arrives", async () => {
  const c = makeClient();
  const socket = c.connectNow();
  const room = c.bird.join("plain:1");
  const ids = [];
  room.on("updated", (data, meta) => ids.push(meta.id));
  c.clock.advance(10);
  await settle();
  socket.receive("bird:room_event", { event: "joined", data: { epoch: "e1", id: 0 } }, "plain:1");
  const depth = 200_000;
  const inner = '{"event":"updated","meta":{"id":1,"at":1,"from":null},"data":' + "[".repeat(depth) + "]".repeat(depth) + "}";
  assert.doesNotThrow(() => socket.onmessage({ data: JSON.stringify({ event: "bird:room_event", channel: "plain:1", data: inner }) }));
  assert.ok(c.errors.some((error) => error.type === "protocol" && /could not handle/.test(error.message)), JSON.stringify(c.errors));
  socket.receive("bird:room_event", { event: "updated", data: 1, meta: { id: 2, at: 1, from: null } }, "plain:1");
  assert.deepEqual(ids, [2]);
});
