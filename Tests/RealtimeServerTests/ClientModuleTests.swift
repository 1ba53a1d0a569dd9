import Foundation
import Testing
import Spawn
@testable import RealtimeServer

/// The browser client served by the server (issue 32, "Served by the server").
@Suite("The browser client served under /client/")
struct ClientModuleTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Clients/javascript/src").standardizedFileURL

    @Test("the embedded files are Clients/javascript/src as it is, with package.json's version (the EmbedClient plugin)")
    func embeddedFilesMatchTheSources() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.sources.path).filter { $0.hasSuffix(".js") }.sorted()
        #expect(!names.isEmpty && names.contains("realtime.js"))
        #expect(ClientModule.files.keys.sorted() == names)
        for name in names {
            let text = try String(contentsOf: Self.sources.appendingPathComponent(name), encoding: .utf8)
            #expect(ClientModule.files[name] == text, "\(name) differs from the embedded copy")
        }
        let package = try JSONSerialization.jsonObject(with: Data(contentsOf: Self.sources.appendingPathComponent("../package.json"))) as? [String: Any]
        #expect(package?["version"] as? String == ClientModule.version)
    }

    @Test("a real server answers GET /client/realtime.js with the module, its version, an ETag, a cache lifetime and CORS; 304 for its ETag; 404 for another file", .timeLimit(.minutes(1)))
    func served() throws {
        let fixture = try ServerFixture()
        let url = "http://127.0.0.1:\(fixture.server.port)/client/realtime.js"
        let first = try ChildProcess.run("/usr/bin/curl", ["-s", "-i", url], timeout: .seconds(10))
        let (head, body) = Self.split(first.standardOutput)
        #expect(head.first?.hasPrefix("HTTP/1.1 200") == true, "\(head)")
        #expect(Self.field("content-type", in: head) == "text/javascript; charset=utf-8")
        #expect(Self.field("access-control-allow-origin", in: head) == "*")
        #expect(Self.field("x-bird-client-version", in: head) == ClientModule.version)
        #expect(Self.field("cache-control", in: head) == "public, max-age=\(ClientModule.maxAge)")
        #expect(body == ClientModule.files["realtime.js"])
        let etag = try #require(Self.field("etag", in: head))
        let again = try ChildProcess.run("/usr/bin/curl", ["-s", "-i", "-H", "If-None-Match: \(etag)", url], timeout: .seconds(10))
        #expect(Self.split(again.standardOutput).head.first?.hasPrefix("HTTP/1.1 304") == true)
        let weak = try ChildProcess.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "If-None-Match: \"other\", W/\(etag)", url], timeout: .seconds(10))
        #expect(weak.standardOutput == "304", "a weakened tag matches (RFC 9110 §13.1.2)")
        let stale = try ChildProcess.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "If-None-Match: \"0.0.1-000000\"", url], timeout: .seconds(10))
        #expect(stale.standardOutput == "200")
        let missing = try ChildProcess.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(fixture.server.port)/client/../secret.js"], timeout: .seconds(10))
        #expect(missing.standardOutput == "404")
        let other = try ChildProcess.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(fixture.server.port)/client/nothing.js"], timeout: .seconds(10))
        #expect(other.standardOutput == "404")
    }

    static func split(_ response: String) -> (head: [String], body: String) {
        guard let range = response.range(of: "\r\n\r\n") else { return (response.components(separatedBy: "\r\n"), "") }
        return (response[..<range.lowerBound].components(separatedBy: "\r\n"), String(response[range.upperBound...]))
    }

    static func field(_ name: String, in head: [String]) -> String? {
        head.dropFirst().first { $0.lowercased().hasPrefix(name + ":") }.map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
    }
}
