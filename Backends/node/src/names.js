// Room names and patterns (docs/rooms-protocol.md "Names"; Swift: `RoomName`).

/** Longest room name, in bytes. */
export const MAX_NAME_LENGTH = 164;
const NAME = /^[A-Za-z0-9_\-=@,.;:]+$/;
const KEY = /^[A-Za-z0-9_\-=@,.;]+$/;

/**
 * @param {string} name a room name.
 * @returns {boolean} whether it is 1…164 bytes of `A–Z a–z 0–9 _ - = @ , . ; :`.
 */
export function isValidRoomName(name) {
  return typeof name === "string" && name.length > 0 && name.length <= MAX_NAME_LENGTH && NAME.test(name);
}

/**
 * A pattern's parts: literals and `{param}` placeholders.
 * @typedef {{ literal: string } | { param: string }} Part
 */

/**
 * @param {string} pattern `order:{id}`, `chat:{a}:{b}`, `shop`.
 * @returns {Part[] | null} its parts, or `null` when it is not a valid pattern (a placeholder
 *   unnamed, unclosed, named twice, right after another, or a byte outside the name alphabet).
 */
export function parsePattern(pattern) {
  if (typeof pattern !== "string" || pattern.length === 0 || pattern.length > MAX_NAME_LENGTH * 2) return null;
  /** @type {Part[]} */
  const parts = [];
  const names = new Set();
  let rest = pattern;
  while (rest.length > 0) {
    if (rest[0] === "{") {
      const close = rest.indexOf("}");
      if (close < 0) return null;
      const key = rest.slice(1, close);
      if (!KEY.test(key) || names.has(key)) return null;
      if (parts.length > 0 && "param" in parts[parts.length - 1]) return null;
      names.add(key);
      parts.push({ param: key });
      rest = rest.slice(close + 1);
    } else {
      const end = rest.indexOf("{");
      const literal = end < 0 ? rest : rest.slice(0, end);
      if (!NAME.test(literal)) return null;
      parts.push({ literal });
      rest = rest.slice(literal.length);
    }
  }
  return parts;
}

/** @param {string} pattern @returns {boolean} whether it is a valid pattern. */
export function isValidPattern(pattern) { return parsePattern(pattern) !== null; }

/**
 * Matches a name against a pattern: a placeholder takes one segment, up to the next `:`, and,
 * when the literal after it does not start with `:`, up to that literal's first character.
 * @param {string} name the room name.
 * @param {string} pattern the pattern.
 * @returns {Record<string, string> | null} the parameters by name, or `null` when it does not match.
 */
export function matchRoom(name, pattern) {
  const parts = parsePattern(pattern);
  if (!isValidRoomName(name) || !parts) return null;
  /** @type {Record<string, string>} */
  const params = {};
  let rest = name;
  for (let index = 0; index < parts.length; index++) {
    const part = parts[index];
    if ("literal" in part) {
      if (!rest.startsWith(part.literal)) return null;
      rest = rest.slice(part.literal.length);
      continue;
    }
    const colon = rest.indexOf(":");
    let value = colon < 0 ? rest : rest.slice(0, colon);
    const next = parts[index + 1];
    if (next && "literal" in next && next.literal[0] !== ":") {
      const end = value.indexOf(next.literal[0]);
      if (end < 0) return null;
      value = value.slice(0, end);
    }
    if (value.length === 0) return null;
    params[part.param] = value;
    rest = rest.slice(value.length);
  }
  return rest.length === 0 ? params : null;
}
