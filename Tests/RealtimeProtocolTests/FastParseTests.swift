@testable import RealtimeProtocol
import ReconnectTesting
import Testing

/// `RealtimeMessage(parsing:)` takes a fast path for flat objects of strings; it must give
/// exactly what the `JSONSerialization` path gives, errors included.
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
        #"{"event":"a","data":"\ud83d"}"#,
        #"{"event":"a","data":"\ude00x"}"#,
        #"{"event":"a","data":"\u12"}"#,
        #"{"event":"a","data":"\x"}"#,
        "{\"event\":\"a\",\"data\":\"raw\u{01}control\"}",
        #"{"event":"","data":"x"}"#,
        #"{"event":null}"#,
        #"{"data":"x"}"#,
        #"{}"#,
        #"{"event":"a","event":"b"}"#,
        #"{"event":"a","data":{"nested":true}}"#,
        #"{"event":"a","data":[1,2]}"#,
        #"{"event":"a","data":true}"#,
        #"{"event":"a","data":1.50}"#,
        #"{"event":"a","user_id":12345678901}"#,
        #"{"event":"a","channel":5}"#,
        #"{"event":"a",}"#,
        #"{"event":"a"} trailing"#,
        #"{"event":"a""#,
        #"{"event" "a"}"#,
        #"["event","a"]"#,
        #""just a string""#,
        "",
        "{",
        #"{"event":"a","data":"unterminated}"#,
        #"{"event":"a","data":nul}"#,
    ]

    @Test("known frames: the fast path equals JSONSerialization's", arguments: cases)
    func known(_ text: String) {
        let (fast, slow) = Self.both(text)
        #expect(fast == slow, "\(text)")
    }

    @Test("random token soups and random flat objects: the fast path equals JSONSerialization's")
    func fuzz() {
        var random = SeededRandomNumberGenerator(seed: 20261129)
        let tokens = ["{", "}", ":", ",", " ", "\n", #""event""#, #""channel""#, #""data""#, #""user_id""#, #""a""#, #""""#,
                      #""x\"y""#, #""\u00e9""#, #""\ud83d\ude00""#, #""\ud83d""#, #""\q""#, "null", "true", "1", "[", "]", #""é""#, "\"\u{02}\""]
        for _ in 0..<5_000 {
            let text = (0..<Int.random(in: 1...12, using: &random)).map { _ in tokens.randomElement(using: &random)! }.joined()
            let (fast, slow) = Self.both(text)
            #expect(fast == slow, "\(text)")
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
