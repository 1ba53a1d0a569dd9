// The wire format shared by channels and rooms: Pusher Channels protocol 7 frames
// (`{"event", "channel"?, "data"}`, `data` a JSON-encoded string) in the client's namespace
// (docs/DESIGN.md "The wire protocol"; docs/rooms-protocol.md).

/**
 * A frame as it travels: `data` is the JSON text of the payload (Pusher protocol 7).
 * @typedef {object} Frame
 * @property {string} event the event name, `bird:subscribe` or an app event.
 * @property {string} [channel] the channel or room the frame belongs to.
 * @property {string} [data] the payload as JSON text (a string, not an object).
 * @property {string} [user_id] the sender of a client event on a presence channel.
 */

/** The largest frame read from the server, in UTF-16 code units (4 MiB, the Swift client's `maxMessageSize`). */
export const MAX_FRAME_SIZE = 4 << 20;

/**
 * Encodes a frame; `payload` is JSON-encoded into `data` unless it is already a string.
 * @param {string} event the full event name.
 * @param {unknown} payload the payload (an object) or its JSON text.
 * @param {string} [channel] the channel or room.
 * @returns {string} the frame's text.
 */
export function encodeFrame(event, payload, channel) {
  /** @type {Frame} */
  const frame = { event, data: typeof payload === "string" ? payload : JSON.stringify(payload) };
  if (channel !== undefined) frame.channel = channel;
  return JSON.stringify(frame);
}

/**
 * Parses a frame: an object with a string `event`; a `data` that is not a string is
 * re-encoded, as some servers send it embedded.
 * @param {string} text the frame's text.
 * @returns {Frame | null} the frame, or `null` for text that is not a frame.
 */
export function parseFrame(text) {
  let value;
  try { value = JSON.parse(text); } catch { return null; }
  if (value === null || typeof value !== "object" || typeof value.event !== "string") return null;
  /** @type {Frame} */
  const frame = { event: value.event };
  if (typeof value.channel === "string") frame.channel = value.channel;
  if (typeof value.data === "string") frame.data = value.data;
  else if (value.data !== undefined) frame.data = JSON.stringify(value.data);
  if (typeof value.user_id === "string") frame.user_id = value.user_id;
  return frame;
}

/**
 * Parses a payload's JSON text; text that is not JSON is returned as it is (Pusher's
 * convention for app events).
 * @param {string | undefined} text the `data` of a frame.
 * @returns {any} the value.
 */
export function parseData(text) {
  if (text === undefined) return undefined;
  try { return JSON.parse(text); } catch { return text; }
}

/**
 * Parses a payload that must be a JSON object.
 * @param {string | undefined} text the `data` of a frame.
 * @returns {Record<string, any> | null} the object, or `null`.
 */
export function parseObject(text) {
  const value = parseData(text);
  return value !== null && typeof value === "object" && !Array.isArray(value) ? value : null;
}

/**
 * Splits a protocol event name (`bird:ping`, `bird_internal:subscription_succeeded`).
 * @param {string} event the event name.
 * @param {string} namespace the client's namespace (`bird`).
 * @returns {string | null} the bare name, or `null` for an app event or another namespace.
 */
export function protocolName(event, namespace) {
  if (event.startsWith(namespace + ":")) return event.slice(namespace.length + 1);
  if (event.startsWith(namespace + "_internal:")) return event.slice(namespace.length + 10);
  return null;
}

/**
 * A channel's kind, from its name's prefix (Pusher's convention).
 * @typedef {"public" | "private" | "presence" | "encrypted"} ChannelKind
 */

/**
 * The kind of a channel name.
 * @param {string} name the channel name.
 * @returns {ChannelKind} its kind.
 */
export function channelKind(name) {
  if (name.startsWith("private-encrypted-")) return "encrypted";
  if (name.startsWith("private-")) return "private";
  if (name.startsWith("presence-")) return "presence";
  return "public";
}

/**
 * Binary values inside room data travel as `{"$binary": "<base64>"}` (docs/rooms-protocol.md
 * "Binary values", RFC 4648 §4); the client hands them to the app as `Uint8Array`.
 * @param {any} value a parsed JSON value.
 * @returns {any} the value with every `{"$binary"}` object replaced by its bytes.
 */
export function decodeBinary(value) {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(decodeBinary);
  const keys = Object.keys(value);
  if (keys.length === 1 && keys[0] === "$binary" && typeof value.$binary === "string") {
    try { return Uint8Array.from(atob(value.$binary), (c) => c.charCodeAt(0)); } catch { return value; }
  }
  /** @type {Record<string, any>} */
  const out = {};
  for (const key of keys) out[key] = decodeBinary(value[key]);
  return out;
}

/**
 * The JSON text of room data, with every `Uint8Array` written `{"$binary": "<base64>"}`.
 * @param {unknown} value the app's data.
 * @returns {string} its JSON text.
 */
export function encodeData(value) {
  return JSON.stringify(value, (_key, item) => {
    if (!(item instanceof Uint8Array)) return item;
    let text = "";
    for (const byte of item) text += String.fromCharCode(byte);
    return { $binary: btoa(text) };
  }) ?? "null";
}
