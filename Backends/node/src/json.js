// Canonical JSON: the exact text Swift's JSONEncoder writes with sorted keys and unescaped
// slashes, so answers and tokens agree byte for byte across the four backends
// (Backends/README.md, "Canonical JSON").

/**
 * One string, escaped as JSONEncoder escapes: `"` `\` and control characters only.
 * @param {string} text the string.
 * @returns {string} the JSON string literal.
 */
function quote(text) {
  return `"${text.replace(/["\\\u0000-\u001f]/g, (c) => {
    switch (c) {
      case '"': return '\\"';
      case "\\": return "\\\\";
      case "\b": return "\\b";
      case "\f": return "\\f";
      case "\n": return "\\n";
      case "\r": return "\\r";
      case "\t": return "\\t";
      default: return `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
    }
  })}"`;
}

/**
 * The canonical JSON text of a value: keys sorted by code point, no whitespace, integral
 * numbers without a fraction; `undefined` members left out (as absent optionals are). A
 * `bigint` is written as the double of the same value (`10n ** 16n` → `1e+16`) when one holds
 * it exactly, and refused otherwise (`2n ** 53n + 1n`): never a rounded number.
 * @param {unknown} value a JSON value (objects, arrays, strings, finite numbers, bigints a
 *   double holds exactly, booleans, null).
 * @returns {string} its text.
 * @throws {TypeError} a value JSON cannot hold (a non-finite number, a bigint no double holds
 *   exactly, a function, a symbol).
 */
export function canonicalJSON(value) {
  if (value === null) return "null";
  switch (typeof value) {
    case "string": return quote(value);
    case "boolean": return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new TypeError(`${value} is not a JSON number`);
      return number(value);
    case "bigint": {
      // JSON numbers are doubles (Swift's and JavaScript's): the bigint's double, if exact.
      const double = Number(value);
      if (!Number.isFinite(double) || BigInt(double) !== value) {
        const bits = (value < 0n ? -value : value).toString(2).length;
        const shown = bits <= 256 ? `the integer ${value}` : `a ${bits}-bit integer`;
        throw new TypeError(`no double holds ${shown} exactly, so not every library could write it the same (canonical JSON numbers are doubles): send it as a string`);
      }
      return number(double);
    }
    case "object": {
      if (Array.isArray(value)) return `[${value.map((item) => canonicalJSON(item === undefined ? null : item)).join(",")}]`;
      const record = /** @type {Record<string, unknown>} */ (value);
      const keys = Object.keys(record).filter((key) => record[key] !== undefined).sort(byCodePoint);
      return `{${keys.map((key) => `${quote(key)}:${canonicalJSON(record[key])}`).join(",")}}`;
    }
    default: throw new TypeError(`a ${typeof value} is not a JSON value`);
  }
}

/** Beyond this magnitude Swift's `Double.description` uses an exponent (2^53 itself is plain). */
const PLAIN_LIMIT = 2 ** 53;

/**
 * A number as Swift's JSONEncoder writes it (the shortest digits that read back the same):
 * plain from 1e-4 up to 2^53, an exponent of at least two digits outside (`9.5e+15`, `1e+16`,
 * `1e-05`), `-0` kept. JavaScript's own form differs there (`9500000000000000`, `0.00001`).
 * @param {number} value a finite number.
 * @returns {string} its text.
 */
function number(value) {
  if (Object.is(value, -0)) return "-0";
  const magnitude = Math.abs(value);
  if (magnitude === 0 || (magnitude >= 1e-4 && magnitude <= PLAIN_LIMIT)) return String(value);
  const [mantissa, exponent] = value.toExponential().split("e");
  return `${mantissa}e${exponent[0]}${exponent.slice(1).padStart(2, "0")}`;
}

/** @param {string} a @param {string} b @returns {number} code point order (not UTF-16's). */
function byCodePoint(a, b) {
  const x = [...a], y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = /** @type {number} */ (x[i].codePointAt(0)) - /** @type {number} */ (y[i].codePointAt(0));
    if (d !== 0) return d;
  }
  return x.length - y.length;
}
