import SystemSupport
import Foundation
import Testing

@testable import NetworkLab

@Suite("NetworkNamespace", .enabled(if: NetworkLab.shouldRunTests, "needs root and ip netns: \(NetworkLab.unavailableReason ?? "")"))
struct NetworkNamespaceTests {
    /// A lab with `veth0` (192.0.2.2/24, 2001:db8::2/64) in local and its peer `veth0-peer`
    /// (192.0.2.1/24, 2001:db8::1/64) in remote.
    private func makeLinkedLab() throws -> NetworkLab {
        let lab = try NetworkLab()
        try lab.addVethLink("veth0", peer: "veth0-peer")
        try lab.local.addAddress("192.0.2.2/24", to: "veth0")
        try lab.local.addAddress("2001:db8::2/64", to: "veth0")
        try lab.remote.addAddress("192.0.2.1/24", to: "veth0-peer")
        try lab.remote.addAddress("2001:db8::1/64", to: "veth0-peer")
        return lab
    }

    // MARK: run

    @Test("run executes its body in the namespace")
    func runJoinsNamespace() throws {
        let lab = try makeLinkedLab()
        let inside = try lab.local.run { try currentNetworkNamespace() }
        let outside = try currentNetworkNamespace()
        #expect(inside != outside)
        // The bind mount `ip netns add` made is the namespace itself: same inode.
        let mount = try FileManager.default.attributesOfItem(atPath: "/var/run/netns/\(lab.local.name)")
        let inode = try #require(mount[.systemFileNumber] as? UInt64)
        #expect(inside == "net:[\(inode)]")
    }

    @Test("links of the namespace are visible only inside run")
    func linksVisibleOnlyInside() throws {
        let lab = try makeLinkedLab()
        #expect(try lab.local.run { if_nametoindex("veth0") } != 0)
        #expect(try lab.remote.run { if_nametoindex("veth0-peer") } != 0)
        #expect(try lab.remote.run { if_nametoindex("veth0") } == 0)
        #expect(if_nametoindex("veth0-peer") == 0)
    }

    @Test("a socket created in run keeps belonging to the namespace after run returns")
    func socketStaysInNamespace() throws {
        let lab = try makeLinkedLab()
        // An address the host is unlikely to have (some CI sandboxes use 192.0.2.0/24 for
        // their own uplink): binding to it works only for a socket of the local namespace.
        try lab.local.addAddress("203.0.113.2/24", to: "veth0")
        let descriptor = try lab.local.run { socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0) }
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        // Bound here, on a thread outside the namespace.
        #expect(bindUDP(descriptor, to: "203.0.113.2") == 0)

        let outsider = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(outsider) }
        #expect(bindUDP(outsider, to: "203.0.113.2") == EADDRNOTAVAIL)
    }

    @Test("run reuses one dedicated thread that is not the caller's")
    func runReusesThread() throws {
        let lab = try NetworkLab()
        let first = try lab.local.run { pthread_self() }
        let second = try lab.local.run { pthread_self() }
        #expect(pthread_equal(first, second) != 0)
        #expect(pthread_equal(first, pthread_self()) == 0)
        let remote = try lab.remote.run { pthread_self() }
        #expect(pthread_equal(first, remote) == 0)
    }

    @Test("run called from within run on the same namespace runs inline")
    func nestedRunDoesNotDeadlock() throws {
        let lab = try NetworkLab()
        let (outer, inner) = try lab.local.run {
            (pthread_self(), try lab.local.run { pthread_self() })
        }
        #expect(pthread_equal(outer, inner) != 0)
        let crossed = try lab.local.run { try lab.remote.run { try currentNetworkNamespace() } }
        #expect(try crossed == lab.remote.run { try currentNetworkNamespace() })
    }

    @Test("run serves many concurrent callers")
    func concurrentRuns() throws {
        let lab = try NetworkLab()
        let failures = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            let echoed = try? lab.local.run { index }
            if echoed != index { failures.withLock { $0 += 1 } }
        }
        #expect(failures.withLock { $0 } == 0)
    }

    @Test("run rethrows the body's error")
    func runRethrows() throws {
        struct Expected: Error {}
        let lab = try NetworkLab()
        #expect(throws: Expected.self) { try lab.local.run { throw Expected() } }
        #expect(try lab.local.run { 7 } == 7)
    }

    @Test("run throws setnsFailed when the namespace is gone before the thread joins it")
    func runWithoutNamespace() throws {
        let lab = try NetworkLab()
        try IPCommand.run(["netns", "delete", lab.local.name])
        #expect(throws: NetworkLabError.setnsFailed(errno: ENOENT)) { try lab.local.run { 1 } }
    }

    // MARK: Addresses and links

    @Test("addAddress and removeAddress change ip addr, IPv6 without DAD")
    func addresses() throws {
        let lab = try makeLinkedLab()
        let v4 = try lab.local.ip("-4", "address", "show", "dev", "veth0")
        #expect(v4.contains("inet 192.0.2.2/24"))
        let v6 = try lab.local.ip("-6", "address", "show", "dev", "veth0")
        let global = try #require(v6.split(separator: "\n").first { $0.contains("inet6 2001:db8::2/64") })
        #expect(!global.contains("tentative"))

        try lab.local.removeAddress("192.0.2.2/24", from: "veth0")
        try lab.local.removeAddress("2001:db8::2/64", from: "veth0")
        let after = try lab.local.ip("address", "show", "dev", "veth0")
        #expect(!after.contains("192.0.2.2/24"))
        #expect(!after.contains("2001:db8::2/64"))
    }

    @Test("setLink takes a link down and up, removeLink deletes both veth ends")
    func links() throws {
        let lab = try makeLinkedLab()
        try lab.local.setLink("veth0", up: false)
        #expect(try lab.local.ip("link", "show", "veth0").contains("state DOWN"))
        try lab.local.setLink("veth0", up: true)
        #expect(try lab.local.ip("link", "show", "veth0").contains("state UP"))

        try lab.local.removeLink("veth0")
        #expect(!(try lab.local.ip("link", "show")).contains("veth0"))
        #expect(!(try lab.remote.ip("link", "show")).contains("veth0-peer"))
    }

    // MARK: Routes

    @Test("addRoute and removeRoute change ip route for IPv4 and IPv6")
    func unicastRoutes() throws {
        let lab = try makeLinkedLab()
        try lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1", metric: 50)
        try lab.local.addRoute("default", via: "192.0.2.1", device: "veth0")
        try lab.local.addRoute("2001:db8:1::/48", via: "2001:db8::1")
        try lab.local.addRoute("2001:db8:3::/48", device: "veth0")

        let v4 = try lab.local.ip("route", "show")
        #expect(v4.contains("198.51.100.0/24 via 192.0.2.1 dev veth0 metric 50"))
        #expect(v4.contains("default via 192.0.2.1 dev veth0"))
        let v6 = try lab.local.ip("-6", "route", "show")
        #expect(v6.contains("2001:db8:1::/48 via 2001:db8::1 dev veth0"))
        #expect(v6.contains("2001:db8:3::/48 dev veth0"))

        try lab.local.removeRoute("198.51.100.0/24", via: "192.0.2.1")
        try lab.local.removeRoute("default", device: "veth0")
        try lab.local.removeRoute("2001:db8:1::/48", via: "2001:db8::1")
        try lab.local.removeRoute("2001:db8:3::/48")
        #expect(!(try lab.local.ip("route", "show")).contains("via"))
        let v6After = try lab.local.ip("-6", "route", "show")
        #expect(!v6After.contains("2001:db8:1::"))
        #expect(!v6After.contains("2001:db8:3::"))
    }

    @Test(
        "a route kind shows up in ip route and fails lookups with the kernel's errno",
        arguments: [
            (RouteKind.unreachable, EHOSTUNREACH),
            (RouteKind.prohibit, EACCES),
            (RouteKind.blackhole, EINVAL),
        ],
        ["203.0.113.0/24", "2001:db8:2::/48"]
    )
    func routeKinds(kind: (RouteKind, Int32), prefix: String) throws {
        let (kind, lookupErrno) = kind
        let lab = try NetworkLab()
        let family = prefix.contains(":") ? "-6" : "-4"
        let destination = prefix.contains(":") ? "2001:db8:2::5" : "203.0.113.5"

        try lab.local.addRoute(kind, prefix)
        #expect(try lab.local.ip(family, "route", "show").contains("\(kind.rawValue) \(prefix)"))
        let lookup = #expect(throws: NetworkLabError.self) {
            try lab.local.ip(family, "route", "get", destination)
        }
        guard case .commandFailed(_, _, let stderr) = lookup else {
            Issue.record("expected commandFailed, got \(String(describing: lookup))")
            return
        }
        #expect(stderr.contains(String(cString: strerror(lookupErrno))))

        try lab.local.removeRoute(kind, prefix)
        #expect(!(try lab.local.ip(family, "route", "show")).contains(prefix))
    }

    // MARK: Failures

    @Test("a failing ip command throws commandFailed with its stderr")
    func failingCommand() throws {
        let lab = try NetworkLab()
        let error = #expect(throws: NetworkLabError.self) {
            try lab.local.setLink("nosuchlink0", up: true)
        }
        guard case .commandFailed(let command, let status, let stderr) = error else {
            Issue.record("expected commandFailed, got \(String(describing: error))")
            return
        }
        #expect(command == "ip -n \(lab.local.name) link set nosuchlink0 up")
        #expect(status != 0)
        #expect(stderr.contains("nosuchlink0"))
    }
}

/// The network namespace of the calling thread, as `net:[INODE]`.
private func currentNetworkNamespace() throws -> String {
    try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self/ns/net")
}

/// Binds `descriptor` to `address`, port 0; returns 0 or the errno.
private func bindUDP(_ descriptor: Int32, to address: String) -> Int32 {
    var socketAddress = sockaddr_in()
    socketAddress.sin_family = sa_family_t(AF_INET)
    guard inet_pton(AF_INET, address, &socketAddress.sin_addr) == 1 else { return EINVAL }
    let result = withUnsafePointer(to: &socketAddress) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return result == 0 ? 0 : errno
}
