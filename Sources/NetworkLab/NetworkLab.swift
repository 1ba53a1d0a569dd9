import Foundation
import SystemSupport
import Synchronization

/// A private pair of Linux network namespaces in which a test changes links, addresses and
/// routes under the network client it tests, without touching the host's network.
///
/// The code under test runs in ``local`` (through ``NetworkNamespace/run(_:)``); ``remote``
/// holds the far ends of the links, so taking a far end down makes the local link lose its
/// carrier, as unplugging a cable would. Use only documentation address ranges (RFC 5737:
/// 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24; RFC 3849: 2001:db8::/32) and loopback.
///
/// Creating namespaces needs `CAP_SYS_ADMIN` (root) and iproute2. Gate tests on
/// ``shouldRunTests``:
///
/// ```swift
/// @Test("reports unreachable when the link loses carrier", .enabled(if: NetworkLab.shouldRunTests))
/// func carrierLoss() throws {
///     let lab = try NetworkLab()
///     try lab.addVethLink("veth0", peer: "veth0-peer")
///     try lab.local.addAddress("192.0.2.2/24", to: "veth0")
///     try lab.local.addRoute("default", via: "192.0.2.1")
///     let monitor = try lab.local.run { try MyMonitor() }   // its sockets live in `local`
///     try lab.setCarrier(of: "veth0", present: false)
///     // … expect the monitor to report the change
/// }
/// ```
///
/// The namespaces are deleted by ``close()`` or when the lab is deallocated, so a failing test
/// leaves nothing behind; namespaces left by a process that crashed are deleted by the next
/// lab created on the machine.
public final class NetworkLab: Sendable {
    /// The namespace where the code under test runs; its loopback link is up.
    public let local: NetworkNamespace
    /// The namespace that holds the far ends of the links; its loopback link is up.
    public let remote: NetworkNamespace

    private struct State {
        /// The remote peer of each veth link, by local name.
        var vethPeers: [String: String] = [:]
        var isClosed = false
    }

    private let state = Locked(State())

    /// Every namespace a lab creates is named `birdlab-<pid>-<counter>-l` or `-r`, so that a
    /// later process can tell whose it was and whether that process is gone.
    private static let namePrefix = "birdlab-"
    private static let labCounter = Atomic<Int>(0)

    /// Why this process cannot create network namespaces, or `nil` when it can.
    ///
    /// Found once per process by adding and deleting a probe namespace with `ip netns add`,
    /// which needs `CAP_SYS_ADMIN` (root) and a writable `/var/run/netns`.
    public static var unavailableReason: String? {
        probedUnavailableReason
    }

    /// Whether tests that need a lab should run: when namespaces are available, or when the
    /// environment variable `CI` is `"true"`.
    ///
    /// On CI a machine without namespaces makes the tests fail with
    /// ``NetworkLabError/unavailable(_:)`` instead of skipping them silently. Use it as a trait:
    /// `@Suite(.enabled(if: NetworkLab.shouldRunTests))`.
    public static var shouldRunTests: Bool {
        ProcessInfo.processInfo.environment["CI"] == "true" || unavailableReason == nil
    }

    private static let probedUnavailableReason: String? = {
        guard IPCommand.executablePath != nil else {
            return "the `ip` command (iproute2) was not found in /usr/sbin, /sbin or PATH"
        }
        let probe = "\(namePrefix)\(getpid())-probe"
        // A crashed process with the same pid may have left the probe behind.
        _ = try? IPCommand.run(["netns", "delete", probe])
        do {
            try IPCommand.run(["netns", "add", probe])
            _ = try? IPCommand.run(["netns", "delete", probe])
            return nil
        } catch {
            let user = geteuid() == 0 ? "" : " (not running as root: uid \(geteuid()))"
            return "`ip netns add` failed\(user): \(error)"
        }
    }()

    /// Creates the two namespaces, with their loopback links up.
    ///
    /// Names are unique per process: `birdlab-<pid>-<counter>-l` and `-r`. First deletes
    /// leftover `birdlab-<pid>-…` namespaces whose process is no longer alive, so that a test
    /// run that crashed does not leak namespaces into the next.
    ///
    /// - Throws: ``NetworkLabError``: `unavailable` when this process cannot create namespaces
    ///   (see ``unavailableReason``), `commandFailed` when `ip` refuses.
    public init() throws {
        if let reason = Self.unavailableReason {
            throw NetworkLabError.unavailable(reason)
        }
        Self.removeLeftoverNamespaces()
        let number = Self.labCounter.wrappingAdd(1, ordering: .relaxed).oldValue
        let base = "\(Self.namePrefix)\(getpid())-\(number)"
        let local = try NetworkNamespace.create(named: "\(base)-l")
        let remote: NetworkNamespace
        do {
            remote = try NetworkNamespace.create(named: "\(base)-r")
        } catch {
            local.close()
            throw error
        }
        self.local = local
        self.remote = remote
    }

    deinit {
        close()
    }

    /// Adds a veth pair: `name` in ``local`` and `peer` in ``remote``, both set up.
    ///
    /// A veth pair is a virtual cable: each end has carrier only while the other end is up
    /// (kernel behaviour), which ``setCarrier(of:present:)`` uses.
    ///
    /// - Parameters:
    ///   - name: The local end's name, at most 15 bytes (`IFNAMSIZ`), such as `"veth0"`.
    ///   - peer: The remote end's name, at most 15 bytes.
    /// - Throws: ``NetworkLabError``: `commandFailed` when `ip` refuses (name taken or too
    ///   long), `closed` after ``close()``.
    public func addVethLink(_ name: String, peer: String) throws {
        try checkOpen()
        try local.ip("link", "add", name, "type", "veth", "peer", "name", peer, "netns", remote.name)
        do {
            try local.setLink(name, up: true)
            try remote.setLink(peer, up: true)
        } catch {
            // Deleting one end deletes the pair.
            _ = try? local.removeLink(name)
            throw error
        }
        state.withLock { $0.vethPeers[name] = peer }
    }

    /// Takes the remote peer of a local veth link down, so `name` loses its carrier, or up
    /// again, so it regains it.
    ///
    /// Without carrier the local link stays administratively up but shows `NO-CARRIER` and
    /// operstate `LOWERLAYERDOWN`, and the kernel stops using its routes, as when a cable is
    /// unplugged or Wi-Fi drops.
    ///
    /// - Parameters:
    ///   - name: A local link created by ``addVethLink(_:peer:)``.
    ///   - present: `false` to lose carrier, `true` to regain it.
    /// - Throws: ``NetworkLabError``: `unknownVethLink` when `name` did not come from
    ///   ``addVethLink(_:peer:)``, `commandFailed` when `ip` refuses (the link was deleted),
    ///   `closed` after ``close()``.
    public func setCarrier(of name: String, present: Bool) throws {
        let peer = try state.withLock { state throws(NetworkLabError) -> String in
            if state.isClosed { throw .closed }
            guard let peer = state.vethPeers[name] else { throw .unknownVethLink(name) }
            return peer
        }
        try remote.setLink(peer, up: present)
    }

    /// Deletes both namespaces, and with them every link in them, and ends their threads.
    ///
    /// Later calls do nothing; the lab also calls it when deallocated. Sockets created in a
    /// namespace keep it alive, unnamed, until they are closed (kernel behaviour).
    public func close() {
        let wasClosed = state.withLock { state in
            defer { state.isClosed = true }
            return state.isClosed
        }
        guard !wasClosed else { return }
        local.close()
        remote.close()
    }

    private func checkOpen() throws {
        if state.withLock({ $0.isClosed }) { throw NetworkLabError.closed }
    }

    /// Deletes `birdlab-<pid>-…` namespaces whose process has exited; best effort, since
    /// another process may be deleting the same ones.
    private static func removeLeftoverNamespaces() {
        guard let listing = try? IPCommand.run(["netns", "list"]) else { return }
        for line in listing.split(separator: "\n") {
            // Lines read `NAME` or `NAME (id: N)`.
            guard let name = line.split(separator: " ").first, name.hasPrefix(namePrefix) else { continue }
            let fields = name.dropFirst(namePrefix.count).split(separator: "-")
            guard let pid = fields.first.flatMap({ pid_t($0) }), !isAlive(pid) else { continue }
            _ = try? IPCommand.run(["netns", "delete", String(name)])
        }
    }

    private static func isAlive(_ pid: pid_t) -> Bool {
        // Signal 0 checks existence only; EPERM means it exists but belongs to someone else.
        kill(pid, 0) == 0 || errno == EPERM
    }
}
