import Foundation
import RealtimeProtocol

/// The command line of `room-backend`, parsed without side effects.
///
/// ```
/// room-backend --port P --app-id ID --app-key KEY --app-secret SECRET [--encryption-master-key BASE64]
///              --room 'PATTERN[,history=N][,span=S][,presence][,public][,max=N][,members-send][,webhook][,sealed][,owner=PARAM]'... [--host H]
/// ```
struct RoomBackendOptions: Equatable {
    struct Room: Equatable {
        var pattern: String
        var rule: RoomRule
        /// The pattern's parameter that must equal the user's id (`owner=user` on `inbox:{user}`),
        /// so the sample can answer `forbidden` as an app's authorizer does; `nil` admits every user.
        var owner: String? = nil
    }

    var host = "127.0.0.1"
    var port: UInt16 = 0
    var appID = ""
    var appKey = ""
    var appSecret = ""
    /// The app's encryption master key (32 bytes), which sealed rooms' keys derive from.
    var encryptionMasterKey: [UInt8]?
    var rooms: [Room] = []

    static let usage = """
        usage: room-backend --app-id ID --app-key KEY --app-secret SECRET --room SPEC... [--host H] [--port P]
                            [--encryption-master-key BASE64]
          --room SPEC   PATTERN[,history=N][,span=S][,presence][,public][,max=N][,members-send][,webhook][,sealed][,owner=PARAM],
                        e.g. 'order:{id},history=20'; owner=PARAM admits only the user whose id is the room's PARAM
                        ('inbox:{user},owner=user'): anyone else is answered forbidden
          --encryption-master-key BASE64   32 bytes, base64: sealed rooms' keys derive from it (needed for sealed)
          --port P      TCP port, 0 for a free one (0); the bound port is printed as "port N" on stdout
          --host H      address to bind (127.0.0.1)
        POST /rooms/auth {"rooms": [...]} with header X-User: ID answers per room; GET /config gives the public grants.
        A sample: every user named by X-User is allowed on every declared pattern without owner=.
        """

    init(arguments: [String]) throws(RoomBackendOptionsError) {
        var index = 0
        func value() throws(RoomBackendOptionsError) -> String {
            guard index + 1 < arguments.count else { throw .invalid("\(arguments[index]) needs a value") }
            index += 1
            return arguments[index]
        }
        while index < arguments.count {
            switch arguments[index] {
            case "--help", "-h": throw .helpRequested
            case "--host": host = try value()
            case "--port":
                guard let port = UInt16(try value()) else { throw .invalid("--port must be 0…65535") }
                self.port = port
            case "--app-id": appID = try value()
            case "--app-key": appKey = try value()
            case "--app-secret": appSecret = try value()
            case "--encryption-master-key":
                guard let key = Data(base64Encoded: try value()), key.count == 32 else { throw .invalid("--encryption-master-key must be 32 bytes in base64") }
                encryptionMasterKey = Array(key)
            case "--room": rooms.append(try Self.room(try value()))
            default: throw .invalid("unknown option \(arguments[index])")
            }
            index += 1
        }
        guard !appID.isEmpty, !appKey.isEmpty, !appSecret.isEmpty else { throw .invalid("--app-id, --app-key and --app-secret are needed") }
        guard !rooms.isEmpty else { throw .invalid("declare at least one --room") }
        guard encryptionMasterKey != nil || !rooms.contains(where: \.rule.sealed) else { throw .invalid("a sealed room needs --encryption-master-key") }
    }

    static func room(_ spec: String) throws(RoomBackendOptionsError) -> Room {
        let parts = spec.split(separator: ",").map(String.init)
        guard let pattern = parts.first, RoomName.isValidPattern(pattern) else { throw .invalid("--room \(spec): invalid pattern") }
        var rule = RoomRule()
        var owner: String?
        for part in parts.dropFirst() {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            switch (pair[0], pair.count == 2 ? Int(pair[1]) : nil) {
            case ("history", let count?): rule.history = count
            case ("span", let seconds?): rule.span = seconds
            case ("max", let count?): rule.maxMembers = count
            case ("presence", nil) where pair.count == 1: rule.presence = true
            case ("public", nil) where pair.count == 1: rule.isPublic = true
            case ("members-send", nil) where pair.count == 1: rule.membersSend = true
            case ("webhook", nil) where pair.count == 1: rule.webhook = true
            case ("sealed", nil) where pair.count == 1: rule.sealed = true
            case ("owner", nil) where pair.count == 2 && pattern.contains("{\(pair[1])}"): owner = pair[1]
            default: throw .invalid("--room \(spec): unknown setting \(part)")
            }
        }
        guard rule.isValid else { throw .invalid("--room \(spec): history 0…1000, span 1…1800, max ≥ 1") }
        return Room(pattern: pattern, rule: rule, owner: owner)
    }
}

enum RoomBackendOptionsError: Error, CustomStringConvertible {
    case helpRequested
    case invalid(String)

    var description: String {
        switch self {
        case .helpRequested: return RoomBackendOptions.usage
        case .invalid(let text): return text
        }
    }
}
