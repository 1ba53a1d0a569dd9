// XSalsa20-Poly1305 against libsodium's own output (fixtures/secretbox.json, made by
// fixtures/make_secretbox.py with PyNaCl), and the payloads of encrypted channels and sealed rooms.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fromBase64, open, openPayload, seal, sealPayload, toBase64 } from "../src/secretbox.js";

const { vectors } = JSON.parse(readFileSync(new URL("./fixtures/secretbox.json", import.meta.url), "utf8"));
const bytes = (text) => /** @type {Uint8Array} */ (fromBase64(text));

test("seal gives libsodium's box byte for byte, 0 to 4,099 bytes (block and Poly1305 edges)", () => {
  assert.equal(vectors.length, 16);
  for (const vector of vectors) {
    assert.equal(toBase64(seal(bytes(vector.message), bytes(vector.key), bytes(vector.nonce))), vector.box, `length ${bytes(vector.message).length}`);
  }
});

test("open gives the message back; any flipped bit, another key or another nonce opens nothing", () => {
  for (const vector of vectors) {
    const box = bytes(vector.box);
    assert.deepEqual(open(box, bytes(vector.key), bytes(vector.nonce)), bytes(vector.message));
    for (const at of [0, 15, 16, box.length - 1]) {
      if (at >= box.length) continue;
      const altered = box.slice();
      altered[at] ^= 0x01;
      assert.equal(open(altered, bytes(vector.key), bytes(vector.nonce)), null, `bit flipped at ${at}`);
    }
    const otherKey = bytes(vector.key).slice();
    otherKey[31] ^= 0x80;
    assert.equal(open(box, otherKey, bytes(vector.nonce)), null);
    const otherNonce = bytes(vector.nonce).slice();
    otherNonce[23] ^= 0x80;
    assert.equal(open(box, bytes(vector.key), otherNonce), null);
  }
  assert.equal(open(new Uint8Array(15), new Uint8Array(32), new Uint8Array(24)), null, "shorter than the MAC");
  assert.throws(() => seal(new Uint8Array(1), new Uint8Array(31), new Uint8Array(24)), RangeError);
});

test("payloads: JSON text sealed under a random nonce opens to the same text; bad payloads open to null", () => {
  const key = bytes(vectors[3].key);
  const text = JSON.stringify({ price: 42, note: "ünïcödé ✓" });
  const first = sealPayload(text, key);
  const second = sealPayload(text, key);
  assert.notEqual(first.nonce, second.nonce, "a fresh nonce each time");
  assert.equal(bytes(first.nonce).length, 24);
  assert.equal(openPayload(first, key), text);
  assert.equal(openPayload({ ...first, ciphertext: second.ciphertext }, key), null, "another nonce's box");
  assert.equal(openPayload({ nonce: first.nonce }, key), null);
  assert.equal(openPayload({ nonce: "not base64!", ciphertext: first.ciphertext }, key), null);
  assert.equal(openPayload({ nonce: toBase64(new Uint8Array(8)), ciphertext: first.ciphertext }, key), null, "a short nonce");
  assert.equal(openPayload("text", key), null);
  assert.equal(openPayload(null, key), null);
  // A box that opens to bytes that are not UTF-8 is refused as a whole.
  const nonce = new Uint8Array(24);
  assert.equal(openPayload({ nonce: toBase64(nonce), ciphertext: toBase64(seal(new Uint8Array([0xff, 0xfe]), key, nonce)) }, key), null);
});
