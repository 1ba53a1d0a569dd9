import Foundation
import Glibc
import Testing
import WebSocket

/// Plain HTTP on a listener's port, next to its WebSocket upgrades.
@Suite("Plain HTTP on a WebSocket listener")
struct HTTPServerTests {
    /// Answers with what it received, as `METHOD path?query|content-type|body`.
    static func reflect(_ request: HTTPServerRequest) async -> HTTPServerResponse {
        let summary = "\(request.method) \(request.path)?\(request.query)|\(request.header("content-type") ?? "")|"
        return HTTPServerResponse(
            status: request.method == "POST" ? 202 : 200,
            headers: [HTTPHeader(name: "Content-Type", value: "text/plain"), HTTPHeader(name: "X-Seen-By", value: "test")],
            body: Array(summary.utf8) + request.body
        )
    }

    @Test("a POST with a body is answered and the connection closed; a GET on a new connection; a WebSocket on the same port")
    func postThenGet() async throws {
        let fixture = try ServerFixture(onRequest: Self.reflect)
        let port = fixture.server.port
        let body = Array(#"{"name":"my-event","channel":"test","data":"{}"}"#.utf8)
        let (post, closed, get) = try await offPool {
            let socket = try RawTCP.connect(port: port)
            defer { close(socket) }
            let post = try RawTCP.exchange(socket, "POST /apps/1/events?auth_key=k&auth_version=1.0 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n", body: body)
            let closed = RawTCP.peerClosed(socket)
            let second = try RawTCP.connect(port: port)
            defer { close(second) }
            let get = try RawTCP.exchange(second, "GET /apps/1/channels HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            return (post, closed, get)
        }
        #expect(post.status == 202)
        #expect(post.headers["x-seen-by"] == "test")
        #expect(post.headers["content-type"] == "text/plain")
        #expect(post.headers["connection"] == "close")
        #expect(closed, "no keep-alive: the server closes after each answer")
        #expect(String(decoding: post.body, as: UTF8.self) == "POST /apps/1/events?auth_key=k&auth_version=1.0|application/json|" + String(decoding: body, as: UTF8.self))
        #expect(get.status == 200)
        #expect(String(decoding: get.body, as: UTF8.self) == "GET /apps/1/channels?||")

        let client = try Client(fixture.context, url: fixture.server.url(path: "/app/KEY"))
        try client.connection.send(text: "same port")
        #expect(await client.log.wait { $0.contains(.text("same port")) } != nil)
        fixture.context.shutdown()
    }

    @Test("pipelined requests in one segment (GET+POST, POST+POST) get the first answered and the connection closed; the service thread keeps serving others", arguments: [
        "GET /x HTTP/1.1\r\nHost: a\r\n\r\nPOST /apps/1/events HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello",
        "POST /apps/1/events HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}POST /apps/1/events HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    ])
    func pipelined(_ payload: String) async throws {
        let fixture = try ServerFixture(onRequest: Self.reflect)
        let port = fixture.server.port
        let (first, closed, latencies) = try await offPool {
            let socket = try RawTCP.connect(port: port)
            defer { close(socket) }
            try RawTCP.send(socket, Array(payload.utf8))
            let first = try RawTCP.readResponse(socket)
            let closed = RawTCP.peerClosed(socket)
            // lws 4.1.6 spun at 100 % CPU on such a connection and stopped answering anyone.
            var latencies: [Duration] = []
            for _ in 0..<5 {
                let started = ContinuousClock.now
                let other = try RawTCP.connect(port: port, timeout: 5)
                defer { close(other) }
                _ = try RawTCP.exchange(other, "GET /ok HTTP/1.1\r\nHost: a\r\n\r\n")
                latencies.append(ContinuousClock.now - started)
            }
            return (first, closed, latencies)
        }
        #expect(first.status == (payload.hasPrefix("GET") ? 200 : 202))
        #expect(closed)
        print("pipelined: other clients answered in", latencies)
        #expect(latencies.allSatisfy { $0 < .seconds(2) }, "\(latencies)")
        fixture.context.shutdown()
    }

    @Test("query items are split and percent-decoded by lws")
    func queryItems() async throws {
        let seen = EventLog()
        let fixture = try ServerFixture(onRequest: { request in
            seen.record(.text(request.queryItems.map { "\($0.name)=\($0.value)" }.joined(separator: ",")))
            return HTTPServerResponse(status: 204)
        })
        let port = fixture.server.port
        let response = try await offPool {
            let socket = try RawTCP.connect(port: port)
            defer { close(socket) }
            return try RawTCP.exchange(socket, "GET /q?a=1&b=x%20y&flag HTTP/1.1\r\nHost: x\r\n\r\n")
        }
        #expect(response.status == 204)
        #expect(seen.events == [.text("a=1,b=x y,flag=")])
        fixture.context.shutdown()
    }

    @Test("a header outside lws' list is captured when named")
    func customHeader() async throws {
        let seen = EventLog()
        let fixture = try ServerFixture(customHeaderNames: ["X-Pusher-Library"], onRequest: { request in
            seen.record(.text(request.header("x-pusher-library") ?? "missing"))
            return HTTPServerResponse(status: 200)
        })
        let port = fixture.server.port
        _ = try await offPool {
            let socket = try RawTCP.connect(port: port)
            defer { close(socket) }
            return try RawTCP.exchange(socket, "GET / HTTP/1.1\r\nHost: x\r\nX-Pusher-Library: pusher-http-python 3.3.4\r\n\r\n")
        }
        #expect(seen.events == [.text("pusher-http-python 3.3.4")])
        fixture.context.shutdown()
    }

    @Test("without a request handler, plain HTTP gets 404")
    func noHandler() async throws {
        let fixture = try ServerFixture()
        let port = fixture.server.port
        let response = try await offPool {
            let socket = try RawTCP.connect(port: port)
            defer { close(socket) }
            return try RawTCP.exchange(socket, "GET /anything HTTP/1.1\r\nHost: x\r\n\r\n")
        }
        #expect(response.status == 404)
        fixture.context.shutdown()
    }

    @Test("a body over maxHTTPBodySize gets 413 and the connection closes")
    func bodyTooLarge() async throws {
        let fixture = try ServerFixture(options: .init(maxHTTPBodySize: 100), onRequest: Self.reflect)
        let port = fixture.server.port
        let (response, closed) = try await offPool {
            let socket = try RawTCP.connect(port: port)
            defer { close(socket) }
            let response = try RawTCP.exchange(socket, "POST /apps/1/events HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", body: [UInt8](repeating: 0x61, count: 101))
            return (response, RawTCP.peerClosed(socket))
        }
        #expect(response.status == 413)
        #expect(response.headers["connection"] == "close")
        #expect(closed)
        fixture.context.shutdown()
    }

    @Test("a chunked request body is refused with 411 (lws 4.1 never completes one)")
    func chunkedBody() async throws {
        let fixture = try ServerFixture(onRequest: Self.reflect)
        let port = fixture.server.port
        let response = try await offPool {
            let socket = try RawTCP.connect(port: port)
            defer { close(socket) }
            return try RawTCP.exchange(socket, "POST /apps/1/events HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        }
        #expect(response.status == 411)
        fixture.context.shutdown()
    }

    @Test("a response body larger than a frame goes out in pieces, complete")
    func largeResponse() async throws {
        let big = (0..<300_000).map { UInt8(truncatingIfNeeded: $0) }
        let fixture = try ServerFixture(onRequest: { _ in HTTPServerResponse(status: 200, body: big) })
        let port = fixture.server.port
        let response = try await offPool {
            let socket = try RawTCP.connect(port: port)
            defer { close(socket) }
            return try RawTCP.exchange(socket, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        }
        #expect(response.status == 200)
        #expect(response.body == big)
        fixture.context.shutdown()
    }

    @Test("a HEAD request gets the headers and no body")
    func headRequest() async throws {
        let fixture = try ServerFixture(onRequest: { _ in HTTPServerResponse(text: "twelve bytes") })
        let port = fixture.server.port
        let (response, closed) = try await offPool {
            let socket = try RawTCP.connect(port: port)
            defer { close(socket) }
            try RawTCP.send(socket, Array("HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(socket, &chunk, chunk.count, 0)
                guard count > 0 else { return (String(decoding: received, as: UTF8.self), count == 0) }
                received += chunk[0..<count]
            }
        }
        #expect(response.hasPrefix("HTTP/1.1 200"))
        #expect(response.lowercased().contains("content-length: 12"))
        #expect(response.hasSuffix("\r\n\r\n"))
        #expect(closed)
        fixture.context.shutdown()
    }
}
