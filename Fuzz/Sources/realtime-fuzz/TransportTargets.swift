@testable import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
@testable import WebSocket

/// `FanoutCodec.decode`: what another node (or anything that can publish on the cluster's
/// Redis) puts on a pub/sub channel. The first byte picks the channel's kind. Invariant: a
/// channel, presence or kick message decoded and encoded again decodes to the same message.
let fanoutTarget = FuzzTarget(name: "fanout", summary: "cluster pub/sub messages from Redis: FanoutCodec.decode") { bytes in
    guard let kind = bytes.first else { return }
    let topics: [FanoutTopic] = [.room(app: "1", room: "order:1"), .channel(app: "1", channel: "c"), .app("1")]
    let topic = topics[Int(kind) % topics.count]
    guard let (message, origin) = try? FanoutCodec.decode(Array(bytes.dropFirst()), topic: topic) else { return }
    let again: String
    switch message {
    case .channel(let event): again = FanoutCodec.encode(event, origin: origin ?? "")
    case .presence(let change): again = FanoutCodec.encode(change, origin: origin ?? "")
    case .kickRoomUser(_, let room, let user, let reason): again = FanoutCodec.encodeKick(room: room, user: user, reason: reason, origin: origin ?? "")
    default: return
    }
    guard let origin, !origin.isEmpty, !origin.utf8.contains(0x20) else { return }
    let decoded = try? FanoutCodec.decode(Array(again.utf8), topic: topic)
    require(decoded.map { "\($0.message)" } == "\(message)", "\(message) encoded as \(again.debugDescription) decodes differently")
}

/// The WebSocket connection's receive side (`ConnectionStateMachine.received`, `peerClosed`):
/// the fragments lws hands over, as a peer can split them. Invariants: a delivered message is
/// never larger than the limit; a text message is exactly the valid UTF-8 that was sent; after
/// a close for incoming data nothing more is delivered.
let webSocketFramesTarget = FuzzTarget(name: "websocket-frames", summary: "message fragments and close frames from a peer: WebSocket ConnectionStateMachine") { bytes in
    var reader = FuzzReader(bytes)
    let maxMessageSize = Int(reader.byte()) * 16
    var machine = ConnectionStateMachine(phase: .open, maxMessageSize: maxMessageSize, maxFrameSize: 1024)
    var message: [UInt8] = []
    var binary = false
    var closedForInput = false
    while !reader.isAtEnd {
        let flags = reader.byte()
        let fragment = Array(reader.chunk())
        if flags & 0x80 != 0 {
            machine.peerClosed(payload: fragment)
            continue
        }
        let first = flags & 1 != 0, final = flags & 2 != 0
        if first { message = []; binary = flags & 4 != 0 }
        message += fragment
        switch machine.received(fragment, binary: flags & 4 != 0, first: first, final: final) {
        case .deliver(.text(let text)):
            require(!closedForInput, "a message delivered after the close")
            require(Array(text.utf8) == message && text.utf8.count <= maxMessageSize, "text delivered differs from the bytes sent")
            require(!binary, "a binary message delivered as text")
            message = []
        case .deliver(.binary(let data)):
            require(!closedForInput, "a message delivered after the close")
            require(data == message && data.count <= maxMessageSize, "binary delivered differs from the bytes sent")
            message = []
        case .close(let code, _):
            require(code == .messageTooBig || code == .invalidFramePayloadData, "closed with \(code)")
            if code == .invalidFramePayloadData { require(String(validating: message, as: UTF8.self) == nil, "valid UTF-8 refused") }
            closedForInput = true
        default:
            break
        }
    }
}
