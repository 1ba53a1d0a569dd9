import Testing
@testable import WebSocket

@Suite("WebSocket URL parsing")
struct WebSocketURLTests {
    @Test(
        "valid URLs split into what lws' client connect needs",
        arguments: [
            ("ws://127.0.0.1:8080/app/KEY?protocol=7", false, "127.0.0.1", 8080, "/app/KEY?protocol=7", "127.0.0.1:8080"),
            ("ws://example.com", false, "example.com", 80, "/", "example.com"),
            ("wss://example.com/", true, "example.com", 443, "/", "example.com"),
            ("wss://example.com:8443?x=1", true, "example.com", 8443, "/?x=1", "example.com:8443"),
            ("ws://[::1]:9000/p", false, "::1", 9000, "/p", "[::1]:9000"),
            ("WS://Host:81/a", false, "Host", 81, "/a", "Host:81"),
        ] as [(String, Bool, String, Int, String, String)]
    )
    func valid(url: String, secure: Bool, host: String, port: Int, resource: String, hostHeader: String) throws {
        let parsed = try WebSocketURL(url)
        #expect(parsed.isSecure == secure)
        #expect(parsed.host == host)
        #expect(parsed.port == port)
        #expect(parsed.resource == resource)
        #expect(parsed.hostHeader == hostHeader)
    }

    @Test(
        "invalid URLs are refused",
        arguments: ["http://example.com/", "ws://", "ws://:80/", "ws://host:0/", "ws://host:70000/", "ws://host:x/",
                    "ws://host/#fragment", "ws://user@host/", "ws://[::1/", "ws://[::1]x/"]
    )
    func invalid(url: String) {
        #expect(throws: WebSocketError.self) { try WebSocketURL(url) }
    }
}
