import Foundation
import NetworkLab
import RealtimeProtocol
import WebSocket

/// (7) A replay of 1,000 room events over a 1 Mbit/s link, compressed (`permessage-deflate`,
/// the server's setting: level 1, context kept, memLevel 1) and not: the bytes the server
/// sent through the link, and the time from the join to the last replayed event. The link
/// is a `ShapingProxy` (125,000 bytes a second each way) in front of the embedded server;
/// the client is the WebSocket module's, offering the extension or not.
func deflateOverSlowLink(rounds: Int = 3) {
    do {
        progress("a replay of 1,000 events over 1 Mbit/s, with and without permessage-deflate")
        let room = "slow:1"
        let first = try hub.publishRoom(appID: app.id, room: room, event: "x", data: "{}", rule: RoomRule(history: 1000))
        for index in 1...1000 {
            let data = #"{"player":"user-\#(index % 7)","x":\#(index * 3 % 640),"y":\#(index * 7 % 480),"note":"a short chat line number \#(index)"}"#
            try hub.publishRoom(appID: app.id, room: room, event: "move", data: data)
        }
        let proxy = try ShapingProxy(targetPort: server.port, bytesPerSecond: 125_000)
        defer { proxy.stop() }
        var compressedOptions = WebSocketContext.Options(permessageDeflate: PerMessageDeflate())
        compressedOptions.timeout = .seconds(30)
        let compressing = try WebSocketContext(options: compressedOptions)
        defer { compressing.shutdown() }
        var results: [(compressed: Bool, bytes: [Int], seconds: [Double])] = []
        for (compressed, clientContext) in [(false, context), (true, compressing)] {
            var bytes: [Int] = []
            var seconds: [Double] = []
            for round in 0..<rounds {
                let client = try Client(url: "ws://127.0.0.1:\(proxy.port)/app/\(app.key)", context: clientContext)
                let before = proxy.bytesDown
                let sent = ContinuousClock.now - origin
                client.send(frame(.roomJoin, RoomJoinRequest(room: room, token: token(room, user: "slow\(round)"), since: RoomPosition(epoch: first.epoch, id: first.record.id))))
                guard client.wait(seconds: 120, { $0.joined == 1 && $0.kept == 1000 }) else {
                    fail("slow link round \(round): \(client.state.withLock { $0.kept }) replayed")
                }
                bytes.append(proxy.bytesDown - before)
                seconds.append(milliseconds(client.state.withLock { $0.lastKeptAt } - sent) / 1000)
                client.close()
            }
            results.append((compressed, bytes, seconds))
        }
        for result in results {
            let name = result.compressed ? "permessage-deflate" : "uncompressed"
            record("replay of 1,000 room events, \(name): bytes the server sent through the link (each round)",
                   result.bytes.map { String($0) }.joined(separator: " / "), "—")
            record("replay of 1,000 room events over 1 Mbit/s, \(name): join sent → last replayed event (each round)",
                   result.seconds.map { String(format: "%.2f s", $0) }.joined(separator: " / "), "—")
        }
    } catch {
        fail("slow link: \(error)")
    }
}
