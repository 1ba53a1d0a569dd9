import Foundation
import Testing

@testable import NetworkLab

@Suite("NetworkLab", .enabled(if: NetworkLab.shouldRunTests, "needs root and ip netns: \(NetworkLab.unavailableReason ?? "")"))
struct NetworkLabTests {
    @Test("init creates a local and a remote namespace named after the process")
    func createsNamespaces() throws {
        let lab = try NetworkLab()
        let prefix = "birdlab-\(getpid())-"
        #expect(lab.local.name.hasPrefix(prefix) && lab.local.name.hasSuffix("-l"))
        #expect(lab.remote.name.hasPrefix(prefix) && lab.remote.name.hasSuffix("-r"))
        #expect(lab.local.name.dropLast(2) == lab.remote.name.dropLast(2))

        let names = try namespaceNames()
        #expect(names.contains(lab.local.name))
        #expect(names.contains(lab.remote.name))
        #expect(try lab.local.ip("link", "show", "lo").contains("UP"))
        #expect(try lab.remote.ip("link", "show", "lo").contains("UP"))
    }

    @Test("two labs get different namespaces")
    func labsAreDistinct() throws {
        let first = try NetworkLab()
        let second = try NetworkLab()
        #expect(first.local.name != second.local.name)
        #expect(first.remote.name != second.remote.name)
    }

    @Test("addVethLink puts both ends up, one in each namespace")
    func vethLink() throws {
        let lab = try NetworkLab()
        try lab.addVethLink("veth0", peer: "veth0-peer")
        let local = try lab.local.ip("link", "show", "veth0")
        #expect(local.contains("state UP"))
        #expect(local.contains("LOWER_UP"))
        #expect(try lab.remote.ip("link", "show", "veth0-peer").contains("state UP"))
        #expect(throws: NetworkLabError.self) { try lab.local.ip("link", "show", "veth0-peer") }
    }

    @Test("setCarrier takes the carrier of a local veth link away and back")
    func carrier() throws {
        let lab = try NetworkLab()
        try lab.addVethLink("veth0", peer: "veth0-peer")

        try lab.setCarrier(of: "veth0", present: false)
        let lost = try lab.local.ip("link", "show", "veth0")
        #expect(lost.contains("NO-CARRIER"))
        #expect(lost.contains(",UP"))

        try lab.setCarrier(of: "veth0", present: true)
        let regained = try lab.local.ip("link", "show", "veth0")
        #expect(!regained.contains("NO-CARRIER"))
        #expect(regained.contains("LOWER_UP"))
    }

    @Test("setCarrier refuses a link addVethLink did not create")
    func carrierOfUnknownLink() throws {
        let lab = try NetworkLab()
        #expect(throws: NetworkLabError.unknownVethLink("lo")) { try lab.setCarrier(of: "lo", present: false) }
    }

    @Test("close deletes both namespaces and is idempotent")
    func closeDeletesNamespaces() throws {
        let lab = try NetworkLab()
        try lab.addVethLink("veth0", peer: "veth0-peer")
        _ = try lab.local.run { 1 }
        lab.close()
        let names = try namespaceNames()
        #expect(!names.contains(lab.local.name))
        #expect(!names.contains(lab.remote.name))

        lab.close()
        #expect(throws: NetworkLabError.closed) { try lab.addVethLink("veth1", peer: "veth1-peer") }
        #expect(throws: NetworkLabError.closed) { try lab.setCarrier(of: "veth0", present: false) }
        #expect(throws: NetworkLabError.closed) { try lab.local.ip("link", "show") }
        #expect(throws: NetworkLabError.closed) { try lab.remote.run { 1 } }
    }

    @Test("close ends the namespace threads")
    func closeEndsThreads() throws {
        let lab = try NetworkLab()
        // `/proc/thread-self` reads `PID/task/TID`.
        let task = try lab.local.run { try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self") }
        #expect(FileManager.default.fileExists(atPath: "/proc/\(task)"))
        lab.close()
        // The thread ends on its own once woken; give it a moment rather than wait in close().
        let deadline = ContinuousClock.now + .seconds(5)
        while FileManager.default.fileExists(atPath: "/proc/\(task)"), ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(!FileManager.default.fileExists(atPath: "/proc/\(task)"))
    }

    @Test("close called from within run returns and deletes the namespaces")
    func closeFromRun() throws {
        let lab = try NetworkLab()
        try lab.local.run { lab.close() }
        let names = try namespaceNames()
        #expect(!names.contains(lab.local.name))
        #expect(!names.contains(lab.remote.name))
        #expect(throws: NetworkLabError.closed) { try lab.local.run { 1 } }
    }

    @Test("dropping the lab deletes its namespaces")
    func deinitDeletesNamespaces() throws {
        var names: [String] = []
        do {
            let lab = try NetworkLab()
            names = [lab.local.name, lab.remote.name]
            _ = try lab.local.run { 1 }
        }
        let left = try namespaceNames()
        #expect(names.count == 2)
        #expect(left.allSatisfy { !names.contains($0) })
    }

    @Test("init deletes namespaces left behind by a process that is gone")
    func removesLeftovers() throws {
        let deadPID: pid_t = 999_999
        try #require(kill(deadPID, 0) != 0 && errno == ESRCH, "pid \(deadPID) must not be alive")
        let leftover = "birdlab-\(deadPID)-0-l"
        _ = try? IPCommand.run(["netns", "delete", leftover])
        try IPCommand.run(["netns", "add", leftover])
        // Another test's lab may delete it first; either way it must not survive a new lab.
        defer { _ = try? IPCommand.run(["netns", "delete", leftover]) }

        let lab = try NetworkLab()
        let names = try namespaceNames()
        #expect(!names.contains(leftover))
        #expect(names.contains(lab.local.name))
    }
}

/// The names `ip netns list` shows.
private func namespaceNames() throws -> [String] {
    try IPCommand.run(["netns", "list"])
        .split(separator: "\n")
        .compactMap { $0.split(separator: " ").first.map(String.init) }
}
