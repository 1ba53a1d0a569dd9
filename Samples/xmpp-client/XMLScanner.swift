/// An incremental reader of one XMPP stream: bytes go in as they arrive, and out come the
/// stream header, each complete top-level element, and the end of the stream.
///
/// It reads the restricted XML of RFC 6120 section 11: an XML declaration, elements with
/// namespaces, attributes, text, the five predefined entities and character references,
/// CDATA. Comments, processing instructions and DTDs, which section 11.1 forbids, are errors,
/// as is anything malformed. Foundation's `XMLParser` only parses pull-style from an
/// `InputStream` on a blocked thread on Linux, and a stream restart (section 6.4.6) needs a
/// fresh document anyway, so this is hand-written and bounded: one element may not exceed
/// `limit` bytes nor nest deeper than `maximumDepth`.
struct XMLScanner {
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

    private struct Open {
        var element: XMPPElement
        var namespaces: [String: String]
    }

    let limit: Int
    private var buffer: [UInt8] = []
    private var position = 0
    private var streamOpened = false
    private var streamClosed = false
    /// The stream header's name as written, which its end tag must repeat.
    private var streamName = "stream:stream"
    private var streamNamespaces: [String: String] = [:]
    /// Elements open below the stream element, outermost first.
    private var open: [Open] = []
    /// Bytes read for the top-level element being built.
    private var elementBytes = 0
    private var failure: Failure?

    init(limit: Int = 1 << 20) {
        self.limit = limit
    }

    /// Adds bytes read from the socket.
    mutating func append(_ bytes: [UInt8]) {
        if position > 0, position == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            position = 0
        }
        buffer += bytes
    }

    /// Forgets the stream (after SASL success the stream restarts, RFC 6120 section 6.4.6):
    /// the next input must be a new header. Bytes not read yet are kept.
    mutating func restart() {
        streamOpened = false
        streamClosed = false
        streamNamespaces = [:]
        open = []
        elementBytes = 0
    }

    /// The next event, or `nil` when more bytes are needed.
    ///
    /// - Throws: `Failure` for input that is not a well-formed XMPP stream or is too large.
    mutating func next() throws(Failure) -> Event? {
        if let failure { throw failure }
        do throws(Failure) {
            while position < buffer.count {
                let before = position
                let event = try step()
                if open.isEmpty { elementBytes = 0 } else { elementBytes += position - before }
                if elementBytes > limit { throw Failure(message: "an element is larger than \(limit) bytes") }
                if let event { return event }
                if position == before { break }  // an incomplete token: wait for more bytes
            }
            compact()
            if buffer.count - position > limit { throw Failure(message: "a token is larger than \(limit) bytes") }
            return nil
        } catch {
            failure = error
            throw error
        }
    }

    // MARK: - Tokens

    /// Reads one token; leaves `position` unchanged when the token is incomplete.
    private mutating func step() throws(Failure) -> Event? {
        guard buffer[position] == UInt8(ascii: "<") else { return try text() }
        guard position + 1 < buffer.count else { return nil }
        switch buffer[position + 1] {
        case UInt8(ascii: "?"): return try declaration()
        case UInt8(ascii: "!"): return try markupDeclaration()
        case UInt8(ascii: "/"): return try endTag()
        default: return try startTag()
        }
    }

    private mutating func text() throws(Failure) -> Event? {
        let end = buffer[position...].firstIndex(of: UInt8(ascii: "<")) ?? buffer.count
        let raw = buffer[position..<end]
        if open.isEmpty {
            // Between top-level elements only whitespace is allowed (keepalives, RFC 6120 section 4.6.1).
            guard raw.allSatisfy(Self.isWhitespace) else {
                throw Failure(message: streamOpened ? "text outside any element" : "expected an XMPP stream header, got text")
            }
            position = end
            return nil
        }
        // Inside an element, text ends at the next tag: until that arrives, an entity
        // reference or a UTF-8 sequence may still be cut in two, so wait for it.
        guard end < buffer.count else { return nil }
        open[open.count - 1].element.text += try Self.decode(raw)
        position = end
        return nil
    }

    private mutating func declaration() throws(Failure) -> Event? {
        guard let end = find([UInt8(ascii: "?"), UInt8(ascii: ">")], from: position + 2) else { return nil }
        let content = buffer[(position + 2)..<end]
        guard !streamOpened, open.isEmpty, content.starts(with: Array("xml".utf8)),
              content.count == 3 || Self.isWhitespace(content[content.startIndex + 3])
        else {
            throw Failure(message: "processing instructions are not allowed (RFC 6120 section 11.1)")
        }
        position = end + 2
        return nil
    }

    private mutating func markupDeclaration() throws(Failure) -> Event? {
        let cdata = Array("<![CDATA[".utf8)
        let available = buffer[position...].prefix(cdata.count)
        if cdata.starts(with: available), available.count < cdata.count { return nil }
        guard available.elementsEqual(cdata), !open.isEmpty else {
            throw Failure(message: "comments, DTDs and declarations are not allowed (RFC 6120 section 11.1)")
        }
        guard let end = find(Array("]]>".utf8), from: position + cdata.count) else { return nil }
        open[open.count - 1].element.text += String(decoding: buffer[(position + cdata.count)..<end], as: UTF8.self)
        position = end + 3
        return nil
    }

    private mutating func endTag() throws(Failure) -> Event? {
        guard let end = buffer[position...].firstIndex(of: UInt8(ascii: ">")) else { return nil }
        let name = String(decoding: buffer[(position + 2)..<end], as: UTF8.self).trimmingTrailingWhitespace()
        position = end + 1
        guard let closing = open.popLast() else {
            guard streamOpened, !streamClosed, name == streamName else { throw Failure(message: "unexpected end tag </\(name)>") }
            streamClosed = true
            return .streamClosed
        }
        guard closing.element.qualifiedName == name else {
            throw Failure(message: "end tag </\(name)> does not match <\(closing.element.qualifiedName)>")
        }
        return finish(closing.element)
    }

    private mutating func startTag() throws(Failure) -> Event? {
        guard let end = tagEnd(from: position + 1) else { return nil }
        var content = buffer[(position + 1)..<end]
        let selfClosing = content.last == UInt8(ascii: "/")
        if selfClosing { content = content.dropLast() }
        position = end + 1
        let (qualifiedName, attributes) = try Self.parseTag(content)
        guard !streamClosed else { throw Failure(message: "data after the end of the stream") }

        var namespaces = open.last?.namespaces ?? streamNamespaces
        for (key, value) in attributes {
            if key == "xmlns" { namespaces[""] = value }
            if key.hasPrefix("xmlns:") { namespaces[String(key.dropFirst(6))] = value }
        }
        let (prefix, name) = Self.split(qualifiedName)
        let namespace = namespaces[prefix ?? ""]
        if let prefix, namespace == nil, prefix != "xml" {
            throw Failure(message: "unbound namespace prefix \(prefix) in <\(qualifiedName)>")
        }
        let element = XMPPElement(name: name, prefix: prefix, namespace: namespace, attributes: attributes)

        guard streamOpened else {
            // The first element must be the stream header (RFC 6120 section 4.2), left open.
            guard name == "stream", namespace == Self.streamNamespace, !selfClosing else {
                throw Failure(message: "expected an XMPP stream header, got <\(qualifiedName)>")
            }
            streamOpened = true
            streamName = qualifiedName
            streamNamespaces = namespaces
            return .streamOpened(element)
        }
        guard open.count < Self.maximumDepth else { throw Failure(message: "elements nested deeper than \(Self.maximumDepth)") }
        if selfClosing { return finish(element) }
        open.append(Open(element: element, namespaces: namespaces))
        return nil
    }

    /// Attaches a closed element to its parent, or reports it when top-level.
    private mutating func finish(_ element: XMPPElement) -> Event? {
        guard !open.isEmpty else { return .element(element) }
        open[open.count - 1].element.children.append(element)
        return nil
    }

    // MARK: - Helpers

    /// The index of the `>` ending a tag that starts at `start`, skipping quoted values.
    private func tagEnd(from start: Int) -> Int? {
        var quote: UInt8?
        var index = start
        while index < buffer.count {
            let byte = buffer[index]
            if let open = quote {
                if byte == open { quote = nil }
            } else if byte == UInt8(ascii: "'") || byte == UInt8(ascii: "\"") {
                quote = byte
            } else if byte == UInt8(ascii: ">") {
                return index
            }
            index += 1
        }
        return nil
    }

    private func find(_ needle: [UInt8], from start: Int) -> Int? {
        guard start <= buffer.count - needle.count else { return nil }
        var index = start
        while index <= buffer.count - needle.count {
            if buffer[index] == needle[0], buffer[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    private mutating func compact() {
        guard position > 4096, position * 2 > buffer.count else { return }
        buffer.removeFirst(position)
        position = 0
    }

    /// Parses `name attr='value' …` (the inside of a start tag).
    private static func parseTag(_ content: ArraySlice<UInt8>) throws(Failure) -> (String, [String: String]) {
        var index = content.startIndex
        func skipWhitespace() {
            while index < content.endIndex, isWhitespace(content[index]) { index += 1 }
        }
        func readName() -> String {
            let start = index
            while index < content.endIndex, isNameByte(content[index]) { index += 1 }
            return String(decoding: content[start..<index], as: UTF8.self)
        }
        let name = readName()
        guard !name.isEmpty else { throw Failure(message: "a tag without a name") }
        var attributes: [String: String] = [:]
        while true {
            let hadWhitespace = index < content.endIndex && isWhitespace(content[index])
            skipWhitespace()
            guard index < content.endIndex else { break }
            guard hadWhitespace else { throw Failure(message: "malformed tag <\(name)>") }
            let key = readName()
            skipWhitespace()
            guard !key.isEmpty, index < content.endIndex, content[index] == UInt8(ascii: "=") else {
                throw Failure(message: "malformed attribute in <\(name)>")
            }
            index += 1
            skipWhitespace()
            guard index < content.endIndex, content[index] == UInt8(ascii: "'") || content[index] == UInt8(ascii: "\"") else {
                throw Failure(message: "unquoted attribute value in <\(name)>")
            }
            let quote = content[index]
            index += 1
            let start = index
            while index < content.endIndex, content[index] != quote { index += 1 }
            guard index < content.endIndex else { throw Failure(message: "unterminated attribute value in <\(name)>") }
            let raw = content[start..<index]
            index += 1
            guard !raw.contains(UInt8(ascii: "<")) else { throw Failure(message: "'<' in an attribute value of <\(name)>") }
            guard attributes[key] == nil else { throw Failure(message: "duplicate attribute \(key) in <\(name)>") }
            attributes[key] = try decode(raw)
        }
        return (name, attributes)
    }

    /// Decodes the predefined entities and character references (RFC 6120 section 11.1
    /// allows no others).
    private static func decode(_ raw: ArraySlice<UInt8>) throws(Failure) -> String {
        guard raw.contains(UInt8(ascii: "&")) else { return String(decoding: raw, as: UTF8.self) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(raw.count)
        var index = raw.startIndex
        while index < raw.endIndex {
            let byte = raw[index]
            guard byte == UInt8(ascii: "&") else {
                bytes.append(byte)
                index += 1
                continue
            }
            guard let semicolon = raw[index...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else {
                throw Failure(message: "an unterminated entity reference")
            }
            let name = String(decoding: raw[(index + 1)..<semicolon], as: UTF8.self)
            switch name {
            case "lt": bytes.append(UInt8(ascii: "<"))
            case "gt": bytes.append(UInt8(ascii: ">"))
            case "amp": bytes.append(UInt8(ascii: "&"))
            case "apos": bytes.append(UInt8(ascii: "'"))
            case "quot": bytes.append(UInt8(ascii: "\""))
            default:
                let value: UInt32?
                if name.hasPrefix("#x") {
                    value = UInt32(name.dropFirst(2), radix: 16)
                } else if name.hasPrefix("#") {
                    value = UInt32(name.dropFirst(), radix: 10)
                } else {
                    value = nil
                }
                guard let value, value != 0, let scalar = Unicode.Scalar(value) else {
                    throw Failure(message: "unknown entity &\(name);")
                }
                bytes += Array(String(Character(scalar)).utf8)
            }
            index = semicolon + 1
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func split(_ qualifiedName: String) -> (prefix: String?, name: String) {
        guard let colon = qualifiedName.firstIndex(of: ":") else { return (nil, qualifiedName) }
        return (String(qualifiedName[..<colon]), String(qualifiedName[qualifiedName.index(after: colon)...]))
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: "="), UInt8(ascii: "/"), UInt8(ascii: ">"), UInt8(ascii: "<"),
             UInt8(ascii: "'"), UInt8(ascii: "\""), UInt8(ascii: "&"):
            return false
        default:
            return true
        }
    }
}

extension String {
    fileprivate func trimmingTrailingWhitespace() -> String {
        var result = self
        while let last = result.last, last.isWhitespace { result.removeLast() }
        return result
    }
}
