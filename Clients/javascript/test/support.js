// Fakes for the client's seams (STYLE.md: fakes over sleeps): a manual clock, a scripted
// WebSocket, a scripted fetch, and event sources for the browser's reachability events.

import { BirdRealtime, loadRooms } from "../src/realtime.js";

// The rooms code loads on first `join()` in a page; here it is in before any client is made,
// so the machines' rules are tested step by step (the lazy path: integration.test.js, Chromium).
await loadRooms();

/** A clock whose time moves only when the test says so; timers fire in deadline order. */
export class ManualClock {
  constructor(start = 1_000_000) {
    this.time = start;
    this.lastId = 0;
    /** @type {Map<number, { at: number, callback: () => void }>} */
    this.timers = new Map();
  }
  now() { return this.time; }
  setTimeout(callback, delay) {
    this.lastId += 1;
    this.timers.set(this.lastId, { at: this.time + Math.max(0, delay), callback });
    return this.lastId;
  }
  clearTimeout(id) { this.timers.delete(id); }
  /** Moves time forward by `ms`, firing every timer due on the way, each at its own deadline. */
  advance(ms) {
    const target = this.time + ms;
    for (;;) {
      const due = [...this.timers].filter(([, t]) => t.at <= target).sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.time = Math.max(this.time, due[1].at);
      due[1].callback();
    }
    this.time = target;
  }
  /** Moves time forward without firing anything (a frozen tab, a sleeping laptop); `advance(0)` then fires the late timers. */
  freeze(ms) { this.time += ms; }
  /** The deadlines armed, sorted, relative to now. */
  pending() { return [...this.timers.values()].map((t) => t.at - this.time).sort((a, b) => a - b); }
}

/** Makes a fake WebSocket class recording every socket it opened. */
export function fakeWebSocket() {
  const sockets = [];
  class FakeWebSocket {
    constructor(url) {
      this.url = url;
      this.sent = [];
      this.closed = null;
      this.bufferedAmount = 0;
      this.onopen = this.onmessage = this.onclose = this.onerror = null;
      sockets.push(this);
    }
    send(text) { if (this.closed) throw new Error("send on a closed socket"); this.sent.push(text); }
    close(code, reason) { this.closed = { code, reason }; }
    /** The server sends a frame (`data` JSON-encoded as the protocol does). */
    receive(event, data, channel) {
      const frame = { event, data: typeof data === "string" ? data : JSON.stringify(data) };
      if (channel !== undefined) frame.channel = channel;
      this.onmessage?.({ data: JSON.stringify(frame) });
    }
    handshake(socketId = "1.1", activityTimeout = 120) {
      this.receive("bird:connection_established", { socket_id: socketId, activity_timeout: activityTimeout });
    }
    /** The server (or the network) ends the socket. */
    drop(code = 1006, reason = "") { this.onclose?.({ code, reason }); }
    /** Frames the client sent, parsed, with `data` parsed too. */
    frames() { return this.sent.map((text) => { const f = JSON.parse(text); return { ...f, data: JSON.parse(f.data) }; }); }
    framesOf(event) { return this.frames().filter((f) => f.event === event); }
  }
  return { FakeWebSocket, sockets };
}

/** A scripted `fetch`: `answer(url, body, init)` returns `{ status, body }` (or a promise of it). */
export function fakeFetch(answer) {
  const calls = [];
  async function fetch(url, init) {
    const body = init.headers["Content-Type"] === "application/json" ? JSON.parse(init.body) : Object.fromEntries(new URLSearchParams(init.body));
    calls.push({ url, body, headers: init.headers });
    const { status = 200, body: answerBody } = await answer(url, body, init);
    const text = typeof answerBody === "string" ? answerBody : JSON.stringify(answerBody);
    return { ok: status >= 200 && status < 300, status, text: async () => text };
  }
  return { fetch, calls };
}

/** An event source for `online`/`offline` or `visibilitychange`/`resume`. */
export class FakeEvents {
  constructor() { this.listeners = new Map(); this.visibilityState = "visible"; }
  addEventListener(type, listener) { this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]); }
  removeEventListener(type, listener) { this.listeners.set(type, (this.listeners.get(type) ?? []).filter((l) => l !== listener)); }
  dispatch(type) { for (const listener of this.listeners.get(type) ?? []) listener(); }
}

/** Lets pending promise callbacks (fetch answers) run: no time passes. */
export async function settle() {
  // setImmediate in Node; a page has none, and a 0 ms timeout runs after the promise callbacks too.
  const next = globalThis.setImmediate ?? ((/** @type {() => void} */ callback) => setTimeout(callback, 0));
  for (let i = 0; i < 10; i += 1) await new Promise((resolve) => next(resolve));
}

/** Tokens for the rooms a room auth request names; `refuse` maps a room to an error code. */
export function roomAuthAnswer(body, { time = 5_000_000, life = 3_600_000, refuse = {} } = {}) {
  const rooms = {};
  for (const name of body.rooms) rooms[name] = refuse[name] ? { error: refuse[name] } : { token: `token-${name}`, expires: time + life };
  return { status: 200, body: { time, rooms } };
}

/**
 * A client on fakes, not connected yet.
 * @param {object} [options] options merged over the test defaults.
 * @param {(url: string, body: any) => any} [answer] the fake fetch's answers.
 */
export function makeClient(options = {}, answer = (url, body) => roomAuthAnswer(body)) {
  const clock = new ManualClock();
  const { FakeWebSocket, sockets } = fakeWebSocket();
  const { fetch, calls } = fakeFetch(answer);
  const network = new FakeEvents();
  const page = new FakeEvents();
  let draw = 0.5;
  const bird = new BirdRealtime({
    appKey: "app-key", host: "127.0.0.1", port: 6001, autoConnect: false,
    authEndpoint: "/auth", userAuthEndpoint: "/user-auth", roomAuthEndpoint: "/rooms/auth",
    ...options,
    environment: { WebSocket: FakeWebSocket, fetch, clock, random: () => draw, network, page, ...options.environment },
  });
  const states = [];
  const errors = [];
  bird.connection.bind("state_change", (change) => states.push(change.current));
  bird.connection.bind("error", (error) => errors.push(error));
  return {
    bird, clock, sockets, calls, network, page, states, errors,
    setRandom(value) { draw = value; },
    get socket() { return sockets[sockets.length - 1]; },
    /** connect() and answer the handshake. */
    connectNow(socketId = "1.1", activityTimeout = 120) {
      bird.connect();
      sockets[sockets.length - 1].handshake(socketId, activityTimeout);
      return sockets[sockets.length - 1];
    },
  };
}
