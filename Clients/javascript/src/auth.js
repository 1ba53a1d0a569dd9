// The app's auth endpoints, asked through the injected `fetch` (DESIGN.md "The wire protocol";
// docs/rooms-protocol.md "Auth route"):
// - channels: one form POST of `socket_id` and `channel_name` per channel, as Pusher does, so
//   the app's existing Pusher-style endpoint answers unchanged (`{auth, channel_data?}`);
// - signin: a form POST of `socket_id` (`{auth, user_data}`);
// - rooms: one JSON POST of `{"rooms": [names]}` for every room joined in the same moment.

/** @typedef {import("./actions.js").AuthFailure} AuthFailure */

/**
 * The options the requests read.
 * @typedef {object} AuthOptions
 * @property {string} [authEndpoint] where private and presence channels are authorised.
 * @property {string} [userAuthEndpoint] where `signin()` gets its user authentication.
 * @property {string} [roomAuthEndpoint] where room tokens are asked for.
 * @property {Record<string, string>} [authHeaders] headers sent with every auth request (a bearer token, a CSRF token).
 * @property {RequestCredentials} [authCredentials] `fetch`'s credentials mode (`same-origin`; `include` for cookies across origins).
 * @property {(request: { socketId: string, channelName: string }) => Promise<{ auth: string, channel_data?: string, shared_secret?: string }>} [authorizer]
 *   answers channel authorisations instead of `authEndpoint`.
 * @property {(request: { socketId: string }) => Promise<{ auth: string, user_data: string }>} [userAuthenticator]
 *   answers signins instead of `userAuthEndpoint`.
 * @property {(rooms: string[]) => Promise<import("./room-tokens.js").RoomAuthAnswer>} [roomAuthorizer]
 *   answers room auth requests instead of `roomAuthEndpoint`.
 */

/** The longest answer read (1 MiB): a room answer for 100 rooms is a few tens of KiB. */
export const MAX_ANSWER_SIZE = 1 << 20;

/**
 * POSTs `body` and reads a JSON object answer.
 * @param {typeof fetch} fetchFunction the injected `fetch`.
 * @param {string} url the endpoint.
 * @param {string} body the body.
 * @param {string} contentType its media type.
 * @param {AuthOptions} options headers and credentials.
 * @param {AbortSignal} signal cancels the request.
 * @returns {Promise<{ ok: true, value: any } | { ok: false, failure: AuthFailure }>} the answer.
 */
export async function post(fetchFunction, url, body, contentType, options, signal) {
  let response;
  try {
    response = await fetchFunction(url, { method: "POST", body, signal, credentials: options.authCredentials ?? "same-origin",
      headers: { ...options.authHeaders, "Content-Type": contentType, Accept: "application/json" } });
  } catch (error) {
    // A browser tells a refused cross-origin request the same way as a network failure.
    return { ok: false, failure: { kind: "transport",
      message: `the auth endpoint cannot be reached (or refuses this page's origin: CORS): ${describe(error)}` } };
  }
  let text;
  try { text = await response.text(); } catch (error) { return { ok: false, failure: { kind: "transport", message: describe(error) } }; }
  if (!response.ok) return { ok: false, failure: { kind: "http", status: response.status, message: `the auth endpoint answered ${response.status}: ${text.slice(0, 200)}` } };
  if (text.length > MAX_ANSWER_SIZE) return { ok: false, failure: { kind: "invalid", message: `an answer longer than ${MAX_ANSWER_SIZE} bytes` } };
  try {
    const value = JSON.parse(text);
    if (value !== null && typeof value === "object") return { ok: true, value };
  } catch { /* told below */ }
  return { ok: false, failure: { kind: "invalid", message: `the answer is not a JSON object: ${text.slice(0, 200)}` } };
}

/**
 * Runs the app's closure: its exception becomes a failure (`status` kept when it has one).
 * @template T
 * @param {() => Promise<T>} closure the closure.
 * @returns {Promise<{ ok: true, value: T } | { ok: false, failure: AuthFailure }>} the answer.
 */
async function run(closure) {
  try {
    return { ok: true, value: await closure() };
  } catch (error) {
    const status = /** @type {{ status?: unknown }} */ (error ?? {}).status;
    if (typeof status === "number") return { ok: false, failure: { kind: "http", status, message: describe(error) } };
    return { ok: false, failure: { kind: "transport", message: `the authoriser failed: ${describe(error)}` } };
  }
}

/**
 * A form body (`application/x-www-form-urlencoded`).
 * @param {Record<string, string>} fields the fields.
 * @returns {string} the body.
 */
function form(fields) { return new URLSearchParams(fields).toString(); }

/**
 * Authorises one channel subscription for a socket id.
 * @param {typeof fetch} fetchFunction the injected `fetch`.
 * @param {AuthOptions} options the endpoint, headers or closure.
 * @param {string} socketId the connection's socket id (the signature covers it).
 * @param {string} channelName the channel.
 * @param {AbortSignal} signal cancels the request.
 * @returns {Promise<import("./channel-machine.js").ChannelAuthResult>} the answer.
 */
export async function authorizeChannel(fetchFunction, options, socketId, channelName, signal) {
  const { authorizer, authEndpoint } = options;
  const result = authorizer ? await run(() => authorizer({ socketId, channelName }))
    : authEndpoint ? await post(fetchFunction, authEndpoint, form({ socket_id: socketId, channel_name: channelName }), "application/x-www-form-urlencoded", options, signal)
      : { ok: /** @type {const} */ (false), failure: /** @type {AuthFailure} */ ({ kind: "not_configured", message: "no authEndpoint or authorizer is configured" }) };
  if (!result.ok) return result;
  return { ok: true, auth: result.value?.auth, channel_data: result.value?.channel_data, shared_secret: result.value?.shared_secret };
}

/**
 * Authenticates the user for `signin()` on a socket id.
 * @param {typeof fetch} fetchFunction the injected `fetch`.
 * @param {AuthOptions} options the endpoint, headers or closure.
 * @param {string} socketId the connection's socket id.
 * @param {AbortSignal} signal cancels the request.
 * @returns {Promise<import("./signin-machine.js").UserAuthResult>} the answer.
 */
export async function authenticateUser(fetchFunction, options, socketId, signal) {
  const { userAuthenticator, userAuthEndpoint } = options;
  const result = userAuthenticator ? await run(() => userAuthenticator({ socketId }))
    : userAuthEndpoint ? await post(fetchFunction, userAuthEndpoint, form({ socket_id: socketId }), "application/x-www-form-urlencoded", options, signal)
      : { ok: /** @type {const} */ (false), failure: /** @type {AuthFailure} */ ({ kind: "not_configured", message: "no userAuthEndpoint or userAuthenticator is configured" }) };
  if (!result.ok) return result;
  return { ok: true, auth: result.value?.auth, user_data: result.value?.user_data };
}

/**
 * Asks the room auth route for every room of a batch.
 * @param {typeof fetch} fetchFunction the injected `fetch`.
 * @param {AuthOptions} options the endpoint, headers or closure.
 * @param {string[]} rooms at most 100 room names.
 * @param {AbortSignal} signal cancels the request.
 * @returns {Promise<import("./room-tokens.js").RoomAuthResult>} the answer.
 */
export async function authorizeRooms(fetchFunction, options, rooms, signal) {
  const { roomAuthorizer, roomAuthEndpoint } = options;
  const result = roomAuthorizer ? await run(() => roomAuthorizer(rooms))
    : roomAuthEndpoint ? await post(fetchFunction, roomAuthEndpoint, JSON.stringify({ rooms }), "application/json", options, signal)
      : { ok: /** @type {const} */ (false), failure: /** @type {AuthFailure} */ ({ kind: "not_configured", message: "no roomAuthEndpoint or roomAuthorizer is configured" }) };
  if (!result.ok) return result;
  const answer = result.value;
  if (!answer || typeof answer.rooms !== "object" || answer.rooms === null) return { ok: false, failure: { kind: "invalid", message: "the answer is not {time, rooms}" } };
  return { ok: true, answer };
}

/**
 * @param {unknown} error an exception.
 * @returns {string} its message.
 */
function describe(error) { return error instanceof Error ? error.message : String(error); }
