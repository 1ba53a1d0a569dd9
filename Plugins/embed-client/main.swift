// The EmbedClient plugin's tool: `embed-client PACKAGE_JSON OUTPUT SOURCES` writes a Swift
// file that gives `ClientModule` the client's version and the text of each `*.js` file of the
// folder SOURCES; `embed-client --console OUTPUT SOURCES` gives `ConsolePage` the `*.html`,
// `*.css` and `*.js` files of the operator's console in SOURCES.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: embed-client PACKAGE_JSON OUTPUT SOURCES | embed-client --console OUTPUT SOURCES\n".utf8))
    exit(64)
}
let output = URL(fileURLWithPath: arguments[1])
let sources = URL(fileURLWithPath: arguments[2])

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("embed-client: \(message)\n".utf8))
    exit(1)
}

/// A Swift string literal of `text`: a raw literal with a delimiter the text does not hold
/// (searched byte by byte: a combining mark after `#` must not hide it), carriage returns and
/// other control characters but tab and newline written as escapes.
func literal(_ text: String) -> String {
    let bytes = Array(text.utf8)
    func holds(_ needle: String) -> Bool {
        let pattern = Array(needle.utf8)
        guard bytes.count >= pattern.count else { return false }
        return (0...(bytes.count - pattern.count)).contains { Array(bytes[$0..<($0 + pattern.count)]) == pattern }
    }
    var hashes = "#"
    while holds("\"" + hashes) || holds("\\" + hashes) { hashes += "#" }
    let escaped = text.unicodeScalars.map { scalar -> String in
        let value = scalar.value
        if value == 0x09 || value == 0x0A || (value >= 0x20 && value != 0x7F) { return String(scalar) }
        return "\\\(hashes)u{\(String(value, radix: 16))}"
    }.joined()
    return "\(hashes)\"\"\"\n\(escaped)\n\"\"\"\(hashes)"
}

/// The files of SOURCES with one of `extensions`, by name; each name checked servable.
func files(withExtensions extensions: Set<String>) -> [URL] {
    let found = ((try? FileManager.default.contentsOfDirectory(at: sources, includingPropertiesForKeys: nil)) ?? [])
        .filter { extensions.contains($0.pathExtension) }
        .sorted { $0.lastPathComponent < $1.lastPathComponent }
    for file in found where !file.lastPathComponent.utf8.allSatisfy({ $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) }) {
        fail("\(file.lastPathComponent): a served file's name is lower-case letters, digits, '.', '-' and '_'")
    }
    return found
}

/// `"name": literal,` lines for `found`.
func entries(_ found: [URL]) -> String {
    found.map { file in
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { fail("cannot read \(file.path) as UTF-8") }
        return "        \"\(file.lastPathComponent)\": \(literal(text)),\n"
    }.joined()
}

let swift: String
if arguments[0] == "--console" {
    let found = files(withExtensions: ["html", "css", "js"])
    guard found.contains(where: { $0.lastPathComponent == "index.html" }) else { fail("no index.html in \(sources.path)") }
    swift = """
    // Written at build time by the EmbedClient plugin from Clients/console.

    extension ConsolePage {
        /// The console's files by name, as in `Clients/console`.
        static let files: [String: String] = [
    \(entries(found))    ]
    }

    """
} else {
    let manifest = URL(fileURLWithPath: arguments[0])
    guard let package = try? JSONSerialization.jsonObject(with: Data(contentsOf: manifest)) as? [String: Any],
          let version = package["version"] as? String,
          !version.isEmpty, version.allSatisfy({ $0.isLetter || $0.isNumber || ".+-".contains($0) }) else {
        fail("no version of letters, digits, '.', '+' and '-' in \(manifest.path)")
    }
    let scripts = files(withExtensions: ["js"])
    guard !scripts.isEmpty else { fail("no .js file in \(sources.path)") }
    swift = """
    // Written at build time by the EmbedClient plugin from Clients/javascript/src.

    extension ClientModule {
        /// The client's version (`Clients/javascript/package.json`).
        public static let version = "\(version)"

        /// The client's ES modules by file name, as in `Clients/javascript/src`.
        static let files: [String: String] = [
    \(entries(scripts))    ]
    }

    """
}
do {
    try Data(swift.utf8).write(to: output, options: .atomic)
} catch {
    fail("cannot write \(output.path): \(error)")
}
