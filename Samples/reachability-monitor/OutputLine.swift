import Foundation
import Reachability

/// One line of output: a host's reachability at a moment.
struct OutputLine: Encodable {
    var time: String
    var event: String
    var host: String
    var reachable: Bool
    var flags: [String]
    var interface: String?
    var gateway: String?
    var source: String?
    var address: String?
    var reason: String?

    init(_ value: HostReachability, event: String, date: Date = Date()) {
        let path = value.primaryPath
        time = Self.formatter.string(from: date)
        self.event = event
        host = value.host.description
        reachable = value.isReachable
        flags = value.flags.names
        interface = path?.interface?.name
        gateway = path?.gateway?.description
        source = path?.sourceAddress?.description
        address = path?.destination.description
        reason = value.reason?.description
    }

    nonisolated(unsafe) static let formatter: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()

    var text: String {
        var line = "\(time) \(host) "
        line += reachable ? "reachable \(flags.joined(separator: ","))" : "not reachable: \(reason ?? "unknown")"
        if let address, address != host { line += " address \(address)" }
        if let interface { line += " dev \(interface)" }
        if let gateway { line += " via \(gateway)" }
        if let source { line += " src \(source)" }
        return line
    }

    /// Writes lines to standard output, flushed at once so pipes see each change immediately.
    struct Printer: Sendable {
        let json: Bool

        func print(_ line: OutputLine) {
            let text: String
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                text = (try? encoder.encode(line)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
            } else {
                text = line.text
            }
            FileHandle.standardOutput.write(Data((text + "\n").utf8))
        }
    }
}
