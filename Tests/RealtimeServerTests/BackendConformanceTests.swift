import Foundation
import RealtimeBackend
import Testing

/// The backends' conformance suite (issue 33), Swift's side: `RealtimeBackend` computes the
/// outputs of `Backends/conformance/cases.json`, which must equal `expected.json` byte for byte
/// (each answer as its exact JSON text). The Node, PHP and Python libraries compare their own
/// outputs with the same file. `CONFORMANCE_WRITE=1` rewrites expected.json from this
/// reference (then review its diff: every other backend must follow).
@Suite struct BackendConformanceTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Backends/conformance").standardizedFileURL

    static func load(_ name: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(contentsOf: folder.appendingPathComponent(name)))
    }

    /// A rule's options (the protocol's keys) as `RealtimeBackend.room` takes them.
    static func declare(_ backend: RealtimeBackend, _ pattern: String, _ options: JSONValue, deny: JSONValue?) throws(RealtimeBackend.RuleError) {
        let denied = (deny?.object ?? [:]).mapValues { Set(($0.array ?? []).compactMap(\.string)) }
        let int = { (key: String) in options[key]?.number.map { Int($0) } }
        try backend.room(pattern, history: int("history") ?? 0, span: .seconds(int("span") ?? RoomRule.maxSpan),
                         presence: options["presence"]?.bool ?? false, maxMembers: int("max"),
                         membersSend: options["members_send"]?.bool ?? false, webhook: options["webhook"]?.bool ?? false,
                         sealed: options["sealed"]?.bool ?? false, isPublic: options["public"]?.bool ?? false,
                         authorize: denied.isEmpty ? nil : { @Sendable _, parameters in
                             !denied.contains { key, values in parameters[key].map(values.contains) ?? false }
                         })
    }

    static func text(_ value: some Encodable) throws -> JSONValue { .string(try RealtimeMessage.jsonText(value)) }

    /// Every output of the cases, as expected.json holds them.
    static func outputs() async throws -> JSONValue {
        let cases = try load("cases.json")
        let app = try #require(cases["app"])
        let masterKey = try #require(Data(base64Encoded: app["master_key"]?.string ?? "")).map { $0 }
        let now = Int64(try #require(cases["now_ms"]?.number))
        func backend() -> RealtimeBackend {
            RealtimeBackend(appKey: app["key"]?.string ?? "", appSecret: app["secret"]?.string ?? "", encryptionMasterKey: masterKey,
                            wallClock: { now })
        }
        var out: [String: JSONValue] = [:]

        // Canonical JSON: numbers in every range, escapes, key order beyond ASCII.
        out["canonical"] = .array(try (cases["canonical"]?.array ?? []).map { try text($0) })
        // A native integer is written as the double that holds it exactly, or refused: Swift's
        // numbers are doubles, so its side is the double of each, when there is one.
        out["canonical_integers"] = .array(try (cases["canonical_integers"]?.array ?? []).map { item in
            guard let integer = Int64(item.string ?? ""), let double = Double(exactly: integer) else { return .string("refused") }
            return try text(JSONValue.number(double))
        })

        out["matches"] = .array((cases["matches"]?.array ?? []).map { item in
            let params = RoomName.match(item["name"]?.string ?? "", pattern: item["pattern"]?.string ?? "")
            return .object(["pattern": item["pattern"] ?? .null, "name": item["name"] ?? .null,
                            "params": params.map { .object($0.mapValues(JSONValue.string)) } ?? .null])
        })

        var valid: [JSONValue] = []
        for item in cases["rules"]?["valid"]?.array ?? [] {
            let declared = backend()
            try declare(declared, item["pattern"]?.string ?? "", item["options"] ?? .object([:]), deny: nil)
            let rule = try #require(declared.rule(for: item["pattern"]?.string?.replacingOccurrences(of: "{", with: "").replacingOccurrences(of: "}", with: "") ?? ""))
            valid.append(.object(["pattern": item["pattern"] ?? .null, "options": item["options"] ?? .null, "rule": try text(rule.rule.rule)]))
        }
        var invalid: [JSONValue] = []
        for item in cases["rules"]?["invalid"]?.array ?? [] {
            do {
                try declare(backend(), item["pattern"]?.string ?? "", item["options"] ?? .object([:]), deny: nil)
                invalid.append(.object(["pattern": item["pattern"] ?? .null, "options": item["options"] ?? .null, "error": .null]))
            } catch {
                invalid.append(.object(["pattern": item["pattern"] ?? .null, "options": item["options"] ?? .null, "error": .string(error.code)]))
            }
        }
        out["rules"] = .object(["valid": .array(valid), "invalid": .array(invalid)])

        // Public rules: which pairs of patterns share a name, and which declarations are refused.
        out["overlaps"] = .array((cases["overlaps"]?.array ?? []).map { item in
            .object(["a": item["a"] ?? .null, "b": item["b"] ?? .null,
                     "overlap": .bool(RoomName.patternsOverlap(item["a"]?.string ?? "", item["b"]?.string ?? ""))])
        })
        out["declarations"] = .array((cases["declarations"]?["sequences"]?.array ?? []).map { sequence in
            let declared = backend()
            return .array((sequence.array ?? []).map { item in
                do throws(RealtimeBackend.RuleError) {
                    try declare(declared, item["pattern"]?.string ?? "", item["options"] ?? .object([:]), deny: item["deny"])
                    return .string("ok")
                } catch {
                    return .string(error.code)
                }
            })
        })

        let rooms = backend()
        for rule in cases["backend"]?["rules"]?.array ?? [] {
            try declare(rooms, rule["pattern"]?.string ?? "", rule["options"] ?? .object([:]), deny: rule["deny"])
        }
        var auth: [JSONValue] = []
        for item in cases["auth"]?.array ?? [] {
            let names = (item["rooms"]?.array ?? []).compactMap(\.string)
            let info = item["info"].flatMap { $0 == .null ? nil : $0 }
            let answer = await rooms.authorizeRooms(names, user: item["user"]?.string, info: info)
            auth.append(.object(["rooms": item["rooms"] ?? .null, "user": item["user"] ?? .null, "info": item["info"] ?? .null,
                                 "answer": try text(answer)]))
        }
        out["auth"] = .array(auth)
        let over = try #require(cases["auth_over_limit"])
        let overNames = (0..<Int(over["count"]?.number ?? 0)).map { "\(over["prefix"]?.string ?? "")\($0)" }
        let overAnswer = await rooms.authorizeRooms(overNames, user: over["user"]?.string)
        out["auth_over_limit"] = .object(["bad_request": .array(overNames.filter { overAnswer.rooms[$0]?.error == .badRequest }.map(JSONValue.string)),
                                          "answered": .number(Double(overAnswer.rooms.count))])
        out["config"] = try text(rooms.config())

        var channels: [JSONValue] = []
        for item in cases["channels"]?.array ?? [] {
            let member = item["member"].map { PresenceMember(userID: $0["user_id"]?.string ?? "", userInfo: $0["user_info"]) }
            var entry = item.object ?? [:]
            switch Result(catching: { () throws(AuthorizationSignerError) in
                try rooms.channels.authorizeChannel(socketID: item["socket_id"]?.string ?? "", channel: item["channel"]?.string ?? "", member: member)
            }) {
            case .success(let answer): entry["answer"] = try text(answer)
            case .failure(let error): entry["error"] = .string(error.code)
            }
            channels.append(.object(entry))
        }
        out["channels"] = .array(channels)
        var signins: [JSONValue] = []
        for item in cases["signin"]?.array ?? [] {
            var entry = item.object ?? [:]
            switch Result(catching: { () throws(AuthorizationSignerError) in
                try rooms.channels.authenticateUser(socketID: item["socket_id"]?.string ?? "", userData: item["user_data"]?.string ?? "")
            }) {
            case .success(let answer): entry["answer"] = try text(answer)
            case .failure(let error): entry["error"] = .string(error.code)
            }
            signins.append(.object(entry))
        }
        out["signin"] = .array(signins)
        out["rest"] = .array((cases["rest"]?.array ?? []).map { item in
            let signer = RealtimeBackend(appKey: app["key"]?.string ?? "", appSecret: app["secret"]?.string ?? "",
                                         wallClock: { Int64(item["timestamp"]?.number ?? 0) * 1000 })
            var entry = item.object ?? [:]
            entry["query"] = .string(signer.signedQuery(method: item["method"]?.string ?? "", path: item["path"]?.string ?? "",
                                                        body: Array((item["body"]?.string ?? "").utf8)))
            return .object(entry)
        })
        var bodies: [JSONValue] = []
        for item in cases["room_events"]?.array ?? [] {
            var entry = item.object ?? [:]
            entry["body"] = .string(try rooms.roomEventBody(room: item["room"]?.string ?? "", event: item["event"]?.string ?? "", data: item["data"] ?? .null))
            bodies.append(.object(entry))
        }
        out["room_events"] = .array(bodies)
        out["webhooks"] = .array((cases["webhooks"]?.array ?? []).map { item in
            let original = item["body"]?.string ?? ""
            var signature = Crypto.hex(Crypto.hmacSHA256(key: app["secret"]?.string ?? "", message: original))
            var body = original
            switch item["tamper"]?.string {
            case "signature": signature = String(signature.dropLast()) + (signature.hasSuffix("0") ? "1" : "0")
            case "body": body += " "
            default: break
            }
            var entry: [String: JSONValue] = ["key": item["key"] ?? .null, "body": .string(body), "signature": .string(signature)]
            switch Result(catching: { () throws(RealtimeWebhookError) in
                try rooms.verifyWebhook(key: item["key"]?.string, signature: signature, body: Array(body.utf8))
            }) {
            case .success(let webhook): entry["result"] = (try? text(webhook)) ?? .null
            case .failure(let error): entry["error"] = .string(error.code)
            }
            return .object(entry)
        })
        return .object(out)
    }

    @Test("the names and patterns of cases.json are valid or invalid as listed")
    func namesAndPatterns() throws {
        let cases = try Self.load("cases.json")
        for name in cases["names"]?["valid"]?.array ?? [] { #expect(RoomName.isValid(name.string ?? ""), "\(name)") }
        for name in cases["names"]?["invalid"]?.array ?? [] { #expect(!RoomName.isValid(name.string ?? ""), "\(name)") }
        for pattern in cases["patterns"]?["valid"]?.array ?? [] { #expect(RoomName.isValidPattern(pattern.string ?? ""), "\(pattern)") }
        for pattern in cases["patterns"]?["invalid"]?.array ?? [] { #expect(!RoomName.isValidPattern(pattern.string ?? ""), "\(pattern)") }
    }

    @Test("RealtimeBackend's outputs equal expected.json, section by section, byte for byte", .timeLimit(.minutes(1)))
    func outputsMatch() async throws {
        let outputs = try await Self.outputs()
        let file = Self.folder.appendingPathComponent("expected.json")
        if ProcessInfo.processInfo.environment["CONFORMANCE_WRITE"] == "1" {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try (encoder.encode(outputs) + Data("\n".utf8)).write(to: file)
        }
        let expected = try Self.load("expected.json")
        for (section, value) in outputs.object ?? [:] {
            #expect(expected[section] == value, "section \(section) differs from expected.json")
        }
        #expect(Set(expected.object?.keys.map { $0 } ?? []) == Set(outputs.object?.keys.map { $0 } ?? []))
        // What the suite pins, so a regenerated file that lost a case is seen.
        #expect(outputs["canonical_integers"]?[2] == .string("refused") && outputs["canonical_integers"]?[7] == .string("1e+16"))
        #expect(outputs["overlaps"]?.array?.count == 16 && outputs["declarations"]?[0] == .array([.string("public_authorizer")]))
        #expect(outputs["auth"]?.array?.count == 6 && outputs["webhooks"]?.array?.count == 6 && outputs["canonical"]?.array?.count == 4)
        #expect(outputs["auth_over_limit"]?["bad_request"] == .array([.string("order:100")]))
        #expect(outputs["webhooks"]?[0]?["result"] != nil && outputs["webhooks"]?[1]?["error"] == .string("bad_signature"))
    }
}
