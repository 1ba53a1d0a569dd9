import { test } from "node:test";
import assert from "node:assert/strict";
import { PresenceChannel } from "../src/realtime.js";
import { makeClient, settle } from "./support.js";

const channelAuth = (url, body) => {
  if (url === "/user-auth") return { status: 200, body: { auth: `user:${body.socket_id}`, user_data: JSON.stringify({ id: "ann" }) } };
  if (body.channel_name === "private-refused") return { status: 403, body: "no" };
  const answer = { auth: `key:${body.socket_id}:${body.channel_name}` };
  if (body.channel_name.startsWith("presence-")) answer.channel_data = JSON.stringify({ user_id: "ann", user_info: { name: "Ann" } });
  return { status: 200, body: answer };
};

test("a public channel subscribes after the handshake and hears its events", () => {
  const c = makeClient();
  const news = c.bird.subscribe("news");
  assert.equal(c.bird.subscribe("news"), news, "the same object for the same name");
  const events = [];
  news.bind("update", (data) => events.push(data));
  const socket = c.connectNow();
  assert.deepEqual(socket.framesOf("bird:subscribe").map((f) => f.data), [{ channel: "news" }]);
  assert.equal(news.subscribed, false);
  let succeeded = 0;
  news.bind("bird:subscription_succeeded", () => { succeeded += 1; });
  socket.receive("bird_internal:subscription_succeeded", {}, "news");
  assert.equal(news.subscribed, true);
  assert.equal(succeeded, 1);
  socket.receive("update", { price: 3 }, "news");
  socket.receive("update", "not json", "news");
  assert.deepEqual(events, [{ price: 3 }, "not json"]);
});

test("a private channel is authorised for the socket id, and again for each new connection", async () => {
  const c = makeClient({}, channelAuth);
  const channel = c.bird.subscribe("private-orders");
  c.connectNow("1.1");
  await settle();
  assert.deepEqual(c.calls.map((call) => call.body), [{ socket_id: "1.1", channel_name: "private-orders" }]);
  assert.deepEqual(c.socket.framesOf("bird:subscribe").map((f) => f.data), [{ channel: "private-orders", auth: "key:1.1:private-orders" }]);
  c.socket.receive("bird_internal:subscription_succeeded", {}, "private-orders");
  c.socket.drop(1006);
  assert.equal(channel.subscribed, false, "subscriptions belong to the connection");
  c.clock.advance(1000);
  c.socket.handshake("2.2");
  await settle();
  assert.deepEqual(c.calls.at(-1).body, { socket_id: "2.2", channel_name: "private-orders" });
  assert.deepEqual(c.socket.framesOf("bird:subscribe").map((f) => f.data.auth), ["key:2.2:private-orders"]);
});

test("an authorisation answered after the connection changed is discarded", async () => {
  let release;
  const gate = new Promise((resolve) => { release = resolve; });
  const c = makeClient({}, async (url, body) => { if (body.socket_id === "1.1") await gate; return channelAuth(url, body); });
  c.bird.subscribe("private-orders");
  const first = c.connectNow("1.1");
  first.drop(1006);
  c.clock.advance(1000);
  const second = c.socket;
  second.handshake("2.2");
  release();
  await settle();
  assert.deepEqual(first.framesOf("bird:subscribe"), []);
  assert.deepEqual(second.framesOf("bird:subscribe").map((f) => f.data.auth), ["key:2.2:private-orders"]);
});

test("trigger returns false unless connected and subscribed, and sends client events only", () => {
  const c = makeClient({}, channelAuth);
  const channel = c.bird.subscribe("private-chat");
  assert.equal(channel.trigger("client-typing", { on: true }), false, "not connected");
  return (async () => {
    c.connectNow();
    await settle();
    assert.equal(channel.trigger("client-typing", {}), false, "not subscribed yet");
    c.socket.receive("bird_internal:subscription_succeeded", {}, "private-chat");
    assert.equal(channel.trigger("typing", {}), false, "not a client- event");
    assert.equal(channel.trigger("client-typing", { on: true }), true);
    assert.deepEqual(c.socket.framesOf("client-typing"), [{ event: "client-typing", channel: "private-chat", data: { on: true } }]);
    c.socket.drop(1006);
    assert.equal(channel.trigger("client-typing", {}), false, "reconnecting");
    const pub = c.bird.subscribe("news");
    assert.equal(pub.trigger("client-x", {}), false, "public channels take no client events");
  })();
});

test("a refused authorisation arrives as bird:subscription_error on the channel", async () => {
  const c = makeClient({}, channelAuth);
  const channel = c.bird.subscribe("private-refused");
  const errors = [];
  channel.bind("bird:subscription_error", (error) => errors.push(error));
  c.connectNow();
  await settle();
  assert.equal(errors.length, 1);
  assert.equal(errors[0].type, "AuthError");
  assert.equal(errors[0].status, 403);
  assert.equal(c.socket.framesOf("bird:subscribe").length, 0);
});

test("an authorisation that never answers fails the subscription after the auth timeout", async () => {
  const c = makeClient({ authTimeout: 10000 }, () => new Promise(() => {}));
  const channel = c.bird.subscribe("private-slow");
  const errors = [];
  channel.bind("bird:subscription_error", (error) => errors.push(error));
  c.connectNow();
  c.clock.advance(10000);
  assert.equal(errors.length, 1);
  assert.match(errors[0].error, /within 10000 ms/);
});

test("presence: members with count, each, get, me; member_added and member_removed; replaced on resubscription", async () => {
  const c = makeClient({}, channelAuth);
  const room = c.bird.subscribe("presence-room-1");
  assert.ok(room instanceof PresenceChannel);
  let rendered = null;
  room.bind("bird:subscription_succeeded", ({ members }) => { rendered = members; });
  const changes = [];
  room.bind("bird:member_added", (member) => changes.push(["added", member]));
  room.bind("bird:member_removed", (member) => changes.push(["removed", member]));
  c.connectNow();
  await settle();
  assert.equal(JSON.parse(c.socket.framesOf("bird:subscribe")[0].data.channel_data).user_id, "ann");
  c.socket.receive("bird_internal:subscription_succeeded", { presence: { ids: ["ann", "bob"], hash: { ann: { name: "Ann" }, bob: { name: "Bob" } }, count: 2 } }, "presence-room-1");
  assert.deepEqual(rendered, { ann: { name: "Ann" }, bob: { name: "Bob" } }, "the seed's ({ members }) destructuring");
  assert.equal(room.members.count, 2);
  assert.deepEqual(room.members.me, { id: "ann", info: { name: "Ann" } });
  assert.deepEqual(room.members.get("bob"), { id: "bob", info: { name: "Bob" } });
  c.socket.receive("bird_internal:member_added", { user_id: "cid", user_info: { name: "Cid" } }, "presence-room-1");
  c.socket.receive("bird_internal:member_added", { user_id: "cid", user_info: { name: "Cid" } }, "presence-room-1");
  c.socket.receive("bird_internal:member_removed", { user_id: "bob" }, "presence-room-1");
  c.socket.receive("bird_internal:member_removed", { user_id: "nobody" }, "presence-room-1");
  assert.deepEqual(changes, [["added", { id: "cid", info: { name: "Cid" } }], ["removed", { id: "bob", info: { name: "Bob" } }]]);
  const ids = [];
  room.members.each((member) => ids.push(member.id));
  assert.deepEqual(ids, ["ann", "cid"]);
  c.socket.drop(1006);
  assert.equal(room.members.count, 0, "no stale members after a drop");
  c.clock.advance(1000);
  c.socket.handshake("2.2");
  await settle();
  c.socket.receive("bird_internal:subscription_succeeded", { presence: { ids: ["ann"], hash: { ann: {} }, count: 1 } }, "presence-room-1");
  assert.equal(room.members.count, 1);
});

test("client events on a presence channel carry the sender's user_id", () => {
  const c = makeClient();
  const channel = c.bird.subscribe("presence-room-2");
  const seen = [];
  channel.bind("client-wave", (data, meta) => seen.push([data, meta]));
  const socket = c.connectNow();
  socket.onmessage({ data: JSON.stringify({ event: "client-wave", channel: "presence-room-2", data: "{\"x\":1}", user_id: "bob" }) });
  assert.deepEqual(seen, [[{ x: 1 }, { user_id: "bob" }]]);
});

test("an unsubscribed channel is never resubscribed", () => {
  const c = makeClient();
  const news = c.bird.subscribe("news");
  const socket = c.connectNow();
  news.unsubscribe();
  assert.deepEqual(socket.framesOf("bird:unsubscribe").map((f) => f.data), [{ channel: "news" }]);
  assert.equal(c.bird.channel("news"), undefined);
  socket.drop(1006);
  c.clock.advance(1000);
  c.socket.handshake("2.2");
  assert.deepEqual(c.socket.framesOf("bird:subscribe"), []);
});

test("signin() signs in on every connection; failures arrive as signin_error", async () => {
  let refuse = false;
  const c = makeClient({}, (url, body) => (refuse ? { status: 403, body: "no" } : channelAuth(url, body)));
  const failures = [];
  c.bird.connection.bind("signin_error", ({ message }) => failures.push(message));
  c.connectNow("1.1");
  c.bird.signin();
  await settle();
  assert.deepEqual(c.calls.map((call) => [call.url, call.body]), [["/user-auth", { socket_id: "1.1" }]]);
  assert.deepEqual(c.socket.framesOf("bird:signin").map((f) => f.data), [{ auth: "user:1.1", user_data: "{\"id\":\"ann\"}" }]);
  c.socket.receive("bird:signin_success", { user_data: "{\"id\":\"ann\"}" });
  assert.equal(c.bird.connection.userData, "{\"id\":\"ann\"}");
  c.socket.drop(1006);
  c.clock.advance(1000);
  c.socket.handshake("2.2");
  await settle();
  assert.deepEqual(c.socket.framesOf("bird:signin").map((f) => f.data.auth), ["user:2.2"], "signed in again, for the new id");
  c.socket.receive("bird:error", { code: 4009, message: "bad signature" });
  assert.equal(failures.length, 1);
  assert.match(failures[0], /refused the signin/);
  refuse = true;
  c.socket.drop(1006);
  c.clock.advance(2000);
  c.socket.handshake("3.3");
  await settle();
  assert.equal(failures.length, 2);
  assert.match(failures[1], /403/);
});
