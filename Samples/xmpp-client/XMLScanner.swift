import CExpat

/// An incremental reader of one XMPP stream on libexpat (Debian `libexpat1-dev`, the parser
/// most XMPP stacks use): bytes go in as they arrive, and out come the stream header, each
/// complete top-level element, and the end of the stream.
///
/// Expat does the XML: namespaces, the predefined entities and character references, CDATA,
/// any split of the input. This type adds RFC 6120 section 11's restrictions (comments,
/// processing instructions and DTDs are errors, section 11.1) and its bounds: one element may
/// not exceed `limit` bytes nor nest deeper than `maximumDepth`. Parsing stops after each event,
/// so bytes after it stay unread: a stream restart (section 6.4.6) hands them to a new
/// document.
///
/// Not thread-safe: the stream uses it under its lock.
final class XMLScanner: @unchecked Sendable {
    enum Event: Equatable {
        /// `<stream:stream …>` was read; the element has its attributes, no children.
        case streamOpened(XMPPElement)
        /// A top-level element (a stanza, features, a SASL reply, a stream error) is complete.
        case element(XMPPElement)
        /// `</stream:stream>` was read.
        case streamClosed
    }

    /// The input is not an XMPP stream or not well-formed XML; the scanner stays failed.
    struct Failure: Error, Equatable {
        let message: String
    }

    static let streamNamespace = "http://etherx.jabber.org/streams"
    static let maximumDepth = 32
    /// Expat's separator between a name's namespace, local part and prefix.
    private static let separator: UInt8 = 0x1F

    let limit: Int
    private var parser: XML_Parser
    /// Bytes given to `append` and not yet handed to expat.
    private var unfed: [UInt8] = []
    /// Bytes handed to expat since the current document began, from `base` on: kept so that a
    /// restart can give what was not parsed to the next document.
    private var fed: [UInt8] = []
    private var base = 0
    /// Where the last event ended, as a byte offset in the document.
    private var consumed = 0
    private var suspended = false
    private var event: Event?
    private var failure: Failure?
    /// Elements open below the stream element, outermost first.
    private var open: [XMPPElement] = []
    private var insideStream = false
    /// Where the top-level element being built began.
    private var elementStart = 0
    /// Namespace declarations of the element about to start, as its `xmlns` attributes.
    private var declarations: [String: String] = [:]

    init(limit: Int = 1 << 20) {
        self.limit = limit
        parser = XML_ParserCreateNS(nil, CChar(bitPattern: Self.separator))
        configure()
    }

    deinit { XML_ParserFree(parser) }

    /// Adds bytes read from the socket.
    func append(_ bytes: [UInt8]) {
        unfed += bytes
    }

    /// Forgets the stream (after SASL success the stream restarts, RFC 6120 section 6.4.6):
    /// the next input must be a new header. Bytes not parsed yet are kept.
    func restart() {
        let rest = unreadBytes
        XML_ParserReset(parser, nil)
        configure()
        unfed = rest
        fed = []
        base = 0
        consumed = 0
        suspended = false
        event = nil
        open = []
        insideStream = false
        declarations = [:]
    }

    /// The bytes received after the last event and not read yet, whitespace included: after
    /// STARTTLS's `<proceed/>` there must be none (RFC 6120 section 5.4.3.3).
    var unreadBytes: [UInt8] {
        Array(fed[max(0, min(fed.count, consumed - base))...]) + unfed
    }

    /// The next event, or `nil` when more bytes are needed.
    ///
    /// - Throws: `Failure` for input that is not a well-formed XMPP stream or is too large.
    func next() throws(Failure) -> Event? {
        if let failure { throw failure }
        while true {
            let status: XML_Status
            if suspended {
                suspended = false
                status = XML_ResumeParser(parser)
            } else if !unfed.isEmpty {
                let chunk = unfed
                unfed = []
                fed += chunk
                status = chunk.withUnsafeBufferPointer { buffer in
                    buffer.withMemoryRebound(to: CChar.self) { XML_Parse(parser, $0.baseAddress, Int32(buffer.count), 0) }
                }
            } else {
                return nil
            }
            if let failure { throw failure }
            switch status {
            case XML_STATUS_SUSPENDED:
                suspended = true
            case XML_STATUS_ERROR:
                let code = XML_GetErrorCode(parser)
                let message = XML_ErrorString(code).map { String(cString: $0) } ?? "error \(code.rawValue)"
                throw fail("not well-formed XML: \(message)")
            default:
                break
            }
            try checkBounds()
            if let event {
                self.event = nil
                compact()
                return event
            }
        }
    }

    // MARK: - Expat's callbacks

    private func configure() {
        XML_SetReturnNSTriplet(parser, 1)
        XML_SetUserData(parser, Unmanaged.passUnretained(self).toOpaque())
        XML_SetStartNamespaceDeclHandler(parser) { user, prefix, uri in
            XMLScanner.scanner(user).declare(prefix: prefix.map { String(cString: $0) }, uri: uri.map { String(cString: $0) } ?? "")
        }
        XML_SetElementHandler(parser, { user, name, attributes in
            XMLScanner.scanner(user).start(name, attributes)
        }, { user, name in
            XMLScanner.scanner(user).end()
        })
        XML_SetCharacterDataHandler(parser) { user, bytes, count in
            guard let bytes, count > 0 else { return }
            let text = String(decoding: UnsafeRawBufferPointer(start: bytes, count: Int(count)).bindMemory(to: UInt8.self), as: UTF8.self)
            XMLScanner.scanner(user).characters(text)
        }
        // RFC 6120 section 11.1: no comments, processing instructions or DTDs.
        XML_SetCommentHandler(parser) { user, _ in XMLScanner.scanner(user).refuse("a comment") }
        XML_SetProcessingInstructionHandler(parser) { user, _, _ in XMLScanner.scanner(user).refuse("a processing instruction") }
        XML_SetStartDoctypeDeclHandler(parser) { user, _, _, _, _ in XMLScanner.scanner(user).refuse("a DTD") }
    }

    private static func scanner(_ user: UnsafeMutableRawPointer?) -> XMLScanner {
        Unmanaged<XMLScanner>.fromOpaque(user!).takeUnretainedValue()
    }

    private func declare(prefix: String?, uri: String) {
        declarations[prefix.map { "xmlns:" + $0 } ?? "xmlns"] = uri
    }

    private func start(_ rawName: UnsafePointer<CChar>?, _ rawAttributes: UnsafeMutablePointer<UnsafePointer<CChar>?>?) {
        guard failure == nil, let rawName else { return }
        let (namespace, name, prefix) = Self.triplet(String(cString: rawName))
        var attributes = declarations
        declarations = [:]
        if var pointer = rawAttributes {
            while let key = pointer.pointee, let value = pointer.advanced(by: 1).pointee {
                let (_, local, attributePrefix) = Self.triplet(String(cString: key))
                attributes[attributePrefix.map { $0 + ":" + local } ?? local] = String(cString: value)
                pointer = pointer.advanced(by: 2)
            }
        }
        let element = XMPPElement(name: name, prefix: prefix, namespace: namespace, attributes: attributes)
        guard insideStream else {
            guard name == "stream", namespace == Self.streamNamespace else {
                return refuse("<\(element.qualifiedName)> where the stream header belongs")
            }
            insideStream = true
            stop(with: .streamOpened(element))
            return
        }
        if open.isEmpty { elementStart = Int(XML_GetCurrentByteIndex(parser)) }
        guard open.count < Self.maximumDepth else { return refuse("elements nested deeper than \(Self.maximumDepth)") }
        open.append(element)
    }

    private func end() {
        guard failure == nil else { return }
        guard let element = open.popLast() else {
            insideStream = false
            stop(with: .streamClosed)
            return
        }
        if open.isEmpty {
            let end = Int(XML_GetCurrentByteIndex(parser)) + Int(XML_GetCurrentByteCount(parser))
            guard end - elementStart <= limit else {
                failure = Failure(message: "an element is larger than \(limit) bytes")
                XML_StopParser(parser, XML_FALSE)
                return
            }
            stop(with: .element(element))
        } else {
            open[open.count - 1].children.append(element)
        }
    }

    private func characters(_ text: String) {
        guard failure == nil else { return }
        guard open.isEmpty else {
            open[open.count - 1].text += text
            return
        }
        // Between top-level elements only whitespace may stand.
        if text.contains(where: { !$0.isWhitespace }) { refuse("text at stream level") }
    }

    private func refuse(_ what: String) {
        guard failure == nil else { return }
        failure = Failure(message: "\(what): not allowed in an XMPP stream (RFC 6120 section 11)")
        XML_StopParser(parser, XML_FALSE)
    }

    /// Records an event and suspends expat right after it.
    private func stop(with event: Event) {
        self.event = event
        consumed = Int(XML_GetCurrentByteIndex(parser)) + Int(XML_GetCurrentByteCount(parser))
        XML_StopParser(parser, XML_TRUE)
    }

    // MARK: - Bounds

    private func fail(_ message: String) -> Failure {
        let failure = Failure(message: message)
        self.failure = failure
        return failure
    }

    private func checkBounds() throws(Failure) {
        let position = Int(XML_GetCurrentByteIndex(parser))
        if !open.isEmpty, position - elementStart > limit { throw fail("an element is larger than \(limit) bytes") }
        if base + fed.count - consumed > limit + 1024, event == nil, !suspended {
            throw fail("a token is larger than \(limit) bytes")
        }
    }

    /// Drops kept bytes before the last event's end.
    private func compact() {
        let drop = min(fed.count, consumed - base)
        guard drop > 4096 || drop == fed.count else { return }
        fed.removeFirst(max(0, drop))
        base += max(0, drop)
    }

    /// Expat's `uri␟local␟prefix` (or `uri␟local`, or `local`) as (namespace, local, prefix).
    private static func triplet(_ text: String) -> (String?, String, String?) {
        let parts = text.split(separator: Character(Unicode.Scalar(separator)), omittingEmptySubsequences: false).map(String.init)
        switch parts.count {
        case 3: return (parts[0], parts[1], parts[2])
        case 2: return (parts[0], parts[1], nil)
        default: return (nil, text, nil)
        }
    }
}
