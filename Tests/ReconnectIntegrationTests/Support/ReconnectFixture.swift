import Dispatch
import Reachability
import ReachabilityNetlink
import Reconnect

/// A stream with a real `Reconnector` (Dispatch timers, netlink reachability) attached, and
/// recorders for both event streams.
final class ReconnectFixture<Stream: ReconnectableStream>: Sendable {
    let stream: Stream
    let reconnector: Reconnector
    let events = Recorder<ReconnectEvent>()
    let streamEvents = Recorder<StreamRecord>()
    private let tokens: [ObservationToken]

    static var reachabilityQueue: DispatchQueue { DispatchQueue(label: "ReconnectFixture.reachability") }

    /// Short delays so the scenarios take milliseconds: 50 ms before the first attempt, one
    /// every 100 ms after, attempts aborted after 2 s.
    static func configuration(_ configure: (inout ReconnectConfiguration) -> Void = { _ in }) -> ReconnectConfiguration {
        var configuration = ReconnectConfiguration()
        configuration.reconnectDelay = .milliseconds(50)
        configuration.reconnectTimerInterval = .milliseconds(100)
        configuration.attemptTimeout = .seconds(2)
        configuration.delegateTimeout = .seconds(1)
        configure(&configuration)
        return configuration
    }

    /// - Parameters:
    ///   - stream: the stream to keep alive.
    ///   - reachability: the reachability source maker (netlink in this process's namespace by default).
    ///   - configure: changes to the short-delay configuration.
    init(
        _ stream: Stream,
        reachability: (@Sendable (String) throws -> any ReachabilitySource)? = { host in
            try NetworkReachability(host: host, deliveryQueue: reachabilityQueue)
        },
        configure: (inout ReconnectConfiguration) -> Void = { _ in }
    ) {
        self.stream = stream
        reconnector = Reconnector(configuration: Self.configuration(configure), reachability: reachability)
        let (events, streamEvents) = (events, streamEvents)
        tokens = [
            reconnector.onEvent { events.record($0) },
            stream.reconnectEvents.observe { streamEvents.record(StreamRecord($0)) },
        ]
        reconnector.activate(stream)
    }

    deinit {
        for token in tokens { token.cancel() }
        reconnector.deactivate()
    }
}
