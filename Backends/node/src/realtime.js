// The app backend's half of rooms and channels in Node (rooms seed: `realtime.room('order:{id}',
// { history: 20 }, async (user, { id }) => …)`), with Swift's `RealtimeBackend` as the reference
// (Backends/README.md; conformance: Backends/conformance).

import { canonicalJSON } from "./json.js";
import { ApiError, ChannelError, RuleError, WebhookError } from "./errors.js";
import { isValidRoomName, matchRoom, parsePattern, patternsOverlap } from "./names.js";
import { makeRule } from "./rules.js";
import { parseStrict } from "./strict.js";
import { hmac, sameBytes, sha256, signedQuery, signToken } from "./signing.js";

/** Most rooms one auth request answers (the rest get `bad_request`). */
export const MAX_ROOMS = 100;
/** Largest webhook body verified, in bytes. */
export const MAX_WEBHOOK_BYTES = 1 << 20;
/** Shortest token or grant lifetime, in seconds: the client renews 10 minutes before expiry. */
export const MIN_LIFETIME = 660;

/**
 * Decides whether `user` may join the room whose pattern matched with `params`: only `true`
 * (or a Promise of it) admits.
 * @callback Authorizer
 * @param {string | null} user the signed-in user (a visitor, `null`, is refused a non-public rule before it is asked).
 * @param {Record<string, string>} params the pattern's parameters (`{ id: "1042" }`).
 * @returns {boolean | Promise<boolean>} whether the user may join.
 */

/**
 * @typedef {object} RealtimeOptions
 * @property {string} appKey the app key.
 * @property {string} appSecret the app secret: signs tokens, channel authorisations and API calls.
 * @property {string} [appId] the app id, for the HTTP API.
 * @property {string} [server] the realtime server's HTTP base (`http://127.0.0.1:6001`), for the HTTP API.
 * @property {string} [encryptionMasterKey] 32 bytes, base64: sealed rooms and encrypted channels.
 * @property {number} [tokenLifetime] seconds a room token is valid (3600; at least 660).
 * @property {number} [grantLifetime] seconds a public grant is valid (86400; at least 660).
 * @property {() => number} [clock] milliseconds since 1970 (`Date.now`).
 * @property {(error: unknown, room: string) => void} [onAuthorizerError] an authorizer threw (the room is answered `forbidden`); default: console.error.
 */

/**
 * A room's entry in the auth answer.
 * @typedef {{ token: string, expires: number, key?: string } | { error: string }} RoomAuthEntry
 */

/** @typedef {{ time: number, rooms: Record<string, RoomAuthEntry> }} RoomAuthAnswer */

export class Realtime {
  /** @param {RealtimeOptions} options the app. */
  constructor(options) {
    if (!options || typeof options.appKey !== "string" || !options.appKey || typeof options.appSecret !== "string" || !options.appSecret) {
      throw new TypeError("Realtime needs { appKey, appSecret }");
    }
    this.appKey = options.appKey;
    this.appId = options.appId ?? null;
    this.server = options.server?.replace(/\/+$/, "") ?? null;
    /** @private */
    this.secret = options.appSecret;
    /** @private */
    this.masterKey = null;
    if (options.encryptionMasterKey !== undefined) {
      const key = Buffer.from(options.encryptionMasterKey, "base64");
      if (key.length !== 32 || key.toString("base64") !== options.encryptionMasterKey) throw new TypeError("encryptionMasterKey must be 32 bytes in base64");
      this.masterKey = key;
    }
    this.tokenLifetime = Math.floor(Math.max(options.tokenLifetime ?? 3600, MIN_LIFETIME));
    this.grantLifetime = Math.floor(Math.max(options.grantLifetime ?? 86400, MIN_LIFETIME));
    const clock = options.clock ?? Date.now;
    /** @private milliseconds since 1970, whole. */
    this.clock = () => Math.floor(clock());
    /** @private */
    this.onAuthorizerError = options.onAuthorizerError ?? ((error, room) => console.error(`realtime: the authorizer for ${room} threw`, error));
    /** @type {{ pattern: string, rule: import("./rules.js").RoomRule, authorize: Authorizer | null }[]} the declared rules, in order. */
    this.rules = [];
  }

  /**
   * Declares the rule for rooms matching `pattern`; the first declared match wins.
   *
   * A public rule is joined with `config()`'s grant, which the server checks against the
   * pattern alone: so a public rule takes no authorizer, and no name may match both a public
   * pattern and another rule's (either declared first); both are refused here, so a visitor
   * never gets into a room `authorizeRooms` refuses.
   * @param {string} pattern `order:{id}`, `chat:{a}:{b}`, `shop`.
   * @param {import("./rules.js").RoomOptions} [options] `{ history, span, presence, max, members_send, webhook, sealed, public }`.
   * @param {Authorizer} [authorize] who may join; none admits every signed-in user (everyone, for a public rule, which takes none).
   * @returns {this} the backend, to declare the next.
   * @throws {RuleError} `invalid_pattern`, `invalid_rule`, `master_key_required`, `public_authorizer`
   *   (an authorizer on a public rule), `public_overlap` (a public pattern and another that can
   *   match the same name; the rule is not added).
   */
  room(pattern, options = {}, authorize = undefined) {
    if (typeof options === "function") [options, authorize] = [{}, /** @type {Authorizer} */ (options)];
    if (!parsePattern(pattern)) throw new RuleError("invalid_pattern", `invalid room pattern ${pattern}`);
    const rule = makeRule(pattern, options);
    if (rule.sealed && !this.masterKey) throw new RuleError("master_key_required", `the sealed rule for ${pattern} needs the backend's encryptionMasterKey`);
    if (authorize !== undefined && typeof authorize !== "function") throw new RuleError("invalid_rule", `the authorizer for ${pattern} is not a function`);
    if (rule.public && authorize !== undefined) {
      throw new RuleError("public_authorizer", `the public rule for ${pattern} takes no authorizer: its grant admits anyone without asking the backend`);
    }
    const other = this.rules.find((declared) => (declared.rule.public || rule.public) && patternsOverlap(declared.pattern, pattern));
    if (other) {
      throw new RuleError("public_overlap", `the rules for ${other.pattern} and ${pattern} can match the same room, and one is public: a public pattern must match no name another rule claims`);
    }
    this.rules.push({ pattern, rule, authorize: authorize ?? null });
    return this;
  }

  /**
   * @param {string} room a room name.
   * @returns {{ pattern: string, rule: import("./rules.js").RoomRule, authorize: Authorizer | null, params: Record<string, string> } | null} the first matching rule.
   */
  ruleFor(room) {
    for (const declared of this.rules) {
      const params = matchRoom(room, declared.pattern);
      if (params) return { ...declared, params };
    }
    return null;
  }

  /**
   * The batched auth answer (docs/rooms-protocol.md "Auth route"): per room a token and its
   * expiry, or an error code. Authorizers of different rooms run concurrently.
   * @param {string[]} rooms room names (duplicates answered once; the first 100 distinct ones
   *   in order are answered, the rest `bad_request`).
   * @param {string | null | undefined} user the signed-in user, or none for a visitor.
   * @param {unknown} [info] the user's presence info, in presence rooms' tokens.
   * @returns {Promise<RoomAuthAnswer>} the answer (write it with `canonicalJSON`).
   */
  async authorizeRooms(rooms, user, info = undefined) {
    if (!Array.isArray(rooms) || !rooms.every((name) => typeof name === "string")) throw new TypeError("authorizeRooms takes an array of room names");
    const names = [...new Set(rooms)];
    const entries = await Promise.all(names.map((name, index) => index < MAX_ROOMS ? this.entry(name, user ?? null, info) : { error: "bad_request" }));
    /** @type {Record<string, RoomAuthEntry>} */
    const answer = {};
    names.forEach((name, index) => { answer[name] = entries[index]; });
    return { time: this.clock(), rooms: answer };
  }

  /**
   * @private
   * @param {string} room @param {string | null} user @param {unknown} info
   * @returns {Promise<RoomAuthEntry>} the room's entry.
   */
  async entry(room, user, info) {
    if (!isValidRoomName(room)) return { error: "invalid_room" };
    const declared = this.ruleFor(room);
    if (!declared) return { error: "no_rule" };
    if (user === null && !declared.rule.public) return { error: "forbidden" };
    if (declared.authorize) {
      let allowed = false;
      try {
        allowed = (await declared.authorize(user, { ...declared.params })) === true;
      } catch (error) {
        this.onAuthorizerError(error, room);
      }
      if (!allowed) return { error: "forbidden" };
    }
    let minted;
    try {
      minted = this.token(room, user, declared.rule.presence ? info : undefined, declared.rule, this.tokenLifetime);
    } catch {
      return { error: "bad_request" }; // info JSON cannot hold (a NaN): this room only, as Swift answers
    }
    /** @type {RoomAuthEntry} */
    const entry = { token: minted.token, expires: minted.expires };
    if (declared.rule.sealed) entry.key = this.roomKey(room)?.toString("base64");
    return entry;
  }

  /**
   * Mints a room token (an HS256 JWT: `{exp, iat, info?, room, rule, sub?}`).
   * @param {string} room the room (or a public pattern, for a grant).
   * @param {string | null} user the user, or `null`.
   * @param {unknown} info presence info, or `undefined`.
   * @param {import("./rules.js").RoomRule} rule the rule it carries.
   * @param {number} lifetime seconds.
   * @returns {{ token: string, expires: number }} the token and its expiry in milliseconds.
   */
  token(room, user, info, rule, lifetime) {
    const iat = Math.floor(this.clock() / 1000);
    const exp = iat + lifetime;
    /** @type {Record<string, unknown>} */
    const claims = { exp, iat, room, rule };
    if (info !== undefined && info !== null) claims.info = info;
    if (user !== null) claims.sub = user;
    return { token: signToken(claims, this.secret), expires: exp * 1000 };
  }

  /**
   * The public grants: one token per public pattern, so the app joins those rooms with no
   * auth request (rooms seed, "Rooms anyone may join").
   * @returns {{ time: number, grants: { pattern: string, token: string, expires: number }[] }} the grants.
   */
  config() {
    const grants = this.rules.filter((declared) => declared.rule.public)
      .map((declared) => ({ pattern: declared.pattern, ...this.token(declared.pattern, null, undefined, declared.rule, this.grantLifetime) }));
    return { time: this.clock(), grants };
  }

  /** @param {string} name a sealed room or an encrypted channel. @returns {Buffer | null} its key: SHA-256(name ‖ master key). */
  roomKey(name) { return this.masterKey ? sha256(Buffer.concat([Buffer.from(name), this.masterKey])) : null; }

  // Channels (Pusher's signatures)

  /**
   * Signs a private, presence or encrypted channel subscription for a socket id.
   * @param {string} socketId `123.456`.
   * @param {string} channel the channel.
   * @param {{ user_id: string, user_info?: unknown }} [member] a presence channel's member.
   * @returns {{ auth: string, channel_data?: string, shared_secret?: string }} Pusher's answer.
   * @throws {ChannelError} see its codes.
   */
  authorizeChannel(socketId, channel, member = undefined) {
    if (member === null) member = undefined;
    checkSocket(socketId);
    checkChannel(channel);
    const sign = (/** @type {string} */ text) => `${this.appKey}:${hmac(this.secret, text).toString("hex")}`;
    if (channel.startsWith("private-encrypted-")) {
      if (member !== undefined) throw new ChannelError("member_not_allowed", `${channel} is not a presence channel: it takes no member`);
      const secret = this.roomKey(channel);
      if (!secret) throw new ChannelError("master_key_required", `${channel} is an encrypted channel: the signer needs the app's encryption master key`);
      return { auth: sign(`${socketId}:${channel}`), shared_secret: secret.toString("base64") };
    }
    if (channel.startsWith("private-")) {
      if (member !== undefined) throw new ChannelError("member_not_allowed", `${channel} is not a presence channel: it takes no member`);
      return { auth: sign(`${socketId}:${channel}`) };
    }
    if (channel.startsWith("presence-")) {
      if (member === undefined || member === null) throw new ChannelError("member_required", `${channel} is a presence channel: a member (user_id, user_info) is required`);
      if (typeof member.user_id !== "string" || !member.user_id) throw new ChannelError("invalid_member", "invalid presence member: the user id is empty");
      /** @type {Record<string, unknown>} */
      const data = { user_id: member.user_id };
      if (member.user_info !== undefined && member.user_info !== null) data.user_info = member.user_info;
      let channelData;
      try { channelData = canonicalJSON(data); } catch { throw new ChannelError("invalid_member", "invalid presence member: user_info is not representable as JSON"); }
      return { auth: sign(`${socketId}:${channel}:${channelData}`), channel_data: channelData };
    }
    throw new ChannelError("public_channel", `${channel} is a public channel: it needs no authorisation`);
  }

  /**
   * Signs a user signin (Pusher's user authentication) for a socket id.
   * @param {string} socketId `123.456`.
   * @param {string} userData the user's JSON text, an object with a string `id` (1…200 of `A–Z a–z 0–9 _ - = @ , . ;`).
   * @returns {{ auth: string, user_data: string }} Pusher's answer.
   * @throws {ChannelError} `invalid_socket_id`, `invalid_user_data`.
   */
  authenticateUser(socketId, userData) {
    checkSocket(socketId);
    const parsed = typeof userData === "string" ? parseStrict(userData) : { error: "not a string" };
    if ("error" in parsed && parsed.error.startsWith("the member name")) throw new ChannelError("invalid_user_data", `invalid user data: ${parsed.error}`);
    const user = /** @type {any} */ ("value" in parsed ? parsed.value : undefined);
    if (!user || typeof user !== "object" || Array.isArray(user)) throw new ChannelError("invalid_user_data", "invalid user data: not a JSON object");
    if (!("id" in user)) throw new ChannelError("invalid_user_data", 'invalid user data: no "id"');
    if (typeof user.id !== "string" || !/^[A-Za-z0-9_\-=@,.;]{1,200}$/.test(user.id)) {
      throw new ChannelError("invalid_user_data", 'invalid user data: "id" must be 1 to 200 characters of A-Z a-z 0-9 _ - = @ , . ;');
    }
    return { auth: `${this.appKey}:${hmac(this.secret, `${socketId}::user::${userData}`).toString("hex")}`, user_data: userData };
  }

  // The realtime server's HTTP API

  /**
   * Pusher's REST signature for a request, as a query string (see `signing.js`).
   * @param {string} method `GET` or `POST`.
   * @param {string} path the path as sent.
   * @param {string | Uint8Array} [body] the body.
   * @param {Record<string, string>} [parameters] the request's own query parameters (`limit`), signed with the rest.
   * @returns {string} the query.
   */
  signedQuery(method, path, body = "", parameters = {}) {
    return signedQuery({ key: this.appKey, secret: this.secret }, method, path, body, Math.floor(this.clock() / 1000), parameters);
  }

  /**
   * The body of `POST /apps/{id}/room_events` for one event: `{data, name, room, rule}`, the
   * data as canonical JSON text and the declared rule, so the server keeps history by it even
   * before anyone joined.
   * @param {string} room the room.
   * @param {string} event the event name.
   * @param {unknown} data the event's data.
   * @returns {string} the body.
   * @throws {RuleError} `invalid_pattern` when no rule matches the room; `sealed_not_supported` for a sealed room.
   * @throws {TypeError} data JSON cannot hold (a NaN, a bigint no double holds exactly).
   */
  roomEventBody(room, event, data) { return canonicalJSON(this.roomEvent(room, event, data)); }

  /** @private @param {string} room @param {string} event @param {unknown} data */
  roomEvent(room, event, data) {
    const declared = this.ruleFor(room);
    if (!declared) throw new RuleError("invalid_pattern", `no rule matches the room ${room}`);
    if (declared.rule.sealed) throw new RuleError("sealed_not_supported", `${room} is sealed: this library does not seal yet (the Swift RealtimeBackend does)`);
    return { data: canonicalJSON(data), name: event, room, rule: declared.rule };
  }

  /**
   * Publishes one room event.
   * @param {string} room @param {string} event @param {unknown} data
   * @returns {Promise<unknown>} the server's answer.
   * @throws {ApiError | RuleError} the server refused it, or no rule matches.
   * @throws {TypeError} data JSON cannot hold (as `roomEventBody`), before any request.
   */
  publishRoom(room, event, data) { return this.api("POST", "room_events", this.roomEventBody(room, event, data)); }

  /**
   * Publishes up to 100 room events in one request (all or none).
   * @param {{ room: string, event: string, data: unknown }[]} events the events.
   * @returns {Promise<unknown>} the server's answer.
   */
  publishRooms(events) {
    if (events.length > 100) throw new RangeError("at most 100 room events a batch");
    return this.api("POST", "batch_room_events", canonicalJSON({ batch: events.map(({ room, event, data }) => this.roomEvent(room, event, data)) }));
  }

  /**
   * Triggers a channel event (Pusher's `POST /apps/{id}/events`).
   * @param {string | string[]} channels one channel or up to 100.
   * @param {string} event the event name.
   * @param {unknown} data the data (sent as its JSON text).
   * @returns {Promise<unknown>} the server's answer.
   */
  trigger(channels, event, data) {
    const body = Array.isArray(channels) ? { channels, data: canonicalJSON(data), name: event } : { channel: channels, data: canonicalJSON(data), name: event };
    return this.api("POST", "events", canonicalJSON(body));
  }

  /**
   * Triggers up to 10 channel events (Pusher's `POST /apps/{id}/batch_events`).
   * @param {{ channel: string, event: string, data: unknown }[]} events the events.
   * @returns {Promise<unknown>} the server's answer.
   */
  triggerBatch(events) {
    if (events.length > 10) throw new RangeError("at most 10 events a batch");
    return this.api("POST", "batch_events", canonicalJSON({ batch: events.map(({ channel, event, data }) => ({ channel, data: canonicalJSON(data), name: event })) }));
  }

  /**
   * A page of a room's history: the newest `limit` events before `before`, oldest first.
   * @param {string} room @param {{ before?: number, limit?: number }} [page]
   * @returns {Promise<{ events: { event: string, data: unknown, meta: { id: number, at: number, from: string | null } }[], more: boolean }>} the page.
   */
  roomHistory(room, { before, limit } = {}) {
    /** @type {Record<string, string>} */
    const query = {};
    if (before !== undefined) query.before = String(before);
    if (limit !== undefined) query.limit = String(limit);
    return /** @type {Promise<any>} */ (this.api("GET", `rooms/${encodeURIComponent(room)}/history`, "", query));
  }

  /** @param {string} room @returns {Promise<{ users: { id: string }[] }>} the room's users. */
  roomUsers(room) { return /** @type {Promise<any>} */ (this.api("GET", `rooms/${encodeURIComponent(room)}/users`, "")); }

  /**
   * A signed call to the realtime server's HTTP API (10 s timeout).
   * @private
   * @param {"GET" | "POST"} method @param {string} endpoint after `/apps/{id}/`, percent-encoded @param {string} body
   * @param {Record<string, string>} [parameters] the request's own query parameters, signed with the rest
   * @returns {Promise<unknown>} the parsed answer.
   */
  async api(method, endpoint, body, parameters = {}) {
    if (!this.server || !this.appId) throw new TypeError("the HTTP API needs { server, appId }");
    const url = new URL(this.server);
    const path = `${url.pathname.replace(/\/+$/, "")}/apps/${encodeURIComponent(this.appId)}/${endpoint}`;
    const query = this.signedQuery(method, path, body, parameters);
    let response;
    try {
      response = await fetch(`${url.origin}${path}?${query}`, { method, body: method === "POST" ? body : undefined,
        headers: { "Content-Type": "application/json" }, signal: AbortSignal.timeout(10000) });
    } catch (error) {
      throw new ApiError(0, `the realtime server did not answer: ${error instanceof Error ? error.message : String(error)}`);
    }
    const text = await response.text();
    if (!response.ok) throw new ApiError(response.status, text.slice(0, 1000));
    try { return text ? JSON.parse(text) : {}; } catch { throw new ApiError(response.status, "an answer that is not JSON"); }
  }

  // Webhooks

  /**
   * Verifies a webhook request the realtime server posted, then parses it: the key first, the
   * signature over the exact body bytes (constant time), and only then the JSON.
   * @param {string | null | undefined} key the `X-Pusher-Key` header.
   * @param {string | null | undefined} signature the `X-Pusher-Signature` header.
   * @param {string | Uint8Array} body the body as received.
   * @returns {{ time_ms: number, events: Record<string, unknown>[] }} the webhook.
   * @throws {WebhookError} `bad_key`, `bad_signature`, `malformed`.
   */
  verifyWebhook(key, signature, body) {
    if (key !== this.appKey) throw new WebhookError("bad_key", "the webhook's X-Pusher-Key is not this app's key");
    const bytes = typeof body === "string" ? Buffer.from(body) : Buffer.from(body);
    const expected = Buffer.from(hmac(this.secret, bytes).toString("hex"));
    if (typeof signature !== "string" || !sameBytes(Buffer.from(signature.toLowerCase()), expected)) {
      throw new WebhookError("bad_signature", "the webhook's X-Pusher-Signature does not sign its body");
    }
    const malformed = new WebhookError("malformed", 'the webhook\'s body is not {"time_ms", "events"}');
    if (bytes.length > MAX_WEBHOOK_BYTES) throw malformed;
    let text;
    try { text = new TextDecoder("utf-8", { fatal: true }).decode(bytes); } catch { throw malformed; }
    const parsed = parseStrict(text);
    if ("error" in parsed) throw malformed;
    const payload = /** @type {any} */ (parsed.value);
    if (!payload || typeof payload !== "object" || !Number.isSafeInteger(payload.time_ms) || !Array.isArray(payload.events)) throw malformed;
    if (!payload.events.every(isWebhookEvent)) throw malformed;
    // The fields Swift's RealtimeWebhook.Event knows, absent ones (and nulls) left out.
    const events = payload.events.map((/** @type {Record<string, unknown>} */ event) => Object.fromEntries(
      WEBHOOK_FIELDS.filter((key) => event[key] !== undefined && event[key] !== null).map((key) => [key, event[key]])));
    return { time_ms: payload.time_ms, events };
  }
}

/** The fields of a webhook event (Swift: `RealtimeWebhook.Event`). */
const WEBHOOK_FIELDS = ["name", "channel", "room", "event", "data", "id", "at", "user_id", "socket_id"];

/**
 * A webhook event of the shape Swift's `RealtimeWebhook.Event` decodes: a string `name`; the
 * text fields strings; `id` and `at` whole numbers (`id` not negative).
 * @param {any} event @returns {boolean} whether it has that shape.
 */
function isWebhookEvent(event) {
  if (!event || typeof event !== "object" || Array.isArray(event) || typeof event.name !== "string") return false;
  for (const key of ["channel", "room", "event", "data", "user_id", "socket_id"]) {
    if (event[key] !== undefined && event[key] !== null && typeof event[key] !== "string") return false;
  }
  if (event.id !== undefined && event.id !== null && !(Number.isSafeInteger(event.id) && event.id >= 0)) return false;
  return event.at === undefined || event.at === null || Number.isSafeInteger(event.at);
}

/** @param {string} socketId */
function checkSocket(socketId) {
  if (typeof socketId !== "string" || !/^\d+\.\d+$/.test(socketId)) throw new ChannelError("invalid_socket_id", `invalid socket id "${String(socketId).slice(0, 64)}": expected digits.digits`);
}

/** @param {string} channel */
function checkChannel(channel) {
  if (typeof channel !== "string" || !/^[A-Za-z0-9_\-=@,.;]{1,164}$/.test(channel)) {
    throw new ChannelError("invalid_channel", `invalid channel name "${String(channel).slice(0, 64)}": 1 to 164 characters of A-Z a-z 0-9 _ - = @ , . ;`);
  }
}
