@testable import RealtimeProtocol
import ReconnectTesting
import Testing

/// `RealtimeMessage(parsing:)` reads frames in one pass (`ProtocolFrameScanner`). Against
/// `JSONSerialization` as the reference: the same verdict (JSON or not, an object or not), the
/// same errors and the same members; except that a non-string `data` is kept as sent (the
/// reference re-encodes it with sorted keys), a lone surrogate escape is refused (RFC 8259
/// §8.2), and nesting is bounded.
@Suite struct FastParseTests {
    static func both(_ text: String) -> (fast: Result<RealtimeMessage, ProtocolError>, slow: Result<RealtimeMessage, ProtocolError>) {
        (Result { () throws(ProtocolError) in try RealtimeMessage(parsing: text) },
         Result { () throws(ProtocolError) in try RealtimeMessage(parsingWithFoundation: text) })
    }

    static let cases: [String] = [
        #"{"event":"bird:ping","data":"{}"}"#,
        #"{"event":"tick","channel":"prices","data":"{\"p\":1.5}"}"#,
        #" { "event" : "a" , "data" : null , "channel" : null } "#,
        #"{"event":"a","user_id":"u1"}"#,
        #"{"event":"a","data":"line\nbreak \"quoted\" \\ \/ \b\f\r\t"}"#,
        #"{"event":"a","data":"\u00e9\u4e2d\ud83d\ude00 é 中 😀"}"#,
        #"{"event":"a","data":"\u12"}"#,
        #"{"event":"a","data":"\x"}"#,
        "{\"event\":\"a\",\"data\":\"raw\u{01}control\"}",
        #"{"event":"","data":"x"}"#,
        #"{"event":null}"#,
        #"{"data":"x"}"#,
        #"{}"#,
        #"{"event":"a","event":"b"}"#,
        #"{"event":"a","user_id":12345678901}"#,
        #"{"event":"a","channel":5}"#,
        #"{"event":"a","other":{"deep":[1,{"x":null}]},"data":"kept"}"#,
        #"{"event":"a"} trailing"#,
        #"{"event":"a""#,
        #"{"event" "a"}"#,
        #"["event","a"]"#,
        #""just a string""#,
        "",
        "{",
        #"{"event":"a","data":"unterminated}"#,
        #"{"event":"a","data":nul}"#,
        #"{"event":"a","data":01}"#,
        #"{"event":"a","data":1.}"#,
        #"{"event":"a","data":-}"#,
        #"{"event":"a","data":{"k"}}"#,
        // Escapes next to the closing quote, and a backslash as the text's last byte.
        #"{"event":"a","data":"\\"}"#,
        #"{"event":"a","data":"\"","channel":"c"}"#,
        #"{"event":"a","data":"x\u00"}"#,
        #"{"event":"a","data":"x\u00e9\"}"#,
        #"{"event":"a","data":"ends in a backslash\"#,
        #"{"event":"a","data":"\ud83d\ude00\"\\"}"#,
    ]

    @Test("known frames: the same verdict and members as JSONSerialization", arguments: cases)
    func known(_ text: String) {
        let (fast, slow) = Self.both(text)
        #expect(fast == slow, "\(text)")
    }

    @Test("a non-string data is kept as its JSON text, exactly as sent", arguments: [
        (#"{"event":"a","data":{"z":1,"a":[true,null]}}"#, #"{"z":1,"a":[true,null]}"#),
        (#"{"event":"a","data":[1, 2]}"#, "[1, 2]"),
        (#"{"event":"a","data":true}"#, "true"),
        (#"{"event":"a","data":1.50}"#, "1.50"),
        (#"{"event":"a","data":-0.5e+3}"#, "-0.5e+3"),
        (#"{"event":"a","data":{"s":"\u00e9\""}}"#, #"{"s":"\u00e9\""}"#),
    ])
    func rawData(_ text: String, _ data: String) throws {
        #expect(try RealtimeMessage(parsing: text).data == data)
    }

    @Test("trailing commas are refused (RFC 8259 §4, §5), which the reference lets through", arguments: [
        #"{"event":"a",}"#, #"{"event":"a","data":[1,]}"#, #"{"event":"a","x":{"k":1,}}"#,
    ])
    func trailingCommas(_ text: String) {
        #expect(throws: ProtocolError.malformedJSON(String(text.prefix(80)))) { try RealtimeMessage(parsing: text) }
    }

    @Test("a lone surrogate escape is refused as malformed JSON (RFC 8259 §8.2)", arguments: [
        #"{"event":"a","data":"\ud83d"}"#, #"{"event":"a","data":"\ude00x"}"#, #"{"event":"a","x":"\ud83dz"}"#,
    ])
    func loneSurrogates(_ text: String) {
        #expect(throws: ProtocolError.malformedJSON(String(text.prefix(80)))) { try RealtimeMessage(parsing: text) }
    }

    @Test("nesting deeper than 32 levels is refused before anything is built, anywhere in the frame")
    func depth() throws {
        let deep = String(repeating: "[", count: 31) + String(repeating: "]", count: 31)
        #expect(try RealtimeMessage(parsing: #"{"event":"a","data":\#(deep)}"#).data == deep)
        let tooDeep = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(throws: ProtocolError.tooDeep(limit: 32)) { try RealtimeMessage(parsing: #"{"event":"a","data":\#(tooDeep)}"#) }
        #expect(throws: ProtocolError.tooDeep(limit: 32)) { try RealtimeMessage(parsing: #"{"event":"a","x":\#(String(repeating: "{\"k\":", count: 40))1\#(String(repeating: "}", count: 40))}"#) }
        // 100,000 levels would overflow a recursive parser's stack: refused at level 33.
        #expect(throws: ProtocolError.tooDeep(limit: 32)) { try RealtimeMessage(parsing: #"{"event":"a","data":\#(String(repeating: "[", count: 100_000))}"#) }
    }

    @Test("random token soups and random flat objects: the same verdict, event and channel as JSONSerialization")
    func fuzz() {
        var random = SeededRandomNumberGenerator(seed: 20261129)
        let tokens = ["{", "}", ":", ",", " ", "\n", #""event""#, #""channel""#, #""data""#, #""user_id""#, #""a""#, #""""#,
                      #""x\"y""#, #""\u00e9""#, #""\ud83d\ude00""#, #""\q""#, "null", "true", "1", "[", "]", #""é""#, "\"\u{02}\""]
        for _ in 0..<5_000 {
            let text = (0..<Int.random(in: 1...12, using: &random)).map { _ in tokens.randomElement(using: &random)! }.joined()
            let (fast, slow) = Self.both(text)
            switch (fast, slow) {
            case (.success(let a), .success(let b)):
                #expect(a.event == b.event && a.channel == b.channel, "\(text)")
            case (.failure(let a), .failure(let b)):
                #expect(a == b, "\(text)")
            default:
                // Where they may differ: the reference takes user_id true as a number and lets
                // trailing commas through; the scanner refuses both.
                let squeezed = text.filter { !$0.isWhitespace }
                if !text.contains("true"), !squeezed.contains(",}"), !squeezed.contains(",]") {
                    Issue.record("different verdicts for \(text): \(fast) / \(slow)")
                }
            }
        }
        let values = [#""v""#, "null", #""\\n\"""#, #""\u0041\u00e9""#, #""😀""#, #""""#]
        let keys = [#""event""#, #""channel""#, #""data""#, #""user_id""#, #""other""#]
        for _ in 0..<5_000 {
            let members = (0..<Int.random(in: 0...5, using: &random)).map { _ in
                "\(keys.randomElement(using: &random)!):\(values.randomElement(using: &random)!)"
            }
            let text = "{" + members.joined(separator: ",") + "}"
            let (fast, slow) = Self.both(text)
            #expect(fast == slow, "\(text)")
        }
    }

    @Test("text writes exactly JSONEncoder's bytes (sorted keys, slashes unescaped)")
    func textEqualsEncoder() {
        var random = SeededRandomNumberGenerator(seed: 7)
        let pieces = ["a", "é", "中", "😀", "\"", "\\", "/", "\u{00}", "\u{01}", "\u{08}", "\u{09}", "\u{0A}", "\u{0C}", "\u{0D}",
                      "\u{1F}", "\u{7F}", "\u{2028}", "\u{2029}", "{\"p\":1}", " ", "\r\n"]
        func text() -> String { (0..<Int.random(in: 0...8, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined() }
        for _ in 0..<3_000 {
            let message = RealtimeMessage(event: text(), channel: Bool.random(using: &random) ? text() : nil,
                                          data: Bool.random(using: &random) ? text() : nil, userID: Bool.random(using: &random) ? text() : nil)
            #expect(message.text == message.encoderText)
            #expect((try? RealtimeMessage(parsing: message.text)) == (message.event.isEmpty ? nil : message))
        }
    }
}
