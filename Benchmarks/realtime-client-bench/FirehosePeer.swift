import CCrypto
import Foundation
import Glibc
import RealtimeProtocol

/// A minimal server end of the realtime protocol that sends as fast as the kernel takes bytes:
/// it answers the WebSocket upgrade (RFC 6455 §4.2.2), sends the handshake, confirms the first
/// subscription (or answers the first room join with `joined`), then writes a stream of
/// pre-encoded event frames in 64 KiB writes.
///
/// It exists so that the sender cannot be the bottleneck: the frames are the bytes the
/// reference server would send (`RealtimeMessage.text` in unmasked text frames), but built
/// before the run and written in bulk, so the run measures the client alone. One client per
/// `serve` call; loopback only.
final class FirehosePeer: Sendable {
    /// The listening port on 127.0.0.1.
    let port: Int
    /// The listening socket.
    private let listener: Int32

    /// Listens on 127.0.0.1 on a port the kernel picks.
    ///
    /// - Throws: `BenchFailure` with the failing call and `errno`.
    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw BenchFailure("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(listener, raw, length) == 0 && listen(listener, 4) == 0 && getsockname(listener, raw, &length) == 0
            }
        }
        guard bound else {
            let failure = errno
            close(listener)
            throw BenchFailure("bind/listen on 127.0.0.1: errno \(failure)")
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(listener) }

    /// The stream of one run: `count` `tick` events on `channel` with data `{"seq":N,"p":1.5}`,
    /// each in its own unmasked text frame.
    ///
    /// - Parameters:
    ///   - count: events.
    ///   - channel: the channel name.
    /// - Returns: the frames, back to back.
    static func frames(count: Int, channel: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 80)
        for seq in 0..<count {
            appendFrame(RealtimeMessage(event: "tick", channel: channel, data: "{\"seq\":\(seq),\"p\":1.5}").text, to: &bytes)
        }
        return bytes
    }

    /// Serves one client on the calling thread: accepts it, answers the upgrade, sends the
    /// handshake, waits for its subscribe (or room_join) frame, confirms it, writes `stream`, then reads until
    /// the client closes (or 5 s of silence).
    ///
    /// - Parameters:
    ///   - stream: the frames to send after the confirmation (`frames(count:channel:)`).
    ///   - confirmationData: the channel confirmation's data (a presence list for presence).
    /// - Throws: `BenchFailure` when the client does not upgrade or subscribe, or a write fails.
    func serve(_ stream: [UInt8], confirmationData: String = "{}") throws {
        let client = accept(listener, nil, nil)
        guard client >= 0 else { throw BenchFailure("accept: errno \(errno)") }
        defer { close(client) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var reader = FrameReader(descriptor: client)

        let request = try reader.readRequestHead()
        guard let key = request.split(separator: "\r\n").lazy.compactMap({ line -> Substring? in
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "sec-websocket-key" else { return nil }
            return parts[1].drop { $0 == " " }
        }).first else { throw BenchFailure("firehose: no Sec-WebSocket-Key in \(request.prefix(200))") }
        let response = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(Self.acceptValue(for: String(key)))\r\n\r\n"
        try writeAll(client, Array(response.utf8))

        var greeting: [UInt8] = []
        Self.appendFrame(RealtimeMessage(event: ProtocolNamespace.bird.event(.connectionEstablished),
                                         data: #"{"socket_id":"1.1","activity_timeout":120}"#).text, to: &greeting)
        try writeAll(client, greeting)
        var channel: String?
        var room: String?
        while channel == nil && room == nil {
            let text = try reader.readTextFrame()
            guard let message = try? RealtimeMessage(parsing: text) else { continue }
            if message.event == ProtocolNamespace.bird.event(.subscribe) {
                channel = try? message.decodeData(SubscribeRequest.self).channel
            } else if message.event == ProtocolNamespace.bird.event(.roomJoin) {
                room = try? message.decodeData(RoomJoinRequest.self).room
            }
        }
        var confirmation: [UInt8] = []
        if let room {
            Self.appendFrame(RoomFrame.system(RoomSystemEvent.joined, data: #"{"count":1,"epoch":"bench","id":0}"#, room: room, namespace: .bird),
                             to: &confirmation)
        } else {
            Self.appendFrame(RealtimeMessage(event: ProtocolNamespace.bird.internalEvent(.subscriptionSucceeded), channel: channel, data: confirmationData).text,
                             to: &confirmation)
        }
        try writeAll(client, confirmation + stream)
        // Wait for the client's close (or its silence), so the stream is never cut short.
        while (try? reader.readTextFrame()) != nil {}
    }

    /// `Sec-WebSocket-Accept`: base64 of the SHA-1 of the key and the protocol's GUID
    /// (RFC 6455 §4.2.2).
    /// `count` kept events of `room` as room_event frames, ids 1…count (the same data as the
    /// channel stream's), ready to write.
    static func roomFrames(count: Int, room: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 140)
        for seq in 0..<count {
            let record = RoomEventRecord(id: UInt64(seq + 1), at: 1_764_579_200_000, event: "tick", data: "{\"seq\":\(seq),\"p\":1.5}", from: nil)
            appendFrame(RoomFrame.event(record, room: room, namespace: .bird), to: &bytes)
        }
        return bytes
    }

    static func acceptValue(for key: String) -> String {
        let input = Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = EVP_Digest(input, input.count, &digest, &length, EVP_sha1(), nil)
        return Data(digest.prefix(Int(length))).base64EncodedString()
    }

    /// Appends `text` as one unmasked final text frame (RFC 6455 §5.2).
    static func appendFrame(_ text: String, to bytes: inout [UInt8]) {
        let payload = Array(text.utf8)
        bytes.append(0x81)
        switch payload.count {
        case ..<126:
            bytes.append(UInt8(payload.count))
        case ..<65536:
            bytes.append(126)
            bytes.append(UInt8(payload.count >> 8))
            bytes.append(UInt8(payload.count & 0xFF))
        default:
            bytes.append(127)
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8((payload.count >> shift) & 0xFF)) }
        }
        bytes.append(contentsOf: payload)
    }

    /// Writes all of `bytes` in writes of at most 64 KiB, retrying after `EINTR`.
    private func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, buffer.baseAddress! + offset, min(65536, buffer.count - offset))
                if written < 0 {
                    if errno == EINTR { continue }
                    throw BenchFailure("firehose: write failed, errno \(errno)")
                }
                offset += written
            }
        }
    }
}

/// Reads an HTTP request head and then client WebSocket frames from a blocking socket.
struct FrameReader {
    /// The socket.
    let descriptor: Int32
    /// Bytes read and not yet taken.
    private var buffer: [UInt8] = []

    /// Creates a reader of `descriptor`.
    init(descriptor: Int32) { self.descriptor = descriptor }

    /// Reads up to the blank line that ends the request head.
    ///
    /// - Returns: the head as text.
    /// - Throws: `BenchFailure` when the peer closes or is silent for the socket's timeout.
    mutating func readRequestHead() throws -> String {
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while true {
            if let range = buffer.firstRange(of: end) {
                let head = String(decoding: buffer[..<range.lowerBound], as: UTF8.self)
                buffer.removeSubrange(..<range.upperBound)
                return head
            }
            try fill()
        }
    }

    /// Reads the next text frame, unmasking it; other frames are skipped, a close frame ends
    /// the stream.
    ///
    /// - Returns: the frame's text.
    /// - Throws: `BenchFailure` on close, end of stream or timeout.
    mutating func readTextFrame() throws -> String {
        while true {
            if let (opcode, payload) = takeFrame() {
                if opcode == 0x8 { throw BenchFailure("firehose: the client closed") }
                if opcode == 0x1 { return String(decoding: payload, as: UTF8.self) }
                continue
            }
            try fill()
        }
    }

    /// Removes one complete frame from the buffer, if there is one.
    private mutating func takeFrame() -> (opcode: UInt8, payload: [UInt8])? {
        guard buffer.count >= 2 else { return nil }
        var length = Int(buffer[1] & 0x7F)
        var offset = 2
        if length == 126 {
            guard buffer.count >= 4 else { return nil }
            length = Int(buffer[2]) << 8 | Int(buffer[3])
            offset = 4
        } else if length == 127 {
            guard buffer.count >= 10 else { return nil }
            length = buffer[2..<10].reduce(0) { $0 << 8 | Int($1) }
            offset = 10
        }
        let masked = buffer[1] & 0x80 != 0
        let mask = masked ? Array(buffer[offset..<min(offset + 4, buffer.count)]) : []
        if masked { offset += 4 }
        guard buffer.count >= offset + length else { return nil }
        var payload = Array(buffer[offset..<offset + length])
        if masked { for index in payload.indices { payload[index] ^= mask[index % 4] } }
        let opcode = buffer[0] & 0x0F
        buffer.removeSubrange(..<(offset + length))
        return (opcode, payload)
    }

    /// Appends what the socket has to the buffer.
    private mutating func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { return }
        guard count > 0 else { throw BenchFailure("firehose: the client went away (read \(count), errno \(errno))") }
        buffer.append(contentsOf: chunk[..<count])
    }
}
