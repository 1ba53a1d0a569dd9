import Foundation
import RealtimeProtocol
import Spawn
import SystemSupport

/// One client of the run: a `realtime join … --state FILE --json` process in the lab's local
/// namespace (started again after a restart fault, with the same file), and the check of every
/// room event it prints, as it prints it, across its processes.
///
/// The check: in each room, ids come from 1 and grow by one per kept event (one epoch, one
/// stream: docs/rooms-protocol.md), so each delivery must be the previous id + 1. An id seen
/// before is a duplicate; one lower than the highest seen but never seen is out of order; a
/// jump forward is a hole (lost, unless the missing ids come later, out of order). What is
/// lost is counted at the end against the last id each room kept.
final class ChaosClient: Sendable {
    /// What one room delivered to this client.
    struct RoomRecord: Sendable {
        /// Every id delivered (in the one epoch of the run).
        var delivered: Set<UInt64> = []
        /// The highest id delivered.
        var last: UInt64 = 0
        /// The highest id with every id from 1 up to it delivered.
        var contiguous: UInt64 = 0
        /// Deliveries, replayed ones included.
        var count = 0
        /// Deliveries marked `meta.replayed`.
        var replayed = 0
        /// Deliveries of an id delivered before.
        var duplicated = 0
        /// Deliveries of an id delivered before, by a restarted process at its start, up to
        /// what the killed one printed: `join --state` prints at least once across a SIGKILL
        /// (the position is saved after the line), so these are counted apart.
        var printedAgain = 0
        /// While a restarted process has not yet printed past it: the highest id the killed
        /// one printed (0 otherwise).
        var restartFloor: UInt64 = 0
        /// Deliveries of an id below `last` not delivered before.
        var reordered = 0
        /// The epochs the room was joined at (one expected: Redis keeps its data).
        var epochs: Set<String> = []
        /// `joined` lines (the first join and every rejoin).
        var joins = 0
        /// `joined` lines with `recovered: false` after the first.
        var notRecovered = 0
        /// The room's `error` codes, in order (the last 20).
        var errors: [String] = []
    }

    /// Everything the process printed that the run checks.
    struct Record: Sendable {
        var rooms: [String: RoomRecord] = [:]
        /// Channel events (`tick` on the channel), not checked: channels keep no history.
        var channelEvents = 0
        /// Transitions to `connected`.
        var connects = 0
        /// When the last transition to `connected` was printed (nil while not connected).
        var connectedAt: ContinuousClock.Instant?
        /// The socket id of that connection.
        var socketID: String?
        /// Close codes of the `error` lines (the server's close code, 1006 for a drop), in order.
        var closeCodes: [Int] = []
        /// Lines that were not JSON objects.
        var unparsed = 0
    }

    /// Its name (`c0`…), also its user id (`X-User`).
    let name: String
    /// The rooms it joined.
    let rooms: [String]
    /// The veth link it reaches the cluster through (0 or 1).
    let link: Int
    /// Where `join --state` keeps its rooms' positions.
    let stateFile: String
    private let record = Locked(Record())
    private let process = Locked<ChildProcess?>(nil)
    /// How to start its process (again).
    private let launch: @Sendable () throws -> ChildProcess
    /// Processes started so far.
    private let starts = Locked(0)

    /// Starts `realtime join` in the local namespace.
    ///
    /// - Parameters:
    ///   - name: the client's name and user id.
    ///   - rooms: the rooms to join.
    ///   - channel: a public channel to subscribe to.
    ///   - link: the link it uses (for the report).
    ///   - url: the cluster's WebSocket URL as reached over that link.
    ///   - authEndpoint: the room backend's auth route as reached over that link.
    ///   - command: the launcher (`ip netns exec NAME`) and the `realtime` executable.
    ///   - stateFile: the `--state` file, where each room's position is kept across restarts.
    ///   - echo: told each of its state, error, reconnect and room state or error lines (and
    ///     its standard error), prefixed with its name, or nil.
    /// - Throws: `ChildProcessError` when it cannot start.
    init(name: String, rooms: [String], channel: String, link: Int, url: String, authEndpoint: String, command: [String], stateFile: String,
         echo: (@Sendable (String) -> Void)? = nil) throws {
        self.name = name
        self.rooms = rooms
        self.link = link
        self.stateFile = stateFile
        record.withLock { record in for room in rooms { record.rooms[room] = RoomRecord() } }
        let arguments = Array(command.dropFirst()) + ["join", url] + rooms + [
            "--auth-endpoint", authEndpoint, "--header", "X-User: \(name)", "--subscribe", channel, "--state", stateFile, "--json",
        ]
        launch = { [record] in
            try ChildProcess(command[0], arguments, standardOutput: .pipe, standardError: .pipe,
                             onLine: { stream, line in
                                 guard stream == .standardOutput else { return echo?("\(name) stderr: \(line)") ?? () }
                                 record.withLock { Self.take(line, into: &$0, channel: channel) }
                                 if let echo, !line.contains(#""kind":"room","#), !line.contains(#""kind":"event","#) { echo("\(name) \(line)") }
                             })
        }
        try start()
    }

    /// Starts its process; what it prints goes on in the same record.
    private func start() throws {
        let child = try launch()
        process.withLock { $0 = child }
        starts.withLock { $0 += 1 }
    }

    /// Kills its process with SIGKILL (no close frame, nothing saved beyond what it printed),
    /// waits `down`, and starts it again with the same `--state` file: the fault "client
    /// killed and restarted with its saved positions".
    ///
    /// - Throws: `ChildProcessError` when it cannot start again.
    func restart(after down: Duration) throws {
        if let child = process.withLock({ $0 }) {
            child.signal(SIGKILL)
            _ = try? child.waitUntilExit(timeout: .seconds(5))
        }
        record.withLock { record in
            record.connectedAt = nil
            record.socketID = nil
            for (room, entry) in record.rooms { record.rooms[room]?.restartFloor = entry.last }
        }
        Thread.sleep(forTimeInterval: down.seconds)
        try start()
    }

    /// Processes started so far (1, and one more per restart).
    var processesStarted: Int { starts.withLock { $0 } }

    /// Reads one JSON line into the record.
    private static func take(_ line: String, into record: inout Record, channel: String) {
        guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(line.utf8)) else {
            record.unparsed += 1
            return
        }
        let room = object["room"]?.string
        switch object["kind"]?.string {
        case "room":
            // An id that is not a whole number ≥ 0 is never one the room kept: counted as a
            // line that did not parse.
            guard let room, let id = object["meta"]?["id"]?.number.flatMap({ UInt64(exactly: $0) }) else {
                record.unparsed += 1
                return
            }
            var entry = record.rooms[room, default: RoomRecord()]
            entry.count += 1
            if object["meta"]?["replayed"]?.bool == true { entry.replayed += 1 }
            if entry.delivered.contains(id) {
                if id <= entry.restartFloor { entry.printedAgain += 1 } else { entry.duplicated += 1 }
            } else {
                if id > entry.restartFloor { entry.restartFloor = 0 }
                if id < entry.last { entry.reordered += 1 }
                entry.delivered.insert(id)
                entry.last = max(entry.last, id)
                while entry.delivered.contains(entry.contiguous + 1) { entry.contiguous += 1 }
            }
            record.rooms[room] = entry
        case "room-state" where object["event"]?.string == "joined":
            guard let room else { return }
            var entry = record.rooms[room, default: RoomRecord()]
            if let epoch = object["data"]?["epoch"]?.string { entry.epochs.insert(epoch) }
            if entry.joins > 0, object["data"]?["recovered"]?.bool == false { entry.notRecovered += 1 }
            entry.joins += 1
            record.rooms[room] = entry
        case "room-error":
            guard let room else { return }
            let code = object["data"]?["code"]?.string ?? "?"
            record.rooms[room, default: RoomRecord()].errors = Array((record.rooms[room]?.errors ?? []).suffix(19)) + [code]
        case "event" where object["channel"]?.string == channel && object["event"]?.string == "tick":
            record.channelEvents += 1
        case "error":
            if let code = object["code"]?.number.flatMap({ Int(exactly: $0) }) {
                record.closeCodes = Array(record.closeCodes.suffix(99)) + [code]
            }
        case "state":
            if object["current"]?.string == "connected" {
                record.connects += 1
                record.connectedAt = .now
                record.socketID = object["socket"]?.string
            } else {
                record.connectedAt = nil
                record.socketID = nil
            }
        default:
            break
        }
    }

    /// A copy of the record.
    var snapshot: Record { record.withLock { $0 } }

    /// Where the client's connection and rooms were at one moment (before a fault).
    struct Mark: Sendable {
        var connects: Int
        var joins: [String: Int]
        /// The connection's socket id then.
        var socketID: String?
        /// How many close codes it had seen.
        var closeCodes: Int
    }

    /// Its connection count and every room's join count now.
    var mark: Mark {
        record.withLock { record in
            Mark(connects: record.connects, joins: record.rooms.mapValues(\.joins), socketID: record.socketID, closeCodes: record.closeCodes.count)
        }
    }

    /// The close codes seen since `mark`.
    func closeCodes(since mark: Mark) -> [Int] {
        record.withLock { record in Array(record.closeCodes.suffix(max(0, record.closeCodes.count - mark.closeCodes))) }
    }

    /// Whether each of its rooms has delivered every id from 1 up to the room's target.
    func hasCaughtUp(to targets: [String: UInt64]) -> Bool {
        record.withLock { record in
            rooms.allSatisfy { room in (record.rooms[room]?.contiguous ?? 0) >= (targets[room] ?? 0) }
        }
    }

    /// Whether the client is connected, each room has delivered every id up to its target,
    /// and, if the connection went down since `mark`, every room has been joined again since.
    func hasRecovered(since mark: Mark, to targets: [String: UInt64]) -> Bool {
        record.withLock { record in
            guard record.connectedAt != nil else { return false }
            let rejoined = record.connects == mark.connects
                || rooms.allSatisfy { (record.rooms[$0]?.joins ?? 0) > (mark.joins[$0] ?? 0) }
            return rejoined && rooms.allSatisfy { room in (record.rooms[room]?.contiguous ?? 0) >= (targets[room] ?? 0) }
        }
    }

    /// How long its current connection has been up (nil while not connected).
    var connectedFor: Duration? { record.withLock { $0.connectedAt.map { .now - $0 } } }

    /// Sends a signal to the process (`SIGSTOP`, `SIGCONT`, `SIGTERM`).
    @discardableResult
    func signal(_ number: Int32) -> Bool { process.withLock { $0 }?.signal(number) ?? false }

    /// Whether the process still runs.
    var isRunning: Bool { process.withLock { $0?.isRunning ?? false } }

    /// Its last lines on standard error and output, for a failure report.
    var lastLines: String {
        guard let child = process.withLock({ $0 }) else { return "" }
        return (child.outputLines.suffix(8) + child.errorLines.suffix(8)).joined(separator: "\n    ")
    }

    /// Ends the process: SIGTERM (it disconnects with 1000), SIGKILL after 2 s.
    func stop() {
        guard let child = process.withLock({ process in defer { process = nil }; return process }) else { return }
        child.signal(SIGCONT)
        child.signal(SIGTERM)
        if (try? child.waitUntilExit(timeout: .seconds(2))) == nil {
            child.signal(SIGKILL)
            _ = try? child.waitUntilExit(timeout: .seconds(5))
        }
    }
}
