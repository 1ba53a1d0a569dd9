// Ready handlers for Node's `http` server (and Express-style middleware, which has the same
// `(req, res, next)` shape): the rooms' auth route and `config`, and a webhook receiver.

import { CrossOrigin } from "./cors.js";
import { canonicalJSON } from "./json.js";
import { MAX_ROOMS } from "./realtime.js";

/** Largest request body read, in bytes (an auth request naming 100 rooms is about 17 KiB). */
export const MAX_BODY_BYTES = 64 * 1024;

/**
 * Reads a request's body, at most `limit` bytes (an Express body parser's `req.body`, when
 * there is one, as it is).
 * @param {import("node:http").IncomingMessage & { body?: unknown }} request the request.
 * @param {number} limit bytes.
 * @returns {Promise<Buffer | null>} the body, or `null` when it is longer than `limit`.
 */
export async function readBody(request, limit = MAX_BODY_BYTES) {
  if (Buffer.isBuffer(request.body)) return request.body.length <= limit ? request.body : null;
  if (typeof request.body === "string") return Buffer.byteLength(request.body) <= limit ? Buffer.from(request.body) : null;
  if (request.body && typeof request.body === "object") return Buffer.from(JSON.stringify(request.body));
  const chunks = [];
  let size = 0;
  for await (const chunk of request) {
    size += chunk.length;
    if (size > limit) { request.resume(); return null; }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * @param {import("node:http").ServerResponse} response @param {number} status
 * @param {unknown} value the JSON answer; `null` for none (204).
 * @param {Record<string, string>} [headers] more headers (CORS, `Allow`).
 */
function reply(response, status, value, headers = {}) {
  if (value === null) {
    response.writeHead(status, { "Cache-Control": "no-store", ...headers });
    response.end();
    return;
  }
  const text = canonicalJSON(value);
  response.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), "Cache-Control": "no-store", ...headers });
  response.end(text);
}

/**
 * The rooms' routes: `POST {path}/rooms/auth` (`{"rooms": [names]}`, answered per room) and
 * `GET {path}/config` (the public grants). Anything else goes to `next` (middleware) or gets 404.
 * `OPTIONS` is a browser's preflight, answered for `allowedOrigins` (`CrossOrigin`); a listed
 * origin's answers carry its CORS headers.
 * @param {import("./realtime.js").Realtime} realtime the backend.
 * @param {object} options
 * @param {(request: import("node:http").IncomingMessage) => string | null | undefined | Promise<string | null | undefined>} options.user
 *   the app's user from its own session (cookie, header), `null` for a visitor; throwing answers 401 (the client may retry once).
 * @param {(request: import("node:http").IncomingMessage, user: string) => unknown} [options.info] a presence room member's info.
 * @param {string} [options.path] the routes' prefix (`""`).
 * @param {string[]} [options.allowedOrigins] the origins of pages on another origin than this backend that may call the
 *   routes with the user's credentials (`https://shop.example`, `http://127.0.0.1:8080`); none by default (same origin only).
 * @throws {TypeError} an allowed origin that is `*` or not `scheme://host[:port]`.
 * @returns {(request: import("node:http").IncomingMessage, response: import("node:http").ServerResponse, next?: () => void) => Promise<void>} the handler.
 */
export function authHandler(realtime, { user, info, path = "", allowedOrigins = [] }) {
  const crossOrigin = new CrossOrigin(allowedOrigins);
  return async (request, response, next) => {
    const url = new URL(request.url ?? "/", "http://localhost");
    const route = url.pathname === `${path}/config` ? "config" : url.pathname === `${path}/rooms/auth` ? "auth" : null;
    if (route === null) {
      if (next) return next();
      return reply(response, 404, { error: "POST /rooms/auth or GET /config" });
    }
    const header = (/** @type {string} */ name) => {
      const value = request.headers[name];
      return Array.isArray(value) ? value.join(", ") : value;
    };
    if (request.method === "OPTIONS") {
      const answer = crossOrigin.preflight(route === "config" ? "GET" : "POST", header("origin"),
        header("access-control-request-method"), header("access-control-request-headers"));
      return reply(response, answer.status, answer.error, answer.headers);
    }
    const cors = crossOrigin.headers(header("origin"));
    if (route === "config") {
      if (request.method !== "GET") return reply(response, 405, { error: "GET /config" }, { Allow: "GET", ...cors });
      return reply(response, 200, realtime.config(), cors);
    }
    if (request.method !== "POST") return reply(response, 405, { error: "POST /rooms/auth" }, { Allow: "POST", ...cors });
    const body = await readBody(request);
    if (!body) return reply(response, 413, { error: `a body over ${MAX_BODY_BYTES} bytes` }, cors);
    let rooms;
    try { rooms = JSON.parse(body.toString("utf8")).rooms; } catch { rooms = undefined; }
    if (!Array.isArray(rooms) || rooms.length > MAX_ROOMS || !rooms.every((name) => typeof name === "string")) {
      return reply(response, 400, { error: `expected {"rooms": [names]} with at most ${MAX_ROOMS} rooms` }, cors);
    }
    let who;
    try {
      who = (await user(request)) ?? null;
    } catch {
      return reply(response, 401, { error: "unauthorized" }, cors);
    }
    let presence;
    try {
      presence = who !== null && info ? await info(request, who) : undefined;
    } catch {
      return reply(response, 500, { error: "the app's info function failed" }, cors);
    }
    return reply(response, 200, await realtime.authorizeRooms(rooms, who, presence), cors);
  };
}

/**
 * A webhook receiver: verifies the request (`verifyWebhook`), hands the webhook to
 * `onWebhook`, and answers 200; a refused one gets 401 and is not handed on.
 * @param {import("./realtime.js").Realtime} realtime the backend.
 * @param {(webhook: { time_ms: number, events: Record<string, unknown>[] }) => void | Promise<void>} onWebhook the app's code.
 * @returns {(request: import("node:http").IncomingMessage, response: import("node:http").ServerResponse) => Promise<void>} the handler.
 */
export function webhookHandler(realtime, onWebhook) {
  return async (request, response) => {
    const body = await readBody(request, 1 << 20);
    if (!body) return reply(response, 413, { error: "a body over 1 MiB" });
    let webhook;
    try {
      webhook = realtime.verifyWebhook(/** @type {string | undefined} */ (request.headers["x-pusher-key"]),
        /** @type {string | undefined} */ (request.headers["x-pusher-signature"]), body);
    } catch (error) {
      return reply(response, 401, { error: /** @type {{ code?: string }} */ (error).code ?? "bad_signature" });
    }
    try {
      await onWebhook(webhook);
    } catch {
      return reply(response, 500, { error: "the app's webhook handler failed" }); // the server retries it
    }
    return reply(response, 200, {});
  };
}
