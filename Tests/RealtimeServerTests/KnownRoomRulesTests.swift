@testable import RealtimeServer
import RealtimeProtocol
import Testing

@Suite("Known room rules")
struct KnownRoomRulesTests {
    static func record(_ history: Int) -> RoomRuleRecord { RoomRuleRecord(rule: RoomRule(history: history), issuedAt: history) }

    @Test("at the bound the oldest remembered room is forgotten first; remembering a room again updates it in place")
    func oldestFirst() {
        var rules = KnownRoomRules(limit: 3)
        for index in 1...3 { rules.remember(Self.record(index), for: "r\(index)") }
        rules.remember(Self.record(10), for: "r1")
        #expect(rules.count == 3 && rules["r1"] == Self.record(10))
        rules.remember(Self.record(4), for: "r4")
        #expect(rules.count == 3 && rules["r1"] == nil && rules["r2"] == Self.record(2) && rules["r4"] == Self.record(4))
        for index in 5...5_000 { rules.remember(Self.record(index), for: "r\(index)") }
        #expect(rules.count == 3 && (4_998...5_000).allSatisfy { rules["r\($0)"] == Self.record($0) })
    }

    @Test(
        "300,000 rooms' rules remembered by the hub past its bound of 100,000 cost each the same (issue 47, item 8: evicting a dictionary's first key scanned its table, 100–250 ms pings at the cap)",
        .timeLimit(.minutes(1)))
    func hubPastTheBound() {
        let fixture = HubFixture()
        let hub = fixture.hub
        hub.withState { state in
            for index in 0..<300_000 {
                hub.rememberRule(Self.record(index % 1000), room: "open:\(index)", app: "1", in: &state)
            }
        }
        let (count, oldest, newest) = hub.withState { state in
            (state.knownRules["1"]?.count, state.knownRules["1"]?["open:0"], state.knownRules["1"]?["open:299999"])
        }
        #expect(count == RealtimeHub.maxKnownRules && oldest == nil && newest == Self.record(999))
    }
}
