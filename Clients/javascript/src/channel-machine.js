// Channels on the connection machine (realtime-connection-lifecycle seed, "What happens to
// channels"): subscriptions belong to the connection, so every handshake resubscribes every
// channel, authorising private and presence ones again for the new socket id (the old
// signature contains the old id); presence members are replaced at every subscription.

import { timer } from "./actions.js";
import { channelKind, parseData, parseObject } from "./protocol.js";

/** @typedef {import("./actions.js").Action} Action */
/** @typedef {import("./actions.js").AuthFailure} AuthFailure */
/** @typedef {import("./protocol.js").Frame} Frame */

/**
 * A presence member (Pusher: `{user_id, user_info}` on the wire, `{id, info}` to the app).
 * @typedef {object} Member
 * @property {string} id the user id.
 * @property {unknown} info the user's info, from the authorisation's `channel_data`.
 */

/**
 * One channel on the current connection.
 * @typedef {object} ChannelRecord
 * @property {import("./protocol.js").ChannelKind} kind from the name's prefix.
 * @property {boolean} subscribed the server confirmed the subscription on this connection.
 * @property {boolean} requested `<ns>:subscribe` was sent on this connection.
 * @property {number | null} authRequest the authorisation in flight.
 * @property {Map<string, unknown>} members presence: the members by id, in the server's order.
 * @property {Member | null} me presence: this connection's member, from `channel_data`.
 * @property {Uint8Array | null} key an encrypted channel's shared secret, from its authorisation.
 */

/**
 * An authorisation's answer (Pusher's `{auth, channel_data?, shared_secret?}`), or why there is none.
 * @typedef {{ ok: true, auth: string, channel_data?: string, shared_secret?: string } | { ok: false, failure: AuthFailure }} ChannelAuthResult
 */

/** Most members a presence channel lists (Pusher's limit is 100; the bound protects the page). */
export const MAX_PRESENCE_MEMBERS = 10000;

export class ChannelMachine {
  /** @param {import("./connection-machine.js").ConnectionMachine} connection the owner machine. */
  constructor(connection) {
    this.connection = connection;
    /** @type {Map<string, ChannelRecord>} in subscription order (the resubscription order). */
    this.records = new Map();
  }

  /** @param {string} name a channel. @returns {boolean} whether it is subscribed by the app. */
  has(name) { return this.records.has(name); }

  /**
   * `subscribe(name)`: at once when connected, otherwise after the next handshake.
   * @param {string} name the channel.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  add(name, now) {
    if (this.records.has(name)) return [];
    this.records.set(name, { kind: channelKind(name), subscribed: false, requested: false, authRequest: null, members: new Map(), me: null, key: null });
    return this.connection.socketId === null ? [] : this.subscribeOrAuthorize(name, now);
  }

  /**
   * `unsubscribe(name)`: never resubscribed; `<ns>:unsubscribe` sent when connected.
   * @param {string} name the channel.
   * @returns {Action[]} the actions.
   */
  remove(name) {
    const record = this.records.get(name);
    if (!record) return [];
    this.records.delete(name);
    return this.cancelAuth(name, record).concat(this.connection.sendProtocol("unsubscribe", { channel: name }));
  }

  /**
   * A client event: sent only while subscribed, on a private or presence channel, with a
   * `client-` name (Pusher's rule; seed: `trigger` returns false while reconnecting).
   * @param {string} name the channel.
   * @param {string} event the event name.
   * @param {unknown} data the data.
   * @returns {Action[] | null} the send, or `null` when nothing may be sent.
   */
  trigger(name, event, data) {
    const record = this.records.get(name);
    if (!record?.subscribed || !event.startsWith("client-") || (record.kind !== "private" && record.kind !== "presence")) return null;
    const generation = this.connection.generation;
    if (generation === null || this.connection.socketId === null) return null;
    return [{ type: "send", text: JSON.stringify({ event, channel: name, data: JSON.stringify(data) }), generation }];
  }

  /**
   * The handshake: every channel subscribes again.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  connected(now) { return [...this.records.keys()].flatMap((name) => this.subscribeOrAuthorize(name, now)); }

  /** @returns {Action[]} the socket ended: nothing is subscribed, authorisations are dropped. */
  disconnected() {
    /** @type {Action[]} */
    const actions = [];
    for (const [name, record] of this.records) {
      actions.push(...this.cancelAuth(name, record));
      record.subscribed = false;
      record.requested = false;
      record.members = new Map();
    }
    return actions;
  }

  /**
   * Subscribes a public channel at once; asks for an authorisation for the others.
   * @param {string} name the channel.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  subscribeOrAuthorize(name, now) {
    const record = this.records.get(name);
    const socketId = this.connection.socketId;
    if (!record || socketId === null) return [];
    if (record.kind === "public") {
      record.requested = true;
      return this.connection.sendProtocol("subscribe", { channel: name });
    }
    const actions = this.cancelAuth(name, record);
    const request = this.connection.nextRequest();
    record.authRequest = request;
    return actions.concat([
      { type: "schedule", timer: timer("channel_auth", { name, request }), at: now + this.connection.config.authTimeout },
      { type: "authorize", channel: name, socketId, request }]);
  }

  /**
   * An authorisation answered, failed or timed out; an answer to an older request (another
   * socket id, or replaced) is discarded.
   * @param {string} name the channel.
   * @param {number} request the request.
   * @param {ChannelAuthResult} result the answer.
   * @returns {Action[]} the actions.
   */
  authorized(name, request, result) {
    const record = this.records.get(name);
    if (!record || record.authRequest !== request) return [];
    const actions = this.cancelAuth(name, record);
    let failure = result.ok ? null : result.failure;
    let me = null;
    let key = null;
    if (result.ok && (typeof result.auth !== "string" || !result.auth)) failure = { kind: "invalid", message: "an answer without auth" };
    if (result.ok && record.kind === "encrypted") {
      // Pusher's encrypted channels: the shared secret (32 bytes, base64) opens every event.
      const box = this.connection.secretbox;
      key = box && typeof result.shared_secret === "string" ? box.fromBase64(result.shared_secret) : null;
      if (!box) failure = { kind: "invalid", message: "the decryption module (secretbox.js) did not load" };
      else if (key?.length !== box.KEY_BYTES) failure = { kind: "invalid", message: "an encrypted channel's authorisation without a 32-byte base64 shared_secret" };
    }
    if (result.ok && record.kind === "presence") {
      const data = parseObject(result.channel_data);
      if (typeof data?.user_id !== "string" && typeof data?.user_id !== "number") {
        failure = { kind: "invalid", message: "a presence authorisation without channel_data holding a user_id" };
      } else {
        me = { id: String(data.user_id), info: data.user_info };
      }
    }
    if (failure || !result.ok) {
      record.subscribed = false;
      const reason = failure ?? { kind: "invalid", message: "no answer" };
      return actions.concat(this.deliver(name, "subscription_error", { type: "AuthError", error: reason.message, status: reason.status ?? null }));
    }
    record.me = me;
    record.key = key;
    record.requested = true;
    /** @type {Record<string, string>} */
    const payload = { channel: name, auth: result.auth };
    if (result.channel_data !== undefined) payload.channel_data = result.channel_data;
    return actions.concat(this.connection.sendProtocol("subscribe", payload));
  }

  /**
   * A frame for a channel: an app event (`name` null) or a protocol event.
   * @param {Frame} frame the frame.
   * @param {string | null} name the bare protocol name, or `null` for an app event.
   * @returns {Action[]} the actions.
   */
  frame(frame, name) {
    const channel = frame.channel ?? "";
    const record = this.records.get(channel);
    if (!record) {
      if (name === "subscription_error") return this.connection.serverError(frame.data);
      // An event in flight when the app unsubscribed, or a server bug: told, never silent.
      return this.connection.protocolError(`${frame.event} for ${frame.channel ?? "no channel"}, which is not subscribed`);
    }
    switch (name) {
      case null: {
        let data = parseData(frame.data);
        if (record.kind === "encrypted") {
          // Opened with the shared secret before any handler runs; one that does not open is
          // reported and never delivered (the Swift client's rule).
          const text = record.key && this.connection.secretbox?.openPayload(data, record.key);
          if (typeof text !== "string") {
            return [{ type: "error", error: { type: "decryption", code: null, message: `${frame.event} on ${channel} not delivered: it does not open with the channel's key` } }];
          }
          data = parseData(text);
        }
        /** @type {Action} */
        const action = { type: "channel_event", channel, event: frame.event, data };
        if (frame.user_id !== undefined) action.meta = { user_id: frame.user_id };
        return [action];
      }
      case "subscription_succeeded": return this.succeeded(channel, record, frame.data);
      case "subscription_error":
        record.subscribed = false;
        record.members = new Map();
        return [this.deliver(channel, "subscription_error", parseData(frame.data))];
      case "member_added": case "member_removed": return this.memberChanged(channel, record, name, frame.data);
      default: return [this.deliver(channel, name, parseData(frame.data))];
    }
  }

  /**
   * @param {string} channel the channel.
   * @param {ChannelRecord} record its record.
   * @param {string | undefined} data `{}`, or presence's `{"presence": {"ids", "hash", "count"}}`.
   * @returns {Action[]} the actions.
   */
  succeeded(channel, record, data) {
    // A confirmation of nothing asked on this connection (an authorisation still in flight):
    // the channel stays unsubscribed.
    if (!record.requested) return this.connection.protocolError(`subscription_succeeded for ${channel}, which was not asked on this connection, ignored`);
    if (record.kind === "presence") {
      const presence = parseObject(data)?.presence;
      if (!presence || !Array.isArray(presence.ids)) return this.connection.protocolError(`presence subscription_succeeded for ${channel} without a member list`);
      record.members = new Map();
      for (const id of presence.ids.slice(0, MAX_PRESENCE_MEMBERS)) record.members.set(String(id), presence.hash?.[id]);
    }
    record.subscribed = true;
    return [this.deliver(channel, "subscription_succeeded", parseData(data))];
  }

  /**
   * @param {string} channel the channel.
   * @param {ChannelRecord} record its record.
   * @param {"member_added" | "member_removed"} name the event.
   * @param {string | undefined} data `{user_id, user_info?}`.
   * @returns {Action[]} the actions: each member is listed once.
   */
  memberChanged(channel, record, name, data) {
    const payload = parseObject(data);
    const id = payload?.user_id;
    if (record.kind !== "presence" || (typeof id !== "string" && typeof id !== "number")) {
      return this.connection.protocolError(`${name} without a presence channel or member, ignored`);
    }
    const key = String(id);
    if (name === "member_added") {
      const known = record.members.has(key);
      if (!known && record.members.size >= MAX_PRESENCE_MEMBERS) return [];
      record.members.set(key, payload?.user_info);
      return known ? [] : [this.deliver(channel, name, { id: key, info: payload?.user_info })];
    }
    if (!record.members.has(key)) return [];
    const info = record.members.get(key);
    record.members.delete(key);
    return [this.deliver(channel, name, { id: key, info })];
  }

  /**
   * @param {string} name the channel.
   * @param {ChannelRecord} record its record.
   * @returns {Action[]} its authorisation dropped.
   */
  cancelAuth(name, record) {
    const request = record.authRequest;
    if (request === null) return [];
    record.authRequest = null;
    return [{ type: "cancel", timer: timer("channel_auth", { name, request }) }, { type: "cancel_request", request }];
  }

  /**
   * @param {string} channel the channel.
   * @param {string} name the bare protocol name.
   * @param {unknown} data the data.
   * @returns {Action} a protocol event for the channel's handlers (`bird:subscription_succeeded`).
   */
  deliver(channel, name, data) {
    return { type: "channel_event", channel, event: `${this.connection.config.namespace}:${name}`, data };
  }
}
