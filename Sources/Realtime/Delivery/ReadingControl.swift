import RealtimeProtocol
import SystemSupport

/// Whether the client reads its socket: paused while the delivery backlog is over its high
/// watermark (`DeliveryOutbox`), for the current socket and any socket opened meanwhile.
final class ReadingControl: Sendable {
    private struct State {
        var socket: (any RealtimeSocket)?
        var paused = false
        var sequence: UInt64 = 0
    }

    private let state = Locked(State())

    /// The backlog crossed a watermark. Transitions are numbered by the outbox, under its lock:
    /// one reported late (a pause decided before a resume but told after it) is ignored, so a
    /// socket is never left paused by a race. The socket is told under this lock, in order.
    func setPaused(_ paused: Bool, sequence: UInt64) {
        state.withLock { state in
            guard sequence > state.sequence else { return }
            state.sequence = sequence
            state.paused = paused
            state.socket?.setReceiving(!paused)
        }
    }

    /// A new socket: it starts paused when the backlog is still high.
    func attach(_ socket: any RealtimeSocket) {
        state.withLock { state in
            state.socket = socket
            if state.paused { socket.setReceiving(false) }
        }
    }
}
