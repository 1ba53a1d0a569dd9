import { test } from "node:test";
import assert from "node:assert/strict";
import { makeClient } from "./support.js";

const pings = (socket) => socket.framesOf("bird:ping").length;

test("the activity timeout comes from the handshake: a ping after that much silence", () => {
  const c = makeClient();
  const socket = c.connectNow("1.1", 30);
  c.clock.advance(29999);
  assert.equal(pings(socket), 0);
  c.clock.advance(1);
  assert.equal(pings(socket), 1);
});

test("without activity_timeout in the handshake the default is 120 s; a silly value is clamped to 1 s", () => {
  const c = makeClient();
  c.bird.connect();
  c.socket.receive("bird:connection_established", { socket_id: "1.1" });
  c.clock.advance(119999);
  assert.equal(pings(c.socket), 0);
  c.clock.advance(1);
  assert.equal(pings(c.socket), 1);
  const d = makeClient();
  d.bird.connect();
  d.socket.receive("bird:connection_established", { socket_id: "1.1", activity_timeout: 1e-300 });
  d.clock.advance(999);
  assert.equal(pings(d.socket), 0);
  d.clock.advance(1);
  assert.equal(pings(d.socket), 1);
});

test("frames push the ping back: the check re-arms for the rest of the timeout", () => {
  const c = makeClient();
  const socket = c.connectNow("1.1", 30);
  c.clock.advance(20000);
  socket.receive("news-event", {}, "news");
  c.clock.advance(10000);
  assert.equal(pings(socket), 0);
  c.clock.advance(20000);
  assert.equal(pings(socket), 1);
});

test("no pong within the pong timeout: reported, closed with 4201, retried at once after a healthy connection", () => {
  const c = makeClient({ pongTimeout: 30000 });
  const socket = c.connectNow("1.1", 30);
  c.clock.advance(30000);
  assert.equal(pings(socket), 1);
  c.clock.advance(29999);
  assert.equal(c.bird.connection.state, "connected");
  c.clock.advance(1);
  assert.deepEqual(socket.closed, { code: 4201, reason: "pong not received" });
  assert.deepEqual(c.errors.at(-1), { type: "pong_timeout", code: 4201, message: "no pong within the pong timeout" });
  assert.equal(c.bird.connection.state, "connecting");
  assert.equal(c.sockets.length, 2);
});

test("a pong (any frame) within the deadline keeps the connection", () => {
  const c = makeClient();
  const socket = c.connectNow("1.1", 30);
  c.clock.advance(30000);
  socket.receive("bird:pong", {});
  c.clock.advance(29999);
  assert.equal(c.bird.connection.state, "connected");
  assert.equal(socket.closed, null);
});

test("the server's ping is answered with a pong", () => {
  const c = makeClient();
  const socket = c.connectNow();
  socket.receive("bird:ping", {});
  assert.equal(socket.framesOf("bird:pong").length, 1);
});

test("the old connection's pong deadline cannot end the new one", () => {
  const c = makeClient();
  const old = c.connectNow("1.1", 30);
  c.clock.advance(30000); // ping out, deadline in 30 s
  old.drop(1006);
  c.clock.advance(1000);
  c.socket.handshake("2.2", 120);
  c.clock.advance(40000);
  assert.equal(c.bird.connection.state, "connected");
  assert.equal(c.socket.closed, null);
});

test("offline: the connection is verified at once with a 1 s pong deadline; no answer backs off", () => {
  const c = makeClient();
  const socket = c.connectNow();
  c.clock.advance(10000);
  c.network.dispatch("offline");
  assert.equal(pings(socket), 1);
  c.clock.advance(1000);
  assert.equal(socket.closed?.code, 4201);
  assert.equal(c.bird.connection.state, "unavailable", "the network is gone: wait, do not retry at once");
});

test("offline, then an answer in time: still connected", () => {
  const c = makeClient();
  const socket = c.connectNow();
  c.network.dispatch("offline");
  socket.receive("bird:pong", {});
  c.clock.advance(5000);
  assert.equal(c.bird.connection.state, "connected");
});

test("online while waiting on the backoff: a new attempt at once, without waiting for the timer", () => {
  const c = makeClient();
  c.setRandom(1);
  c.connectNow();
  for (let i = 0; i < 5; i += 1) { c.socket.drop(1006); c.clock.advance(c.clock.pending()[0]); }
  c.socket.drop(1006);
  assert.equal(c.bird.connection.state, "unavailable");
  assert.equal(c.clock.pending()[0], 30000);
  const before = c.sockets.length;
  c.network.dispatch("online");
  assert.equal(c.sockets.length, before + 1);
  assert.equal(c.bird.connection.state, "connecting");
  c.socket.handshake("7.7");
  assert.equal(c.bird.connection.state, "connected");
});

test("online while an attempt hangs: it is replaced by a new one", () => {
  const c = makeClient();
  c.bird.connect();
  c.network.dispatch("online");
  assert.ok(c.sockets[0].closed);
  assert.equal(c.sockets.length, 2);
});

test("a page made visible, or resumed, verifies the connection at once", () => {
  const c = makeClient();
  const socket = c.connectNow();
  c.page.visibilityState = "hidden";
  c.page.dispatch("visibilitychange");
  assert.equal(pings(socket), 0, "hidden: nothing");
  c.page.visibilityState = "visible";
  c.page.dispatch("visibilitychange");
  assert.equal(pings(socket), 1);
  c.clock.advance(1000);
  assert.equal(socket.closed?.code, 4201, "dead after the freeze: replaced");
  const d = makeClient();
  const other = d.connectNow();
  d.page.dispatch("resume");
  assert.equal(pings(other), 1);
});

test("a page resumed while waiting on the backoff retries at once", () => {
  const c = makeClient();
  c.connectNow();
  c.socket.drop(1006);
  c.page.dispatch("visibilitychange");
  assert.equal(c.sockets.length, 2);
});

test("a timer firing far too late (a frozen tab) verifies the connection at once", () => {
  const c = makeClient();
  const socket = c.connectNow("1.1", 120);
  c.clock.advance(60000);
  c.clock.freeze(300000);      // the tab slept past the activity check
  c.clock.advance(0);          // the late check fires
  assert.ok(pings(socket) >= 1);
  assert.deepEqual(c.clock.pending()[0], 1000, "the short pong deadline, not 30 s");
  c.clock.advance(1000);
  assert.equal(socket.closed?.code, 4201);
});
