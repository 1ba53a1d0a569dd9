// What the state machines ask of their owner (`BirdRealtime`), in order: the decisions are
// plain values, the owner performs them (the Swift client's `ConnectionStateMachine.Action`;
// STYLE.md: "the machine returns deadlines instead of sleeping").

/**
 * The timers the machines arm; `key` names one uniquely, so a stale one is recognised.
 * @typedef {"retry" | "connect" | "activity" | "pong" | "channel_auth" | "signin" | "room_batch"
 *   | "room_auth" | "room_auth_retry" | "room_token" | "room_retry" | "room_join" | "room_history"} TimerKind
 */

/**
 * A timer: its kind and what it is for.
 * @typedef {object} Timer
 * @property {string} key unique per purpose: arming a key again replaces the armed timer.
 * @property {TimerKind} kind what it is for.
 * @property {number} [generation] the socket it belongs to.
 * @property {number} [sequence] a pong deadline's probe.
 * @property {number} [request] the request it waits for.
 * @property {string} [name] the channel or room.
 */

/**
 * Makes a timer.
 * @param {TimerKind} kind what it is for.
 * @param {{ generation?: number, sequence?: number, request?: number, name?: string }} [fields] what it belongs to.
 * @returns {Timer} the timer.
 */
export function timer(kind, fields = {}) {
  const parts = [kind, fields.generation, fields.sequence, fields.request, fields.name];
  return { key: parts.map((part) => part ?? "").join("|"), kind, ...fields };
}

/**
 * An error told to `bind("error")` handlers (seed: `({ code, message })`).
 * @typedef {object} RealtimeError
 * @property {string} type where it comes from: `closed` (a close code), `transport` (a
 *   dropped socket), `pong_timeout`, `handshake`, `server` (`bird:error`), `protocol` (a frame
 *   the client cannot use), `handler` (an app handler threw), `room`, `decryption` (an
 *   encrypted channel's event that did not open with the channel's key: never delivered).
 * @property {number | null} code the close code or the server's code, when there is one.
 * @property {string} message what happened.
 * @property {unknown} [cause] the exception, for `handler`.
 */

/**
 * Why an authorisation, a user authentication or a room auth request failed.
 * @typedef {object} AuthFailure
 * @property {"http" | "invalid" | "transport" | "timeout" | "not_configured" | "refused"} kind what failed.
 * @property {number} [status] the HTTP status, for `http`.
 * @property {string} message what happened.
 */

/**
 * A room error, as the room's `error` event and `ready()` give it (docs/rooms-protocol.md
 * "Error codes", plus the client's own: `not_recovered`, `auth_failed`, `unauthorized`,
 * `kicked`, `left`, `disconnected`, `timed_out`, `bad_data`, `not_supported`).
 * @typedef {object} RoomErrorInfo
 * @property {string} code the code.
 * @property {string} message what happened.
 * @property {string} [reason] why events were not recovered (`epoch_changed`, `expired` …).
 * @property {RoomGap} [gap] for `not_recovered` told before a replay: exactly which events will not come.
 */

/**
 * Missed events a resume cannot bring, as the server tells them before the replay of what is
 * still kept (docs/rooms-protocol.md "Replay", the `gap` event): the app fetches exactly that
 * range from its own records (the webhook's room events carry the same ids).
 * @typedef {object} RoomGap
 * @property {string} reason `expired`, `epoch_changed` or `too_large`.
 * @property {string} epoch the epoch of what follows.
 * @property {number} [first] the first missing id of `epoch` (absent when none of it is missing).
 * @property {number} [last] the last missing id of `epoch`.
 * @property {number} [before] when the first event that follows was kept (ms since 1970): every missing one was kept before it.
 * @property {{ epoch: string, id: number }} [previous] after an epoch change, the position in the lost epoch: everything after it is gone.
 */

/**
 * Where a room event sits in the room's stream (rooms seed: "meta: from, id, at, replayed").
 * @typedef {object} RoomEventMeta
 * @property {number} id the kept event's id (grows by one); 0 for the room's own events.
 * @property {number} at when it was kept, milliseconds since 1970 (server clock); 0 for the room's own events.
 * @property {string | null} from the user who sent it, as the app's server vouched; `null` for the app's server.
 * @property {boolean} replayed sent from history after a reconnect: published while the client was away.
 * @property {string} [epoch] the epoch of the room's stream the id belongs to (ids start again at 1 in a new one); absent for the room's own events.
 */

/**
 * What the owner does.
 * @typedef {{ type: "open", generation: number }
 *   | { type: "send", text: string, generation: number }
 *   | { type: "close", generation: number, code?: number, reason?: string }
 *   | { type: "schedule", timer: Timer, at: number }
 *   | { type: "cancel", timer: Timer }
 *   | { type: "authorize", channel: string, socketId: string, request: number }
 *   | { type: "authenticate", socketId: string, request: number }
 *   | { type: "authorize_rooms", rooms: string[], request: number }
 *   | { type: "cancel_request", request: number }
 *   | { type: "state", previous: ConnectionState, current: ConnectionState }
 *   | { type: "error", error: RealtimeError }
 *   | { type: "signin_error", error: AuthFailure }
 *   | { type: "channel_event", channel: string, event: string, data: unknown, meta?: { user_id: string } }
 *   | { type: "room_event", room: string, event: string, data: unknown, meta: RoomEventMeta }
 *   | { type: "settle_room", room: string, error: RoomErrorInfo | null }
 *   | { type: "history", request: number, page?: HistoryPage, error?: RoomErrorInfo }} Action
 */

/**
 * The six states (realtime-connection-lifecycle seed, "The six states").
 * @typedef {"initialized" | "connecting" | "connected" | "unavailable" | "disconnected" | "failed"} ConnectionState
 */

/**
 * One event of a history page.
 * @typedef {object} HistoryEvent
 * @property {string} event the event name.
 * @property {unknown} data its data.
 * @property {RoomEventMeta} meta its id, time and sender.
 */

/**
 * A page of a room's history: at most 100 events, oldest first (rooms seed, "Paging back").
 * @typedef {object} HistoryPage
 * @property {HistoryEvent[]} events the events, oldest first.
 * @property {boolean} more older events are kept: ask with `before: events[0].meta.id`.
 */

/** The meta of the room's own events (`joined`, `join`, `leave`, `count`, `error`, `kicked`). */
export const SYSTEM_META = Object.freeze({ id: 0, at: 0, from: null, replayed: false });

export {};
