/// A kind of route that makes route lookups fail instead of forwarding, for
/// ``NetworkNamespace/addRoute(_:_:)``.
///
/// Each kind is the `ip route` type of the same name (`RTN_UNREACHABLE`, `RTN_PROHIBIT`,
/// `RTN_BLACKHOLE` in `<linux/rtnetlink.h>`); the errno a lookup (`RTM_GETROUTE`, `ip route get`)
/// and a connect through it fail with is the kernel's.
public enum RouteKind: String, Sendable, CaseIterable {
    /// The destination is unreachable: lookups fail with `EHOSTUNREACH`.
    case unreachable
    /// The destination is administratively prohibited: lookups fail with `EACCES`.
    case prohibit
    /// Packets are silently dropped: lookups fail with `EINVAL`.
    case blackhole
}
