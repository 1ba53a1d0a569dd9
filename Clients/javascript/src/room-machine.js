// Rooms on the connection machine (rooms seed; docs/rooms-protocol.md "What a client does",
// the Swift client's `ConnectionStateMachine+Rooms/RoomFrames`): positions per room kept
// across sockets and rejoined with `since`, duplicates dropped by id, holes re-synchronised
// (at most 3 in a row, then told on the room, never silent), refusals retried or final.

import { SYSTEM_META, timer } from "./actions.js";
import { MAX_JOIN_RETRIES, MAX_RESYNCS, retryDelay, roomFrame } from "./room-frames.js";
import { requestHistory } from "./room-history.js";
import { addToBatch, authRetryDue, batchDue, grantFor, makeToken, roomsAuthorized, tokenDue } from "./room-tokens.js";

/** @typedef {import("./actions.js").Action} Action */
/** @typedef {import("./actions.js").RoomErrorInfo} RoomErrorInfo */
/** @typedef {import("./room-tokens.js").RoomToken} RoomToken */

/**
 * A `room_join` in flight: a first join, or a member's rejoin from its position.
 * @typedef {object} Join
 * @property {number} generation the socket it was sent on.
 * @property {RoomPosition | null} from the position it was sent from, or where its deadline last found it (a streamed replay that moves it re-arms the deadline).
 * @property {boolean} gapTold the server told a gap for it: its `joined` (`recovered: false`) is not told again.
 */

/**
 * Where a join stands.
 * @typedef {{ kind: "waiting" } | { kind: "needs_token" } | { kind: "authorizing", request: number } | { kind: "sent", join: Join }} Step
 */

/**
 * A join until its `joined`: where it stands, and what it learned on the way.
 * @typedef {object} Attempt
 * @property {Step} step nothing in flight (`waiting`), in the next auth batch, asked for, or sent.
 * @property {number} retries refusals retried in a row (`rate_limited`, `store_full`, a join with no answer).
 * @property {boolean} tokenRefused the server refused this attempt's token once: a second refusal is final.
 * @property {number} resyncs rejoins for holes in a replay (bounded).
 */

/**
 * A membership on a socket.
 * @typedef {object} Membership
 * @property {number} generation the socket it is on.
 * @property {number} resyncs rejoins for holes since the last clean `joined`.
 * @property {number} retries rejoins refused and retried in a row (`rate_limited`, `store_full`).
 * @property {null | { kind: "needs_token" } | { kind: "authorizing", request: number }} renewal a new token on its way (sent as `room_refresh`, or used by the rejoin that waits for it).
 * @property {null | { kind: "put_off" } | { kind: "awaiting_token" } | { kind: "sent", join: Join }} rejoin a rejoin from the position (a hole, or the server's `resync`): put off by a refusal until the retry timer, waiting for the renewal's token, or sent.
 */

/**
 * What a room is doing; each kind carries what only it has (the Swift client's
 * `RoomTable.Phase`). Its kind is the room's public state.
 * @typedef {{ kind: "joining", attempt: Attempt } | { kind: "joined", membership: Membership } | { kind: "failed" }} RoomPhase
 */

/**
 * A room's position: the epoch of its stream and the id of the last kept event delivered.
 * @typedef {object} RoomPosition
 * @property {string} epoch changes when the room's history is lost.
 * @property {number} id the last kept event delivered (or the room's id at `joined`).
 */

/**
 * One room as the machine keeps it; position and token outlive every socket.
 * @typedef {object} RoomRecord
 * @property {RoomPhase} phase what it is doing; `phase.kind` is the public state (`left` rooms are removed).
 * @property {RoomPosition | null} position rejoins start after it.
 * @property {RoomToken | null} token the token kept across reconnects.
 * @property {RoomErrorInfo | null} error why it failed, or the last gap it reported.
 * @property {number | null} lastAuthAt when the auth route was last asked for it.
 * @property {number | null} count the room's users, from `joined` and `count`.
 * @property {Map<string, unknown>} members a presence room's members by id, with their info.
 * @property {Uint8Array | null} key a sealed room's key (the auth answer's `key`): events are opened and sends sealed with it.
 */

/**
 * A new attempt to join.
 * @param {Partial<Attempt>} [fields] what it starts with.
 * @returns {{ kind: "joining", attempt: Attempt }} the phase.
 */
export function joining(fields = {}) {
  return { kind: "joining", attempt: { step: { kind: "waiting" }, retries: 0, tokenRefused: false, resyncs: 0, ...fields } };
}

/**
 * The join in flight: an attempt's sent join, or a member's sent rejoin.
 * @param {RoomRecord} record the room.
 * @returns {Join | null} the join, or none.
 */
export function joinInFlight(record) {
  const phase = record.phase;
  if (phase.kind === "joining" && phase.attempt.step.kind === "sent") return phase.attempt.step.join;
  if (phase.kind === "joined" && phase.membership.rejoin?.kind === "sent") return phase.membership.rejoin.join;
  return null;
}

/**
 * The socket the room is on: its membership's, or its sent join's; `null` when on none.
 * @param {RoomRecord} record the room.
 * @returns {number | null} the generation.
 */
export function socketOf(record) {
  const phase = record.phase;
  if (phase.kind === "joined") return phase.membership.generation;
  if (phase.kind === "joining" && phase.attempt.step.kind === "sent") return phase.attempt.step.join.generation;
  return null;
}

/** @typedef {{ names: string[], attempt: number, retriedUnauthorized: boolean }} AuthEntry */

/** Most rooms a client joins: the server's limit per connection (`too_many_rooms`). */
export const MAX_ROOMS = 100;
/** Largest event data the server accepts (10 KiB of JSON text). */
export const MAX_ROOM_DATA = 10240;
/** The room's own events, which nobody may send. */
export const ROOM_OWN_EVENTS = ["joined", "join", "leave", "count", "error", "kicked"];

const ROOM_NAME = /^[A-Za-z0-9_\-=@,.;:]{1,164}$/;

/**
 * Whether `name` is a valid room name (1…164 of `A–Z a–z 0–9 _ - = @ , . ; :`).
 * @param {string} name the name.
 * @returns {boolean} whether it is valid.
 */
export function isValidRoomName(name) { return ROOM_NAME.test(name); }

/**
 * Whether `event` may be sent into a room: 1…200 bytes, no control characters, no protocol
 * namespace, none of the room's own event names.
 * @param {string} event the name.
 * @returns {boolean} whether it is valid.
 */
export function isValidRoomEvent(event) {
  return event.length > 0 && new TextEncoder().encode(event).length <= 200 && !/[\u0000-\u001f\u007f]/.test(event)
    && !/^(bird|pusher)(_internal)?:/.test(event) && !ROOM_OWN_EVENTS.includes(event);
}

/**
 * What a gap's error message says is gone.
 * @param {import("./actions.js").RoomGap} gap the gap.
 * @returns {string} the words.
 */
function gapText(gap) {
  const parts = [];
  if (gap.previous) parts.push(`everything after id ${gap.previous.id} of the lost epoch ${gap.previous.epoch}`);
  if (gap.first !== undefined) parts.push(`ids ${gap.first}…${gap.last} of epoch ${gap.epoch}`);
  return parts.length ? parts.join(" and ") : "none of this epoch";
}

export class RoomMachine {
  /** @param {import("./connection-machine.js").ConnectionMachine} connection the owner machine. */
  constructor(connection) {
    this.connection = connection;
    /** @type {Map<string, RoomRecord>} in join order (the rejoin order). */
    this.records = new Map();
    /** @type {string[]} rooms waiting for the next auth request. */
    this.batch = [];
    this.batchArmed = false;
    /** @type {Map<number, AuthEntry>} auth requests in flight or waiting to retry. */
    this.authorizations = new Map();
    /** @type {Map<number, { room: string, generation: number }>} history requests in flight. */
    this.history = new Map();
    /** @type {{ pattern: string, token: RoomToken }[]} public grants. */
    this.grants = [];
  }

  /** @param {number} now @returns {number | null} the generation of a connected socket. */
  connectedGeneration(now) { void now; return this.connection.socketId === null ? null : this.connection.generation; }

  /**
   * The public grants of the backend's `config()`, received at `now`.
   * @param {import("./room-tokens.js").RoomGrants} config the grants.
   * @param {number} now the instant.
   */
  setGrants(config, now) {
    this.grants = (config.grants ?? []).map((grant) => ({ pattern: grant.pattern, token: makeToken(grant.token, grant.expires, config.time, now) }));
  }

  /**
   * `join(name)`: a new room (or a failed one again) starts joining.
   * @param {string} name the room.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  join(name, now) {
    const existing = this.records.get(name);
    if (existing && existing.phase.kind !== "failed") return [];
    const full = !existing && this.records.size >= MAX_ROOMS;
    /** @type {RoomRecord} */
    const record = existing ?? { phase: joining(), position: null, token: null, error: null, lastAuthAt: null, count: null, members: new Map(), key: null };
    Object.assign(record, { phase: joining(), error: null });
    this.records.set(name, record);
    if (full) return this.fail(name, { code: "too_many_rooms", message: `a client joins at most ${MAX_ROOMS} rooms (the server's limit per connection)` });
    if (!isValidRoomName(name)) return this.fail(name, { code: "invalid_room", message: "not a valid room name (1…164 of A–Z a–z 0–9 _ - = @ , . ; :)" });
    return this.startJoin(name, now);
  }

  /**
   * `leave(name)`: `room_leave` when joined or joining; the room is forgotten with its
   * position and token; history calls in flight end with `left`.
   * @param {string} name the room.
   * @returns {Action[]} the actions.
   */
  leave(name) {
    const record = this.records.get(name);
    if (!record) return [];
    /** @type {Action[]} */
    const actions = this.cancelTimers(name);
    const generation = socketOf(record);
    if (generation !== null) actions.push({ type: "send", text: this.frame_("room_leave", { room: name }), generation });
    this.batch = this.batch.filter((item) => item !== name);
    for (const [request, entry] of this.history) {
      if (entry.room !== name) continue;
      this.history.delete(request);
      actions.push({ type: "cancel", timer: timer("room_history", { request }) }, { type: "history", request, error: { code: "left", message: "the room was left" } });
    }
    this.records.delete(name);
    return actions;
  }

  /**
   * `room.send(event, data)`: only while joined.
   * @param {string} name the room.
   * @param {string} event the event name.
   * @param {string} text the data's JSON text.
   * @returns {{ error: RoomErrorInfo | null, actions: Action[] }} why nothing was sent, or the send.
   */
  send(name, event, text) {
    const phase = this.records.get(name)?.phase;
    if (!phase || phase.kind !== "joined" || phase.membership.generation !== this.connection.generation) {
      return { error: { code: "not_joined", message: "the room is not joined now" }, actions: [] };
    }
    if (!isValidRoomEvent(event)) return { error: { code: "not_allowed", message: `a reserved or invalid event name: ${event.slice(0, 64)}` }, actions: [] };
    const key = this.records.get(name)?.key;
    const box = this.connection.secretbox;
    const bytes = new TextEncoder().encode(text).length;
    // Sealed, the data grows by its MAC and base64 (and the nonce's 32 characters plus the
    // object's 30): refused before any sealing work when it cannot fit.
    const sealedBytes = key ? 4 * Math.ceil((bytes + 16) / 3) + 62 : bytes;
    if (sealedBytes > MAX_ROOM_DATA) return { error: { code: "bad_request", message: `data larger than ${MAX_ROOM_DATA} bytes${key ? " once sealed" : ""}` }, actions: [] };
    // A sealed room's data travels as {nonce, ciphertext} (docs/rooms-protocol.md "Sealed rooms").
    if (key && box) text = JSON.stringify(box.sealPayload(text, key));
    if (new TextEncoder().encode(text).length > MAX_ROOM_DATA) return { error: { code: "bad_request", message: `data larger than ${MAX_ROOM_DATA} bytes` }, actions: [] };
    return { error: null, actions: [{ type: "send", text: this.frame_("room_send", { room: name, event, data: text }), generation: phase.membership.generation }] };
  }

  /**
   * `room.history({ before, limit })`: a request on the current socket (room-history.js).
   * @param {string} name the room.
   * @param {number | undefined} before an event id, or none for the newest.
   * @param {number} limit 1…100.
   * @param {number} now the instant.
   * @returns {{ request: number, actions: Action[] }} the request and the actions.
   */
  requestHistory(name, before, limit, now) { return requestHistory(this, name, before, limit, now); }

  // Joining

  /**
   * Sends the join if connected with a usable token, else asks for one.
   * @param {string} name the room.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  startJoin(name, now) {
    const record = this.records.get(name);
    if (!record || record.phase.kind !== "joining") return [];
    const attempt = record.phase.attempt;
    if (record.token && now < record.token.keepUntil) {
      const generation = this.connectedGeneration(now);
      if (generation === null) { attempt.step = { kind: "waiting" }; return []; }
      return this.sendJoin(name, record.token, generation, now);
    }
    const grant = grantFor(this, name, now);
    if (grant) {
      record.token = grant;
      return [{ type: "schedule", timer: timer("room_token", { name }), at: grant.keepUntil }, ...this.startJoin(name, now)];
    }
    record.token = null;
    attempt.step = { kind: "needs_token" };
    return addToBatch(this, name, now);
  }

  /**
   * Sends `room_join` from the position (a rejoin while joined re-synchronises), with a
   * deadline for its `joined`.
   * @param {string} name the room.
   * @param {RoomToken} token the token.
   * @param {number} generation the socket.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  sendJoin(name, token, generation, now) {
    const record = this.records.get(name);
    if (!record) return [];
    /** @type {Record<string, unknown>} */
    const payload = { room: name, token: token.value };
    if (record.position) payload.since = { epoch: record.position.epoch, id: record.position.id };
    /** @type {Join} */
    const join = { generation, from: record.position ? { ...record.position } : null, gapTold: false };
    if (record.phase.kind === "joined") record.phase.membership.rejoin = { kind: "sent", join };
    else if (record.phase.kind === "joining") record.phase.attempt.step = { kind: "sent", join };
    else return [];
    return [{ type: "send", text: this.frame_("room_join", payload), generation },
      { type: "schedule", timer: timer("room_join", { name }), at: now + this.connection.config.authTimeout }];
  }

  /**
   * A token for `name`: a joined room sends it as `room_refresh` (or rejoins with it when it
   * waits to re-synchronise), anything else joins.
   * @param {string} name the room.
   * @param {RoomToken} token the token.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  tokenReceived(name, token, now) {
    const record = this.records.get(name);
    if (!record) return [];
    record.token = token;
    /** @type {Action} */
    const arm = { type: "schedule", timer: timer("room_token", { name }), at: token.keepUntil };
    const phase = record.phase;
    if (phase.kind === "joined" && phase.membership.generation === this.connection.generation) {
      const membership = phase.membership;
      membership.renewal = null;
      if (membership.rejoin !== null) return [arm, ...this.sendJoin(name, token, membership.generation, now)];
      return [{ type: "send", text: this.frame_("room_refresh", { room: name, token: token.value }), generation: membership.generation }, arm];
    }
    if (phase.kind !== "joining") return [arm];
    const generation = this.connectedGeneration(now);
    if (generation === null) { phase.attempt.step = { kind: "waiting" }; return [arm]; }
    return [arm, ...this.sendJoin(name, token, generation, now)];
  }

  /**
   * The handshake: every room waiting rejoins from its position.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  connected(now) {
    return [...this.records].flatMap(([name, record]) =>
      (record.phase.kind === "joining" && record.phase.attempt.step.kind === "waiting" ? this.startJoin(name, now) : []));
  }

  /** @returns {Action[]} the socket ended: rooms wait to rejoin (position and token kept); history requests end. */
  disconnected() {
    /** @type {Action[]} */
    const actions = [];
    for (const [name, record] of this.records) {
      const phase = record.phase;
      if (phase.kind === "failed") continue;
      // Nothing stays scheduled for a room without a socket (`disconnect()` leaves no timer):
      // the next `joined` arms the token's refresh again, the next handshake rejoins.
      actions.push(...this.cancelTimers(name));
      if (phase.kind === "joining") {
        // A token asked for is still awaited; anything else waits for the next handshake.
        if (phase.attempt.step.kind !== "authorizing") phase.attempt.step = { kind: "waiting" };
        continue;
      }
      // A member waits to rejoin from its position; a renewal asked for becomes the token the
      // rejoin waits for, one still in the batch is asked for with the rejoin's.
      const { renewal, resyncs, retries } = phase.membership;
      const next = joining({ resyncs, retries });
      if (renewal?.kind === "authorizing") next.attempt.step = renewal;
      else if (renewal?.kind === "needs_token" && this.batch.includes(name)) next.attempt.step = renewal;
      record.phase = next;
    }
    for (const request of this.history.keys()) {
      actions.push({ type: "cancel", timer: timer("room_history", { request }) },
        { type: "history", request, error: { code: "disconnected", message: "the connection dropped before the answer" } });
    }
    this.history.clear();
    return actions;
  }

  /**
   * The connection will not come back by itself (`failed`, `disconnect()`): the `ready()` of
   * every room still joining rejects with `disconnected`; the rooms stay joining, and join
   * after `connect()`.
   * @param {string} message why.
   * @returns {Action[]} the actions.
   */
  settleJoining(message) {
    return [...this.records].filter(([, record]) => record.phase.kind === "joining")
      .map(([room]) => ({ type: /** @type {const} */ ("settle_room"), room, error: { code: "disconnected", message } }));
  }

  /**
   * The room is over: `failed` with `error`, its token dropped, never rejoined until the app
   * joins it again.
   * @param {string} name the room.
   * @param {RoomErrorInfo} error why.
   * @param {boolean} [deliver] tell the room's `error` handlers.
   * @returns {Action[]} the actions.
   */
  fail(name, error, deliver = true) {
    const record = this.records.get(name);
    if (!record) return [];
    Object.assign(record, { phase: { kind: "failed" }, error, token: null });
    this.batch = this.batch.filter((item) => item !== name);
    /** @type {Action[]} */
    const actions = this.cancelTimers(name);
    if (deliver) actions.push({ type: "room_event", room: name, event: "error", data: error, meta: SYSTEM_META });
    actions.push({ type: "settle_room", room: name, error });
    return actions;
  }

  /**
   * @param {string} name the room.
   * @returns {Action[]} its timers disarmed.
   */
  cancelTimers(name) {
    return ["room_token", "room_retry", "room_join"].map((kind) => ({ type: "cancel", timer: timer(/** @type {any} */ (kind), { name }) }));
  }

  /**
   * Whether `name` still waits for the auth answer `request`.
   * @param {string} name the room.
   * @param {number} request the request.
   * @returns {boolean} whether it waits.
   */
  awaits(name, request) {
    const phase = this.records.get(name)?.phase;
    if (phase?.kind === "joining") return phase.attempt.step.kind === "authorizing" && phase.attempt.step.request === request;
    return phase?.kind === "joined" && phase.membership.renewal?.kind === "authorizing" && phase.membership.renewal.request === request;
  }

  /**
   * The auth route answered.
   * @param {number} request the request.
   * @param {import("./room-tokens.js").RoomAuthResult} result the answer.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  authorized(request, result, now) { return roomsAuthorized(this, request, result, now); }

  /**
   * A timer of the rooms fired.
   * @param {import("./actions.js").Timer} fired the timer.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  timerFired(fired, now) {
    const name = fired.name ?? "";
    const request = fired.request ?? 0;
    switch (fired.kind) {
      case "room_batch": return batchDue(this, now);
      case "room_auth": return roomsAuthorized(this, request, { ok: false, failure: { kind: "timeout", message: "no answer from the room auth route in time" } }, now);
      case "room_auth_retry": return authRetryDue(this, request, now);
      case "room_token": return tokenDue(this, name, now);
      case "room_retry": return this.retryDue(name, now);
      case "room_join": return this.joinTimedOut(name, now);
      case "room_history":
        if (!this.history.delete(request)) return [];
        return [{ type: "history", request, error: { code: "timed_out", message: `no history page within ${this.connection.config.authTimeout} ms` } }];
      default: return [];
    }
  }

  /**
   * A join's deadline passed with no `joined`: retried with backoff (then `timed_out`); an
   * unanswered rejoin for a hole is given up and told (`not_recovered`). A join whose replay
   * moved the position since it was sent (or since the last deadline) is still coming: the
   * deadline is armed again (docs/rooms-protocol.md "Replay": a long replay is streamed).
   * @param {string} name the room.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  joinTimedOut(name, now) {
    const record = this.records.get(name);
    if (!record || this.connection.generation === null) return [];
    const join = joinInFlight(record);
    if (!join) return [];
    const from = join.from;
    if (record.position && (!from || from.epoch !== record.position.epoch || from.id !== record.position.id)) {
      join.from = { ...record.position };
      return [{ type: "schedule", timer: timer("room_join", { name }), at: now + this.connection.config.authTimeout }];
    }
    const phase = record.phase;
    if (phase.kind === "joining") {
      const error = { code: "timed_out", message: `no joined within ${this.connection.config.authTimeout} ms` };
      if (phase.attempt.retries >= MAX_JOIN_RETRIES) return this.fail(name, error);
      phase.attempt.retries += 1;
      phase.attempt.step = { kind: "waiting" };
      return [{ type: "schedule", timer: timer("room_retry", { name }), at: now + retryDelay(phase.attempt.retries) }];
    }
    if (phase.kind === "joined") {
      phase.membership.rejoin = null;
      phase.membership.resyncs = MAX_RESYNCS;
      return [this.notRecovered(name, "the rejoin was not answered")];
    }
    return [];
  }

  /**
   * A retry timer fired (after a refusal to retry, a timeout or the 5 s auth interval).
   * @param {string} name the room.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  retryDue(name, now) {
    const phase = this.records.get(name)?.phase;
    if (phase?.kind === "joining" && phase.attempt.step.kind === "waiting" && this.connection.socketId !== null) return this.startJoin(name, now);
    // A renewal's retry shares the timer with a rejoin put off by a refusal: both are made.
    if (phase?.kind === "joined" && phase.membership.renewal !== null) {
      return [...addToBatch(this, name, now), ...(phase.membership.rejoin?.kind === "put_off" ? this.resync(name, now) : [])];
    }
    // None when a token that came meanwhile already made the rejoin put off.
    if (phase?.kind === "joined" && (phase.membership.rejoin === null || phase.membership.rejoin.kind === "put_off")) return this.resync(name, now);
    return [];
  }

  /**
   * Rejoins from the position on the same socket (the server answers with the replay and
   * `joined`, without a second membership); at most `MAX_RESYNCS` in a row.
   * @param {string} name the room.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  resync(name, now) {
    const record = this.records.get(name);
    const generation = this.connection.generation;
    if (!record || record.phase.kind !== "joined" || generation === null) return [];
    const membership = record.phase.membership;
    if (membership.resyncs >= MAX_RESYNCS) return [];
    membership.resyncs += 1;
    if (record.token && now < record.token.keepUntil) return this.sendJoin(name, record.token, generation, now);
    membership.rejoin = { kind: "awaiting_token" };
    if (membership.renewal !== null) return [];
    membership.renewal = { kind: "needs_token" };
    return addToBatch(this, name, now);
  }

  /**
   * Tells the room that the events it missed will not come (`not_recovered`): with a gap,
   * exactly which (the app fetches that range), else the app fetches state
   * (docs/rooms-protocol.md "Replay": never silent).
   * @param {string} name the room.
   * @param {string} reason why.
   * @param {import("./actions.js").RoomGap | null} [gap] the server's gap, told before the replay of what is kept.
   * @returns {Action} the room's `error` event.
   */
  notRecovered(name, reason, gap = null) {
    /** @type {RoomErrorInfo} */
    const error = gap
      ? { code: "not_recovered", message: `events missed while away are gone (${reason}): ${gapText(gap)}; what is still kept follows`, reason, gap }
      : { code: "not_recovered", message: `events missed while away cannot be replayed (${reason}): fetch the room's state`, reason };
    const record = this.records.get(name);
    if (record) record.error = error;
    return { type: "room_event", room: name, event: "error", data: error, meta: SYSTEM_META };
  }

  /**
   * @param {string} name the bare protocol name.
   * @param {unknown} payload the payload.
   * @returns {string} the frame's text.
   */
  frame_(name, payload) { return JSON.stringify({ event: `${this.connection.config.namespace}:${name}`, data: JSON.stringify(payload) }); }

  /**
   * A `room_event` or `room_history` frame (room-frames.js).
   * @param {import("./protocol.js").Frame} frame the frame.
   * @param {"room_event" | "room_history"} name which.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  frame(frame, name, now) { return roomFrame(this, frame, name, now); }
}

