// Everything that touches the outside world, injectable for tests (STYLE.md: seams with
// fakes): the WebSocket constructor, `fetch`, a clock with timers, the jitter's random
// source, and the browser's reachability events. Defaults come from `globalThis`.

/**
 * A clock and its timers; instants in milliseconds.
 * @typedef {object} Clock
 * @property {() => number} now the current instant (wall clock: it advances while the device sleeps, so a late timer is seen).
 * @property {(callback: () => void, delay: number) => unknown} setTimeout arms a timer.
 * @property {(handle: any) => void} clearTimeout disarms one.
 */

/**
 * The part of a WebSocket the client uses (WHATWG WebSocket; RFC 6455).
 * @typedef {object} SocketLike
 * @property {number} bufferedAmount bytes queued and not yet sent.
 * @property {(data: string) => void} send sends a text frame.
 * @property {(code?: number, reason?: string) => void} close closes.
 * @property {((event: any) => void) | null} onopen
 * @property {((event: { data: unknown }) => void) | null} onmessage
 * @property {((event: { code: number, reason: string }) => void) | null} onclose
 * @property {((event: any) => void) | null} onerror
 */

/**
 * Something that tells events by name (`window`, `document`).
 * @typedef {{ addEventListener: (type: string, listener: () => void) => void, removeEventListener: (type: string, listener: () => void) => void, visibilityState?: string }} EventSource
 */

/**
 * What the client uses from the outside world.
 * @typedef {object} Environment
 * @property {new (url: string) => SocketLike} [WebSocket] the WebSocket constructor.
 * @property {typeof fetch} [fetch] for auth requests.
 * @property {Clock} [clock] now and timers.
 * @property {() => number} [random] numbers in [0, 1) for the backoff's jitter.
 * @property {EventSource | null} [network] where `online` / `offline` arrive (`window`).
 * @property {EventSource | null} [page] where `visibilitychange`, `resume` and `pageshow` arrive (`document`).
 */

/**
 * The environment with every missing part taken from `globalThis`.
 * @param {Environment} [overrides] the parts given.
 * @returns {Required<Environment>} the environment.
 */
export function resolveEnvironment(overrides = {}) {
  /** @type {any} */
  const global = globalThis;
  const hasEvents = typeof global.addEventListener === "function";
  return {
    WebSocket: overrides.WebSocket ?? global.WebSocket,
    fetch: overrides.fetch ?? (typeof global.fetch === "function" ? global.fetch.bind(global) : undefined),
    clock: overrides.clock ?? { now: () => Date.now(), setTimeout: (callback, delay) => setTimeout(callback, delay), clearTimeout: (handle) => clearTimeout(handle) },
    random: overrides.random ?? Math.random,
    network: overrides.network !== undefined ? overrides.network : hasEvents ? global : null,
    page: overrides.page !== undefined ? overrides.page : global.document ?? null,
  };
}

/**
 * Listens to the browser's reachability hints: `offline`, `online`, a page made visible,
 * resumed from a freeze (Page Lifecycle `resume`) or restored from the back-forward cache.
 * @param {Required<Environment>} environment where the events arrive.
 * @param {{ online: () => void, offline: () => void, resumed: () => void }} handlers what to do.
 * @returns {() => void} stops listening.
 */
export function watchReachability(environment, handlers) {
  /** @type {[EventSource, string, () => void][]} */
  const listeners = [];
  const { network, page } = environment;
  if (network) listeners.push([network, "online", handlers.online], [network, "offline", handlers.offline]);
  if (page) {
    const visible = () => { if (page.visibilityState === undefined || page.visibilityState === "visible") handlers.resumed(); };
    listeners.push([page, "visibilitychange", visible], [page, "resume", handlers.resumed]);
  }
  if (network) listeners.push([network, "pageshow", handlers.resumed]);
  for (const [source, type, listener] of listeners) source.addEventListener(type, listener);
  return () => { for (const [source, type, listener] of listeners) source.removeEventListener(type, listener); };
}
