import { test } from "node:test";
import assert from "node:assert/strict";
import { RoomError } from "../src/realtime.js";
import { makeClient, roomAuthAnswer, settle } from "./support.js";

/** A client connected, with `name` joined (token asked, join answered with `joined` at `position`). */
async function joinedRoom(name = "order:1042", position = { epoch: "e1", id: 0 }, options = {}) {
  const c = makeClient(options);
  const socket = c.connectNow();
  const room = c.bird.join(name);
  c.clock.advance(10);
  await settle();
  socket.receive("bird:room_event", { event: "joined", data: { ...position, count: 1 } }, name);
  return { c, room, socket };
}

const kept = (socket, room, id, data, extra = {}) =>
  socket.receive("bird:room_event", { event: "updated", data, meta: { id, at: 1700000000000 + id, from: null, ...extra } }, room);

test("join gives the same room for the same name; room(name) the one joined, or null", () => {
  const c = makeClient();
  const order = c.bird.join("order:1042");
  assert.equal(c.bird.join("order:1042"), order);
  assert.equal(c.bird.room("order:1042"), order);
  assert.equal(c.bird.room("order:7"), null);
  assert.equal(order.state, "joining");
});

test("40 rooms joined in one moment are asked for in one auth request, with the options' headers", async () => {
  const c = makeClient({ authHeaders: { "X-User": "ann" } }, (url, body) => roomAuthAnswer(body, { refuse: { "order:13": "forbidden" } }));
  const socket = c.connectNow();
  const rooms = Array.from({ length: 40 }, (_, i) => c.bird.join(`order:${i}`));
  c.clock.advance(10);
  await settle();
  assert.equal(c.calls.length, 1);
  assert.equal(c.calls[0].body.rooms.length, 40);
  assert.equal(c.calls[0].headers["X-User"], "ann");
  const joins = socket.framesOf("bird:room_join");
  assert.equal(joins.length, 39, "every room but the forbidden one joins");
  assert.equal(rooms[13].state, "failed");
  assert.equal(rooms[13].error.code, "forbidden");
  await assert.rejects(rooms[13].ready(), (error) => error instanceof RoomError && error.code === "forbidden");
  assert.equal(rooms[12].state, "joining", "the others are not failed by it");
});

test("more than 100 rooms in one moment are split into requests of at most 100", async () => {
  const c = makeClient();
  c.connectNow();
  for (let i = 0; i < 100; i += 1) c.bird.join(`r:${i}`);
  const extra = c.bird.join("r:100");
  assert.equal(extra.state, "failed", "a client joins at most 100 rooms");
  assert.equal(extra.error.code, "too_many_rooms");
  c.clock.advance(10);
  await settle();
  assert.equal(c.calls.length, 1);
  assert.equal(c.calls[0].body.rooms.length, 100);
});

test("joined: ready() resolves, the room's own event is heard, events arrive with their meta", async () => {
  const c = makeClient();
  const socket = c.connectNow();
  const order = c.bird.join("order:1042");
  const ready = order.ready();
  let live = false;
  order.on("joined", () => { live = true; });
  const updates = [];
  order.on("updated", (data, meta) => updates.push([data.status, meta]));
  c.clock.advance(10);
  await settle();
  assert.deepEqual(socket.framesOf("bird:room_join").map((f) => f.data), [{ room: "order:1042", token: "token-order:1042" }]);
  socket.receive("bird:room_event", { event: "joined", data: { epoch: "e1", id: 41, count: 2 } }, "order:1042");
  await ready;
  assert.equal(live, true);
  assert.equal(order.state, "joined");
  assert.equal(order.count, 2);
  kept(socket, "order:1042", 42, { status: "paid" }, { from: "ann" });
  assert.deepEqual(updates, [["paid", { id: 42, at: 1700000000042, from: "ann", replayed: false, epoch: "e1" }]]);
  assert.deepEqual(order.position, { epoch: "e1", id: 42 });
});

test("duplicates are dropped by id", async () => {
  const { room, socket } = await joinedRoom("order:1", { epoch: "e1", id: 5 });
  const ids = [];
  room.on("updated", (_data, meta) => ids.push(meta.id));
  for (const id of [5, 6, 6, 4, 7, 7]) kept(socket, "order:1", id, {});
  assert.deepEqual(ids, [6, 7]);
});

test("a hole rejoins from the position on the same socket; the replay fills it in order", async () => {
  const { room, socket } = await joinedRoom("order:1", { epoch: "e1", id: 5 });
  const seen = [];
  room.on("updated", (_data, meta) => seen.push([meta.id, meta.replayed]));
  kept(socket, "order:1", 6, {});
  kept(socket, "order:1", 9, {});
  const rejoin = socket.framesOf("bird:room_join").at(-1);
  assert.deepEqual(rejoin.data.since, { epoch: "e1", id: 6 });
  kept(socket, "order:1", 10, {}); // held: the replay brings it
  kept(socket, "order:1", 7, {}, { replayed: true });
  kept(socket, "order:1", 8, {}, { replayed: true });
  kept(socket, "order:1", 9, {}, { replayed: true });
  socket.receive("bird:room_event", { event: "joined", data: { epoch: "e1", id: 9, recovered: true } }, "order:1");
  kept(socket, "order:1", 10, {});
  assert.deepEqual(seen, [[6, false], [7, true], [8, true], [9, true], [10, false]]);
});

test("after a drop the room rejoins with since, the missed events come first with replayed, and no auth request is made", async () => {
  const { c, room, socket } = await joinedRoom("order:1042", { epoch: "e1", id: 41 });
  const seen = [];
  room.on("updated", (data, meta) => seen.push([meta.id, meta.replayed, data.n]));
  kept(socket, "order:1042", 42, { n: 1 });
  socket.drop(1006);
  assert.equal(room.state, "joining");
  c.clock.advance(1000);
  const next = c.socket;
  next.handshake("2.2");
  assert.deepEqual(next.framesOf("bird:room_join").map((f) => f.data), [{ room: "order:1042", token: "token-order:1042", since: { epoch: "e1", id: 42 } }]);
  kept(next, "order:1042", 42, { n: 1 }, { replayed: true });
  kept(next, "order:1042", 43, { n: 2 }, { replayed: true });
  kept(next, "order:1042", 44, { n: 3 }, { replayed: true });
  next.receive("bird:room_event", { event: "joined", data: { epoch: "e1", id: 44, recovered: true } }, "order:1042");
  kept(next, "order:1042", 45, { n: 4 });
  await settle();
  assert.equal(c.calls.length, 1, "the token kept across the drop: no second auth request");
  assert.deepEqual(seen, [[42, false, 1], [43, true, 2], [44, true, 3], [45, false, 4]]);
  assert.equal(room.state, "joined");
});

test("a rejoin whose streamed replay is still coming at its deadline is given more time; one that stops is retried", async () => {
  const { c, room, socket } = await joinedRoom("order:1042", { epoch: "e1", id: 41 });
  const seen = [];
  room.on("updated", (data, meta) => seen.push(meta.id));
  socket.drop(1006);
  c.clock.advance(1000);
  const next = c.socket;
  next.handshake("2.2");
  const joins = () => next.framesOf("bird:room_join").length;
  assert.equal(joins(), 1);
  for (let id = 42; id <= 300; id += 1) kept(next, "order:1042", id, { n: id }, { replayed: true });
  c.clock.advance(10_000);
  await settle();
  assert.equal(joins(), 1, "the replay moved the position: no retry at the deadline");
  assert.equal(room.state, "joining");
  kept(next, "order:1042", 301, { n: 301 }, { replayed: true });
  c.clock.advance(10_000);
  await settle();
  assert.equal(joins(), 1, "it moved again before the next deadline");
  c.clock.advance(10_000);
  c.clock.advance(5_000);
  await settle();
  assert.ok(joins() >= 2, "no progress since the last deadline: retried from the position");
  assert.deepEqual(next.framesOf("bird:room_join")[1].data.since, { epoch: "e1", id: 301 });
  assert.equal(seen.length, 260);
});

test("an unrecoverable gap is told on the room as error not_recovered, never silently", async () => {
  const { c, room, socket } = await joinedRoom("order:1", { epoch: "e1", id: 10 });
  const errors = [];
  room.on("error", (error) => errors.push(error));
  socket.drop(1006);
  c.clock.advance(1000);
  c.socket.handshake("2.2");
  c.socket.receive("bird:room_event", { event: "joined", data: { epoch: "e2", id: 3, recovered: false, reason: "epoch_changed" } }, "order:1");
  assert.equal(errors.length, 1);
  assert.equal(errors[0].code, "not_recovered");
  assert.equal(errors[0].reason, "epoch_changed");
  assert.deepEqual(room.position, { epoch: "e2", id: 3 }, "the position is the room's now");
});

/** A room joined at `position`, dropped, and its rejoin sent on a new socket: what the server answers comes next. */
async function rejoining(position) {
  const { c, room, socket } = await joinedRoom("order:1", position);
  const seen = [];
  room.onAny((event, data, meta) => seen.push(event === "updated" ? [meta.id, meta.replayed, meta.epoch, data.n] : [event, data.gap ?? data.reason ?? null]));
  socket.drop(1006);
  c.clock.advance(1000);
  c.socket.handshake("2.2");
  return { c, room, seen, next: c.socket };
}

test("a gap before the replay: told once on the room with its exact ids, the position moved past it, the kept events in order after it", async () => {
  const { c, room, seen, next } = await rejoining({ epoch: "e1", id: 10 });
  next.receive("bird:room_event", { event: "gap", data: { reason: "expired", epoch: "e1", first: 11, last: 14, before: 1700000000015 } }, "order:1");
  assert.deepEqual(room.position, { epoch: "e1", id: 14 });
  for (const id of [15, 16]) kept(next, "order:1", id, { n: id }, { replayed: true });
  next.receive("bird:room_event", { event: "joined", data: { epoch: "e1", id: 16, recovered: false, reason: "expired" } }, "order:1");
  kept(next, "order:1", 17, { n: 17 });
  await settle();
  const gap = { reason: "expired", epoch: "e1", first: 11, last: 14, before: 1700000000015 };
  assert.deepEqual(seen.filter(([event]) => event !== "joined"),
    [["error", gap], [15, true, "e1", 15], [16, true, "e1", 16], [17, false, "e1", 17]], "the gap told once, then every kept event once, in order");
  assert.equal(room.error.code, "not_recovered");
  assert.deepEqual(room.error.gap, gap);
  assert.match(room.error.message, /ids 11…14 of epoch e1/);
  assert.equal(c.socket.framesOf("bird:room_join").length, 1, "no rejoin for a hole");
});

test("after a gap, a joined past where the replay reached is a hole: rejoined from the position, never a silent skip", async () => {
  const { c, room, seen, next } = await rejoining({ epoch: "e1", id: 10 });
  next.receive("bird:room_event", { event: "gap", data: { reason: "expired", epoch: "e1", first: 11, last: 14 } }, "order:1");
  kept(next, "order:1", 15, { n: 15 }, { replayed: true });
  next.receive("bird:room_event", { event: "joined", data: { epoch: "e1", id: 20, recovered: false, reason: "expired" } }, "order:1");
  await settle();
  assert.deepEqual(c.socket.framesOf("bird:room_join").map((f) => f.data.since), [{ epoch: "e1", id: 10 }, { epoch: "e1", id: 15 }], "rejoined from 15");
  assert.deepEqual(room.position, { epoch: "e1", id: 15 });
  assert.equal(seen.filter(([event]) => event === "error").length, 1, "the gap told once; the hole is not a loss yet");
});

test("an epoch change: the gap names the lost epoch, and every event of the new one is delivered, ids from 1, never dropped as duplicates", async () => {
  const { room, seen, next } = await rejoining({ epoch: "e1", id: 10 });
  const gap = { reason: "epoch_changed", epoch: "e2", before: 1700000000001, previous: { epoch: "e1", id: 10 } };
  next.receive("bird:room_event", { event: "gap", data: gap }, "order:1");
  assert.deepEqual(room.position, { epoch: "e2", id: 0 });
  for (const id of [1, 2, 3]) kept(next, "order:1", id, { n: id }, { replayed: true });
  next.receive("bird:room_event", { event: "joined", data: { epoch: "e2", id: 3, recovered: false, reason: "epoch_changed" } }, "order:1");
  await settle();
  assert.deepEqual(seen.filter(([event]) => event !== "joined"), [["error", gap], [1, true, "e2", 1], [2, true, "e2", 2], [3, true, "e2", 3]]);
  assert.deepEqual(room.position, { epoch: "e2", id: 3 });
});

test("a gap with no rejoin asked, behind the position, or not of its shape is ignored and reported", async () => {
  const { c, room, socket } = await joinedRoom("order:1", { epoch: "e1", id: 10 });
  const errors = [];
  c.bird.connection.bind("error", (error) => errors.push(error.message));
  socket.receive("bird:room_event", { event: "gap", data: { reason: "expired", epoch: "e1", first: 11, last: 90 } }, "order:1");
  assert.deepEqual(room.position, { epoch: "e1", id: 10 }, "no join in flight: nothing moves");
  socket.drop(1006);
  c.clock.advance(1000);
  c.socket.handshake("2.2");
  for (const data of [{ reason: "expired", epoch: "e1", first: 3, last: 5 }, { reason: "expired", epoch: "e1", first: 12 }, { reason: "expired", epoch: "" },
    { reason: "expired", epoch: "e1", first: 12, last: 11 }, { reason: "expired", epoch: "e1", previous: { epoch: 3, id: 1 } },
    { reason: "expired", epoch: "e1", first: 12, last: 20 }, { reason: "epoch_changed", epoch: "e2", first: 5, last: 9, previous: { epoch: "e1", id: 10 } },
    { reason: "epoch_changed", epoch: "e2", previous: { epoch: "e1", id: 9 } }, { reason: "epoch_changed", epoch: "e2" }]) {
    c.socket.receive("bird:room_event", { event: "gap", data }, "order:1");
  }
  assert.deepEqual(room.position, { epoch: "e1", id: 10 });
  assert.equal(room.error, null);
  assert.equal(errors.filter((message) => message.startsWith("a gap for order:1")).length, 10, errors.join("\n"));
});

test("a replay that keeps stopping short is rejoined at most 3 times, then the gap is told and events flow", async () => {
  const { room, socket } = await joinedRoom("order:1", { epoch: "e1", id: 1 });
  const errors = [];
  const ids = [];
  room.on("error", (error) => errors.push(error.code));
  room.on("updated", (_data, meta) => ids.push(meta.id));
  kept(socket, "order:1", 3, {});
  for (let i = 0; i < 3; i += 1) socket.receive("bird:room_event", { event: "joined", data: { epoch: "e1", id: 3 } }, "order:1");
  assert.equal(socket.framesOf("bird:room_join").length, 4, "the first join and 3 rejoins, no more");
  assert.deepEqual(errors, ["not_recovered"]);
  assert.deepEqual(room.position, { epoch: "e1", id: 3 });
  kept(socket, "order:1", 4, {});
  assert.deepEqual(ids, [4], "events flow again");
});

test("tokens are kept until 10 minutes before they expire in the server's time, then asked for again", async () => {
  // The server's clock is far from the client's: only the difference counts.
  const c = makeClient({}, (url, body) => roomAuthAnswer(body, { time: 42, life: 3_600_000 }));
  const socket = c.connectNow("1.1", 86400); // no pings in the way for an hour
  const room = c.bird.join("order:1");
  c.clock.advance(10);
  await settle();
  socket.receive("bird:room_event", { event: "joined", data: { epoch: "e1", id: 0 } }, "order:1");
  assert.equal(c.calls.length, 1);
  c.clock.advance(50 * 60000 - 1); // 50 minutes after the answer, less 1 ms
  await settle();
  assert.equal(c.calls.length, 1, "still kept 1 ms before 50 minutes");
  c.clock.advance(1);
  c.clock.advance(10);              // the batching window
  await settle();
  assert.equal(c.calls.length, 2, "asked again 10 minutes before expiry");
  assert.deepEqual(socket.framesOf("bird:room_refresh").map((f) => f.data), [{ room: "order:1", token: "token-order:1" }]);
  assert.equal(room.state, "joined");
});

test("a reconnect after the token's keep time asks the auth route again", async () => {
  const { c } = await joinedRoom("order:1", { epoch: "e1", id: 0 });
  c.bird.disconnect();
  assert.deepEqual(c.clock.pending(), [], "disconnect() leaves nothing scheduled, joined rooms included");
  c.clock.advance(51 * 60000);
  c.bird.connect();
  c.socket.handshake("2.2");
  c.clock.advance(10);
  await settle();
  assert.equal(c.calls.length, 2);
});

test("public rooms join with the grants of config(), with no auth request", async () => {
  const c = makeClient({ grants: { time: 0, grants: [{ pattern: "news:{topic}", token: "grant-news", expires: 86_400_000 }] } });
  const socket = c.connectNow();
  c.bird.join("news:sport");
  c.clock.advance(10);
  await settle();
  assert.equal(c.calls.length, 0);
  assert.deepEqual(socket.framesOf("bird:room_join").map((f) => f.data), [{ room: "news:sport", token: "grant-news" }]);
});

test("auth route failures: 401 asked once more, 403 fails every room of the request, 500 retried then failed", async () => {
  let statuses = [401, 401];
  const c = makeClient({}, () => ({ status: statuses.shift() ?? 500, body: "x" }));
  c.connectNow();
  const a = c.bird.join("a:1");
  c.clock.advance(10);
  await settle();
  await settle();
  assert.equal(c.calls.length, 2);
  assert.equal(a.error.code, "unauthorized");
  statuses = [403];
  const b = c.bird.join("b:1");
  const d = c.bird.join("d:1");
  c.clock.advance(10);
  await settle();
  assert.equal(b.error.code, "forbidden");
  assert.equal(d.error.code, "forbidden");
  const e = c.bird.join("e:1");
  c.clock.advance(10);
  await settle();
  for (const wait of [1000, 2000, 4000, 8000]) { c.clock.advance(wait); await settle(); }
  assert.equal(e.error.code, "auth_failed");
  assert.equal(c.calls.length, 2 + 1 + 5, "two 401s, one 403, five tries of the 500");
});

test("join refusals: expired asks for one new token, rate_limited retries, forbidden ends the room", async () => {
  const { c, room, socket } = await joinedRoom("order:1", { epoch: "e1", id: 0 });
  void room;
  const other = c.bird.join("order:2");
  c.clock.advance(10);
  await settle();
  socket.receive("bird:room_event", { event: "error", data: { code: "rate_limited", message: "slow down" } }, "order:2");
  assert.equal(other.state, "joining");
  c.clock.advance(2000);
  assert.equal(socket.framesOf("bird:room_join").filter((f) => f.data.room === "order:2").length, 2);
  socket.receive("bird:room_event", { event: "error", data: { code: "full", message: "full" } }, "order:2");
  assert.equal(other.state, "failed");
  assert.equal(other.error.code, "full");
});

test("kicked ends the room", async () => {
  const { room, socket } = await joinedRoom();
  const heard = [];
  room.on("kicked", (data) => heard.push(data));
  socket.receive("bird:room_event", { event: "kicked", data: { reason: "bye" } }, "order:1042");
  assert.deepEqual(heard, [{ reason: "bye" }]);
  assert.equal(room.state, "failed");
  assert.equal(room.error.code, "kicked");
});

test("presence rooms list members from joined, join and leave", async () => {
  const c = makeClient();
  const socket = c.connectNow();
  const room = c.bird.join("chat:1");
  c.clock.advance(10);
  await settle();
  socket.receive("bird:room_event", { event: "joined", data: { epoch: "e", id: 0, count: 2, members: [{ id: "ann" }, { id: "bob", info: { name: "Bob" } }] } }, "chat:1");
  socket.receive("bird:room_event", { event: "join", data: { id: "cid" } }, "chat:1");
  socket.receive("bird:room_event", { event: "leave", data: { id: "ann" } }, "chat:1");
  socket.receive("bird:room_event", { event: "count", data: { n: 2 } }, "chat:1");
  assert.deepEqual(room.members.map((m) => m.id), ["bob", "cid"]);
  assert.equal(room.count, 2);
});

test("send only while joined; reserved names refused; the frame carries the data as JSON text", async () => {
  const c = makeClient();
  const socket = c.connectNow();
  const room = c.bird.join("chat:1");
  assert.throws(() => room.send("message", { text: "hi" }), (error) => error.code === "not_joined");
  c.clock.advance(10);
  await settle();
  socket.receive("bird:room_event", { event: "joined", data: { epoch: "e", id: 0 } }, "chat:1");
  assert.throws(() => room.send("joined", {}), (error) => error.code === "not_allowed");
  room.send("message", { text: "hi", blob: new Uint8Array([1, 2]) });
  assert.deepEqual(socket.framesOf("bird:room_send").map((f) => f.data), [{ room: "chat:1", event: "message", data: "{\"text\":\"hi\",\"blob\":{\"$binary\":\"AQI=\"}}" }]);
});

test("history pages are asked for and answered; a drop fails the request in flight", async () => {
  const { c, room, socket } = await joinedRoom("chat:1", { epoch: "e", id: 3 });
  const page = room.history({ limit: 2 });
  await settle();
  const request = socket.framesOf("bird:room_history")[0].data;
  assert.deepEqual(request, { room: "chat:1", request: request.request, limit: 2 });
  socket.receive("bird:room_history", { request: request.request, more: true,
    events: [{ event: "line", data: { t: "a" }, meta: { id: 2, at: 5, from: "ann" } }, { event: "line", data: { t: "b" }, meta: { id: 3, at: 6, from: null } }] }, "chat:1");
  const answer = await page;
  assert.equal(answer.more, true);
  assert.deepEqual(answer.events.map((e) => [e.event, e.data.t, e.meta.id, e.meta.from]), [["line", "a", 2, "ann"], ["line", "b", 3, null]]);
  const older = room.history({ before: 2, limit: 50 });
  await settle();
  socket.drop(1006);
  await assert.rejects(older, (error) => error.code === "disconnected");
  void c;
});

test("leave sends room_leave, forgets the room, and ready() rejects with left", async () => {
  const { c, room, socket } = await joinedRoom();
  room.leave();
  assert.deepEqual(socket.framesOf("bird:room_leave").map((f) => f.data), [{ room: "order:1042" }]);
  assert.equal(room.state, "left");
  assert.equal(c.bird.room("order:1042"), null);
  await assert.rejects(room.ready(), (error) => error.code === "left");
  kept(socket, "order:1042", 1, {});
  socket.drop(1006);
  c.clock.advance(1000);
  c.socket.handshake("2.2");
  assert.equal(c.socket.framesOf("bird:room_join").length, 0, "never rejoined");
});

test("events() is an async sequence of { data, meta }; leaving the loop removes its handler", async () => {
  const { room, socket } = await joinedRoom("order:1", { epoch: "e", id: 0 });
  const seen = [];
  const loop = (async () => {
    for await (const { data, meta } of room.events("updated")) {
      seen.push([data.status, meta.id]);
      if (seen.length === 2) break;
    }
  })();
  kept(socket, "order:1", 1, { status: "paid" });
  kept(socket, "order:1", 2, { status: "sent" });
  await loop;
  assert.deepEqual(seen, [["paid", 1], ["sent", 2]]);
  kept(socket, "order:1", 3, { status: "late" });
  assert.equal(room.listeners.length, 0);
});

test("events() holds a bounded buffer: an event past it is reported, never silently dropped", async () => {
  const { c, room, socket } = await joinedRoom("order:1", { epoch: "e", id: 0 });
  const sequence = room.events("updated", { limit: 2 });
  for (let id = 1; id <= 3; id += 1) kept(socket, "order:1", id, { id });
  assert.match(c.errors.at(-1).message, /event 3 \(updated\) not added/);
  assert.deepEqual((await sequence.next()).value.meta.id, 1);
  assert.deepEqual((await sequence.next()).value.meta.id, 2);
  await sequence.return?.();
});

test("a room handler that throws is reported and the next handlers still run", async () => {
  const { c, room, socket } = await joinedRoom("order:1", { epoch: "e", id: 0 });
  const ran = [];
  room.on("updated", () => { throw new Error("bad handler"); });
  room.onAny((event) => ran.push(event));
  kept(socket, "order:1", 1, {});
  assert.deepEqual(ran, ["updated"]);
  assert.match(c.errors.at(-1).message, /bad handler/);
  const off = room.onAny(() => ran.push("second"));
  room.off(off);
  kept(socket, "order:1", 2, {});
  assert.deepEqual(ran, ["updated", "updated"]);
});

test("ready() rejects with disconnected when the connection fails (4001) or disconnect() is called, instead of waiting forever; the room joins after connect()", { timeout: 5000 }, async () => {
  const c = makeClient();
  const socket = c.connectNow();
  const room = c.bird.join("order:1");
  const failed = room.ready().then(() => "joined", (error) => error.code);
  socket.drop(4001, "no such app");
  assert.equal(await failed, "disconnected");
  assert.equal(c.bird.connection.state, "failed");
  assert.equal(room.state, "joining", "not failed: connect() joins it");
  assert.equal(await room.ready().then(() => "joined", (error) => error.code), "disconnected", "asked after the failure: answered at once");
  c.bird.connect();
  const stopped = room.ready().then(() => "joined", (error) => error.code);
  c.bird.disconnect();
  assert.equal(await stopped, "disconnected");
  assert.equal(await room.ready().then(() => "joined", (error) => error.code), "disconnected", "asked after disconnect(): answered at once");
  const next = c.connectNow("2.2");
  c.clock.advance(10);
  await settle();
  const ready = room.ready();
  next.receive("bird:room_event", { event: "joined", data: { epoch: "e1", id: 0 } }, "order:1");
  await ready;
  assert.equal(room.state, "joined");
});
