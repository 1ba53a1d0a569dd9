// Room tokens (docs/rooms-protocol.md "Tokens", "Auth route", "What a client does"): every
// room joined in the same moment goes into one auth request (rooms seed), each token is kept
// until 10 minutes before it expires in the server's time, a joined room refreshes its token
// then, and public rooms join with the grants of the backend's `config()`.

import { timer } from "./actions.js";

/** @typedef {import("./actions.js").Action} Action */
/** @typedef {import("./actions.js").AuthFailure} AuthFailure */
/** @typedef {import("./room-machine.js").RoomMachine} RoomMachine */

/**
 * A token the client keeps; tokens are not bound to a connection, so a reconnect reuses one
 * until `keepUntil`.
 * @typedef {object} RoomToken
 * @property {string} value the JWT.
 * @property {number} keepUntil when the client stops using it, on its own clock (milliseconds).
 */

/**
 * The auth route's answer (docs/rooms-protocol.md "Auth route"): `time` and `expires` are
 * milliseconds on the backend's clock.
 * @typedef {object} RoomAuthAnswer
 * @property {number} time the backend's clock when it answered.
 * @property {Record<string, { token?: string, expires?: number, key?: string, error?: string }>} rooms per room.
 */

/**
 * The backend's `config()` (rooms seed, "Rooms anyone may join"): a grant per public pattern.
 * @typedef {object} RoomGrants
 * @property {number} time the backend's clock, milliseconds since 1970.
 * @property {{ pattern: string, token: string, expires: number }[]} grants one per public pattern.
 */

/** @typedef {{ ok: true, answer: RoomAuthAnswer } | { ok: false, failure: AuthFailure }} RoomAuthResult */

/** Tokens are given up this long before they expire (rooms seed: "until 10 minutes before it expires"). */
export const TOKEN_MARGIN = 600000;
/** The longest life a token is read as having (30 days): a later `expires` is read as this. */
export const LONGEST_TOKEN_LIFE = 30 * 86400000;
/** The shortest time between two auth requests for one room (5 s, as the Swift client). */
export const MINIMUM_AUTH_INTERVAL = 5000;
/** Most rooms one auth request names (the route's limit, and the server's rooms per connection). */
export const MAX_ROOMS_PER_REQUEST = 100;
/** Tries of one batch before its rooms fail with `auth_failed`. */
export const MAX_AUTH_ATTEMPTS = 5;
/** The longest token accepted (8 KiB, the server's limit). */
export const MAX_TOKEN_LENGTH = 8192;

/**
 * A token whose expiry is `expires` on a clock that read `time` when it answered, received at
 * `now`: the remaining life is measured on the server's clock, so the client's own clock does
 * not matter; the token is kept until `expires − min(10 min, life / 2)`.
 * @param {string} value the JWT.
 * @param {number} expires expiry, milliseconds on the backend's clock.
 * @param {number} time the backend's clock when it answered.
 * @param {number} now the client's clock when the answer arrived.
 * @returns {RoomToken} the token.
 */
export function makeToken(value, expires, time, now) {
  const life = Math.min(Math.max(0, expires - time), LONGEST_TOKEN_LIFE);
  return { value, keepUntil: now + life - Math.min(TOKEN_MARGIN, life / 2) };
}

/**
 * The rule a room token carries (its claims read without checking the signature: the server
 * checks it; the client only learns whether the room is sealed).
 * @param {string} token an HS256 JWT.
 * @returns {{ sealed?: unknown } | null} the `rule` claim, or `null` when it cannot be read.
 */
export function tokenRule(token) {
  try {
    const claims = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    return claims && typeof claims.rule === "object" ? claims.rule : null;
  } catch {
    return null;
  }
}

/**
 * Whether a room name matches a pattern such as `order:{id}` (`{param}` stands for one
 * segment: one or more name characters other than `:`).
 * @param {string} name the room name.
 * @param {string} pattern the pattern.
 * @returns {boolean} whether it matches.
 */
export function matchesPattern(name, pattern) {
  const source = pattern.split(/\{[^}]*\}/).map((part) => part.replace(/[.*+?^$()|[\]\\]/g, "\\$&")).join("[A-Za-z0-9_\\-=@,.;]+");
  return new RegExp(`^${source}$`).test(name);
}

/**
 * Puts a room in the next batch (at most one auth request per room every 5 s).
 * @param {RoomMachine} rooms the machine.
 * @param {string} name the room.
 * @param {number} now the instant.
 * @returns {Action[]} the actions.
 */
export function addToBatch(rooms, name, now) {
  const record = rooms.records.get(name);
  if (!record) return [];
  if (record.lastAuthAt !== null && now < record.lastAuthAt + MINIMUM_AUTH_INTERVAL) {
    if (record.phase.kind === "joining" && record.phase.attempt.step.kind === "needs_token") record.phase.attempt.step = { kind: "waiting" };
    return [{ type: "schedule", timer: timer("room_retry", { name }), at: record.lastAuthAt + MINIMUM_AUTH_INTERVAL }];
  }
  if (!rooms.batch.includes(name)) rooms.batch.push(name);
  if (rooms.batchArmed) return [];
  rooms.batchArmed = true;
  return [{ type: "schedule", timer: timer("room_batch"), at: now + rooms.connection.config.roomAuthBatchWindow }];
}

/**
 * The batching window closed: one request per 100 rooms.
 * @param {RoomMachine} rooms the machine.
 * @param {number} now the instant.
 * @returns {Action[]} the actions.
 */
export function batchDue(rooms, now) {
  rooms.batchArmed = false;
  const names = rooms.batch.filter((name) => {
    const phase = rooms.records.get(name)?.phase;
    return (phase?.kind === "joining" && phase.attempt.step.kind === "needs_token") || (phase?.kind === "joined" && phase.membership.renewal !== null);
  });
  rooms.batch = [];
  /** @type {Action[]} */
  const actions = [];
  for (let start = 0; start < names.length; start += MAX_ROOMS_PER_REQUEST) {
    const chunk = names.slice(start, start + MAX_ROOMS_PER_REQUEST);
    for (const name of chunk) { const record = rooms.records.get(name); if (record) record.lastAuthAt = now; }
    actions.push(...ask(rooms, { names: chunk, attempt: 1, retriedUnauthorized: false }, now));
  }
  return actions;
}

/**
 * Sends one auth request, with its deadline.
 * @param {RoomMachine} rooms the machine.
 * @param {import("./room-machine.js").AuthEntry} entry the rooms and tries.
 * @param {number} now the instant.
 * @param {number} [delay] wait before asking (a retry), in milliseconds.
 * @returns {Action[]} the actions.
 */
function ask(rooms, entry, now, delay) {
  if (!entry.names.length) return [];
  const request = rooms.connection.nextRequest();
  rooms.authorizations.set(request, entry);
  for (const name of entry.names) {
    const phase = rooms.records.get(name)?.phase;
    if (phase?.kind === "joining") phase.attempt.step = { kind: "authorizing", request };
    else if (phase?.kind === "joined") phase.membership.renewal = { kind: "authorizing", request };
  }
  if (delay !== undefined) return [{ type: "schedule", timer: timer("room_auth_retry", { request }), at: now + delay }];
  return [{ type: "schedule", timer: timer("room_auth", { request }), at: now + rooms.connection.config.authTimeout },
    { type: "authorize_rooms", rooms: entry.names, request }];
}

/**
 * A retry timer of the auth route fired.
 * @param {RoomMachine} rooms the machine.
 * @param {number} request the request.
 * @param {number} now the instant.
 * @returns {Action[]} the actions.
 */
export function authRetryDue(rooms, request, now) {
  const entry = rooms.authorizations.get(request);
  if (!entry) return [];
  rooms.authorizations.delete(request);
  entry.names = entry.names.filter((name) => rooms.awaits(name, request));
  return ask(rooms, entry, now);
}

/**
 * The auth route answered (or failed, or timed out) for `request`. A 401 is asked once more;
 * a 403, and any other 4xx but 408 and 429, fails every room of the request; other failures
 * are retried after 1, 2, 4, 8 s, then the rooms fail (docs/rooms-protocol.md "Tokens").
 * @param {RoomMachine} rooms the machine.
 * @param {number} request the request.
 * @param {RoomAuthResult} result the answer.
 * @param {number} now the instant.
 * @returns {Action[]} the actions.
 */
export function roomsAuthorized(rooms, request, result, now) {
  const entry = rooms.authorizations.get(request);
  if (!entry) return [];
  rooms.authorizations.delete(request);
  const names = entry.names.filter((name) => rooms.awaits(name, request));
  /** @type {Action[]} */
  const actions = [{ type: "cancel", timer: timer("room_auth", { request }) }, { type: "cancel_request", request }];
  const failAll = (/** @type {string} */ code, /** @type {string} */ message) =>
    names.flatMap((name) => rooms.fail(name, { code, message }));
  if (result.ok) {
    const answer = result.answer;
    for (const name of names) actions.push(...entryReceived(rooms, name, answer, now));
    return actions;
  }
  const { failure } = result;
  const status = failure.status ?? 0;
  if (failure.kind === "http" && status === 401 && !entry.retriedUnauthorized) {
    return actions.concat(ask(rooms, { ...entry, names, retriedUnauthorized: true }, now));
  }
  if (failure.kind === "http" && status === 401) return actions.concat(failAll("unauthorized", `the auth route answered 401 twice: ${failure.message}`));
  if (failure.kind === "http" && status === 403) return actions.concat(failAll("forbidden", `the auth route answered 403: ${failure.message}`));
  if (failure.kind === "http" && status >= 400 && status < 500 && status !== 408 && status !== 429) {
    return actions.concat(failAll("auth_failed", `the auth route answered ${status}: ${failure.message}`));
  }
  if (failure.kind === "not_configured") return actions.concat(failAll("auth_failed", failure.message));
  if (entry.attempt >= MAX_AUTH_ATTEMPTS) return actions.concat(failAll("auth_failed", `${failure.message} (after ${entry.attempt} tries)`));
  const delay = Math.min(1000 * 2 ** (entry.attempt - 1), 30000);
  return actions.concat(ask(rooms, { ...entry, names, attempt: entry.attempt + 1 }, now, delay));
}

/**
 * One room's entry of a successful answer.
 * @param {RoomMachine} rooms the machine.
 * @param {string} name the room.
 * @param {RoomAuthAnswer} answer the answer.
 * @param {number} now the instant.
 * @returns {Action[]} the actions.
 */
function entryReceived(rooms, name, answer, now) {
  const record = rooms.records.get(name);
  if (!record) return [];
  if (record.phase.kind === "joined") record.phase.membership.renewal = null;
  const granted = answer.rooms?.[name];
  if (!granted || typeof granted !== "object") return rooms.fail(name, { code: "auth_failed", message: "the auth route's answer has no entry for the room" });
  if (typeof granted.error === "string") return rooms.fail(name, { code: granted.error, message: "the auth route refused the room" });
  if (typeof granted.token !== "string" || !granted.token || granted.token.length > MAX_TOKEN_LENGTH || typeof granted.expires !== "number") {
    return rooms.fail(name, { code: "auth_failed", message: "the auth route's entry has neither a token with its expiry nor an error" });
  }
  // A sealed room's key (`null` written by some backends for "none"). A key once held is never
  // dropped by a later entry without one, and a token whose rule says sealed needs one: a room
  // never turns back to plaintext on an answer that forgot it.
  const given = granted.key ?? undefined;
  const box = rooms.connection.secretbox;
  const key = given === undefined ? record.key : box && typeof given === "string" ? box.fromBase64(given) : null;
  if (given !== undefined && !box) return rooms.fail(name, { code: "not_supported", message: "the decryption module (secretbox.js) did not load: a sealed room cannot be read" });
  if (given !== undefined && key?.length !== box?.KEY_BYTES) return rooms.fail(name, { code: "auth_failed", message: "a sealed room's entry without a 32-byte base64 key" });
  if (!key && tokenRule(granted.token)?.sealed === true) return rooms.fail(name, { code: "auth_failed", message: "the token is for a sealed room, and the entry has no key" });
  record.key = key;
  const token = makeToken(granted.token, granted.expires, Number(answer.time) || 0, now);
  if (now >= token.keepUntil) return rooms.fail(name, { code: "expired", message: "the auth route gave a token that expires at once" });
  return rooms.tokenReceived(name, token, now);
}

/**
 * A room's token reached `keepUntil`: while joined, a new one is asked for (and sent as a
 * refresh); otherwise the next join asks.
 * @param {RoomMachine} rooms the machine.
 * @param {string} name the room.
 * @param {number} now the instant.
 * @returns {Action[]} the actions.
 */
export function tokenDue(rooms, name, now) {
  const record = rooms.records.get(name);
  if (!record?.token || now < record.token.keepUntil) return [];
  if (record.phase.kind !== "joined" || record.phase.membership.renewal !== null) return [];
  const grant = grantFor(rooms, name, now);
  if (grant) return rooms.tokenReceived(name, grant, now);
  record.phase.membership.renewal = { kind: "needs_token" };
  return addToBatch(rooms, name, now);
}

/**
 * The usable grant of a public pattern the room matches.
 * @param {RoomMachine} rooms the machine.
 * @param {string} name the room.
 * @param {number} now the instant.
 * @returns {RoomToken | null} the grant's token.
 */
export function grantFor(rooms, name, now) {
  return rooms.grants.find((grant) => now < grant.token.keepUntil && matchesPattern(name, grant.pattern))?.token ?? null;
}
