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
 * numbers without a fraction; `undefined` members left out (as absent optionals are).
 * @param {unknown} value a JSON value (objects, arrays, strings, finite numbers, booleans, null).
 * @returns {string} its text.
 * @throws {TypeError} a value JSON cannot hold (a non-finite number, a function, a bigint).
 */
export function canonicalJSON(value) {
  if (value === null) return "null";
  switch (typeof value) {
    case "string": return quote(value);
    case "boolean": return value ? "true" : "false";
    case "number":
      if (!Number.isFinite(value)) throw new TypeError(`${value} is not a JSON number`);
      return number(value);
    case "object": {
      if (Array.isArray(value)) return `[${value.map((item) => canonicalJSON(item === undefined ? null : item)).join(",")}]`;
      const record = /** @type {Record<string, unknown>} */ (value);
      const keys = Object.keys(record).filter((key) => record[key] !== undefined).sort(byCodePoint);
      return `{${keys.map((key) => `${quote(key)}:${canonicalJSON(record[key])}`).join(",")}}`;
    }
    default: throw new TypeError(`a ${typeof value} is not a JSON value`);
  }
}

/**
 * A number as Swift's JSONEncoder writes it (the shortest digits that read back the same):
 * plain from 1e-4 up to 1e16, an exponent of at least two digits outside (`1e+16`, `1e-05`),
 * `-0` kept. JavaScript's own form differs there (`10000000000000000`, `0.00001`).
 * @param {number} value a finite number.
 * @returns {string} its text.
 */
function number(value) {
  if (Object.is(value, -0)) return "-0";
  const magnitude = Math.abs(value);
  if (magnitude === 0 || (magnitude >= 1e-4 && magnitude < 1e16)) return String(value);
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
