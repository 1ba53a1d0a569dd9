// `bird.connection` (realtime-connection-lifecycle seed): the state, the socket id, and the
// connection's events: `state_change` ({ previous, current }), each state's name, `error`
// ({ code, message }) and `signin_error` ({ message }).

import { Emitter } from "./emitter.js";

/** @typedef {import("./actions.js").ConnectionState} ConnectionState */

export class Connection {
  /**
   * @param {() => import("./connection-machine.js").ConnectionMachine} machine the client's machine.
   * @param {(error: unknown, event: string) => void} onHandlerError told when a handler throws.
   */
  constructor(machine, onHandlerError) {
    /** @private */
    this.machine = machine;
    /** @private */
    this.emitter = new Emitter(onHandlerError);
  }

  /** @returns {ConnectionState} the current state: initialized, connecting, connected, unavailable, disconnected or failed. */
  get state() { return this.machine().state; }

  /** @returns {string | null} the socket id (`"123.456"`), set by the handshake before the state becomes `connected`; `null` otherwise. */
  get connectionId() { return this.machine().socketId; }

  /** @returns {string | null} the user data the server accepted after `signin()` on this connection. */
  get userData() { return this.machine().signin.userData; }

  /**
   * Calls `handler` for the connection's `event`: `state_change` and each state's name get
   * `{ previous, current }`; `error` gets `{ type, code, message }` (seed: `({ code, message })`,
   * `code === 4009` after that close); `signin_error` gets `{ kind, message, status? }`.
   * @param {string} event the event name.
   * @param {(data: any) => void} handler the handler.
   * @returns {this} the connection.
   */
  bind(event, handler) { this.emitter.bind(event, handler); return this; }

  /**
   * Removes a handler of `event`, every handler of `event`, or every handler.
   * @param {string} [event] the event name.
   * @param {Function} [handler] the handler.
   * @returns {this} the connection.
   */
  unbind(event, handler) { this.emitter.unbind(event, handler); return this; }

  /**
   * Runs the handlers of `event` (the client's drain).
   * @param {string} event the event name.
   * @param {unknown} data its data.
   * @internal
   */
  emit(event, data) { this.emitter.emit(event, data); }
}
