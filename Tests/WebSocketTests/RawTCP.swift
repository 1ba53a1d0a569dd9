import Foundation
import Glibc

/// Plain TCP on 127.0.0.1 for tests that need a peer this module does not provide: an HTTP
/// client that controls every byte, and listeners that answer badly or not at all.
enum RawTCP {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Connects to 127.0.0.1:`port` with a receive timeout.
    static func connect(port: Int, timeout: Int = 15) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var time = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var address = loopback(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(socket)
            throw Failure(description: "connect: errno \(errno)")
        }
        return socket
    }

    static func loopback(port: Int, host: String = "127.0.0.1") -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = UInt16(port).bigEndian
        return address
    }

    static func send(_ socket: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw Failure(description: "send: errno \(errno)") }
            offset += written
        }
    }

    /// Reads one HTTP/1.1 response with a content-length body (or until the peer closes).
    static func readResponse(_ socket: Int32) throws -> (status: Int, headers: [String: String], body: [UInt8]) {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        func fill() throws -> Bool {
            let count = recv(socket, &chunk, chunk.count, 0)
            if count < 0 { throw Failure(description: "recv: errno \(errno)") }
            buffer.append(contentsOf: chunk[0..<count])
            return count > 0
        }
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var headerEnd: Int?
        while headerEnd == nil {
            headerEnd = buffer.firstRange(of: separator)?.upperBound
            if headerEnd == nil, try !fill() { throw Failure(description: "closed before the headers ended") }
        }
        let head = String(decoding: buffer[..<headerEnd!], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw Failure(description: "bad status line in \(head)") }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = Array(buffer[headerEnd!...])
        if let length = headers["content-length"].flatMap({ Int($0) }) {
            while body.count < length {
                guard try fill() else { break }
                body = Array(buffer[headerEnd!...])
            }
            body = Array(body.prefix(length))
        } else {
            while try fill() { body = Array(buffer[headerEnd!...]) }
        }
        return (status, headers, body)
    }

    /// Sends one request on `socket` and reads its response.
    static func exchange(_ socket: Int32, _ request: String, body: [UInt8] = []) throws -> (status: Int, headers: [String: String], body: [UInt8]) {
        try send(socket, Array(request.utf8) + body)
        return try readResponse(socket)
    }

    /// Whether the peer closed the connection (recv returns 0).
    static func peerClosed(_ socket: Int32) -> Bool {
        var byte: UInt8 = 0
        return recv(socket, &byte, 1, 0) == 0
    }
}

/// A TCP listener on 127.0.0.1 that runs `serve` for each connection on its own thread.
final class RawListener: Sendable {
    let port: Int
    private let socket: Int32

    /// Listens on `host` (an IPv4 loopback address) and `port` (0: a free one).
    init(host: String = "127.0.0.1", port: Int = 0, serve: @escaping @Sendable (Int32) -> Void) throws {
        let listening = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = RawTCP.loopback(port: port, host: host)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listening, $0, length) == 0 && getsockname(listening, $0, &length) == 0
            }
        }
        guard ok, listen(listening, 16) == 0 else {
            close(listening)
            throw RawTCP.Failure(description: "listen: errno \(errno)")
        }
        socket = listening
        self.port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread {
            while true {
                let client = accept(listening, nil, nil)
                guard client >= 0 else { return }
                Thread.detachNewThread { serve(client) }
            }
        }
    }

    /// Stops accepting (the accept loop ends when the socket is shut down).
    func stop() {
        shutdown(socket, Int32(SHUT_RDWR))
        close(socket)
    }
}
