import Foundation
import RealtimeProtocol
import Testing

/// `StrictJSON.parse` against Foundation's `JSONDecoder` into `JSONValue` on valid text, and
/// against the grammar (`isValid`) on everything.
@Suite("StrictJSON")
struct StrictJSONTests {
    static let valid = [
        #"{"seq":1,"p":1.5}"#, #"{"a":[1,2,{"b":null}],"c":true,"d":false}"#, #"[]"#, #"{}"#, #""plain""#,
        #""\"\\\/\b\f\n\r\t""#, #""\u00e9\u4e2d""#, #""\ud83d\ude00 emoji""#, #"-0"#, #"-12.5e3"#, #"1E-2"#,
        #"123456789012345"#, #"12345678901234567890"#, #" { "space" : [ 1 , 2 ] } "#,
        #""é — ünïcödé""#, #"{"$binary":"AAH/"}"#, #"9007199254740993"#, #"0.1"#,
    ]

    @Test("valid text parses to what JSONDecoder makes of it", arguments: valid)
    func matchesFoundation(text: String) throws {
        let expected = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(StrictJSON.parse(text) == expected)
        #expect(StrictJSON.isValid(text))
    }

    @Test("text the grammar refuses does not parse", arguments: [
        "", " ", "{", "[1,]", #"{"a":1,}"#, "\u{FEFF}{}", "01", "1.", ".5", "+1", "tru", "nul", #""\x""#, #""\u12""#,
        "{\"a\":\"\u{01}\"}", "[1] [2]", "{'a':1}", "NaN", "[1,2", #"{"a" 1}"#,
    ])
    func refuses(text: String) {
        #expect(StrictJSON.parse(text) == nil)
        #expect(!StrictJSON.isValid(text))
    }

    @Test("a lone surrogate becomes U+FFFD; a repeated key keeps its last value (as JSONSerialization); nesting deeper than 64 is refused")
    func edges() {
        #expect(StrictJSON.parse(#"{"k":1,"k":2}"#) == .object(["k": .number(2)]))
        #expect(StrictJSON.parse(#""a\ud800b""#) == .string("a\u{FFFD}b"))
        #expect(StrictJSON.parse(#""\udc00""#) == .string("\u{FFFD}"))
        #expect(StrictJSON.parse(String(repeating: "[", count: 64) + String(repeating: "]", count: 64)) != nil)
        #expect(StrictJSON.parse(String(repeating: "[", count: 65) + String(repeating: "]", count: 65)) == nil)
        #expect(StrictJSON.parse(String(repeating: "[", count: 100_000)) == nil, "deep input costs no stack")
    }

    @Test("roomEvent reads event, data as sent and meta in one pass, in any member order")
    func roomEvent() throws {
        let record = RoomEventRecord(id: 42, at: 1_764_579_200_123, event: "updated", data: #"{"s": "p\u00e9", "n":[1, 2.5]}"#, from: "ann")
        let kept = try #require(StrictJSON.roomEvent(record.json(replayed: true)))
        #expect(kept.event == "updated" && kept.data == record.data, "data is the text as sent, spaces and escapes included")
        #expect(kept.meta?.id == 42 && kept.meta?.at == 1_764_579_200_123 && kept.meta?.from == "ann" && kept.meta?.replayed == true)
        let system = try #require(StrictJSON.roomEvent(#"{"event":"joined","data":{"epoch":"e","id":0}}"#))
        #expect(system.meta == nil && system.data == #"{"epoch":"e","id":0}"#)
        let reordered = try #require(StrictJSON.roomEvent(#" {"meta":{"id":1,"at":2,"from":null,"x":[1]},"other":true,"event":"e"} "#))
        #expect(reordered.meta?.id == 1 && reordered.meta?.from == nil && reordered.data == "null")
        #expect(StrictJSON.roomEvent(#"{"event":"e","meta":null}"#)?.meta == nil)
        // Keys are compared by their decoded text: escaped names are the same members.
        let escaped = try #require(StrictJSON.roomEvent(#"{"\u0065vent":"e","d\u0061ta":[1],"meta":{"\u0069d":3,"at":4,"x\"":1}}"#))
        #expect(escaped.event == "e" && escaped.data == "[1]" && escaped.meta?.id == 3 && escaped.meta?.at == 4)
        #expect(StrictJSON.parse(#"{"\u0065":1,"a\nb":2}"#) == .object(["e": .number(1), "a\nb": .number(2)]))
        for bad in [#"{"data":1}"#, #"{"event":1}"#, #"{"event":"e","meta":{"id":0,"at":1}}"#, #"{"event":"e","meta":{"id":1.5,"at":1}}"#,
                    #"{"event":"e","meta":{"id":1}}"#, #"{"event":"e","meta":{"id":1,"at":1,"from":3}}"#, #"{"event":"e","data":[1,]}"#,
                    #"{"event":"e"} x"#, #"{"event":"e","meta":{"id":12345678901234567,"at":1}}"#, "[]"] {
            #expect(StrictJSON.roomEvent(bad) == nil, "\(bad)")
        }
    }

    @Test("a JSONValue prints as compact JSON with sorted keys (print(data) in an app), a non-finite number as itself")
    func jsonValuePrintsAsJSON() {
        let data: JSONValue = .object(["status": .string("shipped"), "n": .number(2), "tags": .array([.bool(true), .null, .string("a/b")])])
        #expect("\(data)" == #"{"n":2,"status":"shipped","tags":[true,null,"a/b"]}"#)
        #expect(String(reflecting: data) == "\(data)")
        #expect(JSONValue.string("x").description == #""x""#)
        #expect(JSONValue.object(["a": .number(.infinity)]).description == #"{"a":inf}"#)
    }

    @Test("a number is the Double strtod reads, bit for bit, on the exact fast path and past it")
    func numbersAsStrtod() {
        // Decimals of 1-17 digits with the point anywhere, signs, zeros and exponents: the fast
        // path takes those of up to 15 digits without an exponent, strtod the rest.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 11
        }
        var texts = ["0", "-0", "0.0", "-0.0", "0.1", "0.3", "1.5", "123456789012345", "1234567890123456",
                     "0.000000000000000000001", "0.0000000000000000000001", "9.999999999999999", "1e2", "-2.5E-3"]
        for _ in 0..<20_000 {
            let digits = String(next() % 100_000_000_000_000_000).prefix(Int(next() % 17) + 1)
            let point = Int(next() % UInt64(digits.count + 1))
            var text = point == digits.count ? String(digits) : String(digits.prefix(point).isEmpty ? "0" : digits.prefix(point)) + "." + digits.dropFirst(point)
            if next() % 4 == 0 { text = "-" + text }
            texts.append(text)
        }
        for text in texts {
            guard case .number(let value)? = StrictJSON.parse(text), let expected = Double(text) else {
                Issue.record("\(text) did not parse as a number")
                continue
            }
            #expect(value.bitPattern == expected.bitPattern, "\(text): \(value) against strtod's \(expected)")
        }
    }
}
