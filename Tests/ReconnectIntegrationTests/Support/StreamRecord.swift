import Reconnect

/// A `StreamEvent` in a form tests can compare: the kind, with the error kept aside.
struct StreamRecord: Sendable, CustomStringConvertible {
    enum Kind: Hashable, Sendable {
        case willConnect, opened, ready, toldToDisconnect, disconnected
        case refused(String)
    }

    let kind: Kind
    let error: (any Error)?

    init(_ event: StreamEvent) {
        switch event {
        case .willConnect: (kind, error) = (.willConnect, nil)
        case .opened: (kind, error) = (.opened, nil)
        case .ready: (kind, error) = (.ready, nil)
        case .toldToDisconnect: (kind, error) = (.toldToDisconnect, nil)
        case .disconnected(let error, _): (kind, self.error) = (.disconnected, error)
        case .refused(let reason): (kind, error) = (.refused(reason), nil)
        }
    }

    var description: String { error.map { "\(kind)(\($0))" } ?? "\(kind)" }
}

extension Recorder where Value == StreamRecord {
    /// The kinds recorded so far.
    var kinds: [StreamRecord.Kind] { values.map(\.kind) }

    /// The error of the last `disconnected` recorded.
    var lastDisconnectError: (any Error)? { values.last { $0.kind == .disconnected }?.error }
    /// The error of the first disconnect: the one that ended the session, whatever the retries
    /// that followed reported.
    var firstDisconnectError: (any Error)? { values.first { $0.kind == .disconnected }?.error }

    /// Waits for a record of `kind` after the first `after` records.
    func wait(for kind: StreamRecord.Kind, after: Int = 0, timeout: Duration = .seconds(10)) async -> Bool {
        await wait(after: after, timeout: timeout) { $0.kind == kind }
    }
}

extension Recorder where Value == ReconnectEvent {
    /// How many attempts the reconnector started.
    var attemptsStarted: Int {
        values.filter { if case .attemptStarted = $0 { true } else { false } }.count
    }

    /// Waits for a `succeeded` event after the first `after` events.
    func waitForSuccess(after: Int = 0, timeout: Duration = .seconds(10)) async -> Bool {
        await wait(after: after, timeout: timeout) { if case .succeeded = $0 { true } else { false } }
    }

    /// Waits for any `attemptStarted` after the first `after` events; `false` means none came.
    func waitForAttempt(after: Int = 0, timeout: Duration) async -> Bool {
        await wait(after: after, timeout: timeout) { if case .attemptStarted = $0 { true } else { false } }
    }
}
