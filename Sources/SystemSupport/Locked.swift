#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value protected by a POSIX mutex: the package's lock for shared mutable state.
///
/// Used in place of `Synchronization.Mutex` because ThreadSanitizer on Linux does not see
/// `Mutex`'s futex-based locking: with Swift 6.3.1, two threads updating a dictionary inside
/// `Mutex.withLock` are reported as a race, which would make `swift test --sanitize=thread`
/// useless. `pthread_mutex_lock` is intercepted by ThreadSanitizer, so real races still show.
/// The API mirrors `Mutex.withLock`.
package final class Locked<Value>: @unchecked Sendable {
    // Safety: `value` is only read or written between pthread_mutex_lock and _unlock.
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// Creates a lock holding `value`.
    ///
    /// - Parameter value: the initial state.
    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let result = pthread_mutex_init(mutex, nil)
        precondition(result == 0, "pthread_mutex_init failed: \(result)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    ///
    /// - Parameter body: reads or changes the value; must not call `withLock` on the same lock
    ///   (the mutex is not recursive).
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws.
    @inlinable
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body(&valueStorage)
    }

    @usableFromInline var valueStorage: Value {
        _read { yield value }
        _modify { yield &value }
    }

    @usableFromInline func lock() { pthread_mutex_lock(mutex) }
    @usableFromInline func unlock() { pthread_mutex_unlock(mutex) }
}
