import Foundation
import SystemSupport
import Reachability
import Reconnect

/// The samples' printer: one line per state change of a stream and of its `Reconnector`, as
/// text (`2026-11-29T17:19:35.241Z disconnected accidental: connection closed by peer`) or as
/// JSON lines with `time` (ISO 8601, UTC, milliseconds), `event`, `detail` and `source`
/// (`stream`, `reconnector` or `app`).
///
/// ```swift
/// let log = EventLog(format: json ? .json : .text)
/// let tokens = [log.observe(stream), log.observe(reconnector)]
/// ```
///
/// Thread-safe; lines are written whole, one at a time, in the order they were logged.
public final class EventLog: Sendable {
    /// How lines are written.
    public enum Format: Sendable, Hashable {
        /// `time event detail`, for people.
        case text
        /// One JSON object per line, keys sorted, for programs.
        case json
    }

    /// One logged line.
    public struct Entry: Sendable, Hashable, Codable {
        /// When, in ISO 8601 (UTC, with milliseconds).
        public var time: String
        /// What happened, a kebab-case name: `connecting`, `ready`, `disconnected`,
        /// `reconnect-scheduled`, `reconnect-attempt`, `reconnected`, …
        public var event: String
        /// The particulars: an error, an attempt number, a delay in milliseconds.
        public var detail: String
        /// Who reported it: `stream`, `reconnector` or `app`.
        public var source: String
    }

    private struct StreamPhase {
        var ready = false
        var toldToDisconnect = false
        var refused = false
    }

    /// Writes a line and a newline to standard output at once, so pipes see each change.
    public static let standardOutput: @Sendable (String) -> Void = { line in
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// The format given at creation.
    public let format: Format
    private let write: @Sendable (String) -> Void
    private let formatter: Locked<ISO8601DateFormatter>

    /// Creates a log.
    ///
    /// - Parameters:
    ///   - format: text or JSON lines.
    ///   - write: receives each line without its newline (standard output by default).
    public init(format: Format = .text, write: @escaping @Sendable (String) -> Void = EventLog.standardOutput) {
        self.format = format
        self.write = write
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        self.formatter = Locked(formatter)
    }

    /// Logs one line.
    ///
    /// - Parameters:
    ///   - event: what happened (kebab-case).
    ///   - detail: the particulars (may be empty).
    ///   - source: who reported it (`app` by default).
    public func log(_ event: String, detail: String = "", source: String = "app") {
        // Formatting and writing under the lock keeps lines whole and in order.
        formatter.withLock { formatter in
            let entry = Entry(time: formatter.string(from: Date()), event: event, detail: detail, source: source)
            write(render(entry))
        }
    }

    /// Logs every event of `reconnector` (see `describe(_:)`).
    ///
    /// - Parameter reconnector: the reconnector to follow.
    /// - Returns: a token whose `cancel()` stops the logging.
    public func observe(_ reconnector: Reconnector) -> ObservationToken {
        reconnector.onEvent { [weak self] event in
            let (name, detail) = Self.describe(event)
            self?.log(name, detail: detail, source: "reconnector")
        }
    }

    /// Logs every `StreamEvent` of `stream`, telling intentional disconnects (after
    /// `toldToDisconnect`) from refusals (after `refused`), accidental ones (after `ready`)
    /// and failed attempts.
    ///
    /// - Parameter stream: the stream to follow.
    /// - Returns: a token whose `cancel()` stops the logging.
    public func observe(_ stream: any ReconnectableStream) -> ObservationToken {
        let host = stream.destinationHost
        let phase = Locked(StreamPhase())
        return stream.reconnectEvents.observe { [weak self] event in
            let (name, detail) = phase.withLock { Self.describe(event, host: host, phase: &$0) }
            self?.log(name, detail: detail, source: "stream")
        }
    }

    /// The name and detail logged for a reconnector event.
    ///
    /// - Parameter event: the event.
    /// - Returns: e.g. `("reconnect-scheduled", "attempt 1 in 2000 ms")`.
    public static func describe(_ event: ReconnectEvent) -> (event: String, detail: String) {
        switch event {
        case .accidentalDisconnect(let flags): return ("accidental-disconnect", "flags \(flags)")
        case .scheduled(let attempt, let delay): return ("reconnect-scheduled", "attempt \(attempt) in \(delay.milliseconds) ms")
        case .waitingForReachability(let attempt): return ("waiting-for-reachability", "attempt \(attempt) when the host is reachable")
        case .attemptStarted(let attempt, let trigger): return ("reconnect-attempt", "attempt \(attempt) (\(trigger.rawValue))")
        case .vetoed(let attempt): return ("reconnect-vetoed", "attempt \(attempt)")
        case .attemptTimedOut(let attempt): return ("reconnect-timed-out", "attempt \(attempt)")
        case .succeeded(let attempts): return ("reconnected", "after \(attempts) attempt\(attempts == 1 ? "" : "s")")
        case .stopped: return ("reconnect-stopped", "")
        case .refused(let reason): return ("reconnect-refused", reason)
        case .verifyingConnection(let flags): return ("verifying-connection", "path changed, flags \(flags)")
        }
    }

    private static func describe(_ event: StreamEvent, host: String, phase: inout StreamPhase) -> (String, String) {
        switch event {
        case .willConnect:
            return ("connecting", host)
        case .opened:
            return ("opened", host)
        case .ready:
            phase.ready = true
            return ("ready", host)
        case .toldToDisconnect:
            phase.toldToDisconnect = true
            return ("disconnecting", "told to disconnect")
        case .disconnected(let error, _):
            defer { phase = StreamPhase() }
            let reason = error.map { "\($0)" } ?? "closed"
            if phase.toldToDisconnect { return ("disconnected", "intentional") }
            if phase.refused { return ("disconnected", "refused: \(reason)") }
            if phase.ready { return ("disconnected", "accidental: \(reason)") }
            return ("disconnected", "attempt failed: \(reason)")
        case .refused(let reason):
            phase.refused = true
            return ("refused", reason)
        }
    }

    private func render(_ entry: Entry) -> String {
        switch format {
        case .text:
            return entry.detail.isEmpty ? "\(entry.time) \(entry.event)" : "\(entry.time) \(entry.event) \(entry.detail)"
        case .json:
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return (try? encoder.encode(entry)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }
    }
}
