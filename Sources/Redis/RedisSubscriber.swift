import CHiredis
import Dispatch
import Glibc
import SystemSupport

/// A Redis pub/sub subscription on its own connection and thread (`SUBSCRIBE`, RESP2: a
/// subscribed connection can run nothing but (un)subscribes and `PING`, so it cannot share
/// `RedisConnection`'s).
///
/// The set of channels is the caller's: `subscribe`/`unsubscribe` change it at any time, from
/// any thread, and after a lost connection the thread connects again (backoff 100 ms doubling
/// to 2 s, full jitter), subscribes to the whole set again and reports `.ready`. Liveness: a
/// `PING` every `pingInterval` ms of silence; no byte back within `timeout` ms of it is a dead
/// connection (a Redis gone without a FIN), so a message lost to a dead link is always followed
/// by `.lost` and `.ready`: the caller catches up from the stream then (DESIGN.md, "Scale-out").
///
/// Sharded (`sharded: true`, Redis 7): `SSUBSCRIBE` on one shard's master of a Redis Cluster
/// (`RedisShardedSubscriber` keeps one per master); a channel whose slot that master stops
/// serving is reported as `.slotMoved`.
///
/// Handlers run on the subscriber's thread, one at a time, in the order Redis sent.
public final class RedisSubscriber: Sendable {
    /// What the subscription reports.
    public enum Event: Sendable {
        /// A message published to a subscribed channel: its bytes as sent (binary-safe).
        case message(channel: String, payload: [UInt8])
        /// Redis confirmed a channel subscribed after the connection was ready: messages to it
        /// published from now on will come.
        case subscribed(String)
        /// Connected (first time or again) and every channel of the set subscribed: anything
        /// published from now on comes; what was published while not ready may be missing.
        case ready
        /// The connection is gone or could not be made: messages published meanwhile are lost.
        case lost(RedisError)
        /// Sharded only: the server no longer serves the slot (a `MOVED` answer to
        /// `SSUBSCRIBE`, or its own `sunsubscribe` of a channel still in the set, after a
        /// resharding or a failover); messages published there now go to another master. The
        /// channel stays in the set: the caller moves it.
        case slotMoved(Int)
        /// Sharded only: the server refused the channel's subscription with another error
        /// (`CLUSTERDOWN` for a slot it takes for unserved, `LOADING`, `NOPERM`): the
        /// connection stays, its other subscriptions go on, and the channel stays in the set
        /// without being subscribed (the caller moves it, or takes it out and puts it back to
        /// try again).
        case refused(channel: String, message: String)
    }

    /// Most channels in one `SUBSCRIBE`.
    static let batch = 512

    /// Where the server listens.
    public let endpoint: RedisEndpoint
    /// Connect and write deadline, and how long a `PING` may go unanswered, in milliseconds.
    public let timeout: Int
    /// Silence in milliseconds after which a `PING` checks the connection.
    public let pingInterval: Int
    /// Whether the subscriptions are sharded (`SSUBSCRIBE`, one channel per command: a
    /// cluster refuses channels of several slots in one).
    public let sharded: Bool

    private struct State {
        var wanted: Set<String> = []
        /// Changes not yet sent on the current connection, in order (none kept while there
        /// is no connection: the next one subscribes to `wanted` whole).
        var pending: [(subscribe: Bool, channel: String)] = []
        var connected = false
        /// When the connection last brought a byte (or was made).
        var lastHeard: ContinuousClock.Instant?
        var stopping = false
        var running = false
    }

    private let state = Locked(State())
    /// Called for every event, on the subscriber's thread.
    let handler: @Sendable (Event) -> Void
    /// Wakes the thread for a change of the set or a stop: a pipe's read and write ends
    /// (non-blocking; a full pipe already means a wakeup is pending).
    private let wakeup: Int32
    private let wakeupWriter: Int32
    /// Signalled by the thread as it ends.
    private let finished = DispatchSemaphore(value: 0)

    /// Creates a subscriber; nothing connects before `start()`.
    ///
    /// - Parameters:
    ///   - endpoint: the server.
    ///   - timeout: connect, write and ping deadline in milliseconds (2,000 by default).
    ///   - pingInterval: idle milliseconds before a `PING` (1,000 by default).
    ///   - sharded: `SSUBSCRIBE` instead of `SUBSCRIBE` (a Redis Cluster's master).
    ///   - handler: called on the subscriber's thread for every event.
    public init(endpoint: RedisEndpoint, timeout: Int = 2000, pingInterval: Int = 1000, sharded: Bool = false,
                handler: @escaping @Sendable (Event) -> Void) {
        self.endpoint = endpoint
        self.timeout = max(1, timeout)
        self.pingInterval = max(1, pingInterval)
        self.sharded = sharded
        self.handler = handler
        var ends: [Int32] = [-1, -1]
        _ = pipe(&ends)
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        self.wakeup = ends[0]
        self.wakeupWriter = ends[1]
    }

    deinit {
        close(wakeup)
        close(wakeupWriter)
    }

    /// Starts the thread (once; the thread keeps the subscriber until `stop()`).
    ///
    /// - Returns: false when no thread could be started (`pthread_create` failed) or it was
    ///   started or stopped before.
    @discardableResult
    public func start() -> Bool {
        let starting = state.withLock { state -> Bool in
            guard !state.running, !state.stopping else { return false }
            state.running = true
            return true
        }
        guard starting else { return false }
        let result = startDetachedThread { [self] in
            run()
            finished.signal()
        }
        guard result == 0 else {
            state.withLock { $0.running = false }
            return false
        }
        return true
    }

    /// Adds a channel to the set (nothing when it is in it).
    public func subscribe(_ channel: String) { change(channel, subscribe: true) }

    /// Removes a channel from the set (nothing when it is not in it).
    public func unsubscribe(_ channel: String) { change(channel, subscribe: false) }

    /// The channels subscribed or to be.
    public var channels: Set<String> { state.withLock { $0.wanted } }

    /// Stops the thread and closes the connection; waits for a handler running now to return.
    /// Must not be called from a handler.
    public func stop() {
        let running = state.withLock { state -> Bool in
            defer { state.stopping = true; state.running = false }
            return state.running && !state.stopping
        }
        wake()
        if running { finished.wait() }
    }

    private func change(_ channel: String, subscribe: Bool) {
        let changed = state.withLock { state -> Bool in
            let changed = subscribe ? state.wanted.insert(channel).inserted : state.wanted.remove(channel) != nil
            guard changed, state.connected else { return false }
            state.pending.append((subscribe, channel))
            return true
        }
        if changed { wake() }
    }

    private func wake() {
        var one: UInt8 = 1
        _ = Glibc.write(wakeupWriter, &one, 1)
    }

    // MARK: - The thread

    /// How long the connection has been silent: since Redis last sent a byte (a message, a
    /// confirmation or a `PONG`); `nil` while not connected. A connected subscriber is pinged
    /// after `pingInterval` of silence, so a silence well past it means Redis stopped
    /// answering (frozen by `SIGSTOP`, a fork, a network stall) before `timeout` says so.
    public var silence: Duration? {
        state.withLock { $0.lastHeard }.map { ContinuousClock.now - $0 }
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    private func run() {
        var backoff = 100
        var reportedLoss = false
        while !stopping {
            let (wasReady, failure) = PipeSignal.suppressed { serve() }
            state.withLock { $0.connected = false; $0.pending = []; $0.lastHeard = nil }
            if wasReady {
                // Every outage after a ready connection is reported, and starts from a short wait.
                backoff = 100
                reportedLoss = false
            }
            guard let failure, !stopping else { break }
            if !reportedLoss { handler(.lost(failure)) }
            reportedLoss = true
            // Full jitter: a cluster's nodes do not all come back to Redis at once.
            sleep(milliseconds: Int.random(in: 0...backoff))
            backoff = min(backoff * 2, 2000)
        }
    }

    /// One connection: subscribes to the set, then reads until it breaks (the error) or the
    /// subscriber stops (`nil`); and whether it got to `.ready`.
    private func serve() -> (ready: Bool, failure: RedisError?) {
        var ready = false
        let result = session(ready: &ready)
        if case .failure(let error) = result { return (ready, error) }
        return (ready, nil)
    }

    private func session(ready: inout Bool) -> Result<Void, RedisError> {
        let deadline = timeval(tv_sec: timeout / 1000, tv_usec: (timeout % 1000) * 1000)
        let made: UnsafeMutablePointer<redisContext>? = switch endpoint {
        case .tcp(let host, let port): redisConnectWithTimeout(host, Int32(port), deadline)
        case .unix(let path): redisConnectUnixWithTimeout(path, deadline)
        }
        guard let context = made else { return .failure(.connectFailed(endpoint: endpoint.description, message: "hiredis could not allocate a context")) }
        defer { redisFree(context) }
        guard context.pointee.err == 0, redisSetTimeout(context, deadline) == REDIS_OK else {
            return .failure(.connectFailed(endpoint: endpoint.description, message: Self.message(of: context)))
        }
        if case .tcp = endpoint { _ = redisEnableKeepAlive(context) }

        // Sharded: the (un)subscriptions sent and not yet answered, in order (one channel per
        // command), so that an error reply, which names no channel, is known to be whose, and a
        // `sunsubscribe` answering ours is not taken for the server dropping the slot.
        var awaiting = Awaiting()
        // The whole set, then a PING whose answer says every SUBSCRIBE before it is done.
        let initial = state.withLock { state -> [String] in
            state.pending = []
            state.connected = true
            return Array(state.wanted)
        }
        do throws(RedisError) {
            for start in stride(from: 0, to: initial.count, by: batch) {
                let names = initial[start..<min(start + batch, initial.count)]
                try send([verb(subscribe: true)] + names, on: context)
                if sharded { awaiting.append(contentsOf: names.map { (true, $0) }) }
            }
            try send(["PING", "ready"], on: context)
        } catch {
            return .failure(error)
        }

        var lastHeard = ContinuousClock.now
        state.withLock { $0.lastHeard = lastHeard }
        var pingSent: ContinuousClock.Instant?
        while !stopping {
            var fds = [pollfd(fd: context.pointee.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeup, events: Int16(POLLIN), revents: 0)]
            let waited = poll(&fds, 2, Int32(pingInterval))
            if waited < 0, errno != EINTR { return .failure(lostError("poll failed (errno \(errno))")) }
            if fds[1].revents != 0 {
                drainWakeup()
            }
            // Changes of the set, in order, batched by kind.
            let changes = state.withLock { state -> [(subscribe: Bool, channel: String)] in
                defer { state.pending = [] }
                return state.pending
            }
            do throws(RedisError) {
                var index = 0
                while index < changes.count {
                    let kind = changes[index].subscribe
                    var names: [String] = []
                    while index < changes.count, changes[index].subscribe == kind, names.count < batch {
                        names.append(changes[index].channel)
                        index += 1
                    }
                    try send([verb(subscribe: kind)] + names, on: context)
                    if sharded { awaiting.append(contentsOf: names.map { (kind, $0) }) }
                }
            } catch {
                return .failure(error)
            }
            if fds[0].revents != 0 {
                guard redisBufferRead(context) == REDIS_OK else { return .failure(lostError(Self.message(of: context))) }
                lastHeard = .now
                state.withLock { [lastHeard] in $0.lastHeard = lastHeard }
                pingSent = nil
                while true {
                    var reply: UnsafeMutableRawPointer?
                    guard redisGetReplyFromReader(context, &reply) == REDIS_OK else { return .failure(lostError(Self.message(of: context))) }
                    guard let reply else { break }
                    let value = RedisConnection.value(of: reply.assumingMemoryBound(to: redisReply.self))
                    freeReplyObject(reply)
                    if handle(value, ready: &ready, awaiting: &awaiting) { continue }
                    return .failure(lostError("an unexpected pub/sub reply: \(String(describing: value).prefix(120))"))
                }
            }
            let silence = ContinuousClock.now - lastHeard
            if let pingSent {
                if ContinuousClock.now - pingSent >= .milliseconds(timeout) {
                    return .failure(lostError("no answer to PING within \(timeout) ms"))
                }
            } else if silence >= .milliseconds(pingInterval) {
                do throws(RedisError) { try send(["PING"], on: context) } catch { return .failure(error) }
                pingSent = .now
            }
        }
        return .success(())
    }

    private func send(_ arguments: [String], on context: UnsafeMutablePointer<redisContext>) throws(RedisError) {
        let appended = RedisConnection.withArgv(arguments) { count, pointers, lengths in
            redisAppendCommandArgv(context, count, pointers, lengths)
        }
        guard appended == REDIS_OK else { throw lostError(Self.message(of: context)) }
        var done: Int32 = 0
        while done == 0 {
            guard redisBufferWrite(context, &done) == REDIS_OK else { throw lostError(Self.message(of: context)) }
        }
    }

    private func lostError(_ message: String) -> RedisError {
        .connectionLost(endpoint: endpoint.description, message: message)
    }

    /// Sleeps `milliseconds`, or less when stopped (changes of the set do not cut it short:
    /// the next connection subscribes to the whole set anyway).
    private func sleep(milliseconds: Int) {
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        while !stopping {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return }
            var fds = [pollfd(fd: wakeup, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 1, Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)))
            if fds[0].revents != 0 { drainWakeup() }
        }
    }

    private func drainWakeup() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while Glibc.read(wakeup, &bytes, bytes.count) > 0 {}
    }

    private static func message(of pointer: UnsafeMutablePointer<redisContext>) -> String {
        RedisConnection.message(of: pointer)
    }
}
