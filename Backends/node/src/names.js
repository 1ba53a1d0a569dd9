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

/**
 * Whether some room name matches both patterns (a plain name is a pattern without
 * placeholders; Swift: `RoomName.patternsOverlap`).
 *
 * A backend refuses a public rule whose pattern overlaps another rule's: the public grant
 * admits every name its pattern matches, so a name that another rule claims (first match wins)
 * would let a visitor past that rule's authorizer (Backends/README.md "Public rules").
 *
 * Each pattern is a regular language: its literal bytes, and for each placeholder one or more
 * name bytes other than `:` and the first byte of the literal after it (what `matchRoom`
 * takes). The answer is a breadth-first search of the two automata's product for the shortest
 * common name, which must fit in `MAX_NAME_LENGTH` bytes; at most (n + 1)(m + 1) states for
 * patterns of n and m steps.
 * @param {string} a a pattern (`news:{topic}`).
 * @param {string} b another pattern (`news:{topic}-staff`).
 * @returns {boolean} `true` when a valid name matches both (`news:x-staff`); `false` when none
 *   does or either is not a valid pattern.
 */
export function patternsOverlap(a, b) {
  const first = parsePattern(a);
  const second = parsePattern(b);
  if (!first || !second) return false;
  const stepsA = steps(first);
  const stepsB = steps(second);
  const width = stepsB.length + 1;
  // Breadth first over (position in a, position in b): the first visit is the shortest.
  const seen = new Set([0]);
  /** @type {[number, number][]} */
  let frontier = [[0, 0]];
  for (let round = 0; round < MAX_NAME_LENGTH; round++) {
    /** @type {[number, number][]} */
    const next = [];
    for (const [i, j] of frontier) {
      for (const [targetA, stepA] of moves(stepsA, i)) {
        for (const [targetB, stepB] of moves(stepsB, j)) {
          if (!admitsSome(stepA, stepB)) continue;
          if (targetA === stepsA.length && targetB === stepsB.length) return true;
          const key = targetA * width + targetB;
          if (!seen.has(key)) { seen.add(key); next.push([targetA, targetB]); }
        }
      }
    }
    frontier = next;
  }
  return false;
}

/**
 * One byte of a pattern's language: a literal byte, or any name byte but the excluded ones (a
 * placeholder, which repeats).
 * @typedef {{ byte: number } | { anyBut: number[] }} Step
 */

const COLON = 0x3a;

/** @param {Part[]} parts a valid pattern's parts. @returns {Step[]} its steps. */
function steps(parts) {
  /** @type {Step[]} */
  const result = [];
  parts.forEach((part, index) => {
    if ("literal" in part) {
      for (const byte of Buffer.from(part.literal, "utf8")) result.push({ byte });
      return;
    }
    const excluded = [COLON];
    const next = parts[index + 1];
    if (next && "literal" in next) {
      const first = Buffer.from(next.literal, "utf8")[0];
      if (first !== undefined && first !== COLON) excluded.push(first);
    }
    result.push({ anyBut: excluded });
  });
  return result;
}

/**
 * The automaton's moves from `position` (steps before it taken): the next step, and a
 * placeholder just taken taking one more byte.
 * @param {Step[]} list the steps. @param {number} position where it is.
 * @returns {[number, Step][]} the moves: the target position and the step taken.
 */
function moves(list, position) {
  /** @type {[number, Step][]} */
  const result = [];
  if (position < list.length) result.push([position + 1, list[position]]);
  if (position > 0 && "anyBut" in list[position - 1]) result.push([position, list[position - 1]]);
  return result;
}

/**
 * Whether some name byte satisfies both steps. Two placeholders always share one: each excludes
 * at most two of the alphabet's 69 bytes.
 * @param {Step} x @param {Step} y @returns {boolean} whether a byte satisfies both.
 */
function admitsSome(x, y) {
  if ("byte" in x && "byte" in y) return x.byte === y.byte;
  if ("byte" in x && "anyBut" in y) return !y.anyBut.includes(x.byte);
  if ("anyBut" in x && "byte" in y) return !x.anyBut.includes(y.byte);
  return true;
}
