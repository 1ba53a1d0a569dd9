import Dispatch
import SystemSupport

/// Records values delivered on any thread and lets a test wait, without blocking a thread,
/// until the values recorded so far satisfy a condition or a deadline passes.
final class Recorder<Value: Sendable>: Sendable {
    private struct Waiter {
        let condition: @Sendable ([Value]) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var values: [Value] = []
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Locked(State())

    /// Every value recorded so far, in order.
    var values: [Value] { state.withLock { $0.values } }

    /// Records a value and wakes the waiters whose condition now holds.
    func record(_ value: Value) {
        let satisfied = state.withLock { state -> [Waiter] in
            state.values.append(value)
            let values = state.values
            let ready = state.waiters.filter { $0.value.condition(values) }
            for id in ready.keys { state.waiters[id] = nil }
            return Array(ready.values)
        }
        for waiter in satisfied { waiter.continuation.resume(returning: true) }
    }

    /// Waits until `condition` holds for the values recorded (at once if it already does).
    ///
    /// - Parameters:
    ///   - timeout: how long to wait for a real event before giving up.
    ///   - condition: tested on every value recorded so far.
    /// - Returns: whether the condition held before the deadline.
    func wait(timeout: Duration = .seconds(10), until condition: @escaping @Sendable ([Value]) -> Bool) async -> Bool {
        await withCheckedContinuation { continuation in
            let id = state.withLock { state -> UInt64? in
                if condition(state.values) { return nil }
                state.nextWaiter += 1
                state.waiters[state.nextWaiter] = Waiter(condition: condition, continuation: continuation)
                return state.nextWaiter
            }
            guard let id else {
                continuation.resume(returning: true)
                return
            }
            let nanoseconds = timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [self] in
                state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume(returning: false)
            }
        }
    }

    /// Waits until a value recorded after the first `after` values satisfies `match`.
    ///
    /// - Parameters:
    ///   - after: how many values to skip (those recorded before an action).
    ///   - timeout: how long to wait.
    ///   - match: the value looked for.
    /// - Returns: whether such a value arrived in time.
    func wait(after: Int = 0, timeout: Duration = .seconds(10), for match: @escaping @Sendable (Value) -> Bool) async -> Bool {
        await wait(timeout: timeout) { $0.dropFirst(after).contains(where: match) }
    }
}
