/// A queued data message's bytes. A text message keeps its `String`: the same event sent to
/// 10,000 connections is one UTF-8 buffer referenced 10,000 times, not 10,000 copies.
enum MessageBytes: Hashable, Sendable {
    /// A text message (opcode 0x1, RFC 6455 §5.6); Swift strings are valid UTF-8.
    case text(String)
    /// A binary message (opcode 0x2).
    case binary([UInt8])

    /// Length in bytes.
    var count: Int {
        switch self {
        case .text(let text): text.utf8.count
        case .binary(let bytes): bytes.count
        }
    }

    var isBinary: Bool {
        if case .binary = self { return true }
        return false
    }

    /// Calls `body` with the bytes in `range` (within `0..<count`), in place.
    func withBytes<Result>(in range: Range<Int>, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        switch self {
        case .text(var text):
            // Native strings are contiguous: `withUTF8` lends their storage without a copy.
            return text.withUTF8 { body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer($0)[range])) }
        case .binary(let bytes):
            return bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[range])) }
        }
    }
}

/// The bytes of one data frame: a whole queued message or one fragment of it (RFC 6455 §5.4).
/// Equal when the bytes are equal, however they are held.
struct FrameChunk: Hashable, Sendable {
    let message: MessageBytes
    let range: Range<Int>

    init(_ message: MessageBytes, range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= message.count, "chunk outside its message")
        self.message = message
        self.range = range
    }

    /// A chunk holding exactly `bytes`.
    init(_ bytes: [UInt8]) { self.init(.binary(bytes), range: 0..<bytes.count) }

    var count: Int { range.count }

    /// Calls `body` with the chunk's bytes, in place.
    func withBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result { message.withBytes(in: range, body) }

    static func == (lhs: FrameChunk, rhs: FrameChunk) -> Bool {
        lhs.withBytes { left in rhs.withBytes { right in left.elementsEqual(right) } }
    }

    func hash(into hasher: inout Hasher) { withBytes { hasher.combine(bytes: $0) } }
}
