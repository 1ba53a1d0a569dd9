// NaCl's crypto_secretbox (XSalsa20-Poly1305), for encrypted channels (Pusher's
// `private-encrypted-`) and sealed rooms (docs/rooms-protocol.md, "Sealed rooms"): a browser's
// WebCrypto has no XSalsa20, and the client has no dependencies. Loaded on first use only
// (`import("./secretbox.js")`), so pages that never meet an encrypted channel do not pay for it.
// Checked against libsodium's output (test/fixtures/secretbox.json, made with PyNaCl).

/** Bytes of a key (crypto_secretbox_KEYBYTES). */
export const KEY_BYTES = 32;
/** Bytes of a nonce (crypto_secretbox_NONCEBYTES). */
export const NONCE_BYTES = 24;
/** Bytes of the authenticator before the ciphertext (crypto_secretbox_MACBYTES). */
export const MAC_BYTES = 16;
/** Longest ciphertext opened (base64 characters): a room's data is at most 10 KiB, Pusher's events 10 KiB. */
export const MAX_CIPHERTEXT_CHARS = 64 << 10;

const SIGMA = [0x61707865, 0x3320646e, 0x79622d32, 0x6b206574]; // "expand 32-byte k"

/** @param {Uint8Array} bytes @param {number} at @returns {number} a little-endian word. */
const word = (bytes, at) => (bytes[at] | bytes[at + 1] << 8 | bytes[at + 2] << 16 | bytes[at + 3] << 24) >>> 0;

/**
 * Salsa20's 20 rounds (10 double rounds) over a 16-word state, in place.
 * @param {Uint32Array} x the state.
 */
function rounds(x) {
  /** @param {number} a @param {number} b @param {number} c @param {number} d */
  const quarter = (a, b, c, d) => {
    let t = x[a] + x[d]; x[b] ^= t << 7 | t >>> 25;
    t = x[b] + x[a]; x[c] ^= t << 9 | t >>> 23;
    t = x[c] + x[b]; x[d] ^= t << 13 | t >>> 19;
    t = x[d] + x[c]; x[a] ^= t << 18 | t >>> 14;
  };
  for (let i = 0; i < 10; i++) {
    quarter(0, 4, 8, 12); quarter(5, 9, 13, 1); quarter(10, 14, 2, 6); quarter(15, 3, 7, 11);
    quarter(0, 1, 2, 3); quarter(5, 6, 7, 4); quarter(10, 11, 8, 9); quarter(15, 12, 13, 14);
  }
}

/**
 * The Salsa20 state for a key and a 16-byte input (nonce and counter, or HSalsa20's input).
 * @param {Uint8Array} key 32 bytes.
 * @param {Uint8Array} input 16 bytes.
 * @returns {Uint32Array} the 16 words.
 */
function state(key, input) {
  const s = new Uint32Array(16);
  s[0] = SIGMA[0]; s[5] = SIGMA[1]; s[10] = SIGMA[2]; s[15] = SIGMA[3];
  for (let i = 0; i < 4; i++) {
    s[1 + i] = word(key, 4 * i);
    s[11 + i] = word(key, 16 + 4 * i);
    s[6 + i] = word(input, 4 * i);
  }
  return s;
}

/**
 * XSalsa20's keystream XORed into `bytes` (from keystream byte 0), in place.
 * @param {Uint8Array} bytes the data.
 * @param {Uint8Array} key 32 bytes.
 * @param {Uint8Array} nonce 24 bytes.
 */
function xsalsa20(bytes, key, nonce) {
  // HSalsa20: the subkey from the key and the nonce's first 16 bytes (words 0, 5, 10, 15, 6…9).
  const h = state(key, nonce.subarray(0, 16));
  rounds(h);
  const subkey = new Uint8Array(32);
  const view = new DataView(subkey.buffer);
  [0, 5, 10, 15, 6, 7, 8, 9].forEach((index, i) => view.setUint32(4 * i, h[index], true));
  const input = new Uint8Array(16);
  input.set(nonce.subarray(16, 24));
  const block = new Uint8Array(64);
  const out = new DataView(block.buffer);
  for (let at = 0, counter = 0; at < bytes.length; at += 64, counter++) {
    new DataView(input.buffer).setUint32(8, counter, true);
    const s = state(subkey, input);
    const x = s.slice();
    rounds(x);
    for (let i = 0; i < 16; i++) out.setUint32(4 * i, (x[i] + s[i]) >>> 0, true);
    for (let i = 0; i < 64 && at + i < bytes.length; i++) bytes[at + i] ^= block[i];
  }
}

/** @param {Uint8Array} bytes @returns {bigint} a little-endian number. */
function number(bytes) {
  let n = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) n = n << 8n | BigInt(bytes[i]);
  return n;
}

/**
 * Poly1305 (RFC 8439 §2.5) of `message` under a one-time 32-byte key.
 * @param {Uint8Array} message the bytes.
 * @param {Uint8Array} key r (clamped) then s.
 * @returns {Uint8Array} the 16-byte tag.
 */
function poly1305(message, key) {
  const p = (1n << 130n) - 5n;
  const mask = (1n << 130n) - 1n;
  const r = number(key.subarray(0, 16)) & 0x0ffffffc0ffffffc0ffffffc0fffffffn;
  let acc = 0n;
  const view = new DataView(message.buffer, message.byteOffset, message.byteLength);
  const full = message.length & ~15;
  const high = 1n << 128n;
  for (let at = 0; at < full; at += 16) {
    acc = (acc + (view.getBigUint64(at, true) | view.getBigUint64(at + 8, true) << 64n | high)) * r;
    acc = (acc & mask) + (acc >> 130n) * 5n;
  }
  if (full < message.length) { const block = message.subarray(full); acc = (acc + number(block) + (1n << BigInt(8 * block.length))) * r; }
  acc = (acc % p + number(key.subarray(16, 32))) & ((1n << 128n) - 1n);
  const tag = new Uint8Array(16);
  for (let i = 0; i < 16; i++, acc >>= 8n) tag[i] = Number(acc & 0xffn);
  return tag;
}

/**
 * The stream's first 32 bytes (Poly1305's key) and the message XORed after them.
 * @param {Uint8Array} body the message or the ciphertext.
 * @param {Uint8Array} key 32 bytes.
 * @param {Uint8Array} nonce 24 bytes.
 * @returns {{ polyKey: Uint8Array, body: Uint8Array }} the one-time key and the XORed body.
 */
function stream(body, key, nonce) {
  if (key.length !== KEY_BYTES || nonce.length !== NONCE_BYTES) throw new RangeError("secretbox: a 32-byte key and a 24-byte nonce");
  const bytes = new Uint8Array(32 + body.length);
  bytes.set(body, 32);
  xsalsa20(bytes, key, nonce);
  return { polyKey: bytes.subarray(0, 32), body: bytes.subarray(32) };
}

/**
 * crypto_secretbox_easy: the authenticator then the ciphertext.
 * @param {Uint8Array} message the plaintext.
 * @param {Uint8Array} key 32 bytes.
 * @param {Uint8Array} nonce 24 bytes, never used twice with one key.
 * @returns {Uint8Array} `MAC_BYTES` + the message's length.
 * @throws {RangeError} a key or nonce of the wrong size.
 */
export function seal(message, key, nonce) {
  const { polyKey, body } = stream(message, key, nonce);
  const box = new Uint8Array(MAC_BYTES + body.length);
  box.set(poly1305(body, polyKey));
  box.set(body, MAC_BYTES);
  return box;
}

/**
 * crypto_secretbox_open_easy.
 * @param {Uint8Array} box the authenticator then the ciphertext.
 * @param {Uint8Array} key 32 bytes.
 * @param {Uint8Array} nonce 24 bytes.
 * @returns {Uint8Array | null} the plaintext, or `null` when the box does not open (altered,
 *   another key or nonce, too short): nothing of an unauthenticated box is returned.
 * @throws {RangeError} a key or nonce of the wrong size.
 */
export function open(box, key, nonce) {
  if (box.length < MAC_BYTES) return null;
  const ciphertext = box.subarray(MAC_BYTES);
  const { polyKey } = stream(new Uint8Array(0), key, nonce);
  const tag = poly1305(ciphertext, polyKey);
  let difference = 0;
  for (let i = 0; i < MAC_BYTES; i++) difference |= tag[i] ^ box[i]; // the whole tag compared, always
  return difference === 0 ? stream(ciphertext, key, nonce).body : null;
}

/** @param {string} text base64 (RFC 4648 §4). @returns {Uint8Array | null} the bytes, or `null` when it is not base64. */
export function fromBase64(text) {
  if (text.length % 4 !== 0) return null;
  const pad = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const out = new Uint8Array(text.length / 4 * 3 - pad);
  for (let i = 0, o = 0; i < text.length; i += 4) {
    const last = i + 4 === text.length;
    const a = T[text.charCodeAt(i)] ?? -1, b = T[text.charCodeAt(i + 1)] ?? -1;
    const c = last && pad === 2 ? 0 : T[text.charCodeAt(i + 2)] ?? -1, d = last && pad ? 0 : T[text.charCodeAt(i + 3)] ?? -1;
    if ((a | b | c | d) < 0) return null;
    const n = a << 18 | b << 12 | c << 6 | d;
    out[o++] = n >> 16; if (o < out.length) out[o++] = n >> 8 & 255; if (o < out.length) out[o++] = n & 255;
    if (last && ((pad === 2 && (b & 15)) || (pad === 1 && (c & 3)))) return null;
  }
  return out;
}
const T = new Int16Array(128).fill(-1);
[..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].forEach((c, i) => { T[c.charCodeAt(0)] = i; });

/** @param {Uint8Array} bytes the bytes. @returns {string} base64 (RFC 4648 §4). */
export function toBase64(bytes) {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text);
}

/**
 * Opens a `{nonce, ciphertext}` payload (Pusher's encrypted event data; a sealed room's data)
 * into the JSON text it carries.
 * @param {unknown} payload the parsed data.
 * @param {Uint8Array} key 32 bytes.
 * @returns {string | null} the plaintext (UTF-8), or `null` when it is not such a payload, does
 *   not open, or is not UTF-8.
 */
export function openPayload(payload, key) {
  const fields = /** @type {{ nonce?: unknown, ciphertext?: unknown }} */ (payload ?? {});
  if (typeof fields.nonce !== "string" || typeof fields.ciphertext !== "string") return null;
  if (fields.nonce.length !== 32 || fields.ciphertext.length > MAX_CIPHERTEXT_CHARS) return null;
  const nonce = fromBase64(fields.nonce);
  const box = fromBase64(fields.ciphertext);
  if (!nonce || !box || nonce.length !== NONCE_BYTES) return null;
  const plain = open(box, key, nonce);
  if (!plain) return null;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(plain);
  } catch {
    return null;
  }
}

/**
 * Seals JSON text as a `{nonce, ciphertext}` payload under a fresh random nonce
 * (`crypto.getRandomValues`, 24 bytes: random nonces do not repeat in practice at this size).
 * @param {string} text the plaintext.
 * @param {Uint8Array} key 32 bytes.
 * @returns {{ nonce: string, ciphertext: string }} both base64.
 */
export function sealPayload(text, key) {
  const nonce = globalThis.crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
  return { nonce: toBase64(nonce), ciphertext: toBase64(seal(new TextEncoder().encode(text), key, nonce)) };
}
