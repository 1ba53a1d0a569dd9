import CHiredis
import Glibc
import SystemSupport

/// Where a Redis server listens: `redis://host:port` (port 6379 when left out), or a unix
/// socket as `unix:///path/redis.sock` or a bare absolute path.
public enum RedisEndpoint: Hashable, Sendable, CustomStringConvertible {
    /// A TCP address.
    case tcp(host: String, port: Int)
    /// A unix socket's path.
    case unix(path: String)

    /// Parses a Redis URL or socket path.
    ///
    /// - Throws: `RedisError.invalidEndpoint` for anything else (other schemes, a port outside
    ///   1…65535, a user or database part, which this client does not speak).
    public init(parsing text: String) throws(RedisError) {
        if text.hasPrefix("/") {
            self = .unix(path: text)
        } else if text.hasPrefix("unix://"), text.count > "unix://".count {
            self = .unix(path: String(text.dropFirst("unix://".count)))
        } else if text.hasPrefix("redis://") {
            var rest = Substring(text.dropFirst("redis://".count))
            if rest.hasSuffix("/") { rest = rest.dropLast() }
            guard !rest.isEmpty, !rest.contains("@"), !rest.contains("/") else { throw .invalidEndpoint(text) }
            var host = rest
            var port = 6379
            if rest.hasPrefix("[") {
                // An IPv6 literal, RFC 3986: [addr] or [addr]:port.
                guard let close = rest.firstIndex(of: "]") else { throw .invalidEndpoint(text) }
                host = rest[rest.index(after: rest.startIndex)..<close]
                let after = rest[rest.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":"), let value = Int(after.dropFirst()) else { throw .invalidEndpoint(text) }
                    port = value
                }
            } else if let colon = rest.lastIndex(of: ":") {
                guard let value = Int(rest[rest.index(after: colon)...]) else { throw .invalidEndpoint(text) }
                host = rest[..<colon]
                port = value
            }
            guard !host.isEmpty, (1...65535).contains(port) else { throw .invalidEndpoint(text) }
            self = .tcp(host: String(host), port: port)
        } else {
            throw .invalidEndpoint(text)
        }
    }

    /// `redis://host:port` or the socket path.
    public var description: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "redis://[\(host)]:\(port)" : "redis://\(host):\(port)"
        case .unix(let path): path
        }
    }
}

/// A reply from Redis (RESP2, the protocol hiredis 0.14 speaks).
public indirect enum RedisValue: Hashable, Sendable {
    /// A bulk string (binary-safe; decoded as UTF-8 by `string`).
    case bulk([UInt8])
    /// A status reply such as `OK`.
    case status(String)
    /// An integer reply.
    case integer(Int64)
    /// An array reply.
    case array([RedisValue])
    /// A nil bulk or nil array.
    case null
    /// An error reply (`ERR …`, `NOSCRIPT …`, `OOM …`): the server refused this command, and
    /// the connection is still usable.
    case error(String)

    /// The value as text: a bulk decoded as UTF-8 (invalid bytes repaired), a status, an
    /// integer's digits; nil for the rest.
    public var string: String? {
        switch self {
        case .bulk(let bytes): String(decoding: bytes, as: UTF8.self)
        case .status(let text): text
        case .integer(let value): String(value)
        default: nil
        }
    }

    /// The value as an integer: an integer reply, or a bulk or status of decimal digits.
    public var integer: Int64? {
        if case .integer(let value) = self { return value }
        return string.flatMap { Int64($0) }
    }

    /// The elements of an array reply; nil for anything else.
    public var array: [RedisValue]? {
        if case .array(let values) = self { return values }
        return nil
    }
}

/// Why a Redis command did not get an answer.
public enum RedisError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Not a Redis URL or socket path.
    case invalidEndpoint(String)
    /// Connecting failed (refused, no such socket, timed out): hiredis' message.
    case connectFailed(endpoint: String, message: String)
    /// The connection broke during the command (I/O error, timeout, end of file, protocol
    /// error): the command may or may not have run. The next command reconnects.
    case connectionLost(endpoint: String, message: String)
    /// A command with no arguments, or more than `RedisConnection.maxArguments`.
    case invalidCommand(String)
    /// A Redis Cluster's slot map could not be read from any node, or does not cover the
    /// slot, or redirections did not end (`RedisClusterConnection`).
    case clusterMap(String)

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .invalidEndpoint(let text): "not a Redis endpoint (redis://host:port or a unix socket path): \(text)"
        case .connectFailed(let endpoint, let message): "cannot connect to Redis at \(endpoint): \(message)"
        case .connectionLost(let endpoint, let message): "the connection to Redis at \(endpoint) broke: \(message)"
        case .invalidCommand(let why): "invalid Redis command: \(why)"
        case .clusterMap(let why): "Redis Cluster: \(why)"
        }
    }
}

/// One blocking connection to Redis through hiredis, safe to share between threads (commands
/// run one at a time under a lock). A broken connection is dropped and the next command
/// connects again. A command whose write finds the kept connection already dead (EPIPE: the
/// server restarted since, and nothing of the command reached it) is sent once more on a new
/// connection; every other failure is a typed error, and the caller decides about retries (the
/// command may have run).
///
/// Whether the server answers is known without asking (`isAnswering`): false while a command
/// has waited `slowAnswer` or more, and from a command or connect that ran into `timeout` (a
/// server frozen, stopped, overloaded) until one is answered again. Work that can be put off
/// (listing a room for its app's bound) is then not sent to wait there.
public final class RedisConnection: Sendable {
    /// The most arguments one command may have.
    public static let maxArguments = 1 << 16

    /// Where the server listens.
    public let endpoint: RedisEndpoint
    /// The deadline of a connect, and of each command's round trip, in milliseconds.
    public let timeout: Int

    private struct Context: @unchecked Sendable {
        // Only used under `context`'s lock.
        var pointer: UnsafeMutablePointer<redisContext>?
    }

    private let context = Locked(Context(pointer: nil))
    /// When the command in flight was sent, and whether the last one ran into `timeout`.
    private let answering = Locked<(inFlightSince: ContinuousClock.Instant?, timedOut: Bool)>((nil, false))

    /// How long a command may wait for its answer before the server is taken for not
    /// answering (`isAnswering`): 100 ms, a hundred times a Redis round trip on a LAN.
    public static let slowAnswer: Duration = .milliseconds(100)
    /// Scripts loaded, by source: their SHA1s.
    private let scripts = Locked<[String: String]>([:])

    /// Creates a connection; nothing is opened until the first command.
    ///
    /// - Parameters:
    ///   - endpoint: the server.
    ///   - timeout: connect and command deadline in milliseconds (2,000 by default, at least 1).
    public init(endpoint: RedisEndpoint, timeout: Int = 2000) {
        self.endpoint = endpoint
        self.timeout = max(1, timeout)
    }

    deinit {
        context.withLock { context in
            if let pointer = context.pointer { redisFree(pointer) }
            context.pointer = nil
        }
    }

    /// Runs one command, connecting first if needed.
    ///
    /// - Parameter arguments: the command and its arguments, each sent as bytes (binary-safe).
    /// - Returns: the reply; a Redis error reply is `.error`, not a throw.
    /// - Throws: `RedisError.connectFailed` when no connection can be made,
    ///   `.connectionLost` when it broke during the command, `.invalidCommand` for an empty or
    ///   oversized argument list.
    @discardableResult
    public func command(_ arguments: [String]) throws(RedisError) -> RedisValue {
        try pipeline([arguments])[0]
    }

    /// Runs one command with the given arguments (`command(["GET", key])` spelled as
    /// `command("GET", key)`).
    ///
    /// - Throws: as `command(_:)`.
    @discardableResult
    public func command(_ arguments: String...) throws(RedisError) -> RedisValue {
        try command(arguments)
    }

    /// Runs several commands in one round trip (pipelining): all are written, then every reply
    /// read, in order.
    ///
    /// - Parameter commands: at most `maxPipeline` commands, each as for `command(_:)`.
    /// - Returns: one reply per command, in order; Redis error replies are `.error`.
    /// - Throws: as `command(_:)`; after a lost connection none of the replies is known (some
    ///   commands may have run).
    public func pipeline(_ commands: [[String]]) throws(RedisError) -> [RedisValue] {
        guard commands.count <= Self.maxPipeline else { throw .invalidCommand("\(commands.count) commands in one pipeline") }
        for arguments in commands where arguments.isEmpty || arguments.count > Self.maxArguments {
            throw .invalidCommand("\(arguments.count) arguments")
        }
        guard !commands.isEmpty else { return [] }
        return try context.withLock { context throws(RedisError) -> [RedisValue] in
            // Marked under the connection's lock: the command in flight is this one.
            let started = ContinuousClock.now
            answering.withLock { $0.inFlightSince = started }
            do throws(RedisError) {
                let replies = try roundTrip(commands, on: &context)
                answering.withLock { $0 = (nil, false) }
                return replies
            } catch {
                // A failure that took the whole deadline (hiredis 0.14 tells a timeout only by
                // its errno, which later calls may reset): the server did not answer.
                let timedOut = ContinuousClock.now - started >= .milliseconds(timeout) * 0.9
                answering.withLock { $0 = (nil, timedOut) }
                throw error
            }
        }
    }

    /// Whether the server is taken to answer, known without asking: false while a command has
    /// waited `slowAnswer` or more, or since one ran into `timeout` until one is answered.
    public var isAnswering: Bool {
        let now = ContinuousClock.now
        return answering.withLock { state in
            !state.timedOut && (state.inFlightSince.map { now - $0 < Self.slowAnswer } ?? true)
        }
    }

    /// Sends `commands` and reads their replies, under the connection's lock.
    private func roundTrip(_ commands: [[String]], on context: inout Context) throws(RedisError) -> [RedisValue] {
        // As for `command`: a kept connection found dead by the first write (EPIPE) got
        // nothing, so the pipeline is sent once more on a new one.
        for attempt in 0..<2 {
            let reused = context.pointer != nil
            let pointer = try connected(&context)
            // The errno of a failure, and whether it came from the first read (only that
            // one writes the whole output buffer: later failures are not "nothing was sent").
            let (replies, failure, first): ([RedisValue]?, Int32, Bool) = PipeSignal.suppressed {
                for arguments in commands {
                    let appended = Self.withArgv(arguments) { count, pointers, lengths in
                        redisAppendCommandArgv(pointer, count, pointers, lengths)
                    }
                    guard appended == REDIS_OK else { return (nil, errno, true) }
                }
                var values: [RedisValue] = []
                values.reserveCapacity(commands.count)
                for index in commands.indices {
                    var reply: UnsafeMutableRawPointer?
                    guard redisGetReply(pointer, &reply) == REDIS_OK, let reply else { return (nil, errno, index == 0) }
                    values.append(Self.value(of: reply.assumingMemoryBound(to: redisReply.self)))
                    freeReplyObject(reply)
                }
                return (values, 0, false)
            }
            if let replies { return replies }
            let message = Self.message(of: pointer)
            redisFree(pointer)
            context.pointer = nil
            guard attempt == 0, reused, first, failure == EPIPE else {
                throw .connectionLost(endpoint: endpoint.description, message: message)
            }
        }
        throw .connectionLost(endpoint: endpoint.description, message: "unreachable")
    }

    /// The most commands one `pipeline` call may carry.
    public static let maxPipeline = 4096

    /// Runs a Lua script by its SHA1 (`EVALSHA`), loading it first (`SCRIPT LOAD`, once per
    /// connection object) and again when Redis lost its script cache (a restart, `SCRIPT FLUSH`).
    ///
    /// - Parameters:
    ///   - source: the script.
    ///   - keys: its `KEYS`.
    ///   - arguments: its `ARGV`.
    /// - Returns: the script's reply; a Redis error (`OOM`, a script error) is `.error`.
    /// - Throws: as `command(_:)`.
    public func evaluate(_ source: String, keys: [String], arguments: [String]) throws(RedisError) -> RedisValue {
        try evaluate(source, calls: [(keys, arguments)])[0]
    }

    /// Runs a Lua script once per call in one round trip (pipelined `EVALSHA`s), loading it as
    /// `evaluate` does.
    ///
    /// - Parameters:
    ///   - source: the script.
    ///   - calls: each call's `KEYS` and `ARGV` (at most `maxPipeline`).
    /// - Returns: one reply per call, in order.
    /// - Throws: as `pipeline(_:)`.
    public func evaluate(_ source: String, calls: [(keys: [String], arguments: [String])]) throws(RedisError) -> [RedisValue] {
        for attempt in 0..<2 {
            let sha = try scriptSHA(source, reload: attempt > 0)
            let replies = try pipeline(calls.map { ["EVALSHA", sha, String($0.keys.count)] + $0.keys + $0.arguments })
            let forgotten = replies.contains { if case .error(let message) = $0 { message.hasPrefix("NOSCRIPT") } else { false } }
            if !forgotten || attempt == 1 { return replies }
        }
        return []
    }

    private func scriptSHA(_ source: String, reload: Bool) throws(RedisError) -> String {
        if !reload, let sha = scripts.withLock({ $0[source] }) { return sha }
        let reply = try command("SCRIPT", "LOAD", source)
        guard case .bulk = reply, let sha = reply.string else { throw .invalidCommand("SCRIPT LOAD answered \(String(describing: reply).prefix(200))") }
        scripts.withLock { $0[source] = sha }
        return sha
    }

    /// Drops the connection; the next command connects again.
    public func disconnect() {
        context.withLock { context in
            if let pointer = context.pointer { redisFree(pointer) }
            context.pointer = nil
        }
    }

    private func connected(_ context: inout Context) throws(RedisError) -> UnsafeMutablePointer<redisContext> {
        if let pointer = context.pointer { return pointer }
        let deadline = timeval(tv_sec: timeout / 1000, tv_usec: (timeout % 1000) * 1000)
        let made: UnsafeMutablePointer<redisContext>? = switch endpoint {
        case .tcp(let host, let port): redisConnectWithTimeout(host, Int32(port), deadline)
        case .unix(let path): redisConnectUnixWithTimeout(path, deadline)
        }
        guard let made else { throw .connectFailed(endpoint: endpoint.description, message: "hiredis could not allocate a context") }
        guard made.pointee.err == 0, redisSetTimeout(made, deadline) == REDIS_OK else {
            let message = Self.message(of: made)
            redisFree(made)
            throw .connectFailed(endpoint: endpoint.description, message: message)
        }
        if case .tcp = endpoint { _ = redisEnableKeepAlive(made) }
        context.pointer = made
        return made
    }

    /// Calls `body` with hiredis's argv form of `arguments` (count, pointers, lengths), valid
    /// only during the call: every argument's bytes in one buffer (a trailing 0 keeps it
    /// non-empty); hiredis copies them into its output buffer before returning.
    static func withArgv<Result>(_ arguments: [String], _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> Result) -> Result {
        var bytes: [UInt8] = []
        var offsets: [Int] = []
        var lengths: [Int] = []
        offsets.reserveCapacity(arguments.count)
        lengths.reserveCapacity(arguments.count)
        for argument in arguments {
            offsets.append(bytes.count)
            bytes.append(contentsOf: argument.utf8)
            lengths.append(bytes.count - offsets[offsets.count - 1])
        }
        bytes.append(0)
        return bytes.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!)
            var pointers: [UnsafePointer<CChar>?] = offsets.map { (base + $0).assumingMemoryBound(to: CChar.self) }
            return body(Int32(arguments.count), &pointers, lengths)
        }
    }

    static func message(of pointer: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: pointer.pointee.errstr) { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            let end = bytes.firstIndex(of: 0) ?? bytes.endIndex
            let text = String(decoding: bytes[..<end], as: UTF8.self)
            return text.isEmpty ? "error \(pointer.pointee.err)" : text
        }
    }

    static func value(of reply: UnsafeMutablePointer<redisReply>) -> RedisValue {
        let node = reply.pointee
        func text() -> String {
            guard let str = node.str else { return "" }
            return String(decoding: UnsafeRawBufferPointer(start: str, count: node.len).bindMemory(to: UInt8.self), as: UTF8.self)
        }
        switch node.type {
        case REDIS_REPLY_STRING:
            guard let str = node.str else { return .bulk([]) }
            return .bulk(Array(UnsafeRawBufferPointer(start: str, count: node.len)))
        case REDIS_REPLY_STATUS: return .status(text())
        case REDIS_REPLY_ERROR: return .error(text())
        case REDIS_REPLY_INTEGER: return .integer(node.integer)
        case REDIS_REPLY_NIL: return .null
        case REDIS_REPLY_ARRAY:
            guard let elements = node.element else { return .array([]) }
            return .array((0..<node.elements).map { index in
                guard let element = elements[index] else { return .null }
                return value(of: element)
            })
        default:
            return .error("unknown reply type \(node.type)")
        }
    }
}
