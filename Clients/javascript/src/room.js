// The room objects the app holds (rooms seed, "Joining"): `bird.join(name)` gives the same
// room for the same name until it is left. The client keeps each room's position and token
// across drops: after a reconnect the events missed come first, in order, with
// `meta.replayed`, then the live ones; none twice (docs/rooms-protocol.md "Replay").

/** @typedef {import("./actions.js").RoomEventMeta} RoomEventMeta */
/** @typedef {import("./actions.js").RoomErrorInfo} RoomErrorInfo */
/** @typedef {import("./actions.js").HistoryPage} HistoryPage */

/** An error of a room (`ready()`, `send`, `history`): `code` is docs/rooms-protocol.md's, or the client's own. */
export class RoomError extends Error {
  /** @param {RoomErrorInfo} info the code, message and reason. */
  constructor(info) {
    super(info.message);
    this.name = "RoomError";
    /** The code (`forbidden`, `no_rule`, `full`, `expired`, `kicked`, `left`, `not_joined`, `not_recovered` …). */
    this.code = info.code;
    /** Why events were not recovered, for `not_recovered`. */
    this.reason = info.reason;
  }
}

/**
 * What a room needs from its client.
 * @typedef {object} RoomParts
 * @property {() => import("./room-machine.js").RoomRecord | undefined} record the room's record on the machine.
 * @property {() => boolean} isCurrent the room has not been left.
 * @property {() => void} leave leaves the room.
 * @property {(event: string, data: unknown) => RoomErrorInfo | null} send sends an event.
 * @property {(before: number | undefined, limit: number) => Promise<HistoryPage>} history asks for a page.
 * @property {(error: unknown, event: string) => void} onHandlerError told when a handler throws.
 * @property {(message: string) => void} report told when an event does not fit a sequence's buffer.
 * @property {() => RoomErrorInfo | null} stalled why nothing joins until `connect()` (failed, disconnected), or `null`.
 */

/**
 * A room handler: `(data, meta)`; `onAny` handlers get `(event, data, meta)`.
 * @typedef {{ event: string | null, handler: Function }} RoomListener
 */

/** The most events one `events()` sequence holds for a consumer that falls behind, by default. */
export const DEFAULT_EVENT_BUFFER = 1000;

export class Room {
  /**
   * @param {string} name the room name.
   * @param {RoomParts} parts what it needs from its client.
   */
  constructor(name, parts) {
    /** The room name (`order:1042`). */
    this.name = name;
    /** @private */
    this.parts = parts;
    /** @private @type {RoomListener[]} */
    this.listeners = [];
    /** @private @type {{ resolve: () => void, reject: (error: RoomError) => void }[]} */
    this.waiters = [];
  }

  /** @returns {"joining" | "joined" | "failed" | "left"} where the room stands (rooms seed: `.joining, .joined, .failed, .left`). */
  get state() { return this.parts.isCurrent() ? (this.parts.record()?.phase.kind ?? "left") : "left"; }

  /** @returns {RoomErrorInfo | null} why it failed, or the last gap it reported. */
  get error() { return this.parts.isCurrent() ? (this.parts.record()?.error ?? null) : { code: "left", message: "the room was left" }; }

  /** @returns {{ epoch: string, id: number } | null} the epoch and last kept event delivered. */
  get position() { const position = this.parts.record()?.position; return position ? { ...position } : null; }

  /** @returns {{ id: string, info: unknown }[]} a presence room's members, sorted by id. */
  get members() {
    return [...(this.parts.record()?.members ?? [])].map(([id, info]) => ({ id, info })).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** @returns {number | null} the room's users, from `joined` and `count`. */
  get count() { return this.parts.record()?.count ?? null; }

  /**
   * Calls `handler(data, meta)` for every `event` of the room, in order. The room's own
   * events are heard by name too: `joined` (`{epoch, id, count, members?, recovered?}`),
   * `join` / `leave` (`{id, info?}`), `count` (`{n}`), `error` (`{code, message}`), `kicked`.
   * @param {string} event the event name.
   * @param {(data: any, meta: RoomEventMeta) => void} handler the handler.
   * @returns {RoomListener} the listener, for `off`.
   */
  on(event, handler) { return this.add(event, handler); }

  /**
   * Calls `handler(event, data, meta)` for every event of the room, after that event's own handlers.
   * @param {(event: string, data: any, meta: RoomEventMeta) => void} handler the handler.
   * @returns {RoomListener} the listener, for `off`.
   */
  onAny(handler) { return this.add(null, handler); }

  /**
   * Removes a handler: the listener `on`/`onAny` returned, or the function itself (every registration of it).
   * @param {RoomListener | Function} listener what to remove.
   */
  off(listener) { this.listeners = this.listeners.filter((item) => item !== listener && item.handler !== listener); }

  /**
   * Waits until the room is joined (rooms seed: "waits until joined, throws its error").
   * @returns {Promise<void>} resolved when joined.
   * @throws {RoomError} the room's error when it fails (`forbidden`, `no_rule`, `full`, `kicked` …), `left` when left.
   */
  ready() {
    switch (this.state) {
      case "joined": return Promise.resolve();
      case "left": return Promise.reject(new RoomError({ code: "left", message: "the room was left" }));
      case "failed": return Promise.reject(new RoomError(this.error ?? { code: "unknown", message: "failed" }));
      default: {
        // Nothing will join until the app calls connect(): answered now, not left waiting.
        const stalled = this.parts.stalled();
        if (stalled) return Promise.reject(new RoomError(stalled));
        return new Promise((resolve, reject) => { this.waiters.push({ resolve, reject }); });
      }
    }
  }

  /** Leaves the room: `room_leave` is sent, it is never rejoined, `bird.room(name)` is `null`. */
  leave() { if (this.parts.isCurrent()) this.parts.leave(); }

  /**
   * Sends an event into the room (where its rule lets members send). The server keeps it and
   * sends it to every member, this page included; a refusal arrives as an `error` event.
   * @param {string} event the event name: 1…200 bytes, none of the room's own names.
   * @param {unknown} data the data (JSON; `Uint8Array` values travel as `{"$binary"}`), at most 10 KiB.
   * @throws {RoomError} `not_joined` (not joined now), `not_allowed` (a reserved name), `bad_request` (too large), `left`.
   */
  send(event, data) {
    if (!this.parts.isCurrent()) throw new RoomError({ code: "left", message: "the room was left" });
    const error = this.parts.send(event, data);
    if (error) throw new RoomError(error);
  }

  /**
   * A page of the room's history (rooms seed, "Paging back"): the newest `limit` events before
   * `before`, oldest first. Waits until the room is joined.
   * @param {{ before?: number, limit?: number }} [options] `before`: an event id (`page.events[0].meta.id`); `limit`: 1…100 (50).
   * @returns {Promise<HistoryPage>} the page; `more` when older events are kept.
   * @throws {RoomError} `no_history`, `bad_request`, `disconnected`, `timed_out`, the room's error.
   */
  async history(options = {}) {
    const { before, limit = 50 } = options;
    await this.ready();
    return this.parts.history(before, limit);
  }

  /**
   * Every `event` of the room from now on, as an async iterable of `{ data, meta }` (rooms seed:
   * `for await (const { data, meta } of room.events("updated"))`). Leaving the loop removes its
   * handler. It holds at most `limit` events for a consumer that falls behind; an event that
   * does not fit is reported through the connection's `error`, never dropped silently.
   * @param {string} event the event name.
   * @param {{ limit?: number }} [options] the buffer's bound (1000).
   * @returns {AsyncIterableIterator<{ data: any, meta: RoomEventMeta }>} the events.
   */
  events(event, options = {}) {
    const limit = options.limit ?? DEFAULT_EVENT_BUFFER;
    /** @type {{ data: any, meta: RoomEventMeta }[]} */
    const buffer = [];
    /** @type {((result: IteratorResult<{ data: any, meta: RoomEventMeta }>) => void) | null} */
    let waiting = null;
    let done = false;
    const listener = this.on(event, (data, meta) => {
      if (waiting) { const resolve = waiting; waiting = null; resolve({ value: { data, meta }, done: false }); return; }
      if (buffer.length >= limit) { this.parts.report(`${this.name}: event ${meta.id} (${event}) not added to a sequence whose consumer is ${limit} events behind`); return; }
      buffer.push({ data, meta });
    });
    /** @type {() => Promise<IteratorResult<{ data: any, meta: RoomEventMeta }>>} */
    const finish = () => {
      done = true;
      buffer.length = 0;
      this.off(listener);
      if (waiting) { waiting({ value: undefined, done: true }); waiting = null; }
      return Promise.resolve({ value: undefined, done: true });
    };
    return {
      next: () => {
        const value = buffer.shift();
        if (value) return Promise.resolve({ value, done: false });
        if (done) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => { waiting = resolve; });
      },
      return: finish,
      [Symbol.asyncIterator]() { return this; },
    };
  }

  /**
   * Runs the handlers (the client's drain, in arrival order).
   * @param {string} event the event name.
   * @param {unknown} data its data.
   * @param {RoomEventMeta} meta its meta.
   * @internal
   */
  deliver(event, data, meta) {
    const listeners = this.listeners;
    for (const item of listeners) if (item.event === event) this.call(item, event, () => item.handler(data, meta));
    for (const item of listeners) if (item.event === null) this.call(item, event, () => item.handler(event, data, meta));
  }

  /**
   * Answers the `ready()` waiters: `null` when joined.
   * @param {RoomErrorInfo | null} error why the room ended, or `null`.
   * @internal
   */
  settle(error) {
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) if (error) waiter.reject(new RoomError(error)); else waiter.resolve();
  }

  /**
   * @private
   * @param {RoomListener} item the listener.
   * @param {string} event the event name.
   * @param {() => void} call the call.
   */
  call(item, event, call) {
    if (!this.listeners.includes(item)) return;
    try { call(); } catch (error) { this.parts.onHandlerError(error, event); }
  }

  /**
   * @private
   * @param {string | null} event the event name, or `null` for every event.
   * @param {Function} handler the handler.
   * @returns {RoomListener} the listener.
   */
  add(event, handler) {
    const listener = { event, handler };
    this.listeners = [...this.listeners, listener];
    return listener;
  }
}
