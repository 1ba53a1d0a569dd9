// The channel objects the app holds (realtime-connection-lifecycle seed, "What happens to
// channels"): they outlive every socket, keep their bindings, and read their state from the
// connection machine, which resubscribes them after every handshake.

import { Emitter } from "./emitter.js";

/**
 * What a channel needs from its client.
 * @typedef {object} ChannelParts
 * @property {() => import("./channel-machine.js").ChannelRecord | undefined} record the channel's record on the machine.
 * @property {(event: string, data: unknown) => boolean} trigger sends a client event.
 * @property {() => void} unsubscribe forgets the channel.
 * @property {(error: unknown, event: string) => void} onHandlerError told when a handler throws.
 */

/**
 * A channel (`bird.subscribe(name)`): bind handlers by event name; they survive reconnects.
 *
 * Protocol events arrive in the client's namespace: `bird:subscription_succeeded` after every
 * successful (re)subscription, `bird:subscription_error` (a refused authorisation:
 * `{type: "AuthError", error, status}`; a server refusal: `{message, code}`), `bird:error`.
 */
export class Channel {
  /**
   * @param {string} name the channel name.
   * @param {ChannelParts} parts what it needs from its client.
   */
  constructor(name, parts) {
    /** The channel name (`presence-room-1`). */
    this.name = name;
    /** @protected */
    this.parts = parts;
    /** @private */
    this.emitter = new Emitter(parts.onHandlerError);
  }

  /** @returns {boolean} the server confirmed the subscription on the current connection. */
  get subscribed() { return this.parts.record()?.subscribed ?? false; }

  /**
   * Calls `handler(data, meta)` for every `event` on this channel. App events' data is their
   * JSON parsed (or the text, when it is not JSON); `meta` is `{ user_id }` on a client event
   * of a presence channel.
   * @param {string} event the event name (`price-update`, `bird:subscription_succeeded`).
   * @param {(data: any, meta?: { user_id: string }) => void} handler the handler.
   * @returns {this} the channel.
   */
  bind(event, handler) { this.emitter.bind(event, handler); return this; }

  /**
   * Calls `handler(event, data, meta)` for every event on this channel.
   * @param {(event: string, data: any, meta?: { user_id: string }) => void} handler the handler.
   * @returns {this} the channel.
   */
  bind_global(handler) { this.emitter.bindGlobal(handler); return this; }

  /**
   * Removes a handler of `event`, every handler of `event`, or every handler.
   * @param {string} [event] the event name.
   * @param {Function} [handler] the handler.
   * @returns {this} the channel.
   */
  unbind(event, handler) { this.emitter.unbind(event, handler); return this; }

  /**
   * Sends a client event to the channel's other members (Pusher's rule: a `client-` name, on
   * a private or presence channel). Seed: returns false while reconnecting, and sends nothing.
   * @param {string} event the event name, starting with `client-`.
   * @param {unknown} data the data, sent as JSON.
   * @returns {boolean} whether it was sent: only while connected and subscribed.
   */
  trigger(event, data) { return this.parts.trigger(event, data); }

  /** Unsubscribes: the channel is never resubscribed, and `bird.channel(name)` is `undefined`. */
  unsubscribe() { this.parts.unsubscribe(); }

  /**
   * Runs the handlers (the client's drain, in arrival order).
   * @param {string} event the event name.
   * @param {unknown} data its data.
   * @param {unknown} [meta] its meta.
   * @internal
   */
  deliver(event, data, meta) { this.emitter.emit(event, data, meta); }
}

/**
 * A presence channel's members (Pusher's `Members`): each listed once, replaced at every
 * subscription, so a member who left while the client was away is gone.
 */
export class Members {
  /** @param {() => import("./channel-machine.js").ChannelRecord | undefined} record the channel's record. */
  constructor(record) { /** @private */ this.record = record; }

  /** @returns {number} how many members are listed. */
  get count() { return this.record()?.members.size ?? 0; }

  /** @returns {Record<string, unknown>} the members' info by user id (Pusher's `members.members`). */
  get members() { return Object.fromEntries(this.record()?.members ?? []); }

  /** @returns {{ id: string, info: unknown } | null} this connection's member, from the authorisation. */
  get me() { return this.record()?.me ?? null; }

  /**
   * Calls `callback({ id, info })` for every member, in the server's order.
   * @param {(member: { id: string, info: unknown }) => void} callback the callback.
   */
  each(callback) { for (const [id, info] of this.record()?.members ?? []) callback({ id, info }); }

  /**
   * One member.
   * @param {string} id the user id.
   * @returns {{ id: string, info: unknown } | null} the member, or `null`.
   */
  get(id) {
    const members = this.record()?.members;
    return members?.has(id) ? { id, info: members.get(id) } : null;
  }
}

/**
 * A presence channel (`presence-…`): `members` after `bird:subscription_succeeded`, whose
 * handlers receive the `Members` (seed: `room.bind("bird:subscription_succeeded", ({ members })
 * => renderMembers(members))`), then `bird:member_added` / `bird:member_removed` with `{ id, info }`.
 */
export class PresenceChannel extends Channel {
  /**
   * @param {string} name the channel name.
   * @param {ChannelParts} parts what it needs from its client.
   * @param {string} namespace the protocol namespace.
   */
  constructor(name, parts, namespace) {
    super(name, parts);
    /** The members, read from the current connection. */
    this.members = new Members(parts.record);
    /** @private */
    this.succeeded = `${namespace}:subscription_succeeded`;
  }

  /**
   * @param {string} event the event name.
   * @param {unknown} data its data.
   * @param {unknown} [meta] its meta.
   * @internal
   */
  deliver(event, data, meta) { super.deliver(event, event === this.succeeded ? this.members : data, meta); }
}
