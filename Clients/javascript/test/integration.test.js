// Against the real server: `realtime-server` and the sample `room-backend` on free loopback
// ports, the client's socket through a TCP proxy the test cuts. Run with Node's WebSocket:
//   node --experimental-websocket --test test/integration.test.js
// A missing binary (or WebSocket) skips the test, or fails it when CI=true.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, createHmac } from "node:crypto";
import { existsSync } from "node:fs";
import net from "node:net";
import { fileURLToPath } from "node:url";
import { BirdRealtime } from "../src/realtime.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const serverBinary = process.env.REALTIME_SERVER ?? `${root}.build/debug/realtime-server`;
const backendBinary = process.env.ROOM_BACKEND ?? `${root}.build/debug/room-backend`;
const app = { id: "1", key: "app-key", secret: "app-secret" };

function missing() {
  if (!existsSync(serverBinary)) return `realtime-server not found at ${serverBinary} (build it, or set REALTIME_SERVER)`;
  if (!existsSync(backendBinary)) return `room-backend not found at ${backendBinary} (build it, or set ROOM_BACKEND)`;
  if (typeof globalThis.WebSocket !== "function") return "no WebSocket in this Node: run with --experimental-websocket";
  return null;
}
const why = missing();
if (why && process.env.CI === "true") throw new Error(`integration test cannot run: ${why}`);

/** Starts a binary on a free port (it prints "port N"); resolves with the process and port. */
function start(binary, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const timer = setTimeout(() => reject(new Error(`${binary} printed no port: ${output}`)), 10000);
    child.stdout.on("data", (chunk) => {
      output += chunk;
      const match = /port (\d+)/.exec(output);
      if (match) { clearTimeout(timer); resolve({ child, port: Number(match[1]) }); }
    });
    child.stderr.on("data", () => {});
    child.on("error", reject);
  });
}

/** A TCP proxy on loopback whose connections the test cuts, and which can refuse new ones. */
function proxy(target) {
  const sockets = new Set();
  let refusing = false;
  const server = net.createServer((client) => {
    if (refusing) { client.destroy(); return; }
    const upstream = net.connect(target, "127.0.0.1");
    for (const [a, b] of [[client, upstream], [upstream, client]]) {
      sockets.add(a);
      a.on("data", (chunk) => b.write(chunk));
      a.on("close", () => { sockets.delete(a); b.destroy(); });
      a.on("error", () => b.destroy());
    }
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({
    port: /** @type {net.AddressInfo} */ (server.address()).port,
    cut() { refusing = true; for (const socket of sockets) socket.destroy(); },
    reopen() { refusing = false; },
    close() { for (const socket of sockets) socket.destroy(); server.close(); },
  })));
}

/** Pusher's signed REST request (auth_version 1.0), as the server's HTTP API checks it. */
async function publish(port, path, body) {
  const text = JSON.stringify(body);
  const query = `auth_key=${app.key}&auth_timestamp=${Math.floor(Date.now() / 1000)}&auth_version=1.0&body_md5=${createHash("md5").update(text).digest("hex")}`;
  const signature = createHmac("sha256", app.secret).update(`POST\n${path}\n${query}`).digest("hex");
  const response = await fetch(`http://127.0.0.1:${port}${path}?${query}&auth_signature=${signature}`, { method: "POST", body: text, headers: { "Content-Type": "application/json" } });
  assert.equal(response.status, 200, await response.text());
}

/** Resolves when `predicate()` holds, checked on every event the test hears; fails after 10 s. */
function until(predicate, what, hooks) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), 10000);
    hooks.push(() => { if (predicate()) { clearTimeout(timer); resolve(undefined); return true; } return false; });
    hooks.at(-1)?.();
  });
}

test("against realtime-server: a channel event, a room joined with room-backend's token, a cut connection replayed in order", { skip: why ?? false }, async () => {
  const server = await start(serverBinary, ["--port", "0", "--app-id", app.id, "--app-key", app.key, "--app-secret", app.secret, "--memory", "--quiet"]);
  const backend = await start(backendBinary, ["--port", "0", "--app-id", app.id, "--app-key", app.key, "--app-secret", app.secret, "--room", "order:{id},history=20"]);
  const tcp = await proxy(server.port);
  /** @type {(() => boolean)[]} */
  let hooks = [];
  const poke = () => { hooks = hooks.filter((hook) => !hook()); };
  let authRequests = 0;
  const bird = new BirdRealtime({
    appKey: app.key, url: `ws://127.0.0.1:${tcp.port}/app/${app.key}?namespace=bird&client=js&protocol=7`,
    roomAuthEndpoint: `http://127.0.0.1:${backend.port}/rooms/auth`, authHeaders: { "X-User": "ann" },
    environment: { random: () => 0.1, fetch: (url, init) => { authRequests += 1; return fetch(url, init); }, network: null, page: null },
  });
  try {
    const states = [];
    bird.connection.bind("state_change", ({ current }) => { states.push(current); poke(); });
    await until(() => bird.connection.state === "connected", "connected", hooks);
    assert.match(bird.connection.connectionId ?? "", /^\d+\.\d+$/);

    const news = bird.subscribe("news");
    const prices = [];
    news.bind("bird:subscription_succeeded", poke);
    news.bind("price", (data) => { prices.push(data.value); poke(); });
    await until(() => news.subscribed, "the subscription", hooks);
    await publish(server.port, `/apps/${app.id}/events`, { name: "price", channel: "news", data: JSON.stringify({ value: 7 }) });
    await until(() => prices.length === 1, "the channel event", hooks);
    assert.deepEqual(prices, [7]);

    const order = bird.join("order:1042");
    const seen = [];
    order.on("updated", (data, meta) => { seen.push({ n: data.n, id: meta.id, replayed: meta.replayed, from: meta.from }); poke(); });
    order.on("joined", poke);
    await order.ready();
    const room = async (n) => publish(server.port, `/apps/${app.id}/room_events`, { name: "updated", room: "order:1042", data: JSON.stringify({ n }) });
    await room(1);
    await room(2);
    await until(() => seen.length === 2, "two live room events", hooks);
    assert.equal(authRequests, 1, "one auth request for the join");

    tcp.cut();
    await until(() => bird.connection.state !== "connected", "the drop", hooks);
    for (const n of [3, 4, 5]) await room(n);
    tcp.reopen();
    await until(() => seen.length === 5 && bird.connection.state === "connected", "the replay", hooks);
    await room(6);
    await until(() => seen.length === 6, "a live event after the replay", hooks);

    assert.deepEqual(seen.map((event) => event.n), [1, 2, 3, 4, 5, 6], "in order, none twice");
    assert.deepEqual(seen.map((event) => event.replayed), [false, false, true, true, true, false]);
    assert.deepEqual(seen.map((event) => event.id), [1, 2, 3, 4, 5, 6]);
    assert.ok(seen.every((event) => event.from === null), "sent by the app's server");
    assert.equal(authRequests, 1, "the rejoin used the kept token: no auth request");
    assert.ok(states.includes("unavailable") || states.filter((s) => s === "connecting").length > 1);
    await until(() => news.subscribed, "the channel resubscribed", hooks);

    const page = await order.history({ limit: 3 });
    assert.deepEqual(page.events.map((event) => event.data.n), [4, 5, 6]);
    assert.equal(page.more, true);
  } finally {
    bird.disconnect();
    tcp.close();
    server.child.kill();
    backend.child.kill();
  }
});
