import Foundation
import RealtimeProtocol

/// Where the auth route's requests and the history requests stand (the rooms' own state is
/// in `RoomTable`).
struct RoomRequests {
    /// One batched request to the auth route.
    struct Authorization {
        var names: [String]
        /// 1 for the first try; transient failures are retried with backoff up to `maxAttempts`.
        var attempt = 1
        /// A 401 was retried once already.
        var retriedUnauthorized = false
    }

    /// Rooms waiting for the next batch, in the order they asked.
    var batch: [String] = []
    var batchArmed = false
    /// Requests in flight or waiting for their retry timer, by request id.
    var authorizations: [UInt64: Authorization] = [:]
    /// History requests in flight: their room and socket.
    var history: [UInt64: (room: String, generation: UInt64)] = [:]
    /// Public grants by pattern (`grants` in the options, from the backend's `config()`).
    var grants: [(pattern: String, token: RoomToken)] = []

    /// Tries of one batch before its rooms fail with `auth_failed` (DESIGN.md: "an auth route
    /// failing forever retried every few seconds without end" is a defect to avoid).
    static let maxAttempts = 5
    /// History requests in flight on one connection.
    static let maxHistoryInFlight = 16
}
