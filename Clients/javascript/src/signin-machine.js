// Signin on the connection machine (realtime-connection-lifecycle seed, "What happens to
// channels": after `signin()` the client signs in on every new connection and reports later
// failures through `signin_error`; DESIGN.md "Signin": POST `socket_id` to the user-auth
// endpoint, then `<ns>:signin`; success `<ns>:signin_success`, refusal `<ns>:error` 4009).

import { timer } from "./actions.js";
import { CloseCode } from "./close-codes.js";
import { parseObject } from "./protocol.js";

/** @typedef {import("./actions.js").Action} Action */
/** @typedef {import("./actions.js").AuthFailure} AuthFailure */

/**
 * The user authentication's answer (`{auth, user_data}`), or why there is none.
 * @typedef {{ ok: true, auth: string, user_data: string } | { ok: false, failure: AuthFailure }} UserAuthResult
 */

export class SigninMachine {
  /** @param {import("./connection-machine.js").ConnectionMachine} connection the owner machine. */
  constructor(connection) {
    this.connection = connection;
    /** `signin()` was called: sign in on every connection. */
    this.requested = false;
    /** @type {{ stage: "authenticating" | "awaiting_server", request: number } | { stage: "signed_in", userData: string } | null} */
    this.current = null;
  }

  /** @returns {string | null} the user data the server accepted on this connection. */
  get userData() { return this.current?.stage === "signed_in" ? this.current.userData : null; }

  /**
   * `signin()`: now if connected and not signed in, and on every later connection.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  request(now) {
    this.requested = true;
    if (this.connection.socketId === null || this.current) return [];
    return this.start(now);
  }

  /** @param {number} now the handshake's instant. @returns {Action[]} a signin when one was asked for. */
  connected(now) { return this.requested ? this.start(now) : []; }

  /** @returns {Action[]} the socket ended: the signin in flight is dropped. */
  disconnected() {
    const current = this.current;
    this.current = null;
    if (!current || current.stage === "signed_in") return [];
    return [{ type: "cancel", timer: timer("signin", { request: current.request }) }, { type: "cancel_request", request: current.request }];
  }

  /**
   * @param {number} now the instant.
   * @returns {Action[]} the user authentication, with its deadline.
   */
  start(now) {
    const socketId = this.connection.socketId;
    if (socketId === null) return [];
    const request = this.connection.nextRequest();
    this.current = { stage: "authenticating", request };
    return [{ type: "schedule", timer: timer("signin", { request }), at: now + this.connection.config.authTimeout },
      { type: "authenticate", socketId, request }];
  }

  /**
   * The user authentication answered: `<ns>:signin` is sent (the server's answer gets the
   * same deadline), or the failure reported.
   * @param {number} request the request.
   * @param {UserAuthResult} result the answer.
   * @param {number} now the instant.
   * @returns {Action[]} the actions.
   */
  authenticated(request, result, now) {
    const current = this.current;
    if (!current || current.stage !== "authenticating" || current.request !== request) return [];
    if (!result.ok) return this.failed(request, result.failure);
    if (typeof result.auth !== "string" || typeof result.user_data !== "string") {
      return this.failed(request, { kind: "invalid", message: "the user authentication's answer is not {auth, user_data}" });
    }
    this.current = { stage: "awaiting_server", request };
    return [{ type: "schedule", timer: timer("signin", { request }), at: now + this.connection.config.authTimeout },
      ...this.connection.sendProtocol("signin", { auth: result.auth, user_data: result.user_data })];
  }

  /**
   * @param {number | undefined} request the signin's request.
   * @param {AuthFailure} failure why it failed.
   * @returns {Action[]} the actions.
   */
  failed(request, failure) {
    const current = this.current;
    if (!current || current.stage === "signed_in" || current.request !== request) return [];
    this.current = null;
    return [{ type: "cancel", timer: timer("signin", { request }) }, { type: "cancel_request", request }, { type: "signin_error", error: failure }];
  }

  /**
   * @param {string | undefined} data `signin_success`'s data: `{user_data}`.
   * @returns {Action[]} the actions.
   */
  succeeded(data) {
    const current = this.current;
    if (!current || current.stage !== "awaiting_server") return this.connection.protocolError("signin_success without a signin, ignored");
    this.current = { stage: "signed_in", userData: parseObject(data)?.user_data ?? data ?? "" };
    return [{ type: "cancel", timer: timer("signin", { request: current.request }) }];
  }

  /**
   * `<ns>:error` 4009 while the server's answer to a signin is awaited is that answer.
   * @param {string | undefined} data the frame's data.
   * @returns {Action[] | null} the actions, or `null` when the error is not the signin's.
   */
  refused(data) {
    const current = this.current;
    const payload = parseObject(data);
    if (!current || current.stage !== "awaiting_server" || payload?.code !== CloseCode.unauthorized) return null;
    return this.failed(current.request, { kind: "refused", message: `the server refused the signin: ${payload?.message ?? ""}` });
  }
}
