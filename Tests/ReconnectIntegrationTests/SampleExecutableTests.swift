import Foundation
import Glibc
import Reachability
import Reconnect
import SampleSupport
import TestSupport
import Testing
import LineStream

/// The sample executables as a user runs them (README commands), as child processes on
/// loopback: what they print, and that they reconnect.
@Suite struct SampleExecutableTests {
    /// Decodes the JSON lines a sample printed.
    private static func entries(_ lines: [String]) -> [EventLog.Entry] {
        lines.compactMap { try? JSONDecoder().decode(EventLog.Entry.self, from: Data($0.utf8)) }
    }

    private static func has(_ event: String, detail: String? = nil) -> @Sendable ([String]) -> Bool {
        { lines in entries(lines).contains { $0.event == event && (detail == nil || $0.detail == detail) } }
    }

    @Test("line-server answers PING with PONG, echoes, logs connections to stderr and exits 0 on SIGTERM")
    func lineServer() async throws {
        let server = try SampleProcess("line-server", ["--port", "0", "--host", "127.0.0.1"])
        #expect(await server.stderr.wait { $0.contains { $0.hasPrefix("line-server: listening on 127.0.0.1:") } })
        let listening = try #require(server.stderr.values.first { $0.hasPrefix("line-server: listening on 127.0.0.1:") })
        let port = try #require(UInt16(listening.split(separator: ":").last ?? ""))

        let stream = TCPLineStream(host: "127.0.0.1", port: port)
        let lines = Recorder<String>()
        let token = stream.onLine { lines.record($0) }
        defer { token.cancel() }
        let ready = Recorder<StreamRecord>()
        let readyToken = stream.reconnectEvents.observe { ready.record(StreamRecord($0)) }
        defer { readyToken.cancel() }
        stream.connect()
        #expect(await ready.wait(for: .ready))
        stream.send("PING")
        stream.send("hello, server")
        #expect(await lines.wait { $0 == ["PONG", "hello, server"] })
        #expect(await server.stderr.wait { $0.contains { $0.hasPrefix("line-server: connection from 127.0.0.1:") } })

        server.signal(SIGTERM)
        #expect(await server.exitStatus.wait { $0 == [0] })
        #expect(await ready.wait(for: .disconnected))
    }

    @Test("line-server refuses bad arguments with status 2")
    func lineServerUsage() async throws {
        let server = try SampleProcess("line-server", ["--port", "not-a-port"])
        #expect(await server.exitStatus.wait { $0 == [2] })
        #expect(server.stderr.values.first?.contains("usage: line-server") == true)
    }

    @Test("line-client --json prints a JSON line per change, sends stdin, reconnects after the server restarts, obeys /disconnect and /quit")
    func lineClient() async throws {
        let server = LineServer()
        try server.start()
        defer { server.stop() }
        let client = try SampleProcess("line-client", ["127.0.0.1", String(server.port), "--json", "--delay", "0.05", "--interval", "0.1"])
        let output = client.stdout

        #expect(await output.wait(until: Self.has("ready")))
        client.send("hello")
        #expect(await output.wait(until: Self.has("received", detail: "hello")))

        server.stop()
        #expect(await output.wait(until: Self.has("accidental-disconnect")))
        // The 50 ms delay, or later: attempts start at least 100 ms apart (minimumAttemptInterval),
        // and the first one began moments before the server stopped.
        #expect(await output.wait { lines in
            Self.entries(lines).contains { entry in
                guard entry.event == "reconnect-scheduled", entry.detail.hasPrefix("attempt 1 in "), entry.detail.hasSuffix(" ms"),
                      let milliseconds = Int(entry.detail.dropFirst("attempt 1 in ".count).dropLast(3)) else { return false }
                return (50...100).contains(milliseconds)
            }
        })
        try server.start()
        #expect(await output.wait(until: Self.has("reconnected")))

        client.send("/disconnect")
        #expect(await output.wait(until: Self.has("disconnected", detail: "intentional")))
        client.send("/quit")
        #expect(await client.exitStatus.wait { $0 == [0] })

        let entries = Self.entries(output.values)
        #expect(entries.count == output.values.count, "every line is JSON")
        #expect(entries.allSatisfy { !$0.time.isEmpty && !$0.event.isEmpty })
        #expect(entries.map(\.event).prefix(4) == ["reconnect-attempt", "connecting", "opened", "ready"])
    }

    @Test("xmpp-client --json logs ready and the bound JID against Prosody, and /disconnect is intentional", .prosody)
    func xmppClient() async throws {
        let prosody = try ProsodyServer()
        try prosody.register("bob", password: "builder")
        try prosody.start()
        let client = try SampleProcess("xmpp-client", [
            "--host", "127.0.0.1", "--port", String(prosody.port), "--jid", "bob@localhost", "--password", "builder",
            "--resource", "cli", "--json",
        ])
        let output = client.stdout
        #expect(await output.wait(until: Self.has("bound", detail: "bob@localhost/cli")), "\(output.values)\n\(prosody.log)")
        client.send("<message to='bob@localhost/cli'><body>echo</body></message>")
        #expect(await output.wait { lines in Self.entries(lines).contains { $0.event == "stanza" && $0.detail.contains("<body>echo</body>") } })
        client.send("/disconnect")
        #expect(await output.wait(until: Self.has("disconnected", detail: "intentional")))
        client.send("/quit")
        #expect(await client.exitStatus.wait { $0 == [0] })
    }

    @Test("xmpp-client --ca-file over STARTTLS and --direct-tls logs the TLS version and the method; a missing CA file exits 2", .prosody)
    func xmppClientTLS() async throws {
        let authority = try TestCertificates()
        let prosody = try ProsodyServer(tls: authority)
        try prosody.register("bob", password: "builder")
        try prosody.start()
        let common = [
            "--host", "127.0.0.1", "--port", String(prosody.port), "--jid", "bob@localhost", "--password", "builder",
            "--ca-file", authority.caFile, "--direct-tls-port", String(try #require(prosody.directTLSPort)), "--json",
        ]
        for (flags, method) in [([String](), "standard"), (["--direct-tls"], "directTLS")] {
            let client = try SampleProcess("xmpp-client", common + ["--resource", method] + flags)
            let output = client.stdout
            #expect(await output.wait(until: Self.has("secured", detail: "TLSv1.3 (\(method))")), "\(output.values)\n\(prosody.log)")
            #expect(await output.wait(until: Self.has("bound", detail: "bob@localhost/\(method)")))
            client.send("/quit")
            #expect(await client.exitStatus.wait { $0 == [0] })
        }

        let missing = try SampleProcess("xmpp-client", ["--host", "127.0.0.1", "--jid", "bob@localhost", "--password", "x", "--resource", "r", "--ca-file", "/nonexistent.pem"])
        #expect(await missing.exitStatus.wait { $0 == [2] })
    }
}
