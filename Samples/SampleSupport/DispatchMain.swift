import Dispatch
import SystemSupport

/// What the samples keep for the rest of the process.
private let keptAlive = Locked<[Any]>([])

/// Keeps `objects` (signal sources, a reconnector, observation tokens) for the rest of the
/// process, then hands the main thread to Dispatch for good.
///
/// `withExtendedLifetime(objects) { dispatchMain() }` does not do this: `dispatchMain()` never
/// returns, so an optimized build ends the objects' lifetime before it and frees them (a
/// release build's signal sources were gone, and SIGTERM did nothing). A global holds them
/// instead, which also keeps them reachable for LeakSanitizer once `dispatchMain()` has ended
/// the main thread with `pthread_exit`.
///
/// - Parameter objects: anything that must live as long as the process.
public func dispatchMain(keeping objects: Any...) -> Never {
    keptAlive.withLock { $0.append(contentsOf: objects) }
    dispatchMain()
}
