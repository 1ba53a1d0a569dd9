import Dispatch
import Synchronization
import SystemSupport
import RealtimeProtocol
import WebSocket

/// The reference realtime server: a `RealtimeHub` behind a libwebsockets listener that serves
/// WebSocket clients on `/app/{key}` and the signed HTTP API on the same port.
///
/// The namespace of a connection comes from its URL: `?namespace=bird|pusher` if given, else
/// `pusher` when the client sends Pusher's `protocol=` parameter (Pusher libraries always do),
/// else `bird`.
public final class RealtimeServer: Sendable {
    /// The hub holding connections and channels.
    public let hub: RealtimeHub
    /// The HTTP API in front of the hub.
    public let api: HTTPAPI
    /// Posts the apps' webhooks (unused by apps without a `webhookURL`).
    public let webhooks: WebhookDispatcher
    /// One per service loop (`RealtimeServerOptions.threads`); the first one's listener hands
    /// accepted connections to all of them in turn.
    private let contexts: [WebSocketContext]
    private let listener: WebSocketServer
    // Dispatch timers are thread-safe; this one is only cancelled.
    nonisolated(unsafe) private let sweeper: any DispatchSourceTimer
    private let stopped = Locked(false)
    /// WebSocket connections accepted and not yet closed (refused ones too, until they close).
    private let openConnections = OpenConnections()

    /// Starts listening. Raises the process's soft descriptor limit to the hard one and keeps
    /// connections (all apps together) 256 below it: one more is closed with 4100.
    ///
    /// - Parameters:
    ///   - options: address, port and apps.
    ///   - configure: changes to the hub's limits and timeouts (pong timeout, error limits).
    ///   - log: one line per connection event (stderr in the executable), or `nil`.
    /// - Throws: `WebSocketError` when the context cannot be created or the port is taken.
    public init(
        options: RealtimeServerOptions,
        configure: (inout RealtimeHub.Configuration) -> Void = { _ in },
        log: (@Sendable (String) -> Void)? = nil
    ) throws(WebSocketError) {
        var configuration = RealtimeHub.Configuration(apps: options.apps)
        configuration.log = log
        // Every connection holds a descriptor; keep a reserve for the listener, pipes, files,
        // webhook requests and handshakes still being refused.
        configuration.maxTotalConnections = max(16, DescriptorLimit.raiseSoftLimit() - 256)
        let webhooks = WebhookDispatcher(log: log)
        configuration.webhooks = { app, event in webhooks.enqueue(event, for: app) }
        // The node's queued bytes, summed over the service loops' contexts once they exist.
        let queuedContexts = Locked<[WebSocketContext]>([])
        configuration.queuedBytes = { queuedContexts.withLock { $0 }.reduce(0) { $0 + $1.bufferedAmount } }
        if let megabytes = options.replayMemoryMiB { configuration.replayMemoryBudget = megabytes * 1024 * 1024 }
        if let megabytes = options.replayRateMiB { configuration.replayBytesPerSecond = megabytes * 1024 * 1024 }
        configure(&configuration)
        let hub = RealtimeHub(configuration: configuration)
        let api = HTTPAPI(hub: hub)
        let console = OperatorConsole(access: ConsoleAccess(serverToken: options.consoleToken, apps: options.apps), hub: hub, api: api, node: options.node)
        var contextOptions = WebSocketContext.Options()
        contextOptions.maxHTTPBodySize = api.maxBodySize + 1
        contextOptions.maxMessageSize = options.maxMessageSize
        // A client that stopped reading is cut off past this backlog (`WebSocketOutput`).
        contextOptions.maxBufferedAmount = WebSocketOutput.maxBufferedBytes
        contextOptions.eventLoop = .epoll
        // A connection that has not finished its HTTP request or upgrade within 10 s (lws'
        // default is 20) gives its descriptor back: idle half-open connections cost the most
        // near the descriptor limit.
        contextOptions.timeout = .seconds(10)
        if options.apps.contains(where: \.compression) { contextOptions.permessageDeflate = Self.permessageDeflate }
        let compressingKeys = Set(options.apps.filter(\.compression).map(\.key))
        var contexts: [WebSocketContext] = []
        do {
            for _ in 0..<max(1, options.threads) { contexts.append(try WebSocketContext(options: contextOptions)) }
            listener = try contexts[0].listen(
                host: options.host,
                port: Int(options.port),
                // Outside lws' known headers: a TLS-terminating proxy's word that the page came
                // over HTTPS (the console's cookie is then `Secure`).
                customHeaderNames: ["X-Forwarded-Proto"],
                spreadingTo: Array(contexts.dropFirst()),
                acceptsDeflate: { request in compressingKeys.contains(Self.appKey(ofUpgradePath: request.path)) },
                onConnection: { [openConnections] connection in Self.accept(connection, hub: hub, open: openConnections) },
                onRequest: { request in
                    if let answer = console.response(to: request) {
                        hub.metrics.countHTTP(answer.status)
                        return answer
                    }
                    if request.method == "GET" || request.method == "HEAD",
                       let client = ClientModule.response(path: request.path, ifNoneMatch: request.header("if-none-match")) {
                        hub.metrics.countHTTP(client.status)
                        return client
                    }
                    let response = api.handle(HTTPRequest(
                        method: request.method, path: request.path,
                        query: request.queryItems.map { ($0.name, $0.value) }, body: request.body))
                    hub.metrics.countHTTP(response.status)
                    return HTTPServerResponse(status: response.status, contentType: response.contentType, text: response.body)
                }
            )
        } catch {
            for context in contexts { context.shutdown() }
            throw error
        }
        self.hub = hub
        self.api = api
        self.contexts = contexts
        queuedContexts.withLock { $0 = contexts }
        self.webhooks = webhooks
        configuration.fanout?.start(hub)
        for app in options.apps { configuration.fanout?.follow(.app(app.id)) }
        let sweeper = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "RealtimeServer.sweep"))
        sweeper.schedule(deadline: .now() + .seconds(1), repeating: .seconds(1), leeway: .milliseconds(100))
        let metrics = hub.metrics
        // The slowest service loop's last lag.
        let lags = Locked([Int](repeating: 0, count: contexts.count))
        sweeper.setEventHandler {
            hub.sweep()
            for (index, context) in contexts.enumerated() {
                context.measureServiceLag { lag in
                    let microseconds = Int(lag.components.seconds) * 1_000_000 + Int(lag.components.attoseconds / 1_000_000_000_000)
                    let slowest = lags.withLock { lags in
                        lags[index] = microseconds
                        return lags.max() ?? 0
                    }
                    metrics.serviceLagMicroseconds.store(slowest, ordering: .relaxed)
                }
            }
        }
        sweeper.resume()
        self.sweeper = sweeper
    }

    /// The bound port (the kernel's choice when 0 was asked for).
    public var port: Int { listener.port }

    /// The WebSocket URL for an app key (`ws://host:port/app/{key}`).
    ///
    /// - Parameter key: the app key.
    public func url(appKey key: String) -> String { listener.url(path: "/app/\(key)") }

    /// Graceful shutdown, in order: (1) stop accepting: a new TCP connection is closed at once,
    /// so its client backs off as after any failed connect instead of being told to reconnect
    /// at once into a server that is going away; (2) close every client with 4200 (reconnect
    /// now), after the frames already queued for it; (3) wait until every closing handshake
    /// ended (RFC 6455 §7.1.2) or `grace` passed, so close frames are not lost behind a
    /// client's backlog; (4) destroy the listener and the context. Calling it again does
    /// nothing.
    ///
    /// - Parameter grace: how long clients get to read their backlog and the close frame
    ///   (5 s by default); `.zero` destroys at once.
    public func shutdown(grace: Duration = .seconds(5)) {
        guard stopped.withLock({ stopped in
            defer { stopped = true }
            return !stopped
        }) else { return }
        sweeper.cancel()
        listener.stopAccepting()
        hub.shutdown()
        openConnections.waitUntilClosed(grace: grace)
        hub.configurationStorage.fanout?.stop()
        webhooks.stop()
        listener.stop()
        for context in contexts { context.shutdown() }
    }

    /// WebSocket connections whose closing handshake has not ended (0 once a shutdown is done).
    public var openConnectionCount: Int { openConnections.count }

    deinit { shutdown(grace: .zero) }

    // MARK: - Connections

    /// The compression every app with `RealtimeApp.compression` gives a client that offers
    /// `permessage-deflate`: zlib level 1 with the context kept between messages (a replay of
    /// 1,000 room events 7.9 times smaller on the wire, against 1.6 times for the same frames
    /// compressed each alone), and the smallest match state (`memLevel` 1: 10 % more bytes than
    /// at 8, for 129 KiB of deflate state a connection instead of 256 KiB). BENCHMARKS.md
    /// "permessage-deflate" has the figures.
    static let permessageDeflate = PerMessageDeflate(contextTakeover: true, compressionLevel: 1, memoryLevel: 1)

    /// The app key of an upgrade's path (`/app/{key}`, read as `accept` reads it), or "" for
    /// any other path.
    static func appKey(ofUpgradePath path: String) -> String {
        let parts = path.split(separator: "/")
        guard parts.count == 2, parts[0] == "app" else { return "" }
        return String(parts[1])
    }

    /// The namespace a client asked for, by the rule in the type's documentation.
    static func namespace(for request: HTTPServerRequest?) -> ProtocolNamespace {
        if let asked = request?.queryValue("namespace").map(ProtocolNamespace.init(rawValue:)), ProtocolNamespace.known.contains(asked) {
            return asked
        }
        return request?.queryValue("protocol") != nil ? .pusher : .bird
    }

    private static func accept(_ connection: WebSocketConnection, hub: RealtimeHub, open: OpenConnections) {
        let output = WebSocketOutput(connection, metrics: hub.metrics)
        let socketID = Locked<String?>(nil)
        open.opened()
        let counted = Locked(true)
        connection.setEventHandler { event in
            switch event {
            case .closed, .failed:
                // Once per connection, whichever comes.
                let first = counted.withLock { wasCounted -> Bool in
                    defer { wasCounted = false }
                    return wasCounted
                }
                if first { open.closed() }
            default:
                break
            }
            guard let id = socketID.withLock({ $0 }) else { return }
            switch event {
            case .text(let text): hub.receive(text: text, from: id)
            case .binary: hub.receiveBinary(from: id)
            case .closed, .failed: hub.closed(id)
            case .open, .pong: break
            }
        }
        let path = connection.request?.path ?? ""
        let parts = path.split(separator: "/")
        guard parts.count == 2, parts[0] == "app" else {
            output.close(code: RealtimeCloseCode.unknownApp.rawValue, reason: "Expected /app/{key}")
            return
        }
        let id = hub.open(appKey: String(parts[1]), namespace: namespace(for: connection.request), output: output)
        socketID.withLock { $0 = id }
    }
}

/// The server's WebSocket connections not yet closed, and a shutdown waiting for the last of
/// them to close (woken by its close, no polling).
final class OpenConnections: Sendable {
    private let state = Locked((count: 0, waiting: false))
    private let drained = DispatchSemaphore(value: 0)

    /// Connections accepted and not yet closed.
    var count: Int { state.withLock { $0.count } }

    /// A connection was accepted.
    func opened() { state.withLock { $0.count += 1 } }

    /// An accepted connection closed (once per connection); the last one wakes a waiting
    /// shutdown.
    func closed() {
        let wake = state.withLock { state -> Bool in
            state.count -= 1
            return state.count == 0 && state.waiting
        }
        if wake { drained.signal() }
    }

    /// Waits until no connection is open, or `grace` passed.
    func waitUntilClosed(grace: Duration) {
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline {
            guard state.withLock({ state -> Bool in
                state.waiting = state.count > 0
                return state.waiting
            }) else { return }
            let left = deadline - ContinuousClock.now
            let milliseconds = Int(max(.zero, min(left, .seconds(3600))) / .milliseconds(1))
            _ = drained.wait(timeout: .now() + .milliseconds(max(1, milliseconds)))
        }
        state.withLock { $0.waiting = false }
    }
}

/// A hub connection written to a WebSocket connection.
final class WebSocketOutput: ConnectionOutput {
    /// Bytes queued for one client beyond which it is a slow consumer and is dropped: it
    /// stopped reading, and the server would otherwise buffer for it without bound.
    static let maxBufferedBytes = 4 * 1024 * 1024

    let connection: WebSocketConnection
    private let metrics: RealtimeMetrics
    private let dropped = Atomic<Bool>(false)

    init(_ connection: WebSocketConnection, metrics: RealtimeMetrics) {
        self.connection = connection
        self.metrics = metrics
    }

    func send(text: String) {
        do throws(WebSocketError) {
            try connection.send(text: text)
        } catch .sendBufferFull {
            // The context's `maxBufferedAmount` (this type's `maxBufferedBytes`): the connection
            // was dropped without a close frame, which would only have queued behind the backlog.
            if !dropped.exchange(true, ordering: .relaxed) { metrics.slowConsumersDropped.bump() }
            return
        } catch {
            // A connection already closing refuses frames; the hub learns of the close by event.
            return
        }
        metrics.messagesSent.bump()
        metrics.bytesSent.bump(text.utf8.count)
    }

    func close(code: UInt16, reason: String) {
        try? connection.close(code: WebSocketCloseCode(rawValue: code), reason: reason)
    }

    func abort() { connection.abort() }

    var queuedBytes: Int { connection.bufferedAmount }
}
