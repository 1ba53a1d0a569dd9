// What Swift's StrictJSON refuses beyond JSON.parse's grammar: a member name twice in one
// object (RFC 8259 §4: "SHOULD be unique"; a signature over such text is ambiguous) and
// nesting deeper than 64. For user data a signin signs and webhook bodies.

/** Deepest nesting accepted (the server's limit). */
export const MAX_DEPTH = 64;

/**
 * Parses JSON text as Swift's `StrictJSON` does.
 * @param {string} text the text.
 * @returns {{ value: unknown } | { error: string }} the value, or why it is refused.
 */
export function parseStrict(text) {
  let value;
  try { value = JSON.parse(text); } catch { return { error: "not JSON" }; }
  /** @type {({ keys: Set<string>, expectKey: boolean } | null)[]} */
  const stack = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "{" || c === "[") {
      stack.push(c === "{" ? { keys: new Set(), expectKey: true } : null);
      if (stack.length > MAX_DEPTH) return { error: `nested deeper than ${MAX_DEPTH}` };
    } else if (c === "}" || c === "]") {
      stack.pop();
    } else if (c === ",") {
      const top = stack[stack.length - 1];
      if (top) top.expectKey = true;
    } else if (c === ":") {
      const top = stack[stack.length - 1];
      if (top) top.expectKey = false;
    } else if (c === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === "\\" ? 2 : 1;
      const top = stack[stack.length - 1];
      if (top?.expectKey) {
        const key = JSON.parse(text.slice(i, end + 1));
        if (top.keys.has(key)) return { error: `the member name "${key.slice(0, 64)}" appears twice` };
        top.keys.add(key);
      }
      i = end;
    }
  }
  return { value };
}
