import Foundation
import Glibc
import SystemSupport
import ReconnectTesting
import TestSupport
import Testing
import Spawn

/// A private Prosody (Debian's `prosody`, installed by `scripts/setup`) for one test: its own
/// config (from the sample's template), data directory and free loopback port, run in the
/// foreground as a child process, killed at the end.
///
/// With `tls`, the TLS template instead: STARTTLS required on `port`, direct TLS (XEP-0368)
/// on `directTLSPort`, with a certificate for `localhost` signed by the given test CA.
///
/// `kill()` sends SIGKILL (a crash: clients see their TCP connections closed), `start()` again
/// restarts it on the same port with the same accounts, `pause()`/`resume()` (SIGSTOP/SIGCONT)
/// make it hang with its sockets open.
final class ProsodyServer: Sendable {
    enum Failure: Error, CustomStringConvertible {
        case notInstalled
        case command(String, status: Int32, output: String)
        case didNotListen(port: UInt16, log: String)

        var description: String {
            switch self {
            case .notInstalled: "prosody is not installed (scripts/setup installs it: apt-get install prosody)"
            case .command(let command, let status, let output): "\(command) exited with \(status): \(output)"
            case .didNotListen(let port, let log): "prosody did not listen on 127.0.0.1:\(port) within 10 s; log:\n\(log)"
            }
        }
    }

    static let prosody = "/usr/bin/prosody"
    static let prosodyctl = "/usr/bin/prosodyctl"
    /// The template the xmpp-client sample documents, found from this file's path.
    static let templates = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Samples/xmpp-client/prosody")

    static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: prosody) && FileManager.default.isExecutableFile(atPath: prosodyctl)
    }

    /// Prosody tests run when Prosody is installed, and always when `CI=true` (failing loudly
    /// if it is missing, never skipping).
    static var shouldRunTests: Bool {
        ProcessInfo.processInfo.environment["CI"] == "true" || isInstalled
    }

    /// The XMPP domain served (`VirtualHost "localhost"` in the template).
    let domain = "localhost"
    let directory: String
    let configPath: String
    let port: UInt16
    /// The direct TLS port (TLS servers only).
    let directTLSPort: UInt16?
    private let process = Locked<ChildProcess?>(nil)

    /// Writes the config into a new temporary directory for a free loopback port.
    ///
    /// - Parameter tls: the CA that signs the server's certificate; `nil` for the plain template.
    init(tls: TestCertificates? = nil) throws {
        guard Self.isInstalled else { throw Failure.notInstalled }
        _ = Self.leftoversRemoved
        var template = Array("/tmp/\(Self.directoryPrefix)\(getpid())-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw Failure.command("mkdtemp", status: errno, output: "") }
        directory = String(cString: made)
        port = try TestSockets.freePort()
        directTLSPort = tls == nil ? nil : try TestSockets.freePort()
        configPath = directory + "/prosody.cfg.lua"
        let templateURL = Self.templates.appendingPathComponent(tls == nil ? "prosody.cfg.lua" : "prosody-tls.cfg.lua")
        let config = try String(contentsOf: templateURL, encoding: .utf8)
            .replacingOccurrences(of: "@DATA_PATH@", with: directory)
            .replacingOccurrences(of: "@DIRECT_TLS_PORT@", with: directTLSPort.map(String.init) ?? "")
            .replacingOccurrences(of: "@PORT@", with: String(port))
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        if let tls { try useCertificate(signedBy: tls) }
    }

    /// Installs a certificate for `localhost` signed by `authority`, read at the next `start()`.
    func useCertificate(signedBy authority: TestCertificates) throws {
        let pair = try authority.server(domain)
        let certificates = directory + "/certs"
        try FileManager.default.createDirectory(atPath: certificates, withIntermediateDirectories: true)
        for (source, target) in [(pair.certificate, "localhost.crt"), (pair.key, "localhost.key")] {
            try? FileManager.default.removeItem(atPath: certificates + "/" + target)
            try FileManager.default.copyItem(atPath: source, toPath: certificates + "/" + target)
        }
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Creates an account (`prosodyctl --config FILE register USER HOST PASSWORD`).
    func register(_ user: String, password: String) throws {
        try run(Self.prosodyctl, ["--config", configPath, "register", user, domain, password])
    }

    /// Starts Prosody in the foreground and returns once it accepts connections.
    ///
    /// - Throws: `Failure.didNotListen` with the log when it does not within 10 s.
    func start() throws {
        let process = try ChildProcess(Self.prosody, ["--config", configPath, "-F"], standardOutput: .nullDevice, standardError: .nullDevice)
        self.process.withLock { $0 = process }
        // Poll the port, with a deadline: Prosody has no readiness signal of its own.
        let deadline = ContinuousClock.now + .seconds(10)
        while !TestSockets.accepts(port: port) || !(directTLSPort.map(TestSockets.accepts(port:)) ?? true) {
            guard ContinuousClock.now < deadline, process.isRunning else {
                kill()
                throw Failure.didNotListen(port: port, log: log)
            }
            usleep(20_000)
        }
    }

    /// SIGKILL, as a crash: no stream error is sent, the kernel closes the connections.
    func kill() {
        guard let process = process.withLock({ state in defer { state = nil }; return state }) else { return }
        process.signal(SIGKILL)
        process.waitUntilExit()
    }

    /// SIGSTOP: the server hangs with its sockets open (a dead peer that looks connected).
    func pause() {
        _ = process.withLock({ $0 })?.signal(SIGSTOP)
    }

    /// SIGCONT after `pause()`.
    func resume() {
        _ = process.withLock({ $0 })?.signal(SIGCONT)
    }

    /// Directories are `/tmp/prosody-test-<pid of the test process>-XXXXXX`.
    private static let directoryPrefix = "prosody-test-"

    /// A test process that died (a crash, a kill) leaves its Prosody running and its directory
    /// behind: the first server of a later process kills those Prosodys (found by the pidfile
    /// in the directory) and removes the directories.
    private static let leftoversRemoved: Void = {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        for entry in entries where entry.hasPrefix(directoryPrefix) {
            guard let owner = Int32(entry.dropFirst(directoryPrefix.count).prefix { $0 != "-" }), owner != getpid(),
                  Glibc.kill(owner, 0) != 0, errno == ESRCH
            else { continue }
            let directory = "/tmp/" + entry
            if let text = try? String(contentsOfFile: directory + "/prosody.pid", encoding: .utf8),
               let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)),
               let commandLine = try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8),
               commandLine.contains(directory)
            {
                Glibc.kill(pid, SIGKILL)
            }
            try? FileManager.default.removeItem(atPath: directory)
        }
    }()

    /// Prosody's log (`prosody.log` in the data directory), for failure messages.
    var log: String {
        (try? String(contentsOfFile: directory + "/prosody.log", encoding: .utf8)) ?? "(no log)"
    }

    private func run(_ executable: String, _ arguments: [String]) throws {
        let result = try ChildProcess.run(executable, arguments)
        guard result.termination == .exited(0) else {
            throw Failure.command(([executable] + arguments).joined(separator: " "), status: result.status, output: result.standardOutput + result.standardError)
        }
    }
}

extension Trait where Self == ConditionTrait {
    /// Tests against a real Prosody: need the `prosody` package; with CI=true they always run.
    static var prosody: Self {
        .enabled(if: ProsodyServer.shouldRunTests, "needs prosody (apt-get install prosody; scripts/setup does it)")
    }
}
