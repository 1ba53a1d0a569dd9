import Foundation
import Reachability
import Reconnect
import ReconnectTesting
import SampleSupport
import Testing

/// `EventLog`: the line format the samples print, and how stream and reconnector events are
/// named. Driven by a `ScriptedStream` and a manual clock: no sockets, no waiting.
@Suite struct EventLogTests {
    /// An `EventLog` writing into memory.
    final class Capture: Sendable {
        let lines = Recorder<String>()
        let log: EventLog

        init(_ format: EventLog.Format) {
            let lines = lines
            log = EventLog(format: format) { lines.record($0) }
        }

        func entries() throws -> [EventLog.Entry] {
            try lines.values.map { try JSONDecoder().decode(EventLog.Entry.self, from: Data($0.utf8)) }
        }
    }

    /// ScriptedStream's errors print as `Failure(reason: "…")`: keep the reason only.
    static func plain(_ line: String) -> String {
        line.replacingOccurrences(of: "Failure(reason: \"", with: "").replacingOccurrences(of: "\")", with: "")
    }

    @Test("JSON lines carry time (ISO 8601), event, detail and source, keys sorted")
    func jsonLines() throws {
        let capture = Capture(.json)
        capture.log.log("received", detail: "hello \"world\"")
        let line = try #require(capture.lines.values.first)
        #expect(line.hasPrefix("{\"detail\":\"hello \\\"world\\\"\",\"event\":\"received\",\"source\":\"app\",\"time\":\""))
        let entry = try #require(try capture.entries().first)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let time = try #require(formatter.date(from: entry.time))
        #expect(abs(time.timeIntervalSinceNow) < 60)
    }

    @Test("text lines are time, event and detail separated by spaces")
    func textLines() throws {
        let capture = Capture(.text)
        capture.log.log("ready", detail: "127.0.0.1")
        capture.log.log("reconnect-stopped")
        let lines = capture.lines.values
        #expect(lines.count == 2)
        #expect(lines[0].hasSuffix("Z ready 127.0.0.1"))
        #expect(lines[1].hasSuffix("Z reconnect-stopped"))
    }

    @Test("a stream's disconnects are told apart: accidental after ready, a failed attempt, intentional, refused")
    func streamEvents() throws {
        let capture = Capture(.json)
        let stream = ScriptedStream(host: "127.0.0.1")
        let token = capture.log.observe(stream)
        defer { token.cancel() }

        stream.connect()
        stream.drop("connection reset")
        stream.behaviour = .fail
        stream.connect()
        stream.behaviour = .succeed
        stream.connect()
        stream.disconnect()
        stream.behaviour = .refuse("conflict")
        stream.connect()

        let logged = try capture.entries().map { Self.plain("\($0.event): \($0.detail)") }
        #expect(logged == [
            "connecting: 127.0.0.1", "opened: 127.0.0.1", "ready: 127.0.0.1",
            "disconnected: accidental: connection reset",
            "connecting: 127.0.0.1", "disconnected: attempt failed: connection refused",
            "connecting: 127.0.0.1", "opened: 127.0.0.1", "ready: 127.0.0.1",
            "disconnecting: told to disconnect", "disconnected: intentional",
            "connecting: 127.0.0.1", "refused: conflict", "disconnected: refused: conflict",
        ])
        #expect(try capture.entries().allSatisfy { $0.source == "stream" })
    }

    @Test("a reconnector's process is logged in order, after the stream event that caused it")
    func reconnectorEvents() throws {
        let capture = Capture(.text)
        let clock = ManualClock()
        let stream = ScriptedStream(host: "198.51.100.7")
        let reconnector = Reconnector(scheduler: clock)
        reconnector.activate(stream)
        let tokens = [capture.log.observe(stream), capture.log.observe(reconnector)]
        defer { tokens.forEach { $0.cancel() } }

        stream.connect()
        stream.drop()
        clock.advance(by: .seconds(2))

        let logged = capture.lines.values.map { Self.plain($0.split(separator: " ", maxSplits: 1).last.map(String.init) ?? "") }
        #expect(logged == [
            "connecting 198.51.100.7", "opened 198.51.100.7", "ready 198.51.100.7",
            "disconnected accidental: connection reset",
            "accidental-disconnect flags []", "reconnect-scheduled attempt 1 in 2000 ms",
            "reconnect-attempt attempt 1 (timer)",
            "connecting 198.51.100.7", "opened 198.51.100.7", "ready 198.51.100.7",
            "reconnected after 1 attempt",
        ])
    }

    @Test(
        "reconnector events get kebab-case names and readable details",
        arguments: [
            (ReconnectEvent.accidentalDisconnect(flags: [.reachable]), "accidental-disconnect", "flags [reachable]"),
            (.scheduled(attempt: 3, delay: .milliseconds(1500)), "reconnect-scheduled", "attempt 3 in 1500 ms"),
            (.waitingForReachability(attempt: 2), "waiting-for-reachability", "attempt 2 when the host is reachable"),
            (.attemptStarted(attempt: 2, trigger: .reachability), "reconnect-attempt", "attempt 2 (reachability)"),
            (.vetoed(attempt: 4), "reconnect-vetoed", "attempt 4"),
            (.attemptTimedOut(attempt: 1), "reconnect-timed-out", "attempt 1"),
            (.succeeded(attempts: 3), "reconnected", "after 3 attempts"),
            (.stopped, "reconnect-stopped", ""),
            (.refused(reason: "conflict"), "reconnect-refused", "conflict"),
            (.verifyingConnection(flags: [.reachable, .isDirect]), "verifying-connection", "path changed, flags [reachable, isDirect]"),
        ]
    )
    func names(event: ReconnectEvent, name: String, detail: String) {
        let described = EventLog.describe(event)
        #expect(described.event == name)
        #expect(described.detail == detail)
    }
}
