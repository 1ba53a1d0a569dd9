import { test } from "node:test";
import assert from "node:assert/strict";
import { BirdRealtime, endpointURL } from "../src/realtime.js";
import { makeClient, settle, fakeWebSocket, ManualClock } from "./support.js";

test("the six states: initialized, connecting until the handshake, connected with an id, disconnected", () => {
  const c = makeClient();
  assert.equal(c.bird.connection.state, "initialized");
  c.bird.connect();
  assert.equal(c.bird.connection.state, "connecting");
  assert.equal(c.bird.connection.connectionId, null);
  c.socket.onopen?.({});
  assert.equal(c.bird.connection.state, "connecting", "an open socket stays connecting until the handshake");
  let idWhenConnected = null;
  c.bird.connection.bind("connected", () => { idWhenConnected = c.bird.connection.connectionId; });
  c.socket.handshake("123.456");
  assert.equal(c.bird.connection.state, "connected");
  assert.equal(idWhenConnected, "123.456", "the id is set before the state becomes connected");
  c.bird.disconnect();
  assert.deepEqual(c.states, ["connecting", "connected", "disconnected"]);
  assert.deepEqual(c.sockets[0].closed, { code: 1000, reason: "disconnect()" });
  assert.equal(c.bird.connection.connectionId, null);
  assert.deepEqual(c.clock.pending(), [], "disconnect() schedules nothing");
});

test("state_change gives { previous, current }, and a state's own name is bindable", () => {
  const c = makeClient();
  const changes = [];
  const unavailable = [];
  c.bird.connection.bind("state_change", ({ previous, current }) => changes.push(`${previous}->${current}`));
  c.bird.connection.bind("unavailable", (change) => unavailable.push(change));
  c.connectNow();
  c.socket.drop(1006);
  assert.deepEqual(changes, ["initialized->connecting", "connecting->connected", "connected->unavailable"]);
  assert.deepEqual(unavailable, [{ previous: "connected", current: "unavailable" }]);
  c.bird.connection.unbind("state_change");
  c.clock.advance(30000);
  assert.equal(changes.length, 3, "unbound");
});

test("the URL names the app, the namespace and the client; a region is a hosted TLS host", () => {
  assert.equal(endpointURL({ appKey: "k", host: "127.0.0.1", port: 6001 }), "ws://127.0.0.1:6001/app/k?namespace=bird&client=js&protocol=7");
  assert.equal(endpointURL({ appKey: "k", region: "us1" }), "wss://ws-us1.realtime.bird.com/app/k?namespace=bird&client=js&protocol=7");
  assert.equal(endpointURL({ appKey: "k", region: "../evil" }), "wss://invalid-region.invalid/app/k?namespace=bird&client=js&protocol=7");
  assert.equal(endpointURL({ appKey: "k", url: "ws://h/app/k" }), "ws://h/app/k");
  assert.equal(endpointURL({ appKey: "k", host: "::1", forceTLS: true }), "wss://[::1]/app/k?namespace=bird&client=js&protocol=7");
});

test("the seed's snippet connects by itself: new BirdRealtime({ appKey, region }) then bind", async () => {
  const { FakeWebSocket, sockets } = fakeWebSocket();
  const bird = new BirdRealtime({ appKey: "your-app-key", region: "us1", environment: { WebSocket: FakeWebSocket, clock: new ManualClock(), network: null, page: null } });
  const seen = [];
  bird.connection.bind("state_change", ({ previous, current }) => seen.push([previous, current]));
  await settle();
  assert.deepEqual(seen, [["initialized", "connecting"]]);
  assert.equal(sockets[0].url, "wss://ws-us1.realtime.bird.com/app/your-app-key?namespace=bird&client=js&protocol=7");
});

test("a drop backs off with full jitter (1 s base, doubling, 30 s cap) in unavailable", () => {
  const c = makeClient();
  c.setRandom(0.5);
  c.connectNow();
  const waits = [];
  for (let i = 0; i < 7; i += 1) {
    c.socket.drop(1006);
    assert.equal(c.bird.connection.state, "unavailable");
    const wait = c.clock.pending().find((d) => d > 100 && d !== 30000) ?? c.clock.pending()[0];
    waits.push(wait);
    const before = c.sockets.length;
    c.clock.advance(wait - 1);
    assert.equal(c.sockets.length, before, "nothing opens before the delay");
    c.clock.advance(1);
    assert.equal(c.sockets.length, before + 1);
    assert.equal(c.bird.connection.state, "connecting");
  }
  assert.deepEqual(waits, [500, 1000, 2000, 4000, 8000, 15000, 15000]);
});

test("the backoff resets after every handshake while the short connection allowance lasts (5, issue 49), then only after a connection that stayed up 5 s", () => {
  const c = makeClient();
  c.setRandom(1);
  c.connectNow();
  // Connections ended at once, one a second: each handshake resets the backoff (the seed),
  // five from the allowance and a sixth from the one that came back in those 5 s.
  for (let i = 0; i < 6; i += 1) {
    c.socket.drop(1006);
    assert.equal(c.clock.pending()[0], 1000, `drop ${i + 1}: the base`);
    c.clock.advance(1000);
    c.socket.handshake(`${i + 2}.${i + 2}`);
  }
  c.socket.drop(1006);           // the allowance spent: retry 1, 2 s
  assert.equal(c.clock.pending()[0], 2000);
  c.clock.advance(2000);
  c.socket.handshake("8.8");
  c.clock.advance(5000);         // up 5 s: healthy
  c.socket.drop(1006);
  assert.equal(c.clock.pending()[0], 1000, "back to the base");
});

test("4000–4099 fail with no retry; connect() after 4009 starts a new connection", () => {
  const c = makeClient();
  c.connectNow();
  c.socket.drop(4009, "member terminated");
  assert.equal(c.bird.connection.state, "failed");
  assert.deepEqual(c.errors.at(-1), { type: "closed", code: 4009, message: "member terminated" });
  assert.deepEqual(c.clock.pending(), []);
  c.clock.advance(120000);
  assert.equal(c.sockets.length, 1, "never retried");
  c.bird.connect();
  assert.equal(c.bird.connection.state, "connecting");
  assert.equal(c.sockets.length, 2);
  c.socket.handshake("9.9");
  assert.equal(c.bird.connection.state, "connected");
});

test("4200–4299 after a healthy connection reconnect at once; after a short one too while the allowance lasts (held to 100 ms after the last start), then on the backoff", () => {
  const c = makeClient();
  c.setRandom(1);
  c.connectNow();
  c.clock.advance(6000);
  c.socket.drop(4200, "restarting");
  assert.equal(c.bird.connection.state, "connecting");
  assert.equal(c.sockets.length, 2, "a new socket at once");
  for (let i = 0; i < 5; i += 1) {
    c.socket.handshake(`${i + 2}.${i + 2}`);
    c.socket.drop(4201);
    assert.equal(c.bird.connection.state, "connecting", "retried at once, held by the floor only");
    assert.deepEqual(c.clock.pending(), [100], `short ${i + 1}: the minimum attempt interval only`);
    c.clock.advance(100);
  }
  c.socket.handshake("8.8");
  c.socket.drop(4201);
  assert.equal(c.bird.connection.state, "unavailable");
  assert.deepEqual(c.clock.pending(), [1000], "a server ending every connection at once is backed off");
});

test("4100–4199, 4300–4399 and network failures back off in unavailable", () => {
  for (const code of [4100, 4301, 1006, 1001]) {
    const c = makeClient();
    c.connectNow();
    c.clock.advance(10000);
    c.socket.drop(code);
    assert.equal(c.bird.connection.state, "unavailable", `code ${code}`);
    assert.equal(c.sockets.length, 1);
  }
});

test("a handshake without a socket id is reported, the socket closed, and the attempt retried on the backoff", () => {
  const c = makeClient();
  c.bird.connect();
  c.socket.receive("bird:connection_established", { activity_timeout: 120 });
  assert.equal(c.errors.at(-1).type, "handshake");
  assert.ok(c.sockets[0].closed);
  assert.equal(c.bird.connection.state, "unavailable");
});

test("an attempt with no handshake within the connect timeout is given up and retried", () => {
  const c = makeClient({ connectTimeout: 30000 });
  c.bird.connect();
  c.clock.advance(30000);
  assert.ok(c.sockets[0].closed);
  assert.equal(c.bird.connection.state, "unavailable");
  assert.match(c.errors.at(-1).message, /connect timeout/);
});

test("frames from an old socket are ignored once a new one is up", () => {
  const c = makeClient();
  const old = c.connectNow("1.1");
  old.drop(1006);
  c.clock.advance(1000);
  c.socket.handshake("2.2");
  old.handshake("1.1");
  old.drop(4009);
  assert.equal(c.bird.connection.state, "connected");
  assert.equal(c.bird.connection.connectionId, "2.2");
});

test("disconnect() keeps channels; connect() resubscribes them", () => {
  const c = makeClient();
  c.connectNow();
  c.bird.subscribe("news");
  c.bird.disconnect();
  c.bird.connect();
  c.socket.handshake("2.2");
  assert.deepEqual(c.socket.framesOf("bird:subscribe").map((f) => f.data), [{ channel: "news" }]);
});

test("a handler that throws is reported through error and the others still run", () => {
  const c = makeClient();
  const after = [];
  c.bird.connection.bind("connected", () => { throw new Error("boom"); });
  c.bird.connection.bind("connected", () => after.push("ran"));
  c.connectNow();
  assert.deepEqual(after, ["ran"]);
  assert.equal(c.errors.at(-1).type, "handler");
  assert.match(c.errors.at(-1).message, /boom/);
  c.bird.connection.bind("error", () => { throw new Error("in error"); });
  c.socket.receive("bird:error", { message: "x", code: 4300 });
  assert.equal(c.bird.connection.state, "connected", "a throwing error handler does not loop");
});

test("server errors not attributed to a channel arrive on the connection as { code, message }", () => {
  const c = makeClient();
  c.connectNow();
  c.socket.receive("bird:error", { message: "over quota", code: 4100 });
  assert.deepEqual(c.errors.at(-1), { type: "server", code: 4100, message: "over quota" });
});

test("a socket whose send buffer is past its bound is dropped and retried", () => {
  const c = makeClient({ maxBufferedAmount: 10 });
  c.connectNow();
  c.socket.bufferedAmount = 11;
  c.socket.receive("bird:ping", {});
  assert.equal(c.bird.connection.state, "unavailable");
  assert.match(c.errors.at(-1).message, /send buffer full/);
});
