import Foundation
import RealtimeProtocol
import RealtimeServer
import TestSupport
import Testing

/// The server on several service loops (`RealtimeServerOptions.threads`, issue 31): clients
/// spread over the loops by the listener see one server: channel events, client events and a
/// room's events reach every subscriber or member whichever loop serves it, in one order.
@Suite("The server on several service loops")
struct ServiceLoopsTests {
    @Test("with 1 and 3 service loops, 9 members of one room and one channel: every event reaches all of them, room events in one id order", .timeLimit(.minutes(1)), arguments: [1, 3])
    func oneServer(threads: Int) async throws {
        let fixture = try ServerFixture(threads: threads)
        let rule = RoomRule(history: 100, membersSend: true)
        let members = try (0..<9).map { index in
            let client = try RoomClient(fixture)
            #expect(client.joined("chat:1", token: Tokens.make(room: "chat:1", user: "u\(index)", rule: rule)) != nil)
            return client
        }
        for (index, member) in members.enumerated() where index < 3 {
            for count in 0..<3 { member.send(.roomSend, RoomSendRequest(room: "chat:1", event: "m", data: #"{"from":\#(index),"n":\#(count)}"#)) }
        }
        for _ in 0..<3 { try fixture.server.hub.publishRoom(appID: "1", room: "chat:1", event: "m", data: #"{"from":"api"}"#) }
        for member in members {
            #expect(member.wait { $0.frames.filter { $0.room == "chat:1" && $0.event == "m" }.count >= 12 })
        }
        let orders = members.map { member in member.kept("chat:1").map { $0.id ?? 0 } }
        #expect(Set(orders).count == 1, "every member saw the same order")
        #expect(orders[0] == Array(orders[0].sorted()) && Set(orders[0]).count == 12)
        // A channel: the API's event reaches every subscriber.
        for member in members { member.sendRaw(#"{"event":"bird:subscribe","data":{"channel":"news"}}"#) }
        for member in members { #expect(member.wait { $0.messages.contains { $0.event == "bird_internal:subscription_succeeded" } }) }
        fixture.server.hub.publish(appID: "1", channels: ["news"], event: "tick", data: "{}")
        for member in members { #expect(member.wait { $0.messages.contains { $0.event == "tick" } }) }
    }
}
