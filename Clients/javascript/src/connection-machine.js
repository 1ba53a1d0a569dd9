// The connection's decisions, without I/O (the Swift client's `ConnectionStateMachine` and
// the backoff part of its `ReconnectStateMachine`): the six states, the close-code reactions,
// the stale-connection check, the browser's reachability hints, signin on every connection;
// channels and rooms are sub-machines it owns. Events in, actions out; the owner performs.
//
// Every socket has a generation: frames of an older socket, timers armed for it and answers
// to requests made for it are ignored (DESIGN.md: frames of the old socket delivered after the
// new one is up, a pong deadline of the old connection killing the new one, an auth answer
// from before a drop used for the new connection).

import { ActivityMonitor } from "./activity-monitor.js";
import { timer } from "./actions.js";
import { ReconnectSchedule } from "./backoff.js";
import { ChannelMachine } from "./channel-machine.js";
import { CloseCode, closeReaction } from "./close-codes.js";
import { encodeFrame, parseFrame, parseObject, protocolName } from "./protocol.js";
import { RoomsPending } from "./rooms-pending.js";
import { SigninMachine } from "./signin-machine.js";

/** @type {typeof import("./room-machine.js").RoomMachine | null} the rooms machine, once loaded. */
let RoomMachineClass = null;

/**
 * Loads the rooms code (`room-machine.js` and what it imports) once: a page that joins no room
 * never downloads it (the first load stays small). `BirdRealtime.join` calls it; a
 * page may call it early to have rooms ready.
 * @returns {Promise<void>} resolved once loaded.
 */
export async function loadRooms() {
  RoomMachineClass ??= (await import("./room-machine.js")).RoomMachine;
}

/** @typedef {import("./actions.js").Action} Action */
/** @typedef {import("./actions.js").ConnectionState} ConnectionState */
/** @typedef {import("./actions.js").AuthFailure} AuthFailure */
/** @typedef {import("./actions.js").Timer} Timer */

/**
 * The machine's settings; durations in milliseconds.
 * @typedef {object} MachineConfig
 * @property {string} namespace the protocol namespace (`bird`).
 * @property {number} activityTimeout silence before a ping when the handshake gives none (120000).
 * @property {number} pongTimeout wait for any frame after a ping (30000).
 * @property {number} verifyPongTimeout the short pong deadline of a verification (offline, resume: 1000).
 * @property {number} connectTimeout an attempt without a handshake after this is given up (30000).
 * @property {number} authTimeout an authorisation, signin, room join or history request (10000).
 * @property {number} stableConnectionDuration a connection up this long resets the backoff (5000).
 * @property {number} [shortConnectionAllowance] shorter connections that still reset it, one back per stableConnectionDuration (5).
 * @property {number} minimumAttemptInterval between two attempt starts (100).
 * @property {import("./backoff.js").BackoffOptions} backoff full jitter, 1 s base, 30 s cap.
 * @property {number} roomAuthBatchWindow joins this close share one auth request (10).
 */

/** How late a timer must fire to mean that the page was frozen or asleep (5 s, as the Swift client). */
export const FROZEN_TIMER_LATENESS = 5000;

/** The handshake's `activity_timeout` is clamped to 1 s … 1 day (Swift client: a hostile 1e-300 made 7,300 pings a second). */
const ACTIVITY_LIMITS = [1000, 86400000];

/**
 * @typedef {{ kind: "idle" }
 *   | { kind: "opening", generation: number }
 *   | { kind: "connected", generation: number, socketId: string }} Phase
 */

export class ConnectionMachine {
  /**
   * @param {MachineConfig} config the settings.
   * @param {() => number} random the jitter's random source.
   */
  constructor(config, random) {
    this.config = config;
    /** @type {ConnectionState} */
    this.state = "initialized";
    /** @type {Phase} */
    this.phase = { kind: "idle" };
    /** @type {ActivityMonitor | null} */
    this.activity = null;
    this.lastGeneration = 0;
    this.lastRequest = 0;
    /** A retry timer is armed (the state is `unavailable`). */
    this.waiting = false;
    this.schedule = new ReconnectSchedule({ backoff: config.backoff, stableConnectionDuration: config.stableConnectionDuration,
      shortConnectionAllowance: config.shortConnectionAllowance ?? 5, minimumAttemptInterval: config.minimumAttemptInterval, random });
    /**
     * XSalsa20-Poly1305 (`secretbox.js`), once the owner has loaded it for an encrypted
     * channel or a sealed room; `null` before (those then fail, told).
     * @type {typeof import("./secretbox.js") | null}
     */
    this.secretbox = null;
    this.signin = new SigninMachine(this);
    this.channels = new ChannelMachine(this);
    /** @type {import("./room-machine.js").RoomMachine | RoomsPending} */
    this.rooms = RoomMachineClass ? new RoomMachineClass(this) : new RoomsPending();
  }

  /** @returns {boolean} whether the rooms machine is loaded and in place. */
  get roomsReady() { return !(this.rooms instanceof RoomsPending); }

  /**
   * Puts the rooms machine in place of its stand-in once `loadRooms()` resolved, with the
   * grants given meanwhile.
   */
  useRooms() {
    if (!(this.rooms instanceof RoomsPending) || !RoomMachineClass) return;
    const grants = this.rooms.grants;
    this.rooms = new RoomMachineClass(this);
    if (grants) this.rooms.setGrants(grants.config, grants.at);
  }

  // Reads

  /** @returns {number | null} the current socket's generation. */
  get generation() { return this.phase.kind === "idle" ? null : this.phase.generation; }

  /** @returns {string | null} the socket id, only while connected (seed: set before `connected`). */
  get socketId() { return this.phase.kind === "connected" ? this.phase.socketId : null; }

  /** @returns {number} a new request id. */
  nextRequest() { return ++this.lastRequest; }

  /**
   * A frame on the current socket, if there is one.
   * @param {string} name the bare protocol event name (`subscribe`).
   * @param {unknown} payload the payload.
   * @param {string} [channel] the channel.
   * @returns {Action[]} the send, or nothing.
   */
  sendProtocol(name, payload, channel) {
    const generation = this.phase.kind === "connected" ? this.phase.generation : null;
    if (generation === null) return [];
    return [{ type: "send", text: encodeFrame(`${this.config.namespace}:${name}`, payload, channel), generation }];
  }

  // App commands

  /**
   * `connect()`: opens a socket unless one is opening or open; a wait for a retry ends.
   * Works after `failed` and `disconnected` (seed "Close code 4009": `connect()` starts anew).
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  connect(now) {
    if (this.phase.kind !== "idle") return [];
    this.schedule.manualStart();
    return this.cancelWait().concat(this.startAttempt(now));
  }

  /**
   * `disconnect()`: close with 1000, `disconnected`, nothing scheduled; channels and rooms kept.
   * @returns {Action[]} the actions.
   */
  disconnect() {
    if (this.state === "disconnected") return [];
    /** @type {Action[]} */
    const actions = [];
    const generation = this.generation;
    if (generation !== null) {
      actions.push({ type: "close", generation, code: CloseCode.normalClosure, reason: "disconnect()" });
      actions.push({ type: "cancel", timer: timer("connect", { generation }) });
    }
    return actions.concat(this.endSocket(), this.cancelWait(), this.set("disconnected"),
      this.rooms.settleJoining("disconnect() was called: the room joins after connect()"));
  }

  /**
   * `signin()`: now if connected and not signed in, and on every later connection.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  requestSignin(now) { return this.signin.request(now); }

  // Reachability (the browser's online/offline, visibility and page lifecycle events)

  /**
   * The browser went offline: a connected socket is verified at once with the short pong
   * deadline; a failure backs off (the network is known to be gone).
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  networkOffline(now) { return this.verify(now, true); }

  /**
   * The browser is online again: a wait for a retry ends at once, a hanging attempt is
   * replaced, a connected socket is verified (the path may have changed).
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  networkOnline(now) {
    if (this.waiting) return this.cancelWait().concat(this.startAttempt(now));
    if (this.phase.kind === "opening") {
      const generation = this.phase.generation;
      return [{ type: "close", generation }, { type: "cancel", timer: timer("connect", { generation }) }, ...this.endSocket(), ...this.startAttempt(now)];
    }
    return this.verify(now, true);
  }

  /**
   * The page came back (visible, `resume`, a timer that fired far too late): a connected
   * socket is verified at once; a wait for a retry ends at once.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  pageResumed(now) {
    if (this.waiting) return this.cancelWait().concat(this.startAttempt(now));
    return this.verify(now, false);
  }

  /**
   * @param {number} now the instant.
   * @param {boolean} pathChange the network changed (a failure backs off instead of retrying at once).
   * @returns {Action[]} the actions.
   */
  verify(now, pathChange) {
    if (this.phase.kind !== "connected" || !this.activity) return [];
    return this.monitorActions(this.activity.ping(this.config.verifyPongTimeout, pathChange, now));
  }

  // Socket events

  /**
   * The socket of `generation` closed (1006 when it dropped without a close frame).
   * @param {number} generation the socket.
   * @param {number} code the close code.
   * @param {string} reason the close reason.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  socketClosed(generation, code, reason, now) {
    if (this.generation !== generation) return [];
    const transport = code === CloseCode.abnormalClosure;
    const message = reason || (transport ? "the connection dropped without a close frame" : `closed with ${code}`);
    /** @type {Action[]} */
    const actions = [{ type: "error", error: { type: transport ? "transport" : "closed", code, message } },
      { type: "cancel", timer: timer("connect", { generation }) }, ...this.endSocket()];
    const reaction = closeReaction(code);
    if (reaction === "fail") {
      // Nothing joins until the app calls connect(): a `ready()` waiting would wait forever.
      return actions.concat(this.set("failed"), this.rooms.settleJoining(`the connection failed (${code}${reason ? ` ${reason}` : ""}): the room joins after connect()`));
    }
    return actions.concat(this.retryLater(now, reaction === "reconnect_now"));
  }

  /**
   * A socket failed without a close event the client can read (a send buffer over its bound).
   * @param {number} generation the socket.
   * @param {string} message what happened.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  socketFailed(generation, message, now) {
    if (this.generation !== generation) return [];
    return [{ type: "close", generation }, { type: "error", error: { type: "transport", code: null, message } },
      { type: "cancel", timer: timer("connect", { generation }) }, ...this.endSocket(), ...this.retryLater(now, false)];
  }

  /**
   * A text frame on the socket of `generation`.
   * @param {number} generation the socket.
   * @param {string} text the frame.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  textReceived(generation, text, now) {
    if (this.generation !== generation) return [];
    /** @type {Action[]} */
    const actions = this.activity ? this.monitorActions(this.activity.frameReceived(now)) : [];
    const frame = parseFrame(text);
    if (!frame) return actions.concat(this.protocolError("a frame that is not {event, channel?, data}, ignored"));
    const name = protocolName(frame.event, this.config.namespace);
    if (this.phase.kind !== "connected") {
      if (name === "connection_established") return actions.concat(this.handshake(generation, frame.data, now));
      if (name === "error") return actions.concat(this.serverError(frame.data));
      return actions.concat(this.protocolError(`${frame.event} before the handshake, ignored`));
    }
    switch (name) {
      case null: return actions.concat(this.channels.frame(frame, null));
      case "ping": return actions.concat(this.sendProtocol("pong", {}));
      case "pong": return actions;
      case "room_event": case "room_history": return actions.concat(this.rooms.frame(frame, name, now));
      case "signin_success": return actions.concat(this.signin.succeeded(frame.data));
      case "connection_established": return actions.concat(this.protocolError("a second handshake on one connection, ignored"));
      case "error":
        if (frame.channel && this.channels.has(frame.channel)) return actions.concat(this.channels.frame(frame, name));
        return actions.concat(this.signin.refused(frame.data) ?? this.serverError(frame.data));
      default: return actions.concat(this.channels.frame(frame, name));
    }
  }

  // Timers

  /**
   * A timer fired.
   * @param {Timer} fired the timer.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  timerFired(fired, now) {
    switch (fired.kind) {
      case "retry":
        if (!this.waiting) return [];
        this.waiting = false;
        return this.startAttempt(now);
      case "connect":
        if (this.phase.kind !== "opening" || this.phase.generation !== fired.generation) return [];
        return [{ type: "close", generation: this.phase.generation },
          { type: "error", error: { type: "transport", code: null, message: "no handshake within the connect timeout" } },
          ...this.endSocket(), ...this.retryLater(now, false)];
      case "activity":
        if (this.phase.kind !== "connected" || this.phase.generation !== fired.generation || !this.activity) return [];
        return this.monitorActions(this.activity.checkDue(now, this.config.pongTimeout));
      case "pong": return this.pongDeadlinePassed(fired, now);
      case "signin": return this.signin.failed(fired.request, { kind: "timeout", message: `no answer within ${this.config.authTimeout} ms` });
      case "channel_auth": return this.channels.authorized(fired.name ?? "", fired.request ?? 0,
        { ok: false, failure: { kind: "timeout", message: `no answer from the auth endpoint within ${this.config.authTimeout} ms` } });
      default: return this.rooms.timerFired(fired, now);
    }
  }

  /**
   * @param {Timer} fired the pong deadline.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  pongDeadlinePassed(fired, now) {
    if (this.phase.kind !== "connected" || this.phase.generation !== fired.generation || !this.activity) return [];
    const probe = this.activity.pongDeadlinePassed(fired.sequence ?? 0);
    if (!probe) return [];
    const generation = this.phase.generation;
    const message = probe.pathChange ? "no pong after the network changed" : "no pong within the pong timeout";
    // Seed: close with an immediate-retry code; after a network change the path is known to
    // be gone, so the retry backs off (the `online` event ends the wait).
    return [{ type: "error", error: { type: "pong_timeout", code: CloseCode.pongNotReceived, message } },
      { type: "close", generation, code: CloseCode.pongNotReceived, reason: "pong not received" },
      ...this.endSocket(), ...this.retryLater(now, !probe.pathChange)];
  }

  // Shared steps

  /**
   * @param {number} generation the socket.
   * @param {string | undefined} data the handshake's data.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  handshake(generation, data, now) {
    const fields = parseObject(data) ?? {};
    const socketId = fields.socket_id;
    if (typeof socketId !== "string" || !socketId) {
      // Seed, "The six states": a handshake without an id is an error; the socket is closed
      // and the connection retries with backoff.
      return [{ type: "close", generation, reason: "handshake without a socket id" },
        { type: "error", error: { type: "handshake", code: null, message: `handshake without a socket id: ${data ?? "no data"}` } },
        { type: "cancel", timer: timer("connect", { generation }) }, ...this.endSocket(), ...this.retryLater(now, false)];
    }
    let timeout = this.config.activityTimeout;
    const seconds = fields.activity_timeout;
    if (typeof seconds === "number" && Number.isFinite(seconds) && seconds > 0) {
      timeout = Math.min(Math.max(seconds * 1000, ACTIVITY_LIMITS[0]), ACTIVITY_LIMITS[1]);
    }
    this.phase = { kind: "connected", generation, socketId };
    this.activity = new ActivityMonitor(timeout, now);
    this.schedule.ready(now);
    return [{ type: "cancel", timer: timer("connect", { generation }) },
      ...this.set("connected"),
      ...this.monitorActions([this.activity.start()]),
      ...this.channels.connected(now),
      ...this.signin.connected(now),
      ...this.rooms.connected(now)];
  }

  /**
   * Opens a new socket.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  startAttempt(now) {
    const generation = ++this.lastGeneration;
    this.phase = { kind: "opening", generation };
    this.schedule.attemptStarted(now);
    return [...this.set("connecting"), { type: "open", generation },
      { type: "schedule", timer: timer("connect", { generation }), at: now + this.config.connectTimeout }];
  }

  /**
   * After a socket ended: retry at once, or wait on the backoff in `unavailable`. An immediate
   * retry held only by the minimum attempt interval waits in `connecting`, as the Swift client's.
   * @param {number} now the instant.
   * @param {boolean} immediate the close asked for an immediate retry.
   * @returns {Action[]} the actions.
   */
  retryLater(now, immediate) {
    const delay = this.schedule.nextDelay(now, immediate);
    if (delay <= 0) return this.startAttempt(now);
    this.waiting = true;
    return [...this.set(this.schedule.retriesAtOnce ? "connecting" : "unavailable"), { type: "schedule", timer: timer("retry"), at: now + delay }];
  }

  /** @returns {Action[]} the retry timer disarmed. */
  cancelWait() {
    if (!this.waiting) return [];
    this.waiting = false;
    return [{ type: "cancel", timer: timer("retry") }];
  }

  /**
   * Forgets the current socket: its timers, requests, subscriptions; rooms wait to rejoin.
   * @returns {Action[]} the actions.
   */
  endSocket() {
    /** @type {Action[]} */
    const actions = [];
    if (this.phase.kind === "connected") {
      const generation = this.phase.generation;
      actions.push({ type: "cancel", timer: timer("activity", { generation }) });
      if (this.activity?.probe) actions.push({ type: "cancel", timer: timer("pong", { generation, sequence: this.activity.probe.sequence }) });
      actions.push(...this.signin.disconnected());
    }
    this.phase = { kind: "idle" };
    this.activity = null;
    return actions.concat(this.channels.disconnected(), this.rooms.disconnected());
  }

  /**
   * @param {ConnectionState} current the new state.
   * @returns {Action[]} the state change, or nothing when it is the same.
   */
  set(current) {
    const previous = this.state;
    if (previous === current) return [];
    this.state = current;
    return [{ type: "state", previous, current }];
  }

  /**
   * @param {import("./activity-monitor.js").MonitorAction[]} monitorActions the monitor's requests.
   * @returns {Action[]} as the owner's actions.
   */
  monitorActions(monitorActions) {
    const generation = this.generation ?? 0;
    return monitorActions.flatMap((action) => {
      switch (action.type) {
        case "check": return [{ type: "schedule", timer: timer("activity", { generation }), at: action.at }];
        case "ping": return this.sendProtocol("ping", {});
        case "pong_deadline": return [{ type: "schedule", timer: timer("pong", { generation, sequence: action.sequence }), at: action.at }];
        case "cancel_pong_deadline": return [{ type: "cancel", timer: timer("pong", { generation, sequence: action.sequence }) }];
      }
    });
  }

  /**
   * @param {string} message what is wrong with the frame.
   * @returns {Action[]} the report.
   */
  protocolError(message) { return [{ type: "error", error: { type: "protocol", code: null, message } }]; }

  /**
   * @param {string | undefined} data a `<ns>:error` frame's data: `{message, code?}`.
   * @returns {Action[]} the report.
   */
  serverError(data) {
    const payload = parseObject(data);
    const code = typeof payload?.code === "number" ? payload.code : null;
    return [{ type: "error", error: { type: "server", code, message: String(payload?.message ?? data ?? "error without data") } }];
  }
}
