import Dispatch
import SystemSupport
import Reachability
import Reconnect
import ReconnectTesting

/// A reconnector attached to a scripted stream, with a manual clock and a fake reachability
/// source, recording every event.
final class Harness: Sendable {
    let clock = ManualClock()
    let stream = ScriptedStream(host: "198.51.100.7")
    let reachability = FakeReachabilitySource(host: .address(IPAddress("198.51.100.7")!), flags: [.reachable])
    let reconnector: Reconnector
    private let recorded = Locked<[ReconnectEvent]>([])
    private let token = Locked<ObservationToken?>(nil)

    init(seed: UInt64 = 7, _ configure: (inout ReconnectConfiguration) -> Void = { _ in }) {
        var configuration = ReconnectConfiguration()
        configure(&configuration)
        let reachability = reachability
        reconnector = Reconnector(
            configuration: configuration,
            scheduler: clock,
            random: SeededRandomNumberGenerator(seed: seed),
            reachability: { _ in reachability }
        )
        reconnector.activate(stream)
        let recorded = recorded
        token.withLock { $0 = reconnector.onEvent { event in recorded.withLock { $0.append(event) } } }
    }

    var events: [ReconnectEvent] { recorded.withLock { $0 } }

    /// Attempts the reconnector made (the app's first connect excluded).
    func attemptsStarted() -> [ReconnectEvent.Trigger] {
        events.compactMap { if case .attemptStarted(_, let trigger) = $0 { trigger } else { nil } }
    }

    /// Connects the stream the way an app does and lets it become ready.
    func connectReady() {
        stream.behaviour = .succeed
        stream.connect()
    }

    /// A host path with an interface and source address (for path-change tests).
    static func path(reachable: Bool, interface: Int32 = 2, source: String = "192.0.2.2") -> HostReachability {
        let address = IPAddress("198.51.100.7")!
        let link = NetworkInterface(name: "eth\(interface)", index: interface, kind: .wired, isAdminUp: true, hasCarrier: reachable, operState: reachable ? .up : .lowerLayerDown)
        let lookup = RouteLookup.route(.init(type: .unicast, interfaceIndex: interface, gateway: IPAddress("192.0.2.1"), preferredSource: IPAddress(source)))
        return HostReachability(host: .address(address), paths: [NetworkPath(destination: address, lookup: lookup, interface: link)])
    }
}

/// A delegate that answers as told and counts its calls.
final class RecordingDelegate: ReconnectorDelegate {
    private let state = Locked((accidental: [ReachabilityFlags](), asked: [ReachabilityFlags](), answer: true))

    init(answer: Bool = true) { state.withLock { $0.answer = answer } }

    var accidental: [ReachabilityFlags] { state.withLock { $0.accidental } }
    var asked: [ReachabilityFlags] { state.withLock { $0.asked } }
    var answer: Bool {
        get { state.withLock { $0.answer } }
        set { state.withLock { $0.answer = newValue } }
    }

    func reconnector(_ reconnector: Reconnector, didDetectAccidentalDisconnect flags: ReachabilityFlags) {
        state.withLock { $0.accidental.append(flags) }
    }

    func reconnector(_ reconnector: Reconnector, shouldAttemptAutoReconnect flags: ReachabilityFlags) -> Bool {
        state.withLock { state in
            state.asked.append(flags)
            return state.answer
        }
    }
}
