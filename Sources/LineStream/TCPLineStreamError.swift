import Dispatch

/// Why a `TCPLineStream` disconnected without being told to.
public enum TCPLineStreamError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The socket layer failed or the peer closed (`errno` kept inside).
    case connection(TCPConnectionError)
    /// `abortConnectAttempt()` gave up a connect in progress.
    case aborted
    /// `verifyConnection()` sent `PING` and no `PONG` came within `timeout`.
    case noPong(timeout: Duration)
    /// The peer sent more than `limit` bytes without a newline.
    case lineTooLong(limit: Int)

    /// The `errno` behind the failure, when there is one (`ECONNREFUSED`, `ECONNRESET`, …).
    public var errno: Int32? {
        if case .connection(let error) = self { return error.errno }
        return nil
    }

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .connection(let error): return error.description
        case .aborted: return "connect attempt aborted"
        case .noPong(let timeout): return "no PONG within \(timeout.milliseconds) ms"
        case .lineTooLong(let limit): return "line longer than \(limit) bytes"
        }
    }
}
