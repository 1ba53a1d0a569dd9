import SystemSupport
import RealtimeProtocol
import RealtimeServer

/// A connection that records what the hub sends it.
final class RecordingOutput: ConnectionOutput {
    private let state = Locked((frames: [String](), close: (UInt16, String)?.none, aborted: false))

    func send(text: String) { state.withLock { $0.frames.append(text) } }
    func close(code: UInt16, reason: String) { state.withLock { $0.close = (code, reason) } }
    func abort() { state.withLock { $0.aborted = true } }

    var frames: [RealtimeMessage] { state.withLock { $0.frames }.compactMap { try? RealtimeMessage(parsing: $0) } }
    var closeCode: UInt16? { state.withLock { $0.close?.0 } }
    var closeReason: String? { state.withLock { $0.close?.1 } }
    var aborted: Bool { state.withLock { $0.aborted } }
    func events(_ name: String) -> [RealtimeMessage] { frames.filter { $0.event == name } }
    var last: RealtimeMessage? { frames.last }
}

/// A hub with one app and a manual time source.
final class HubFixture: Sendable {
    static let app = RealtimeApp(id: "1", key: "app-key", secret: "app-secret", maxConnections: 3, activityTimeout: 30)
    let time = Locked(ContinuousClock.now)
    let hub: RealtimeHub

    init(configure: (inout RealtimeHub.Configuration) -> Void = { _ in }) {
        var configuration = RealtimeHub.Configuration(apps: [Self.app])
        configure(&configuration)
        let time = time
        hub = RealtimeHub(configuration: configuration, now: { time.withLock { $0 } })
    }

    func advance(_ duration: Duration) { time.withLock { $0 += duration } }

    /// Opens a connection speaking `namespace` and returns it with its socket id.
    func connect(_ namespace: ProtocolNamespace = .bird) -> (RecordingOutput, String) {
        let output = RecordingOutput()
        let socketID = hub.open(appKey: Self.app.key, namespace: namespace, output: output)!
        return (output, socketID)
    }

    func send(_ socketID: String, _ event: String, channel: String? = nil, _ payload: some Encodable) {
        hub.receive(text: (try! RealtimeMessage(event: event, channel: channel, payload: payload)).text, from: socketID)
    }

    func subscribe(_ socketID: String, _ channel: String, auth: String? = nil, channelData: String? = nil, namespace: ProtocolNamespace = .bird) {
        send(socketID, namespace.event(.subscribe), SubscribeRequest(channel: channel, auth: auth, channelData: channelData))
    }

    var signer: ChannelAuthorization { ChannelAuthorization(key: Self.app.key, secret: Self.app.secret) }
}
