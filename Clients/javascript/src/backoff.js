// Retry delays after a drop: exponential backoff with full jitter, base 1 s, cap 30 s
// (realtime-connection-lifecycle seed, "Automatic reconnection"; "Exponential Backoff And
// Jitter", AWS Architecture Blog, 2015), reset as the Swift client's `ReconnectStateMachine`
// resets it.

/**
 * Backoff settings, in milliseconds.
 * @typedef {object} BackoffOptions
 * @property {number} [base] ceiling of the first delay (1000 ms).
 * @property {number} [cap] the largest ceiling (30000 ms).
 * @property {number} [multiplier] growth of the ceiling per retry (2).
 */

/**
 * The ceiling of retry `retry` (0-based): `min(cap, base × multiplier^retry)`.
 * @param {number} retry retries before this one.
 * @param {BackoffOptions} [options] the settings.
 * @returns {number} the largest delay, in milliseconds.
 */
export function backoffCeiling(retry, options = {}) {
  const { base = 1000, cap = 30000, multiplier = 2 } = options;
  return Math.min(cap, base * multiplier ** Math.min(Math.max(retry, 0), 64));
}

/**
 * The delay before retry `retry`: uniform in `0 … ceiling` (full jitter).
 * @param {number} retry retries before this one.
 * @param {() => number} random a source of numbers in [0, 1) (`Math.random`).
 * @param {BackoffOptions} [options] the settings.
 * @returns {number} the delay, in milliseconds.
 */
export function fullJitterDelay(retry, random, options) {
  return random() * backoffCeiling(retry, options);
}

/**
 * When the next attempt starts, as the Swift client's reconnector decides it: the retry count
 * (the backoff's exponent) resets when a healthy connection drops, and only such a connection
 * has a server's immediate-retry request (4200–4299) honoured. Healthy: up for
 * `stableConnectionDuration` (5 s), or up at all while `shortConnectionAllowance` (5, one back
 * per `stableConnectionDuration`) lasts, so a path that flaps a few times is back within the
 * base delay (the seed resets the backoff on every handshake). A server that ends
 * every connection sooner is soon retried on the growing backoff, and no two attempts start
 * less than `minimumAttemptInterval` (100 ms) apart (a server closing with
 * 4200 after every handshake drew hundreds of connections a second).
 */
export class ReconnectSchedule {
  /**
   * @param {object} options the settings.
   * @param {BackoffOptions} options.backoff the backoff.
   * @param {number} options.stableConnectionDuration milliseconds a connection must stay up to be healthy.
   * @param {number} [options.shortConnectionAllowance] shorter connections still counted healthy (5).
   * @param {number} options.minimumAttemptInterval milliseconds between two attempt starts.
   * @param {() => number} options.random the jitter's random source.
   */
  constructor({ backoff, stableConnectionDuration, shortConnectionAllowance = 5, minimumAttemptInterval, random }) {
    this.backoff = backoff;
    this.stableConnectionDuration = stableConnectionDuration;
    this.shortConnectionAllowance = Math.max(0, shortConnectionAllowance);
    this.minimumAttemptInterval = minimumAttemptInterval;
    this.random = random;
    /** Backoff retries since a healthy connection last dropped. */
    this.retries = 0;
    /** @type {number | null} when the current connection's handshake arrived. */
    this.readyAt = null;
    /** @type {number | null} when the last attempt started. */
    this.lastAttemptStart = null;
    /** Short connections still allowed, as of `allowanceAt` (`null`: never used, all of it). */
    this.allowance = 0;
    /** @type {number | null} */
    this.allowanceAt = null;
    /** Whether the last `nextDelay` honoured an immediate-retry request (its delay is the floor at most). */
    this.retriesAtOnce = false;
  }

  /** @param {number} now an attempt starts. */
  attemptStarted(now) { this.lastAttemptStart = now; }

  /** @param {number} now the handshake arrived. */
  ready(now) { this.readyAt = now; }

  /** The app called `connect()`: its attempt is not held to the minimum interval. */
  manualStart() { this.lastAttemptStart = null; }

  /**
   * The delay before the next attempt after a socket ended.
   * @param {number} now the instant, in milliseconds.
   * @param {boolean} immediate the close asked for an immediate retry (4200–4299, or a missed pong).
   * @returns {number} the delay in milliseconds (0: at once).
   */
  nextDelay(now, immediate) {
    const healthy = this.readyAt !== null && (now - this.readyAt >= this.stableConnectionDuration || this.takeAllowance(now));
    this.readyAt = null;
    if (healthy) this.retries = 0;
    let delay = 0;
    this.retriesAtOnce = immediate && healthy;
    if (!this.retriesAtOnce) {
      // An immediate retry does not grow the ceiling: the first real wait is still under the base.
      delay = fullJitterDelay(this.retries, this.random, this.backoff);
      this.retries += 1;
    }
    const floor = this.lastAttemptStart === null ? 0 : this.lastAttemptStart + this.minimumAttemptInterval - now;
    return Math.max(delay, floor, 0);
  }

  /**
   * Takes one short connection from the allowance, if one is left (a token bucket).
   * @param {number} now the instant, in milliseconds.
   * @returns {boolean} whether one was left.
   * @private
   */
  takeAllowance(now) {
    const capacity = this.shortConnectionAllowance;
    let left = capacity;
    if (this.allowanceAt !== null) {
      const refill = this.stableConnectionDuration > 0 ? (now - this.allowanceAt) / this.stableConnectionDuration : capacity;
      left = Math.min(capacity, this.allowance + Math.max(0, refill));
    }
    this.allowanceAt = now;
    if (left < 1) {
      this.allowance = left;
      return false;
    }
    this.allowance = left - 1;
    return true;
  }
}
