// WebSocket close codes as the realtime protocol uses them (RFC 6455 §7.4 and Pusher's
// 4000–4399 ranges) and the client's reaction to each (realtime-connection-lifecycle seed,
// "Automatic reconnection").

/** Close codes the client sends or reads by name. */
export const CloseCode = Object.freeze({
  /** 1000: normal closure (RFC 6455 §7.4.1), sent by `disconnect()`. */
  normalClosure: 1000,
  /** 1006: dropped without a close frame (reported, never sent; RFC 6455 §7.1.5). */
  abnormalClosure: 1006,
  /** 4001: the app does not exist (Pusher). */
  unknownApp: 4001,
  /** 4009: unauthorised connection, or the member was terminated (Pusher; seed "Close code 4009"). */
  unauthorized: 4009,
  /** 4100: over capacity: back off (Pusher). */
  overCapacity: 4100,
  /** 4200: reconnect now (Pusher). */
  reconnectNow: 4200,
  /** 4201: pong not received; the client closes with it after the pong deadline (seed "Stale-connection check"). */
  pongNotReceived: 4201,
});

/**
 * What the client does after a close: `fail` (state `failed`, no retry), `reconnect_now`
 * (retry at once), `back_off` (state `unavailable`, retry on the backoff).
 * @typedef {"fail" | "reconnect_now" | "back_off"} CloseReaction
 */

/**
 * The reaction to a close code (seed "Automatic reconnection"): 4000–4099 refused, no
 * retry; 4200–4299 immediate retry; anything else (network failures, 1006, 4100–4199,
 * 4300–4399) unavailable and backoff.
 * @param {number} code the close code.
 * @returns {CloseReaction} the reaction.
 */
export function closeReaction(code) {
  if (code >= 4000 && code <= 4099) return "fail";
  if (code >= 4200 && code <= 4299) return "reconnect_now";
  return "back_off";
}
