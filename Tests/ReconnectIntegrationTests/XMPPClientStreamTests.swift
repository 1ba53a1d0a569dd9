import Glibc
import LineStream
import Reachability
import Reconnect
import SampleSupport
import TestSupport
import Testing
@testable import xmpp_client

/// `XMPPClientStream` against scripted loopback peers: a whole negotiation however the bytes
/// are cut, and garbage, truncated streams and protocol violations, which must end in a clear
/// `disconnected` and never a crash.
@Suite struct XMPPClientStreamTests {
    static let header = "<?xml version='1.0'?><stream:stream xmlns='jabber:client' "
        + "xmlns:stream='http://etherx.jabber.org/streams' id='s1' from='localhost' version='1.0' xml:lang='en'>"
    static let plainFeatures = "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>"
        + "<mechanism>SCRAM-SHA-1</mechanism><mechanism>PLAIN</mechanism></mechanisms></stream:features>"
    /// What Prosody sends for a whole login, in order (the first session's bind id is `bind-1`).
    static let session = header + plainFeatures
        + "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>"
        + header
        + "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><required/></bind></stream:features>"
        + "<iq id='bind-1' type='result'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@localhost/r&amp;d</jid></bind></iq>"
        + "<message from='bob@localhost/x' xml:lang='en'><body>caf\u{E9} &lt;3 &#x1F426;<![CDATA[ <raw> ]]></body></message>"

    /// A stream to a scripted peer, with its events and stanzas recorded.
    final class Probe: Sendable {
        let server: ScriptedServer
        let stream: XMPPClientStream
        let events = Recorder<StreamRecord>()
        let stanzas = Recorder<XMPPElement>()
        private let tokens: [ObservationToken]

        init(_ server: ScriptedServer, tls: TLSContext? = nil, maximumStanzaSize: Int = 1 << 20) throws {
            self.server = server
            stream = try XMPPClientStream(
                host: "127.0.0.1", port: server.port, jid: "alice@localhost", password: "secret", resource: "r&d",
                tls: tls, maximumStanzaSize: maximumStanzaSize
            )
            let (events, stanzas) = (events, stanzas)
            tokens = [stream.reconnectEvents.observe { events.record(StreamRecord($0)) }, stream.onStanza { stanzas.record($0) }]
        }

        var lastError: XMPPStreamError? { events.lastDisconnectError as? XMPPStreamError }
    }

    @Test("a whole negotiation reaches ready whether the bytes come at once or one by one", arguments: [Int.max, 1, 7])
    func negotiation(chunk: Int) async throws {
        let probe = try Probe(try ScriptedServer(sending: Array(Self.session.utf8), chunk: chunk))
        probe.stream.connect()
        #expect(await probe.events.wait(for: .ready))
        #expect(probe.events.kinds == [.willConnect, .opened, .ready])
        #expect(probe.stream.boundJID == "alice@localhost/r&d")
        #expect(await probe.stanzas.wait { !$0.isEmpty })
        let message = try #require(probe.stanzas.values.first)
        #expect(message.name == "message")
        #expect(message.namespace == "jabber:client")
        #expect(message[attribute: "from"] == "bob@localhost/x")
        #expect(message.child("body")?.text == "caf\u{E9} <3 \u{1F426} <raw> ")
    }

    /// One bad peer and what the stream must make of it.
    struct BadPeer: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let bytes: [UInt8]
        var closeAfterSending = false
        var maximumStanzaSize = 1 << 20
        /// Whether the server's header was good enough to report `opened`.
        let opened: Bool
        let refusal: String?
        let expected: @Sendable (XMPPStreamError) -> Bool

        init(
            _ name: String, _ text: String, bytes: [UInt8] = [], closeAfterSending: Bool = false, maximumStanzaSize: Int = 1 << 20,
            opened: Bool, refusal: String? = nil, expected: @escaping @Sendable (XMPPStreamError) -> Bool
        ) {
            testDescription = name
            self.bytes = Array(text.utf8) + bytes
            self.closeAfterSending = closeAfterSending
            self.maximumStanzaSize = maximumStanzaSize
            self.opened = opened
            self.refusal = refusal
            self.expected = expected
        }
    }

    static func malformed(_ error: XMPPStreamError) -> Bool {
        if case .malformedXML = error { true } else { false }
    }

    static let badPeers: [BadPeer] = [
        BadPeer("an HTTP server", "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", opened: false, expected: malformed),
        BadPeer("binary noise", "", bytes: [0x00, 0xFF, 0x13, 0x37, 0x3C, 0x00, 0x3E, 0xC3], opened: false, expected: malformed),
        BadPeer("a stream in another namespace", "<stream:stream xmlns:stream='urn:wrong' version='1.0'>", opened: false, expected: malformed),
        BadPeer("a comment", header + "<!-- hello -->", opened: true, expected: malformed),
        BadPeer("a processing instruction", header + "<?php echo 1; ?>", opened: true, expected: malformed),
        BadPeer("a DTD", "<!DOCTYPE stream [<!ENTITY a 'b'>]>" + header, opened: false, expected: malformed),
        BadPeer("mismatched tags", header + "<stream:features><a></b></stream:features>", opened: true, expected: malformed),
        BadPeer("an unknown entity", header + "<message><body>&bogus;</body></message>", opened: true, expected: malformed),
        BadPeer("an unbound prefix", header + "<x:y/>", opened: true, expected: malformed),
        BadPeer("an unquoted attribute", header + "<a b=c/>", opened: true, expected: malformed),
        BadPeer("text at stream level", header + "hello", opened: true, expected: malformed),
        BadPeer(
            "an element over the size limit", header + "<message><body>" + String(repeating: "x", count: 5000) + "</body></message>",
            maximumStanzaSize: 1024, opened: true, expected: malformed
        ),
        BadPeer("nesting 100 deep", header + String(repeating: "<a>", count: 100), opened: true, expected: malformed),
        BadPeer(
            "a header cut short", "<?xml version='1.0'?><stream:stream xmlns='jabber:cl", closeAfterSending: true, opened: false,
            expected: { $0 == .connection(.closedByPeer, stage: .negotiating) }
        ),
        BadPeer(
            "features cut short", header + "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mecha",
            closeAfterSending: true, opened: true, expected: { $0 == .connection(.closedByPeer, stage: .negotiating) }
        ),
        BadPeer(
            "a close after SASL success", header + plainFeatures + "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>",
            closeAfterSending: true, opened: true, expected: { $0 == .connection(.closedByPeer, stage: .negotiating) }
        ),
        BadPeer("a stream closed at once", header + "</stream:stream>", opened: true, expected: { $0 == .streamClosedByPeer }),
        BadPeer("no version", "<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>", opened: false) {
            if case .unexpected = $0 { true } else { false }
        },
        BadPeer(
            "no PLAIN mechanism",
            header + "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-1</mechanism></mechanisms></stream:features>",
            opened: true, expected: { $0 == .noSupportedMechanism(offered: ["SCRAM-SHA-1"]) }
        ),
        BadPeer(
            "a system-shutdown stream error",
            header + "<stream:error><system-shutdown xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error>", opened: true,
            expected: { $0 == .streamError(condition: "system-shutdown", text: nil) }
        ),
        BadPeer(
            "a conflict stream error",
            header + "<stream:error><conflict xmlns='urn:ietf:params:xml:ns:xmpp-streams'/>"
                + "<text xmlns='urn:ietf:params:xml:ns:xmpp-streams'>Replaced by new connection</text></stream:error>",
            opened: true, refusal: "conflict",
            expected: { $0 == .streamError(condition: "conflict", text: "Replaced by new connection") }
        ),
        BadPeer(
            "a temporary SASL failure",
            header + plainFeatures + "<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><temporary-auth-failure/></failure>", opened: true,
            expected: { $0 == .authenticationFailed(condition: "temporary-auth-failure", text: nil) }
        ),
    ]

    @Test("a bad peer ends the attempt in disconnected with a clear error, never a crash", arguments: badPeers)
    func badPeer(_ peer: BadPeer) async throws {
        let server = try ScriptedServer(sending: peer.bytes, closeAfterSending: peer.closeAfterSending)
        let probe = try Probe(server, maximumStanzaSize: peer.maximumStanzaSize)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .disconnected))
        var kinds: [StreamRecord.Kind] = [.willConnect]
        if peer.opened { kinds.append(.opened) }
        if let refusal = peer.refusal { kinds.append(.refused(refusal)) }
        kinds.append(.disconnected)
        #expect(probe.events.kinds == kinds)
        let error = try #require(probe.lastError, "no XMPPStreamError in \(probe.events.values)")
        #expect(peer.expected(error), "unexpected \(error)")
        #expect(!probe.stream.isReady)
    }

    @Test("a closed port is a connection error keeping ECONNREFUSED")
    func connectionRefused() async throws {
        let stream = try XMPPClientStream(host: "127.0.0.1", port: try TestSockets.freePort(), jid: "a@localhost", password: "p", resource: "r")
        let events = Recorder<StreamRecord>()
        let token = stream.reconnectEvents.observe { events.record(StreamRecord($0)) }
        defer { token.cancel() }
        stream.connect()
        #expect(await events.wait(for: .disconnected))
        let error = try #require(events.lastDisconnectError as? XMPPStreamError)
        #expect(error.errno == ECONNREFUSED)
        guard case .connection(_, .connecting) = error else {
            Issue.record("expected a failure while connecting, got \(error)")
            return
        }
    }

    @Test("a JID that is not localpart@domainpart, or an empty resource, is refused at creation",
          arguments: ["", "alice", "@localhost", "alice@", "a@b@c", "al ice@localhost", "alice@localhost/res", "al'ice@localhost"])
    func invalidJID(_ jid: String) {
        #expect(throws: XMPPStreamError.invalidJID(jid)) {
            try XMPPClientStream(host: "127.0.0.1", jid: jid, password: "p", resource: "r")
        }
    }

    @Test("an empty resource is refused at creation")
    func emptyResource() {
        #expect(throws: XMPPStreamError.invalidJID("alice@localhost")) {
            try XMPPClientStream(host: "127.0.0.1", jid: "alice@localhost", password: "p", resource: "")
        }
    }
}
