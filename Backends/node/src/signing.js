// Pusher's signatures (channel subscriptions, user signin, the REST API's query), HS256 room
// tokens and webhook checks, with node:crypto.

import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { canonicalJSON } from "./json.js";

/** @param {string} secret @param {string | Uint8Array} message @returns {Buffer} HMAC-SHA256. */
export const hmac = (secret, message) => createHmac("sha256", secret).update(message).digest();

/** @param {Uint8Array} bytes @returns {string} base64url without padding (RFC 7515 §2). */
const base64url = (bytes) => Buffer.from(bytes).toString("base64url");

/**
 * An HS256 JWT (RFC 7519) of `claims`, written canonically so that every backend signs the
 * same bytes.
 * @param {Record<string, unknown>} claims the claims.
 * @param {string} secret the app secret.
 * @returns {string} `header.claims.signature`.
 */
export function signToken(claims, secret) {
  const input = `${base64url(Buffer.from('{"alg":"HS256","typ":"JWT"}'))}.${base64url(Buffer.from(canonicalJSON(claims)))}`;
  return `${input}.${base64url(hmac(secret, input))}`;
}

/** @param {Uint8Array} a @param {Uint8Array} b @returns {boolean} equal, compared in constant time. */
export function sameBytes(a, b) { return a.length === b.length && timingSafeEqual(a, b); }

/** @param {string} text @param {Uint8Array} [bytes] @returns {string} hex MD5 (Pusher's `body_md5`). */
export const md5 = (text, bytes) => createHash("md5").update(bytes ?? text).digest("hex");

/** @param {Uint8Array} bytes @returns {Buffer} SHA-256. */
export const sha256 = (bytes) => createHash("sha256").update(bytes).digest();

const UNRESERVED = /[^A-Za-z0-9\-._~]/g;

/**
 * Pusher's REST signature as a query string: `auth_key`, `auth_timestamp` (seconds),
 * `auth_version=1.0`, `body_md5` when there is a body, and `auth_signature` (hex HMAC-SHA256 of
 * `METHOD\npath\nsorted query`), sorted by name, RFC 3986 unreserved characters kept.
 * @param {{ key: string, secret: string }} app the app's key and secret.
 * @param {string} method `GET` or `POST`.
 * @param {string} path the path as sent (`/apps/42/events`).
 * @param {string | Uint8Array} body the body (empty for a GET).
 * @param {number} timestamp seconds since 1970.
 * @param {Record<string, string>} [extra] the request's own parameters (`limit`, `before`), signed with the rest.
 * @returns {string} the query, without `?`.
 */
export function signedQuery(app, method, path, body, timestamp, extra = {}) {
  const bytes = typeof body === "string" ? Buffer.from(body) : Buffer.from(body);
  /** @type {Record<string, string>} */
  const parameters = { ...extra, auth_key: app.key, auth_timestamp: String(timestamp), auth_version: "1.0" };
  if (bytes.length > 0) parameters.body_md5 = md5("", bytes);
  const sorted = Object.keys(parameters).sort();
  const toSign = `${method}\n${path}\n${sorted.map((name) => `${name}=${parameters[name]}`).join("&")}`;
  parameters.auth_signature = hmac(app.secret, toSign).toString("hex");
  return Object.keys(parameters).sort()
    .map((name) => `${name}=${parameters[name].replace(UNRESERVED, (c) => [...Buffer.from(c)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join(""))}`)
    .join("&");
}
