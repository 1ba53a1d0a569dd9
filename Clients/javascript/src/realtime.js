// The browser client: `new BirdRealtime({ appKey, region })` as the
// realtime-connection-lifecycle seed writes it, channels with Pusher's API, and rooms as the
// rooms seed in JavaScript's shape. It decides in `ConnectionMachine` and performs the
// machine's actions here, in order, one event's actions after another's (a handler that calls
// the client meanwhile queues behind them).

import { authenticateUser, authorizeChannel, authorizeRooms } from "./auth.js";
import { Channel, PresenceChannel } from "./channel.js";
import { Connection } from "./connection.js";
import { ConnectionMachine, FROZEN_TIMER_LATENESS, loadRooms } from "./connection-machine.js";
import { resolveEnvironment, watchReachability } from "./environment.js";
import { channelKind, encodeData, MAX_FRAME_SIZE } from "./protocol.js";
import { Room, RoomError } from "./room.js";

export { Channel, PresenceChannel, Members } from "./channel.js";
export { Connection } from "./connection.js";
export { Room, RoomError } from "./room.js";
export { CloseCode, closeReaction } from "./close-codes.js";
export { backoffCeiling, fullJitterDelay } from "./backoff.js";
export { loadRooms } from "./connection-machine.js";

/** @typedef {import("./actions.js").Action} Action */
/** @typedef {import("./actions.js").Timer} Timer */
/** @typedef {import("./actions.js").ConnectionState} ConnectionState */
/** @typedef {import("./actions.js").RealtimeError} RealtimeError */
/** @typedef {import("./actions.js").RoomEventMeta} RoomEventMeta */
/** @typedef {import("./actions.js").HistoryPage} HistoryPage */
/** @typedef {import("./environment.js").Environment} Environment */
/** @typedef {import("./room-tokens.js").RoomGrants} RoomGrants */

/**
 * How the client connects (seed: `new BirdRealtime({ appKey, region })`). Durations in milliseconds.
 * @typedef {object} RealtimeOptions
 * @property {string} appKey the app's public key (the path `/app/{key}`).
 * @property {string} [region] a hosted region (`us1`): the host is `ws-{region}.realtime.bird.com`, over TLS.
 * @property {string} [host] a self-hosted server's host (`127.0.0.1`, `realtime.example.com`).
 * @property {number} [port] its port (the scheme's default when absent).
 * @property {boolean} [forceTLS] `wss://` (default: true with a region, false with a host).
 * @property {string} [url] a full endpoint (`ws://127.0.0.1:6001/app/app-key`), used as is.
 * @property {string} [namespace] the protocol namespace (`bird`; `pusher` for Pusher-compatible servers).
 * @property {boolean} [autoConnect] connect at once (true: the seed's snippets bind and expect `connected`); false waits for `connect()`.
 * @property {string} [authEndpoint] where private and presence channels are authorised (one form POST per channel).
 * @property {string} [userAuthEndpoint] where `signin()` authenticates the user.
 * @property {string} [roomAuthEndpoint] where room tokens are asked for (one JSON POST per moment).
 * @property {Record<string, string>} [authHeaders] headers of every auth request (rooms seed: "the headers your RealtimeOptions give").
 * @property {RequestCredentials} [authCredentials] `fetch` credentials of auth requests (`same-origin`).
 * @property {import("./auth.js").AuthOptions["authorizer"]} [authorizer] answers channel authorisations instead of `authEndpoint`.
 * @property {import("./auth.js").AuthOptions["userAuthenticator"]} [userAuthenticator] answers signins instead of `userAuthEndpoint`.
 * @property {import("./auth.js").AuthOptions["roomAuthorizer"]} [roomAuthorizer] answers room auth requests instead of `roomAuthEndpoint`.
 * @property {RoomGrants} [grants] the backend's `config()`: public rooms join with no auth request.
 * @property {number} [activityTimeout] silence before a ping when the handshake gives none (120000).
 * @property {number} [pongTimeout] wait for any frame after a ping (30000).
 * @property {number} [verifyPongTimeout] the pong deadline when the browser goes offline or the page resumes (1000).
 * @property {number} [connectTimeout] an attempt with no handshake after this is retried (30000).
 * @property {number} [authTimeout] an auth request, signin, join or history request (10000).
 * @property {number} [maxBufferedAmount] bytes queued on the socket before the connection is dropped as stuck (1 MiB).
 * @property {Environment} [environment] the outside world (tests inject fakes).
 */

/** The host template of hosted regions. */
export const HOST_TEMPLATE = "ws-{region}.realtime.bird.com";

/** What a room joined before the rooms code is in reads as. */
const LOADING_ROOM = /** @type {import("./room-machine.js").RoomRecord} */ (/** @type {unknown} */ ({ phase: { kind: "joining" } }));

/**
 * The URL the client opens.
 * @param {RealtimeOptions} options the options.
 * @returns {string} `ws(s)://host[:port]/app/{key}?namespace=…&client=js&protocol=7`.
 */
export function endpointURL(options) {
  if (options.url) return options.url;
  let host = options.host;
  if (!host) host = /^[A-Za-z0-9-]{1,63}$/.test(options.region ?? "") ? HOST_TEMPLATE.replace("{region}", options.region ?? "") : "invalid-region.invalid";
  const tls = options.forceTLS ?? !options.host;
  const bracketed = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  const port = options.port ? `:${options.port}` : "";
  return `${tls ? "wss" : "ws"}://${bracketed}${port}/app/${encodeURIComponent(options.appKey)}?namespace=${options.namespace ?? "bird"}&client=js&protocol=7`;
}

export class BirdRealtime {
  /** @param {RealtimeOptions} options how to connect. */
  constructor(options) {
    if (!options || typeof options.appKey !== "string" || !options.appKey) throw new TypeError("BirdRealtime needs { appKey }");
    /** The options, as given. */
    this.options = options;
    /** @private */
    this.environment = resolveEnvironment(options.environment);
    /** @private */
    this.machine = new ConnectionMachine({
      namespace: options.namespace ?? "bird", activityTimeout: options.activityTimeout ?? 120000, pongTimeout: options.pongTimeout ?? 30000,
      verifyPongTimeout: options.verifyPongTimeout ?? 1000, connectTimeout: options.connectTimeout ?? 30000, authTimeout: options.authTimeout ?? 10000,
      stableConnectionDuration: 5000, shortConnectionAllowance: 5, minimumAttemptInterval: 100, backoff: { base: 1000, cap: 30000 }, roomAuthBatchWindow: 10,
    }, this.environment.random);
    /** The connection: `state`, `connectionId`, `bind`, `unbind`. */
    this.connection = new Connection(() => this.machine, (error, event) => this.handlerFailed(error, event));
    /** @private @type {Map<string, Channel>} */
    this.channels = new Map();
    /** @private @type {Map<string, Room>} */
    this.rooms = new Map();
    /** @private @type {Promise<void> | null} the rooms code loading (`join` before it is in). */
    this.roomsLoading = null;
    /** @private @type {Map<string, { handle: unknown, at: number }>} */
    this.timers = new Map();
    /** @private @type {Map<number, AbortController>} */
    this.requests = new Map();
    /** @private @type {Map<number, { resolve: (page: HistoryPage) => void, reject: (error: RoomError) => void }>} */
    this.historyWaiters = new Map();
    /** @private @type {{ generation: number, socket: import("./environment.js").SocketLike } | null} */
    this.socket = null;
    /** @private @type {Action[]} */
    this.pending = [];
    /** @private */
    this.draining = false;
    if (options.grants) this.machine.rooms.setGrants(options.grants, this.now());
    /** @private */
    this.stopWatching = watchReachability(this.environment, {
      online: () => this.run((machine) => machine.networkOnline(this.now())),
      offline: () => this.run((machine) => machine.networkOffline(this.now())),
      resumed: () => this.run((machine) => machine.pageResumed(this.now())),
    });
    if (options.autoConnect ?? true) queueMicrotask(() => { if (this.machine.state === "initialized") this.connect(); });
  }

  // Connection

  /** Opens a connection unless one is opening or open; also after `failed` or `disconnected` (seed: it resubscribes). */
  connect() { this.run((machine) => machine.connect(this.now())); }

  /** Closes the socket (1000) and schedules nothing: state `disconnected`; channels and rooms are kept for a later `connect()`. */
  disconnect() { this.run((machine) => machine.disconnect()); }

  /** Signs in now (if connected) and on every later connection; failures arrive as `signin_error`. */
  signin() { this.run((machine) => machine.requestSignin(this.now())); }

  // Channels

  /**
   * Subscribes to a channel (a `PresenceChannel` for `presence-` names): at once when
   * connected, after every handshake from then on. The same object for the same name.
   * @param {string} name the channel name.
   * @returns {Channel} the channel.
   */
  subscribe(name) {
    const existing = this.channels.get(name);
    if (existing) return existing;
    const parts = {
      record: () => (this.channels.get(name) === channel ? this.machine.channels.records.get(name) : undefined),
      trigger: (/** @type {string} */ event, /** @type {unknown} */ data) => {
        const actions = this.machine.channels.trigger(name, event, data);
        if (!actions) return false;
        this.run(() => actions);
        return true;
      },
      unsubscribe: () => this.unsubscribe(name),
      onHandlerError: (/** @type {unknown} */ error, /** @type {string} */ event) => this.handlerFailed(error, event),
    };
    /** @type {Channel} */
    const channel = name.startsWith("presence-") ? new PresenceChannel(name, parts, this.machine.config.namespace) : new Channel(name, parts);
    this.channels.set(name, channel);
    this.run((machine) => machine.channels.add(name, this.now()));
    return channel;
  }

  /** @param {string} name a channel; it is never resubscribed. */
  unsubscribe(name) {
    if (!this.channels.delete(name)) return;
    this.run((machine) => machine.channels.remove(name));
  }

  /**
   * @param {string} name a channel name.
   * @returns {Channel | undefined} the subscribed channel.
   */
  channel(name) { return this.channels.get(name); }

  // Rooms

  /**
   * Joins a room (rooms seed, "Joining"); the same room for the same name until it is left. A
   * failed room joined again tries again.
   * @param {string} name the room name (`order:1042`).
   * @returns {Room} the room.
   */
  join(name) {
    let room = this.rooms.get(name);
    if (!room) {
      /** @type {Room} */
      const created = new Room(name, {
        // While the rooms code loads there is no record yet: the room is joining.
        record: () => (this.machine.roomsReady ? this.machine.rooms.records.get(name) : LOADING_ROOM),
        isCurrent: () => this.rooms.get(name) === created,
        stalled: () => {
          const state = this.machine.state;
          if (state === "failed") return { code: "disconnected", message: "the connection failed: the room joins after connect()" };
          if (state === "disconnected") return { code: "disconnected", message: "disconnect() was called: the room joins after connect()" };
          return null;
        },
        leave: () => this.leave(name),
        send: (event, data) => {
          const { error, actions } = this.machine.rooms.send(name, event, encodeData(data));
          this.run(() => actions);
          return error;
        },
        history: (before, limit) => new Promise((resolve, reject) => {
          this.run((machine) => {
            const { request, actions } = machine.rooms.requestHistory(name, before, limit, this.now());
            this.historyWaiters.set(request, { resolve, reject });
            return actions;
          });
        }),
        onHandlerError: (error, event) => this.handlerFailed(error, event),
        report: (message) => this.run(() => [{ type: "error", error: { type: "room", code: null, message } }]),
      });
      room = created;
      this.rooms.set(name, room);
    }
    if (this.machine.roomsReady) {
      this.run((machine) => machine.rooms.join(name, this.now()));
    } else {
      // The rooms code loads on first use; every room asked for meanwhile joins once it is in.
      this.roomsLoading ??= loadRooms().then(() => {
        this.machine.useRooms();
        for (const pending of this.rooms.keys()) this.run((machine) => machine.rooms.join(pending, this.now()));
      }, (error) => {
        this.roomsLoading = null;
        for (const pending of this.rooms.values()) pending.settle({ code: "unavailable", message: `the rooms code did not load: ${error}` });
      });
    }
    return room;
  }

  /**
   * @param {string} name a room name.
   * @returns {Room | null} the room joined under that name, or `null`.
   */
  room(name) { return this.rooms.get(name) ?? null; }

  /** @param {string} name a room to leave: `room_leave` is sent, and it is never rejoined. */
  leave(name) {
    const room = this.rooms.get(name);
    if (!room) return;
    this.rooms.delete(name);
    this.run((machine) => machine.rooms.leave(name));
    room.settle({ code: "left", message: "the room was left" });
  }

  /** @param {RoomGrants} grants the backend's `config()`, replacing the options' `grants`. */
  setGrants(grants) { this.machine.rooms.setGrants(grants, this.now()); }

  // Performing

  /** @private @returns {number} the clock's instant. */
  now() { return this.environment.clock.now(); }

  /**
   * Applies an event to the machine and performs its actions after those already queued.
   * @private
   * @param {(machine: ConnectionMachine) => Action[]} event the event.
   */
  run(event) {
    /** @type {Action[]} */
    let actions;
    try {
      actions = event(this.machine);
    } catch (error) {
      // A decision that threw (a frame nested past the engine's stack, a bug): told, never
      // thrown out of the socket's event, and the client goes on with the next one.
      actions = [{ type: "error", error: { type: "protocol", code: null, message: `an event the client could not handle: ${error instanceof Error ? error.message : String(error)}` } }];
    }
    this.pending.push(...actions);
    if (this.draining) return;
    this.draining = true;
    try {
      for (let index = 0; index < this.pending.length; index += 1) {
        try { this.perform(this.pending[index]); } catch (error) { this.handlerFailed(error, this.pending[index].type); }
      }
    } finally {
      this.pending = [];
      this.draining = false;
    }
  }

  /**
   * @private
   * @param {unknown} error what a handler threw.
   * @param {string} event the event it handled.
   */
  handlerFailed(error, event) {
    // A throwing `error` handler is not reported again: that would never end.
    if (event === "error") return;
    const message = `a handler of ${event} threw: ${error instanceof Error ? error.message : String(error)}`;
    this.run(() => [{ type: "error", error: { type: "handler", code: null, message, cause: error } }]);
  }

  /**
   * @private
   * @param {Action} action what to do.
   */
  perform(action) {
    switch (action.type) {
      case "open": return this.open(action.generation);
      case "send": {
        const socket = this.socket?.generation === action.generation ? this.socket.socket : null;
        if (!socket) return;
        if (socket.bufferedAmount > (this.options.maxBufferedAmount ?? 1 << 20)) {
          this.run((machine) => machine.socketFailed(action.generation, "send buffer full: the server does not read", this.now()));
          return;
        }
        return socket.send(action.text);
      }
      case "close": {
        if (this.socket?.generation !== action.generation) return;
        const { socket } = this.socket;
        this.socket = null;
        socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
        try { if (action.code === undefined) socket.close(); else socket.close(action.code, action.reason); } catch { socket.close(); }
        return;
      }
      case "schedule": return this.schedule(action.timer, action.at);
      case "cancel": {
        const armed = this.timers.get(action.timer.key);
        if (armed) { this.environment.clock.clearTimeout(armed.handle); this.timers.delete(action.timer.key); }
        return;
      }
      case "authorize": return this.request(action.request,
        (signal) => authorizeChannel(this.environment.fetch, this.options, action.socketId, action.channel, signal)
          .then((result) => channelKind(action.channel) === "encrypted" ? this.loadSecretbox(result) : result),
        (machine, result) => machine.channels.authorized(action.channel, action.request, result));
      case "authenticate": return this.request(action.request, (signal) => authenticateUser(this.environment.fetch, this.options, action.socketId, signal),
        (machine, result) => machine.signin.authenticated(action.request, result, this.now()));
      case "authorize_rooms": return this.request(action.request,
        (signal) => authorizeRooms(this.environment.fetch, this.options, action.rooms, signal)
          .then((result) => result.ok && Object.values(result.answer?.rooms ?? {}).some((entry) => entry?.key !== undefined) ? this.loadSecretbox(result) : result),
        (machine, result) => machine.rooms.authorized(action.request, result, this.now()));
      case "cancel_request": this.requests.get(action.request)?.abort(); this.requests.delete(action.request); return;
      case "state":
        this.connection.emit("state_change", { previous: action.previous, current: action.current });
        return this.connection.emit(action.current, { previous: action.previous, current: action.current });
      case "error": return this.connection.emit("error", action.error);
      case "signin_error": return this.connection.emit("signin_error", action.error);
      case "channel_event": return this.channels.get(action.channel)?.deliver(action.event, action.data, action.meta);
      case "room_event": return this.rooms.get(action.room)?.deliver(action.event, action.data, action.meta);
      case "settle_room": return this.rooms.get(action.room)?.settle(action.error);
      case "history": {
        const waiter = this.historyWaiters.get(action.request);
        this.historyWaiters.delete(action.request);
        if (action.page) waiter?.resolve(action.page); else waiter?.reject(new RoomError(action.error ?? { code: "unknown", message: "no page" }));
      }
    }
  }

  /**
   * Loads `secretbox.js` for an encrypted channel or a sealed room (once; a module that does
   * not load leaves the machine without it, and the channel or room fails, told), then gives
   * back the answer that needed it.
   * @private
   * @template T
   * @param {T} result the answer.
   * @returns {Promise<T>} the same answer, once the module is there (or has failed to load).
   */
  async loadSecretbox(result) {
    try {
      this.machine.secretbox ??= await import("./secretbox.js");
    } catch (error) {
      this.run(() => [{ type: "error", error: { type: "decryption", code: null,
        message: `secretbox.js did not load (${error instanceof Error ? error.message : String(error)}): encrypted channels and sealed rooms fail` } }]);
    }
    return result;
  }

  /**
   * Opens the socket of `generation`; its events reach the machine only while it is current.
   * @private
   * @param {number} generation the socket.
   */
  open(generation) {
    let socket;
    try {
      socket = new this.environment.WebSocket(endpointURL(this.options));
    } catch (error) {
      const message = `cannot open a WebSocket: ${error instanceof Error ? error.message : String(error)}`;
      this.run((machine) => machine.socketFailed(generation, message, this.now()));
      return;
    }
    this.socket = { generation, socket };
    socket.onmessage = (event) => {
      const text = event.data;
      if (typeof text !== "string") {
        this.run(() => [{ type: "error", error: { type: "protocol", code: null, message: "a binary frame, ignored (the protocol is text)" } }]);
      } else if (text.length > MAX_FRAME_SIZE) {
        this.run(() => [{ type: "error", error: { type: "protocol", code: null, message: `a frame of ${text.length} characters, over ${MAX_FRAME_SIZE}, ignored` } }]);
      } else {
        this.run((machine) => machine.textReceived(generation, text, this.now()));
      }
    };
    socket.onclose = (event) => {
      if (this.socket?.generation === generation) this.socket = null;
      this.run((machine) => machine.socketClosed(generation, event.code || 1006, event.reason ?? "", this.now()));
    };
  }

  /**
   * Arms a timer; one that fires at least 5 s late means the page was frozen or asleep, and
   * the connection is verified at once (Swift client: `resumedAfterFreeze`).
   * @private
   * @param {Timer} armed the timer.
   * @param {number} at its deadline.
   */
  schedule(armed, at) {
    const clock = this.environment.clock;
    const previous = this.timers.get(armed.key);
    if (previous) clock.clearTimeout(previous.handle);
    const entry = { handle: /** @type {unknown} */ (null), at };
    entry.handle = clock.setTimeout(() => {
      if (this.timers.get(armed.key) !== entry) return;
      this.timers.delete(armed.key);
      const now = this.now();
      this.run((machine) => machine.timerFired(armed, now).concat(now - at >= FROZEN_TIMER_LATENESS ? machine.pageResumed(now) : []));
    }, Math.max(0, at - clock.now()));
    this.timers.set(armed.key, entry);
  }

  /**
   * Runs a request; its answer reaches the machine, which drops answers no longer awaited.
   * @private
   * @template T
   * @param {number} id the request.
   * @param {(signal: AbortSignal) => Promise<T>} start starts it.
   * @param {(machine: ConnectionMachine, result: T) => Action[]} answered the machine's event.
   */
  request(id, start, answered) {
    const controller = new AbortController();
    this.requests.set(id, controller);
    start(controller.signal).then((result) => {
      if (this.requests.get(id) !== controller) return;
      this.requests.delete(id);
      this.run((machine) => answered(machine, result));
    }, (error) => this.handlerFailed(error, "auth request"));
  }
}
