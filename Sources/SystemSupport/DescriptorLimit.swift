#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's limit on open file descriptors (`RLIMIT_NOFILE`, getrlimit(2)).
package enum DescriptorLimit {
    /// Raises the soft limit to the hard one where the kernel allows (an unprivileged process
    /// may; RLIM_INFINITY is capped at 1,048,576) and returns the soft limit in force.
    @discardableResult
    package static func raiseSoftLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        let hard = limit.rlim_max == rlim_t.max ? rlim_t(1_048_576) : limit.rlim_max   // RLIM_INFINITY
        if limit.rlim_cur < hard {
            var raised = limit
            raised.rlim_cur = hard
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(min(limit.rlim_cur, rlim_t(Int.max)))
    }
}
