// The stale-connection check as deadlines (realtime-connection-lifecycle seed,
// "Stale-connection check"), as the Swift client's `ActivityMonitor`: after `timeout` of
// silence, ping; if no frame arrives within the pong deadline, the connection is dead. A
// value with no timers of its own: every method returns what to arm.

/**
 * What the monitor asks for.
 * @typedef {{ type: "check", at: number }
 *   | { type: "ping" }
 *   | { type: "pong_deadline", sequence: number, at: number }
 *   | { type: "cancel_pong_deadline", sequence: number }} MonitorAction
 */

/**
 * A ping awaiting any frame.
 * @typedef {object} Probe
 * @property {number} sequence its number.
 * @property {number} deadline when it fails, in milliseconds.
 * @property {boolean} pathChange it verifies the network after a change (its failure backs off).
 */

export class ActivityMonitor {
  /**
   * Starts watching at the handshake.
   * @param {number} timeout silence before a ping, in milliseconds (the handshake's `activity_timeout`).
   * @param {number} now the handshake's instant.
   */
  constructor(timeout, now) {
    this.timeout = timeout;
    this.lastActivity = now;
    this.checkArmed = true;
    /** @type {Probe | null} */
    this.probe = null;
    this.sequence = 0;
  }

  /** @returns {MonitorAction} the first activity check to arm. */
  start() { return { type: "check", at: this.lastActivity + this.timeout }; }

  /**
   * A frame arrived: the connection is alive; a pending probe is answered.
   * @param {number} now the instant.
   * @returns {MonitorAction[]} what to arm or disarm.
   */
  frameReceived(now) {
    this.lastActivity = now;
    /** @type {MonitorAction[]} */
    const actions = [];
    if (this.probe) {
      actions.push({ type: "cancel_pong_deadline", sequence: this.probe.sequence });
      this.probe = null;
    }
    if (!this.checkArmed) {
      this.checkArmed = true;
      actions.push({ type: "check", at: now + this.timeout });
    }
    return actions;
  }

  /**
   * The activity check came due: re-armed for the rest of the timeout after a recent frame,
   * else a ping (unless one is out).
   * @param {number} now the instant.
   * @param {number} pongTimeout the pong deadline, in milliseconds.
   * @returns {MonitorAction[]} what to do.
   */
  checkDue(now, pongTimeout) {
    this.checkArmed = false;
    if (now < this.lastActivity + this.timeout) {
      this.checkArmed = true;
      return [{ type: "check", at: this.lastActivity + this.timeout }];
    }
    if (this.probe) return [];
    return this.ping(pongTimeout, false, now);
  }

  /**
   * Pings now with `deadline` for an answer. A path change, or an earlier deadline, replaces a
   * pending probe; otherwise the earlier deadline is kept.
   * @param {number} deadline milliseconds for any frame to arrive.
   * @param {boolean} pathChange the probe verifies the network after a change.
   * @param {number} now the instant.
   * @returns {MonitorAction[]} what to do.
   */
  ping(deadline, pathChange, now) {
    if (this.probe && !pathChange && this.probe.deadline <= now + deadline) return [{ type: "ping" }];
    /** @type {MonitorAction[]} */
    const actions = [{ type: "ping" }];
    if (this.probe) actions.push({ type: "cancel_pong_deadline", sequence: this.probe.sequence });
    this.sequence += 1;
    this.probe = { sequence: this.sequence, deadline: now + deadline, pathChange };
    actions.push({ type: "pong_deadline", sequence: this.sequence, at: now + deadline });
    return actions;
  }

  /**
   * The pong deadline `sequence` came due.
   * @param {number} sequence the deadline's probe.
   * @returns {Probe | null} the probe that failed, or `null` for one answered or replaced.
   */
  pongDeadlinePassed(sequence) {
    const probe = this.probe;
    if (!probe || probe.sequence !== sequence) return null;
    this.probe = null;
    return probe;
  }
}
