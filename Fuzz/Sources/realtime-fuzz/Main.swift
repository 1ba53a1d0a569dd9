import Glibc

/// libFuzzer's entry for a program with its own `main` (LLVM's `FuzzerInterface.h`): it parses
/// libFuzzer's flags from `argv`, then calls `callback` with each input; flags starting with
/// `--` are left to the program (libFuzzer's documentation, "Options").
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
                     _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

/// One parser of peer input, driven with arbitrary bytes. `run` traps (`fatalError`) when an
/// invariant does not hold: libFuzzer reports the trap and keeps the input.
struct FuzzTarget: Sendable {
    /// The name given with `--target=NAME` (also the corpus directory's name).
    let name: String
    /// What reaches this parser from a peer, for `--list`.
    let summary: String
    let run: @Sendable (UnsafeBufferPointer<UInt8>) -> Void
}

/// Every target, by name.
let fuzzTargets: [FuzzTarget] = [
    protocolMessageTarget, strictJSONTarget, jsonValueTarget, presenceMemberTarget, tokensTarget,
    clientFramesTarget, serverFramesTarget, httpAPITarget, fanoutTarget, webSocketFramesTarget,
]

/// The target of this process, chosen once before libFuzzer starts.
nonisolated(unsafe) var selectedTarget: FuzzTarget?

/// `realtime-fuzz --target=NAME [libFuzzer flags] [corpus dirs or files]`; `--list` prints the
/// targets. Built only by `scripts/fuzz` (instrumented, AddressSanitizer, libFuzzer linked).
@main
enum RealtimeFuzz {
    static func main() {
        let arguments = CommandLine.arguments
        if arguments.contains("--list") {
            for target in fuzzTargets { print("\(target.name)\t\(target.summary)") }
            return
        }
        guard let name = arguments.first(where: { $0.hasPrefix("--target=") })?.dropFirst("--target=".count),
              let target = fuzzTargets.first(where: { $0.name == name }) else {
            let usage = "usage: realtime-fuzz --target=NAME [libFuzzer flags] [corpus…]; targets: \(fuzzTargets.map(\.name).joined(separator: " "))\n"
            _ = usage.withCString { write(2, $0, strlen($0)) }
            exit(2)
        }
        selectedTarget = target
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runFuzzerDriver(&argc, &argv) { start, count in
            // libFuzzer passes a null pointer for the empty input.
            let bytes = UnsafeBufferPointer(start: count == 0 ? nil : start, count: count)
            selectedTarget?.run(bytes)
            return 0
        })
    }
}

/// Reads a fuzz input as a sequence of choices and byte strings (the structure-aware targets).
struct FuzzReader {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    var isAtEnd: Bool { index >= bytes.count }

    /// The next byte, or 0 past the end.
    mutating func byte() -> UInt8 {
        guard index < bytes.count else { return 0 }
        defer { index += 1 }
        return bytes[index]
    }

    /// The bytes up to the next 0xFF (a byte never found in UTF-8) or the end, the 0xFF skipped.
    mutating func chunk() -> ArraySlice<UInt8> {
        let start = index
        while index < bytes.count, bytes[index] != 0xFF { index += 1 }
        let chunk = Array(bytes[start..<index])[...]
        if index < bytes.count { index += 1 }
        return chunk
    }

    /// `chunk()` as text (invalid UTF-8 repaired: peers' text arrives validated by the WebSocket layer).
    mutating func text() -> String { String(decoding: chunk(), as: UTF8.self) }
}

/// Stops the run with the failed invariant (libFuzzer reports it as a crash and keeps the input).
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("invariant failed: \(message())") }
}
