import Foundation
import Testing

/// The "Coming from XMPPFramework" article's table (Sources/Reconnect/Reconnect.docc) covers every member of the seed header: its
/// defines, properties, methods and both delegate methods, read from docs/seeds/ itself.
@Suite("The XMPPReconnect migration table")
struct XMPPReconnectReadmeTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The member names the header declares, as the article writes them.
    static func headerMembers() throws -> [String] {
        let header = try String(contentsOf: root.appendingPathComponent("docs/seeds/XMPPReconnect.h.txt"), encoding: .utf8)
        var members: [String] = []
        for line in header.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.hasPrefix("#define DEFAULT_"), let name = line.split(separator: " ").dropFirst().first {
                members.append(String(name))
            } else if line.hasPrefix("@property"), let name = line.split(separator: " ").last {
                members.append(String(name.trimmingCharacters(in: CharacterSet(charactersIn: ";*"))))
            } else if line.hasPrefix("- (void)") || line.hasPrefix("- (BOOL)") {
                // `- (void)stop;` → `stop`; `- (BOOL)xmppReconnect:(…)sender shouldAttemptAutoReconnect:(…)flags;`
                // → `xmppReconnect:shouldAttemptAutoReconnect:`.
                let signature = line.dropFirst(8)
                let parts = signature.split(separator: " ").compactMap { part -> String? in
                    guard let colon = part.firstIndex(of: ":") else { return nil }
                    let keyword = part[..<colon].split(separator: ")").last.map(String.init) ?? ""
                    return keyword.isEmpty ? nil : keyword + ":"
                }
                members.append(parts.isEmpty ? String(signature.prefix { $0 != ";" }) : parts.joined())
            }
        }
        return Array(Set(members)).sorted()
    }

    @Test("every define, property, method and delegate method of XMPPReconnect.h is in the \"Coming from XMPPFramework\" article's table")
    func everyMemberIsMapped() throws {
        let members = try Self.headerMembers()
        #expect(members.count >= 10, "read \(members)")
        let article = try String(contentsOf: Self.root.appendingPathComponent("Sources/Reconnect/Reconnect.docc/ComingFromXMPPFramework.md"), encoding: .utf8)
        guard let start = article.range(of: "# Coming from XMPPFramework") else {
            Issue.record("no migration article")
            return
        }
        let section = article[start.upperBound...].prefix(8000)
        for member in members {
            #expect(section.contains("`\(member)") || section.contains("`-\(member)"), "\(member) is not in the article's table")
        }
        #expect(members.contains("usesOldSchoolSecureConnect") && members.contains("xmppReconnect:shouldAttemptAutoReconnect:"))
    }
}
