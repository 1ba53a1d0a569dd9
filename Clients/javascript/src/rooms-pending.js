// The rooms machine's stand-in until its code is loaded (a page that only uses
// channels never downloads rooms). `BirdRealtime.join` loads `room-machine.js` with `import()`
// on first use, then swaps it in (`ConnectionMachine.useRooms`); nothing reaches the stand-in
// but the connection's own calls, which have no room to act on, and grants, kept for the swap.

/** @typedef {import("./actions.js").Action} Action */

/** No rooms yet: every call a no-op, grants kept until the real machine takes them. */
export class RoomsPending {
  constructor() {
    /** @type {Map<string, import("./room-machine.js").RoomRecord>} */
    this.records = new Map();
    /** @type {{ config: import("./room-tokens.js").RoomGrants, at: number } | null} the last grants given. */
    this.grants = null;
  }

  /** @param {import("./room-tokens.js").RoomGrants} config the grants. @param {number} now the instant. */
  setGrants(config, now) { this.grants = { config, at: now }; }

  /** @param {string} _message why. @returns {Action[]} nothing: no room is joining. */
  settleJoining(_message) { return []; }

  /** @param {import("./protocol.js").Frame} _frame a room frame. @param {"room_event" | "room_history"} _name which. @param {number} _now the instant. @returns {Action[]} nothing. */
  frame(_frame, _name, _now) { return []; }

  /** @param {import("./actions.js").Timer} _fired a timer. @param {number} _now the instant. @returns {Action[]} nothing. */
  timerFired(_fired, _now) { return []; }

  /** @param {number} _now the instant. @returns {Action[]} nothing: no room waits to join. */
  connected(_now) { return []; }

  /** @returns {Action[]} nothing. */
  disconnected() { return []; }

  /** @param {string} _name a room. @returns {Action[]} nothing: it never joined. */
  leave(_name) { return []; }

  /** @param {string} _name a room. @param {number} _now the instant. @returns {Action[]} nothing: it joins once the code is in. */
  join(_name, _now) { return []; }

  /** @param {string} _name a room. @param {string} _event its name. @param {string} _text its data. @returns {{ error: import("./actions.js").RoomErrorInfo, actions: Action[] }} refused: not joined. */
  send(_name, _event, _text) { return { error: NOT_JOINED, actions: [] }; }

  /** @param {string} _name a room. @param {number | undefined} _before an id. @param {number} _limit how many. @param {number} _now the instant. @returns {{ request: number, actions: Action[] }} refused: not joined. */
  requestHistory(_name, _before, _limit, _now) { return { request: 0, actions: [{ type: "history", request: 0, error: NOT_JOINED }] }; }

  /** @param {number} _request a request. @param {import("./room-tokens.js").RoomAuthResult} _result its answer. @param {number} _now the instant. @returns {Action[]} nothing: none was asked. */
  authorized(_request, _result, _now) { return []; }
}

const NOT_JOINED = { code: "not_joined", message: "the room is not joined now" };
