import Dispatch
import Foundation
import SystemSupport
import Reachability
import Reconnect
import LineStream

/// A minimal XMPP client stream (RFC 6120) that a `Reconnector` can keep alive: stream header
/// (section 4), TLS (section 5), SASL PLAIN (section 6, RFC 4616), resource binding (section 7)
/// and initial presence (RFC 6121 section 4.2).
///
/// With a `TLSContext` the stream is always encrypted, two ways (`ConnectMethod`): `.standard`
/// connects to `port` and upgrades with STARTTLS, refusing a server that does not offer it;
/// `.directTLS` (XMPPFramework's "old school" secure connect, XEP-0368) speaks TLS from the
/// first byte on `directTLSPort`. The certificate is checked against the context's CAs and
/// the JID's domain (RFC 6120 section 13.7.2). The reconnector reconnects with the method the
/// app last connected with. Without a context the stream is plain TCP: for a loopback server
/// such as the sample's private Prosody (`allow_unencrypted_plain_auth`), never a network.
///
/// ```swift
/// let stream = try XMPPClientStream(host: "xmpp.example.org", jid: "alice@example.org",
///                                   password: "secret", resource: "phone",
///                                   tls: TLSContext(caFile: "/etc/ssl/certs/ca-certificates.crt"))
/// reconnector.activate(stream)
/// stream.connect(using: .directTLS)    // or connect(): STARTTLS on port 5222
/// ```
///
/// Events (`reconnectEvents`): `willConnect`; `opened` once connected (and, for direct TLS,
/// secured) and the server's first stream header has arrived; `ready` once the resource is
/// bound and initial presence sent. A certificate that does not verify reports
/// `refused(reason: "certificate-rejected")`, a server without STARTTLS
/// `refused(reason: "starttls-not-offered")`, so the reconnector never loops on them.
/// A stream error `<conflict/>` (another login with the same resource, section 4.9.3.3) and
/// the other terminal conditions (`not-authorized`, `host-unknown`) report `refused(reason:)`
/// with the condition, then `disconnected`; so does a SASL failure (`not-authorized`, …)
/// other than `temporary-auth-failure` (section 6.5). Everything else — end of file, a reset,
/// `system-shutdown`, malformed XML — is a plain `disconnected` with an `XMPPStreamError`.
/// `verifyConnection()` sends an XMPP ping (XEP-0199) and expects the reply within
/// `pingTimeout`.
///
/// Thread-safe: methods may be called from any thread; the work, the events and the stanza
/// handlers run on the stream's private serial queue, in order.
public final class XMPPClientStream: ReconnectableStream {
    /// The standard client-to-server port (RFC 6120 section 14.7).
    public static let defaultPort: UInt16 = 5222
    /// The usual direct TLS port (XEP-0368's `_xmpps-client` records mostly name 5223, the
    /// legacy SSL port).
    public static let defaultDirectTLSPort: UInt16 = 5223

    private enum Step {
        case connecting
        /// The TLS handshake: right after connecting (direct TLS) or after `<proceed/>`.
        case securing
        case awaitingHeader(authenticated: Bool)
        case awaitingFeatures(authenticated: Bool)
        /// `<starttls/>` sent, waiting for `<proceed/>` (RFC 6120 section 5.4.2).
        case startingTLS
        case authenticating
        case binding(id: String)
        case ready

        var stage: XMPPStreamError.Stage {
            switch self {
            case .connecting: .connecting
            case .securing, .startingTLS: .securing
            case .awaitingHeader, .awaitingFeatures: .negotiating
            case .authenticating: .authenticating
            case .binding: .binding
            case .ready: .ready
            }
        }
    }

    private struct Session {
        let connection: TCPConnection
        let id: UInt64
        let method: ConnectMethod
        var step = Step.connecting
        /// Set when the TLS handshake starts; every byte after it goes through it.
        var tls: TLSSession?
        /// Whether `opened` was reported (the first stream header of the session).
        var announcedOpen = false
    }

    private struct State {
        var session: Session?
        var scanner: XMLScanner
        var nextID: UInt64 = 0
        var pendingPing: (session: UInt64, id: String)?
        var pingSequence = 0
        var pingTimeout = Duration.seconds(2)
        var connectTimeout = Duration.seconds(30)
        var password: String
        var boundJID: String?
        var lastConnectMethod = ConnectMethod.standard
    }

    private enum Namespace {
        static let client = "jabber:client"
        static let streams = XMLScanner.streamNamespace
        static let streamErrors = "urn:ietf:params:xml:ns:xmpp-streams"
        static let tls = "urn:ietf:params:xml:ns:xmpp-tls"
        static let sasl = "urn:ietf:params:xml:ns:xmpp-sasl"
        static let bind = "urn:ietf:params:xml:ns:xmpp-bind"
        static let stanzaErrors = "urn:ietf:params:xml:ns:xmpp-stanzas"
        static let ping = "urn:xmpp:ping"
    }

    /// Stream error conditions that another attempt cannot cure (RFC 6120 sections 4.9.3.3,
    /// 4.9.3.6, 4.9.3.12): reported as `refused`.
    public static let terminalStreamErrors: Set<String> = ["conflict", "host-unknown", "not-authorized"]

    /// The host connected to (name or literal), watched for reachability by the reconnector.
    public let destinationHost: String
    /// The TCP port for `.standard` connects (STARTTLS when `tls` is set).
    public let port: UInt16
    /// The TCP port for `.directTLS` connects.
    public let directTLSPort: UInt16
    /// What TLS trusts; `nil` for a plain stream (loopback only).
    public let tls: TLSContext?
    /// The bare JID logged in as, `localpart@domainpart`.
    public let jid: String
    /// The domainpart of `jid`: the `to` of the stream header.
    public let domain: String
    /// The resource asked for at binding.
    public let resource: String
    /// Where the stream reports to its `Reconnector` (and to observers, such as `EventLog`).
    public let reconnectEvents = StreamEventRelay()
    private let localpart: String
    private let openSocket: TCPConnection.OpenSocket
    private let queue = DispatchQueue(label: "XMPPClientStream")
    private let state: Locked<State>
    private let stanzaListeners = ObserverList<XMPPElement>()

    /// Creates a disconnected stream; `connect()` starts it.
    ///
    /// - Parameters:
    ///   - host: the server's address or name (the stream's `to` is the JID's domain).
    ///   - port: the TCP port (5222 by default).
    ///   - jid: the bare JID, `localpart@domainpart`.
    ///   - password: the password for SASL PLAIN.
    ///   - resource: the resource to bind (RFC 6120 section 7).
    ///   - tls: the CAs to verify the server with; every session is then encrypted (STARTTLS
    ///     or direct TLS). `nil` (the default) for a plain stream, on loopback only.
    ///   - directTLSPort: the port for `connect(using: .directTLS)` (5223 by default).
    ///   - maximumStanzaSize: the largest element accepted from the server, in bytes (1 MiB
    ///     by default); a larger one is malformed input.
    ///   - openSocket: creates the socket for an address family (`socket(2)` by default).
    /// - Throws: `XMPPStreamError.invalidJID` when `jid` is not `localpart@domainpart` or
    ///   `resource` is empty.
    public init(
        host: String,
        port: UInt16 = XMPPClientStream.defaultPort,
        jid: String,
        password: String,
        resource: String,
        tls: TLSContext? = nil,
        directTLSPort: UInt16 = XMPPClientStream.defaultDirectTLSPort,
        maximumStanzaSize: Int = 1 << 20,
        openSocket: @escaping TCPConnection.OpenSocket = TCPConnection.defaultOpenSocket
    ) throws(XMPPStreamError) {
        guard let (localpart, domain) = Self.parse(jid), !resource.isEmpty else { throw .invalidJID(jid) }
        destinationHost = host
        self.port = port
        self.directTLSPort = directTLSPort
        self.tls = tls
        self.jid = jid
        self.localpart = localpart
        self.domain = domain
        self.resource = resource
        self.openSocket = openSocket
        state = Locked(State(scanner: XMLScanner(limit: maximumStanzaSize), password: password))
    }

    /// The password used at the next authentication.
    public var password: String {
        get { state.withLock { $0.password } }
        set { state.withLock { $0.password = newValue } }
    }

    /// How long a connection attempt may take to become ready (30 s by default, as
    /// XMPPFramework's `connectWithTimeout:` takes one): past it the attempt ends with
    /// `connectTimedOut`, the app's own `connect()` as much as the reconnector's attempts.
    public var connectTimeout: Duration {
        get { state.withLock { $0.connectTimeout } }
        set { state.withLock { $0.connectTimeout = newValue } }
    }

    /// How long `verifyConnection()` waits for the ping's reply (2 s by default).
    public var pingTimeout: Duration {
        get { state.withLock { $0.pingTimeout } }
        set { state.withLock { $0.pingTimeout = newValue } }
    }

    /// The full JID the server bound (`alice@localhost/phone`), `nil` when not ready.
    public var boundJID: String? { state.withLock { $0.boundJID } }

    /// How the current session connects (`nil` when disconnected).
    public var connectMethod: ConnectMethod? { state.withLock { $0.session?.method } }

    /// The TLS version of the current session once its handshake completed ("TLSv1.3");
    /// `nil` for a plain session, before the handshake, and when disconnected.
    public var tlsProtocolVersion: String? { state.withLock { $0.session?.tls?.protocolVersion } }

    /// How the app last connected (`connect()` is `.standard`): the reconnector reconnects
    /// the same way (XMPPReconnect's `usesOldSchoolSecureConnect`).
    public var lastConnectMethod: ConnectMethod { state.withLock { $0.lastConnectMethod } }

    /// Whether the stream is ready (bound, initial presence sent).
    public var isReady: Bool {
        state.withLock { if case .ready? = $0.session?.step { true } else { false } }
    }

    // MARK: - The app's API

    /// Connects the standard way (STARTTLS on `port` when `tls` is set), as the app's own
    /// connect call; does nothing unless disconnected.
    public func connect() {
        connect(using: .standard)
    }

    /// Connects with `method` and remembers it for reconnects: `.standard`, or `.directTLS`
    /// (TLS from the first byte on `directTLSPort`, XEP-0368). Does nothing unless
    /// disconnected. A method the stream does not have (`.directTLS` without `tls`) reports
    /// `refused(reason: "unsupported-connect-method")`.
    ///
    /// - Parameter method: how to connect.
    public func connect(using method: ConnectMethod) {
        state.withLock { $0.lastConnectMethod = method }
        startConnectAttempt(using: method)
    }

    /// Disconnects on purpose: reports `toldToDisconnect`, sends unavailable presence and the
    /// stream's end tag when ready, closes the socket, then reports `disconnected(error: nil)`.
    /// Also when already disconnected, so that a reconnect process in progress stops.
    public func disconnect() {
        queue.async { [self] in
            reconnectEvents.send(.toldToDisconnect)
            if let session = endSession(nil) {
                switch session.step {
                case .connecting:
                    break
                case .ready:
                    // RFC 6121 section 4.6: unavailable presence before closing the stream.
                    sendClosing("<presence type='unavailable'/></stream:stream>", in: session)
                case .securing:
                    sendClosing(nil, in: session)
                default:
                    sendClosing("</stream:stream>", in: session)
                }
                session.connection.close()
            }
            reconnectEvents.send(.disconnected(error: nil))
        }
    }

    /// Sends raw XML (a stanza) when the stream is ready; the caller escapes it.
    ///
    /// - Parameter xml: one or more complete stanzas.
    /// - Returns: whether the stream was ready; otherwise nothing is sent.
    @discardableResult
    public func send(rawXML xml: String) -> Bool {
        guard isReady else { return false }
        queue.async { [self] in
            guard let session = state.withLock({ $0.session }), case .ready = session.step else { return }
            send(xml, in: session)
        }
        return true
    }

    /// Calls `handler` with each stanza received once ready (messages, presence, and iq the
    /// stream does not answer itself), on the stream's queue, in order.
    ///
    /// - Parameter handler: receives the stanzas.
    /// - Returns: a token whose `cancel()` removes the handler.
    public func onStanza(_ handler: @escaping @Sendable (XMPPElement) -> Void) -> ObservationToken {
        stanzaListeners.add(handler)
    }

    /// Every stanza received from now on, as an `AsyncStream` (unbounded buffer).
    ///
    /// - Returns: the stanzas.
    public func stanzas() -> AsyncStream<XMPPElement> {
        stanzaListeners.stream()
    }

    // MARK: - ReconnectableStream

    /// Starts a connection attempt the way the app last connected (`lastConnectMethod`).
    public func startConnectAttempt() {
        startConnectAttempt(using: lastConnectMethod)
    }

    /// Starts a connection attempt with `method`: `willConnect`, then `opened` and `ready`, or
    /// `refused`/`disconnected`. Does nothing unless disconnected.
    ///
    /// - Parameter method: `.standard` or `.directTLS` (which needs `tls`).
    public func startConnectAttempt(using method: ConnectMethod) {
        queue.async { [self] in
            let supported = method == .standard || (method == .directTLS && tls != nil)
            let started = state.withLock { state -> (TCPConnection, UInt64, Duration)? in
                guard state.session == nil, supported else { return nil }
                state.nextID += 1
                let id = state.nextID
                let port = method == .directTLS ? directTLSPort : port
                let connection = TCPConnection(host: destinationHost, port: port, queue: queue, openSocket: openSocket) { [weak self] event in
                    self?.connectionEvent(event, id: id)
                }
                state.session = Session(connection: connection, id: id, method: method)
                state.scanner = XMLScanner(limit: state.scanner.limit)
                state.boundJID = nil
                return (connection, id, state.connectTimeout)
            }
            guard let (connection, id, timeout) = started else {
                if !supported, state.withLock({ $0.session == nil }) {
                    reconnectEvents.send(.willConnect)
                    reconnectEvents.send(.refused(reason: "unsupported-connect-method"))
                    reconnectEvents.send(.disconnected(error: XMPPStreamError.unsupportedConnectMethod(method)))
                }
                return
            }
            reconnectEvents.send(.willConnect)
            connection.start()
            queue.asyncAfter(deadline: .now() + timeout.dispatchInterval) { [weak self] in
                guard let self, let session = state.withLock({ $0.session }), session.id == id else { return }
                if case .ready = session.step { return }
                fail(.connectTimedOut(timeout: timeout, stage: session.step.stage), session: id, closing: nil)
            }
        }
    }

    /// Gives up a negotiation in progress (TCP, SASL or binding): closes the socket and
    /// reports `disconnected` with `.aborted`. Does nothing when ready or disconnected.
    public func abortConnectAttempt() {
        queue.async { [self] in
            guard let session = state.withLock({ $0.session }) else { return }
            if case .ready = session.step { return }
            guard endSession(session.id) != nil else { return }
            session.connection.close()
            reconnectEvents.send(.disconnected(error: XMPPStreamError.aborted))
        }
    }

    /// Sends an XMPP ping (XEP-0199) to the server; if neither a result nor an error comes
    /// back within `pingTimeout`, closes the socket and reports `disconnected` with `.noPong`.
    /// Does nothing when not ready or while a ping is unanswered.
    public func verifyConnection() {
        queue.async { [self] in
            let probe = state.withLock { state -> (Session, String, Duration)? in
                guard let session = state.session, case .ready = session.step, state.pendingPing == nil else { return nil }
                state.pingSequence += 1
                let id = "ping-\(state.pingSequence)"
                state.pendingPing = (session.id, id)
                return (session, id, state.pingTimeout)
            }
            guard let (session, id, timeout) = probe else { return }
            send("<iq type='get' id='\(id)' to='\(XMPPElement.escape(domain))'><ping xmlns='\(Namespace.ping)'/></iq>", in: session)
            queue.asyncAfter(deadline: .now() + timeout.dispatchInterval) { [weak self] in
                guard let self else { return }
                let unanswered = state.withLock { $0.pendingPing.map { $0 == (session.id, id) } ?? false }
                if unanswered { fail(.noPong(timeout: timeout), session: session.id, closing: "</stream:stream>") }
            }
        }
    }

    // MARK: - Connection events (on the queue)

    private func connectionEvent(_ event: TCPConnection.Event, id: UInt64) {
        switch event {
        case .connected:
            if state.withLock({ $0.session?.id == id && $0.session?.method == .directTLS }) {
                startTLS(session: id)
            } else if let session = advance(id, to: .awaitingHeader(authenticated: false)) {
                sendStreamHeader(in: session)
            }
        case .received(let bytes):
            received(bytes, session: id)
        case .closed(let error):
            guard let session = endSession(id) else { return }
            reconnectEvents.send(.disconnected(error: XMPPStreamError.connection(error, stage: session.step.stage)))
        }
    }

    private func received(_ bytes: [UInt8], session id: UInt64) {
        guard let session = state.withLock({ $0.session }), session.id == id else { return }
        var plaintext = bytes
        var closedByPeer = false
        if let tls = session.tls {
            let output: TLSSession.Output
            do {
                output = try tls.receive(bytes)
            } catch {
                tlsFailed(error, session: id)
                return
            }
            session.connection.send(output.ciphertext)
            if output.handshakeCompleted {
                // RFC 6120 section 5.4.3.3: a new stream over TLS, the old one forgotten.
                guard let secured = advance(id, to: .awaitingHeader(authenticated: false)) else { return }
                sendStreamHeader(in: secured)
            }
            plaintext = output.plaintext
            closedByPeer = output.closedByPeer
        }
        state.withLock { state in
            if state.session?.id == id { state.scanner.append(plaintext) }
        }
        defer {
            // close_notify: the server will send nothing more on this session.
            if closedByPeer { fail(.tls(.protocolFailure("the server closed TLS (close_notify)")), session: id, closing: nil) }
        }
        while true {
            let next = state.withLock { state -> Result<XMLScanner.Event?, XMLScanner.Failure>? in
                guard state.session?.id == id else { return nil }
                do throws(XMLScanner.Failure) {
                    return .success(try state.scanner.next())
                } catch {
                    return .failure(error)
                }
            }
            switch next {
            case nil, .success(nil)?:
                return
            case .success(let event?)?:
                handle(event, session: id)
            case .failure(let failure)?:
                // RFC 6120 section 4.9.3.13: tell the peer, then close.
                let closing = "<stream:error><not-well-formed xmlns='\(Namespace.streamErrors)'/></stream:error></stream:stream>"
                fail(.malformedXML(failure.message), session: id, closing: closing)
                return
            }
        }
    }

    private func handle(_ event: XMLScanner.Event, session id: UInt64) {
        guard let session = state.withLock({ $0.session }), session.id == id else { return }
        switch event {
        case .streamOpened(let header):
            guard case .awaitingHeader(let authenticated) = session.step else {
                fail(.unexpected("a stream header during \(session.step.stage.rawValue)"), session: id, closing: "</stream:stream>")
                return
            }
            guard header[attribute: "version"].map({ $0.hasPrefix("1.") }) == true else {
                fail(.unexpected("stream version \(header[attribute: "version"] ?? "none") (1.0 needed)"), session: id, closing: "</stream:stream>")
                return
            }
            let first = state.withLock { state -> Bool in
                guard state.session?.id == id else { return false }
                state.session?.step = .awaitingFeatures(authenticated: authenticated)
                defer { state.session?.announcedOpen = true }
                return state.session?.announcedOpen == false
            }
            if first { reconnectEvents.send(.opened) }
        case .streamClosed:
            fail(.streamClosedByPeer, session: id, closing: "</stream:stream>")
        case .element(let element) where element.is("error", Namespace.streams):
            streamError(element, session: id)
        case .element(let element):
            switch session.step {
            case .awaitingFeatures(let authenticated):
                features(element, authenticated: authenticated, session: session)
            case .startingTLS:
                startTLSReply(element, session: session)
            case .authenticating:
                saslReply(element, session: session)
            case .binding(let bindID):
                bindReply(element, bindID: bindID, session: session)
            case .ready:
                stanza(element, session: session)
            case .connecting, .securing, .awaitingHeader:
                fail(.unexpected("<\(element.qualifiedName)> before the stream header"), session: id, closing: "</stream:stream>")
            }
        }
    }

    // MARK: - Negotiation

    private func features(_ element: XMPPElement, authenticated: Bool, session: Session) {
        guard element.is("features", Namespace.streams) else {
            fail(.unexpected("<\(element.qualifiedName)> instead of stream features"), session: session.id, closing: "</stream:stream>")
            return
        }
        if !authenticated, tls != nil, session.tls == nil {
            // RFC 6120 section 5.3.1: with TLS required, never go on in clear text.
            guard element.child("starttls", namespace: Namespace.tls) != nil else {
                refuse("starttls-not-offered", .startTLSNotOffered, session: session.id)
                return
            }
            guard advance(session.id, to: .startingTLS) != nil else { return }
            send("<starttls xmlns='\(Namespace.tls)'/>", in: session)
        } else if !authenticated {
            let offered = element.child("mechanisms", namespace: Namespace.sasl)?.children.filter { $0.name == "mechanism" }.map(\.text) ?? []
            guard offered.contains("PLAIN") else {
                fail(.noSupportedMechanism(offered: offered), session: session.id, closing: "</stream:stream>")
                return
            }
            // RFC 4616 section 2: [authzid] NUL authcid NUL passwd; no authzid.
            let message = [0] + Array(localpart.utf8) + [0] + Array(password.utf8)
            guard advance(session.id, to: .authenticating) != nil else { return }
            send("<auth xmlns='\(Namespace.sasl)' mechanism='PLAIN'>\(Data(message).base64EncodedString())</auth>", in: session)
        } else {
            guard element.child("bind", namespace: Namespace.bind) != nil else {
                fail(.unexpected("stream features without resource binding"), session: session.id, closing: "</stream:stream>")
                return
            }
            let bindID = "bind-\(session.id)"
            guard advance(session.id, to: .binding(id: bindID)) != nil else { return }
            send(
                "<iq type='set' id='\(bindID)'><bind xmlns='\(Namespace.bind)'><resource>\(XMPPElement.escape(resource))</resource></bind></iq>",
                in: session
            )
        }
    }

    private func saslReply(_ element: XMPPElement, session: Session) {
        if element.is("success", Namespace.sasl) {
            // RFC 6120 section 6.4.6: both sides restart the stream, without closing it.
            state.withLock { $0.scanner.restart() }
            guard advance(session.id, to: .awaitingHeader(authenticated: true)) != nil else { return }
            sendStreamHeader(in: session)
        } else if element.is("failure", Namespace.sasl) {
            let condition = element.children.first { $0.name != "text" }?.name ?? "not-authorized"
            let error = XMPPStreamError.authenticationFailed(condition: condition, text: element.child("text")?.text)
            if condition == "temporary-auth-failure" {
                fail(error, session: session.id, closing: "</stream:stream>")
            } else {
                refuse(condition, error, session: session.id)
            }
        } else {
            fail(.unexpected("<\(element.qualifiedName)> during SASL PLAIN"), session: session.id, closing: "</stream:stream>")
        }
    }

    private func bindReply(_ element: XMPPElement, bindID: String, session: Session) {
        guard element.is("iq", Namespace.client), element[attribute: "id"] == bindID else {
            stanza(element, session: session)
            return
        }
        if element[attribute: "type"] == "result", let bound = element.child("bind", namespace: Namespace.bind)?.child("jid")?.text, !bound.isEmpty {
            guard advance(session.id, to: .ready) != nil else { return }
            state.withLock { $0.boundJID = bound }
            // RFC 6121 section 4.2: initial presence makes the session available.
            send("<presence/>", in: session)
            reconnectEvents.send(.ready)
            return
        }
        let error = element.child("error")
        let condition = error?.children.first { $0.namespace == Namespace.stanzaErrors && $0.name != "text" }?.name ?? "undefined-condition"
        if error?[attribute: "type"] == "wait" {
            fail(.bindFailed(condition: condition), session: session.id, closing: "</stream:stream>")
        } else {
            refuse(condition, .bindFailed(condition: condition), session: session.id)
        }
    }

    private func stanza(_ element: XMPPElement, session: Session) {
        if element.is("iq", Namespace.client) {
            let type = element[attribute: "type"]
            let id = element[attribute: "id"] ?? ""
            if type == "result" || type == "error" {
                let wasPing = state.withLock { state -> Bool in
                    guard let ping = state.pendingPing, ping == (session.id, id) else { return false }
                    state.pendingPing = nil
                    return true
                }
                if wasPing { return }
            } else if type == "get" || type == "set" {
                // RFC 6120 section 8.2.3: every get or set is answered; XEP-0199 pings get a result.
                let to = element[attribute: "from"].map { " to='\(XMPPElement.escape($0))'" } ?? ""
                let header = "<iq id='\(XMPPElement.escape(id))'\(to)"
                if type == "get", element.child("ping", namespace: Namespace.ping) != nil {
                    send("\(header) type='result'/>", in: session)
                } else {
                    send("\(header) type='error'><error type='cancel'><service-unavailable xmlns='\(Namespace.stanzaErrors)'/></error></iq>", in: session)
                }
                return
            }
        }
        stanzaListeners.send(element)
    }

    private func streamError(_ element: XMPPElement, session id: UInt64) {
        let condition = element.children.first { $0.namespace == Namespace.streamErrors && $0.name != "text" }?.name ?? "undefined-condition"
        let text = element.child("text", namespace: Namespace.streamErrors)?.text
        let error = XMPPStreamError.streamError(condition: condition, text: text)
        if Self.terminalStreamErrors.contains(condition) {
            refuse(condition, error, session: id)
        } else {
            fail(error, session: id, closing: "</stream:stream>")
        }
    }

    // MARK: - Ending

    /// Reports `refused(reason)`, closes the stream and reports `disconnected(error)`.
    private func refuse(_ reason: String, _ error: XMPPStreamError, session id: UInt64) {
        guard let session = endSession(id) else { return }
        sendClosing(session.tls?.isEstablished == false ? nil : "</stream:stream>", in: session)
        session.connection.close()
        reconnectEvents.send(.refused(reason: reason))
        reconnectEvents.send(.disconnected(error: error))
    }

    /// Sends `closing` (a stream error, the end tag), closes and reports `disconnected(error)`.
    private func fail(_ error: XMPPStreamError, session id: UInt64, closing: String?) {
        guard let session = endSession(id) else { return }
        sendClosing(closing, in: session)
        session.connection.close()
        reconnectEvents.send(.disconnected(error: error))
    }

    /// Clears the session if it is `id` (any when `nil`) and returns it.
    private func endSession(_ id: UInt64?) -> Session? {
        state.withLock { state in
            guard let session = state.session, id == nil || session.id == id else { return nil }
            state.session = nil
            state.pendingPing = nil
            state.boundJID = nil
            return session
        }
    }

    /// Moves session `id` to `step`; `nil` if it is no longer the session.
    private func advance(_ id: UInt64, to step: Step) -> Session? {
        state.withLock { state in
            guard state.session?.id == id else { return nil }
            state.session?.step = step
            return state.session
        }
    }

    private func sendStreamHeader(in session: Session) {
        // RFC 6120 section 4.7.1: no 'from' before the stream is protected.
        send(
            "<?xml version='1.0'?><stream:stream to='\(XMPPElement.escape(domain))' version='1.0' xml:lang='en' "
                + "xmlns='\(Namespace.client)' xmlns:stream='\(Namespace.streams)'>",
            in: session
        )
    }

    /// Sends on the session, through TLS once it is secured; a TLS failure ends the session.
    private func send(_ xml: String, in session: Session) {
        guard let tls = session.tls else {
            session.connection.send(Array(xml.utf8))
            return
        }
        do {
            session.connection.send(try tls.seal(Array(xml.utf8)))
        } catch {
            let id = session.id
            queue.async { [weak self] in self?.fail(.tls(error), session: id, closing: nil) }
        }
    }

    /// Sends the last bytes of a session being closed (`closing`, then TLS's `close_notify`);
    /// failures are ignored: the socket is closed next.
    private func sendClosing(_ closing: String?, in session: Session) {
        guard let tls = session.tls else {
            if let closing { session.connection.send(Array(closing.utf8)) }
            return
        }
        if let closing, let sealed = try? tls.seal(Array(closing.utf8)) { session.connection.send(sealed) }
        session.connection.send(tls.shutdown())
    }

    // MARK: - TLS

    /// Starts the TLS handshake on session `id` (direct TLS, or after `<proceed/>`).
    private func startTLS(session id: UInt64) {
        guard let tls else { return }
        let tlsSession: TLSSession
        let hello: [UInt8]
        do {
            // RFC 6120 section 13.7.2.1: the certificate must name the JID's domain.
            tlsSession = try TLSSession(context: tls, serverName: domain)
            hello = try tlsSession.start()
        } catch {
            tlsFailed(error, session: id)
            return
        }
        let session = state.withLock { state -> Session? in
            guard state.session?.id == id else { return nil }
            state.session?.step = .securing
            state.session?.tls = tlsSession
            state.scanner = XMLScanner(limit: state.scanner.limit)
            return state.session
        }
        session?.connection.send(hello)
    }

    private func startTLSReply(_ element: XMPPElement, session: Session) {
        if element.is("proceed", Namespace.tls) {
            // RFC 6120 section 5.4.3.3: nothing may follow <proceed/> in clear text; bytes
            // that do were injected (the STARTTLS injection of CVE-2011-0411).
            let unread = state.withLock { $0.scanner.unreadBytes }
            guard unread.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) else {
                fail(.unexpected("\(unread.count) bytes in clear text after <proceed/>"), session: session.id, closing: nil)
                return
            }
            startTLS(session: session.id)
        } else if element.is("failure", Namespace.tls) {
            // RFC 6120 section 5.4.2.2: the server closes the stream and the TCP connection.
            fail(.startTLSFailed, session: session.id, closing: "</stream:stream>")
        } else {
            fail(.unexpected("<\(element.qualifiedName)> in reply to STARTTLS"), session: session.id, closing: "</stream:stream>")
        }
    }

    /// A rejected certificate is a refusal: another attempt would meet the same certificate.
    private func tlsFailed(_ error: TLSError, session id: UInt64) {
        if case .certificateRejected = error {
            refuse("certificate-rejected", .tls(error), session: id)
        } else {
            fail(.tls(error), session: id, closing: nil)
        }
    }

    /// Splits `localpart@domainpart`, refusing the characters RFC 7622 section 3.3.1 forbids
    /// in a localpart and anything that is not a bare JID.
    private static func parse(_ jid: String) -> (String, String)? {
        let parts = jid.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let (local, domain) = (String(parts[0]), String(parts[1]))
        let forbidden: Set<Character> = ["\"", "&", "'", "/", ":", "<", ">", "@", " "]
        guard !local.isEmpty, !domain.isEmpty, !local.contains(where: forbidden.contains),
              !domain.contains(where: { forbidden.contains($0) && $0 != ":" })
        else { return nil }
        return (local, domain)
    }
}
