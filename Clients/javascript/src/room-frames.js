// Room frames from the server (docs/rooms-protocol.md "Server to client", "Replay"; the Swift
// client's `ConnectionStateMachine+RoomFrames`): kept events against the room's position,
// the room's own events (`joined`, members, `count`, `kicked`, `error`) and history pages.

import { SYSTEM_META, timer } from "./actions.js";
import { parseObject } from "./protocol.js";
import { historyAnswered, openData, UNOPENED } from "./room-history.js";
import { joining, joinInFlight, socketOf } from "./room-machine.js";

/** @typedef {import("./actions.js").Action} Action */
/** @typedef {import("./room-machine.js").RoomMachine} RoomMachine */
/** @typedef {import("./room-machine.js").RoomRecord} RoomRecord */

/** Rejoins for holes before a clean `joined` resets the count. */
export const MAX_RESYNCS = 3;
/** Join refusals retried with backoff (`rate_limited`, `store_full`, no answer) before the room fails. */
export const MAX_JOIN_RETRIES = 6;
/** Most presence members listed per room (the server's cap is 1,000). */
export const MAX_ROOM_MEMBERS = 10000;
/** Codes that refuse a token: one new token is asked for, a second refusal is final. */
const TOKEN_CODES = ["expired", "bad_signature", "invalid_token"];

/**
 * The wait before retrying a refused or unanswered join: 2, 4, 8 … s, at most 30 s.
 * @param {number} retries retries so far (1 for the first).
 * @returns {number} milliseconds.
 */
export function retryDelay(retries) { return Math.min(1000 * 2 ** Math.min(retries, 5), 30000); }

/**
 * A `room_event` or `room_history` frame.
 * @param {RoomMachine} rooms the machine.
 * @param {import("./protocol.js").Frame} frame the frame.
 * @param {"room_event" | "room_history"} name which.
 * @param {number} now the instant.
 * @returns {Action[]} the actions.
 */
export function roomFrame(rooms, frame, name, now) {
  const room = frame.channel ?? "";
  const record = rooms.records.get(room);
  // A frame for a room the app left: events in flight when it left are not wanted.
  if (!record) return [];
  const payload = parseObject(frame.data);
  if (!payload) return rooms.connection.protocolError(`${frame.event} for ${room} without an object, ignored`);
  if (name === "room_history") return historyAnswered(rooms, room, payload);
  if (typeof payload.event !== "string") return rooms.connection.protocolError(`a room_event for ${room} that is not {event, data, meta?}, ignored`);
  const generation = rooms.connection.generation;
  // An answer to a join made on an older socket (or none sent yet), or a room that failed.
  if (generation === null || socketOf(record) !== generation) return [];
  if (payload.meta && typeof payload.meta === "object") return keptEvent(rooms, room, record, payload, now);
  return ownEvent(rooms, room, record, payload, generation, now);
}

/**
 * A kept event: an id not after the position is a duplicate (dropped); an id past the next
 * is a hole (rejoin from the position); the position moves before any handler runs.
 * @param {RoomMachine} rooms the machine.
 * @param {string} room the room.
 * @param {RoomRecord} record its record.
 * @param {Record<string, any>} payload `{event, data, meta: {id, at, from, replayed?}}`.
 * @param {number} now the instant.
 * @returns {Action[]} the actions.
 */
function keptEvent(rooms, room, record, payload, now) {
  const meta = payload.meta;
  const id = meta.id;
  if (!Number.isSafeInteger(id) || id < 1) return rooms.connection.protocolError(`a kept event for ${room} without an id, ignored`);
  if (!record.position) return rooms.connection.protocolError(`a kept event for ${room} before joined, ignored`);
  if (id <= record.position.id) return [];
  /** @type {Action[]} */
  const actions = [];
  if (id !== record.position.id + 1) {
    if (record.phase.kind !== "joined" || record.phase.membership.rejoin !== null) return [];
    if (record.phase.membership.resyncs < MAX_RESYNCS) return rooms.resync(room, now);
    // Rejoins have not closed the gaps: the room is told, and events flow again from here.
    actions.push(rooms.notRecovered(room, `the server kept skipping event ids (${record.position.id + 1}…${id - 1} missing)`));
  }
  record.position.id = id;
  const from = typeof meta.from === "string" ? meta.from : null;
  const data = openData(rooms, record, payload.data);
  // Kept (the position moved past it), but unreadable: told on the room, never delivered as something else.
  if (data === UNOPENED) {
    return actions.concat({ type: "room_event", room, event: "error", meta: SYSTEM_META,
      data: { code: "bad_data", message: `event ${id} of a sealed room does not open with the room's key` } });
  }
  return actions.concat({ type: "room_event", room, event: payload.event, data,
    meta: { id, at: Number(meta.at) || 0, from, replayed: meta.replayed === true, epoch: record.position.epoch } });
}

/**
 * A `gap` event's data read strictly: `{reason, epoch, first?, last?, before?, previous?}`.
 * @param {Record<string, any>} data the data.
 * @returns {import("./actions.js").RoomGap | null} the gap, or null when it is not that shape.
 */
export function readGap(data) {
  const id = (/** @type {unknown} */ value) => Number.isSafeInteger(value) && /** @type {number} */ (value) >= 0;
  if (typeof data.reason !== "string" || typeof data.epoch !== "string" || data.epoch === "") return null;
  const hasFirst = data.first !== undefined, hasLast = data.last !== undefined;
  if (hasFirst !== hasLast || (hasFirst && !(id(data.first) && id(data.last) && data.first >= 1 && data.first <= data.last))) return null;
  if (data.before !== undefined && !id(data.before)) return null;
  /** @type {import("./actions.js").RoomGap} */
  const gap = { reason: data.reason, epoch: data.epoch };
  if (hasFirst) { gap.first = data.first; gap.last = data.last; }
  if (data.before !== undefined) gap.before = data.before;
  if (data.previous !== undefined) {
    const previous = data.previous;
    if (!previous || typeof previous !== "object" || typeof previous.epoch !== "string" || !id(previous.id)) return null;
    gap.previous = { epoch: previous.epoch, id: previous.id };
  }
  return gap;
}

/**
 * `gap`, before the replay of a rejoin from the position (docs/rooms-protocol.md "Replay"):
 * the room is told exactly which events will not come (`not_recovered` with the gap), and the
 * position moves past them so the replay that follows is in order.
 * @param {RoomMachine} rooms the machine.
 * @param {string} room the room.
 * @param {RoomRecord} record its record.
 * @param {Record<string, any>} data the gap's data.
 * @returns {Action[]} the actions.
 */
function gap(rooms, room, record, data) {
  const join = joinInFlight(record);
  const position = record.position;
  if (!join || !position) return rooms.connection.protocolError(`a gap for ${room} with no rejoin from a position asked, ignored`);
  const told = readGap(data);
  if (!told) return rooms.connection.protocolError(`a gap for ${room} that is not {reason, epoch, first?, last?, before?, previous?}, ignored`);
  // A gap starts right after the position: the next id in the same epoch; in a new one, after
  // the position it names as lost (an old or forged gap could skip or repeat events).
  const follows = told.epoch === position.epoch
    ? told.first === position.id + 1
    : told.previous !== undefined && told.previous.epoch === position.epoch && told.previous.id === position.id && (told.first ?? 1) === 1;
  if (!follows) return rooms.connection.protocolError(`a gap for ${room} that does not start at its position ${position.epoch}/${position.id}, ignored`);
  const resume = { epoch: told.epoch, id: told.last ?? (position.epoch === told.epoch ? position.id : 0) };
  record.position = resume;
  join.gapTold = true;
  return [rooms.notRecovered(room, told.reason, told)];
}


/**
 * The room's own events: `joined`, `join`, `leave`, `count`, `kicked`, `error`, and `gap`.
 * @param {RoomMachine} rooms the machine.
 * @param {string} room the room.
 * @param {RoomRecord} record its record.
 * @param {Record<string, any>} payload `{event, data}`.
 * @param {number} generation the socket.
 * @param {number} now the instant.
 * @returns {Action[]} the actions.
 */
function ownEvent(rooms, room, record, payload, generation, now) {
  const data = payload.data && typeof payload.data === "object" ? payload.data : {};
  /** @type {Action} */
  const delivery = { type: "room_event", room, event: payload.event, data, meta: SYSTEM_META };
  switch (payload.event) {
    case "joined": return joined(rooms, room, record, data, generation, now);
    case "join":
      if (typeof data.id === "string" && (record.members.has(data.id) || record.members.size < MAX_ROOM_MEMBERS)) record.members.set(data.id, data.info);
      return [delivery];
    case "leave":
      if (typeof data.id === "string") record.members.delete(data.id);
      return [delivery];
    case "count":
      if (Number.isSafeInteger(data.n) && data.n >= 0) record.count = data.n;
      return [delivery];
    case "kicked": return [delivery, ...rooms.fail(room, { code: "kicked", message: data.reason ?? "removed by the app's server" }, false)];
    case "error": return roomError(rooms, room, record, data, delivery, now);
    case "gap": return gap(rooms, room, record, data);
    default: return rooms.connection.protocolError(`a room_event ${String(payload.event).slice(0, 64)} for ${room} without meta, ignored`);
  }
}

/**
 * `joined`: the room's position after any replay. With `recovered: false`, or a position
 * the replay did not reach, the room is told (`not_recovered`).
 * @param {RoomMachine} rooms the machine.
 * @param {string} room the room.
 * @param {RoomRecord} record its record.
 * @param {Record<string, any>} data `{epoch, id, count, members?, recovered?, reason?}`.
 * @param {number} generation the socket.
 * @param {number} now the instant.
 * @returns {Action[]} the actions.
 */
function joined(rooms, room, record, data, generation, now) {
  if (typeof data.epoch !== "string" || !Number.isSafeInteger(data.id) || data.id < 0) return rooms.connection.protocolError(`joined for ${room} without epoch and id, ignored`);
  // No join was asked: a position from it could move the room backwards.
  const join = joinInFlight(record);
  if (!join) return rooms.connection.protocolError(`joined for ${room} with no join asked, ignored`);
  const phase = record.phase;
  // What the join learned on the way, carried into the membership.
  const resyncs = phase.kind === "joining" ? phase.attempt.resyncs : phase.kind === "joined" ? phase.membership.resyncs : 0;
  const renewal = phase.kind === "joined" ? phase.membership.renewal : null;
  /** @type {Action[]} */
  const actions = [{ type: "cancel", timer: timer("room_join", { name: room }) }];
  const current = { epoch: data.epoch, id: data.id };
  let lost = null;
  const position = record.position;
  if (position) {
    if (data.recovered === false && !join.gapTold) lost = typeof data.reason === "string" ? data.reason : "unknown";
    else if (join.gapTold && position.epoch === current.epoch && position.id === current.id) {
      // Told already, with its ids, when the server sent the gap before the replay.
    } else if (position.epoch === current.epoch && position.id < current.id) {
      // The replay stopped short of the room's position: a hole.
      if (resyncs < MAX_RESYNCS) {
        record.phase = { kind: "joined", membership: { generation, resyncs, retries: 0, renewal, rejoin: null } };
        return actions.concat(rooms.resync(room, now));
      }
      lost = "the replay kept skipping events";
    } else if (position.epoch !== current.epoch || position.id !== current.id) {
      lost = position.epoch === current.epoch ? "unknown_position" : "epoch_changed";
    }
  }
  const wasJoined = phase.kind === "joined";
  record.position = current;
  record.phase = { kind: "joined", membership: { generation, resyncs: 0, retries: 0, renewal, rejoin: null } };
  if (Number.isSafeInteger(data.count) && data.count >= 0) record.count = data.count;
  if (Array.isArray(data.members)) {
    record.members = new Map();
    for (const member of data.members.slice(0, MAX_ROOM_MEMBERS)) if (typeof member?.id === "string") record.members.set(member.id, member.info);
  }
  // The token's refresh is armed while joined only (the socket's end disarms it).
  if (record.token) actions.push({ type: "schedule", timer: timer("room_token", { name: room }), at: record.token.keepUntil });
  actions.push({ type: "room_event", room, event: "joined", data, meta: SYSTEM_META });
  if (lost !== null) actions.push(rooms.notRecovered(room, lost));
  if (!wasJoined) actions.push({ type: "settle_room", room, error: null });
  return actions;
}

/**
 * A room `error`: token refusals ask for one new token, `rate_limited`/`store_full` joins
 * retry with backoff, `resync`/`not_joined` while joined rejoin from the position, other
 * refusals of a join end the room; a refused send or refresh leaves the membership.
 * @param {RoomMachine} rooms the machine.
 * @param {string} room the room.
 * @param {RoomRecord} record its record.
 * @param {Record<string, any>} data `{code, message}`.
 * @param {Action} delivery the `error` event for the room's handlers.
 * @param {number} now the instant.
 * @returns {Action[]} the actions.
 */
function roomError(rooms, room, record, data, delivery, now) {
  const code = typeof data.code === "string" ? data.code : "unknown";
  const error = { code, message: typeof data.message === "string" ? data.message : "" };
  const phase = record.phase;
  const membership = phase.kind === "joined" ? phase.membership : null;
  const attempt = phase.kind === "joining" ? phase.attempt : null;
  // A join of this room is answered: an attempt's, or a member's rejoin.
  const awaited = attempt !== null || membership?.rejoin != null;
  if (code === "expired" || (awaited && TOKEN_CODES.includes(code))) {
    if (attempt?.tokenRefused) return [delivery, ...rooms.fail(room, error, false)];
    record.token = null;
    record.phase = joining({ tokenRefused: true, retries: attempt?.retries ?? membership?.retries ?? 0, resyncs: attempt?.resyncs ?? membership?.resyncs ?? 0 });
    return [delivery, ...rooms.startJoin(room, now)];
  }
  if (awaited && (code === "rate_limited" || code === "store_full")) {
    const counted = attempt ?? /** @type {import("./room-machine.js").Membership} */ (membership);
    if (counted.retries >= MAX_JOIN_RETRIES) return [delivery, ...rooms.fail(room, error, false)];
    counted.retries += 1;
    if (attempt) attempt.step = { kind: "waiting" };
    // Put off, not forgotten: the retry timer makes it (a renewal's retry shares that timer).
    if (membership) membership.rejoin = { kind: "put_off" };
    return [delivery, { type: "schedule", timer: timer("room_retry", { name: room }), at: now + retryDelay(counted.retries) }];
  }
  if (code === "resync" && membership) {
    if (membership.rejoin !== null) return [delivery];
    membership.resyncs = 0;
    return [delivery, ...rooms.resync(room, now)];
  }
  if (code === "not_joined" && membership) return [delivery, ...rooms.resync(room, now)];
  if (!awaited || membership) return [delivery];
  return [delivery, ...rooms.fail(room, error, false)];
}
