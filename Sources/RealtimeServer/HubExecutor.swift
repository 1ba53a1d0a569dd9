import Dispatch

/// Where the hub runs the work it defers: each room lane's jobs (`RoomLane`), a join's next
/// turn after a wait, the outbox past its rounds. Without one (`Configuration.executor` `nil`,
/// the server's case) Dispatch runs them: a serial queue per lane, a timer for a wait. A
/// deterministic simulation runs them on its virtual clock, one at a time, in an order its seed
/// decides (`RealtimeSimulation`).
package protocol HubExecutor: Sendable {
    /// Runs `job` once every job submitted to `queue` before it has run (a serial queue, named
    /// by its label), without waiting for it.
    func async(on queue: String, _ job: @escaping @Sendable () -> Void)
    /// Runs `job` once `delay` has passed on the hub's clock, without waiting for it.
    func after(_ delay: Duration, _ job: @escaping @Sendable () -> Void)
}
