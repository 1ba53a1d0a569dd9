import Glibc

/// Errors of the WebSocket layer, keeping what libwebsockets and the kernel said.
public enum WebSocketError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The URL is not `ws://host[:port][/path]` or `wss://…`: the string given and what is wrong.
    case invalidURL(String, reason: String)
    /// A file named in the options cannot be read: its path and the `errno` of `access(2)`.
    case fileUnreadable(path: String, errno: Int32)
    /// `lws_create_context` returned NULL (or the service thread could not start): the errno
    /// seen right after (0 when none was set).
    case contextCreationFailed(errno: Int32)
    /// `lws_create_vhost` returned NULL for a listener: address, port and `errno` right after
    /// (`EADDRINUSE` when the port is taken). A TLS certificate or key that does not load, and
    /// an address that is not on this host, fail here too (lws keeps no errno for those).
    case listenFailed(host: String, port: Int, errno: Int32)
    /// The connection attempt failed before the handshake: the URL, libwebsockets' message and
    /// `errno` when known (0 otherwise).
    ///
    /// libwebsockets reports most failures through `LWS_CALLBACK_CLIENT_CONNECTION_ERROR` with a
    /// message such as "Unable to connect" (it keeps no errno). A connect(2) that fails at once
    /// (`ENETUNREACH`) makes `lws_client_connect_via_info` return NULL with no callback at all;
    /// that path is reported with the message "the connection could not be started" and the
    /// errno seen then. A name that does not resolve is `hostNotFound` (names are resolved
    /// before lws sees them). When the host resolved to several addresses, the next is tried
    /// after any failure before an HTTP answer (refused, unreachable, timed out, TLS), each
    /// within the context's timeout, and this is the last one's failure. Also the failure
    /// when too many name lookups are already waiting (`HostResolver.maxPending`).
    case connectFailed(url: String, message: String, errno: Int32)
    /// The URL's host name did not resolve (`getaddrinfo(3)`): the URL, the name, and why
    /// (`gai_strerror`'s text, such as "Name or service not known").
    case hostNotFound(url: String, host: String, reason: String)
    /// The server answered the upgrade request with an HTTP status other than 101 (RFC 6455
    /// §4.1): the URL, that status, and libwebsockets' message.
    case handshakeFailed(url: String, status: Int, message: String)
    /// `close` or `abort` was called before the opening handshake completed.
    case cancelled
    /// The connection is closing or closed: nothing more can be sent on it.
    case connectionClosed
    /// The code may not be sent in a close frame (RFC 6455 §7.4, see
    /// `WebSocketCloseCode.isSendable`).
    case invalidCloseCode(WebSocketCloseCode)
    /// A control frame's payload would exceed 125 bytes (RFC 6455 §5.5): a ping payload over
    /// 125 bytes, or a close reason over 123 bytes of UTF-8. The payload length, in bytes.
    case controlPayloadTooLong(Int)
    /// The context was shut down (or is shutting down) before the operation could run.
    case contextShutDown
    /// A message would take the bytes queued for a peer that is not reading past
    /// `WebSocketContext.Options.maxBufferedAmount`: the connection was dropped.
    case sendBufferFull(limit: Int)

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .invalidURL(let url, let reason): return "invalid WebSocket URL \"\(url)\": \(reason)"
        case .fileUnreadable(let path, let code): return "cannot read \(path): \(Self.text(code))"
        case .contextCreationFailed(let code): return "lws_create_context failed (\(Self.text(code)))"
        case .listenFailed(let host, let port, let code):
            return "cannot listen on \(host):\(port) (\(Self.text(code)))"
        case .connectFailed(let url, let message, let code):
            return code == 0 ? "connect to \(url) failed: \(message)" : "connect to \(url) failed: \(message) (\(Self.text(code)))"
        case .hostNotFound(let url, let host, let reason): return "connect to \(url) failed: cannot resolve \(host): \(reason)"
        case .handshakeFailed(let url, let status, let message):
            return "WebSocket handshake with \(url) failed: HTTP \(status) (\(message))"
        case .cancelled: return "the connection attempt was cancelled"
        case .connectionClosed: return "the connection is closed"
        case .invalidCloseCode(let code): return "close code \(code) may not be sent"
        case .controlPayloadTooLong(let length): return "control frame payload of \(length) bytes is over 125"
        case .contextShutDown: return "the WebSocket context is shut down"
        case .sendBufferFull(let limit): return "send buffer full: over \(limit) bytes queued for a peer that is not reading"
        }
    }

    private static func text(_ code: Int32) -> String {
        code == 0 ? "errno 0" : "\(String(cString: strerror(code))), errno \(code)"
    }
}
