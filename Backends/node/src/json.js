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
      return Object.is(value, -0) ? "0" : String(value);
    case "object": {
      if (Array.isArray(value)) return `[${value.map((item) => canonicalJSON(item === undefined ? null : item)).join(",")}]`;
      const record = /** @type {Record<string, unknown>} */ (value);
      const keys = Object.keys(record).filter((key) => record[key] !== undefined).sort(byCodePoint);
      return `{${keys.map((key) => `${quote(key)}:${canonicalJSON(record[key])}`).join(",")}}`;
    }
    default: throw new TypeError(`a ${typeof value} is not a JSON value`);
  }
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
