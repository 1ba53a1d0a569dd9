import Foundation
import Glibc
import SystemSupport
import RealtimeProtocol
import RealtimeServer
import Testing

/// The findings of the hostile trial against rooms (issue 30), each against the real server
/// over real sockets: every one of these once froze, stalled or misled the server.
@Suite("Rooms under attack")
struct HostileRoomTests {
    /// A token for `room` whose header nests an array 511 deep, with a made-up signature: what
    /// anyone who knows only the public app key can send.
    static func forgedDeepToken(room: String) -> String {
        let header = #"{"alg":"HS256","x":"# + String(repeating: "[", count: 511) + String(repeating: "]", count: 511) + "}"
        return "\(base64URL(header.utf8)).\(base64URL(#"{"room":"\#(room)","exp":9999999999}"#.utf8)).\(String(repeating: "A", count: 43))"
    }

    /// base64url without padding (RFC 4648 §5).
    static func base64URL(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "=", with: "")
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }

    /// A token of exactly this header and claims text, signed with the app's secret (JSON a
    /// backend's library would not write, but may be made to sign).
    static func signedToken(header: String = #"{"alg":"HS256","typ":"JWT"}"#, claims: String) -> String {
        let input = "\(base64URL(header.utf8)).\(base64URL(claims.utf8))"
        return "\(input).\(base64URL(Crypto.hmacSHA256(key: ServerFixture.app.secret, message: input)))"
    }

    /// CPU time of the whole process so far, in milliseconds.
    static func processCPU() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000 + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000
    }

    @Test("20 forged joins with 511-deep headers are refused bad_signature for under 1 ms of CPU each; a good client's ping stays under 10 ms", .timeLimit(.minutes(1)))
    func forgedDeepTokens() throws {
        let fixture = try ServerFixture()
        let attacker = try RoomClient(fixture)
        let good = try RoomClient(fixture)
        let forged = Self.forgedDeepToken(room: "order:1")
        #expect(forged.utf8.count < 1600)
        let cpuBefore = Self.processCPU()
        for _ in 0..<20 { attacker.join("order:1", token: forged) }
        var roundTrips: [Duration] = []
        for count in 1...5 {
            let start = ContinuousClock.now
            good.sendRaw(#"{"event":"bird:ping","data":{}}"#)
            #expect(good.wait { $0.messages.filter { $0.event == "bird:pong" }.count >= count })
            roundTrips.append(ContinuousClock.now - start)
        }
        #expect(attacker.wait { $0.frames.filter { $0.event == "error" }.count >= 20 })
        // The process's CPU, both clients' included: an upper bound on the server's.
        let cpu = Self.processCPU() - cpuBefore
        #expect(attacker.system("error", room: "order:1").map { $0.data["code"]?.string } == Array(repeating: "bad_signature", count: 20))
        #expect(cpu < 20, "20 refusals and 5 pings took \(cpu) ms of CPU")
        #expect(roundTrips.sorted()[2] <= .milliseconds(10), "ping round trips during the flood: \(roundTrips)")
        #expect(attacker.closeCode == nil)
    }

    @Test("JSON repeating a member name is refused: a token naming two rooms, room and channel bodies of the HTTP API, a subscribe frame")
    func duplicateNames() async throws {
        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        // PyJWT would read this as order:2, Foundation as order:1.
        let token = Self.signedToken(claims: #"{"room":"order:1","room":"order:2","sub":"ann","exp":9999999999}"#)
        for room in ["order:1", "order:2"] {
            client.join(room, token: token)
            #expect(client.waitFor("error", room: room)?.data["code"]?.string == "invalid_token")
        }
        #expect(fixture.server.hub.roomMembers(appID: "1", room: "order:1").connections == 0)
        #expect(fixture.server.hub.roomMembers(appID: "1", room: "order:2").connections == 0)

        let roomEvent = try await fixture.api("POST", "/apps/1/room_events", body: #"{"name":"m","room":"chat:1","room":"chat:2","data":"{}"}"#)
        #expect(roomEvent.0 == 400)
        let channelEvent = try await fixture.api("POST", "/apps/1/events", body: #"{"name":"m","channel":"a","channel":"b","data":"{}"}"#)
        #expect(channelEvent.0 == 400)
        let batch = try await fixture.api("POST", "/apps/1/batch_room_events", body: #"{"batch":[{"name":"m","room":"chat:1","data":{"a":1,"a":2}}]}"#)
        #expect(batch.0 == 400)
        #expect(try fixture.server.hub.roomHistory(appID: "1", room: "chat:1", before: nil, limit: 10).events.isEmpty)

        client.sendRaw(#"{"event":"bird:subscribe","data":{"channel":"public-a","channel":"private-b"}}"#)
        let error = client.wait { $0.messages.contains { $0.event == "bird:error" } }
        #expect(error)
        #expect(fixture.server.hub.channelCounts(appID: "1").isEmpty)
    }
}
