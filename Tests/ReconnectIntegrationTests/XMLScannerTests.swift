import Testing
@testable import xmpp_client

/// The xmpp-client sample's stream reader on libexpat: what real servers send parses the same
/// however the bytes are split, and bytes after a restart point go to the next document.
@Suite("XMPP stream scanner (libexpat)")
struct XMLScannerTests {
    static let header = "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' id='s1' version='1.0' xml:lang='en'>"
    static let stanza = "<message from='a@example.org' type='chat'><body>1 &lt; 2 &amp; &#x263A; <![CDATA[<raw> & ]]></body>"
        + "<x xmlns='urn:example' xmlns:e='urn:extra'><e:item e:kind='k'/></x></message>"

    /// Every event of `text`, fed `size` bytes at a time.
    static func events(_ text: String, chunk size: Int) throws -> [XMLScanner.Event] {
        let scanner = XMLScanner(limit: 1 << 16)
        let bytes = Array(text.utf8)
        var events: [XMLScanner.Event] = []
        var offset = 0
        while offset < bytes.count {
            scanner.append(Array(bytes[offset..<min(offset + size, bytes.count)]))
            offset += size
            while let event = try scanner.next() { events.append(event) }
        }
        return events
    }

    @Test("namespaces, prefixes, entities, character references and CDATA, whole or split into 1 or 5 bytes", arguments: [Int.max, 1, 5])
    func realStanza(chunk: Int) throws {
        let events = try Self.events(Self.header + Self.stanza + "</stream:stream>", chunk: chunk)
        #expect(events.count == 3)
        guard case .streamOpened(let header)? = events.first, case .element(let message) = events[1] else {
            Issue.record("\(events)")
            return
        }
        #expect(header.qualifiedName == "stream:stream")
        #expect(header[attribute: "id"] == "s1" && header[attribute: "xml:lang"] == "en" && header[attribute: "xmlns"] == "jabber:client")
        #expect(message.is("message", "jabber:client"))
        #expect(message[attribute: "type"] == "chat")
        #expect(message.child("body")?.text == "1 < 2 & \u{263A} <raw> & ")
        let extra = message.child("x", namespace: "urn:example")
        #expect(extra?.children.first?.name == "item")
        #expect(extra?.children.first?.namespace == "urn:extra")
        #expect(extra?.children.first?.prefix == "e")
        #expect(extra?.children.first?[attribute: "e:kind"] == "k")
        #expect(events.last == .streamClosed)
    }

    @Test("a restart hands the bytes after its element to the new document (RFC 6120 section 6.4.6)")
    func restartCarriesOver() throws {
        let scanner = XMLScanner()
        let success = "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>"
        scanner.append(Array((Self.header + success + Self.header + "<stream:features/>").utf8))
        guard case .streamOpened? = try scanner.next(), case .element(let element)? = try scanner.next() else {
            Issue.record("no header and success")
            return
        }
        #expect(element.name == "success")
        scanner.restart()
        guard case .streamOpened? = try scanner.next(), case .element(let features)? = try scanner.next() else {
            Issue.record("the second document did not parse")
            return
        }
        #expect(features.is("features", XMLScanner.streamNamespace))
    }
}
