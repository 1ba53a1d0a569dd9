import CWebSockets
import Dispatch
import Glibc
import SystemSupport
import Synchronization

/// The one thread that runs a libwebsockets context, and the lock-protected inbox through
/// which every other thread reaches it.
///
/// libwebsockets is not thread-safe except for `lws_cancel_service`: other threads append a
/// command under the lock and call `lws_cancel_service`, which makes `lws_service` deliver
/// `LWS_CALLBACK_EVENT_WAIT_CANCELLED` on this thread, where the commands run. The cancel is
/// issued while holding the lock and only in the `running` phase, and the thread leaves that
/// phase under the same lock before `lws_context_destroy`: so no cancel ever reaches a
/// destroyed context.
final class ServiceThread: Sendable {
    private enum Phase {
        case starting
        case running(OpaquePointer)
        case stopping
        case stopped
        case failed(WebSocketError)
    }

    private struct State {
        var phase = Phase.starting
        var commands: [ServiceCommand] = []
        /// Client connections whose host name is being looked up (`HostResolver`): not yet in
        /// a command, so the shutdown must answer them itself.
        var lookups: [UInt: WebSocketConnection] = [:]
        var nextID: UInt = 0
        var serviceThread: pthread_t?
    }

    let options: WebSocketContext.Options
    /// Bytes queued for writing on this thread's connections, summed
    /// (`WebSocketConnection.bufferedAmount`; `WebSocketContext.bufferedAmount`).
    let bufferedBytes = Atomic<Int>(0)
    private let state = Locked(State())
    /// Work to run when the current service pass ends (`afterServicePass`); appended and run
    /// on the service thread only, but behind a lock of its own so the type stays `Sendable`.
    private let passEnd = Locked<[@Sendable () -> Void]>([])
    private let started = DispatchSemaphore(value: 0)
    private let finished = DispatchGroup()

    /// Starts the thread and waits until it created the lws context.
    ///
    /// - Throws: `WebSocketError.contextCreationFailed` when the thread cannot start or
    ///   `lws_create_context` fails.
    init(options: WebSocketContext.Options) throws(WebSocketError) {
        self.options = options
        finished.enter()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        // Detached: `shutdown` waits on `finished`, and a shutdown from a handler running on
        // this very thread could not join it.
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let box = Unmanaged.passRetained(self).toOpaque()
        let result = pthread_create(&thread, &attributes, { raw in
            let owner = Unmanaged<ServiceThread>.fromOpaque(raw!).takeRetainedValue()
            owner.main()
            return nil
        }, box)
        if result != 0 {
            Unmanaged<ServiceThread>.fromOpaque(box).release()
            throw .contextCreationFailed(errno: result)
        }
        started.wait()
        let failure: WebSocketError? = state.withLock { state in
            if case .failed(let error) = state.phase { return error }
            return nil
        }
        if let failure {
            finished.wait()
            throw failure
        }
    }

    private func main() {
        ServiceLoop.configureLogging
        let loop = ServiceLoop(thread: self)
        let context: OpaquePointer
        do {
            context = try loop.start()
        } catch {
            state.withLock { $0.phase = .failed(error) }
            started.signal()
            finished.leave()
            return
        }
        state.withLock { state in
            state.phase = .running(context)
            state.serviceThread = pthread_self()
        }
        started.signal()
        loop.run()
        loop.finish()
        state.withLock { $0.serviceThread = nil }
        // Work queued during the last pass or by `finish`'s callbacks; nothing can be queued
        // after this, since the thread is no longer current.
        runPassEnd()
        finished.leave()
    }

    /// Queues `work` for the end of the current pass if the caller is the service thread.
    func afterServicePass(_ work: @escaping @Sendable () -> Void) -> Bool {
        guard isCurrent else { return false }
        passEnd.withLock { $0.append(work) }
        return true
    }

    /// Runs the work queued for the end of the pass, and whatever that work queues in turn.
    func runPassEnd() {
        while true {
            let work = passEnd.withLock { work -> [@Sendable () -> Void] in
                defer { work.removeAll() }
                return work
            }
            if work.isEmpty { return }
            for item in work { item() }
        }
    }

    /// A new identifier for a connection, exchange or server (never 0).
    func makeID() -> UInt {
        state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
    }

    /// Whether the caller runs on the service thread (inside a handler).
    var isCurrent: Bool {
        state.withLock { state in
            guard let thread = state.serviceThread else { return false }
            return pthread_equal(thread, pthread_self()) != 0
        }
    }

    /// Records a connection whose host is being looked up, while the context runs.
    ///
    /// - Returns: false when the context no longer runs commands.
    func beginLookup(_ connection: WebSocketConnection) -> Bool {
        state.withLock { state in
            guard case .running = state.phase else { return false }
            state.lookups[connection.id] = connection
            return true
        }
    }

    /// Ends a lookup begun with `beginLookup`, queueing `command` (the connect) in the same
    /// step, so a shutdown in between cannot miss the connection.
    ///
    /// - Returns: false when the shutdown already took the connection (and answered it):
    ///   the lookup's result is then dropped.
    func endLookup(_ id: UInt, then command: ServiceCommand?) -> Bool {
        state.withLock { state in
            guard state.lookups.removeValue(forKey: id) != nil else { return false }
            guard let command else { return true }
            // A lookup is only kept while the phase is running or stopping (`takeLeftovers`
            // takes them as it stops), and both take the command: the shutdown refuses it.
            _ = Self.append(command, to: &state)
            return true
        }
    }

    /// Queues a command and wakes the service thread.
    ///
    /// - Returns: false when the context no longer runs commands; the caller then reports
    ///   `contextShutDown` itself.
    @discardableResult
    func enqueue(_ command: ServiceCommand) -> Bool {
        state.withLock { state in Self.append(command, to: &state) }
    }

    private static func append(_ command: ServiceCommand, to state: inout State) -> Bool {
        switch state.phase {
        case .running(let context):
            let wasEmpty = state.commands.isEmpty
            state.commands.append(command)
            // A non-empty inbox already has a wake-up on its way.
            if wasEmpty { lws_cancel_service(context) }
            return true
        case .stopping:
            // Taken by `takeLeftovers` and answered with `contextShutDown`.
            state.commands.append(command)
            return true
        case .starting, .stopped, .failed:
            return false
        }
    }

    /// Takes every queued command; on the service thread.
    ///
    /// - Returns: the commands, and whether a stop was requested.
    func takeCommands() -> (commands: [ServiceCommand], stop: Bool) {
        state.withLock { state in
            let commands = state.commands
            state.commands.removeAll()
            if case .stopping = state.phase { return (commands, true) }
            return (commands, false)
        }
    }

    /// Leaves the phase in which `lws_cancel_service` may be called, and takes the commands
    /// that will never run; on the service thread, before `lws_context_destroy`.
    func takeLeftovers() -> (commands: [ServiceCommand], lookups: [WebSocketConnection]) {
        state.withLock { state in
            state.phase = .stopped
            let commands = state.commands
            let lookups = state.lookups.sorted { $0.key < $1.key }.map(\.value)
            state.commands.removeAll()
            state.lookups.removeAll()
            return (commands, lookups)
        }
    }

    /// Asks the service thread to stop and, unless called from it, waits until the context
    /// is destroyed and every connection got its last event.
    func shutdown() {
        state.withLock { state in
            if case .running(let context) = state.phase {
                state.phase = .stopping
                lws_cancel_service(context)
            }
        }
        if isCurrent { return }
        finished.wait()
    }
}
