// The EmbedClient plugin's tool: `embed-client PACKAGE_JSON OUTPUT FILE.js…` writes a Swift
// file that gives `ClientModule` the client's version and each file's text.
import Foundation

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: embed-client PACKAGE_JSON OUTPUT FILE.js…\n".utf8))
    exit(64)
}
let manifest = URL(fileURLWithPath: arguments[arguments.startIndex])
let output = URL(fileURLWithPath: arguments[arguments.startIndex + 1])
let scripts = arguments.dropFirst(2).map { URL(fileURLWithPath: $0) }

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("embed-client: \(message)\n".utf8))
    exit(1)
}

guard let package = try? JSONSerialization.jsonObject(with: Data(contentsOf: manifest)) as? [String: Any],
      let version = package["version"] as? String,
      !version.isEmpty, version.allSatisfy({ $0.isLetter || $0.isNumber || ".+-".contains($0) }) else {
    fail("no version of letters, digits, '.', '+' and '-' in \(manifest.path)")
}

/// A Swift string literal of `text`: a raw literal with a delimiter the text does not hold.
func literal(_ text: String) -> String {
    var hashes = "#"
    while text.contains("\"" + hashes) || text.contains("\\" + hashes) { hashes += "#" }
    let escaped = text.unicodeScalars.map { scalar -> String in
        scalar == "\r" ? "\\\(hashes)r" : String(scalar)
    }.joined()
    return "\(hashes)\"\"\"\n\(escaped)\n\"\"\"\(hashes)"
}

var swift = """
// Written at build time by the EmbedClient plugin from Clients/javascript/src.

extension ClientModule {
    /// The client's version (`Clients/javascript/package.json`).
    public static let version = "\(version)"

    /// The client's ES modules by file name, as in `Clients/javascript/src`.
    static let files: [String: String] = [

"""
for script in scripts {
    guard let text = try? String(contentsOf: script, encoding: .utf8) else { fail("cannot read \(script.path) as UTF-8") }
    swift += "        \"\(script.lastPathComponent)\": \(literal(text)),\n"
}
swift += "    ]\n}\n"
do {
    try Data(swift.utf8).write(to: output, options: .atomic)
} catch {
    fail("cannot write \(output.path): \(error)")
}
