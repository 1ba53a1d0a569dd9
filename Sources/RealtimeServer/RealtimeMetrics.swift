import Synchronization
import SystemSupport

/// What one server has done since it started, for `GET /metrics`: lock-free counters bumped
/// on the socket thread, plus the few counts kept by key (server closes by close code, HTTP
/// answers by status), each key set bounded by the codes the server itself uses.
///
/// The hub counts connections, frames received and refusals; the server's WebSocket output
/// counts frames and bytes sent and slow consumers dropped; the HTTP side counts answers.
public final class RealtimeMetrics: Sendable {
    /// Connections accepted (the handshake sent).
    public let connectionsOpened = Atomic<Int>(0)
    /// Connections that ended, whoever closed them.
    public let connectionsClosed = Atomic<Int>(0)
    /// Connections refused at the handshake: unknown app key (4001).
    public let refusedUnknownApp = Atomic<Int>(0)
    /// Connections refused at the handshake: an app's or the server's limit (4100).
    public let refusedOverCapacity = Atomic<Int>(0)
    /// Connections refused at the handshake: the server is shutting down (4200).
    public let refusedShuttingDown = Atomic<Int>(0)
    /// Text frames received from clients.
    public let messagesReceived = Atomic<Int>(0)
    /// Bytes of those frames (UTF-8).
    public let bytesReceived = Atomic<Int>(0)
    /// Text frames queued to clients.
    public let messagesSent = Atomic<Int>(0)
    /// Bytes of those frames (UTF-8).
    public let bytesSent = Atomic<Int>(0)
    /// Channel and room events this node handed out (one per event, however many recipients,
    /// none included):
    /// published through the HTTP API, sent by clients, or brought by the cluster's bus.
    public let eventsPublished = Atomic<Int>(0)
    /// Room events sent again from history to members resuming from their positions.
    public let eventsReplayed = Atomic<Int>(0)
    /// Clients dropped because their send backlog passed its bound (they stopped reading).
    public let slowConsumersDropped = Atomic<Int>(0)
    /// Frames that were not the protocol (bad JSON, binary frames, unknown events).
    public let protocolErrors = Atomic<Int>(0)
    /// Channel subscriptions refused (bad signature, limits, names).
    public let subscriptionsRefused = Atomic<Int>(0)
    /// Room requests and presence changes refused because the hub's lane (`RoomLane`) had
    /// `Configuration.roomLaneBacklog` waiting: a history store that stopped answering.
    public let roomLaneRefused = Atomic<Int>(0)
    /// Times a streamed replay's next page found its member's socket too full (or its pace
    /// spent) and waited: one stream per connection looks, every 160 ms at most often once the
    /// member stops reading, however many rooms it resumes (the others wait parked).
    public let replayWaits = Atomic<Int>(0)
    /// Connections dropped because their queue stayed over 512 KiB for
    /// `Configuration.replayStallDeadline` while the node was over its replay memory.
    public let slowReadersDropped = Atomic<Int>(0)
    /// How long the last probe waited for the slowest service loop, in microseconds (measured
    /// every second by the server).
    public let serviceLagMicroseconds = Atomic<Int>(0)
    private let keyed = Locked((closes: [UInt16: Int](), statuses: [Int: Int]()))

    /// Creates zeroed counters.
    public init() {}

    /// Counts a connection the server closed with `code` (4009, 4201, …).
    ///
    /// - Parameter code: the close code (RFC 6455 §7.4; the protocol's 4000–4999).
    public func countClose(_ code: UInt16) {
        keyed.withLock { $0.closes[code, default: 0] += 1 }
    }

    /// Counts an HTTP answer.
    ///
    /// - Parameter status: the status code sent.
    public func countHTTP(_ status: Int) {
        keyed.withLock { $0.statuses[status, default: 0] += 1 }
    }

    /// Server closes by close code, and HTTP answers by status, so far.
    public var keyedCounts: (closes: [UInt16: Int], statuses: [Int: Int]) { keyed.withLock { $0 } }
}

extension Atomic<Int> {
    /// Adds `amount` (1 by default); relaxed: a counter orders nothing.
    @inline(__always)
    func bump(_ amount: Int = 1) {
        wrappingAdd(amount, ordering: .relaxed)
    }
}

/// Prometheus' text exposition format, version 0.0.4: `# HELP`, `# TYPE`, then one sample per
/// line, `name{label="value"} number`.
struct PrometheusText {
    private(set) var text = ""

    /// One metric family: its help, its type (`counter`, `gauge`) and its samples.
    mutating func family(_ name: String, _ type: String, _ help: String, _ samples: [(labels: [(String, String)], value: Int)]) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        for sample in samples {
            let labels = sample.labels.isEmpty ? "" : "{" + sample.labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
            text += "\(name)\(labels) \(sample.value)\n"
        }
    }

    /// One sample without labels.
    mutating func single(_ name: String, _ type: String, _ help: String, _ value: Int) {
        family(name, type, help, [([], value)])
    }

    /// One sample without labels, a number with a fraction (seconds).
    mutating func single(_ name: String, _ type: String, _ help: String, seconds: Double) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(seconds)\n"
    }

    /// A label value with `\`, `"` and newlines escaped, as the format requires.
    static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }
}
