import Realtime

/// One line of `realtime connect` output: a state change, a channel event, a connection error
/// or a scheduled reconnect, printed as plain text or as one JSON object.
///
/// Every string that came from the server (channel and event names, data, error messages,
/// socket ids) is escaped in both forms: control characters become `\u{1B}` in plain text and
/// `\u001b` in JSON, so nothing the server sends reaches the terminal raw.
struct OutputLine: Sendable, Hashable {
    /// What the line reports (the JSON `kind` key).
    enum Kind: String, Sendable, Hashable {
        /// A connection state transition.
        case state
        /// An event delivered to a subscribed channel (protocol events included).
        case event
        /// A connection-level error (`onError`).
        case error
        /// The reconnector scheduled the next attempt, or waits for the network.
        case reconnect
        /// A kept room event (with `meta`), live, replayed, or from a history page.
        case room
        /// A member joined or left a presence room (`join`, `leave`).
        case member
        /// One of a room's own events about the room itself: `joined`, `count`, `kicked`.
        case roomState = "room-state"
        /// A room's `error` event (a refusal, an unrecovered gap, the room failing).
        case roomError = "room-error"
        /// The end of a history page: whether older events are kept (`more`).
        case page
    }

    /// When it happened.
    var time: LineTime
    /// What the line reports.
    var kind: Kind
    /// The state before (`state` lines).
    var previous: String?
    /// The state now (`state` lines).
    var current: String?
    /// The socket id of the connection, on a transition to `connected`.
    var socket: String?
    /// The channel (`event` lines).
    var channel: String?
    /// The event name (`event` lines).
    var event: String?
    /// The event's data, the JSON text the publisher sent (`event` lines, when present).
    var data: String?
    /// The sender's user id (client events on presence channels).
    var user: String?
    /// The error kind: `closed`, `transport`, `server`, … (`error` lines).
    var error: String?
    /// The close code or protocol error code (`error` lines, when present).
    var code: Int?
    /// The error's explanation (`error` lines).
    var message: String?
    /// How long until the next attempt (`reconnect` lines; absent while waiting for the
    /// network).
    var delay: Duration?
    /// The reconnect attempt number, from 1 (`reconnect` lines).
    var attempt: Int?
    /// The room (`room`, `member`, `room-state`, `room-error`, `page` lines).
    var room: String?
    /// A room event's data as JSON text, embedded as a value (not a string) in the JSON form.
    var roomData: String?
    /// A kept room event's meta (`room` lines).
    var meta: RoomEventMeta?
    /// Older events are kept (`page` lines).
    var more: Bool?

    /// Creates a line with only its time and kind; the factories below fill in the rest.
    ///
    /// - Parameters:
    ///   - time: when it happened.
    ///   - kind: what it reports.
    init(time: LineTime, kind: Kind) {
        self.time = time
        self.kind = kind
    }

    /// A state transition.
    ///
    /// - Parameters:
    ///   - previous: the state before.
    ///   - current: the state now.
    ///   - socket: the connection's socket id, when `current` is `connected`.
    ///   - time: when it happened.
    /// - Returns: a `state` line.
    static func state(_ previous: ConnectionState, _ current: ConnectionState, socket: String?, at time: LineTime) -> OutputLine {
        var line = OutputLine(time: time, kind: .state)
        line.previous = previous.rawValue
        line.current = current.rawValue
        line.socket = socket
        return line
    }

    /// A channel event.
    ///
    /// - Parameters:
    ///   - event: the event as the channel delivered it.
    ///   - time: when it arrived.
    /// - Returns: an `event` line.
    static func event(_ event: RealtimeEvent, at time: LineTime) -> OutputLine {
        var line = OutputLine(time: time, kind: .event)
        line.channel = event.channel
        line.event = event.event
        line.data = event.data
        line.user = event.userID
        return line
    }

    /// A connection-level error.
    ///
    /// - Parameters:
    ///   - error: the error as `onError` gave it.
    ///   - time: when it was reported.
    /// - Returns: an `error` line.
    static func error(_ error: RealtimeError, at time: LineTime) -> OutputLine {
        var line = OutputLine(time: time, kind: .error)
        line.error = error.kind.rawValue
        line.code = error.code
        line.message = error.message
        return line
    }

    /// A reconnect the reconnector scheduled.
    ///
    /// - Parameters:
    ///   - attempt: the attempt number, from 1.
    ///   - delay: the wait before it; `nil` when it waits for the network instead of a timer.
    ///   - time: when it was scheduled.
    /// - Returns: a `reconnect` line.
    static func reconnect(attempt: Int, delay: Duration?, at time: LineTime) -> OutputLine {
        var line = OutputLine(time: time, kind: .reconnect)
        line.attempt = attempt
        line.delay = delay
        return line
    }

    /// A room event: a kept one (`room`), a member one (`member`), a room's error
    /// (`room-error`) or another of the room's own (`room-state`).
    ///
    /// - Parameters:
    ///   - room: the room.
    ///   - event: the event name.
    ///   - data: its data.
    ///   - meta: its meta (id 0 for the room's own events).
    ///   - time: when it was delivered.
    /// - Returns: the line.
    static func room(_ room: String, event: String, data: JSONValue, meta: RoomEventMeta, at time: LineTime) -> OutputLine {
        let kind: Kind
        if meta.isKept {
            kind = .room
        } else {
            switch event {
            case RoomSystemEvent.join, RoomSystemEvent.leave: kind = .member
            case RoomSystemEvent.error: kind = .roomError
            default: kind = .roomState
            }
        }
        var line = OutputLine(time: time, kind: kind)
        line.room = room
        line.event = event
        line.roomData = JSONText.value(data)
        if meta.isKept { line.meta = meta }
        return line
    }

    /// The end of a history page.
    static func page(_ room: String, more: Bool, at time: LineTime) -> OutputLine {
        var line = OutputLine(time: time, kind: .page)
        line.room = room
        line.more = more
        return line
    }

    // MARK: - Plain text

    /// The plain form: local time, kind, then the details, for example
    /// `12:00:01.042 state connecting -> connected (socket 123.456)`,
    /// `12:00:02.001 event prices price-update {"p":1}`,
    /// `12:00:09.310 error closed 4201: pong not received`,
    /// `12:00:09.311 reconnect in 1.234 s (attempt 2)`.
    var plainText: String {
        var parts = [time.clockText, kind.rawValue]
        switch kind {
        case .state:
            parts.append("\(previous ?? "?") -> \(current ?? "?")")
            if let socket { parts.append("(socket \(socket.escapingControlCharacters))") }
        case .event:
            parts.append((channel ?? "?").escapingControlCharacters)
            parts.append((event ?? "?").escapingControlCharacters)
            if let data { parts.append(data.escapingControlCharacters) }
            if let user { parts.append("(user \(user.escapingControlCharacters))") }
        case .error:
            let label = [error, code.map(String.init)].compactMap { $0 }.joined(separator: " ")
            parts.append("\(label): \((message ?? "").escapingControlCharacters)")
        case .reconnect:
            let when = delay.map { "in \(Self.seconds($0)) s" } ?? "when the network is back"
            parts.append("\(when) (attempt \(attempt ?? 0))")
        case .room, .member, .roomState, .roomError:
            parts.append((room ?? "?").escapingControlCharacters)
            parts.append((event ?? "?").escapingControlCharacters)
            parts.append((roomData ?? "null").escapingControlCharacters)
            if let meta {
                var details = ["id \(meta.id)", "at \(meta.at)"]
                if let from = meta.from { details.append("from \(from.escapingControlCharacters)") }
                if meta.replayed { details.append("replayed") }
                parts.append("(\(details.joined(separator: ", ")))")
            }
        case .page:
            parts.append((room ?? "?").escapingControlCharacters)
            parts.append(more == true ? "more: older events are kept" : "no older events")
        }
        return parts.joined(separator: " ")
    }

    // MARK: - JSON

    /// The JSON form: one object with the keys `time` (ISO 8601, UTC, milliseconds), `kind`,
    /// `previous`, `current`, `socket`, `channel`, `event`, `data`, `user`, `error`, `code`,
    /// `message`, `delay` (seconds, a number with millisecond precision) and `attempt`, in that
    /// order, each left out when it does not apply. `data` is a string holding the JSON text
    /// the publisher sent, as in the Pusher protocol.
    var jsonText: String {
        var members: [(key: String, value: String)] = [
            ("time", JSONText.quoted(time.iso8601)),
            ("kind", JSONText.quoted(kind.rawValue)),
        ]
        let strings: [(String, String?)] = [
            ("previous", previous), ("current", current), ("socket", socket), ("channel", channel),
            ("event", event), ("data", data), ("user", user), ("error", error),
        ]
        for case let (key, value?) in strings { members.append((key, JSONText.quoted(value))) }
        if let code { members.append(("code", String(code))) }
        if let message { members.append(("message", JSONText.quoted(message))) }
        if let delay { members.append(("delay", Self.seconds(delay))) }
        if let attempt { members.append(("attempt", String(attempt))) }
        if let room {
            // After `kind`, so a room line reads kind, room, event, data, meta.
            members.insert(("room", JSONText.quoted(room)), at: 2)
        }
        if let roomData { members.append(("data", roomData)) }
        if let meta {
            var fields = [
                ("id", String(meta.id)), ("at", String(meta.at)),
                ("from", meta.from.map(JSONText.quoted) ?? "null"), ("replayed", String(meta.replayed)),
            ]
            // Which epoch the id belongs to: ids start again at 1 in a new one.
            if let epoch = meta.epoch { fields.append(("epoch", JSONText.quoted(epoch))) }
            members.append(("meta", JSONText.object(fields)))
        }
        if let more { members.append(("more", String(more))) }
        return JSONText.object(members)
    }

    /// `duration` in seconds with three decimals, rounded to the millisecond (`1.234`); a
    /// negative duration prints as `0.000`.
    static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = max(.zero, duration).components
        let milliseconds = seconds * 1000 + (attoseconds + 500_000_000_000_000) / 1_000_000_000_000_000
        let fraction = String(milliseconds % 1000)
        return "\(milliseconds / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }
}
