// History requests on the room machine (rooms seed, "Paging back"; docs/rooms-protocol.md
// `room_history`): at most 16 in flight on a connection, each answered or failed within the
// auth timeout, and ended with `disconnected` when the socket drops.

import { timer } from "./actions.js";
import { decodeBinary } from "./protocol.js";

/** @typedef {import("./actions.js").Action} Action */
/** @typedef {import("./room-machine.js").RoomMachine} RoomMachine */

/** History requests in flight on one connection. */
export const MAX_HISTORY_IN_FLIGHT = 16;

/**
 * `room.history({ before, limit })`: a request on the current socket, answered by a
 * `history` action.
 * @param {RoomMachine} rooms the machine.
 * @param {string} name the room.
 * @param {number | undefined} before an event id, or none for the newest.
 * @param {number} limit 1…100.
 * @param {number} now the instant.
 * @returns {{ request: number, actions: Action[] }} the request and the actions.
 */
export function requestHistory(rooms, name, before, limit, now) {
  const request = rooms.connection.nextRequest();
  /** @param {string} code @param {string} message @returns {{ request: number, actions: Action[] }} */
  const refuse = (code, message) => ({ request, actions: [{ type: "history", request, error: { code, message } }] });
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) return refuse("bad_request", `a limit of 1…100, not ${limit}`);
  const phase = rooms.records.get(name)?.phase;
  if (!phase || phase.kind !== "joined" || phase.membership.generation !== rooms.connection.generation) return refuse("not_joined", "the room is not joined now");
  const generation = phase.membership.generation;
  if (rooms.history.size >= MAX_HISTORY_IN_FLIGHT) return refuse("rate_limited", `${MAX_HISTORY_IN_FLIGHT} history requests are in flight`);
  /** @type {Record<string, unknown>} */
  const payload = { room: name, request: `h${request}`, limit };
  if (before !== undefined && before !== null) payload.before = before;
  rooms.history.set(request, { room: name, generation });
  return { request, actions: [{ type: "send", text: rooms.frame_("room_history", payload), generation },
    { type: "schedule", timer: timer("room_history", { request }), at: now + rooms.connection.config.authTimeout }] };
}

/**
 * A history page (or its error) for a request of this client.
 * @param {RoomMachine} rooms the machine.
 * @param {string} room the room.
 * @param {Record<string, any>} page `{events, more, request}` or `{error, request}`.
 * @returns {Action[]} the actions.
 */
export function historyAnswered(rooms, room, page) {
  const request = typeof page.request === "string" && page.request.startsWith("h") ? Number(page.request.slice(1)) : NaN;
  const entry = rooms.history.get(request);
  if (!entry || entry.room !== room) return rooms.connection.protocolError("a room_history answer to no request of this client, ignored");
  rooms.history.delete(request);
  /** @type {Action[]} */
  const actions = [{ type: "cancel", timer: timer("room_history", { request }) }];
  if (page.error) return actions.concat({ type: "history", request, error: { code: String(page.error.code ?? "unknown"), message: String(page.error.message ?? "") } });
  if (!Array.isArray(page.events)) return actions.concat({ type: "history", request, error: { code: "bad_data", message: "a history page without events" } });
  const events = [];
  const record = rooms.records.get(room) ?? { key: null };
  for (const item of page.events) {
    if (!item?.meta || !Number.isSafeInteger(item.meta.id)) return actions.concat({ type: "history", request, error: { code: "bad_data", message: "a history event without meta" } });
    const data = openData(rooms, record, item.data);
    if (data === UNOPENED) return actions.concat({ type: "history", request, error: { code: "bad_data", message: `event ${item.meta.id} of a sealed room does not open with the room's key` } });
    events.push({ event: String(item.event), data,
      meta: { id: item.meta.id, at: Number(item.meta.at) || 0, from: typeof item.meta.from === "string" ? item.meta.from : null, replayed: false } });
  }
  return actions.concat({ type: "history", request, page: { events, more: page.more === true } });
}

/** What `openData` gives for a sealed event that does not open. */
export const UNOPENED = Symbol("unopened");

/**
 * A kept event's data for the app: a sealed room's opened first (its `{nonce, ciphertext}`),
 * then `{"$binary"}` values decoded.
 * @param {RoomMachine} rooms the machine.
 * @param {{ key: Uint8Array | null }} record the room.
 * @param {unknown} data the event's data as the server sent it.
 * @returns {unknown} the data, or `UNOPENED`.
 */
export function openData(rooms, record, data) {
  if (!record.key) return decodeBinary(data);
  const text = rooms.connection.secretbox?.openPayload(data, record.key);
  if (typeof text !== "string") return UNOPENED;
  try { return decodeBinary(JSON.parse(text)); } catch { return UNOPENED; }
}
