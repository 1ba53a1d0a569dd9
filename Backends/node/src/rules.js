// Room rules: what a room keeps and allows (docs/rooms-protocol.md "Rules"; Swift: `RoomRule`).

import { RuleError } from "./errors.js";

/** Most events a room keeps. */
export const MAX_HISTORY = 100000;
/** Longest a room keeps events, in seconds. */
export const MAX_SPAN = 1800;

/**
 * A rule as the protocol writes it (and the token carries it).
 * @typedef {object} RoomRule
 * @property {number} history events kept for replay and paging, 0…100000.
 * @property {number} span seconds events are kept, 1…1800.
 * @property {boolean} presence members announced by user.
 * @property {number} [max] capacity in distinct users, ≥ 1.
 * @property {boolean} members_send members may send events.
 * @property {boolean} webhook room events go to the app's webhook.
 * @property {boolean} sealed payloads sealed end to end (XSalsa20-Poly1305).
 * @property {boolean} public joinable by anyone through `config()`'s grant.
 */

/**
 * The options of `room(pattern, options)` (the protocol's keys, every one optional).
 * @typedef {Partial<RoomRule>} RoomOptions
 */

const BOOLEANS = ["presence", "members_send", "webhook", "sealed", "public"];

/**
 * The rule for `options`, checked as the server checks it.
 * @param {string} pattern the pattern (for the message).
 * @param {RoomOptions | undefined} options the options.
 * @returns {RoomRule} the rule, with every default.
 * @throws {RuleError} `invalid_rule`: an unknown key, a value of the wrong type or out of range.
 */
export function makeRule(pattern, options = {}) {
  if (options === null || typeof options !== "object" || Array.isArray(options)) throw new RuleError("invalid_rule", `the options for ${pattern} are not an object`);
  /** @type {Record<string, unknown>} */
  const given = options;
  for (const key of Object.keys(given)) {
    if (!["history", "span", "max", ...BOOLEANS].includes(key)) throw new RuleError("invalid_rule", `unknown rule key ${key} for ${pattern}`);
  }
  /** @param {string} key @param {number} low @param {number} high @param {number | undefined} fallback */
  const integer = (key, low, high, fallback) => {
    const value = given[key] ?? fallback;
    if (value === undefined) return undefined;
    if (!Number.isSafeInteger(value) || /** @type {number} */ (value) < low || /** @type {number} */ (value) > high) {
      throw new RuleError("invalid_rule", `rule for ${pattern} out of range (history 0…${MAX_HISTORY}, span 1…${MAX_SPAN} s, max ≥ 1): ${key} = ${JSON.stringify(value)}`);
    }
    return /** @type {number} */ (value);
  };
  /** @type {Record<string, boolean>} */
  const flags = {};
  for (const key of BOOLEANS) {
    const value = given[key] ?? false;
    if (typeof value !== "boolean") throw new RuleError("invalid_rule", `${key} for ${pattern} must be true or false`);
    flags[key] = value;
  }
  /** @type {RoomRule} */
  const rule = {
    history: /** @type {number} */ (integer("history", 0, MAX_HISTORY, 0)),
    span: /** @type {number} */ (integer("span", 1, MAX_SPAN, MAX_SPAN)),
    presence: flags.presence, members_send: flags.members_send, webhook: flags.webhook, sealed: flags.sealed, public: flags.public,
  };
  const max = integer("max", 1, Number.MAX_SAFE_INTEGER, undefined);
  if (max !== undefined) rule.max = max;
  return rule;
}
