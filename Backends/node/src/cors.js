// Cross-origin requests to the auth and config routes: the Fetch standard's CORS protocol
// (https://fetch.spec.whatwg.org/#http-cors-protocol) for origins the app lists.
//
// A page on another origin than its backend posts JSON (and the app's own headers) to the auth
// route, so the browser first asks with `OPTIONS` (a preflight). The answers name the one origin
// asked about and allow credentials (the route reads the user's session), so `*` is never
// accepted. The same decisions as the Python (`realtime_backend.cors`) and PHP (`CrossOrigin`)
// libraries; the shared cases are Backends/conformance/cors.json.

/** Most header names a preflight may ask for. */
export const MAX_PREFLIGHT_HEADERS = 32;
const MAX_PREFLIGHT_HEADERS_BYTES = 1024;
/** Seconds a browser may keep a preflight's answer. */
export const PREFLIGHT_MAX_AGE = 600;

const ORIGIN = /^(https?):\/\/(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::([0-9]+))?$/;
const LABEL = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
const IPV4_PART = /^(0|[1-9][0-9]{0,2})$/;
const PORT = /^[1-9][0-9]{0,4}$/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;
const DEFAULT_PORTS = { http: "80", https: "443" };
const NOT_ASCII = /[^\x00-\x7f]/;

/**
 * `origin` lowercased when a browser would send it so (the WHATWG URL standard's serialization
 * of an origin: no default port, no leading zero, a dotted-decimal IPv4 address, a compressed
 * IPv6 one, ASCII only); `null` when a browser never sends it.
 * @param {string} origin the origin.
 * @returns {string | null} the origin as compared.
 */
function canonicalOrigin(origin) {
  if (NOT_ASCII.test(origin)) return null;
  const normalized = origin.toLowerCase();
  const match = ORIGIN.exec(normalized);
  if (!match) return null;
  const [, scheme, host, port] = match;
  if (port !== undefined && (!PORT.test(port) || Number(port) > 65535 || port === DEFAULT_PORTS[/** @type {"http" | "https"} */ (scheme)])) return null;
  if (host.startsWith("[")) {
    let serialized = null;
    try { serialized = new URL(`http://${host}/`).hostname; } catch { return null; }
    return serialized === host ? normalized : null;
  }
  const labels = host.split(".");
  if (!labels.every((label) => LABEL.test(label))) return null;
  const last = labels[labels.length - 1];
  if (/^[0-9]+$/.test(last) || last.startsWith("0x")) { // an IPv4 address: dotted decimal, as a browser writes it
    if (labels.length !== 4 || !labels.every((part) => IPV4_PART.test(part) && Number(part) <= 255)) return null;
  }
  return normalized;
}

/**
 * `text` for an error message: at most 200 characters, each outside `!`…`~` as `?`.
 * @param {string} text the text.
 * @returns {string} the printable text.
 */
function printable(text) { return text.slice(0, 200).replace(/[^\x21-\x7e]/g, "?"); }

/**
 * The origins allowed to call the routes from a browser, and the answers that follow.
 */
export class CrossOrigin {
  /**
   * @param {Iterable<string>} origins each `scheme://host[:port]` as a browser sends it in
   *   `Origin` (`http` or `https`, no path, no trailing `/`), compared without case. Empty: no
   *   cross-origin request is allowed, and no answer carries a CORS header.
   * @throws {TypeError} for `*`, `null` or an origin that is not `scheme://host[:port]`.
   */
  constructor(origins = []) {
    /** @type {Set<string>} */
    this.origins = new Set();
    for (const origin of origins) {
      if (typeof origin !== "string") throw new TypeError(`allowedOrigins: ${JSON.stringify(origin)} is not a string`);
      if (origin === "*") {
        throw new TypeError("allowedOrigins: '*' cannot be allowed: the auth route answers with the user's session (credentials), so list each origin (https://shop.example)");
      }
      const normalized = canonicalOrigin(origin);
      if (normalized === null) {
        throw new TypeError(`allowedOrigins: ${JSON.stringify(origin)} is not an origin as a browser sends it: scheme://host[:port], http or https, without a path, a trailing /, a default port or a leading zero`);
      }
      this.origins.add(normalized);
    }
  }

  /**
   * @param {string | undefined} origin an `Origin` header's value.
   * @returns {boolean} whether it is listed.
   */
  allows(origin) { return typeof origin === "string" && !NOT_ASCII.test(origin) && this.origins.has(origin.toLowerCase()); }

  /**
   * The headers an answer (not a preflight's) to a request from `origin` carries: the origin
   * and credentials for a listed origin, `Vary: Origin` whenever origins are listed.
   * @param {string | undefined} origin the request's `Origin`.
   * @returns {Record<string, string>} the headers.
   */
  headers(origin) {
    if (this.origins.size === 0) return {};
    if (!this.allows(origin)) return { Vary: "Origin" };
    return { "Access-Control-Allow-Origin": /** @type {string} */ (origin), "Access-Control-Allow-Credentials": "true", Vary: "Origin" };
  }

  /**
   * The answer to `OPTIONS` on a route that takes `method` (`POST` or `GET`): 204 with the
   * origin, credentials, the method, the headers asked for (lowercase, at most 32) and a max age
   * of 600 s; 204 with `Allow` when there is no `Origin` (not a browser's preflight); 403 for an
   * origin not listed; 405 (with `Allow`) for another method asked; 400 for asked headers that
   * are not a list of tokens (RFC 9110 §5.6.2).
   * @param {string} method the route's method.
   * @param {string | undefined} origin `Origin`.
   * @param {string | undefined} requestMethod `Access-Control-Request-Method`.
   * @param {string | undefined} requestHeaders `Access-Control-Request-Headers`.
   * @returns {{ status: number, error: { error: string } | null, headers: Record<string, string> }} the answer.
   */
  preflight(method, origin, requestMethod, requestHeaders) {
    const allow = `${method}, OPTIONS`;
    if (typeof origin !== "string") return { status: 204, error: null, headers: { Allow: allow } };
    const vary = this.origins.size > 0 ? { Vary: "Origin" } : {};
    if (!this.allows(origin)) {
      return { status: 403, error: { error: `the origin ${printable(origin)} is not allowed: add it to allowedOrigins` }, headers: vary };
    }
    const asked = requestMethod ?? "";
    if (NOT_ASCII.test(asked) || asked.toUpperCase() !== method) return { status: 405, error: { error: `${method} only` }, headers: { Allow: allow, ...vary } };
    let names = [];
    if (requestHeaders) {
      const refused = { status: 400, error: { error: `Access-Control-Request-Headers: at most ${MAX_PREFLIGHT_HEADERS} header names, each a token (RFC 9110)` }, headers: vary };
      if (Buffer.byteLength(requestHeaders) > MAX_PREFLIGHT_HEADERS_BYTES || NOT_ASCII.test(requestHeaders)) return refused;
      names = requestHeaders.split(",").map((name) => name.replace(/^[ \t]+|[ \t]+$/g, "").toLowerCase()).filter((name) => name !== "");
      if (names.length > MAX_PREFLIGHT_HEADERS || !names.every((name) => TOKEN.test(name))) return refused;
    }
    /** @type {Record<string, string>} */
    const headers = { "Access-Control-Allow-Origin": origin, "Access-Control-Allow-Credentials": "true", "Access-Control-Allow-Methods": method };
    if (names.length > 0) headers["Access-Control-Allow-Headers"] = names.join(",");
    headers["Access-Control-Max-Age"] = String(PREFLIGHT_MAX_AGE);
    headers.Vary = "Origin, Access-Control-Request-Headers";
    return { status: 204, error: null, headers };
  }
}
