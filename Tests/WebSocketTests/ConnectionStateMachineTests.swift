import Testing
@testable import WebSocket

@Suite("Connection state machine")
struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine

    func open(maxMessageSize: Int = 100, maxFrameSize: Int = 4) -> Machine {
        Machine(phase: .open, maxMessageSize: maxMessageSize, maxFrameSize: maxFrameSize)
    }

    @Test("a message longer than the frame size goes out as fragments, first and last marked")
    func fragmentsOutgoing() throws {
        var machine = open()
        #expect(try machine.send(.message(.text("abcdefghij"))) == .requestWritable)
        #expect(machine.bufferedAmount == 10)
        #expect(machine.nextWrite() == .frame(FrameChunk(Array("abcd".utf8)), binary: false, first: true, last: false, more: true))
        #expect(machine.nextWrite() == .frame(FrameChunk(Array("efgh".utf8)), binary: false, first: false, last: false, more: true))
        #expect(machine.nextWrite() == .frame(FrameChunk(Array("ij".utf8)), binary: false, first: false, last: true, more: false))
        #expect(machine.bufferedAmount == 0)
        #expect(machine.nextWrite() == .none)
    }

    @Test("a message past maxBufferedAmount is refused; the drop that follows reports 1006 with the reason")
    func bufferLimit() throws {
        var idle = Machine(phase: .open, maxMessageSize: 100, maxFrameSize: 4, maxBufferedAmount: 10)
        _ = try idle.send(.message(.text("a message of 24 bytes...")))
        #expect(idle.bufferedAmount == 24, "one message on an empty queue is accepted whatever its size")
        var machine = Machine(phase: .open, maxMessageSize: 100, maxFrameSize: 4, maxBufferedAmount: 10)
        _ = try machine.send(.message(.text("0123456789")))
        #expect(throws: WebSocketError.sendBufferFull(limit: 10)) { try machine.send(.message(.text("x"))) }
        #expect(machine.bufferedAmount == 10, "the refused message is not queued")
        #expect(machine.abortForFullBuffer() == .kill)
        #expect(machine.closed(neverOpened: .cancelled) == .closed(code: .abnormalClosure, reason: WebSocketError.sendBufferFull(limit: 10).description))
    }

    @Test("only the first send after an idle period asks for WRITEABLE")
    func wakesOnce() throws {
        var machine = open()
        #expect(try machine.send(.ping([])) == .requestWritable)
        #expect(try machine.send(.ping([1])) == .none)
        #expect(machine.nextWrite() == .ping([], more: true))
        #expect(machine.nextWrite() == .ping([1], more: false))
        #expect(try machine.send(.ping([2])) == .requestWritable)
    }

    @Test("close goes after the queued frames, and nothing can be sent after it")
    func closeAfterQueued() throws {
        var machine = open()
        _ = try machine.send(.message(.binary([1])))
        _ = try machine.close(code: .goingAway, reason: "bye")
        #expect(throws: WebSocketError.connectionClosed) { try machine.send(.message(.binary([2]))) }
        #expect(machine.nextWrite() == .frame(FrameChunk([1]), binary: true, first: true, last: true, more: true))
        #expect(machine.nextWrite() == .close(.goingAway, reason: Array("bye".utf8)))
        #expect(machine.closed(neverOpened: .cancelled) == .closed(code: .goingAway, reason: "bye"))
        #expect(machine.closed(neverOpened: .cancelled) == nil)
    }

    @Test("close codes that may not be sent, and long reasons, are refused")
    func invalidClose() {
        var machine = open()
        #expect(throws: WebSocketError.invalidCloseCode(.abnormalClosure)) { try machine.close(code: .abnormalClosure, reason: "") }
        #expect(throws: WebSocketError.controlPayloadTooLong(126)) { try machine.close(code: .normalClosure, reason: String(repeating: "r", count: 124)) }
    }

    @Test("fragments are reassembled into one message")
    func reassembles() {
        var machine = open()
        #expect(machine.received(Array("he".utf8), binary: false, first: true, final: false) == .none)
        #expect(machine.received(Array("llo".utf8), binary: false, first: false, final: true) == .deliver(.text("hello")))
        #expect(machine.received([1, 2], binary: true, first: true, final: false) == .none)
        #expect(machine.received([3], binary: true, first: false, final: true) == .deliver(.binary([1, 2, 3])))
    }

    @Test("a message over the limit is answered with 1009, even when its fragments are each small")
    func tooBig() {
        var machine = open(maxMessageSize: 5)
        #expect(machine.received([1, 2, 3], binary: true, first: true, final: false) == .none)
        #expect(machine.received([4, 5, 6], binary: true, first: false, final: true) == .close(.messageTooBig, reason: Array("message too big".utf8)))
        #expect(machine.received([7], binary: true, first: true, final: true) == .none)
        #expect(machine.closed(neverOpened: .cancelled) == .closed(code: .messageTooBig, reason: "message too big"))
    }

    @Test("text that is not UTF-8 is answered with 1007")
    func invalidUTF8() {
        var machine = open()
        #expect(machine.received([0xC3, 0x28], binary: false, first: true, final: true) == .close(.invalidFramePayloadData, reason: Array("invalid UTF-8".utf8)))
    }

    @Test(
        "the close code reported follows RFC 6455 §7.1.5",
        arguments: [
            ([0x03, 0xE8] + Array("done".utf8), WebSocketCloseCode.normalClosure, "done"),
            ([0x0F, 0xA1], WebSocketCloseCode(4001), ""),
            ([], WebSocketCloseCode.noStatusReceived, ""),
            // A reason that is not UTF-8 fails the connection (RFC 6455 §8.1): 1007, not the peer's code.
            ([0x10, 0x68, 0xFF, 0xFE], WebSocketCloseCode.invalidFramePayloadData, ConnectionStateMachine.invalidCloseReason),
            // A code no endpoint may send, or a payload of one byte: a protocol error (RFC 6455 §7.4, §5.5.1).
            ([0x13, 0x88, 0x68], WebSocketCloseCode.protocolError, "the peer sent close code 5000, which no endpoint may send"),
            ([0x03], WebSocketCloseCode.protocolError, "the peer's close frame had a payload of one byte"),
        ] as [([UInt8], WebSocketCloseCode, String)]
    )
    func peerCloseCode(payload: [UInt8], code: WebSocketCloseCode, reason: String) {
        var machine = open()
        machine.peerClosed(payload: payload)
        #expect(machine.closed(neverOpened: .cancelled) == .closed(code: code, reason: reason))
    }

    @Test("a connection that ends with no close frame reports 1006, and so does abort()")
    func abnormal() {
        var dropped = open()
        #expect(dropped.closed(neverOpened: .cancelled) == .closed(code: .abnormalClosure, reason: ""))
        var aborted = open()
        _ = try? aborted.close(code: .normalClosure, reason: "")
        #expect(aborted.abort() == .kill)
        #expect(aborted.closed(neverOpened: .cancelled) == .closed(code: .abnormalClosure, reason: ""))
    }

    @Test("a client cancelled while connecting reports cancelled, never open")
    func cancelWhileConnecting() throws {
        var machine = Machine(phase: .connecting, maxMessageSize: 10, maxFrameSize: 4)
        #expect(try machine.send(.message(.binary([1]))) == .requestWritable)
        #expect(try machine.close(code: .normalClosure, reason: "") == .kill)
        #expect(machine.established() == .kill)
        #expect(machine.closed(neverOpened: .contextShutDown) == .failed(.cancelled))
    }

    @Test("frames queued while connecting are written once open")
    func queuedWhileConnecting() throws {
        var machine = Machine(phase: .connecting, maxMessageSize: 10, maxFrameSize: 4)
        _ = try machine.send(.message(.binary([1])))
        #expect(machine.nextWrite() == .none)
        #expect(machine.established() == .open(requestWritable: true))
        #expect(machine.nextWrite() == .frame(FrameChunk([1]), binary: true, first: true, last: true, more: false))
    }

    @Test("a failed attempt reports its error once")
    func connectFailure() {
        var machine = Machine(phase: .connecting, maxMessageSize: 10, maxFrameSize: 4)
        let error = WebSocketError.connectFailed(url: "ws://x/", message: "Unable to connect", errno: 0)
        #expect(machine.connectFailed(error) == .failed(error))
        #expect(machine.connectFailed(error) == nil)
        #expect(machine.closed(neverOpened: .contextShutDown) == nil)
    }
}
