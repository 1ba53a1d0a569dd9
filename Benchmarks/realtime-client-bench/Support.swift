import Dispatch
import Foundation
import WebSocket

/// Why a measurement could not be completed.
struct BenchFailure: Error, CustomStringConvertible {
    /// What went wrong, for the error line on stderr.
    var description: String

    /// Creates a failure.
    ///
    /// - Parameter description: what went wrong.
    init(_ description: String) { self.description = description }
}

/// Writes a progress line to stderr (the tables go to stdout).
///
/// - Parameter line: the text, without its newline.
func progress(_ line: String) {
    FileHandle.standardError.write(Data("\(line)\n".utf8))
}

extension Duration {
    /// The duration in milliseconds, as a `Double`.
    var milliseconds: Double {
        Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
    }
}

/// The middle value of sorted `values` (the upper one of the two middles for an even count).
///
/// - Parameter values: the values, sorted ascending; not empty.
/// - Returns: the median.
func median<T>(_ values: [T]) -> T { values[values.count / 2] }

/// The raw clients' context: the same 64 KiB reads as `BirdRealtime`'s, so that both take the
/// firehose's stream alike.
let rawClientContextOptions = WebSocketContext.Options(readBufferSize: 64 << 10)
