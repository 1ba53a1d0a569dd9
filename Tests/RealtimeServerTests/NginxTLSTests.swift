import Foundation
import RealtimeProtocol
import RealtimeServer
import class Spawn.ChildProcess
import SystemSupport
import TestSupport
import Testing
import WebSocket

/// Debian's nginx, when installed.
private let nginxPath = ["/usr/sbin/nginx", "/usr/local/sbin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// docs/nginx-tls.conf, the "Several nodes behind nginx" article's configuration for TLS in front of the server, run as it is
/// with a certificate made at test time: a `wss://` client of the `WebSocket` module (trusting
/// the test CA) subscribes and gets an event, `/health` answers over `https://`, and `/metrics`
/// stays closed to the public side.
@Suite(.enabled(if: nginxPath != nil || ProcessInfo.processInfo.environment["CI"] == "true", "needs nginx (scripts/setup --cluster installs nginx-light)"))
struct NginxTLSTests {
    static let template = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/nginx-tls.conf")

    /// The template with this test's port, node and certificate, and nginx's files in `directory`.
    static func configuration(_ template: String, port: Int, node: Int, pair: TestCertificates.Pair, directory: String) throws -> String {
        let replacements = [
            ("worker_processes auto;", (geteuid() == 0 ? "user root;\n" : "") + "worker_processes 1;\nmaster_process off;\ndaemon off;\npid \(directory)/nginx.pid;\nerror_log \(directory)/error.log warn;"),
            ("http {", "http {\n  client_body_temp_path \(directory)/body;\n  proxy_temp_path \(directory)/proxy;\n  fastcgi_temp_path \(directory)/fastcgi;\n  uwsgi_temp_path \(directory)/uwsgi;\n  scgi_temp_path \(directory)/scgi;"),
            ("server 127.0.0.1:6001 ", "server 127.0.0.1:\(node) "),
            ("listen 443 ssl;", "listen 127.0.0.1:\(port) ssl;"),
            ("/etc/ssl/realtime/fullchain.pem", pair.certificate),
            ("/etc/ssl/realtime/privkey.pem", pair.key),
        ]
        var text = template
        for (from, to) in replacements {
            guard text.contains(from) else { throw TestCertificates.Failure(description: "docs/nginx-tls.conf no longer has \(from)") }
            text = text.replacingOccurrences(of: from, with: to)
        }
        return text
    }

    @Test("wss:// through nginx: handshake, subscription and an event; /health over https, /metrics refused")
    func wssThroughNginx() async throws {
        let nginx = try #require(nginxPath, "nginx is not installed (scripts/setup --cluster)")
        let authority = try TestCertificates()
        let pair = try authority.server("localhost")
        let fixture = try ServerFixture()
        let port = Int(try TestSockets.freePort())
        let directory = authority.directory
        let path = directory + "/nginx.conf"
        let text = try Self.configuration(String(contentsOf: Self.template, encoding: .utf8), port: port, node: fixture.server.port, pair: pair, directory: directory)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let process = try ChildProcess(nginx, ["-p", directory, "-e", directory + "/error.log", "-c", path], standardOutput: .pipe, standardError: .pipe)
        defer { _ = process.signal(SIGKILL); process.waitUntilExit() }
        let deadline = ContinuousClock.now + .seconds(10)
        while !TestSockets.accepts(port: UInt16(port)), ContinuousClock.now < deadline, process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        try #require(TestSockets.accepts(port: UInt16(port)), "nginx did not start: \(process.errorLines.suffix(5)) \((try? String(contentsOfFile: directory + "/error.log", encoding: .utf8)) ?? "")")

        var options = WebSocketContext.Options()
        options.certificateAuthorityFile = authority.caFile
        let clients = try WebSocketContext(options: options)
        defer { clients.shutdown() }
        let client = TestClient()
        client.connection = try clients.connect(url: "wss://localhost:\(port)/app/\(ServerFixture.app.key)") { client.record($0) }
        #expect(client.message("bird:connection_established") != nil, "\(client.events)")
        client.send(#"{"event":"bird:subscribe","data":{"channel":"news"}}"#)
        #expect(client.message("bird_internal:subscription_succeeded") != nil)
        fixture.server.hub.publish(appID: "1", channels: ["news"], event: "update", data: #"{"over":"tls"}"#)
        #expect(client.message("update")?.data == #"{"over":"tls"}"#)

        let health = try ChildProcess.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", authority.caFile, "https://localhost:\(port)/health"])
        #expect(health.standardOutput == "200")
        let metrics = try ChildProcess.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", authority.caFile, "https://localhost:\(port)/metrics"])
        #expect(metrics.standardOutput == "403")
        let untrusted = try ChildProcess.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "https://localhost:\(port)/health"])
        #expect(untrusted.standardOutput == "000", "a client without the CA refuses the certificate")
    }
}
